"""`regatta certify` on the safetensors LLaMA (tests/data/text_models/llama) over its graph: in l-inf, with
--input-range and with --budget-per-input (docs/models.md#certifying-a-model-file). The graph's rotary tables
are binary64 roundings carrying the enclosure radius that covers the exact rotation
(docs/graph.md#enclosure-radii-of-constants), so the rows certify the file's Model:

  * --norm inf: the rows come from the graph pass, certified <= attack on every row, something is certified,
    and points inside each certified box (uniform, vertices, and the ends of projected gradient ascent) keep
    the label under a torch float64 forward of the LLaMA written here from the published formulas (exact
    cos/sin of the angles, independent of regatta), while the same search at twice the attack radius changes
    most labels (the check can fail);
  * --input-range (l2 inside a box) and --budget-per-input (branch and bound after the affine forms) run over
    the graph: exit 0, certified <= attack (and certified <= bab <= attack).

    certify_llama_inf.py REGATTA DATA_DIR CLI_TEST_DIR WORK_DIR     (exit 77: no numpy or torch)
"""
import json
import math
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    import torch

    sys.path.insert(0, sys.argv[3])
    from safetensors_f64 import read_safetensors as read_safetensors_numpy
    from token_sets import points_inside
except ImportError as e:
    print("skipped:", e)
    sys.exit(77)

REGATTA, DATA, WORK = sys.argv[1], sys.argv[2], sys.argv[4]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
LLAMA = os.path.join(DATA, "text_models", "llama")
MODEL, CONFIG, TESTS = (os.path.join(LLAMA, f) for f in ("model.safetensors", "config.json", "test_set.npz"))
failures = []
torch.manual_seed(20261208)


def read_safetensors(path):
    """The file's float64 tensors as torch tensors."""
    return {k: torch.from_numpy(v.copy()) for k, v in read_safetensors_numpy(path).items()}


W = read_safetensors(MODEL)
with open(CONFIG, encoding="utf-8") as f:
    C = json.load(f)


def rms(x, w):
    return w * x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + C["rms_norm_eps"])


