#!/usr/bin/python3
"""PyTorch reference data for regatta's attention layers (tests/operators/torch_reference_test.cpp).

Made with:  /usr/bin/python3 tests/data/torch/generate.py      (Debian's python3-torch and python3-numpy)

Writes one .npz per case next to this file, and README.md (format, torch version, list of cases). Every
tensor is float64; weights and inputs are drawn from numpy's PCG64 with a fixed seed per case, so
re-running rewrites the same values (and, the zip members carrying a fixed timestamp, the same bytes for
a given zlib).

Where the outputs come from:
  dot attention           torch.nn.MultiheadAttention (or torch.nn.functional.multi_head_attention_forward
                          with use_separate_proj_weight=True for the q_proj_weight naming), eval mode,
                          dropout 0, batch of one, masks as PyTorch defines them.
  l2 attention            written here in torch from docs/math/attention.md#l2-score, docs/math/attention.md#l2-mha (Kim et al. 2021):
                          tied WK = WQ, P_h = softmax_row(-|q_i - k_j|^2/sqrt(d_h) + M), values X A_h WV_h.
  Sinkhorn attention      written here in torch from docs/math/attention.md#sinkhorn-attention (Sander et al. 2022): log-domain
                          potentials, t half-steps, rows first.
  pre-norm                torch.nn.functional.layer_norm, or RMSNorm written here: x/sqrt(mean(x^2)+eps)*gamma.
The hand-written attention is first checked against nn.MultiheadAttention on every dot case (same weights,
same head mapping), so l2 and Sinkhorn differ from torch's module only in the score and the normalisation.
Jacobians come from torch.autograd.functional.jacobian and are checked against central differences.
"""
import io
import math
import os
import zipfile

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
SIZE_LIMIT = 1_500_000  # bytes, all .npz files together
DTYPE = torch.float64
torch.set_default_dtype(DTYPE)

KIND = {"dot": 0, "l2": 1}
PRENORM = {"none": 0, "layernorm": 1, "rmsnorm": 2}


class Case:
    def __init__(self, name, seed, d, heads, n, m=None, kind="dot", bias=False, causal=None, residual=False,
                 prenorm="none", norm_eps=1e-5, sinkhorn=1, naming="in_proj", scale=1.5):
        self.name, self.seed, self.d, self.heads, self.n, self.m = name, seed, d, heads, n, m
        self.kind, self.bias, self.residual, self.prenorm, self.norm_eps = kind, bias, residual, prenorm, norm_eps
        self.causal = causal  # None, "float" (additive -inf) or "bool" (True = may not attend)
        self.sinkhorn, self.naming, self.scale = sinkhorn, naming, scale

    @property
    def cross(self):
        return self.m is not None


