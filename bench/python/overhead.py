#!/usr/bin/env python3
"""Per-call overhead of the Python module over the C++ call it wraps (issue #17: <= 50 us).

For a small self-attention forward pass (the C++ work is a few microseconds, so the difference is the
binding's cost) it times, in one process:
  cxx     operators::attend in a C++ loop (regatta._regatta.LayerCore._time_attend: no Python in the loop)
  python  regatta.Layer.__call__ (argument conversion, GIL release, result wrapping) from Python
  torch   the same call with a torch tensor argument (converted through NumPy)
and prints the medians of `repeats` batches and the overhead python - cxx. It also checks that a
C-contiguous float64 input needs no conversion buffer. Run from the build tree:
    PYTHONPATH=build/python /usr/bin/python3 bench/python/overhead.py
"""
import argparse
import statistics
import time

import numpy as np

import regatta


def per_call(fn, calls):
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--d", type=int, default=16)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    layer = regatta.Layer.random(d=args.d, heads=args.heads, seed=1)
    X = np.random.default_rng(0).standard_normal((args.n, args.d))
    before = regatta._regatta._conversion_count()
    layer(X)
    assert regatta._regatta._conversion_count() == before, "a C-contiguous float64 input was converted"

    cxx, python, tensor = [], [], []
    try:
        import torch
        T = torch.as_tensor(X)
    except ImportError:
        T = None
    for _ in range(args.repeats):
        cxx.append(layer._core._time_attend(X, args.calls))
        python.append(per_call(lambda: layer(X), args.calls))
        if T is not None:
            tensor.append(per_call(lambda: layer(T), args.calls))
    us = lambda s: 1e6 * s  # noqa: E731
    c, p = statistics.median(cxx), statistics.median(python)
    print(f"self-attention forward, n={args.n} d={args.d} heads={args.heads}, median of {args.repeats} x "
          f"{args.calls} calls")
    print(f"  C++ call alone          {us(c):8.2f} us")
    print(f"  regatta.Layer(X)        {us(p):8.2f} us   overhead {us(p - c):6.2f} us (target <= 50)")
    if tensor:
        t = statistics.median(tensor)
        print(f"  regatta.Layer(tensor)   {us(t):8.2f} us   overhead {us(t - c):6.2f} us")
    print("  C-contiguous float64 input: no conversion buffer (checked)")


if __name__ == "__main__":
    main()
