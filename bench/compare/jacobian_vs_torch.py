#!/usr/bin/python3
"""‖J(X)‖₂ of a multi-head attention layer: `regatta local` against torch.autograd.functional.jacobian + a
matrix 2-norm.

Command (after building the `regatta` executable, see bench/RESULTS.md "Jacobian norm"):

    /usr/bin/python3 bench/compare/jacobian_vs_torch.py --regatta build-local/cli/regatta \
        --sizes 16 32 64 --regatta-only 256 --d 64 --heads 4 --threads 1

For each n: a seeded layer in PyTorch naming (nn.MultiheadAttention(d, heads, bias=True) state dict:
in_proj_weight, in_proj_bias, out_proj.weight, out_proj.bias, float64; weights N(0, 1/d), biases
N(0, 0.1²)) and tokens X ~ N(0, 1) (n × d) are written to a temporary .npz / .npy. regatta is timed as a
whole command, twice:

    regatta local --layer layer.npz --heads H --input X.npy --json --tolerance T                 (full)
    regatta local ... --estimate-only                                                              (estimate)

("full" adds the certified lower bound on ‖J‖₂ from an interval JVP, the exact ‖J‖∞ and the Havens δ;
"estimate" skips the interval evaluation). torch, in this process: nn.MultiheadAttention loaded with the
same state dict, f(x) = mha(x, x, x, need_weights=False)[0] on a batch of one, then
J = torch.autograd.functional.jacobian(f, X) (n·d × n·d; vectorize=True up to n·d = --vectorize-limit,
else one backward pass per row) and torch.linalg.matrix_norm(J, ord=2); ‖J‖∞ = max row sum of |J| is
checked too. The script requires both
norms to agree to 1e-6 relative and prints the time ratios. Sizes in --regatta-only run regatta alone (the
dense Jacobian and its SVD are out of reach there; see RESULTS.md).

Threads: torch.set_num_threads(T) and OMP_NUM_THREADS=T for regatta. For torch's LAPACK, Debian's
python3-torch links the reference libblas/liblapack unless an optimised provider is on LD_LIBRARY_PATH
(see bench/RESULTS.md, "Against PyTorch eager"); the script prints which libraries torch loaded.
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

import numpy as np
import torch


def write_case(folder, n, d, heads, seed):
    rng = np.random.default_rng(seed)
    tensors = {
        "in_proj_weight": rng.standard_normal((3 * d, d)) / np.sqrt(d),
        "in_proj_bias": 0.1 * rng.standard_normal(3 * d),
        "out_proj.weight": rng.standard_normal((d, d)) / np.sqrt(d),
        "out_proj.bias": 0.1 * rng.standard_normal(d),
    }
    X = rng.standard_normal((n, d))
    layer = os.path.join(folder, f"layer_{n}.npz")
    tokens = os.path.join(folder, f"X_{n}.npy")
    np.savez(layer, **tensors)
    np.save(tokens, X)
    return layer, tokens, tensors, X


def run_regatta(binary, layer, tokens, heads, tolerance, threads, extra):
    cmd = [binary, "local", "--layer", layer, "--heads", str(heads), "--input", tokens, "--json",
           "--tolerance", str(tolerance)] + extra
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    t0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - t0
    return json.loads(out.stdout), seconds


def run_torch(tensors, X, heads, vectorize):
    n, d = X.shape
    mha = torch.nn.MultiheadAttention(d, heads, bias=True, batch_first=True, dtype=torch.float64)
    mha.load_state_dict({k: torch.from_numpy(v) for k, v in tensors.items()})
    mha.eval()

    def f(x):
        y = x.view(1, n, d)
        return mha(y, y, y, need_weights=False)[0].reshape(-1)

    x = torch.from_numpy(X.copy()).reshape(-1)
    t0 = time.perf_counter()
    J = torch.autograd.functional.jacobian(f, x, vectorize=vectorize)
    t1 = time.perf_counter()
    two = torch.linalg.matrix_norm(J, ord=2).item()
    t2 = time.perf_counter()
    inf = J.abs().sum(dim=1).max().item()
    return two, inf, t1 - t0, t2 - t1


def loaded_blas():
    try:
        with open(f"/proc/{os.getpid()}/maps") as maps:
            libs = {line.split()[-1] for line in maps if "blas" in line or "lapack" in line}
        return ", ".join(sorted(os.path.basename(x) for x in libs)) or "none found"
    except OSError:
        return "unknown"


COLUMNS = ["n", "n·d", "‖J‖₂ torch", "‖J‖₂ regatta (estimate)", "certified lower", "rel. diff",
           "‖J‖∞ rel. diff", "torch jacobian s", "torch norm s", "torch total s", "regatta full s",
           "regatta estimate s", "Lanczos steps", "total / full", "total / estimate", "torch vmap"]


def measure(n, args, folder, with_torch):
    """One table row (strings) and whether the values agree."""
    layer, tokens, tensors, X = write_case(folder, n, args.d, args.heads, args.seed + n)
    def run(extra):
        return run_regatta(args.regatta, layer, tokens, args.heads, args.tolerance, args.threads, extra)

    full, full_s = run([])
    est, est_s = run(["--estimate-only"])
    ours, lower = full["jacobian_norm_2"], full["jacobian_norm_2_certified_lower"]
    row = {"n": n, "n·d": n * args.d, "‖J‖₂ regatta (estimate)": f"{ours:.15g}",
           "certified lower": f"{lower:.15g}", "regatta full s": f"{full_s:.2f}",
           "regatta estimate s": f"{est_s:.2f}", "Lanczos steps": full["jacobian_norm_2_iterations"]}
    ok = True
    if with_torch:
        vectorize = n * args.d <= args.vectorize_limit
        two, inf, jac_s, norm_s = run_torch(tensors, X, args.heads, vectorize)
        rel = abs(ours - two) / two
        rel_inf = abs(full["jacobian_norm_inf"] - inf) / inf
        ok = rel <= 1e-6 and rel_inf <= 1e-6 and abs(est["jacobian_norm_2"] - two) / two <= 1e-6
        total = jac_s + norm_s
        row.update({"‖J‖₂ torch": f"{two:.15g}", "rel. diff": f"{rel:.1e}",
                    "‖J‖∞ rel. diff": f"{rel_inf:.1e}",
                    "torch jacobian s": f"{jac_s:.2f}", "torch norm s": f"{norm_s:.2f}",
                    "torch total s": f"{total:.2f}", "total / full": f"{total / full_s:.0f}×",
                    "total / estimate": f"{total / est_s:.0f}×", "torch vmap": "yes" if vectorize else "no"})
    return "| " + " | ".join(str(row.get(c, "–")) for c in COLUMNS) + " |", ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--regatta", default="build-local/cli/regatta")
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--regatta-only", type=int, nargs="*", default=[256])
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tolerance", type=float, default=1e-10,
                        help="regatta --tolerance (Lanczos relative accuracy target, default 1e-10)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vectorize-limit", type=int, default=4096,
                        help="torch jacobian(vectorize=True) up to this n·d (vmap holds the intermediates of "
                             "every cotangent at once), one backward pass per row beyond")
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"regatta OMP_NUM_THREADS={args.threads}, load average {os.getloadavg()[0]:.2f}")
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes + args.regatta_only:
            line, ok = measure(n, args, tmp, with_torch=n not in args.regatta_only)
            failures += not ok
            print(line + ("" if ok else "  VALUES DISAGREE"), flush=True)
    print(f"torch BLAS/LAPACK libraries: {loaded_blas()}; load average {os.getloadavg()[0]:.2f}")
    if failures:
        raise SystemExit(f"{failures} size(s) where regatta and torch disagree beyond 1e-6")


if __name__ == "__main__":
    main()
