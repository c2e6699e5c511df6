"""regatta.Layer against PyTorch on the same weights and inputs: forward passes (self, cross, causal) against
nn.MultiheadAttention in float64, JVP / VJP / dense Jacobian against torch.autograd, the loaders (module,
state dict with a prefix, .npz file) against each other and against `regatta attend`, and the array
conversions (float32, torch tensors, zero-copy outputs, no conversion buffer for C-contiguous float64)."""
import os

import numpy as np
import pytest

import regatta
from conftest import EPS, save

try:
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="python3-torch is not installed")


def forward_tolerance(n, d, Y):
    """Both sides evaluate the same double formula in different orders: each output entry is a softmax-weighted
    sum of n values, each a d-term dot product, so the rounding differences are at most about (n + d) eps
    relative to the magnitudes involved; 16x covers exp/log and the two summation orders."""
    return 16 * (n + d) * EPS * (1 + float(np.abs(Y).max()))


def torch_mha(d=6, heads=2, seed=0, bias=True):
    torch.manual_seed(seed)
    mha = torch.nn.MultiheadAttention(d, heads, bias=bias, batch_first=True).double().eval()
    return mha


def torch_forward(mha, X, C=None, causal=False):
    x = torch.as_tensor(X)[None]
    c = x if C is None else torch.as_tensor(C)[None]
    mask = torch.triu(torch.ones(x.shape[1], c.shape[1], dtype=torch.bool), diagonal=1) if causal else None
    return mha(x, c, c, need_weights=False, attn_mask=mask)[0][0]


@pytest.fixture
def rng():
    return np.random.default_rng(7)


@needs_torch
@pytest.mark.parametrize("causal", [False, True])
def test_forward_matches_torch_multihead_attention(rng, causal):
    mha = torch_mha()
    layer = regatta.Layer.from_torch(mha, causal=causal)
    assert (layer.d, layer.heads, layer.head_dim) == (6, 2, 3)
    X = rng.standard_normal((5, 6))
    expected = torch_forward(mha, X, causal=causal).detach().numpy()
    Y = layer(X)
    np.testing.assert_allclose(Y, expected, rtol=0, atol=forward_tolerance(5, 6, expected))


@needs_torch
def test_cross_attention_matches_torch(rng):
    mha = torch_mha(seed=1)
    layer = regatta.Layer.from_torch(mha)
    X, C = rng.standard_normal((4, 6)), rng.standard_normal((7, 6))
    expected = torch_forward(mha, X, C).detach().numpy()
    np.testing.assert_allclose(layer(X, C), expected, rtol=0, atol=forward_tolerance(7, 6, expected))


@needs_torch
def test_loaders_agree_and_match_the_command_line(rng, tmp_path, cli):
    mha = torch_mha(seed=2)
    sd = {k: v.detach().numpy() for k, v in mha.state_dict().items()}
    X = rng.standard_normal((5, 6))
    from_module = regatta.Layer.from_torch(mha)(X)
    # A whole "model" state dict: two layers, the second selected by its prefix.
    other = torch_mha(seed=3)
    model = {**{"blocks.0.attn." + k: v for k, v in other.state_dict().items()},
             **{"blocks.1.attn." + k: v for k, v in mha.state_dict().items()}}
    from_prefix = regatta.Layer.from_state_dict(model, heads=2, prefix="blocks.1.")(X)
    np.savez(tmp_path / "mha.npz", **sd)
    from_file = regatta.Layer.from_file(tmp_path / "mha.npz", heads=2)(X)
    assert np.array_equal(from_module, from_prefix) and np.array_equal(from_module, from_file)
    # `regatta attend` on the same file and input: the same computation, the same bits.
    out = tmp_path / "y.npy"
    cli("attend", "--layer", tmp_path / "mha.npz", "--heads", 2, "--input", save(tmp_path / "x.npy", X),
        "--out", out, "--json")
    assert np.array_equal(np.load(out), from_file)


