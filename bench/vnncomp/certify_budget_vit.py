#!/usr/bin/env python3
"""`regatta certify --budget-per-input S` on the VNN-COMP 2023 ViT ibp_3_3_8 (l-inf, ReLU MLPs): the median
certified radius of the affine forms alone against the one branch and bound reaches in S seconds per input
(docs/models.md#branch-and-bound-in-certify; results in bench/RESULTS.md).

    /usr/bin/python3 bench/vnncomp/certify_budget_vit.py --onnx ibp_3_3_8.onnx --data data.pt \
        --csv INSTANCES.csv --regatta build/cli/regatta --out OUT_DIR [--count 8] [--budgets 30,100]

The model takes normalised images ((pixel - mean) / std per channel, the benchmark's constants, as
run_vit.py); this script prepends that normalisation to the graph (Sub, Div) so the radius is in pixel units
with --input-range 0,1, writes OUT_DIR/images.npz (the first COUNT instances of INSTANCES.csv: pixels as
float32 values, their labels) and runs certify --norm inf once per budget (its rows hold the radius without
branch and bound too), with --out OUT_DIR/certify_<budget>.json. Needs torch (to read data.pt) and onnx.
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import time

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper

MEAN = [0.4914, 0.4822, 0.4465]
STD = [0.2023, 0.1994, 0.2010]


def pixel_model(source, target):
    """The graph with input `pixels` (N, 3, 32, 32) in [0, 1] feeding (pixels - MEAN) / STD to the old input."""
    m = onnx.load(source)
    old = m.graph.input[0]
    new = helper.make_tensor_value_info("pixels", onnx.TensorProto.FLOAT, ["batch_size", 3, 32, 32])
    mean = numpy_helper.from_array(np.array(MEAN, np.float32).reshape(1, 3, 1, 1), "pixel_mean")
    std = numpy_helper.from_array(np.array(STD, np.float32).reshape(1, 3, 1, 1), "pixel_std")
    nodes = [helper.make_node("Sub", ["pixels", "pixel_mean"], ["pixels_centred"], name="normalise_sub"),
             helper.make_node("Div", ["pixels_centred", "pixel_std"], [old.name], name="normalise_div")]
    graph = m.graph
    graph.initializer.extend([mean, std])
    for n in reversed(nodes):
        graph.node.insert(0, n)
    graph.input.remove(old)
    graph.input.insert(0, new)
    onnx.save(m, target)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--onnx", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--regatta", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--budgets", default="30,100")
    ap.add_argument("--tolerance", default="0.01")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    model = os.path.join(a.out, "ibp_3_3_8_pixels.onnx")
    pixel_model(a.onnx, model)
    images, labels = torch.load(a.data)
    with open(a.csv) as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))[:a.count]
    picked = [int(r["row"]) for r in rows]
    for r in rows:
        assert int(labels[int(r["row"])]) == int(r["label"]), r
    data = os.path.join(a.out, "images.npz")
    np.savez(data, images=images[picked].numpy().astype(np.float64), labels=labels[picked].numpy().astype(np.int64))
    runs = [float(b) for b in a.budgets.split(",")]  # each run also reports the affine forms alone
    for budget in runs:
        out = os.path.join(a.out, f"certify_{budget:g}.json")
        command = [a.regatta, "certify", "--model", model, "--data", data, "--norm", "inf", "--input-range", "0,1",
                   "--tolerance", a.tolerance, "--out", out]
        if budget > 0:
            command += ["--budget-per-input", f"{budget:g}"]
        t0 = time.time()
        p = subprocess.run(command, capture_output=True, text=True, check=False)
        wall = time.time() - t0
        if p.returncode != 0:
            raise SystemExit(f"budget {budget:g}: regatta exited {p.returncode}: {p.stderr.strip()}")
        with open(out) as f:
            j = json.load(f)
        rows = j["inputs"]
        plain = statistics.median(r["certified_radius"] for r in rows)
        line = f"budget {budget:g} s: {len(rows)} inputs, median certified (affine forms) {plain:.6g}"
        if budget > 0:
            bab = statistics.median(r["bab_radius"] for r in rows)
            line += (f", with branch and bound {bab:.6g} ({bab / plain:.3f}x), max seconds per input "
                     f"{max(r['bab_seconds'] for r in rows):.1f}, tests {sum(r['bab_tests'] for r in rows)}, "
                     f"branches {sum(r['bab_branches'] for r in rows)}")
        attack = [r["attack_radius"] for r in rows if r["attack_radius"] is not None]
        line += f", median attack {statistics.median(attack):.6g}" if attack else ", no attack succeeded"
        print(line + f"; wall {wall:.0f} s", flush=True)
        for r in rows:
            print(f"  input {r['index']} label {r['label']} pred {r['prediction']} certified "
                  f"{r['certified_radius']:.6g}" + (f" bab {r['bab_radius']:.6g} ({r['bab_tests']} tests, "
                                                    f"{r['bab_branches']} branches, {r['bab_seconds']:.1f} s)"
                                                    if budget > 0 else "") + f" attack {r['attack_radius']}",
                  flush=True)


if __name__ == "__main__":
    main()
