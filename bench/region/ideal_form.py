#!/usr/bin/python3
"""How much of the region bound's excess is the form, and how much the enclosures (an ESTIMATE, no certificate).

For each self-attention layer of tests/data/torch, torch float64 computes J(X) and the exact first-derivative
tensor T_m = dJ/dx_m at the centre (autograd of autograd). It then evaluates the spectral-gap form of
docs/local.md, reduced to the top-k right singular vectors V of J(X) (k = 1 is the form regatta uses), with
every first-order quantity exact and every remainder dropped, E = sum_m delta_m T_m:
    a = max over unit alpha of [alpha' V'J'JV alpha + rho ||(alpha' G_m alpha)_m||] + (rho t_V)^2,
        G_m = W'T_mV + (W'T_mV)', W = JV,   t_V = norm of delta -> EV (into Frobenius)
    b = (sigma_{k+1} + rho S_2)^2,          S_2 = spectral norm of the flattening [T_1 ... T_N]
    c = rho t_C + rho^2 S_2 t_V,            t_C = norm of delta -> (I - VV')(J'EV + E'W)
    ratio = sqrt(lambda_max([[a, c], [c, b]])) / ||J(X)||_2
(for k = 2 the max over alpha is taken on a grid of 4 001 angles). This is not a bound: the remainders,
which a certificate must add, can have either sign, so the value can fall below the true sup. It says what
the form could give if the enclosures of the second derivatives over the ball were as narrow as at the
centre, beside regatta's certified lower and upper ends from bench/region/tightness.json.

Usage (from the repository root):  /usr/bin/python3 bench/region/ideal_form.py [tightness.json]
Prints a Markdown table (about 15 minutes on 2 cores: the tensor at n*d = 72 is 373 248 entries by autograd).
"""
import json
import math
import os
import sys

import torch

import sampled  # bench/region/sampled.py, beside this script

torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RHOS = [1e-3, 1e-2]


def operator_norm(columns):
    """Spectral norm of delta -> sum_m delta_m columns[m] (each flattened): a bound into the Frobenius norm."""
    return float(torch.linalg.matrix_norm(torch.stack([c.reshape(-1) for c in columns], dim=1), 2))


def ideal_ratio(J, T, rho, k):
    N = J.shape[0]
    _, sv, Vh = torch.linalg.svd(J)
    V = Vh.T[:, :k]
    W = J @ V
    Q = torch.eye(N) - V @ V.T
    Tm = [T[:, :, m] for m in range(N)]
    G = torch.stack([W.T @ t @ V + (W.T @ t @ V).T for t in Tm])
    if k == 1:
        A = torch.ones(1, 1)
    else:
        theta = torch.linspace(0, math.pi, 4001)
        A = torch.stack([theta.cos(), theta.sin()], 1)
    quadratic = torch.einsum("pi,mij,pj->pm", A, G, A).norm(dim=1)
    a = float((torch.einsum("pi,ij,pj->p", A, W.T @ W, A) + rho * quadratic).max())
    t_v = operator_norm([t @ V for t in Tm])
    t_c = operator_norm([Q @ (J.T @ t @ V + t.T @ W) for t in Tm])
    s2 = float(torch.linalg.matrix_norm(T.reshape(N, N * N), 2))
    a += (rho * t_v) ** 2
    b = (float(sv[k]) + rho * s2) ** 2
    c = rho * t_c + rho ** 2 * s2 * t_v
    return math.sqrt((a + b) / 2 + math.sqrt(((a - b) / 2) ** 2 + c ** 2)) / float(sv[0])


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "tightness.json")
    with open(path) as f:
        certified = json.load(f)
    by_layer = {r["layer"]: r for r in certified["results"]}
    gen = sampled.load(os.path.join(ROOT, "tests/data/torch/generate.py"), "generate")
    print("| layer | " + " | ".join(f"ρ = {r:g}: certified lower / certified upper / ideal k = 1 / k = 2"
                                    for r in RHOS) + " |")
    print("|---|" + "---|" * len(RHOS))
    for case in gen.CASES:
        name = case.name + ".npz"
        if case.cross or case.sinkhorn != 1 or name not in by_layer:
            continue
        fn, X = sampled.torch_case_function(gen, case)
        N = X.numel()

        def jacobian(Z):
            return torch.autograd.functional.jacobian(fn, Z, create_graph=True, vectorize=True).reshape(N, N)

        J = jacobian(X).detach()
        T = torch.autograd.functional.jacobian(jacobian, X, vectorize=True).reshape(N, N, N)
        cells = []
        for rho in RHOS:
            i = certified["rhos"].index(rho)
            low, up = by_layer[name]["lower_ratios"][i], by_layer[name]["ratios"][i]
            ideal = [ideal_ratio(J, T, rho * float(X.norm()), k) for k in (1, 2)]
            # The certified ends rounded outward (down and up), the estimates to nearest.
            cells.append(f"{math.floor(low * 1e5) / 1e5:.5f} / " +
                         (f"{math.ceil(up * 1e5) / 1e5:.5f}" if up is not None else "wide") + " / " +
                         " / ".join(f"{v:.5f}" for v in ideal))
        print(f"| {case.name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
