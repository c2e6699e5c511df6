#!/usr/bin/env python3
"""A 3-D --input (B x n x d) is a batch: `attend`, `local` and `bound` on the batch give, input by input, exactly what
they give on each input alone (two runs of the command, compared bit for bit / key for key), and the bad
batches exit 2 with one line naming the file or option, writing nothing.

    batch_inputs.py REGATTA WORK_DIR      (exit 77: numpy missing, the test is skipped)
"""
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    sys.exit(77)

REGATTA, WORK = sys.argv[1], sys.argv[2]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures = []
LAYER = ["--random", "d=4,heads=2,seed=3,biases=1"]


def path(name):
    return os.path.join(WORK, name)


def run(*args, expect=0):
    p = subprocess.run([REGATTA, *args], capture_output=True, text=True)
    if p.returncode != expect:
        failures.append(f"{' '.join(args)}: exit {p.returncode}, expected {expect}: {p.stderr.strip()}")
    return p


rng = np.random.default_rng(5)
batch = rng.standard_normal((3, 5, 4)) * 0.7
np.save(path("batch.npy"), batch)
contexts = rng.standard_normal((3, 2, 4))
np.save(path("contexts.npy"), contexts)
np.save(path("context.npy"), contexts[0])
for b in range(3):
    np.save(path(f"x{b}.npy"), batch[b])
    np.save(path(f"c{b}.npy"), contexts[b])

# attend: self-attention, cross-attention with one shared context and with one context per input.
for extra, per_input in [([], None), (["--context", path("context.npy")], lambda b: path("context.npy")),
                         (["--context", path("contexts.npy")], lambda b: path(f"c{b}.npy"))]:
    run("attend", *LAYER, "--input", path("batch.npy"), "--out", path("y.npy"), "--depth", "2", *extra)
    Y = np.load(path("y.npy"))
    if Y.shape != (3, 5, 4):
        failures.append(f"attend batch {extra}: output shape {Y.shape}")
        continue
    for b in range(3):
        alone = ["--context", per_input(b)] if per_input else []
        run("attend", *LAYER, "--input", path(f"x{b}.npy"), "--out", path("y1.npy"), "--depth", "2", *alone)
        if not np.array_equal(np.load(path("y1.npy")), Y[b]):
            failures.append(f"attend batch {extra}: input {b} differs from attending it alone")

# local: certified norms, δ, the region enclosure, the radius — every key but the timings. One segment piece in the
# region's second-order forms (the default takes 4 to 16 here, at 2.5 times the cost): the batch and the single
# inputs go through the same region code either way.
LOCAL = ["local", *LAYER, "--epsilon", "1e-3", "--certify", "--margin", "1", "--ball", "1e-4", "--region-pieces", "1",
         "--json"]
out = json.loads(run(*LOCAL, "--input", path("batch.npy")).stdout or "{}")
if out.get("batch") != 3 or len(out.get("inputs", [])) != 3:
    failures.append(f"local batch: expected 3 inputs, got {list(out)}")
else:
    for b in range(3):
        alone = json.loads(run(*LOCAL, "--input", path(f"x{b}.npy")).stdout)
        one = dict(out["inputs"][b])
        if one.pop("index") != b:
            failures.append(f"local batch: input {b} has the wrong index")
        one.pop("stage_seconds")
        alone.pop("stage_seconds")
        if one != alone:
            failures.append(f"local batch: input {b} differs from the command on it alone")

# bound: the bounds at each input (castin.local depends on the tokens) equal the command on that input alone.
scaled = batch / (2 * np.linalg.norm(batch, axis=2, keepdims=True).max())  # every token inside B_1
np.save(path("scaled.npy"), scaled)
BOUND = ["bound", "--random", "d=4,heads=2,seed=3", "--radius", "1", "--json"]  # no biases: castin.local applies
out = json.loads(run(*BOUND, "--input", path("scaled.npy")).stdout or "{}")
if out.get("batch") != 3 or len(out.get("inputs", [])) != 3:
    failures.append(f"bound batch: expected 3 inputs, got {list(out)}")
else:
    for b in range(3):
        np.save(path(f"s{b}.npy"), scaled[b])
        alone = json.loads(run(*BOUND, "--input", path(f"s{b}.npy")).stdout)
        if out["inputs"][b] != {"index": b, "bounds": alone}:
            failures.append(f"bound batch: input {b} differs from the command on it alone")
        if not any(r["id"] == "castin.local" and r["applies"] for r in alone):
            failures.append(f"bound batch: castin.local does not apply at input {b}, so the check shows nothing")
outside = scaled.copy()
outside[1, 2] *= 10
np.save(path("outside.npy"), outside)

# Bad batches: exit 2, one line naming the file or option, no output file.
np.save(path("empty.npy"), np.zeros((0, 5, 4)))
np.save(path("four_d.npy"), np.zeros((1, 2, 5, 4)))
np.save(path("wide.npy"), np.zeros((2, 5, 3)))
nan = batch.copy()
nan[2, 1, 3] = np.nan
np.save(path("nan.npy"), nan)
np.save(path("two_contexts.npy"), contexts[:2])
cases = [
    (["attend", *LAYER, "--input", path("empty.npy")], "empty.npy"),
    (["attend", *LAYER, "--input", path("four_d.npy")], "four_d.npy"),
    (["attend", *LAYER, "--input", path("wide.npy")], "wide.npy"),
    (["attend", *LAYER, "--input", path("nan.npy")], "nan.npy"),
    (["attend", *LAYER, "--input", path("batch.npy"), "--context", path("two_contexts.npy")], "--context"),
    (["attend", *LAYER, "--input", path("x0.npy"), "--context", path("contexts.npy")], "--context"),
    (["local", *LAYER, "--input", path("nan.npy")], "nan.npy"),
    (["local", *LAYER, "--input", path("empty.npy")], "empty.npy"),
    (["bound", *LAYER, "--radius", "1", "--input", path("outside.npy")], "outside.npy [input 1]"),
    (["bound", *LAYER, "--input", path("four_d.npy")], "four_d.npy"),
]
for args, name in cases:
    target = path("bad_out.npy")
    if args[0] == "attend":
        args = [*args, "--out", target]
    p = run(*args, expect=2)
    lines = p.stderr.strip().splitlines()
    if len(lines) != 1 or name not in lines[0]:
        failures.append(f"{args[0]} {name}: stderr should be one line naming {name}: {p.stderr!r}")
    if os.path.exists(target):
        failures.append(f"{args[0]} {name}: wrote {target}")

for f in failures:
    print("FAIL:", f)
print(f"batch inputs: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
