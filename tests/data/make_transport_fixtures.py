#!/usr/bin/python3
"""Writes the small .npy fixtures of the `regatta wasserstein` CLI tests into tests/data/transport/.

Run from the repository root:  /usr/bin/python3 tests/data/make_transport_fixtures.py
Deterministic (numpy RandomState seeds); rerunning rewrites identical files.
"""
import os

import numpy as np

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transport")


def save(name, array):
    np.save(os.path.join(HERE, name), array)


def main():
    os.makedirs(HERE, exist_ok=True)
    rng = np.random.RandomState(20240607)
    a = rng.standard_normal((6, 3))
    b = rng.standard_normal((5, 3)) + 0.5
    save("a_6x3.npy", a)
    save("b_5x3.npy", b)
    save("b_5x2.npy", rng.standard_normal((5, 2)))  # dimension mismatch with a_6x3
    nan = a.copy()
    nan[2, 1] = np.nan
    save("a_nan.npy", nan)
    w = rng.uniform(0.1, 1.0, 6)
    w /= w.sum()
    save("w_a.npy", w)
    save("w_a_f32.npy", w.astype(np.float32))  # normalised only to float32 rounding
    save("w_a_negative.npy", np.array([0.5, 0.3, -0.1, 0.1, 0.1, 0.1]))
    save("w_a_short.npy", w[:5] / w[:5].sum())  # 5 weights for 6 atoms
    save("w_a_unnormalised.npy", 2.0 * w)
    save("w_a_2d.npy", w.reshape(2, 3))
    # docs/math/transport.md#one-dimensional reference: mu = (d0 + d2)/2, nu = d1/4 + 3 d3/4: W1 = 1.5, W2 = sqrt(3).
    save("line_a.npy", np.array([0.0, 2.0]))
    save("line_b.npy", np.array([1.0, 3.0]))
    save("w_line_b.npy", np.array([0.25, 0.75]))


if __name__ == "__main__":
    main()
