#!/usr/bin/python3
"""The largest ||J(X')||_2 found in the ball B(X, eps), in torch float64, against regatta's certified sup.

An independent computation for bench/region/tightness.py: for every layer of that table, torch rebuilds the
block (tests/data/torch/generate.py's own functions and seeds; for the digits ViT, block 0's attention
sub-layer x + proj(MHA(LayerNorm(x))) written here from vit_digits.safetensors), computes J(X') with
torch.autograd.functional.jacobian and sigma_max with torch.linalg.matrix_norm(., 2), and searches the sphere
||X' - X||_F = eps by projected gradient ascent on sigma_max(J(X')) started along the steepest direction
(the gradient of sigma_max at X), plus random sphere points. The best value found is an ESTIMATE of the sup
from below: a certified upper end must lie above it, and no sound bound can be closer to ||J(X)||_2 than it.

Usage (from the repository root):  /usr/bin/python3 bench/region/sampled.py [tightness.json]
Prints a Markdown table: per layer and rho, the sampled ratio sup/||J(X)||_2 and, from tightness.json
(bench/region/tightness.json by default), the certified lower and upper ratios (regatta's own ascent in the
ball, verified in interval arithmetic, and its certified sup); it fails if a certified upper ratio lies below
the sampled one or below the certified lower one.
"""
import importlib.util
import json
import math
import os
import sys

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def torch_case_function(gen, case):
    """fn(X) of one case and its input, exactly as generate.make_case builds them."""
    rng = np.random.default_rng(case.seed)
    w = gen.draw_weights(rng, case)
    gamma, beta = gen.norm_parameters(rng, case)
    X = gen.tensor(rng.normal(size=(case.n, case.d)))
    mask = gen.causal_mask(case, case.n, case.n)
    norm = gen.prenormalise(case, gamma, beta)
    attention = gen.torch_module_attention(case, w) if case.kind == "dot" and case.sinkhorn == 1 else \
        gen.manual_attention(case, w, case.kind, case.sinkhorn)
    fn = gen.block(case, attention, norm, mask)
    return (lambda Z: fn(Z, Z)), X


def vit_function(tightness):
    w = tightness.safetensors(os.path.join(ROOT, "tests/data/vit_digits/vit_digits.safetensors"))
    t = {k: torch.tensor(np.array(v, dtype=np.float64)) for k, v in w.items() if k.startswith("blocks.0.")}
    X = tightness.vit_tokens_array()
    d, H = 32, 4
    dh = d // H

    def fn(Z):
        Y = torch.nn.functional.layer_norm(Z, (d,), t["blocks.0.norm1.weight"], t["blocks.0.norm1.bias"], 1e-6)
        qkv = Y @ t["blocks.0.attn.qkv.weight"].T + t["blocks.0.attn.qkv.bias"]
        out = torch.zeros_like(Z)
        heads = []
        for h in range(H):
            q = qkv[:, h * dh:(h + 1) * dh]
            k = qkv[:, d + h * dh:d + (h + 1) * dh]
            v = qkv[:, 2 * d + h * dh:2 * d + (h + 1) * dh]
            heads.append(torch.softmax(q @ k.T / math.sqrt(dh), dim=1) @ v)
        out = torch.cat(heads, dim=1) @ t["blocks.0.attn.proj.weight"].T + t["blocks.0.attn.proj.bias"]
        return Z + out

    return fn, torch.tensor(X)


def sigma(fn, Z, graph=False):
    nd = Z.numel()
    J = torch.autograd.functional.jacobian(fn, Z, create_graph=graph, vectorize=True).reshape(nd, nd)
    return torch.linalg.matrix_norm(J, 2)


def sampled_sup(fn, X, eps, steps=8, randoms=8, seed=0):
    """Largest sigma_max(J) found on the sphere of radius eps (projected gradient ascent, random points)."""
    def grad(Z):
        Z = Z.clone().requires_grad_(True)
        s = sigma(fn, Z, graph=True)
        (g,) = torch.autograd.grad(s, Z)
        return float(s), g

    _, g = grad(X)
    best = 0.0
    # A saturated softmax can make a gradient exactly zero: then there is no ascent direction, and the
    # random points below are the search.
    for sign in ((1.0, -1.0) if float(g.norm()) > 0 else ()):
        Z = X + sign * eps * g / g.norm()
        for _ in range(steps):
            s, gz = grad(Z)
            best = max(best, s)
            if not float(gz.norm()) > 0:
                break
            # ascent step within the sphere: move along the gradient, project back onto ||Z - X|| = eps
            D = (Z - X) + 0.5 * eps * gz / gz.norm()
            Z = X + eps * D / D.norm()
        best = max(best, float(sigma(fn, Z)))
    gen = torch.Generator().manual_seed(seed)
    for _ in range(randoms):
        U = torch.randn(X.shape, generator=gen)
        best = max(best, float(sigma(fn, X + eps * U / U.norm())))
    return best


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "tightness.json")
    with open(path) as f:
        certified = json.load(f)
    rhos = certified["rhos"]
    by_layer = {r["layer"]: r for r in certified["results"]}
    gen = load(os.path.join(ROOT, "tests/data/torch/generate.py"), "generate")
    sys.argv = sys.argv[:1]
    tightness = load(os.path.join(HERE, "tightness.py"), "tightness")
    layers = [(c.name + ".npz", *torch_case_function(gen, c)) for c in gen.CASES
              if not c.cross and c.sinkhorn == 1]
    layers.append(("vit_digits block 0 (trained)", *vit_function(tightness)))
    print("| layer | " + " | ".join(f"ρ = {r:g}: sampled / certified lower / certified upper" for r in rhos) + " |")
    print("|---|" + "---|" * len(rhos))
    for name, fn, X in layers:
        if name not in by_layer:
            continue
        centre = float(sigma(fn, X))
        cells = []
        lowers = by_layer[name].get("lower_ratios") or [None] * len(rhos)
        for rho, cert, low in zip(rhos, by_layer[name]["ratios"], lowers):
            s = sampled_sup(fn, X, rho * float(X.norm())) / centre
            if cert is not None and cert < s * (1 - 1e-9):
                raise SystemExit(f"{name} rho {rho}: certified ratio {cert} below the sampled {s}")
            if cert is not None and low is not None and cert < low * (1 - 1e-12):
                raise SystemExit(f"{name} rho {rho}: certified upper ratio {cert} below the certified lower {low}")
            # The sampled value is an estimate (to nearest); the certified ends are rounded outward.
            cells.append(f"{s:.6g} / " + (f"{math.floor(low * 1e5) / 1e5:.5f}" if low is not None else "-") +
                         " / " + (f"{math.ceil(cert * 1e5) / 1e5:.5f}" if cert is not None else "wide"))
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
