#!/usr/bin/env python3
"""Phase splitting on the GELU (erf) nodes of the digits ViT (docs/verify.md#general-splits).

    /usr/bin/python3 bench/vnncomp/digits_splits.py --regatta build/cli/regatta --out OUT_DIR \
        [--images 0,1,2] [--timeout 60] [--above 1.03]

For each test image of tests/data/vit_digits/test_set.npz: the l-inf box of radius r around it (clamped to
[0, 1], the images' range) with the misclassification property OR_{i != label} (Y_i >= Y_label) as VNNLIB;
first the largest r (bisection, 10 steps on [0, 0.02]) that `regatta verify --no-split` proves (the root's
bounds alone), then r·above verified twice with --timeout: `--split-kinds relu` (the model has no ReLU, so
verify splits inputs) and `--split-kinds all` (GELU/erf input-range splitting). Writes OUT_DIR/results.md.
"""
import argparse
import json
import os
import subprocess

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "tests", "data", "vit_digits", "vit_digits.onnx")


def write_vnnlib(path, img, label, r):
    x = img.reshape(-1)
    lo, hi = np.clip(x - r, 0, 1), np.clip(x + r, 0, 1)
    lines = [f"; vit_digits, label {label}, l_inf {r!r} clamped to [0, 1] (bench/vnncomp/digits_splits.py)"]
    lines += [f"(declare-const X_{i} Real)" for i in range(x.size)]
    lines += [f"(declare-const Y_{i} Real)" for i in range(10)]
    for i in range(x.size):
        lines.append(f"(assert (<= X_{i} {float(hi[i])!r}))")
        lines.append(f"(assert (>= X_{i} {float(lo[i])!r}))")
    lines.append("(assert (or")
    lines += [f"    (and (>= Y_{i} Y_{label}))" for i in range(10) if i != label]
    lines.append("))")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def verify(regatta, vnnlib, extra):
    p = subprocess.run([regatta, "verify", "--json", "--onnx", MODEL, "--vnnlib", vnnlib] + extra,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"regatta exited {p.returncode}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--regatta", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--images", default="0,1,2")
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--above", type=float, default=1.03)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    data = np.load(os.path.join(ROOT, "tests", "data", "vit_digits", "test_set.npz"))
    rows = []
    for k in [int(s) for s in a.images.split(",")]:
        img, label = data["images"][k], int(data["labels"][k])
        vnnlib = os.path.join(a.out, f"digits_{k}.vnnlib")
        lo, hi = 0.0, 0.02
        for _ in range(10):
            mid = 0.5 * (lo + hi)
            write_vnnlib(vnnlib, img, label, mid)
            j = verify(a.regatta, vnnlib, ["--no-split", "--timeout", "8"])
            lo, hi = (mid, hi) if j["result"] == "unsat" else (lo, mid)
        r = lo * a.above
        write_vnnlib(vnnlib, img, label, r)
        row = {"image": k, "label": label, "root_radius": lo, "radius": r}
        for name, kinds in (("relu", "relu"), ("all", "all")):
            j = verify(a.regatta, vnnlib, ["--timeout", str(a.timeout), "--split-kinds", kinds])
            s = j["statistics"]
            row[name] = (f"{j['result']} ({s['split_method']}, {j['seconds']:.1f} s, "
                         f"{s['phase_branches']} phase branches {json.dumps(s['phase_branches_by_kind'])}, "
                         f"{s['boxes_split']} box splits, margin {j['root_margin_upper']:.4g})")
        print(row, flush=True)
        rows.append(row)
    with open(os.path.join(a.out, "results.md"), "w") as f:
        keys = list(rows[0].keys())
        f.write("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys) + "\n")
        for row in rows:
            f.write("| " + " | ".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in row.values()) +
                    " |\n")


if __name__ == "__main__":
    main()
