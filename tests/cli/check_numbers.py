#!/usr/bin/env python3
"""What `regatta` prints, checked against what it computed.

1. Certified ends printed for people (text tables) enclose the exact values: each printed lower end is <= the
   certified double of the JSON output and each printed upper end >= it, compared exactly (fractions.Fraction
   of the decimal text against Fraction of the double, which JSON round-trips exactly).
2. A path that is not valid UTF-8 is written to JSON escaped (\\xNN), with exit code 0, never exit 3.
3. A matrix whose spectral norm overflows the double range is exit 2 with one line naming the file.

    check_numbers.py REGATTA DATA_DIR WORK_DIR      (exit 77: numpy missing, the test is skipped)
"""
import json
import os
import re
import shutil
import subprocess
import sys
from fractions import Fraction

try:
    import numpy as np
except ImportError:
    sys.exit(77)

REGATTA, DATA, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
failures = []


def run(*args, expect=0):
    p = subprocess.run([REGATTA, *args], capture_output=True)
    if p.returncode != expect:
        failures.append(f"{' '.join(map(str, args))}: exit {p.returncode}, expected {expect}: {p.stderr!r}")
    return p


def field(text, label):
    """The number after `label` (at the start of a line, after spaces) in the human output."""
    m = re.search(r"^\s*" + re.escape(label) + r"\s+([-+0-9.eE]+|inf)", text, re.M)
    if not m:
        raise AssertionError(f"no '{label}' in:\n{text}")
    return m.group(1)


def encloses(what, printed, exact, side):
    exact = Fraction(exact)
    shown = Fraction(printed)
    ok = shown <= exact if side == "lower" else shown >= exact
    if not ok:
        failures.append(f"{what}: printed {side} end {printed} does not bound the certified {float(exact)!r}")


def check_norm():
    for spec in ["7x5,seed=3", "16x16,seed=11", "9x4,kind=illcond,cond=1e9,seed=2", "3x3,kind=lowrank,seed=5"]:
        human = run("norm", "--random", spec).stdout.decode()
        js = json.loads(run("norm", "--random", spec, "--json").stdout)
        encloses(f"norm {spec}", field(human, "certified lower"), js["certified_lower"], "lower")
        encloses(f"norm {spec}", field(human, "certified upper"), js["certified_upper"], "upper")
        encloses(f"norm {spec}", field(human, "cheap upper"), js["cheap_certified_upper"], "upper")


def check_wasserstein():
    t = os.path.join(DATA, "transport")
    for p in ["1", "2", "3.5"]:
        args = [os.path.join(t, "a_6x3.npy"), os.path.join(t, "b_5x3.npy"), "--p", p, "--certify"]
        human = run("wasserstein", *args).stdout.decode()
        js = json.loads(run("wasserstein", *args, "--json").stdout)
        encloses(f"wasserstein p={p}", field(human, "certified lower"), js["lower"], "lower")
        encloses(f"wasserstein p={p}", field(human, "certified upper"), js["upper"], "upper")


def check_bound():
    args = ["--random", "d=4,heads=2,seed=1", "--n", "5", "--radius", "1.5"]
    human = run("bound", *args).stdout.decode()
    js = json.loads(run("bound", *args, "--json").stdout)
    checked = 0
    for r in js:
        if not r["applies"] or r["certified_upper"] is None:
            continue
        m = re.search(r"^" + re.escape(r["id"]) + r"\s.*?\s([-+0-9.eE]+)\s+([-+0-9.eE]+|inf)\s+\S+\s", human, re.M)
        if not m:
            failures.append(f"bound: no row for {r['id']}")
            continue
        encloses(f"bound {r['id']}", m.group(2), r["certified_upper"], "upper")
        checked += 1
    if checked == 0:
        failures.append("bound: no certified row compared")


def check_local():
    x = os.path.join(DATA, "valid", "arange_3x4_f64.npy")
    args = ["--random", "d=4,heads=2,seed=1", "--input", x, "--certify", "--margin", "1", "--epsilon", "0.05"]
    human = run("local", *args).stdout.decode()
    js = json.loads(run("local", *args, "--json").stdout)
    encloses("local", field(human, "||J||_2 certified lower"), js["jacobian_norm_2_certified_lower"], "lower")
    encloses("local", field(human, "||J||_2 certified upper"), js["jacobian_norm_2_certified_upper"], "upper")
    m = re.search(r"\|\|J\|\|_inf certified\s+\[([^,]+), ([^\]]+)\]", human)
    encloses("local inf", m.group(1), js["jacobian_norm_inf_certified_lower"], "lower")
    encloses("local inf", m.group(2), js["jacobian_norm_inf_certified_upper"], "upper")
    encloses("local delta", field(human, "delta certified upper"), js["delta_certified_upper"], "upper")
    encloses("local radius", field(human, "radius certified"), js["certified_radius"]["certified"], "lower")


def check_brackets():
    w = os.path.join(WORK, "w")
    args = ["--random", "d=4,heads=2,seed=5", "--n", "5", "--radius", "1.5", "--certify", "--evaluations", "200",
            "--budget", "0", "--witness", w + ".npy"]
    human = run("bracket", *args).stdout.decode()
    js = json.loads(run("bracket", *args, "--json").stdout)
    encloses("bracket", field(human, "lower"), js["lower_certified"], "lower")
    encloses("bracket", field(human, "upper"), js["upper_certified"], "upper")
    args = ["--random", "d=2,heads=1,seed=2", "--n", "6", "--radius", "1", "--certify", "--evaluations", "150",
            "--budget", "0", "--witness", w]
    human = run("measure-lipschitz", *args).stdout.decode()
    js = json.loads(run("measure-lipschitz", *args, "--json").stdout)
    encloses("measure-lipschitz", field(human, "lower"), js["lower_certified"], "lower")
    encloses("measure-lipschitz", field(human, "upper"), js["upper_certified"], "upper")


def check_names_and_overflow():
    plain = os.path.join(WORK, "tokens.npy")
    np.save(plain, np.arange(12, dtype=np.float64).reshape(3, 4))
    bad = os.path.join(os.fsencode(WORK), b"tokens_\xff\xfe.npy")
    os.rename(plain, bad)
    for args in (["inspect", "--json", bad], ["norm", bad, "--json"]):
        p = run(*args)
        if p.returncode == 0:
            text = p.stdout.decode("utf-8")  # valid UTF-8, or this raises
            if "tokens_\\\\xff\\\\xfe.npy" not in text:
                failures.append(f"{args[0]}: the invalid bytes are not escaped in {text[:200]!r}")
            json.loads(text)
    huge = os.path.join(WORK, "huge.npy")
    np.save(huge, np.full((3, 3), 1e308))
    p = run("norm", huge, expect=2)
    if p.stderr.count(b"\n") != 1 or b"huge.npy" not in p.stderr:
        failures.append(f"norm of a 1e308 matrix: stderr {p.stderr!r}")


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
for check in (check_norm, check_wasserstein, check_bound, check_local, check_brackets, check_names_and_overflow):
    try:
        check()
    except Exception as e:  # a missing line is a failure too, reported with the others
        failures.append(f"{check.__name__}: {type(e).__name__}: {e}")
for f in failures:
    print(f, file=sys.stderr)
sys.exit(1 if failures else 0)