# naming: in_proj (nn.MultiheadAttention), separate (q_proj_weight/k_proj_weight/v_proj_weight),
# bert (encoder.layer.0.attention.self.query.weight ... output.dense.weight), llama (model.layers.0.self_attn.).
CASES = [
    # dot-product self-attention through nn.MultiheadAttention
    Case("dot_d4_h1_bias", 101, 4, 1, 5, bias=True),
    Case("dot_d4_h2_nobias", 102, 4, 2, 6),
    Case("dot_d8_h2_bias_causal", 103, 8, 2, 5, bias=True, causal="float"),
    Case("dot_d8_h4_nobias_causalbool_residual", 104, 8, 4, 6, causal="bool", residual=True),
    Case("dot_d12_h3_bias_residual", 105, 12, 3, 6, bias=True, residual=True),
    Case("dot_d12_h4_nobias_causal", 106, 12, 4, 6, causal="float", scale=2.5),
    Case("dot_d12_h3_bias_separate", 107, 12, 3, 5, bias=True, naming="separate"),
    Case("dot_d8_h2_nobias_separate_causal", 108, 8, 2, 6, causal="bool", naming="separate"),
    Case("bert_d12_h3_bias", 109, 12, 3, 5, bias=True, naming="bert"),
    Case("llama_d8_h2_nobias_causal", 110, 8, 2, 6, causal="float", naming="llama"),
    # dot-product cross-attention (query X, key = value = context Y, m != n)
    Case("cross_d8_h2_bias", 201, 8, 2, 4, m=6, bias=True),
    Case("cross_d12_h3_nobias_residual", 202, 12, 3, 5, m=3, residual=True),
    Case("cross_d4_h2_bias_causal", 203, 4, 2, 6, m=4, bias=True, causal="float"),
    # tied L2 attention (Kim et al.), written here
    Case("l2_d4_h1_nobias", 301, 4, 1, 5, kind="l2"),
    Case("l2_d8_h2_bias", 302, 8, 2, 5, kind="l2", bias=True),
    Case("l2_d12_h3_nobias_causal", 303, 12, 3, 6, kind="l2", causal="float"),
    Case("l2_d8_h4_bias_causal_residual", 304, 8, 4, 6, kind="l2", bias=True, causal="float", residual=True),
    Case("l2_cross_d8_h2_bias", 305, 8, 2, 4, m=5, kind="l2", bias=True),
    # pre-norm blocks F(X) = [X] + MHA(N(X)); cross: N applied to queries and context
    Case("prenorm_layernorm_d8_h2_bias_residual", 401, 8, 2, 5, bias=True, residual=True, prenorm="layernorm"),
    Case("prenorm_layernorm_d12_h3_nobias_causal_residual", 402, 12, 3, 6, causal="float", residual=True,
         prenorm="layernorm"),
    Case("prenorm_rmsnorm_d8_h2_nobias_residual", 403, 8, 2, 5, residual=True, prenorm="rmsnorm",
         norm_eps=1e-6),
    Case("prenorm_rmsnorm_d12_h4_bias_causal_residual", 404, 12, 4, 6, bias=True, causal="float", residual=True,
         prenorm="rmsnorm"),
    Case("prenorm_rmsnorm_d4_h2_bias", 405, 4, 2, 5, bias=True, prenorm="rmsnorm"),
    Case("prenorm_layernorm_l2_d8_h2_residual", 406, 8, 2, 5, kind="l2", residual=True, prenorm="layernorm"),
    Case("prenorm_layernorm_cross_d8_h2_bias_residual", 407, 8, 2, 4, m=6, bias=True, residual=True,
         prenorm="layernorm"),
    # Sinkhorn attention (Sander et al.), written here; t = 1 is softmax attention
    Case("sinkhorn_t1_d8_h2", 501, 8, 2, 5, sinkhorn=1),
    Case("sinkhorn_t2_d8_h2", 502, 8, 2, 5, sinkhorn=2),
    Case("sinkhorn_t3_d12_h3", 503, 12, 3, 6, sinkhorn=3),
    Case("sinkhorn_t7_d8_h4", 504, 8, 4, 6, sinkhorn=7),
]

PREFIX = {"in_proj": "", "separate": "", "bert": "encoder.layer.0.attention.",
          "llama": "model.layers.0.self_attn."}


# ---------------------------------------------------------------------------------------------------------
# Weights (PyTorch orientation: Linear weights are out x in)


def draw_weights(rng, case):
    """Wq, Wk, Wv, Wo (d x d each) and biases (or None), entries N(0, (scale/sqrt(d))^2); l2 ties Wk = Wq."""
    d, s = case.d, case.scale / math.sqrt(case.d)
    w = {name: rng.normal(0.0, s, (d, d)) for name in ("q", "k", "v", "o")}
    for name in ("q", "k", "v", "o"):
        w["b" + name] = rng.normal(0.0, s, d) if case.bias else None
    if case.kind == "l2":
        w["k"] = w["q"].copy()
        if case.bias:
            w["bk"] = w["bq"].copy()
    return w


def norm_parameters(rng, case):
    if case.prenorm == "none":
        return None, None
    gamma = 1.0 + 0.3 * rng.normal(size=case.d)
    beta = 0.3 * rng.normal(size=case.d) if case.prenorm == "layernorm" else None
    return gamma, beta


def tensor(a):
    return None if a is None else torch.tensor(a, dtype=DTYPE)


