#!/usr/bin/env python3
"""Rotary position embeddings through the command line (--rope), against torch.

1. `attend --rope 10000` on tests/data/layouts/llama_rope_block.npz gives the output torch computed with Hugging
   Face's LLaMA attention code in float64 (generate.py), and `--rope none` does not.
2. The Jacobian norms of `local --certify` bracket the spectral and infinity norms of the Jacobian that torch
   autograd computes from an independent float64 implementation of the same layer (HF's rotate_half code).
3. A LLaMA-layout file without --rope, and a bad --rope, exit 2 with one line naming the file / option, writing
   nothing.
4. `bound` refuses every attention bound for a rotary layer, saying why.

    rope_layers.py REGATTA DATA_DIR WORK_DIR      (exit 77: numpy or torch missing, the test is skipped)
"""
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    import torch
except ImportError:
    sys.exit(77)

REGATTA, DATA, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures = []
EPS = np.finfo(float).eps
FIXTURE = os.path.join(DATA, "layouts", "llama_rope_block.npz")
LAYER = ["--layer", FIXTURE, "--heads", "2", "--prefix", "layers.0.", "--prenorm", "rmsnorm", "--norm-eps", "1e-6",
         "--residual", "--causal"]
# ~100 rounded operations deep (RMSNorm, width-8 projections, the rotation, softmax over <= 7 keys): 16 x 100 eps,
# the tolerance of the C++ layout tests.
FORWARD_TOL = 16 * 100 * EPS


def path(name):
    return os.path.join(WORK, name)


def run(*args, expect=0):
    p = subprocess.run([REGATTA, *map(str, args)], capture_output=True, text=True)
    if p.returncode != expect:
        failures.append(f"{' '.join(map(str, args))}: exit {p.returncode}, expected {expect}: {p.stderr.strip()}")
    return p


arrays = dict(np.load(FIXTURE))
X, expected, theta = arrays["input"], arrays["output"], float(arrays["rope_theta"][0])
np.save(path("x.npy"), X)

# 1. The forward pass against torch's output.
run("attend", *LAYER, "--rope", repr(theta), "--input", path("x.npy"), "--out", path("y.npy"))
Y = np.load(path("y.npy"))
err = np.abs(Y - expected).max()
if not err <= FORWARD_TOL * (1 + np.abs(expected).max()):
    failures.append(f"attend --rope {theta}: max |regatta - torch| = {err:.3e}")
run("attend", *LAYER, "--rope", "none", "--input", path("x.npy"), "--out", path("y0.npy"))
if np.abs(np.load(path("y0.npy")) - expected).max() <= 1e6 * FORWARD_TOL:
    failures.append("attend --rope none matches the rotary reference: the rotation is not acting")


# 2. Jacobian norms against torch autograd on an independent implementation (Hugging Face's code structure).
def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def llama_block(x):
    T = {k: torch.tensor(v) for k, v in arrays.items()}
    p = "layers.0.self_attn."
    n, d, heads, kv = x.shape[0], x.shape[1], 2, 1
    hd = d // heads
    z = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * T["layers.0.input_layernorm.weight"]
    q = torch.nn.functional.linear(z, T[p + "q_proj.weight"], T[p + "q_proj.bias"]).view(n, heads, hd).transpose(0, 1)
    k = torch.nn.functional.linear(z, T[p + "k_proj.weight"], T[p + "k_proj.bias"]).view(n, kv, hd).transpose(0, 1)
    v = torch.nn.functional.linear(z, T[p + "v_proj.weight"], T[p + "v_proj.bias"]).view(n, kv, hd).transpose(0, 1)
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    freqs = torch.arange(n, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    q = q * emb.cos() + rotate_half(q) * emb.sin()
    k = k * emb.cos() + rotate_half(k) * emb.sin()
    k, v = k.expand(heads, n, hd), v.expand(heads, n, hd)  # repeat_kv with one key/value head
    s = (q @ k.transpose(-2, -1)) * hd ** -0.5
    s = s.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    out = (s.softmax(-1) @ v).transpose(0, 1).reshape(n, d)
    return x + torch.nn.functional.linear(out, T[p + "o_proj.weight"])


xt = torch.tensor(X)
if np.abs(llama_block(xt).numpy() - expected).max() > FORWARD_TOL * (1 + np.abs(expected).max()):
    failures.append("the autograd reference does not reproduce the fixture's output")
J = torch.autograd.functional.jacobian(llama_block, xt).reshape(X.size, X.size).numpy()
two, inf = np.linalg.norm(J, 2), np.abs(J).sum(axis=1).max()
local = json.loads(run("local", *LAYER, "--rope", repr(theta), "--input", path("x.npy"), "--certify", "--json").stdout)
if local["rope_theta"] != theta:
    failures.append(f"local --json: rope_theta = {local['rope_theta']!r}, expected {theta!r}")
# torch's J carries ~100 roundings per entry and its SVD is backward stable (c n eps with n = 56 rows): 16 x 200 eps.
tol = 16 * 200 * EPS
for name, exact in (("jacobian_norm_2", two), ("jacobian_norm_inf", inf)):
    lo, hi = local[name + "_certified_lower"], local[name + "_certified_upper"]
    if not (lo - tol * exact <= exact <= hi + tol * exact):
        failures.append(f"local: {name} certified [{lo!r}, {hi!r}] does not hold torch's {exact!r}")

# 3. Refusals: one line naming the file or option, exit 2, nothing written.
for extra, named in (([], FIXTURE), (["--rope", "abc"], "--rope"), (["--rope", "-1"], "--rope"),
                     (["--rope", "inf"], "--rope")):
    out = path("refused.npy")
    p = run("attend", *LAYER, *extra, "--input", path("x.npy"), "--out", out, expect=2)
    lines = p.stderr.strip().splitlines()
    if len(lines) != 1 or named not in lines[0]:
        failures.append(f"attend {' '.join(extra)}: expected one line naming {named}, got {p.stderr!r}")
    if not extra and "--rope THETA" not in p.stderr:
        failures.append(f"the LLaMA refusal does not say how to state the rotary base: {p.stderr!r}")
    if os.path.exists(out):
        failures.append(f"attend {' '.join(extra)}: wrote {out} although refused")

# 4. Every attention bound refuses a rotary layer (softmax.half is a property of softmax alone).
bounds = json.loads(run("bound", *LAYER, "--rope", repr(theta), "--n", "7", "--json").stdout)
for b in bounds:
    if b["id"] in ("kim.thm32_inf", "kim.thm32_2") or b["id"].startswith(("castin.", "mf.")):
        if b["applies"] or "rotary" not in b["reason"]:
            failures.append(f"bound: {b['id']} not refused for rotary embeddings: {b['reason']!r}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print(f"attend vs torch {err:.2e}; ||J||_2 = {two:.12g} in [{local['jacobian_norm_2_certified_lower']!r}, "
      f"{local['jacobian_norm_2_certified_upper']!r}]; ||J||_inf = {inf:.12g}")
