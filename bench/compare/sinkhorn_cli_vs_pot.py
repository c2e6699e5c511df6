#!/usr/bin/python3
"""`regatta wasserstein --method sinkhorn` (the command users run, timed as a whole process: start-up, reading
the .npy files, the solve, the JSON) vs POT ot.sinkhorn(method='sinkhorn_log'), side by side in one run.

    /usr/bin/python3 bench/compare/sinkhorn_cli_vs_pot.py [--exe build/cli/regatta] [--size 4000] [--dim 3]
        [--relative-epsilon 0.05] [--tolerance 1e-9] [--threads 2] [--repeats 3] [--seed 0] [--streamed]

Problem: mu, nu uniform on n = m i.i.d. uniform points of [0, 1]^d, C = ||x - y||^2, eps = relative-epsilon *
mean(C). `--epsilon` of the command is absolute (cost units, POT's `reg`), so the script passes eps itself.
regatta stops on the L1 norm of the row-marginal violation <= tolerance (its columns are exact); POT stops on
the L2 norm of its column violation (rows exact), checked every 10 iterations, and is run with stopThr =
tolerance / sqrt(n), which bounds its L1 error by the same tolerance (||v||_1 <= sqrt(n) ||v||_2).
Agreement required: |<P, C>_POT - <P, C>_regatta| <= (L1 error of POT + that of regatta) * max C, the change a
marginal error of that size can make in <P, C>.

Timing: the runs alternate (POT, regatta, POT, regatta, ...) so that the load of a shared machine falls on both;
the median of --repeats runs of each is reported, with the load average at the start and the end. POT's time
includes building M (it needs it; regatta's process does the equivalent work inside) and is also shown without
it. --streamed adds one run of `--sinkhorn-kernel streamed` (the log-domain path the command took before).
Threads: OMP_NUM_THREADS / OPENBLAS_NUM_THREADS = --threads for both (numpy's elementwise exp and logsumexp run
on one thread whatever the setting).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exe", default="build/cli/regatta")
    ap.add_argument("--size", type=int, default=4000)
    ap.add_argument("--dim", type=int, default=3)
    ap.add_argument("--relative-epsilon", type=float, default=0.05)
    ap.add_argument("--tolerance", type=float, default=1e-9)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--streamed", action="store_true")
    return ap.parse_args()


ARGS = parse()
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402  (after the thread settings)
import ot  # noqa: E402


def load():
    return "%.2f %.2f %.2f" % os.getloadavg()


def regatta(xa, yb, eps, kernel=None):
    cmd = [ARGS.exe, "wasserstein", xa, yb, "--method", "sinkhorn", "--epsilon", repr(eps), "--tolerance",
           repr(ARGS.tolerance), "--json"]
    if kernel:
        cmd += ["--sinkhorn-kernel", kernel]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode not in (0, 1):
        sys.exit(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.strip()}")
    r = json.loads(done.stdout)
    r["seconds"] = seconds
    return r


def pot(x, y, a, b):
    t0 = time.perf_counter()
    M = ot.dist(x, y)  # squared Euclidean
    t1 = time.perf_counter()
    eps = ARGS.relative_epsilon * float(M.mean())
    G, log = ot.sinkhorn(a, b, M, eps, method="sinkhorn_log", stopThr=ARGS.tolerance / np.sqrt(len(b)),
                         numItermax=1_000_000, log=True, warn=False)
    cost = float(np.sum(G * M))
    t2 = time.perf_counter()
    l1 = max(np.abs(G.sum(1) - a).sum(), np.abs(G.sum(0) - b).sum())
    return dict(eps=eps, cost=cost, seconds=t2 - t0, solve=t2 - t1, l1=l1, iterations=log["niter"] + 1,
                cmax=float(M.max()))


def main():
    if not os.path.exists(ARGS.exe):
        sys.exit(f"{ARGS.exe} not found: build the regatta_cli target")
    rng = np.random.default_rng(ARGS.seed)
    n, d = ARGS.size, ARGS.dim
    x, y = rng.random((n, d)), rng.random((n, d))
    tmp = tempfile.mkdtemp(prefix="sinkhorn_cli_vs_pot_")
    xa, yb = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
    np.save(xa, x)
    np.save(yb, y)
    a = b = np.full(n, 1.0 / n)
    eps = ARGS.relative_epsilon * float(ot.dist(x, y).mean())

    start_load = load()
    pots, ours = [], []
    for _ in range(ARGS.repeats):
        pots.append(pot(x, y, a, b))
        ours.append(regatta(xa, yb, eps))
    streamed = regatta(xa, yb, eps, "streamed") if ARGS.streamed else None
    end_load = load()

    p, r = pots[0], ours[0]
    pot_s = statistics.median(q["seconds"] for q in pots)
    pot_solve = statistics.median(q["solve"] for q in pots)
    our_s = statistics.median(q["seconds"] for q in ours)
    print(f"n = m = {n}, d = {d}, eps = {ARGS.relative_epsilon:g} * mean C = {eps!r} (absolute), tolerance "
          f"{ARGS.tolerance:g} (L1), threads = {ARGS.threads}, seed = {ARGS.seed}, POT {ot.__version__}, numpy "
          f"{np.__version__}; load average (1, 5, 15 min) {start_load} at the start, {end_load} at the end")
    print(f"command: {ARGS.exe} wasserstein x.npy y.npy --method sinkhorn --epsilon {eps!r} --tolerance "
          f"{ARGS.tolerance:g} --json\n")
    print("| solver | path | status | iterations | L1 marginal error | <P, C> | diff to POT | bound | "
          "seconds (runs) | median | POT median / this |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    runs = " / ".join(f"{q['seconds']:.2f}" for q in pots)
    print(f"| POT ot.sinkhorn sinkhorn_log (with M) | dense numpy | - | {p['iterations']} | {p['l1']:.1e} | "
          f"{p['cost']:.12g} | - | - | {runs} | {pot_s:.2f} (solve {pot_solve:.2f}) | 1 |")
    failures = 0
    rows = [("regatta wasserstein --method sinkhorn", ours)]
    if streamed:
        rows.append(("regatta wasserstein --method sinkhorn --sinkhorn-kernel streamed", [streamed]))
    for name, results in rows:
        q = results[0]
        diff = abs(q["cost"] - p["cost"])
        bound = (p["l1"] + q["marginal_error"]) * p["cmax"]
        same = all(s["cost"] == q["cost"] for s in results)
        ok = q["status"] == "converged" and diff <= bound and same
        failures += not ok
        med = statistics.median(s["seconds"] for s in results)
        runs = " / ".join(f"{s['seconds']:.2f}" for s in results)
        print(f"| {name} | {q['kernel']} | {q['status']} | {q['iterations']} | {q['marginal_error']:.1e} | "
              f"{q['cost']:.12g} | {diff:.1e} | {bound:.1e}{'' if ok else ' FAIL'} | {runs} | {med:.2f} | "
              f"{pot_s / med:.1f} |")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