def layer_tensors(case, w):
    """The layer under its real names (plus, for bert/llama, a decoy layer 1 so that the prefix matters)."""
    out = {}
    decoy = draw_weights(np.random.default_rng(case.seed + 10_000), case)
    if case.naming == "in_proj":
        out["in_proj_weight"] = np.concatenate([w["q"], w["k"], w["v"]])
        if case.bias:
            out["in_proj_bias"] = np.concatenate([w["bq"], w["bk"], w["bv"]])
        out["out_proj.weight"] = w["o"]
        if case.bias:
            out["out_proj.bias"] = w["bo"]
    elif case.naming == "separate":
        out["q_proj_weight"], out["k_proj_weight"], out["v_proj_weight"] = w["q"], w["k"], w["v"]
        if case.bias:
            out["in_proj_bias"] = np.concatenate([w["bq"], w["bk"], w["bv"]])
        out["out_proj.weight"] = w["o"]
        if case.bias:
            out["out_proj.bias"] = w["bo"]
    elif case.naming == "bert":
        for layer, weights in ((0, w), (1, decoy)):
            p = "encoder.layer.%d.attention." % layer
            for role, key in (("self.query", "q"), ("self.key", "k"), ("self.value", "v"),
                              ("output.dense", "o")):
                out[p + role + ".weight"] = weights[key]
                if case.bias:
                    out[p + role + ".bias"] = weights["b" + key]
    elif case.naming == "llama":
        for layer, weights in ((0, w), (1, decoy)):
            p = "model.layers.%d.self_attn." % layer
            for role, key in (("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v"), ("o_proj", "o")):
                out[p + role + ".weight"] = weights[key]
                if case.bias:
                    out[p + role + ".bias"] = weights["b" + key]
    else:
        raise ValueError(case.naming)
    return out


# ---------------------------------------------------------------------------------------------------------
# Forward maps (torch, float64). X is n x d, Y is m x d; masks are n x m.


def causal_mask(case, n, m):
    """PyTorch attn_mask: float (0 / -inf, added to the logits) or bool (True = may not attend)."""
    if case.causal is None:
        return None
    if case.causal == "bool":
        return torch.ones(n, m, dtype=torch.bool).triu(1)
    if n == m:
        return torch.nn.Transformer.generate_square_subsequent_mask(n).to(DTYPE)
    return torch.full((n, m), float("-inf"), dtype=DTYPE).triu(1)


def torch_module_attention(case, w):
    """(X, Y) -> nn.MultiheadAttention(X, Y, Y) (or the functional form with separate projections)."""
    d, H = case.d, case.heads
    if case.naming == "separate":
        in_bias = tensor(np.concatenate([w["bq"], w["bk"], w["bv"]])) if case.bias else None

        def run(X, Y, mask):
            out, _ = F.multi_head_attention_forward(
                X.unsqueeze(1), Y.unsqueeze(1), Y.unsqueeze(1), d, H, None, in_bias, None, None, False, 0.0,
                tensor(w["o"]), tensor(w["bo"]), training=False, need_weights=False, attn_mask=mask,
                use_separate_proj_weight=True, q_proj_weight=tensor(w["q"]), k_proj_weight=tensor(w["k"]),
                v_proj_weight=tensor(w["v"]))
            return out.squeeze(1)

        return run
    mha = torch.nn.MultiheadAttention(d, H, bias=case.bias, dtype=DTYPE)
    with torch.no_grad():
        mha.in_proj_weight.copy_(tensor(np.concatenate([w["q"], w["k"], w["v"]])))
        mha.out_proj.weight.copy_(tensor(w["o"]))
        if case.bias:
            mha.in_proj_bias.copy_(tensor(np.concatenate([w["bq"], w["bk"], w["bv"]])))
            mha.out_proj.bias.copy_(tensor(w["bo"]))
    mha.eval()

    def run(X, Y, mask):
        out, _ = mha(X.unsqueeze(1), Y.unsqueeze(1), Y.unsqueeze(1), need_weights=False, attn_mask=mask)
        return out.squeeze(1)

    return run


