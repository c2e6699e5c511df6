"""`regatta certify --model M.safetensors` with --norm inf or --input-range: the rows walk the layout's graph
(model_graph; docs/models.md#certifying-a-model-file), as the ONNX export's rows do. The two files of the
digits ViT are two graphs of one function written by two front ends (the safetensors layout reader and the
ONNX importer: 70 and 61 nodes), so their certified and attack radii must agree. The safetensors run gets the
ONNX file's float32 LayerNorm epsilon (--config), and the radii must then agree to 1e-6 relative: the two
walks round differently, so bit equality is not expected, but a different set, norm or clamp would move
the radii by far more. A box the data leaves is refused naming the data file.

    certify_safetensors_graph.py REGATTA VIT_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

from float32_eps import float32_eps_config

REGATTA, VIT, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
DATA = os.path.join(VIT, "test_set.npz")

float32_config = float32_eps_config(VIT, WORK)


def certify(model, name, extra):
    out = os.path.join(WORK, name + ".json")
    command = [REGATTA, "certify", "--model", os.path.join(VIT, model), "--data", DATA, "--out", out] + extra
    if model.endswith(".safetensors"):
        command += ["--config", float32_config]
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        sys.exit(f"{name}: exit {run.returncode}: {run.stderr.strip()}")
    with open(out, encoding="utf-8") as f:
        return json.load(f)["inputs"], run.stdout


failures = []
# One input each (about 10 CPU-s a run, mostly the attack): the two graphs are compared radius for radius, and a
# second input would go through the same walks again.
for name, extra in [("linf", ["--norm", "inf", "--limit", "1"]), ("range", ["--input-range", "0,1", "--limit", "1"])]:
    st, text = certify("vit_digits.safetensors", "safetensors_" + name, extra)
    ox, _ = certify("vit_digits.onnx", "onnx_" + name, extra)
    if "over the graph" not in text:
        failures.append(f"{name}: the safetensors run does not say it walked the graph")
    if len(st) != len(ox) or not st:
        failures.append(f"{name}: {len(st)} and {len(ox)} rows")
    for i, (a, b) in enumerate(zip(st, ox)):
        for key in ("certified_radius", "attack_radius"):
            x, y = a[key], b[key]
            if x is None or y is None or not x > 0 or abs(x - y) > 1e-6 * max(abs(x), abs(y)):
                failures.append(f"{name} input {i}: {key} {x} (safetensors) against {y} (onnx)")
        if a["certified_radius"] is not None and a["attack_radius"] is not None \
                and a["certified_radius"] > a["attack_radius"]:
            failures.append(f"{name} input {i}: certified above the attack radius")

# A box the test set leaves: one line naming the data file, exit 2, nothing written.
out = os.path.join(WORK, "refused.json")
run = subprocess.run([REGATTA, "certify", "--model", os.path.join(VIT, "vit_digits.safetensors"), "--data", DATA,
                      "--input-range", "0.5,1", "--limit", "1", "--out", out], capture_output=True, text=True,
                     check=False)
lines = run.stderr.strip().splitlines()
if run.returncode != 2 or len(lines) != 1 or "test_set.npz" not in lines[0] or "--input-range" not in lines[0]:
    failures.append(f"--input-range 0.5,1: exit {run.returncode}, stderr {run.stderr!r}")
if os.path.exists(out):
    failures.append("--input-range 0.5,1 wrote its output")

if failures:
    sys.exit("\n".join(failures))
print("safetensors rows over the graph agree with the ONNX export's (l-inf, input range); a box the data leaves "
      "is refused")
