#!/usr/bin/env python3
"""The attack phase of `regatta verify` on VNN-COMP 2023 `vit` (model ibp_3_3_8) at larger radii than the
official 1/255, where counterexamples exist: how many of the first COUNT official images each binary finds
`sat` (docs/verify.md, "Method"; bench/RESULTS.md).

    /usr/bin/python3 bench/vnncomp/attack_vit.py --repo CHECKOUT --csv INSTANCES.csv --out OUT_DIR \
        --regatta NAME=BINARY [--regatta NAME=BINARY ...] [--eps 2,4] [--timeout 20] [--count 10]

The properties are run_vit.py's (input box clamp(img -+ eps/255, 0, 1) normalised, OR over i != label of
Y_i >= Y_label) with eps in units of 1/255. Every `sat` is certified by the binary (MPFI re-check at the
counterexample). Writes OUT_DIR/attack.csv, one row per (eps, instance, binary). Needs torch (to read data.pt).
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_vit  # noqa: E402  (the benchmark's property generator)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--regatta", action="append", required=True, help="NAME=BINARY")
    ap.add_argument("--eps", default="2,4", help="radii in units of 1/255, comma-separated")
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--count", type=int, default=10)
    a = ap.parse_args()
    binaries = [b.split("=", 1) for b in a.regatta]
    os.makedirs(a.out, exist_ok=True)
    model = os.path.join(a.repo, "models", "ibp_3_3_8", "model.onnx")
    data = torch.load(os.path.join(a.repo, "models", "ibp_3_3_8", "data.pt"))
    with open(a.csv) as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))[: a.count]
    results = []
    for eps in [float(e) for e in a.eps.split(",")]:
        run_vit.EPS = eps / 255
        for r in rows:
            row, label = int(r["row"]), int(r["label"])
            vnnlib = os.path.join(a.out, f"eps{eps:g}_{r['vnnlib']}")
            run_vit.write_vnnlib(vnnlib, data[0][row], label)
            for name, binary in binaries:
                t0 = time.time()
                p = subprocess.run([binary, "verify", "--json", "--onnx", model, "--vnnlib", vnnlib, "--timeout",
                                    str(a.timeout)], capture_output=True, text=True)
                if p.returncode != 0:
                    raise SystemExit(f"{vnnlib}: {binary} exited {p.returncode}: {p.stderr.strip()}")
                j = json.loads(p.stdout)
                results.append({"eps_255": eps, "vnnlib": r["vnnlib"], "binary": name, "result": j["result"],
                                "reason": j.get("reason", ""), "seconds": round(time.time() - t0, 1),
                                "point_evaluations": j["statistics"]["point_evaluations"]})
                print(",".join(str(v) for v in results[-1].values()), flush=True)
            os.remove(vnnlib)
    with open(os.path.join(a.out, "attack.csv"), "w") as f:
        w = csv.DictWriter(f, list(results[0].keys()))
        w.writeheader()
        w.writerows(results)
    for eps in sorted({res["eps_255"] for res in results}):
        for name, _ in binaries:
            sat = sum(1 for res in results if res["eps_255"] == eps and res["binary"] == name and res["result"] == "sat")
            print(f"eps {eps:g}/255, {name}: sat {sat} of {len(rows)}")


if __name__ == "__main__":
    main()