def manual_attention(case, w, score, sinkhorn):
    """(X, Y) -> sum_h K_h V_h Wo_h + bo from the formulas (docs/math/attention.md#scores, docs/math/attention.md#layers, docs/math/attention.md#sinkhorn-attention).

    score "dot": S = Q K^T/sqrt(d_h), V = Y Wv_h^T + bv_h;
    score "l2":  S = -|q_i - k_j|^2/sqrt(d_h) (tied), V = Y A_h Wv_h^T + bv_h, A_h = Wq_h^T Wq_h/sqrt(d_h);
    K_h = softmax_row(S + M) for sinkhorn = 1, else `sinkhorn` alternating half-steps, rows first.
    """
    d, H = case.d, case.heads
    dh = d // H
    Wq, Wk, Wv, Wo = (tensor(w[k]) for k in ("q", "k", "v", "o"))
    bq, bk, bv, bo = (tensor(w[k]) for k in ("bq", "bk", "bv", "bo"))
    c = 1.0 / math.sqrt(dh)

    def run(X, Y, mask):
        out = torch.zeros(X.shape[0], d, dtype=DTYPE)
        additive = None
        if mask is not None:
            additive = mask.to(DTYPE) if mask.dtype != torch.bool else torch.zeros(mask.shape).masked_fill(
                mask, float("-inf"))
        for h in range(H):
            rows = slice(h * dh, (h + 1) * dh)
            Q = X @ Wq[rows].T + (bq[rows] if bq is not None else 0.0)
            K = Y @ Wk[rows].T + (bk[rows] if bk is not None else 0.0)
            if score == "dot":
                S = c * (Q @ K.T)
                V = Y @ Wv[rows].T
            else:
                S = -c * ((Q.unsqueeze(1) - K.unsqueeze(0)) ** 2).sum(-1)
                A = c * (Wq[rows].T @ Wq[rows])
                V = Y @ A @ Wv[rows].T
            if bv is not None:
                V = V + bv[rows]
            if additive is not None:
                S = S + additive
            f = torch.zeros(S.shape[0], dtype=DTYPE)
            g = torch.zeros(S.shape[1], dtype=DTYPE)
            for step in range(sinkhorn):
                if step % 2 == 0:
                    f = -torch.logsumexp(S + g.unsqueeze(0), dim=1)
                else:
                    g = -torch.logsumexp(S + f.unsqueeze(1), dim=0)
            P = torch.exp(S + f.unsqueeze(1) + g.unsqueeze(0))
            out = out + P @ V @ Wo[:, rows].T
        if bo is not None:
            out = out + bo
        return out

    return run


def prenormalise(case, gamma, beta):
    if case.prenorm == "none":
        return lambda Z: Z
    g, b = tensor(gamma), tensor(beta)
    if case.prenorm == "layernorm":
        return lambda Z: F.layer_norm(Z, (case.d,), weight=g, bias=b, eps=case.norm_eps)
    return lambda Z: Z / torch.sqrt((Z * Z).mean(dim=1, keepdim=True) + case.norm_eps) * g


def block(case, attention, norm, mask):
    """F(X, Y) = [X] + attention(N(X), N(Y)); for self-attention call it with Y = X."""

    def run(X, Y):
        out = attention(norm(X), norm(Y), mask)
        return out + X if case.residual else out

    return run


# ---------------------------------------------------------------------------------------------------------
# Checks and output


def relative_error(a, b):
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


def check_against_differences(fn, inputs, jacobians, rng, name):
    """J·v against central differences of fn along one random direction (step 1e-5: error ~1e-10 relative)."""
    directions = [tensor(rng.normal(size=tuple(x.shape))) for x in inputs]
    step = 1e-5
    plus = fn(*[x + step * v for x, v in zip(inputs, directions)])
    minus = fn(*[x - step * v for x, v in zip(inputs, directions)])
    fd = ((plus - minus) / (2 * step)).reshape(-1)
    jv = sum(J @ v.reshape(-1) for J, v in zip(jacobians, directions))
    error = relative_error(jv, fd)
    assert error < 1e-7, "%s: Jacobian vs central differences %.3g" % (name, error)


