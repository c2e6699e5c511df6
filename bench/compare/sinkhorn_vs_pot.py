#!/usr/bin/python3
"""regatta's attention-kernel Sinkhorn (sinkhorn_sq_euclidean) vs POT ot.sinkhorn(method='sinkhorn_log'),
side by side on the same problem: values must agree to the marginal tolerance, times are compared.

    /usr/bin/python3 bench/compare/sinkhorn_vs_pot.py [--exe build/bench/regatta_transport_npy]
        [--size 4000] [--dim 3] [--relative-epsilon 0.05] [--tolerance 1e-9] [--float32-tolerance 1e-5]
        [--threads 2] [--seed 0] [--large 0]

Problem: mu, nu uniform on n = m i.i.d. uniform points of [0, 1]^d, C = ||x - y||^2, eps = relative-epsilon *
mean(C) (absolute, POT's reg). Conventions as in ot_vs_pot.py: the same entropic plan; both report <P, C>.
POT stops on the L2 norm of the column-marginal violation (checked every 10 iterations), regatta on the L1
norm of the row-marginal violation; POT is run with stopThr = tolerance / sqrt(n), which bounds its L1 error by
the same tolerance (||v||_1 <= sqrt(n) ||v||_2), so both plans are feasible to the same L1 tolerance. Agreement: |<P, C>_POT - <P, C>_regatta| <= (L1 marginal
error of POT + that of regatta) * max C, the change of <P, C> a marginal error of that size can make; the
script prints that bound beside the difference.

Runs: POT (float64, numpy on the dense M) at --tolerance and at --float32-tolerance, regatta's previous
Sinkhorn (streamed pairwise::reduce, float64), regatta's attention-kernel Sinkhorn in float64 and in float32
storage with float64 accumulation (float32 at --float32-tolerance: its scores carry ~1e-7 relative
rounding), each plain and over-relaxed (--over-relaxation, the same fixed point), each with the streamed
log-domain iteration and with the dense-kernel scaling iteration (SinkhornKernel::dense: the stabilised
Gibbs kernel materialised, absorbed and rebuilt per epsilon stage; convergence still decided on the exact
log-domain marginal error). Each regatta row is compared
with POT at the same tolerance. All with --threads threads (OMP_NUM_THREADS /
OPENBLAS_NUM_THREADS set before numpy is imported; numpy's elementwise exp and logsumexp run on one thread
whatever the setting). POT's time includes building M (it needs it) and is also shown without it.
--large N additionally runs N points per side through the float32 kernel for 2 iterations under
/usr/bin/time to report the peak resident memory.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exe", default="build/bench/regatta_transport_npy")
    ap.add_argument("--size", type=int, default=4000)
    ap.add_argument("--dim", type=int, default=3)
    ap.add_argument("--relative-epsilon", type=float, default=0.05)
    ap.add_argument("--tolerance", type=float, default=1e-9)
    ap.add_argument("--float32-tolerance", type=float, default=1e-5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--large", type=int, default=0)
    ap.add_argument("--over-relaxation", type=float, default=1.5)
    return ap.parse_args()


ARGS = parse()
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402  (after the thread settings)
import ot  # noqa: E402


def regatta(*args, timed=False):
    cmd = [ARGS.exe, *map(str, args)]
    if timed:
        cmd = ["/usr/bin/time", "-v", *cmd]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    result = json.loads(out.stdout)
    if timed:
        result["max_rss_kb"] = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", out.stderr).group(1))
    return result


def main():
    if not os.path.exists(ARGS.exe):
        sys.exit(f"{ARGS.exe} not found: configure with -DREGATTA_BUILD_BENCHMARKS=ON and build "
                 "regatta_transport_npy")
    rng = np.random.default_rng(ARGS.seed)
    tmp = tempfile.mkdtemp(prefix="sinkhorn_vs_pot_")
    n, d = ARGS.size, ARGS.dim
    x, y = rng.random((n, d)), rng.random((n, d))
    xa, yb = os.path.join(tmp, "x.npy"), os.path.join(tmp, "y.npy")
    np.save(xa, x)
    np.save(yb, y)
    a = b = np.full(n, 1.0 / n)

    def pot_run(tol):
        t0 = time.perf_counter()
        M = ot.dist(x, y)
        t1 = time.perf_counter()
        eps = ARGS.relative_epsilon * float(M.mean())
        G, log = ot.sinkhorn(a, b, M, eps, method="sinkhorn_log", stopThr=tol, numItermax=1_000_000, log=True,
                             warn=False)
        value = float(np.sum(G * M))
        t2 = time.perf_counter()
        l1 = max(np.abs(G.sum(1) - a).sum(), np.abs(G.sum(0) - b).sum())
        return dict(eps=eps, value=value, with_m=t2 - t0, solve=t2 - t1, l1=l1, iterations=log["niter"] + 1,
                    cmax=float(M.max()))

    # POT's test is on the L2 norm of the column violation; ||v||_1 <= sqrt(n) ||v||_2, so stopThr = tol / sqrt(n)
    # guarantees POT's L1 marginal error <= tol, the test regatta applies (its columns are exact).
    pots = {tol: pot_run(tol / np.sqrt(n)) for tol in sorted({ARGS.tolerance, ARGS.float32_tolerance})}
    eps = pots[ARGS.tolerance]["eps"]
    w = ARGS.over_relaxation
    def attention(kernel, storage, tol, omega):
        return ["sinkhorn_attention", xa, yb, 2, eps, tol, ARGS.threads, storage, 10**6, omega, kernel]

    f32 = ARGS.float32_tolerance
    runs = [("regatta sinkhorn (pairwise::reduce), float64", ARGS.tolerance,
             ["sinkhorn", xa, yb, 2, eps, ARGS.tolerance, ARGS.threads])]
    for kernel in ("streamed", "dense"):
        what = "log-domain, streamed" if kernel == "streamed" else "scaling, dense kernel (absorption)"
        runs += [(f"sinkhorn_sq_euclidean {what}, float64", ARGS.tolerance,
                  attention(kernel, "float64", ARGS.tolerance, 1)),
                 (f"sinkhorn_sq_euclidean {what}, float64, over-relaxation {w:g}", ARGS.tolerance,
                  attention(kernel, "float64", ARGS.tolerance, w)),
                 (f"sinkhorn_sq_euclidean {what}, float32 storage / float64 accumulation", f32,
                  attention(kernel, "float32", f32, 1)),
                 (f"sinkhorn_sq_euclidean {what}, float32 / float64 accumulation, over-relaxation {w:g}", f32,
                  attention(kernel, "float32", f32, w))]
    print(f"n = m = {n}, d = {d}, eps = {ARGS.relative_epsilon:g} * mean C = {eps:.6g}, threads = {ARGS.threads}, "
          f"seed = {ARGS.seed}, POT {ot.__version__}, numpy {np.__version__}, load: {os.getloadavg()}\n")
    print("| solver | tolerance | status | iterations | L1 marginal error | <P, C> | diff to POT (same tol.) | "
          "bound | seconds | POT (with M) / this | POT (solve) / this |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for tol, p in pots.items():
        print(f"| POT ot.sinkhorn sinkhorn_log | {tol / np.sqrt(n):.2g} (L2, columns) | - | {p['iterations']} | {p['l1']:.1e} | "
              f"{p['value']:.12g} | - | - | {p['with_m']:.3f} (solve {p['solve']:.3f}) | 1 | 1 |")
    failures = 0
    for name, tol, args in runs:
        p = pots[tol]
        r = regatta(*args)
        diff = abs(r["cost"] - p["value"])
        bound = (p["l1"] + r["marginal_error"]) * p["cmax"]
        ok = r["status"] == "converged" and diff <= bound
        failures += not ok
        print(f"| {name} [{r.get('kernel', 'streamed')}] | {tol:g} (L1, rows) | {r['status']} | {r['iterations']} | "
              f"{r['marginal_error']:.1e} | {r['cost']:.12g} | {diff:.1e} | {bound:.1e}{'' if ok else ' FAIL'} | "
              f"{r['seconds']:.3f} | {p['with_m'] / r['seconds']:.1f} | {p['solve'] / r['seconds']:.1f} |")

    if ARGS.large:
        xl, yl = os.path.join(tmp, "xl.npy"), os.path.join(tmp, "yl.npy")
        np.save(xl, rng.random((ARGS.large, d)))
        np.save(yl, rng.random((ARGS.large, d)))
        r = regatta("sinkhorn_attention", xl, yl, 2, eps, ARGS.float32_tolerance, ARGS.threads, "float32", 2,
                    timed=True)
        print(f"\n{ARGS.large} points per side, float32 storage, 2 iterations: {r['seconds']:.1f} s, peak RSS "
              f"{r['max_rss_kb'] / 1024:.1f} MB (estimate of the working set; status {r['status']})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
