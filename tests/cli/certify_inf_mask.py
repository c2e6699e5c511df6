"""`regatta certify` on a causal model whose mask is filled with -inf (tests/data/onnx/causal_where_inf.onnx,
nanoGPT's masked_fill(-inf); docs/graph.md#non-finite-constants):

  * `inspect` records the attention with a causal mask and recognises the transformer;
  * certify in l2 (the recognised Model's block pipeline) and in l-inf (the graph pass, whose softmax gives
    the -inf entries weight exactly 0) at the last token: certified <= attack on every row, something
    certified, and points inside each certified ball or box (uniform, vertices, and the ends of projected
    gradient ascent) keep the label under torch's float64 forward of the exported graph (onnx_torch.py, an
    evaluation independent of regatta), while the same search at twice the attack radius changes a label.

    certify_inf_mask.py REGATTA ONNX_DIR WORK_DIR     (exit 77: no numpy, torch or onnx)
"""
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    import torch

    sys.path.insert(0, sys.argv[2])
    from onnx_torch import OnnxTorch
    from token_sets import points_inside
except ImportError as e:
    print("skipped:", e)
    sys.exit(77)

REGATTA, DATA, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
MODEL = os.path.join(DATA, "causal_where_inf.onnx")
SET = os.path.join(DATA, "causal_where_inf.test_set.npz")
failures = []
torch.manual_seed(20261207)
reference = OnnxTorch(MODEL)
data = np.load(SET)
images, labels = data["images"], data["labels"]


def run(*args):
    return subprocess.run([REGATTA, *args], capture_output=True, text=True, check=False)


r = run("inspect", MODEL)
if r.returncode != 0:
    failures.append(f"inspect: exit {r.returncode}: {r.stderr.strip()}")
for want in ("mask causal,", "transformer: recognised, pre-norm causal text transformer"):
    if want not in r.stdout:
        failures.append(f"inspect: no {want!r} in its output")
if "(fill" in r.stdout:
    failures.append("inspect: a -inf mask printed with a fill (it is the exact mask)")

for norm in ("2", "inf"):
    out = os.path.join(WORK, f"certify_{norm}.json")
    r = run("certify", "--model", MODEL, "--data", SET, "--norm", norm, "--out", out)
    if r.returncode != 0:
        sys.exit(f"certify --norm {norm}: exit {r.returncode}: {r.stderr.strip()}")
    with open(out, encoding="utf-8") as f:
        j = json.load(f)
    if j.get("position") != 5:
        failures.append(f"--norm {norm}: JSON position {j.get('position')}, expected 5")
    rows = j["inputs"]
    if len(rows) != len(labels):
        failures.append(f"--norm {norm}: {len(rows)} rows for {len(labels)} inputs")
    if not any((row["certified_radius"] or 0) > 0 for row in rows):
        failures.append(f"--norm {norm}: nothing certified")
    for row in rows:
        c, a = row["certified_radius"], row["attack_radius"]
        if c is None or not np.isfinite(c) or (a is not None and not c <= a):
            failures.append(f"--norm {norm}: input {row['index']}: certified {c}, attack {a}")
        if not c or c <= 0:
            continue
        label = int(labels[row["index"]])
        x = torch.from_numpy(images[row["index"]]).unsqueeze(0)
        points = points_inside(reference, x, 0.999 * c, -1, label, norm)
        with torch.no_grad():
            y = reference(x + points)[:, -1, :]
        wrong = int((y.argmax(dim=1) != label).sum())
        if wrong:
            failures.append(f"--norm {norm}: input {row['index']}: {wrong} points inside the certified set of "
                            f"radius {c} change the label")
    # The search can fail: at twice the attack radius it changes some label.
    changed = 0
    for row in rows:
        if row["attack_radius"]:
            x = torch.from_numpy(images[row["index"]]).unsqueeze(0)
            label = int(labels[row["index"]])
            points = points_inside(reference, x, 2 * row["attack_radius"], -1, label, norm)
            with torch.no_grad():
                changed += int((reference(x + points)[:, -1, :].argmax(dim=1) != label).any())
    if changed == 0:
        failures.append(f"--norm {norm}: the search changes no label at twice the attack radius")
    print(f"--norm {norm}: certified {[row['certified_radius'] for row in rows]}, "
          f"attack {[row['attack_radius'] for row in rows]}")

if failures:
    print("\n".join(failures))
    sys.exit(1)
print("certify_inf_mask: ok")
