"""regatta.Model.from_torch(module, example_input) and Model.from_onnx (docs/python.md, "Any model: ONNX and
torch export"): modules built in torch (float64, fixed seeds, small sizes) are exported into memory and
imported as graphs; the double forward must equal torch's float64 forward to 1e-12 and the certified
enclosure must contain it. Two independent computations: torch's own kernels against regatta's graph walk."""
import os
import tempfile

import numpy as np
import pytest

import regatta

torch = pytest.importorskip("torch")
nn = torch.nn

if not regatta._regatta.onnx_available:
    pytest.skip("regatta was built without ONNX import", allow_module_level=True)

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "onnx")


class EncoderClassifier(nn.Module):
    """nn.TransformerEncoder over [1, n, d] tokens, mean pooling, a linear head."""

    def __init__(self, norm_first, activation, d=16, heads=4, ff=24, layers=2, classes=4):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation=activation, batch_first=True,
                                           norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        return self.head(self.encoder(x).mean(dim=1))


class LinearPatchViT(nn.Module):
    """Patches cut by reshape/permute and embedded by nn.Linear, positions, pre-norm blocks with
    nn.MultiheadAttention and a GELU MLP, mean pooling, and NO final LayerNorm before the head."""

    def __init__(self, image=8, patch=4, channels=3, d=12, heads=3, ff=20, depth=2, classes=5):
        super().__init__()
        self.patch = patch
        self.embed = nn.Linear(channels * patch * patch, d)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2, d) * 0.1)
        self.norm1 = nn.ModuleList(nn.LayerNorm(d) for _ in range(depth))
        self.norm2 = nn.ModuleList(nn.LayerNorm(d) for _ in range(depth))
        self.attn = nn.ModuleList(nn.MultiheadAttention(d, heads, batch_first=True) for _ in range(depth))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d)) for _ in range(depth))
        self.head = nn.Linear(d, classes)

    def forward(self, img):
        b, c, h, w = img.shape
        p = self.patch
        x = img.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 1, 3, 5).reshape(b, (h // p) * (w // p), -1)
        x = self.embed(x) + self.pos
        for n1, a, n2, m in zip(self.norm1, self.attn, self.norm2, self.mlp):
            y = n1(x)
            x = x + a(y, y, y, need_weights=False)[0]
            x = x + m(n2(x))
        return self.head(x.mean(dim=1))


class CausalBlock(nn.Module):
    def __init__(self, d, heads, n):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))
        self.heads = heads
        # GPT-2's mask value: the most negative float64 (finite, so the graph's constants stay finite).
        self.register_buffer("bias", torch.tril(torch.ones(n, n)).bool())

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (t.view(b, n, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        s = (q @ k.transpose(-2, -1)) / (d // self.heads) ** 0.5
        s = s.masked_fill(~self.bias, torch.finfo(s.dtype).min)
        y = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, n, d)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """GPT-2 style over token embeddings (the input is the n x d embedding matrix): learned positions, causal
    pre-norm blocks, a final LayerNorm and an untied head: the logits of every position."""

    def __init__(self, n=5, d=12, heads=3, depth=2, vocab=9):
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, n, d) * 0.1)
        self.blocks = nn.Sequential(*(CausalBlock(d, heads, n) for _ in range(depth)))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, x):
        return self.head(self.ln_f(self.blocks(x + self.pos)))


def torchvision_vit():
    tv = pytest.importorskip("torchvision.models")
    model = tv.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=3, hidden_dim=48,
                                 mlp_dim=96, num_classes=10)
    with torch.no_grad():  # torchvision's head starts at zero: random weights make the logits informative
        model.heads.head.weight.normal_(0, 0.2)
        model.heads.head.bias.uniform_(-0.1, 0.1)
    return model, (1, 3, 32, 32)


# The widest certified logit enclosure at the example input (a point): rounding and dependency effects of
# the naive interval forward. Five LayerNorms of width 48, the first of them on torchvision's zero class token
# plus small positions (a row of tiny variance), widen it most (measured 3.5e-3 for torchvision_vit, seed 7;
# at most 2e-8 for the others).
WIDEST = {"torchvision_vit": 1e-2}

