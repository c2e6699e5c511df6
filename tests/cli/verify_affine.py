#!/usr/bin/python3
"""regatta verify --method affine|ibp --no-split on tests/data/onnx/vit_vnncomp_like.onnx (docs/verify.md):

    verify_affine.py REGATTA ONNX_DIR NUMPY_EVALUATOR_DIR WORK_DIR

Around the torch input, l_inf boxes of growing radius with the robustness property OR_{i != label} Y_i >= Y_label.
Checks, against bench/vnncomp/onnx_numpy.py (an independent float64 numpy evaluator of the ONNX graph) at
random corners and interior points of each box:
  * soundness: the certified upper bounds root_ibp_margin_upper and root_margin_upper (IBP and the better of IBP
    and the affine forms) are at least the largest sampled max_{i != label} (Y_i - Y_label); a sampled point
    that satisfies the property forbids unsat;
  * the affine forms bound at least as tightly as IBP, and at some radius prove unsat alone (proved_by affine
    or ibp+affine, no splitting) where IBP does not;
  * --method ibp reports no affine bound, and the JSON says which bound proved each unsat.
Exit 77 (skipped) when numpy or onnx is missing.
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
except ImportError:
    sys.exit(77)


def write_vnnlib(path, lo, hi, label, classes):
    lines = [f"(declare-const X_{i} Real)" for i in range(lo.size)]
    lines += [f"(declare-const Y_{i} Real)" for i in range(classes)]
    for i in range(lo.size):
        lines.append(f"(assert (>= X_{i} {float(lo[i])!r}))")
        lines.append(f"(assert (<= X_{i} {float(hi[i])!r}))")
    lines.append("(assert (or")
    lines += [f"  (and (>= Y_{i} Y_{label}))" for i in range(classes) if i != label]
    lines.append("))")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def verify(regatta, model, vnnlib, method):
    p = subprocess.run([regatta, "verify", "--json", "--no-split", "--method", method, "--timeout", "6",
                        "--onnx", model, "--vnnlib", vnnlib], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"verify --method {method} on {vnnlib}: exit {p.returncode}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def main():
    regatta, onnx_dir, evaluator_dir, work = sys.argv[1:5]
    sys.path.insert(0, evaluator_dir)
    import onnx_numpy

    os.makedirs(work, exist_ok=True)
    model_path = os.path.join(onnx_dir, "vit_vnncomp_like.onnx")
    model = onnx.load(model_path)
    x = np.load(os.path.join(onnx_dir, "vit_vnncomp_like.input.npy"))
    logits = onnx_numpy.run(model, x).reshape(-1)
    label, classes = int(logits.argmax()), logits.size
    rng = np.random.default_rng(0)
    failures, affine_alone = [], []
    for eps in [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2]:
        lo, hi = (x - eps).reshape(-1), (x + eps).reshape(-1)
        vnnlib = os.path.join(work, f"eps_{eps:g}.vnnlib")
        write_vnnlib(vnnlib, lo, hi, label, classes)
        ibp, aff = verify(regatta, model_path, vnnlib, "ibp"), verify(regatta, model_path, vnnlib, "affine")
        # the largest sampled margin max_{i != label} Y_i - Y_label over random corners and interior points
        worst = -np.inf
        for k in range(200):
            u = rng.random(lo.size)
            p = lo + (hi - lo) * (u if k % 2 else (u > 0.5))
            y = onnx_numpy.run(model, p.reshape(x.shape)).reshape(-1)
            worst = max(worst, max(y[i] - y[label] for i in range(classes) if i != label))
        print(f"eps {eps:g}: sampled max margin {worst:.6g}, IBP bound {ibp['root_ibp_margin_upper']:.6g}, "
              f"IBP+affine bound {aff['root_margin_upper']}, ibp {ibp['result']}, affine {aff['result']} "
              f"(proved_by {aff['proved_by']})")
        slack = 1e-9 * (1 + abs(worst))  # the evaluator's own rounding
        if ibp["root_ibp_margin_upper"] < worst - slack:
            failures.append(f"eps {eps}: IBP bound below a sampled value (unsound)")
        if aff["root_margin_upper"] is not None and aff["root_margin_upper"] < worst - slack:
            failures.append(f"eps {eps}: affine bound below a sampled value (unsound)")
        if worst >= 0 and "unsat" in (ibp["result"], aff["result"]):
            failures.append(f"eps {eps}: unsat although a sampled point satisfies the property")
        if ibp["root_margin_upper"] is not None or ibp["method"] != "ibp":
            failures.append(f"eps {eps}: --method ibp reported an affine bound")
        if aff["method"] != "affine":
            failures.append(f"eps {eps}: the default method on a supported model is not affine")
        elif aff["root_margin_upper"] is not None and aff["root_margin_upper"] > aff["root_ibp_margin_upper"]:
            failures.append(f"eps {eps}: the combined bound is looser than IBP's")
        for j, name in ((ibp, "ibp"), (aff, "affine")):
            if j["result"] == "unsat" and j["proved_by"] not in ("ibp", "affine", "ibp+affine"):
                failures.append(f"eps {eps}: {name}: unsat without splitting says proved_by {j['proved_by']}")
        if aff["result"] == "unsat" and ibp["result"] != "unsat":
            affine_alone.append(eps)
    if not affine_alone:
        failures.append("at no radius did the affine forms prove what IBP could not")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