def scalar(value):
    return np.array(value, dtype=np.float64)


def write_npz(path, arrays):
    """np.savez_compressed's format with a fixed member timestamp, so the bytes depend only on the data."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, array in arrays.items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.asarray(array, order="C"), allow_pickle=False)
            info = zipfile.ZipInfo(name + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, buffer.getvalue())


def make_case(case):
    rng = np.random.default_rng(case.seed)
    w = draw_weights(rng, case)
    gamma, beta = norm_parameters(rng, case)
    X = tensor(rng.normal(size=(case.n, case.d)))
    Y = tensor(rng.normal(size=(case.m, case.d))) if case.cross else X
    mask = causal_mask(case, case.n, Y.shape[0])
    norm = prenormalise(case, gamma, beta)

    manual = manual_attention(case, w, case.kind, case.sinkhorn)
    if case.kind == "dot":
        module = torch_module_attention(case, w)
        # The hand-written attention (used for l2 and Sinkhorn) with t = 1 must agree with PyTorch's module.
        reference = module(norm(X), norm(Y), mask)
        mine = manual_attention(case, w, "dot", 1)(norm(X), norm(Y), mask)
        error = relative_error(mine, reference)
        assert error < 1e-13, "%s: hand-written vs nn.MultiheadAttention %.3g" % (case.name, error)
        attention = module if case.sinkhorn == 1 else manual
    else:
        attention = manual
    fn = block(case, attention, norm, mask)

    with torch.no_grad():
        output = fn(X, Y)
    nd = case.n * case.d
    arrays = dict(layer_tensors(case, w))
    arrays["input"] = X.numpy()
    if case.cross:
        arrays["context"] = Y.numpy()
        JX, JY = torch.autograd.functional.jacobian(fn, (X, Y))
        JX, JY = JX.reshape(nd, nd), JY.reshape(nd, case.m * case.d)
        check_against_differences(fn, [X, Y], [JX, JY], rng, case.name)
        arrays["jacobian_query"], arrays["jacobian_context"] = JX.numpy(), JY.numpy()
    else:
        self_fn = lambda Z: fn(Z, Z)
        J = torch.autograd.functional.jacobian(self_fn, X).reshape(nd, nd)
        check_against_differences(self_fn, [X], [J], rng, case.name)
        arrays["jacobian"] = J.numpy()
    arrays["output"] = output.numpy()
    if gamma is not None:
        arrays["norm.weight"] = gamma
    if beta is not None:
        arrays["norm.bias"] = beta
    arrays.update({
        "heads": scalar(case.heads),
        "kind": scalar(KIND[case.kind]),
        "causal": scalar(case.causal is not None),
        "residual": scalar(case.residual),
        "prenorm": scalar(PRENORM[case.prenorm]),
        "norm_eps": scalar(case.norm_eps),
        "sinkhorn_iterations": scalar(case.sinkhorn),
        "bias": scalar(case.bias),
        "cross": scalar(case.cross),
        "layer_prefix": np.array([float(ord(ch)) for ch in PREFIX[case.naming]], dtype=np.float64),
    })
    for name, a in arrays.items():
        assert np.all(np.isfinite(a)), "%s: %s has non-finite entries" % (case.name, name)
        assert a.dtype == np.float64, "%s: %s is %s" % (case.name, name, a.dtype)
    path = os.path.join(HERE, case.name + ".npz")
    write_npz(path, arrays)
    return os.path.getsize(path)


# ---------------------------------------------------------------------------------------------------------
# README

README_HEAD = """# PyTorch reference data for attention layers

Written by `generate.py` (this file too: edit the script, not this file). Regenerate from the repository
root with

    /usr/bin/python3 tests/data/torch/generate.py

