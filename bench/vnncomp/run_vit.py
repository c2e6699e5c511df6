#!/usr/bin/env python3
"""VNN-COMP 2023 `vit` benchmark, model ibp_3_3_8, with `regatta verify` (docs/verify.md, "VNN-COMP").

    /usr/bin/python3 bench/vnncomp/run_vit.py --repo CHECKOUT --csv INSTANCES.csv --regatta build/cli/regatta \
        --out OUT_DIR [--timeout 100] [--count 100] [--first 0] [--method affine|ibp] [--no-split]

CHECKOUT is a checkout of the public benchmark repository (shizhouxing/ViT_vnncomp2023: models/ibp_3_3_8/
model.onnx and data.pt). INSTANCES.csv lists the official instances (columns vnnlib, cifar_index, row, label,
abcrown2023_status, abcrown2023_seconds; `#` lines are comments). For each instance this script writes its
VNNLIB file with its own generator of the benchmark's formula:

    input box  = (clamp(img -+ 1/255, 0, 1) - mean) / std per pixel (float32, as the benchmark computes it),
    property   = OR over i != label of (Y_i >= Y_label)   (the misclassification to refute),

runs `regatta verify --json` on it with the timeout (and --method, --no-split: the affine forms alone, no
branch and bound), and writes OUT_DIR/results.csv and OUT_DIR/results.md
(one row per instance beside alpha-beta-CROWN's 2023 verdict). Needs torch (to read data.pt).
"""
import argparse
import csv
import json
import os
import subprocess
import time

import torch

from results_tables import write_tables

MEAN = torch.tensor([0.4914, 0.4822, 0.4465]).view(-1, 1, 1)
STD = torch.tensor([0.2023, 0.1994, 0.2010]).view(-1, 1, 1)
EPS = 1.0 / 255


def write_vnnlib(path, img, label, classes=10):
    lower = ((torch.clamp(img - EPS, 0, 1) - MEAN) / STD).reshape(-1)
    upper = ((torch.clamp(img + EPS, 0, 1) - MEAN) / STD).reshape(-1)
    lines = [f"; ibp_3_3_8, label {label}, l_inf 1/255 (regatta's generator, bench/vnncomp/run_vit.py)"]
    lines += [f"(declare-const X_{i} Real)" for i in range(lower.numel())]
    lines += [f"(declare-const Y_{i} Real)" for i in range(classes)]
    for i in range(lower.numel()):
        # float32 values printed as the shortest decimal of their binary64 value: exact
        lines.append(f"(assert (<= X_{i} {float(upper[i])!r}))")
        lines.append(f"(assert (>= X_{i} {float(lower[i])!r}))")
    lines.append("(assert (or")
    lines += [f"    (and (>= Y_{i} Y_{label}))" for i in range(classes) if i != label]
    lines.append("))")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--regatta", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=float, default=100)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--method", choices=["affine", "ibp"], default="affine")
    ap.add_argument("--no-split", action="store_true")
    ap.add_argument("--split", choices=["phase", "input", "none"], default=None)
    ap.add_argument("--split-kinds", default=None, help="verify's --split-kinds (e.g. relu, or all)")
    ap.add_argument("--status", default=None, help="only the instances with this abcrown2023_status (e.g. unsat)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    model = os.path.join(a.repo, "models", "ibp_3_3_8", "model.onnx")
    data = torch.load(os.path.join(a.repo, "models", "ibp_3_3_8", "data.pt"))
    with open(a.csv) as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    if a.status:
        rows = [r for r in rows if r["abcrown2023_status"] == a.status]
    rows = rows[a.first:a.first + a.count]
    results = []
    for r in rows:
        row, label = int(r["row"]), int(r["label"])
        assert int(data[1][row]) == label, f"data.pt row {row} has label {int(data[1][row])}, the csv says {label}"
        vnnlib = os.path.join(a.out, r["vnnlib"])
        write_vnnlib(vnnlib, data[0][row], label)
        t0 = time.time()
        p = subprocess.run([a.regatta, "verify", "--json", "--onnx", model, "--vnnlib", vnnlib,
                            "--timeout", str(a.timeout), "--method", a.method] + (["--no-split"] if a.no_split else []) +
                           (["--split", a.split] if a.split else []) +
                           (["--split-kinds", a.split_kinds] if a.split_kinds else []),
                           capture_output=True, text=True)
        wall = time.time() - t0
        if p.returncode != 0:
            raise SystemExit(f"{r['vnnlib']}: regatta exited {p.returncode}: {p.stderr.strip()}")
        j = json.loads(p.stdout)
        results.append({"vnnlib": r["vnnlib"], "label": label, "regatta": j["result"], "regatta_seconds": round(wall, 1),
                        "verdict_seconds": round(j["seconds"], 2), "proved_by": j.get("proved_by") or "",
                        "root_ibp_margin": j["root_ibp_margin_upper"],
                        "root_margin": j.get("root_margin_upper"), "boxes_split": j["statistics"]["boxes_split"],
                        "point_evaluations": j["statistics"]["point_evaluations"],
                        "phase_branches": j["statistics"].get("phase_branches", 0),
                        "phase_max_depth": j["statistics"].get("phase_max_depth", 0),
                        "phase_branches_by_kind": " ".join(f"{k}:{v}" for k, v in
                                                           j["statistics"].get("phase_branches_by_kind", {}).items()),
                        "abcrown2023": r["abcrown2023_status"], "abcrown2023_seconds": r["abcrown2023_seconds"]})
        print(",".join(str(v) for v in results[-1].values()), flush=True)
        os.remove(vnnlib)  # 250 kB each; regenerated on demand
    write_tables(a.out, results, f"timeout {a.timeout:g} s, --method {a.method}{', --no-split' if a.no_split else ''}")

if __name__ == "__main__":
    main()