CASES = {
    "encoder_prenorm_gelu": lambda: (EncoderClassifier(True, "gelu"), (1, 6, 16)),
    "encoder_prenorm_relu": lambda: (EncoderClassifier(True, "relu"), (1, 6, 16)),
    "encoder_postnorm_gelu": lambda: (EncoderClassifier(False, "gelu"), (1, 6, 16)),
    "encoder_postnorm_relu": lambda: (EncoderClassifier(False, "relu"), (1, 6, 16)),
    "vit_linear_patch_no_final_norm": lambda: (LinearPatchViT(), (1, 3, 8, 8)),
    "gpt_causal_embeddings": lambda: (GPT(), (1, 5, 12)),
    "torchvision_vit": torchvision_vit,
}


def build(name, seed=7):
    torch.manual_seed(seed)
    module, shape = CASES[name]()
    module = module.double().eval()
    return module, torch.randn(*shape, dtype=torch.float64)


@pytest.mark.parametrize("name", sorted(CASES))
def test_logits_equal_torch_float64(name):
    module, x = build(name)
    model = regatta.Model.from_torch(module, x)
    assert isinstance(model, regatta.GraphModel)
    with torch.no_grad():
        reference = module(x).numpy()
    ours = model.logits(x)
    assert ours.shape == reference.shape == model.output_shape
    assert np.abs(reference).max() > 0.1  # not trivially small
    assert np.abs(ours - reference).max() <= 1e-12, (name, np.abs(ours - reference).max())
    enclosure = model.logits_enclosure(x)
    assert len(enclosure) == reference.size == model.classes
    for box, value in zip(enclosure, reference.ravel()):
        assert isinstance(box, regatta.Interval)
        assert box.lower <= value <= box.upper, (name, box, value)
        assert box.width < WIDEST.get(name, 1e-7)  # far below the logits' scale


def test_normalisation_epsilons_are_torchs():
    # ONNX writes LayerNorm's eps = 1e-6 as binary32(1e-6); the export gives the five LayerNorm nodes torch's
    # binary64 value back. With the binary32 value, the logits of this model differ from torch's by 4e-12
    # (the class token's first LayerNorm divides by the root of a tiny variance); with it, by rounding.
    module, x = build("torchvision_vit")
    model = regatta.Model.from_torch(module, x)
    assert model.restored_epsilons == 5
    as_file = regatta.Model.from_onnx(regatta._graph_model.export_bytes(module, x)[0])  # what the file states
    assert as_file.restored_epsilons == 0
    with torch.no_grad():
        reference = module(x).numpy()
        for m in module.modules():
            if isinstance(m, nn.LayerNorm):
                m.eps = float(np.float32(m.eps))
        reference32 = module(x).numpy()
    assert np.abs(model.logits(x) - reference).max() <= 1e-12
    assert np.abs(as_file.logits(x) - reference32).max() <= 1e-12
    assert np.abs(as_file.logits(x) - reference).max() > 1e-12  # the restoration is what makes the 1e-12


def test_batch_norm_epsilon_is_restored():
    torch.manual_seed(3)
    module = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4, eps=1e-3), nn.ReLU(), nn.Linear(4, 3)).double().eval()
    with torch.no_grad():
        module[1].running_var.uniform_(1e-4, 2e-4)  # the epsilon matters: variances of its order
        module[1].running_mean.uniform_(-0.1, 0.1)
    x = torch.randn(1, 6, dtype=torch.float64)
    model = regatta.Model.from_torch(module, x)
    with torch.no_grad():
        reference = module(x).numpy()
    if model.nodes_by_kind.get("batch_norm"):  # the exporter may fold it into the Linear instead
        assert model.restored_epsilons == 1
    assert np.abs(model.logits(x) - reference).max() <= 1e-12