def test_random_layer_is_the_command_lines(rng, tmp_path, cli):
    layer = regatta.Layer.random(d=4, heads=2, seed=9, biases=True, residual=True, prenorm="layernorm")
    X = rng.standard_normal((3, 4))
    out = tmp_path / "y.npy"
    cli("attend", "--random", "d=4,heads=2,seed=9,biases=1", "--residual", "--prenorm", "layernorm",
        "--input", save(tmp_path / "x.npy", X), "--out", out, "--json")
    assert np.array_equal(np.load(out), layer(X))
    # With rotary embeddings: the same map as --rope, and not the map without them.
    rotary = regatta.Layer.random(d=4, heads=2, seed=9, biases=True, rope=100.0, causal=True)
    cli("attend", "--random", "d=4,heads=2,seed=9,biases=1", "--rope", "100", "--causal",
        "--input", save(tmp_path / "x.npy", X), "--out", out, "--json")
    assert rotary.rope_theta == 100.0 and np.array_equal(np.load(out), rotary(X))
    assert not np.allclose(rotary(X), regatta.Layer.random(d=4, heads=2, seed=9, biases=True, causal=True)(X))
    with pytest.raises(regatta.InputError, match="rotary"):
        regatta.Layer.random(d=6, heads=2, rope=100.0)  # head_dim 3 is odd


@needs_torch
def test_jvp_vjp_and_jacobian_match_torch_autograd(rng):
    mha = torch_mha(seed=4)
    layer = regatta.Layer.from_torch(mha, causal=True)
    n, d = 4, 6
    X, V, U = (rng.standard_normal((n, d)) for _ in range(3))
    f = lambda x: mha(x[None], x[None], x[None], need_weights=False,  # noqa: E731
                      attn_mask=torch.triu(torch.ones(n, n, dtype=torch.bool), 1))[0][0]
    x = torch.as_tensor(X)
    _, jvp = torch.autograd.functional.jvp(f, x, torch.as_tensor(V))
    _, vjp = torch.autograd.functional.vjp(f, x, torch.as_tensor(U))
    J = torch.autograd.functional.jacobian(f, x).reshape(n * d, n * d).numpy()
    # Derivatives: the same (n + d)-term sums, one order of magnitude more terms through the softmax
    # derivative (n more per entry), hence (n + d) n eps relative to the Jacobian's scale.
    tol = 16 * (n + d) * n * EPS * (1 + np.abs(J).max()) * (1 + np.abs(V).max() + np.abs(U).max())
    lin = layer.linearize(X)
    np.testing.assert_allclose(lin.jvp(V), jvp.numpy(), rtol=0, atol=tol)
    np.testing.assert_allclose(lin.vjp(U), vjp.numpy(), rtol=0, atol=tol)
    np.testing.assert_allclose(layer.jacobian(X), J, rtol=0, atol=tol)
    # The linearisation's value (materialised kernels) and the streamed forward agree to rounding.
    np.testing.assert_allclose(lin.value, layer(X), rtol=0, atol=forward_tolerance(n, d, lin.value))


@needs_torch
def test_cross_derivatives_match_torch_autograd(rng):
    mha = torch_mha(seed=5)
    layer = regatta.Layer.from_torch(mha)
    X, C = rng.standard_normal((3, 6)), rng.standard_normal((5, 6))
    U = rng.standard_normal((3, 6))
    g = lambda x, c: mha(x[None], c[None], c[None], need_weights=False)[0][0]  # noqa: E731
    _, (gx, gc) = torch.autograd.functional.vjp(g, (torch.as_tensor(X), torch.as_tensor(C)), torch.as_tensor(U))
    lin = layer.linearize(X, C)
    tol = 16 * 11 * 5 * EPS * (1 + np.abs(gx.numpy()).max() + np.abs(gc.numpy()).max())
    np.testing.assert_allclose(lin.vjp_query(U), gx.numpy(), rtol=0, atol=tol)
    np.testing.assert_allclose(lin.vjp_context(U), gc.numpy(), rtol=0, atol=tol)


@needs_torch
def test_float32_and_torch_inputs(rng):
    layer = regatta.Layer.random(d=4, heads=1, seed=1)
    X32 = rng.standard_normal((3, 4)).astype(np.float32)
    exact = layer(X32.astype(np.float64))  # float32 -> float64 is exact
    assert np.array_equal(layer(X32), exact)
    t = torch.tensor(X32, requires_grad=True)
    assert np.array_equal(layer(t), exact)
    assert np.array_equal(layer(X32.tolist()), exact)


