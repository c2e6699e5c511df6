#!/usr/bin/env python3
"""`regatta certify` end to end on the digits ViT fixture (one input): the table labels every number, and
--plot DIR draws certified, naive and attack accuracy against the radius as exact step functions — the
curves in DIR/plots/certified_accuracy.dat are recomputed here from the per-input radii of --out JSON, and
every certified value is at most the exact fraction (fractions.Fraction). A --plot that is a file, or a
directory holding foreign files, exits 2 before any work and changes nothing. --method region gives a
smaller certified radius than the default affine forms, and says which method it used.

    certify_plot.py REGATTA VIT_DIR WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
from fractions import Fraction

REGATTA, VIT, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures = []
MODEL = ["--model", os.path.join(VIT, "vit_digits.safetensors"), "--data", os.path.join(VIT, "test_set.npz")]

plot_dir, out = os.path.join(WORK, "plot"), os.path.join(WORK, "certify.json")
p = subprocess.run([REGATTA, "certify", *MODEL, "--limit", "1", "--tolerance", "0.5", "--radii", "0,1e-6",
                    "--plot", plot_dir, "--out", out], capture_output=True, text=True)
if p.returncode != 0:
    sys.exit(f"certify failed ({p.returncode}): {p.stderr}")
if not re.search(r"median certified radius \(certified, rounded down\).*\n.*median attack radius \(estimate",
                 p.stdout):
    failures.append("the summary does not label the certified and attack radii")
if "plot: " not in p.stdout:
    failures.append("no plot line in the output")

rows = json.load(open(out))["inputs"]


def radius(row, field):
    """A per-input radius; null (no attack succeeded) is an infinite attack radius."""
    return float("inf") if row[field] is None else row[field]


def step_curve(field):
    """The expected points: at every per-input radius b, (b, fraction >= b) then (b, fraction > b)."""
    at = sorted({radius(r, f) for r in rows for f in ("certified_radius", "naive_radius", "attack_radius")
                 if 0 < radius(r, f) < float("inf")})
    correct = [r for r in rows if r["prediction"] == r["label"]]
    pts = []
    for b in at:
        pts.append((b, Fraction(sum(radius(r, field) >= b for r in correct), len(rows))))
        pts.append((b, Fraction(sum(radius(r, field) > b for r in correct), len(rows))))
    return pts


dat = open(os.path.join(plot_dir, "plots", "certified_accuracy.dat")).read().split("\n\n\n")
blocks = [[tuple(map(float, line.split())) for line in b.strip().splitlines() if not line.startswith("#")]
          for b in dat if b.strip()]
if len(blocks) != 3:
    failures.append(f"expected 3 curves in the .dat, found {len(blocks)}")
else:
    for block, field, certified in zip(blocks, ["certified_radius", "naive_radius", "attack_radius"],
                                       [True, True, False]):
        expected = step_curve(field)
        if [x for x, _ in block] != [x for x, _ in expected]:
            failures.append(f"{field}: the steps are not at the per-input radii")
            continue
        for (x, y), (_, exact) in zip(block, expected):
            if certified and Fraction(y) > exact:
                failures.append(f"{field}: certified accuracy {y!r} at r = {x} exceeds the exact {exact}")
            if abs(Fraction(y) - exact) > Fraction(1, 10**15):
                failures.append(f"{field}: accuracy {y!r} at r = {x}, expected {exact}")
for ext in ("svg", "png"):
    if shutil.which("gnuplot") and not os.path.exists(os.path.join(plot_dir, "plots", f"certified_accuracy.{ext}")):
        failures.append(f"gnuplot is installed but certified_accuracy.{ext} is missing")

# Bad --plot targets: exit 2, one line naming --plot, nothing computed or changed.
foreign = os.path.join(WORK, "foreign")
os.makedirs(foreign)
open(os.path.join(foreign, "notes.txt"), "w").write("keep me\n")
a_file = os.path.join(WORK, "a_file")
open(a_file, "w").write("x")
for target in (foreign, a_file):
    q = subprocess.run([REGATTA, "certify", *MODEL, "--limit", "1", "--plot", target], capture_output=True,
                       text=True, timeout=30)
    lines = q.stderr.strip().splitlines()
    if q.returncode != 2 or len(lines) != 1 or "--plot" not in lines[0]:
        failures.append(f"--plot {target}: exit {q.returncode}, stderr {q.stderr!r}")
if sorted(os.listdir(foreign)) != ["notes.txt"] or open(a_file).read() != "x":
    failures.append("a refused --plot target was changed")

# --method: the default run above used affine forms; --method region (the interval Jacobian enclosures) on the
# same input writes "region" in its CSV, and its radius is far below the affine one (the two are independent
# certificates of the same ball; both below the attack radius).
if rows[0].get("method") != "affine":
    failures.append(f"the default method is not affine: {rows[0].get('method')!r}")
region_csv = os.path.join(WORK, "region.csv")
q = subprocess.run([REGATTA, "certify", *MODEL, "--limit", "1", "--tolerance", "0.5", "--method", "region",
                    "--out", region_csv], capture_output=True, text=True, timeout=120)
if q.returncode != 0 or "certified radius by region enclosures" not in q.stdout:
    failures.append(f"--method region: exit {q.returncode}, stdout {q.stdout[-300:]!r}")
else:
    header, line = open(region_csv).read().splitlines()[:2]
    region_row = dict(zip(header.split(","), line.split(",")))
    region_radius = float(region_row["certified_radius_certified"])
    if region_row["method"] != "region":
        failures.append(f"--method region wrote method {region_row['method']!r}")
    if not 0 < region_radius < rows[0]["certified_radius"] <= radius(rows[0], "attack_radius"):
        failures.append(f"region {region_radius}, affine {rows[0]['certified_radius']}, attack "
                        f"{rows[0]['attack_radius']}: expected 0 < region < affine <= attack")
q = subprocess.run([REGATTA, "certify", *MODEL, "--limit", "1", "--method", "zonotope"], capture_output=True,
                   text=True, timeout=30)
if q.returncode != 2 or "--method" not in q.stderr:
    failures.append(f"--method zonotope: exit {q.returncode}, stderr {q.stderr!r}")

for f in failures:
    print("FAIL:", f)
print(f"certify plot: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