def test_the_nodes_are_listed():
    module, x = build("gpt_causal_embeddings")
    model = regatta.Model.from_torch(module, x)
    assert model.input_shape == (1, 5, 12) and model.output_shape == (1, 5, 9)
    assert model.source == "<torch export of GPT>"
    assert model.opset == 17
    assert len(model.layers) == model.node_count == sum(model.nodes_by_kind.values())
    kinds = [kind for _, kind, _, _ in model.layers]
    assert kinds.count("softmax") == model.nodes_by_kind["softmax"] == 2  # one per block
    assert kinds.count("layer_norm") == 5  # two per block and the final one
    assert model.layers[-1][3] == (1, 5, 9)  # the last node makes the output
    assert "GraphModel" in repr(model) and "GPT" in repr(model)


def test_float32_module_is_exported_from_a_float64_copy():
    module, x = build("vit_linear_patch_no_final_norm")
    single = module.float().train()  # the user's float32 module, in training mode
    model = regatta.Model.from_torch(single, x.float())
    # The user's module is left as it was.
    assert all(p.dtype == torch.float32 for p in single.parameters()) and single.training
    with torch.no_grad():
        reference = single.double().eval()(x).numpy()  # the float64 function of the float32-valued weights
    assert np.abs(model.logits(x) - reference).max() <= 1e-12


def test_nothing_is_written_to_disk(tmp_path, monkeypatch):
    work, scratch = tmp_path / "cwd", tmp_path / "tmp"
    work.mkdir()
    scratch.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    module, x = build("encoder_prenorm_relu")
    regatta.Model.from_torch(module, x)
    assert list(work.iterdir()) == [] and list(scratch.iterdir()) == []


def committed(name):
    return os.path.join(DATA, name + ".onnx"), np.load(os.path.join(DATA, name + ".input.npy")), \
        np.load(os.path.join(DATA, name + ".logits.npy"))


@pytest.mark.parametrize("name", ["vit_torchvision", "gpt_causal", "vit_vnncomp_like"])
def test_from_onnx_file_bytes_and_proto(name):
    path, x, logits = committed(name)
    by_path = regatta.Model.from_onnx(path)
    assert by_path.source == path
    assert np.abs(by_path.logits(x) - logits).max() <= 1e-12
    with open(path, "rb") as f:
        data = f.read()
    by_bytes = regatta.Model.from_onnx(data)
    assert by_bytes.source == "<ONNX bytes>"
    assert np.array_equal(by_bytes.logits(x), by_path.logits(x))
    onnx = pytest.importorskip("onnx")
    by_proto = regatta.GraphModel.from_onnx(onnx.load(path))
    assert np.array_equal(by_proto.logits(x), by_path.logits(x))
    for box, value in zip(by_path.logits_enclosure(x), logits.ravel()):
        assert box.lower <= value <= box.upper


def test_inputs_of_the_graph():
    path, x, logits = committed("vit_torchvision")
    model = regatta.Model.from_onnx(path)
    assert np.array_equal(model.logits(x[0]), model.logits(x))  # the batch axis of 1 may be left out
    assert np.array_equal(model(x), model.logits(x))
    assert np.array_equal(model.logits(x.astype(np.float32)), model.logits(x.astype(np.float32).astype(np.float64)))
    with pytest.raises(regatta.InputError, match=r"^input: has shape \(3, 1024\), the model takes \[1, 3, 32, 32\]"):
        model.logits(x.reshape(3, 1024))  # the right number of entries is not enough
    with pytest.raises(regatta.InputError, match=r"^input: has shape \(1, 32, 32, 3\)"):
        model.logits(x.transpose(0, 2, 3, 1))
    bad = x.copy()
    bad[0, 1, 2, 3] = np.nan
    with pytest.raises(regatta.InputError, match=r"^input: entry .* is not finite"):
        model.logits_enclosure(bad)
    with pytest.raises(regatta.InputError, match="^input: has dtype"):
        model.logits(np.zeros((1, 3, 32, 32), dtype=complex))