def test_no_conversion_copy_for_c_contiguous_float64_and_outputs_are_not_copied(rng):
    layer = regatta.Layer.random(d=4, heads=2, seed=1)
    X = rng.standard_normal((5, 4))
    before = regatta._regatta._conversion_count()
    copies = regatta._regatta._input_copy_count()
    Y = layer(X)
    assert regatta._regatta._conversion_count() == before  # no conversion buffer
    assert regatta._regatta._input_copy_count() == copies  # and no copy: the library reads X in place
    layer.kernel(0, X)
    assert regatta._regatta._input_copy_count() == copies
    # Derivatives read X and the tangents in place too (the linearisation keeps its own working copy of the
    # point, made by the library, not at the boundary).
    lin = layer.linearize(X)
    Xdot = rng.standard_normal((5, 4))
    lin.jvp(Xdot)
    lin.vjp(Xdot)
    layer.jvp(X, Xdot)
    cross = layer.linearize(X, X[:3].copy())
    cross.jvp_query(Xdot)
    cross.vjp_context(Xdot)
    assert regatta._regatta._input_copy_count() == copies
    assert regatta._regatta._conversion_count() == before
    layer(np.asfortranarray(X))
    layer(X.astype(np.float32))
    layer(X[::2])  # strided view
    assert regatta._regatta._conversion_count() == before + 3
    # The output owns no buffer of its own: it wraps the library's result, moved (not copied) into NumPy.
    assert not Y.flags.owndata and type(Y.base).__name__ == "PyCapsule"
    assert Y.flags.c_contiguous and Y.dtype == np.float64


def test_measure_forward_is_the_token_forward(rng):
    layer = regatta.Layer.random(d=3, heads=1, seed=2)
    X = rng.standard_normal((6, 3))
    atoms, weights = layer.attend_measure(X)
    assert np.array_equal(atoms, layer(X))  # the library's contract: bit for bit on empirical measures
    np.testing.assert_array_equal(weights, np.full(6, 1 / 6))
    w = rng.random(6)
    w /= w.sum()
    atoms_w, weights_w = layer.attend_measure(X, w)
    np.testing.assert_allclose(weights_w, w, rtol=0, atol=0)


BAD_INPUTS = [
    (lambda l: l(np.zeros((3, 5))), "X: has 5 columns, the layer expects d = 4"),
    (lambda l: l(np.zeros((2, 3, 4))), "X: expected a 2-D array (n x d), got shape (2, 3, 4)"),
    (lambda l: l(np.array([[1.0, np.nan, 0, 0]])), "X"),
    (lambda l: l(np.zeros((2, 4), dtype=complex)), "X: has dtype complex128"),
    (lambda l: l(np.zeros((0, 4))), "X: is empty"),
    (lambda l: l.with_options(prenorm="batchnorm"), "prenorm"),
    (lambda l: l.with_options(sinkhorn=0), "sinkhorn"),
    (lambda l: l.with_options(norm_eps=float("nan")), "norm_eps: must be finite and > 0"),
    (lambda l: l.with_options(colour="red"), "colour: unknown layer option"),
    (lambda l: l.jvp(np.zeros((3, 4)), np.zeros((2, 4))), "Xdot: has shape (2, 4), expected (3, 4)"),
    (lambda l: regatta.Layer.random(d=5, heads=2), None),
    (lambda l: regatta.Layer.from_state_dict({"a.weight": np.zeros((2, 2))}, heads=1, prefix="b."), "state_dict"),
    # counts, indices and flags: a bool, a float or a string is refused, not truncated or coerced
    (lambda l: l.bracket(2.7, radius=1.0, budget=0.1), "n: must be an integer, got 2.7"),
    (lambda l: l.bracket(True, radius=1.0, budget=0.1), "n: must be an integer, got True"),
    (lambda l: l.kernel(1.7, np.ones((3, 4))), "head: must be an integer"),
    (lambda l: l(np.ones((3, 4)), depth=True), "depth: must be an integer"),
    (lambda l: l.bounds(True, radius=1.0), "n: must be an integer"),
    (lambda l: regatta.Layer.random(d=True, heads=True), "d: must be an integer"),
    (lambda l: regatta.Layer.random(d=4, heads=2, sinkhorn=2.9), "sinkhorn: must be an integer"),
    (lambda l: regatta.Layer.random(d=4, heads=2, causal="no"), "causal: must be True or False"),
    (lambda l: regatta.wasserstein(np.ones((2, 1)), np.zeros((2, 1)), method="sinkhorn", max_iterations=True),
     "max_iterations: must be an integer"),
    # measures: the messages name the Python arguments (they said 'atoms_weights', 'mu', or 'weights' for
    # context_weights), and context_weights without a context is refused (it was ignored)
    (lambda l: l.attend_measure(np.ones((3, 4)), [0.5, 0.5]), "weights: has length 2, expected 3"),
    (lambda l: l.attend_measure(np.ones((3, 5))), "atoms: have dimension 5"),
    (lambda l: l.attend_measure(np.ones((3, 4)), None, np.ones((2, 4)), [0.3, 0.3]), "context_weights: "),
    (lambda l: l.attend_measure(np.ones((3, 4)), None, None, [0.3, 0.7]), "context_weights: given without"),
    # finite input, weights so large that the scores overflow: an error, not NaN
    (lambda l: regatta.Layer.random(d=4, heads=2, scale=1e200)(np.ones((2, 4))), "X: the output is not finite"),
]


