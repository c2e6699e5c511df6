#!/usr/bin/python3
"""Soundness stress of `regatta local --ball`: no certified number may lie below a value torch attains.

Random single-block layers (tests/data/torch/generate.py's Case, fresh seeds: dot or L2 scores, biases, float
or boolean causal masks, residuals, LayerNorm or RMSNorm before attention, the four weight layouts, weight
scales up to 5, where the softmax saturates) with hostile inputs besides their own: the input times 0.01 and
times 10, rows that are nearly constant (X = c + 10⁻³·noise, where a pre-normalisation is nearly singular) and,
for RMSNorm, a nearly zero input. For each and ρ in {10⁻⁴, 10⁻³, 10⁻², 3·10⁻²}, regatta certifies the sup of
‖J(X')‖₂ over the ball ‖X' − X‖_F ≤ ρ‖X‖_F (every form it reports, ‖J(X)‖₂ and the sup of ‖J‖∞), and torch float64
(bench/region/sampled.py: autograd Jacobians, projected gradient ascent on the sphere, random and interior
points) finds the largest value it can. Fails (exit 1) on any certified upper end below a found value, any
certified lower end above an upper one (the lower end is ‖J(X')‖₂ at a point of the ball that regatta's own
ascent found, so this pits two independent certified computations against each other), a point estimate that
disagrees with torch, or a crash of regatta. The summary also gives the largest ratio of torch's value to the
certified lower end (how far regatta's ascent falls short of torch's search).

Usage (from the repository root):
  /usr/bin/python3 bench/region/stress.py BINARY [CASES [FIRST_SEED]]     (defaults: 30 cases, seed 9000)
Writes its layer files under a temporary directory (kept when something fails); prints one line per cell
and a summary.
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch

import sampled  # bench/region/sampled.py, beside this script

torch.set_default_dtype(torch.float64)
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RHOS = [1e-4, 1e-3, 1e-2, 3e-2]
SLACK = 1e-9  # relative: torch's own rounding


def random_case(gen, seed):
    r = random.Random(seed)
    kind, naming = r.choice(["dot", "l2"]), r.choice(["in_proj", "separate", "bert", "llama"])
    prenorm, causal = r.choice(["none", "layernorm", "rmsnorm"]), r.choice([None, "float", "bool"])
    d, heads, n, scale = r.choice([4, 8]), r.choice([1, 2, 4]), r.choice([3, 4, 5, 6]), r.choice([1.5, 3.0, 5.0])
    bias, residual, eps = r.random() < 0.5, r.random() < 0.5, r.choice([1e-5, 1e-6])
    name = f"s{seed}_{kind}_d{d}_h{heads}_n{n}_{naming}_{prenorm}_x{scale:g}"
    return gen.Case(name, seed, d, heads, n, kind=kind, bias=bias, causal=causal, residual=residual,
                    prenorm=prenorm, norm_eps=eps, naming=naming, scale=scale)


def inputs(case, X):
    out = [("own", X), ("x0.01", 0.01 * X), ("x10", 10.0 * X)]
    rng = np.random.default_rng(case.seed + 777)
    if case.prenorm != "none":
        c = rng.normal(size=(case.n, 1))
        out.append(("flat rows", torch.tensor(c + 1e-3 * rng.normal(size=(case.n, case.d)))))
    if case.prenorm == "rmsnorm":
        out.append(("near zero", torch.tensor(1e-3 * rng.normal(size=(case.n, case.d)))))
    return out


def arguments(gen, case, path):
    a = ["--layer", path, "--heads", str(case.heads), "--input", path + ":input"]
    a += ["--kind", "l2"] if case.kind == "l2" else []
    a += ["--causal"] if case.causal else []
    a += ["--residual"] if case.residual else []
    if case.prenorm != "none":
        a += ["--prenorm", case.prenorm, "--norm-eps", repr(case.norm_eps)]
    if gen.PREFIX[case.naming]:
        a += ["--prefix", gen.PREFIX[case.naming]]
    if case.naming == "llama":
        a += ["--rope", "none"]
    return a


def certified(region):
    """(upper ends of sup ‖J‖₂ by every form, lower end of the sup, upper end of sup ‖J‖∞, upper end of
    ‖J(X)‖₂)."""
    so = region.get("second_order") or {}
    uppers = [region.get("sup_jacobian_norm_2_certified_upper"), so.get("sup_jacobian_norm_2_certified_upper"),
              (so.get("spectral_gap") or {}).get("sup_jacobian_norm_2_certified_upper"),
              (region.get("closed_form_2") or {}).get("certified_upper")]
    return ([u for u in uppers if u is not None], region.get("sup_jacobian_norm_2_certified_lower"),
            region.get("sup_jacobian_norm_inf_certified_upper"), so.get("centre_jacobian_norm_2_certified_upper"))


def main():
    binary = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    first = int(sys.argv[3]) if len(sys.argv) > 3 else 9000
    gen = sampled.load(os.path.join(ROOT, "tests/data/torch/generate.py"), "generate")
    work = tempfile.mkdtemp(prefix="regatta-stress-")
    gen.HERE = work  # make_case writes <HERE>/<name>.npz
    failures, cells, certified_cells, tightest = [], 0, 0, (float("inf"), "")
    behind = (0.0, "")  # the largest found / certified lower end: how far regatta's own ascent falls short
    for seed in range(first, first + count):
        case = random_case(gen, seed)
        gen.make_case(case)
        own = os.path.join(work, case.name + ".npz")
        z = np.load(own)
        arrays = {k: z[k] for k in z.files}
        prefix = gen.PREFIX[case.naming]
        if prefix and case.prenorm != "none":  # regatta reads the norm's weights under the prefix (layer.hpp)
            arrays = {(prefix + k if k in ("norm.weight", "norm.bias") else k): v for k, v in arrays.items()}
        fn, X0 = sampled.torch_case_function(gen, case)
        for tag, X in inputs(case, X0):
            path = os.path.join(work, f"{case.name}_{tag.replace(' ', '_')}.npz")
            gen.write_npz(path, dict(arrays, input=X.numpy().copy()))
            nd = X.numel()
            J = torch.autograd.functional.jacobian(fn, X, vectorize=True).reshape(nd, nd)
            centre = float(torch.linalg.matrix_norm(J, 2))
            for rho in RHOS:
                cells += 1
                eps = rho * float(X.norm())
                cmd = [binary, "local"] + arguments(gen, case, path) + ["--ball", repr(eps), "--norms-only", "--json"]
                where = f"{case.name} [{tag}] rho {rho:g}"
                try:
                    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
                except subprocess.TimeoutExpired:
                    failures.append(f"{where}: no answer in 300 s: {' '.join(cmd)}")
                    continue
                if run.returncode != 0:
                    failures.append(f"{where}: exit {run.returncode}: {run.stderr.strip()[:200]}: {' '.join(cmd)}")
                    continue
                out = json.loads(run.stdout)
                uppers, lower, inf_upper, centre_upper = certified(out["region"])
                found = sampled.sampled_sup(fn, X, eps)
                if uppers and min(uppers) < found * 1.01:  # close: search harder, inside the ball too
                    found = max([found, sampled.sampled_sup(fn, X, eps, steps=20, randoms=20, seed=1)] +
                                [sampled.sampled_sup(fn, X, q * eps, steps=10, randoms=4, seed=2) for q in (0.5, 0.9)])
                gen_inf = torch.Generator().manual_seed(5)
                found_inf = float(J.abs().sum(1).max())
                for _ in range(4):
                    U = torch.randn(X.shape, generator=gen_inf)
                    Z = X + eps * U / U.norm()
                    JZ = torch.autograd.functional.jacobian(fn, Z, vectorize=True).reshape(nd, nd)
                    found_inf = max(found_inf, float(JZ.abs().sum(1).max()))
                wrong = [f"certified upper {u!r} < found {found!r}" for u in uppers if u < found * (1 - SLACK)]
                if lower is not None and uppers and lower > min(uppers):
                    wrong.append(f"certified lower end {lower!r} above the upper end {min(uppers)!r}")
                if lower is not None:
                    behind = max(behind, (found / lower, where))
                if centre_upper is not None and centre_upper < centre * (1 - SLACK):
                    wrong.append(f"certified ||J(X)||_2 <= {centre_upper!r} below torch's {centre!r}")
                if inf_upper is not None and inf_upper < found_inf * (1 - SLACK):
                    wrong.append(f"certified sup ||J||_inf {inf_upper!r} < found {found_inf!r}")
                if abs(out["jacobian_norm_2"] - centre) > 1e-9 * centre:
                    wrong.append(f"point estimate {out['jacobian_norm_2']!r} against torch {centre!r}")
                failures += [f"{where}: {w}: {' '.join(cmd)}" for w in wrong]
                region = out["region"].get("sup_jacobian_norm_2_certified_upper")
                if region is not None:
                    certified_cells += 1
                    tightest = min(tightest, (region / found, where))
                    shown = f"region bound/found {region / found:.6g}"
                else:
                    shown = f"{out['region'].get('status', 'not certified')}; best bound/found " + \
                        (f"{min(uppers) / found:.6g}" if uppers else "none")
                if lower is not None:
                    shown += f"; found/certified lower {found / lower:.6g}"
                print(f"{where}: {shown}{' FAIL' if wrong else ''}", flush=True)
    print(f"\n{count} layers, {cells} cells, {certified_cells} with a certified region bound; smallest bound/found "
          f"{tightest[0]:.15g} ({tightest[1]}); largest found/certified lower end {behind[0]:.9g} ({behind[1]}); "
          f"{len(failures)} failures")
    for f in failures:
        print("FAIL " + f)
    if failures:
        print(f"the layer files are kept in {work} for the commands above")
        sys.exit(1)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
