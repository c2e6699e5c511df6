#!/usr/bin/python3
"""regatta's streamed attention (pairwise::reduce, blocked CPU path) against PyTorch eager attention.

Command (after building regatta_pairwise_npy, see bench/RESULTS.md "Pairwise kernel"):

    /usr/bin/python3 bench/compare/attention_vs_torch.py \
        --binary build-fast/bench/regatta_pairwise_npy --threads 2 --sizes 1024 4096 --d 64 --reps 7

Optionally run torch on OpenBLAS instead of Debian's reference BLAS without touching the system (the
Debian package python3-torch is built with BLAS_INFO=generic and links libblas.so.3, which is the netlib
reference BLAS unless another provider is installed):

    apt-get download libopenblas0-pthread && dpkg -x libopenblas0-pthread_*.deb /tmp/openblas
    LD_LIBRARY_PATH=/tmp/openblas/usr/lib/x86_64-linux-gnu/openblas-pthread OPENBLAS_NUM_THREADS=2 \
        /usr/bin/python3 bench/compare/attention_vs_torch.py ...

For each size and dtype (float64, float32) in one run: seeded q, k, v (n = m, d, e = d, standard normal)
are saved as .npy; regatta_pairwise_npy runs reduce<double / float> with --threads T (median of --reps
timed runs after a warm-up, measured inside the binary, file I/O excluded); torch eager
softmax(q @ k.T * s, -1) @ v runs in this process with torch.set_num_threads(T) (median of --reps after
--warmup runs). s = 1/sqrt(d). The outputs are compared (max |regatta − torch| / max |torch|). Also printed:
torch.mm's GEMM rate for (n×d)·(d×n) and (n×n)·(n×d), and regatta's rate in 4·n·m·d flops per second as a
fraction of it. Install: apt-get install -y python3-torch python3-numpy.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np
import torch


def median_time(fn, reps, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def torch_gemm_rate(n, d, dtype, reps):
    g = torch.Generator().manual_seed(7)
    a = torch.randn(n, d, dtype=dtype, generator=g)
    b = torch.randn(d, n, dtype=dtype, generator=g)
    c = torch.randn(n, n, dtype=dtype, generator=g)
    t1 = median_time(lambda: a @ b, reps, 1)
    t2 = median_time(lambda: c @ a, reps, 1)
    return 2 * n * n * d / t1 / 1e9, 2 * n * n * d / t2 / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--binary", default="build-fast/bench/regatta_pairwise_npy")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 1024])
    parser.add_argument("--d", type=int, default=64)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    print(f"torch {torch.__version__}, torch.get_num_threads() = {torch.get_num_threads()}, "
          f"regatta --threads {args.threads}, load average {os.getloadavg()[0]:.2f}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            d = args.d
            rng = np.random.default_rng(args.seed + n)
            q64, k64, v64 = (rng.standard_normal((n, d)) for _ in range(3))
            scale = 1.0 / np.sqrt(d)
            for dtype_name, np_dtype, torch_dtype in (("float64", np.float64, torch.float64),
                                                      ("float32", np.float32, torch.float32)):
                q, k, v = (a.astype(np_dtype) for a in (q64, k64, v64))
                paths = [os.path.join(tmp, f"{name}.npy") for name in ("q", "k", "v", "out")]
                for path, a in zip(paths, (q, k, v)):
                    np.save(path, a)
                cmd = [args.binary, *paths[:3], "--out", paths[3], "--dtype", dtype_name, "--scale", repr(scale),
                       "--threads", str(args.threads), "--reps", str(args.reps)]
                report = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout)
                ours = np.load(paths[3])

                tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
                with torch.no_grad():
                    eager = lambda: torch.softmax(tq @ tk.T * scale, -1) @ tv
                    t_torch = median_time(eager, args.reps, args.warmup)
                    ref = eager().numpy()
                    # The double-precision result on the same (rounded) inputs, to tell the two errors apart.
                    exact = (torch.softmax(tq.double() @ tk.double().T * scale, -1) @ tv.double()).numpy()
                err_vs_torch = float(np.max(np.abs(ours - ref)) / np.max(np.abs(ref)))
                err_ours = float(np.max(np.abs(ours - exact)) / np.max(np.abs(exact)))
                err_torch = float(np.max(np.abs(ref - exact)) / np.max(np.abs(exact)))
                gemm1, gemm2 = torch_gemm_rate(n, d, torch_dtype, args.reps)
                t_ours = report["median_s"]
                rate = 4.0 * n * n * d / t_ours / 1e9
                rows.append((n, d, dtype_name, t_ours, t_torch, err_vs_torch, err_ours, err_torch, rate, gemm1, gemm2))

    print()
    print("| n = m | d = e | dtype | regatta (ms) | torch eager (ms) | speed-up | max rel. diff vs torch "
          "| regatta err vs f64 | torch err vs f64 | regatta GFLOP/s | torch.mm GFLOP/s (n×d·d×n / n×n·n×d) "
          "| regatta / best torch.mm |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, d, dt, t_ours, t_torch, e_vs, e_ours, e_torch, rate, g1, g2 in rows:
        print(f"| {n} | {d} | {dt} | {t_ours * 1e3:.2f} | {t_torch * 1e3:.2f} | {t_torch / t_ours:.2f}× "
              f"| {e_vs:.1e} | {e_ours:.1e} | {e_torch:.1e} | {rate:.1f} | {g1:.1f} / {g2:.1f} "
              f"| {rate / max(g1, g2):.2f} |")


if __name__ == "__main__":
    main()