@pytest.mark.parametrize("call,start", BAD_INPUTS)
def test_bad_input_raises_input_error(call, start):
    layer = regatta.Layer.random(d=4, heads=2, seed=1)
    with pytest.raises(regatta.InputError) as info:
        call(layer)
    message = str(info.value)
    assert isinstance(info.value, ValueError) and "\n" not in message
    if start is not None:
        assert message.startswith(start), message


@needs_torch
def test_layer_file_errors_are_the_command_lines(rng, tmp_path, cli):
    sd = {k: v.detach().numpy() for k, v in torch_mha().state_dict().items() if not k.startswith("out_proj")}
    np.savez(tmp_path / "broken.npz", **sd)
    with pytest.raises(regatta.InputError) as info:
        regatta.Layer.from_file(tmp_path / "broken.npz", heads=2)
    done = cli("attend", "--layer", tmp_path / "broken.npz", "--heads", 2, "--input",
               save(tmp_path / "x.npy", rng.standard_normal((2, 6))), "--out", tmp_path / "y.npy", expect=2)
    assert done.stderr.strip().endswith(str(info.value)), (done.stderr, str(info.value))
    assert not (tmp_path / "y.npy").exists()


LAYOUTS = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "layouts")


@pytest.mark.parametrize("file,prefix,eps,causal,prenorm,rope", [
    ("timm_vit_block.npz", "blocks.0.", 1e-6, False, "layernorm", None),
    ("gpt2_block.npz", "h.0.", 1e-5, True, "layernorm", None),
    ("llama_gqa_block.npz", "layers.0.", 1e-6, True, "rmsnorm", "none"),
    ("llama_rope_block.npz", "layers.0.", 1e-6, True, "rmsnorm", 10000.0),
])
@needs_torch
def test_model_state_dicts_with_a_prefix_match_the_published_model_code(file, prefix, eps, causal, prenorm, rope):
    # The fixtures hold a block's weights under a model's names and the output torch computed with the
    # published model code (tests/data/layouts/generate.py): y = x + Attn(Norm(x)).
    arrays = dict(np.load(os.path.join(LAYOUTS, file)))
    X, expected = arrays.pop("input"), arrays.pop("output")
    arrays.pop("rope_theta", None)
    layer = regatta.Layer.from_state_dict({k: torch.as_tensor(v) for k, v in arrays.items()}, heads=2,
                                          prefix=prefix, residual=True, causal=causal, prenorm=prenorm,
                                          norm_eps=eps, rope=rope)
    assert layer.rope_theta == (rope if isinstance(rope, float) else None)
    if rope is not None:  # a LLaMA layer without a rotary statement is refused, naming the collection
        with pytest.raises(regatta.InputError, match=r"state_dict: LLaMA layers carry rotary"):
            regatta.Layer.from_state_dict({k: torch.as_tensor(v) for k, v in arrays.items()}, heads=2, prefix=prefix)
    # ~100 rounded operations deep (norm, width-8 projections, softmax over 5 keys): 16 x 100 eps, as the C++ test.
    np.testing.assert_allclose(layer(X), expected, rtol=0, atol=16 * 100 * EPS * (1 + np.abs(expected).max()))
