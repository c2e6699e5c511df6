#!/usr/bin/python3
"""Reference data for the fused-projection layouts of load_layer (tests/operators/layer_layouts_test.cpp).

Made with:  /usr/bin/python3 tests/data/layouts/generate.py    (Debian's python3-torch, python3-numpy)

Two pre-norm attention sublayers, y = x + Attn(Norm(x)), stored under the names real checkpoints use, with
their outputs computed here in torch the way the published model code computes them:

  timm_vit_block.npz  timm VisionTransformer Block: blocks.0.norm1 (LayerNorm, eps 1e-6),
                             blocks.0.attn.qkv (Linear d -> 3d; rows q|k|v, heads contiguous),
                             blocks.0.attn.proj; qkv(x).reshape(n, 3, H, d/H).permute(1, 2, 0, 3),
                             softmax(q k^T * (d/H)^-1/2) v, heads concatenated, proj.
                             Also blocks.0.norm2 and blocks.0.mlp.fc1 (present in real files, not used).
  gpt2_block.npz      Hugging Face GPT2Block: h.0.ln_1 (LayerNorm, eps 1e-5), h.0.attn.c_attn
                             (Conv1D: weight d x 3d, x @ W + b), split into q|k|v, causal mask,
                             softmax(q k^T / sqrt(d/H)) v, h.0.attn.c_proj (Conv1D d x d).
                             Also h.0.ln_2 and h.0.mlp.c_proj (present in real files, not used).

Every tensor is float64, drawn from numpy's PCG64 with a fixed seed, so re-running rewrites the same values.
Each file also holds `input` (n x d) and `output` (n x d).
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
torch.set_default_dtype(torch.float64)
N, D, H = 5, 8, 2


def attention(q, k, v, causal):
    n, d = q.shape
    hd = d // H
    q, k, v = (t.reshape(n, H, hd).transpose(0, 1) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) * hd ** -0.5
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    return (scores.softmax(-1) @ v).transpose(0, 1).reshape(n, d)


def timm(rng):
    t = {
        "blocks.0.norm1.weight": 1 + 0.2 * rng.standard_normal(D),
        "blocks.0.norm1.bias": 0.1 * rng.standard_normal(D),
        "blocks.0.attn.qkv.weight": rng.standard_normal((3 * D, D)) / np.sqrt(D),
        "blocks.0.attn.qkv.bias": 0.1 * rng.standard_normal(3 * D),
        "blocks.0.attn.proj.weight": rng.standard_normal((D, D)) / np.sqrt(D),
        "blocks.0.attn.proj.bias": 0.1 * rng.standard_normal(D),
        "blocks.0.norm2.weight": 1 + 0.2 * rng.standard_normal(D),
        "blocks.0.norm2.bias": 0.1 * rng.standard_normal(D),
        "blocks.0.mlp.fc1.weight": rng.standard_normal((2 * D, D)) / np.sqrt(D),
    }
    x = torch.tensor(rng.standard_normal((N, D)))
    T = {k: torch.tensor(v) for k, v in t.items()}
    z = F.layer_norm(x, (D,), T["blocks.0.norm1.weight"], T["blocks.0.norm1.bias"], 1e-6)
    qkv = F.linear(z, T["blocks.0.attn.qkv.weight"], T["blocks.0.attn.qkv.bias"])
    q, k, v = qkv.reshape(N, 3, D).unbind(1)
    y = x + F.linear(attention(q, k, v, False), T["blocks.0.attn.proj.weight"], T["blocks.0.attn.proj.bias"])
    t["input"], t["output"] = x.numpy(), y.numpy()
    return t


def gpt2(rng):
    t = {
        "h.0.ln_1.weight": 1 + 0.2 * rng.standard_normal(D),
        "h.0.ln_1.bias": 0.1 * rng.standard_normal(D),
        "h.0.attn.c_attn.weight": rng.standard_normal((D, 3 * D)) / np.sqrt(D),
        "h.0.attn.c_attn.bias": 0.1 * rng.standard_normal(3 * D),
        "h.0.attn.c_proj.weight": rng.standard_normal((D, D)) / np.sqrt(D),
        "h.0.attn.c_proj.bias": 0.1 * rng.standard_normal(D),
        "h.0.ln_2.weight": 1 + 0.2 * rng.standard_normal(D),
        "h.0.mlp.c_proj.weight": rng.standard_normal((4 * D, D)) / np.sqrt(D),
    }
    x = torch.tensor(rng.standard_normal((N, D)))
    T = {k: torch.tensor(v) for k, v in t.items()}
    z = F.layer_norm(x, (D,), T["h.0.ln_1.weight"], T["h.0.ln_1.bias"], 1e-5)
    qkv = z @ T["h.0.attn.c_attn.weight"] + T["h.0.attn.c_attn.bias"]  # Conv1D: x W + b
    q, k, v = qkv.split(D, dim=1)
    y = x + attention(q, k, v, True) @ T["h.0.attn.c_proj.weight"] + T["h.0.attn.c_proj.bias"]
    t["input"], t["output"] = x.numpy(), y.numpy()
    return t


def main():
    for name, make, seed in (("timm_vit_block", timm, 101), ("gpt2_block", gpt2, 102)):
        np.savez(os.path.join(HERE, name + ".npz"), **make(np.random.default_rng(seed)))


if __name__ == "__main__":
    main()
