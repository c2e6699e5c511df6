"""regatta.Model on the digits ViT fixture (tests/data/vit_digits: timm layout, trained by train.py) against
torch's float64 logits of the same images saved with it, and its certified logit enclosures against them.
Models from a state dict or a live torch module go through the loader's adapter and must be the file's model
bit for bit. The per-input robustness (Model.robustness, one row of `regatta certify`) takes about 1.3 s per
input here, and its row must be the command line's to the bit."""
import importlib.util
import json
import os
import struct

import numpy as np
import pytest

import regatta
from conftest import EPS

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "vit_digits")


@pytest.fixture(scope="module")
def model():
    return regatta.Model.from_file(os.path.join(FIXTURE, "vit_digits.safetensors"))


@pytest.fixture(scope="module")
def data():
    return dict(np.load(os.path.join(FIXTURE, "test_set.npz")))


def test_logits_match_torch_and_the_enclosures_hold_them(model, data):
    assert model.input_shape == (1, 8, 8) and model.classes == 10
    for image, logits in zip(data["images"][:20], data["logits"][:20]):
        ours = model(image)
        # Chains of <= 10^3 rounded operations through two blocks (tests/operators/model_test.cpp): a few
        # 10^3 eps relative to max(1, |logits|); 16 x 10^3 eps (3.6e-12) with margin, a wrong mapping gives O(1).
        np.testing.assert_allclose(ours, logits, rtol=0, atol=16 * 1000 * EPS * max(1, np.abs(logits).max()))
        enclosure = model.logits_enclosure(image)
        assert all(isinstance(i, regatta.Interval) and t in i and o in i for i, t, o in zip(enclosure, logits, ours))


@pytest.mark.parametrize("call,start", [
    (lambda m: m(np.zeros(63)), "image: has 63 entries, the model takes 1 x 8 x 8 = 64"),
    (lambda m: m(np.full(64, np.nan)), "image"),
    (lambda m: m.robustness(np.zeros(64), 10), "label: 10 is not a class of the model (0..9)"),
    (lambda m: m.robustness(np.zeros(64), 1, tolerance=0), "tolerance: must lie in (0, 1)"),
    (lambda m: m.robustness(np.zeros(64), 1, method="zonotope"), "method: must be 'affine' or 'region'"),
])
def test_bad_input_raises_input_error(model, call, start):
    with pytest.raises(regatta.InputError) as info:
        call(model)
    assert str(info.value).startswith(start), str(info.value)


def test_missing_model_file_is_an_input_error(tmp_path):
    with pytest.raises(regatta.InputError):
        regatta.Model.from_file(tmp_path / "none.safetensors")


