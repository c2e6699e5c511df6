"""`regatta inspect` and `regatta certify --limit 3` on the two ViTs written other ways and trained on the digits
(tests/data/vit_digits_torchvision, tests/data/vit_digits_encoder; docs/models.md#recognised-transformers).
Each export must be recognised (inspect names its layout), certify must run through the recognised transformer
and, on every row, give 0 <= certified radius <= attack radius, with a positive certified radius on every
correctly classified input whose attack radius is positive (else the comparison says little). The bisection's
tolerance is coarse (0.5): the point is the order of the two radii, not the certified radius's last digits, and
the encoder's three inputs take 13 CPU-s instead of 33.

    certify_trained_vits.py REGATTA DATA_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

REGATTA, DATA, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)

EXPECTED = {
    "vit_digits_torchvision": "pre-norm ViT: 2 blocks, width 32, 4 heads, MLP 64 (gelu_erf), cls pooling",
    "vit_digits_encoder": "post-norm ViT: 3 blocks, width 48, 4 heads, MLP 96 (relu), mean pooling",
}

failures = []
for name, layout in EXPECTED.items():
    model = os.path.join(DATA, name, name + ".onnx")
    run = subprocess.run([REGATTA, "inspect", model], capture_output=True, text=True, check=False)
    if run.returncode != 0 or "transformer: recognised, " + layout not in run.stdout:
        failures.append(f"{name}: inspect (exit {run.returncode}) does not say 'recognised, {layout}':\n"
                        f"{run.stdout}{run.stderr}")
    out = os.path.join(WORK, name + ".json")
    run = subprocess.run([REGATTA, "certify", "--model", model, "--data",
                          os.path.join(DATA, "vit_digits", "test_set.npz"), "--limit", "3", "--tolerance", "0.5",
                          "--out", out],
                         capture_output=True, text=True, check=False)
    if run.returncode != 0:
        failures.append(f"{name}: certify exit {run.returncode}: {run.stderr.strip()}")
        continue
    if "recognised transformer" not in run.stdout:
        failures.append(f"{name}: certify does not say it used the recognised transformer")
    with open(out, encoding="utf-8") as f:
        rows = json.load(f)["inputs"]
    if len(rows) != 3:
        failures.append(f"{name}: {len(rows)} rows, expected 3")
    for r in rows:
        c, a = r["certified_radius"], r["attack_radius"]
        if c is None or a is None or not 0 <= c <= a:
            failures.append(f"{name}: input {r['index']}: certified {c}, attack {a}")
        elif r["prediction"] == r["label"] and a > 0 and not c > 0:
            failures.append(f"{name}: input {r['index']}: correctly classified but nothing certified")
    print(name, [(r["certified_radius"], r["attack_radius"]) for r in rows])
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
