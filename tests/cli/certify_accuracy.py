#!/usr/bin/env python3
"""`regatta certify` prints every accuracy as the exact fraction of counted inputs. On the digits ViT fixture
the counts are recounted here from the per-input rows of --out JSON (prediction, label, certified and attack
radius), and compared with the JSON counts, the JSON doubles and the printed text, which must be exactly
k/n: "0.625 (5/8)" when the decimal terminates (every k/8 does), "0.3333333333 (1/3, rounded down)" when it
does not (k/3). Before, a certified accuracy was the double below k/n printed rounded down: 0.849999 for
34/40.

    certify_accuracy.py REGATTA VIT_DIR WORK_DIR
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
from fractions import Fraction

REGATTA, VIT, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
MODEL = ["--model", os.path.join(VIT, "vit_digits.safetensors"), "--data", os.path.join(VIT, "test_set.npz")]
failures = []


def exact(k, n, places=10):
    """k/n written out from its definition: all the decimals when they end, else `places` of them cut (which
    rounds a positive number down), with k/n beside."""
    q = Fraction(k, n)
    decimals = 0
    while (q * 10**decimals).denominator != 1 and decimals <= 60:
        decimals += 1
    ends = decimals <= 60
    shown = decimals if ends else places
    whole = math.floor(q * 10**shown)
    text = str(whole).rjust(shown + 1, "0")
    if shown:
        text = text[:-shown] + "." + text[-shown:]
    return f"{text} ({k}/{n})" if ends else f"{text} ({k}/{n}, rounded down)"


def largest_double_at_most(q):
    """The largest binary64 number <= the rational q."""
    x = float(q)
    while Fraction(x) > q:
        x = math.nextafter(x, -math.inf)
    return x


def run(limit, radii, extra):
    out = os.path.join(WORK, f"certify_{limit}.json")
    p = subprocess.run([REGATTA, "certify", *MODEL, "--limit", str(limit), "--radii", ",".join(radii),
                        "--out", out, *extra], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"certify --limit {limit} failed ({p.returncode}): {p.stderr}")
    j = json.load(open(out))
    inputs = j["inputs"]
    n = len(inputs)
    correct = [r for r in inputs if r["prediction"] == r["label"]]

    def attack(r):
        return math.inf if r["attack_radius"] is None else r["attack_radius"]

    if n != limit or j["summary"]["inputs"] != n:
        failures.append(f"--limit {limit}: {n} rows, summary.inputs {j['summary']['inputs']}")
    if j["summary"]["clean_count"] != len(correct):
        failures.append(f"--limit {limit}: clean_count {j['summary']['clean_count']}, recounted {len(correct)}")
    clean_line = f"clean accuracy (estimate: predictions of the double forward pass): {exact(len(correct), n)}\n"
    if clean_line not in p.stdout:
        failures.append(f"--limit {limit}: no line {clean_line.strip()!r}")

    # The accuracy table: one line per radius, after its header, in --radii order.
    head = p.stdout.index("  radius  certified accuracy")
    lines = p.stdout[head:].splitlines()[1:1 + len(radii)]
    for radius, line, row in zip(radii, lines, j["accuracy"]):
        r = float(radius)
        k_cert = sum(x["margin_lower"] > 0 and x["certified_radius"] >= r for x in correct)
        k_attack = sum(attack(x) > r for x in correct)
        want = f"  {exact(k_cert, n)}  {exact(k_attack, n)}"
        print(f"--limit {limit}, r = {radius}: certified {k_cert}/{n}, attack {k_attack}/{n}; printed {line.strip()!r}")
        if not line.endswith(want) or not line.strip().startswith(radius):
            failures.append(f"--limit {limit}, r = {radius}: printed {line!r}, expected ...{want!r}")
        if (row["radius"], row["inputs"], row["certified_count"], row["attack_count"]) != (r, n, k_cert, k_attack):
            failures.append(f"--limit {limit}, r = {radius}: JSON {row}, recounted {k_cert}, {k_attack} of {n}")
        # The certified double is the largest double <= k/n (a certified lower bound); the attack one the
        # nearest double to k/n.
        if row["certified_accuracy"] != largest_double_at_most(Fraction(k_cert, n)):
            failures.append(f"--limit {limit}, r = {radius}: certified_accuracy {row['certified_accuracy']!r} is "
                            f"not the largest double <= {k_cert}/{n}")
        if row["attack_accuracy"] != k_attack / n:
            failures.append(f"--limit {limit}, r = {radius}: attack_accuracy {row['attack_accuracy']!r}")
    if len(lines) != len(radii):
        failures.append(f"--limit {limit}: {len(lines)} accuracy lines for {len(radii)} radii")
    if re.search(r"\b0\.\d*9999\d*\b", "\n".join(lines)):
        failures.append(f"--limit {limit}: an accuracy printed as a rounded-down double: {lines}")
    return (p.stdout, [sum(x["certified_radius"] >= float(r) for x in correct) for r in radii],
            [sum(attack(x) > float(r) for x in correct) for r in radii])


# 8 inputs (k/8 always terminates, with up to three decimals). The radii straddle the fixture's certified radii
# (0.025 to 0.042 at this tolerance) and attack radii (0.19 to 0.50), so that neither count is all n or 0.
_, counts, attacks = run(8, ["0", "0.02", "0.03", "0.035", "0.04", "0.05", "0.25", "0.3"], ["--tolerance", "0.5"])
if len(set(counts)) < 3 or len(set(attacks)) < 2:
    failures.append(f"the certified {counts} or attack {attacks} counts at the radii of the 8-input run are too "
                    "uniform to test")
# 3 inputs: k/3 does not terminate for k = 1, 2; the radii lie between the fixture's per-input radii (region
# certified radii 2.5e-5 to 5.1e-5, attack radii 0.19 to 0.50), so that both appear.
text, _, _ = run(3, ["0", "3e-05", "0.2", "0.5"], ["--tolerance", "0.5", "--method", "region"])
if "/3, rounded down)" not in text:
    failures.append("no accuracy of the 3-input run is a non-terminating k/3: the radii no longer test it")

for f in failures:
    print("FAIL", f)
print(f"certify_accuracy: {len(failures)} failed")
sys.exit(1 if failures else 0)
