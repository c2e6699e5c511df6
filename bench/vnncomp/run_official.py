#!/usr/bin/env python3
"""VNN-COMP 2023 `vit` instances from the official benchmark files, with `regatta verify` (docs/verify.md).

    /usr/bin/python3 bench/vnncomp/run_official.py --benchmark DIR --csv bench/vnncomp/pgd_2_3_16_instances.csv \
        --model pgd_2_3_16 --regatta build/cli/regatta --out OUT_DIR [--timeout 100] [--first 0] [--count 100] \
        [--no-split] [--status unsat] [--order margin:RESULTS.csv]

DIR holds the benchmark as VNN-COMP publishes it (ChristopherBrix/vnncomp2023_benchmarks, benchmarks/vit) with its
files unpacked: DIR/onnx/MODEL.onnx and DIR/vnnlib/*.vnnlib (`gunzip` the .gz files). Unlike run_vit.py, which
regenerates the ibp_3_3_8 properties from the model repository's data.pt, this reads the official VNNLIB files,
so it also covers pgd_2_3_16 (whose data.pt is not published). INSTANCES.csv: columns vnnlib, label,
abcrown2023_status, abcrown2023_seconds (`#` lines are comments). Each instance is one `regatta verify --json`
run; OUT_DIR/results.csv and results.md get one row per instance beside alpha-beta-CROWN's 2023 verdict.
`--order margin:FILE` runs the instances by the root margin of an earlier results.csv, smallest first.
"""
import argparse
import csv
import json
import os
import subprocess
import time

from results_tables import write_tables


def read_rows(path):
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--benchmark", required=True)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--model", required=True, help="the ONNX file's name in DIR/onnx, without .onnx")
    ap.add_argument("--regatta", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=float, default=100)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--no-split", action="store_true")
    ap.add_argument("--status", default=None, help="only the instances with this abcrown2023_status")
    ap.add_argument("--order", default=None, help="margin:RESULTS.csv (an earlier run's table)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    model = os.path.join(a.benchmark, "onnx", a.model + ".onnx")
    rows = read_rows(a.csv)
    if a.status:
        rows = [r for r in rows if r["abcrown2023_status"] == a.status]
    if a.order:
        kind, path = a.order.split(":", 1)
        if kind != "margin":
            raise SystemExit("--order: margin:RESULTS.csv")
        margin = {r["vnnlib"]: float(r["root_margin"]) if r["root_margin"] not in ("", "None") else float("inf")
                  for r in read_rows(path)}
        rows.sort(key=lambda r: margin.get(r["vnnlib"], float("inf")))
    rows = rows[a.first:a.first + a.count]
    results = []
    for r in rows:
        vnnlib = os.path.join(a.benchmark, "vnnlib", r["vnnlib"])
        t0 = time.time()
        p = subprocess.run([a.regatta, "verify", "--json", "--onnx", model, "--vnnlib", vnnlib, "--timeout",
                            str(a.timeout)] + (["--no-split"] if a.no_split else []), capture_output=True, text=True)
        wall = time.time() - t0
        if p.returncode != 0:
            raise SystemExit(f"{r['vnnlib']}: regatta exited {p.returncode}: {p.stderr.strip()}")
        j = json.loads(p.stdout)
        s = j["statistics"]
        results.append({"vnnlib": r["vnnlib"], "label": r["label"], "regatta": j["result"],
                        "regatta_seconds": round(wall, 1), "verdict_seconds": round(j["seconds"], 2),
                        "proved_by": j.get("proved_by") or "", "root_ibp_margin": j["root_ibp_margin_upper"],
                        "root_margin": j.get("root_margin_upper"), "phase_branches": s.get("phase_branches", 0),
                        "boxes_split": s["boxes_split"], "abcrown2023": r["abcrown2023_status"],
                        "abcrown2023_seconds": r["abcrown2023_seconds"]})
        print(",".join(str(v) for v in results[-1].values()), flush=True)
    if not results:
        raise SystemExit("no instance selected")
    write_tables(a.out, results, f"timeout {a.timeout:g} s{', --no-split' if a.no_split else ''}")

if __name__ == "__main__":
    main()