class TwoOutputs(nn.Module):
    def forward(self, x):
        return x.relu(), x.tanh()


class Cosine(nn.Module):
    def forward(self, x):
        return torch.cos(x)


class NotExportable(nn.Module):
    def forward(self, x):
        return torch.kthvalue(x, 2, dim=1, keepdim=True)[0]


@pytest.mark.parametrize("call, message", [
    (lambda x: regatta.Model.from_torch(3, x), r"^module: expected a torch.nn.Module, got int$"),
    (lambda x: regatta.Model.from_torch({"w": x}, x), r"^module: expected a torch.nn.Module, got dict$"),
    (lambda x: regatta.Model.from_torch(nn.Linear(4, 2), [[1.0, 2.0, 3.0, 4.0]]),
     r"^from_torch: the second argument must be an example input .* got list$"),
    (lambda x: regatta.GraphModel.from_torch(nn.Linear(4, 2), [[1.0, 2.0, 3.0, 4.0]]),
     r"^example_input: expected a torch tensor or a NumPy array, got list$"),
    (lambda x: regatta.Model.from_torch(nn.Linear(4, 2).double(), torch.zeros(1, 5, dtype=torch.float64)),
     r"^example_input: Linear's forward fails on shape \(1, 5\): "),
    (lambda x: regatta.Model.from_torch(nn.Linear(4, 2), torch.zeros(1, 4, dtype=torch.int64)),
     r"^example_input: has dtype torch.int64; the model's input must be real-valued"),
    (lambda x: regatta.Model.from_torch(nn.Linear(4, 2), torch.full((1, 4), float("nan"))),
     r"^example_input: has entries that are not finite$"),
    (lambda x: regatta.Model.from_torch(nn.Linear(4, 2), torch.zeros(0, 4)), r"^example_input: has shape \(0, 4\)"),
    (lambda x: regatta.Model.from_torch(nn.Linear(4, 2), x, config={"heads": 1}),
     r"^from_torch: give one of an example input and a config, not both$"),
    (lambda x: regatta.Model.from_torch(NotExportable(), x),
     r"^<torch export of NotExportable>: torch.onnx.export failed: .*'aten::kthvalue'"),
    (lambda x: regatta.Model.from_torch(Cosine(), x),
     r"^<torch export of Cosine>: unsupported operator Cos \(node '.*'\)$"),
    (lambda x: regatta.Model.from_torch(TwoOutputs(), x),
     r"^<torch export of TwoOutputs>: the graph has 1 runtime inputs and 2 outputs; a regatta.GraphModel "
     r"takes exactly one of each$"),
    (lambda x: regatta.Model.from_onnx(os.path.join(DATA, "unsupported_cos.onnx")),
     r"unsupported_cos.onnx: unsupported operator Cos \(node 'weird_cos'\)$"),
    (lambda x: regatta.Model.from_onnx(b"not a model"), r"^<ONNX bytes>: not a valid ONNX model"),
    (lambda x: regatta.Model.from_onnx(os.path.join(DATA, "missing.onnx")), r"missing.onnx"),
    (lambda x: regatta.Model.from_onnx(3), r"^model: expected the path of an .onnx file, its bytes or an "
                                           r"onnx.ModelProto, got int$"),
])
def test_errors_are_one_line_input_errors(call, message):
    x = torch.zeros(1, 4, dtype=torch.float64)
    with pytest.raises(regatta.InputError, match=message) as error:
        call(x)
    assert "\n" not in str(error.value)


def test_timm_path_is_chosen_by_a_config():
    # A dict (or path) as the second argument still reads timm's layout: here the state dict of a Linear
    # is not one, and the timm adapter says so (the ONNX path would have accepted the module).
    with pytest.raises(regatta.InputError, match=r"^Linear.state_dict\(\)"):
        regatta.Model.from_torch(nn.Linear(4, 2), {"heads": 1})
    with pytest.raises(regatta.InputError, match=r"^config: missing model config"):
        regatta.Model.from_torch(nn.Linear(4, 2))
