"""`regatta certify` on the digits ViT twice: from its safetensors file and from its ONNX export, which the
graph path recognises as a transformer and certifies by the block pipeline
(docs/models.md#recognised-transformers). The ONNX file's LayerNorm epsilon is a float32 attribute (1e-6
rounded to single precision), so the safetensors run is given that epsilon too (--config): then the per-input
certified radii and attack radii must be identical. With the safetensors file's own 1e-6 they must agree to
1e-8 relative (the effect of the epsilon's rounding alone). The ONNX run must say that it used the recognised
transformer.

    certify_onnx_recognised.py REGATTA VIT_DIR WORK_DIR
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


def certify(model, name, config=None):
    out = os.path.join(WORK, name + ".json")
    command = [REGATTA, "certify", "--model", os.path.join(VIT, model), "--data", os.path.join(VIT, "test_set.npz"),
               "--limit", "3", "--out", out]
    if config:
        command += ["--config", config]
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        sys.exit(f"{model}: exit {run.returncode}: {run.stderr.strip()}")
    with open(out, encoding="utf-8") as f:
        return json.load(f)["inputs"], run.stdout


float32_config = float32_eps_config(VIT, WORK)

failures = []
same_eps, _ = certify("vit_digits.safetensors", "safetensors_float32_eps", float32_config)
own_eps, _ = certify("vit_digits.safetensors", "safetensors")
onnx, text = certify("vit_digits.onnx", "onnx")
if "recognised transformer" not in text:
    failures.append("the ONNX run does not say it certified the recognised transformer")
if not len(same_eps) == len(own_eps) == len(onnx) == 3:
    failures.append(f"rows: {len(same_eps)}, {len(own_eps)} and {len(onnx)}, expected 3 each")
for a, b, c in zip(same_eps, onnx, own_eps):
    for key in ("certified_radius", "attack_radius"):
        if a[key] != b[key]:
            failures.append(f"input {a['index']}: {key} {a[key]} (safetensors, float32 eps) against {b[key]} (onnx)")
        x, y = c[key], b[key]
        if not (x == y or (x is not None and y is not None and abs(x - y) <= 1e-8 * max(abs(x), abs(y)))):
            failures.append(f"input {a['index']}: {key} {x} (safetensors) against {y} (onnx)")
    if not a["certified_radius"] > 0:
        failures.append(f"input {a['index']}: nothing certified, the comparison says little")
for f in failures:
    print("FAIL:", f)
print("certified radii:", [r["certified_radius"] for r in own_eps], [r["certified_radius"] for r in onnx])
sys.exit(1 if failures else 0)
