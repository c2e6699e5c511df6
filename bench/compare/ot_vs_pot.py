#!/usr/bin/python3
"""regatta vs POT on the same random transport problems: values must agree, times are compared.

    /usr/bin/python3 bench/compare/ot_vs_pot.py [--exe build/bench/regatta_transport_npy]
        [--exact-sizes 2000 5000] [--sinkhorn-size 2000] [--epsilons 0.05 0.01] [--tolerance 1e-9]
        [--threads 1] [--seed 0]

Problems: mu, nu uniform (empirical) on n = m i.i.d. uniform points of [0, 1]^3, cost ||x - y||^2 (p = 2).

* exact:    ot.emd2(a, b, M) (POT's network simplex on the dense cost M = ot.dist(x, y)) vs
            regatta_transport_npy exact (network simplex; costs materialised for n m <= 9e6, streamed beyond).
            W_2^2 must agree to 1e-9 relative.
* sinkhorn: ot.sinkhorn(a, b, M, reg=eps, method='sinkhorn_log') vs regatta_transport_npy sinkhorn (log domain,
            eps-scaling, streamed reductions). Conventions matched: POT's reg is the absolute epsilon of
            <P, C> + eps * (KL or negative entropy) -- the same plan as regatta's KL(P | a x b) at the same
            epsilon; both report <P_eps, M>. Stopping: POT stops when the L2 norm of the column-marginal
            violation is < tol (checked every 10 iterations), regatta when the L1 norm of the row-marginal
            violation is <= tol (L1 >= L2, so regatta's test is the stricter one). The script recomputes the L1
            marginal errors of POT's plan. <P_eps, M> must agree to 1e-6 relative.

Timings: POT includes building M (it needs it; regatta computes costs inside its solve) and is reported also
without it; regatta times only the solve (not file reading). Both run with --threads threads
(OMP_NUM_THREADS / OPENBLAS_NUM_THREADS set before numpy is imported). Prints a Markdown table.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exe", default="build/bench/regatta_transport_npy")
    ap.add_argument("--exact-sizes", type=int, nargs="*", default=[2000, 5000])
    ap.add_argument("--sinkhorn-size", type=int, default=2000)
    ap.add_argument("--epsilons", type=float, nargs="*", default=[0.05, 0.01])
    ap.add_argument("--tolerance", type=float, default=1e-9)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args()


ARGS = parse()
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402  (after the thread settings)
import ot  # noqa: E402


def regatta(*args):
    out = subprocess.run([ARGS.exe, *map(str, args)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main():
    if not os.path.exists(ARGS.exe):
        sys.exit(f"{ARGS.exe} not found: configure with -DREGATTA_BUILD_BENCHMARKS=ON and build "
                 "regatta_transport_npy")
    rng = np.random.default_rng(ARGS.seed)
    tmp = tempfile.mkdtemp(prefix="ot_vs_pot_")
    rows = []
    failures = 0

    def problem(n):
        x, y = rng.random((n, 3)), rng.random((n, 3))
        xa, yb = os.path.join(tmp, f"x{n}.npy"), os.path.join(tmp, f"y{n}.npy")
        np.save(xa, x)
        np.save(yb, y)
        return x, y, xa, yb, np.full(n, 1.0 / n), np.full(n, 1.0 / n)

    for n in ARGS.exact_sizes:
        x, y, xa, yb, a, b = problem(n)
        t0 = time.perf_counter()
        M = ot.dist(x, y)
        t1 = time.perf_counter()
        pot = ot.emd2(a, b, M, numItermax=100_000_000)
        t2 = time.perf_counter()
        r = regatta("exact", xa, yb, 2)
        rel = abs(r["cost"] - pot) / abs(pot)
        ok = rel <= 1e-9 and r["status"] == "optimal"
        failures += not ok
        rows.append(("exact", n, "-", pot, r["cost"], rel, t2 - t0, t2 - t1, r["seconds"],
                     f"{r['iterations']} pivots", ok))
        del M

    n = ARGS.sinkhorn_size
    x, y, xa, yb, a, b = problem(n)
    for eps in ARGS.epsilons:
        t0 = time.perf_counter()
        M = ot.dist(x, y)
        t1 = time.perf_counter()
        G, log = ot.sinkhorn(a, b, M, eps, method="sinkhorn_log", stopThr=ARGS.tolerance,
                             numItermax=1_000_000, log=True, warn=False)
        pot = float(np.sum(G * M))
        t2 = time.perf_counter()
        pot_l1 = max(np.abs(G.sum(1) - a).sum(), np.abs(G.sum(0) - b).sum())
        r = regatta("sinkhorn", xa, yb, 2, eps, ARGS.tolerance)
        rel = abs(r["cost"] - pot) / abs(pot)
        ok = rel <= 1e-6 and r["status"] == "converged"
        failures += not ok
        rows.append((f"sinkhorn eps={eps:g}", n, f"{pot_l1:.1e} / {r['marginal_error']:.1e}", pot, r["cost"], rel,
                     t2 - t0, t2 - t1, r["seconds"], f"POT {log['niter'] + 1} / regatta {r['iterations']} it.", ok))
        del M, G

    print(f"threads = {ARGS.threads}, tolerance = {ARGS.tolerance:g}, seed = {ARGS.seed}, POT {ot.__version__}, "
          f"numpy {np.__version__}\n")
    print("| problem | n = m | L1 marginal error POT / regatta | POT value | regatta value | rel. diff | "
          "POT s (with M) | POT s (solve) | regatta s | POT/regatta | iterations | agree |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (name, n, err, pv, rv, rel, tp, tps, tr, its, ok) in rows:
        print(f"| {name} | {n} | {err} | {pv:.15g} | {rv:.15g} | {rel:.1e} | {tp:.3f} | {tps:.3f} | {tr:.3f} | "
              f"{tp / tr:.2f} | {its} | {'yes' if ok else 'NO'} |")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
