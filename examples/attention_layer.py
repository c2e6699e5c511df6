#!/usr/bin/env python3
"""A live PyTorch attention layer analysed with regatta (docs/python.md). Runs in a few seconds:
    PYTHONPATH=build/python /usr/bin/python3 examples/attention_layer.py
"""
import numpy as np
import torch

import regatta

torch.manual_seed(0)
mha = torch.nn.MultiheadAttention(embed_dim=8, num_heads=2, batch_first=True).double().eval()
layer = regatta.Layer.from_torch(mha, causal=True)
print(layer)

# Forward pass: the same numbers as PyTorch (double precision; an estimate, like any float computation).
X = torch.randn(6, 8, dtype=torch.float64)
mask = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)
ours = layer(X)
theirs = mha(X[None], X[None], X[None], attn_mask=mask, need_weights=False)[0][0].detach().numpy()
print(f"forward: max |regatta - torch| = {np.abs(ours - theirs).max():.1e}")

# Local Lipschitz constant at X: an estimate from below and a certified enclosure.
local = layer.local(X, certify=True)
print(f"||J(X)||_2   estimate {local.norm_2}, certified {local.norm_2_interval}")
print(f"||J(X)||_inf estimate {local.norm_inf}, certified {local.norm_inf_interval}")

# Every published or derived bound that applies to tokens in the ball of radius 3, with its claim ID.
for bound in layer.bounds(6, radius=3.0, norm="2"):
    if bound.applies:
        print(f"bound {bound.id:28s} certified upper {bound.certified_upper}  [{bound.provenance}]")

# A certified bracket of the Lipschitz constant on 4 tokens in the ball of radius 1 (progress bar with tqdm).
bracket = layer.bracket(4, radius=1.0, certify=True, budget=5, evaluations=2000, progress=True)
print(f"Lipschitz constant on B_1^4: {bracket.interval if bracket.certified else (bracket.lower, bracket.upper)} "
      f"(upper from {bracket.bound}); witness from {bracket.witness_origin}")

# How far attention moves the empirical measure of the tokens: W_2, exact with a certified bracket.
w = regatta.wasserstein(X, ours, certify=True)
print(f"W_2(mu_X, F(mu_X)) = {w.value} (estimate), certified {w.bracket}")
