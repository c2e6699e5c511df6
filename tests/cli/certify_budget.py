"""`regatta certify --model mlp_tiny.onnx --budget-per-input S` (docs/models.md#branch-and-bound-in-certify)
against an independent check in numpy: mlp_tiny (2 inputs, 3 ReLUs, 2 logits) evaluated from the ONNX file's
own weights.

  (a) with the budget, per input: certified_radius <= bab_radius <= attack_radius, in l-inf (with and without
      --input-range) and in l2, and branch and bound raises the median radius above the affine forms' one;
  (b) soundness: in the set at bab_radius (a dense grid of the 2-D box or disc, its boundary, and projected
      gradient descent on the margin from many starts) the label never changes; the same sampler run at 1.05
      times the attack radius must find a label change on every input the attack broke (so it can fail);
  (c) the rows without the option have exactly the columns they had before it, and the same certified and
      attack radii as the rows with it;
  (d) --checkpoint keeps the bab columns and records the budget;
  (e) a graph without ReLU (encoder_postnorm_gelu): l2 rows say the budget cannot help, l-inf runs input
      splitting.

    certify_budget.py REGATTA DATA_DIR WORK_DIR      (exit 77: numpy or onnx missing, the test is skipped)
"""
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np
    import onnx
    from onnx import numpy_helper
except ImportError:
    print("skipped: needs numpy and onnx (Debian: python3-numpy, python3-onnx)")
    sys.exit(77)

REGATTA, DATA, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
MODEL = os.path.join(DATA, "onnx", "mlp_tiny.onnx")
W = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in onnx.load(MODEL).graph.initializer}


def logits(x):
    """y = W2 relu(W1 x + b1) + b2 for a batch x (N, 2)."""
    return np.maximum(x @ W["w1"].T + W["b1"], 0) @ W["w2"].T + W["b2"]


def margin_grad(x, label):
    """The margin y_label - y_other and its gradient (2 classes: one other)."""
    h = x @ W["w1"].T + W["b1"]
    w = W["w2"][label] - W["w2"][1 - label]
    active = (h > 0).astype(np.float64)
    return (np.maximum(h, 0) @ w + W["b2"][label] - W["b2"][1 - label]), (active * w) @ W["w1"]


def project(points, centre, radius, norm, box):
    if norm == "inf":
        points = np.clip(points, centre - radius, centre + radius)
    else:
        d = points - centre
        n = np.linalg.norm(d, axis=1, keepdims=True)
        points = centre + d * np.minimum(1, radius / np.maximum(n, 1e-300))
    return np.clip(points, box[0], box[1]) if box else points


def set_points(centre, radius, norm, box):
    """A dense grid of the set, its boundary, and the end points of projected gradient descent on the margin."""
    t = np.linspace(-1, 1, 301)
    grid = centre + radius * np.stack(np.meshgrid(t, t), -1).reshape(-1, 2)
    if norm == "2":
        grid = grid[np.linalg.norm(grid - centre, axis=1) <= radius]
        angle = np.linspace(0, 2 * np.pi, 4001)
        grid = np.vstack([grid, centre + radius * np.stack([np.cos(angle), np.sin(angle)], -1)])
    else:
        edge = np.linspace(-1, 1, 4001)
        for s in (-1, 1):
            grid = np.vstack([grid, centre + radius * np.stack([edge, np.full_like(edge, s)], -1),
                              centre + radius * np.stack([np.full_like(edge, s), edge], -1)])
    return project(grid, centre, radius, norm, box)


def worst_margin(centre, label, radius, norm, box, rng):
    points = set_points(centre, radius, norm, box)
    m = (logits(points)[:, label] - logits(points)[:, 1 - label]).min()
    starts = project(centre + radius * rng.uniform(-1, 1, (64, 2)), centre, radius, norm, box)
    for _ in range(200):  # projected gradient descent on the margin, step radius/20
        value, grad = margin_grad(starts, label)
        m = min(m, value.min())
        step = np.sign(grad) if norm == "inf" else grad / np.maximum(np.linalg.norm(grad, axis=1, keepdims=True),
                                                                     1e-300)
        starts = project(starts - radius / 20 * step, centre, radius, norm, box)
    return min(m, margin_grad(starts, label)[0].min())


# Inputs of both classes, every one predicted correctly (labels from the numpy forward).
images = np.array([[0.3, 0.2], [-0.4, 0.5], [0.8, -0.6], [-0.7, -0.2], [0.1, 0.9], [0.6, 0.4], [-0.2, -0.8],
                   [0.45, 0.05]])
labels = logits(images).argmax(1)
data = os.path.join(WORK, "points.npz")
np.savez(data, images=images, labels=labels.astype(np.int64))
OLD_COLUMNS = {"index", "label", "prediction", "margin", "margin_lower", "naive_radius", "attack_radius",
               "certified_radius", "refuted_radius", "method", "region_checks", "local_radius", "local_checks"}


