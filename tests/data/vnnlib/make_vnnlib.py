#!/usr/bin/env python3
"""Writes the VNNLIB fixtures of the `regatta verify` tests (docs/verify.md, "Tests"):

    /usr/bin/python3 tests/data/vnnlib/make_vnnlib.py tests/data/vnnlib

mlp_*: properties of tests/data/onnx/mlp_tiny.onnx (2 inputs, 2 outputs, ReLU) whose verdict a grid over the
box decides (the C++ test recomputes the grid); vit_like_*: properties of vit_vnncomp_like.onnx around its
torch input (tests/data/onnx/vit_vnncomp_like.input.npy, logits.npy); bad_*: malformed files, one problem each.
"""
import os
import sys

import numpy as np

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
ONNX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "onnx")


def declare(n_in, n_out):
    return "".join(f"(declare-const X_{i} Real)\n" for i in range(n_in)) + \
           "".join(f"(declare-const Y_{i} Real)\n" for i in range(n_out))


def box(lo, hi):
    return "".join(f"(assert (>= X_{i} {l!r}))\n(assert (<= X_{i} {h!r}))\n" for i, (l, h) in enumerate(zip(lo, hi)))


def write(name, text):
    with open(os.path.join(OUT, name + ".vnnlib"), "w") as f:
        f.write(text)


def mlp():
    head = "; mlp_tiny.onnx, box [-1, 1]^2\n" + declare(2, 2) + box([-1.0, -1.0], [1.0, 1.0])
    # min Y_1 over the box is -0.375, at (0.75, 1); max Y_0 is 1.625, at (0.5, 1).
    write("mlp_unsat_split", head + "; min Y_1 = -0.375: unsat, but not by IBP on the whole box\n(assert (<= Y_1 -0.4))\n")
    write("mlp_sat_narrow", head + "; sat only near (0.75, 1)\n(assert (<= Y_1 -0.37))\n")
    write("mlp_or_unsat", head + "(assert (or (and (>= Y_0 1.7)) (and (<= Y_1 -0.4) (>= Y_0 -10))))\n")
    write("mlp_sat_compare", head + "(assert (>= Y_0 Y_1))\n")
    write("mlp_unsat_small", "; around (1, 0)\n" + declare(2, 2) + box([0.95, -0.05], [1.05, 0.05]) +
          "(assert (or (and (>= Y_0 Y_1))))\n")
    point = declare(2, 2) + box([0.75, 1.0], [0.75, 1.0])
    write("mlp_point_strict_unsat", "; Y_1 = -0.375 exactly at this point\n" + point + "(assert (< Y_1 -0.375))\n")
    write("mlp_point_sat", "; Y_1 = -0.375 exactly at this point\n" + point + "(assert (<= Y_1 -0.375))\n")


def vit_like():
    x = np.load(os.path.join(ONNX, "vit_vnncomp_like.input.npy")).reshape(-1)
    logits = np.load(os.path.join(ONNX, "vit_vnncomp_like.logits.npy")).reshape(-1)
    label = int(logits.argmax())
    runner = int(np.argsort(logits)[-2])
    n, m = x.size, logits.size
    robust = "(assert (or\n" + "".join(f"  (and (>= Y_{i} Y_{label}))\n" for i in range(m) if i != label) + "))\n"
    write("vit_like_eps_unsat", f"; torch's class {label}, l_inf 1e-6 around the torch input\n" + declare(n, m) +
          box(list(x - 1e-6), list(x + 1e-6)) + robust)
    # The box from the double below to the double above each input: its decimals are not doubles, but the
    # real box they bound contains the torch input itself (a box [x, x] printed as decimals holds no double).
    write("vit_like_point_sat", f"; around the torch input (one ulp), Y_{label} >= Y_{runner} (torch logits)\n" +
          declare(n, m) + box(list(np.nextafter(x, -np.inf)), list(np.nextafter(x, np.inf))) +
          f"(assert (>= Y_{label} Y_{runner}))\n")


def bad():
    d = declare(2, 2)
    ok_box = box([-1.0, -1.0], [1.0, 1.0])
    write("bad_unbalanced", d + ok_box + "(assert (<= Y_0 1)\n")
    write("bad_extra_close", d + ok_box + "(assert (<= Y_0 1)))\n")
    write("bad_unknown_variable", d + ok_box + "(assert (<= Y_7 1))\n")
    write("bad_undeclared_input", d + ok_box + "(assert (<= X_2 1))\n")
    write("bad_count", declare(3, 2) + box([-1.0] * 3, [1.0] * 3) + "(assert (<= Y_0 1))\n")
    write("bad_nonfinite", d + "(assert (>= X_0 -1e999))\n(assert (<= X_0 1))\n(assert (>= X_1 0))\n(assert (<= X_1 1))\n"
          "(assert (<= Y_0 1))\n")
    write("bad_nan", d + "(assert (>= X_0 nan))\n(assert (<= X_0 1))\n")
    write("bad_empty_box", d + "(assert (>= X_0 0.5))\n(assert (<= X_0 0.25))\n(assert (>= X_1 0))\n(assert (<= X_1 1))\n"
          "(assert (<= Y_0 1))\n")
    write("bad_missing_bound", d + "(assert (>= X_0 0))\n(assert (>= X_1 0))\n(assert (<= X_1 1))\n(assert (<= Y_0 1))\n")
    write("bad_mixed", d + ok_box + "(assert (<= X_0 Y_0))\n")
    write("bad_command", d + ok_box + "(check-sat)\n")


if __name__ == "__main__":
    mlp()
    vit_like()
    bad()