def read_safetensors(path):
    """The fixture's float64 safetensors (8-byte header length, JSON header, raw little-endian data), read
    here independently of the library's reader."""
    with open(path, "rb") as f:
        raw = f.read()
    length = struct.unpack("<Q", raw[:8])[0]
    header, base, out = json.loads(raw[8:8 + length]), 8 + length, {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F64"
        begin, end = entry["data_offsets"]
        out[name] = np.frombuffer(raw[base + begin:base + end], dtype="<f8").reshape(entry["shape"])
    return out


@pytest.fixture(scope="module")
def state_dict():
    return read_safetensors(os.path.join(FIXTURE, "vit_digits.safetensors"))


@pytest.fixture(scope="module")
def config():
    with open(os.path.join(FIXTURE, "config.json")) as f:
        return json.load(f)


def same_model(a, b, images):
    for image in images:
        assert np.array_equal(a(image), b(image))
        assert [(float(i.lower), float(i.upper)) for i in a.logits_enclosure(image)] == \
               [(float(i.lower), float(i.upper)) for i in b.logits_enclosure(image)]


def test_model_from_a_state_dict_is_the_file_model(model, data, state_dict, config):
    images = data["images"][:5]
    same_model(regatta.Model.from_state_dict(state_dict, config), model, images)
    same_model(regatta.Model.from_state_dict(state_dict, os.path.join(FIXTURE, "config.json")), model, images)
    # float32 tensors are accepted (widened exactly): the model of the rounded weights, not the file's.
    m32 = regatta.Model.from_state_dict({k: v.astype(np.float32) for k, v in state_dict.items()}, config)
    assert not np.array_equal(m32(images[0]), model(images[0]))


def train_module():
    """tests/data/vit_digits/train.py, imported for its VisionTransformer class (it imports scikit-learn only
    inside main(), to train); torch's default dtype, which the script sets, is restored."""
    torch = pytest.importorskip("torch")
    dtype = torch.get_default_dtype()
    try:
        spec = importlib.util.spec_from_file_location("vit_digits_train", os.path.join(FIXTURE, "train.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        torch.set_default_dtype(dtype)
    return torch, module


def test_model_from_a_live_torch_module_is_the_file_model_and_matches_its_forward(model, data, state_dict, config):
    torch, train = train_module()
    vit = train.VisionTransformer().double().eval()
    vit.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state_dict.items()})
    ours = regatta.Model.from_torch(vit, config)
    assert "VisionTransformer.state_dict()" in repr(ours)
    images = data["images"][:5]
    same_model(ours, model, images)
    with torch.no_grad():
        live = vit(torch.from_numpy(np.ascontiguousarray(images))).numpy()
    for image, logits in zip(images, live):
        # The tolerance of test_logits_match_torch_and_the_enclosures_hold_them (the same computation).
        np.testing.assert_allclose(ours(image), logits, rtol=0, atol=16 * 1000 * EPS * max(1, np.abs(logits).max()))


def without(state_dict, name):
    return {k: v for k, v in state_dict.items() if k != name}


@pytest.mark.parametrize("make,message", [
    (lambda sd, c: regatta.Model.from_state_dict(without(sd, "head.weight"), c),
     "state_dict: missing tensor 'head.weight'"),
    (lambda sd, c: regatta.Model.from_state_dict({**sd, "head.bias": np.zeros(9)}, c),
     "state_dict:head.bias: shape (9,) does not match the expected (10,) (classifier bias)"),
    (lambda sd, c: regatta.Model.from_state_dict({**sd, "head.bias": np.full(10, np.nan)}, c), "state_dict:head.bias"),
    (lambda sd, c: regatta.Model.from_state_dict(without(sd, "patch_embed.proj.weight"), c),
     "state_dict: not a timm ViT layout"),
    (lambda sd, c: regatta.Model.from_state_dict(sd, without(c, "heads")),
     'config: missing "heads" (the names cannot say it)'),
    (lambda sd, c: regatta.Model.from_state_dict(sd, {**c, "depth": 3}),
     'config: "depth": says 3 but the tensors say 2 (blocks.N.attn.qkv.weight)'),
    (lambda sd, c: regatta.Model.from_state_dict(sd, {**c, "layernorm_eps": float("nan")}), "config: is not JSON"),
    (lambda sd, c: regatta.Model.from_state_dict(sd, None), "config: missing model config"),
    (lambda sd, c: regatta.Model.from_state_dict(sd, 4), "config: expected a dict or the path of a JSON file"),
    (lambda sd, c: regatta.Model.from_torch(3, c), "module: expected a torch.nn.Module or a state dict"),
])
def test_bad_state_dicts_and_configs_raise_input_error(state_dict, config, make, message):
    with pytest.raises(regatta.InputError) as info:
        make(state_dict, config)
    assert str(info.value).startswith(message), str(info.value)


def test_robustness_is_the_command_lines_row(model, data, cli, tmp_path):
    """Model.robustness makes the library calls of one row of `regatta certify` with the same defaults, so
    image 0's row must be the command line's to the bit (a wrong default, label or image layout in the
    binding moves it)."""
    out = tmp_path / "row.json"
    cli("certify", "--model", os.path.join(FIXTURE, "vit_digits.safetensors"), "--data",
        os.path.join(FIXTURE, "test_set.npz"), "--limit", 1, "--threads", 1, "--out", out)
    want = json.load(open(out))["inputs"][0]
    row = model.robustness(data["images"][0], int(data["labels"][0]))
    assert (row.label, row.prediction, row.method) == (want["label"], want["prediction"], want["method"])
    for key in ("margin", "margin_lower", "attack_radius", "certified_radius", "refuted_radius"):
        assert float(getattr(row, key)) == want[key], key
    assert row.region_checks == want["region_checks"]


@pytest.mark.parametrize("dtype", [complex, bool, object])
def test_model_inputs_of_a_non_real_dtype_are_refused(model, data, dtype):
    """As for layers: a complex image was cut to its real part (certified enclosure included), bool and
    object arrays were converted."""
    with pytest.raises(regatta.InputError, match="image: has dtype"):
        model.logits_enclosure(data["images"][0].astype(dtype))


def test_robustness_for_a_label_the_model_does_not_predict(model, data):
    """The certified lower end of the margin stays a lower bound when it is negative (it was clamped to 0
    once): below the estimate, and below the margin's upper end from the logits' enclosure."""
    image = data["images"][0]
    wrong = (int(model(image).argmax()) + 1) % 10
    row = model.robustness(image, wrong)
    enclosure = model.logits_enclosure(image)
    others = [k for k in range(10) if k != wrong]
    upper = min(float(enclosure[wrong].upper) - float(enclosure[k].lower) for k in others)
    assert float(row.margin_lower) <= float(row.margin) < 0
    assert float(row.margin_lower) <= upper
    assert float(row.certified_radius) == 0


def test_ctrl_c_interrupts_robustness_within_a_second_and_progress_is_reported(model, data):
    from test_lipschitz import assert_ctrl_c_stops_within_a_second
    image, label = data["images"][0], int(data["labels"][0])
    # ~10 s uninterrupted on a 2-core machine (a default call now takes about 1.3 s, too short to interrupt):
    # the tolerance 1e-6 prolongs the affine radius search (~3 s), the composition of local bounds follows
    # (~6 s). The signal lands in the search, or on a fast machine in the composition: both poll.
    assert_ctrl_c_stops_within_a_second(
        lambda: model.robustness(image, label, tolerance=1e-6, compare_local=True), after=1.5)
    stages = []

    def stop_in_the_region_search(stage, done, total):
        stages.append(stage)
        if stage == "region":
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        model.robustness(image, label, progress=stop_in_the_region_search)
    assert stages[0] == "attack" and stages[-1] == "region"


TEXT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "text_models")