def certify(name, *options, model=MODEL, points=data):
    out = os.path.join(WORK, name + ".json")
    run = subprocess.run([REGATTA, "certify", "--model", model, "--data", points, "--out", out, *options],
                         capture_output=True, text=True, check=False)
    if run.returncode != 0:
        sys.exit(f"{name}: exit {run.returncode}: {run.stderr.strip()}")
    with open(out, encoding="utf-8") as f:
        return json.load(f)


failures = []
rng = np.random.default_rng(7)
for norm, box in (("inf", None), ("inf", (-1.0, 1.0)), ("2", None)):
    extra = ["--norm", norm] + (["--input-range", f"{box[0]},{box[1]}"] if box else [])
    tag = f"l{norm}" + (" in [-1, 1]" if box else "")
    plain = certify(f"plain_{norm}_{bool(box)}", *extra)
    bab = certify(f"bab_{norm}_{bool(box)}", *extra, "--budget-per-input", "2")
    for p, b in zip(plain["inputs"], bab["inputs"]):
        i = p["index"]
        if set(p) != OLD_COLUMNS:
            failures.append(f"{tag} input {i}: the columns without the option are {sorted(p)}")
        for key in ("certified_radius", "attack_radius", "margin_lower", "prediction"):
            if p[key] != b[key]:
                failures.append(f"{tag} input {i}: {key} {p[key]} without the budget, {b[key]} with it")
        r0, r, attack = b["certified_radius"], b["bab_radius"], b["attack_radius"]
        if not (r0 > 0 and r >= r0 and (attack is None or r <= attack)):
            failures.append(f"{tag} input {i}: certified {r0}, bab {r}, attack {attack}")
        if b["bab_seconds"] > 2 + 1:
            failures.append(f"{tag} input {i}: {b['bab_seconds']} s used of a budget of 2 s")
        centre, label = images[i], labels[i]
        m = worst_margin(centre, label, r, norm, box, rng)
        if not m > 0:
            failures.append(f"{tag} input {i}: the label changes inside the bab radius {r} (margin {m})")
        if attack is not None and not worst_margin(centre, label, 1.05 * attack, norm, box, rng) < 0:
            failures.append(f"{tag} input {i}: the sampler finds no label change at 1.05 x attack {attack}")
    med0, med = bab["summary"]["median_certified_radius"], bab["summary"]["median_bab_radius"]
    print(f"{tag}: median certified {med0}, with branch and bound {med}, "
          f"median attack {bab['summary']['median_attack_radius']}")
    if not med > med0:
        failures.append(f"{tag}: branch and bound does not raise the median radius ({med0} -> {med})")
# --checkpoint keeps the bab columns: a rerun reads every row back (the same numbers, though the branch and
# bound's time-limited search would not reproduce them), and another budget refuses the file (exit 2).
checkpoint = os.path.join(WORK, "budget.checkpoint")
first = certify("checkpoint_first", "--norm", "inf", "--budget-per-input", "1", "--checkpoint", checkpoint)
again = certify("checkpoint_again", "--norm", "inf", "--budget-per-input", "1", "--checkpoint", checkpoint)
if first["inputs"] != again["inputs"]:
    failures.append("--checkpoint: the rows read back differ from the rows written")
other = subprocess.run([REGATTA, "certify", "--model", MODEL, "--data", data, "--norm", "inf",
                        "--budget-per-input", "2", "--checkpoint", checkpoint], capture_output=True, text=True)
if other.returncode != 2 or "budget.checkpoint" not in other.stderr or other.stderr.count("\n") != 1:
    failures.append(f"--checkpoint of another budget: exit {other.returncode}, {other.stderr!r}")

# A graph without ReLU (encoder_postnorm_gelu): in l2 the budget cannot help (phase splitting only) and the
# row says so; in l-inf input splitting runs.
gelu = os.path.join(DATA, "onnx", "encoder_postnorm_gelu.onnx")
x = np.load(os.path.join(DATA, "onnx", "encoder_postnorm_gelu.input.npy"))
label = int(np.load(os.path.join(DATA, "onnx", "encoder_postnorm_gelu.logits.npy")).reshape(-1).argmax())
gelu_data = os.path.join(WORK, "gelu.npz")
np.savez(gelu_data, images=x.reshape(1, *x.shape[1:]).astype(np.float64), labels=np.array([label]))
for norm in ("2", "inf"):
    row = certify(f"gelu_{norm}", "--norm", norm, "--budget-per-input", "1", "--tolerance", "0.1", model=gelu,
                  points=gelu_data)["inputs"][0]
    if not row["certified_radius"] > 0:
        failures.append(f"gelu l{norm}: nothing certified ({row['certified_radius']}), the check says little")
    if norm == "2" and not (row["bab_radius"] == row["certified_radius"] and row["bab_tests"] == 0
                            and "no ReLU" in (row["bab_note"] or "")):
        failures.append(f"gelu l2: the row without ReLU is {row}")
    if norm == "inf" and not (row["bab_radius"] >= row["certified_radius"] and row["bab_tests"] >= 1
                              and row["bab_note"] is None):
        failures.append(f"gelu l-inf: input splitting did not run: {row}")
for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