(Debian's `python3-torch` {torch}, numpy {numpy}; the `python3` on a development PATH may lack torch).
Used by `tests/operators/torch_reference_test.cpp`. Seeds are fixed per case (numpy PCG64), so rerunning
rewrites the same values.

## Where the numbers come from

* **dot**: `torch.nn.MultiheadAttention(d, heads, bias=…, dtype=float64)` in `eval()` mode (dropout 0),
  called as `mha(X, Y, Y, need_weights=False, attn_mask=…)` on a batch of one; for the `q_proj_weight`
  naming `torch.nn.functional.multi_head_attention_forward(…, use_separate_proj_weight=True)`, the code
  path the module takes when its projections are separate. Hugging Face BERT / LLaMA files hold the same
  kind of layer under those names (BERT: the self-attention and `output.dense` only, without BERT's post-norm
  LayerNorm); their outputs also come from `nn.MultiheadAttention` with the same weights.
* **l2** (Kim et al. 2021; docs/math/attention.md#l2-score, docs/math/attention.md#l2-mha): written in torch in `generate.py`: tied
  `WK = WQ` (the key block of `in_proj_weight` equals the query block, and so do the bias blocks),
  `P_h = softmax_row(-‖q_i - k_j‖²/√d_h + M)`, values `Y A_h W_v,hᵀ + b_v,h` with
  `A_h = W_q,hᵀ W_q,h/√d_h` (PyTorch orientation, `W_q,h` = rows `h·d_h:(h+1)·d_h` of `W_q`).
* **Sinkhorn** (Sander et al. 2022; docs/math/attention.md#sinkhorn-attention): written in torch: `S_h = Q_h K_hᵀ/√d_h`,
  potentials `f = g = 0`, then `t` half-steps, rows first: `f_i = -LSE_j(S_ij + g_j)`,
  `g_j = -LSE_i(S_ij + f_i)`; `K_h = exp(S_h + f 1ᵀ + 1 gᵀ)`; output `Σ_h K_h X W^VO_h` (no mask, no
  biases, no residual in these cases).
* **pre-norm** (docs/math/attention.md#residual-prenorm, docs/math/attention.md#normalisation): `F(X) = [X] + MHA(N(X))`, `N` row-wise:
  LayerNorm = `torch.nn.functional.layer_norm(x, (d,), gamma, beta, eps)` (biased variance), RMSNorm =
  `x / sqrt(mean(x²) + eps) * gamma` (no beta). Cross-attention applies `N` to queries and context; the
  residual adds the raw queries `X`, not `N(X)`.
* The hand-written attention (with `t = 1`) is checked against `nn.MultiheadAttention` on every dot case to
  1e-13 relative before anything is written; every Jacobian is checked against central differences along
  a random direction (1e-7 relative).

## File format

One `.npz` per case (zip of `.npy` members, deflate-compressed, readable by `np.load` and by regatta's
`io::read_npz`). **Every member is float64**, metadata included: regatta's reader accepts floating-point
dtypes only, and `load_layer` parses every member of the file, so an integer or bool member would make the
file unreadable there. Flags and counts are therefore 0-d float64 arrays holding exact small integers.

| member | shape | meaning |
|---|---|---|
| layer tensors | | real PyTorch / Hugging Face names, Linear orientation (out × in); see "naming" below |
| `input` | (n, d) | the queries `X` (self-attention: also keys and values) |
| `context` | (m, d) | cross-attention only: keys and values `Y` (m ≠ n) |
| `output` | (n, d) | `F(X)` or `F(X, Y)` as computed by torch, float64 |
| `jacobian` | (n·d, n·d) | self-attention: `J[i·d + a, j·d + b] = ∂F_ia/∂X_jb` |
| `jacobian_query` | (n·d, n·d) | cross-attention: `∂F_ia/∂X_jb`, same indexing |
| `jacobian_context` | (n·d, m·d) | cross-attention: `J[i·d + a, j·d + b] = ∂F_ia/∂Y_jb` |
| `norm.weight` | (d,) | pre-norm cases: γ (LayerNorm and RMSNorm) |
| `norm.bias` | (d,) | LayerNorm cases: β |
| `heads` | () | number of heads H (head width d/H) |
| `kind` | () | 0 dot, 1 l2 (tied) |
| `causal` | () | 1: key j visible to query i iff j ≤ i (diagonal kept), also for m ≠ n |
| `residual` | () | 1: `F` adds the queries `X` |
| `prenorm` | () | 0 none, 1 LayerNorm, 2 RMSNorm |
| `norm_eps` | () | ε of the pre-norm (1e-5 unless stated; stored for every case) |
| `sinkhorn_iterations` | () | t ≥ 1 half-steps; 1 is softmax attention |
| `bias` | () | 1: every projection has a bias (`in_proj_bias` / `*.bias`, and the output bias) |
| `cross` | () | 1: cross-attention (`context`, `jacobian_query`, `jacobian_context` present) |
| `layer_prefix` | (k,) | the tensor-name prefix to pass to `load_layer` as character codes (`''.join(map(chr, …))`); length 0 = no prefix |

`F` is the whole block the flags describe: `F(X) = [X] + MHA(N(X))` with the mask, biases and kind above
(for cross-attention `F(X, Y) = [X] + CA(N(X), N(Y))`). The Jacobians are of that same `F` (residual and
pre-norm included), in row-major flattening of the (n, d) matrices, from
`torch.autograd.functional.jacobian` in float64. With a float causal mask, masked scores are `-inf` and
contribute exactly zero to outputs and Jacobians.

Naming (`layer_prefix` selects one layer; `regatta::operators::load_layer(path, heads, kind, prefix)` reads
every file):

* `in_proj`: `in_proj_weight` (3d × d, rows `[W_q; W_k; W_v]`), `in_proj_bias` (3d), `out_proj.weight`,
  `out_proj.bias` (nn.MultiheadAttention's own `state_dict` names).
* `separate`: `q_proj_weight`, `k_proj_weight`, `v_proj_weight` (d × d each), `in_proj_bias`,
  `out_proj.weight`, `out_proj.bias`.
* `bert`: `encoder.layer.L.attention.self.{{query,key,value}}.{{weight,bias}}`,
  `encoder.layer.L.attention.output.dense.{{weight,bias}}` for L = 0 (the layer used) and L = 1 (a decoy
  with other random weights, drawn with seed + 10000: without the prefix the names are ambiguous).
* `llama`: `model.layers.L.self_attn.{{q,k,v,o}}_proj.weight` for L = 0 (used) and L = 1 (decoy, as for
  bert).

Weights are N(0, (scale/√d)²) (scale 1.5, or as listed), inputs N(0, 1), γ = 1 + 0.3·N(0, 1),
β = 0.3·N(0, 1).

## Cases

| file | d | H | n | m | kind | bias | causal | residual | prenorm (ε) | t | naming | scale |
|---|---|---|---|---|---|---|---|---|---|---|---|---|
"""


def write_readme(sizes):
    lines = [README_HEAD.format(torch=torch.__version__, numpy=np.__version__)]
    for case in CASES:
        norm = case.prenorm if case.prenorm == "none" else "%s (%g)" % (case.prenorm, case.norm_eps)
        lines.append("| `%s.npz` | %d | %d | %d | %s | %s | %s | %s | %s | %s | %d | %s | %g |\n" % (
            case.name, case.d, case.heads, case.n, case.m if case.cross else "–", case.kind,
            "yes" if case.bias else "no", case.causal or "no", "yes" if case.residual else "no", norm,
            case.sinkhorn, case.naming, case.scale))
    lines.append("\nCausal `float` is the additive `-inf` mask "
                 "(`nn.Transformer.generate_square_subsequent_mask` when square), `bool` PyTorch's boolean "
                 "`attn_mask` (True = may not attend); both mean the same mask.\n\n"
                 "%d files, %d bytes in all.\n" % (len(sizes), sum(sizes)))
    with open(os.path.join(HERE, "README.md"), "w") as f:
        f.write("".join(lines))


def main():
    for name in os.listdir(HERE):
        if name.endswith(".npz"):
            os.remove(os.path.join(HERE, name))
    sizes = [make_case(case) for case in CASES]
    assert len({case.name for case in CASES}) == len(CASES)
    assert sum(sizes) < SIZE_LIMIT, "data too large: %d bytes" % sum(sizes)
    write_readme(sizes)
    print("wrote %d cases, %d bytes" % (len(sizes), sum(sizes)))


if __name__ == "__main__":
    main()