@pytest.mark.parametrize("name", ["gpt2", "bert", "llama"])
def test_text_models_embed_tokens_match_torch_and_certify_below_the_attack(name):
    """tests/data/text_models (generate.py there: torch float64 reference forwards written from Hugging Face's
    model code): the logits of embed_tokens(ids) equal the saved ones, and one row of robustness (affine
    forms; the command line's `certify` on the same input is compared in tests/cli/certify_text.py) keeps
    the certified radius below the attack radius."""
    text = regatta.Model.from_file(os.path.join(TEXT, name, "model.safetensors"))
    data = dict(np.load(os.path.join(TEXT, name, "test_set.npz")))
    assert text.layout == name and text.input_shape[1] == text.width
    for ids, logits in zip(data["tokens"], data["logits"]):
        x = text.embed_tokens(ids)
        assert x.shape == (len(ids), text.width)
        # as above: a few 10^3 eps relative to max(1, |logits|) for two blocks; a wrong mapping gives O(1)
        np.testing.assert_allclose(text(x), logits, rtol=0, atol=16 * 1000 * EPS * max(1, np.abs(logits).max()))
    ids, label = data["tokens"][0], int(data["labels"][0])
    row = text.robustness(text.embed_tokens(ids), label, tolerance=0.1, compare_local=True)
    assert row.method == "affine" and row.prediction == label
    assert 0 < float(row.certified_radius) <= float(row.attack_radius)
    if name == "llama":  # RMSNorm, rotary, SwiGLU: the local composition is absent, with its reason
        assert row.local_radius is None and "llama" in row.local_unavailable
    else:
        assert row.local_unavailable is None and 0 < float(row.local_radius) <= float(row.attack_radius)
    with pytest.raises(regatta.InputError, match="outside the vocabulary"):
        text.embed_tokens([0, 10**6])
    # a token-embedding matrix of width columns: a flat array or the transpose is refused, not reshaped
    with pytest.raises(regatta.InputError, match=r"input: expected a token-embedding matrix of shape \(n, "):
        text(np.zeros(7))
    with pytest.raises(regatta.InputError, match=r"got shape \(%d, 2\)" % text.width):
        text(text.embed_tokens(ids[:2]).T)