def rotate(x):
    """x (batch, heads, n, d_h): row i turned by i * theta^(-2a/d_h) as x*cos + rotate_half(x)*sin."""
    hd, n = x.shape[-1], x.shape[-2]
    inv = C["rope_theta"] ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    angles = torch.outer(torch.arange(n, dtype=torch.float64), inv)
    full = torch.cat((angles, angles), dim=-1)
    half = torch.cat((-x[..., hd // 2:], x[..., : hd // 2]), dim=-1)
    return x * torch.cos(full) + half * torch.sin(full)


def reference(x):
    """Logits at every token, [batch, n, classes], of token embeddings x [batch, n, d]: the LLaMA of
    tests/data/text_models/generate.py (pre-RMSNorm blocks, rotary grouped-query causal attention, SwiGLU,
    model.norm, score)."""
    b, n, d = x.shape
    heads, kv = C["num_attention_heads"], C["num_key_value_heads"]
    hd = d // heads

    def lin(name, t):
        return t @ W[name + ".weight"].T

    def split(t, h):
        return t.view(b, n, h, hd).transpose(1, 2)

    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    for k in range(C["num_hidden_layers"]):
        p = f"model.layers.{k}."
        h = rms(x, W[p + "input_layernorm.weight"])
        q = rotate(split(lin(p + "self_attn.q_proj", h), heads))
        key = rotate(split(lin(p + "self_attn.k_proj", h), kv)).repeat_interleave(heads // kv, dim=1)
        v = split(lin(p + "self_attn.v_proj", h), kv).repeat_interleave(heads // kv, dim=1)
        s = (q @ key.transpose(-1, -2) / math.sqrt(hd)).masked_fill(~causal, -math.inf)
        x = x + lin(p + "self_attn.o_proj", (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, n, d))
        h = rms(x, W[p + "post_attention_layernorm.weight"])
        gate = lin(p + "mlp.gate_proj", h)
        x = x + lin(p + "mlp.down_proj", gate * torch.sigmoid(gate) * lin(p + "mlp.up_proj", h))
    return rms(x, W["model.norm.weight"]) @ W["score.weight"].T


npz = np.load(TESTS)
tokens, labels = npz["tokens"], npz["labels"]
embedded = [W["model.embed_tokens.weight"][torch.from_numpy(t)].unsqueeze(0) for t in tokens]
LAST = tokens.shape[1] - 1
# The reference is the file's function: its logits are the fixture's (written by generate.py).
got = torch.cat([reference(e)[:, LAST, :] for e in embedded]).numpy()
if not np.allclose(got, npz["logits"], rtol=0, atol=1e-12):
    failures.append(f"the reference forward is not the fixture's: |difference| {np.abs(got - npz['logits']).max()}")


def certify(name, *args):
    out = os.path.join(WORK, name + ".json")
    r = subprocess.run([REGATTA, "certify", "--model", MODEL, "--config", CONFIG, "--data", TESTS, "--out", out,
                        *args], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        sys.exit(f"{name}: exit {r.returncode}: {r.stderr.strip()}")
    with open(out, encoding="utf-8") as f:
        return json.load(f)["inputs"], r.stdout


def sample_check(name, rows, factor=0.999):
    """Points inside each certified box (radius scaled by `factor`) keep the label under the reference; the
    count of rows where some point changes it."""
    changed = 0
    for row in rows:
        r = row["certified_radius"]
        if not r or r <= 0:
            continue
        i = row["index"]
        x = embedded[i]
        points = points_inside(reference, x, factor * r, LAST, int(labels[i]), "inf")
        with torch.no_grad():
            y = reference(x + points)[:, LAST, :]
        wrong = int((y.argmax(dim=1) != int(labels[i])).sum())
        changed += wrong > 0
        if wrong and factor < 1:
            failures.append(f"{name}: input {i}: {wrong} of {len(y)} points inside the certified l-inf box of "
                            f"radius {r} change the label")
    return changed


def check_order(name, rows, bab=False):
    for row in rows:
        c, a = row["certified_radius"], row["attack_radius"]
        if c is None or (a is not None and not c <= a):
            failures.append(f"{name}: input {row['index']}: certified {c} against attack {a}")
        if bab and row["attack_radius"] is not None and not c <= row["bab_radius"] <= a:
            failures.append(f"{name}: input {row['index']}: bab {row['bab_radius']} outside [{c}, {a}]")
    if not any((row["certified_radius"] or 0) > 0 for row in rows):
        failures.append(f"{name}: nothing certified")


linf, text = certify("linf", "--norm", "inf", "--limit", "2")
if "certified radius by affine forms over the graph" not in text:
    failures.append("l-inf: not the graph pass: " + text[-400:])
check_order("linf", linf)
sample_check("linf", linf)
far = [dict(row, certified_radius=2 * row["attack_radius"]) for row in linf if row["attack_radius"]]
flipped = sample_check("linf", far, 1.0)
print(f"l-inf: {flipped} of {len(far)} labels changed at twice the attack radius")
if flipped < len(far) / 2 or not far:
    failures.append(f"l-inf: the sampling changes the label of {flipped} of {len(far)} inputs at twice the attack "
                    "radius: it could not see a false certificate")

lo, hi = float(min(e.min() for e in embedded)) - 0.5, float(max(e.max() for e in embedded)) + 0.5
box, text = certify("range", "--input-range", f"{lo},{hi}", "--limit", "1")
if "over the graph" not in text:
    failures.append("--input-range: not the graph pass")
check_order("range", box)
bab, text = certify("bab", "--norm", "inf", "--budget-per-input", "1", "--limit", "1")
check_order("bab", bab, bab=True)

for f in failures:
    print("FAIL:", f)
print("l-inf certified:", [row["certified_radius"] for row in linf])
print("l-inf attack:", [row["attack_radius"] for row in linf])
sys.exit(1 if failures else 0)
