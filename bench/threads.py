#!/usr/bin/env python3
"""Wall-clock time of `regatta` commands at 1 and 2 threads, on an idle and on a loaded machine.

The load is one busy process per core (`yes > /dev/null`), started before and stopped after each loaded
measurement, as on a machine shared with other jobs. Each configuration runs --repeats times; the table gives
the median and the ratio t(2 threads) / t(1 thread) (below 1: two threads help; above 1: they hurt).

    /usr/bin/python3 bench/threads.py --exe build/cli/regatta [--repeats 5]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def commands(work):
    x97 = os.path.join(work, "x97.npy")
    np.save(x97, np.random.default_rng(0).standard_normal((97, 64)) * 0.3)
    x256 = os.path.join(work, "x256.npy")
    np.save(x256, np.random.default_rng(1).standard_normal((256, 64)) * 0.3)
    a = os.path.join(work, "a.npy")
    b = os.path.join(work, "b.npy")
    np.save(a, np.random.default_rng(2).standard_normal((300, 3)))
    np.save(b, np.random.default_rng(3).standard_normal((280, 3)))
    w = os.path.join(work, "w")
    layer = "d=64,heads=4,seed=1"
    return [
        ("local --estimate-only, d=64, 4 heads, n=97", ["local", "--random", layer, "--input", x97,
                                                        "--estimate-only", "--json"]),
        ("local --estimate-only, d=64, 4 heads, n=256", ["local", "--random", layer, "--input", x256,
                                                         "--estimate-only", "--json"]),
        ("local (certified lower), d=64, 4 heads, n=97", ["local", "--random", layer, "--input", x97, "--json"]),
        ("bracket, d=16, 4 heads, n=64, 300 evaluations", ["bracket", "--random", "d=16,heads=4,seed=1", "--n",
                                                           "64", "--evaluations", "300", "--budget", "0",
                                                           "--witness", w + ".npy", "--json"]),
        ("wasserstein exact --certify, 300 x 280 atoms", ["wasserstein", a, b, "--certify", "--json"]),
        ("norm, 192 x 192 certified", ["norm", "--random", "192x192,seed=1", "--json"]),
    ]


def timed(exe, args, threads):
    start = time.perf_counter()
    p = subprocess.run([exe, *args, "--threads", str(threads)], capture_output=True)
    elapsed = time.perf_counter() - start
    if p.returncode != 0:
        sys.exit(f"{' '.join(args)}: exit {p.returncode}: {p.stderr.decode()[:500]}")
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exe", default="build/cli/regatta")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as work:
        cases = commands(work)
        print(f"cores this process may use: {cores}; load average before: {os.getloadavg()[0]:.2f}")
        print("| command | machine | 1 thread (s) | 2 threads (s) | t2 / t1 |")
        print("|---|---|---|---|---|")
        for label, cmd in cases:
            for machine in ("idle", "loaded"):
                load = []
                if machine == "loaded":
                    load = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(cores)]
                    time.sleep(0.5)
                try:
                    t = {n: statistics.median(timed(args.exe, cmd, n) for _ in range(args.repeats))
                         for n in (1, 2)}
                finally:
                    for p in load:
                        p.kill()
                        p.wait()
                print(f"| {label} | {machine} | {t[1]:.3f} | {t[2]:.3f} | {t[2] / t[1]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
