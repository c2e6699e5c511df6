"""`regatta certify` on a causal text model exported from torch with its head over every token
(tests/data/onnx/gpt_causal.onnx: logits [1, 6, 11]; docs/models.md#per-token-logits-one-position):

  * `inspect` reads it, at the last token, as a pre-norm causal text transformer with last-token pooling;
  * certify in l2 (the recognised Model's rows) and in l-inf (the graph pass) at the default position, the
    last: the JSON records "position" 5, the header prints it, certified <= attack on every row, something is
    certified, and points inside each certified ball or box (uniform, and the ends of projected gradient
    ascent) keep the label under torch's float64 forward of the exported graph (onnx_torch.py, an evaluation
    independent of regatta), while the same search at twice the attack radius changes most labels;
  * --position 0 (labels of token 0) and --position 2 (no pooling of the Model takes them: the graph pass's
    rows) give other rows than the last; token 0's certified balls keep token 0's label under torch;
  * a bad --position (out of range, not a number, negative, on a model whose output has no token axis) is
    refused with exit 2 and one line naming the option, nothing written.

    certify_gpt_causal.py REGATTA ONNX_DIR WORK_DIR     (exit 77: no numpy, torch or onnx)
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
MODEL = os.path.join(DATA, "gpt_causal.onnx")
LAST, FIRST = os.path.join(DATA, "gpt_causal.test_set.npz"), os.path.join(DATA, "gpt_causal.test_set_first.npz")
failures = []
torch.manual_seed(20261207)
reference = OnnxTorch(MODEL)


def run(*args):
    return subprocess.run([REGATTA, *args], capture_output=True, text=True, check=False)


def certify(name, *args, data=LAST):
    out = os.path.join(WORK, name + ".json")
    r = run("certify", "--model", MODEL, "--data", data, "--out", out, *args)
    if r.returncode != 0:
        sys.exit(f"{name}: exit {r.returncode}: {r.stderr.strip()}")
    with open(out, encoding="utf-8") as f:
        return json.load(f), r.stdout


def sample_check(name, rows, position, norm, labels, images, factor=0.999):
    """Points inside each certified set (radius scaled by `factor`) keep the label under torch; the count of
    rows where some point changes it."""
    changed = 0
    for row in rows:
        r = row["certified_radius"]
        if not r or r <= 0:
            continue
        label = int(labels[row["index"]])
        x = torch.from_numpy(images[row["index"]]).unsqueeze(0)
        points = points_inside(reference, x, factor * r, position, label, norm)
        with torch.no_grad():
            y = reference(x + points)[:, position, :]
        wrong = int((y.argmax(dim=1) != label).sum())
        changed += wrong > 0
        if wrong and factor < 1:
            failures.append(f"{name}: input {row['index']}: {wrong} of {len(y)} points inside the certified "
                            f"{'l2 ball' if norm == '2' else 'l-inf box'} of radius {r} change the label")
    return changed


def check_rows(name, j, position, norm, data, count):
    if j.get("position") != position:
        failures.append(f"{name}: JSON position {j.get('position')}, expected {position}")
    rows = j["inputs"]
    if len(rows) != count:
        failures.append(f"{name}: {len(rows)} rows, expected {count}")
    for row in rows:
        c, a = row["certified_radius"], row["attack_radius"]
        if c is None or (a is not None and not c <= a):
            failures.append(f"{name}: input {row['index']}: certified {c} against attack {a}")
    if not any((row["certified_radius"] or 0) > 0 for row in rows):
        failures.append(f"{name}: nothing certified")
    npz = np.load(data)
    sample_check(name, rows, position, norm, npz["labels"], npz["images"])
    # The check can fail: the same search at twice the attack radius changes the label of most inputs.
    far = [dict(row, certified_radius=2 * row["attack_radius"]) for row in rows if row["attack_radius"]]
    flipped = sample_check(name, far, position, norm, npz["labels"], npz["images"], 1.0)
    print(f"{name}: {flipped} of {len(far)} labels changed at twice the attack radius")
    if flipped < len(far) / 2:
        failures.append(f"{name}: the sampling changes the label of {flipped} of {len(far)} inputs at twice "
                        f"the attack radius: it could not see a false certificate")
    return rows


# inspect: the layout at the last token.
r = run("inspect", MODEL)
for want in ("logits per token (6 tokens)", "transformer: recognised, pre-norm causal text transformer: 2 blocks, "
             "width 16, 4 heads, MLP 64 (gelu_tanh), last pooling"):
    if r.returncode != 0 or want not in r.stdout:
        failures.append(f"inspect: '{want}' not in its output (exit {r.returncode}): {r.stdout[-600:]}{r.stderr}")

l2, text = certify("l2")
if "position: the logits of token 5 of 6 (the last)" not in text:
    failures.append("l2: the header does not print the position")
if "recognised transformer" not in text:
    failures.append("l2: not certified on the recognised transformer")
last = check_rows("l2", l2, 5, "2", LAST, 8)
linf, text = certify("linf", "--norm", "inf", "--limit", "2")  # the graph pass: about 1 s an input
if "over the graph" not in text:
    failures.append("l-inf: not the graph pass")
check_rows("linf", linf, 5, "inf", LAST, 2)
first, text = certify("first", "--position", "0", "--limit", "2", data=FIRST)
if "over the graph" not in text:
    failures.append("--position 0: not the graph pass")
first = check_rows("first", first, 0, "2", FIRST, 2)
if [row["margin"] for row in first] == [row["margin"] for row in last[:2]]:
    failures.append("--position 0 gives the last token's rows")
middle, text = certify("middle", "--position", "2", "--limit", "2")
if "over the graph" not in text:
    failures.append("--position 2: not the graph pass")
if middle.get("position") != 2 or [row["margin"] for row in middle["inputs"]] == [row["margin"] for row in last[:2]]:
    failures.append("--position 2 gives the last token's rows")

# Refusals: exit 2, one line naming --position, no --out written.
mlp = os.path.join(DATA, "mlp_tiny.onnx")
for model, position in ((MODEL, "6"), (MODEL, "x"), (MODEL, "-1"), (MODEL, "1e3"), (MODEL, "99999999999999999999"),
                        (mlp, "last")):
    out = os.path.join(WORK, "refused.json")
    args = ["--model", model, "--position", position]
    command = ["certify", *args, "--data", LAST, "--out", out]
    r = run(*command)
    lines = r.stderr.strip().splitlines()
    if r.returncode != 2 or len(lines) != 1 or "--position" not in lines[0] or os.path.exists(out):
        failures.append(f"{' '.join(args)}: exit {r.returncode}, stderr {r.stderr.strip()!r}")

for f in failures:
    print("FAIL:", f)
print("l2 certified:", [row["certified_radius"] for row in last])
print("l-inf certified:", [row["certified_radius"] for row in linf["inputs"]])
sys.exit(1 if failures else 0)
