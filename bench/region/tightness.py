#!/usr/bin/python3
"""Tightness of the certified sup of ||J||_2 over a Frobenius ball (regatta local --ball), against eps.

For each layer: the ratio  certified sup_{B(X, eps)} ||J||_2  /  ||J(X)||_2  at eps = rho * ||X||_F, where
||J(X)||_2 is the reference (torch.autograd's Jacobian saved in tests/data/torch, or regatta's certified
upper bound at the centre for the trained layer). A ratio below 1 is impossible; 1.01 is the issue's target
at rho = 1e-3, 1.10 at rho = 1e-2. 'wide' means the enclosure was not certified (too wide).

Layers: every self-attention case of tests/data/torch without Sinkhorn, and block 0 of the trained digits ViT
(tests/data/vit_digits; pre-LayerNorm with its learned weights, residual) at the tokens reaching it for the
first test image (patch embedding, class token and positional embedding computed here in numpy).

Usage (from the repository root, after building):  /usr/bin/python3 bench/region/tightness.py [build/cli/regatta]
Prints a Markdown table.
"""
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

REGATTA = sys.argv[1] if len(sys.argv) > 1 else "build/cli/regatta"
RHOS = [1e-5, 1e-4, 1e-3, 1e-2]


def safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        dtype = {"F64": np.float64, "F32": np.float32, "I64": np.int64}[info["dtype"]]
        out[name] = np.frombuffer(data[a:b], dtype=dtype).reshape(info["shape"])
    return out


def vit_tokens(tmp):
    here = "tests/data/vit_digits"
    w = safetensors(os.path.join(here, "vit_digits.safetensors"))
    image = np.load(os.path.join(here, "test_set.npz"))["images"][0]
    conv, bias = w["patch_embed.proj.weight"], w["patch_embed.proj.bias"]  # (32, 1, 2, 2)
    p = conv.shape[-1]
    patches = [image[i:i + p, j:j + p].reshape(-1) for i in range(0, 8, p) for j in range(0, 8, p)]
    tokens = np.array(patches) @ conv.reshape(conv.shape[0], -1).T + bias
    X = np.vstack([w["cls_token"].reshape(1, -1), tokens]) + w["pos_embed"].reshape(-1, conv.shape[0])
    path = os.path.join(tmp, "vit_block0_tokens.npy")
    np.save(path, X)
    return path, X


def run(args):
    r = subprocess.run([REGATTA, "local"] + args + ["--json"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("regatta failed: " + r.stderr.strip())
    return json.loads(r.stdout)


def main():
    rows = []
    for f in sorted(glob.glob("tests/data/torch/*.npz")):
        z = np.load(f)
        if int(z["sinkhorn_iterations"]) != 1 or bool(z["cross"]):
            continue
        args = ["--layer", f, "--heads", str(int(z["heads"])), "--input", f + ":input"]
        args += ["--kind", "l2"] if int(z["kind"]) == 1 else []
        args += ["--causal"] if bool(z["causal"]) else []
        args += ["--residual"] if bool(z["residual"]) else []
        pre = int(z["prenorm"])
        if pre:
            args += ["--prenorm", "layernorm" if pre == 1 else "rmsnorm", "--norm-eps", str(float(z["norm_eps"]))]
        prefix = "".join(chr(int(c)) for c in z["layer_prefix"])  # stored as character codes
        if prefix:
            args += ["--prefix", prefix]
        rows.append((os.path.basename(f), args, np.linalg.norm(z["input"]), np.linalg.norm(z["jacobian"], 2)))
    with tempfile.TemporaryDirectory() as tmp:
        tokens, X = vit_tokens(tmp)
        args = ["--layer", "tests/data/vit_digits/vit_digits.safetensors", "--prefix", "blocks.0.", "--heads",
                "4", "--prenorm", "layernorm", "--norm-eps", "1e-6", "--residual", "--input", tokens]
        centre = run(args + ["--certify", "--dense-limit", "1024"])["jacobian_norm_2_certified_upper"]
        rows.append(("vit_digits block 0 (trained)", args, np.linalg.norm(X), centre))
        print("| layer | n·d | " + " | ".join(f"ρ = {r:g}" for r in RHOS) + " |")
        print("|---|---|" + "---|" * len(RHOS))
        for name, args, norm_x, ref in rows:
            cells, nd = [], 0
            for rho in RHOS:
                out = run(args + ["--ball", repr(rho * norm_x)])
                nd = out["n"] * out["d"]
                up = out["region"].get("sup_jacobian_norm_2_certified_upper")
                cells.append(f"{up / ref:.4g}" if up is not None else "wide")
            print(f"| {name} | {nd} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
