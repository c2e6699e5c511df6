"""`regatta certify` takes one route for every model file (docs/models.md#certifying-a-model-file): the naive
product certificate and the composition of local bounds (--compare local) of a recognised transformer are
the same columns for its ONNX export as for its safetensors file. The digits ViT, both files, given the ONNX
file's float32 LayerNorm epsilon (--config): every row (naive, local, certified and attack radii, margins)
and the naive factors must be identical. A graph that is not a recognised transformer (tests/data/onnx/
mlp_tiny.onnx, no attention) gets the naive certificate of global bounds composed over its nodes (each
naive radius margin_lower/(sqrt2 L), below the attack radius) and says in one line that the local column is
not available for an unrecognised graph (null in the JSON); in l-inf the naive column is null too, with the
reason. Needs only the Python standard library.

    certify_columns.py REGATTA VIT_DIR ONNX_DIR WORK_DIR
"""
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import zipfile

from float32_eps import float32_eps_config

REGATTA, VIT, ONNX, WORK = sys.argv[1:5]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures = []


def certify(model, name, *extra):
    out = os.path.join(WORK, name + ".json")
    run = subprocess.run([REGATTA, "certify", "--model", model, "--out", out, *extra], capture_output=True,
                         text=True, check=False)
    if run.returncode != 0:
        sys.exit(f"{name}: exit {run.returncode}: {run.stderr.strip()}")
    with open(out, encoding="utf-8") as f:
        return json.load(f), run.stdout


float32_config = float32_eps_config(VIT, WORK)

common = ["--data", os.path.join(VIT, "test_set.npz"), "--limit", "2", "--tolerance", "0.2", "--compare", "local"]
st, st_text = certify(os.path.join(VIT, "vit_digits.safetensors"), "safetensors", "--config", float32_config, *common)
ox, ox_text = certify(os.path.join(VIT, "vit_digits.onnx"), "onnx", *common)
for text, name in ((st_text, "safetensors"), (ox_text, "onnx")):
    if "recognised transformer" not in text:
        failures.append(f"{name}: the method line does not name the recognised transformer")
if st["naive_factors"] is None or st["naive_factors"] != ox["naive_factors"]:
    failures.append(f"naive factors: {st['naive_factors']} (safetensors) against {ox['naive_factors']} (onnx)")
if st["summary"] != ox["summary"]:
    failures.append(f"summary: {st['summary']} (safetensors) against {ox['summary']} (onnx)")
if len(st["inputs"]) != 2 or st["inputs"] != ox["inputs"]:
    failures.append(f"rows differ:\n  {st['inputs']}\n  {ox['inputs']}")
for r in st["inputs"]:
    if not (r["naive_radius"] > 0 and r["local_radius"] is not None and r["local_radius"] > 0):
        failures.append(f"input {r['index']}: naive {r['naive_radius']}, local {r['local_radius']}: "
                        "the comparison says little")


def npy(shape, values, code):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '<%s', 'fortran_order': False, 'shape': (%s), }" % (code, dims)
    header += " " * (63 - (len(header) + 10) % 64) + "\n"
    data = struct.pack("<%d%s" % (len(values), "d" if code == "f8" else "q"), *values)
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data


tiny = os.path.join(WORK, "tiny.npz")
with zipfile.ZipFile(tiny, "w") as z:
    z.writestr("images.npy", npy((3, 2), [0.5, -0.25, 1.0, 2.0, -1.5, 0.75], "f8"))
    z.writestr("labels.npy", npy((3,), [1, 0, 1], "i8"))  # the predictions: positive margins
mlp, mlp_text = certify(os.path.join(ONNX, "mlp_tiny.onnx"), "mlp_tiny", "--data", tiny, "--compare", "local")
# The naive certificate of an unrecognised graph: global bounds composed over its nodes (here the product of
# the two layers' spectral norms); the local composition is a recognised transformer's only.
line = "local composition of per-stage bounds: not available (not available for an unrecognised graph"
if line not in mlp_text:
    failures.append(f"mlp_tiny: no line '{line}' in\n{mlp_text}")
if not mlp["naive_factors"] or mlp["naive_factors"][0]["stage"] != "logits":
    failures.append(f"mlp_tiny: naive factors {mlp['naive_factors']}, {mlp.get('naive_unavailable')}")
else:
    L = mlp["naive_factors"][0]["upper"]
    for r in mlp["inputs"]:
        attack = float("inf") if r["attack_radius"] is None else r["attack_radius"]
        expected = r["margin_lower"] / (2 ** 0.5 * L) if r["margin_lower"] > 0 else 0
        if not (r["naive_radius"] <= attack and abs(r["naive_radius"] - expected) <= 1e-12 * (1 + expected)):
            failures.append(f"mlp_tiny input {r['index']}: naive {r['naive_radius']}, expected {expected}, "
                            f"attack {attack}")
    if not any(r["naive_radius"] > 0 for r in mlp["inputs"]):
        failures.append("mlp_tiny: no positive naive radius, the comparison says little")
if any(r["local_radius"] is not None for r in mlp["inputs"]) or mlp["summary"]["median_local_radius"] is not None:
    failures.append("mlp_tiny: a local radius for an unrecognised graph")
if "unrecognised graph" not in (mlp.get("local_unavailable") or ""):
    failures.append(f"mlp_tiny: local_unavailable {mlp.get('local_unavailable')}")
# In l-inf the naive certificate (an l2 bound) is not available: null, with the reason.
linf, linf_text = certify(os.path.join(ONNX, "mlp_tiny.onnx"), "mlp_tiny_linf", "--data", tiny, "--norm", "inf")
if linf["naive_factors"] is not None or any(r["naive_radius"] is not None for r in linf["inputs"]) or \
        "--norm inf" not in (linf.get("naive_unavailable") or "") or "naive certificate: not available" not in linf_text:
    failures.append(f"mlp_tiny l-inf: naive {linf['naive_factors']}, {linf.get('naive_unavailable')}")

for f in failures:
    print("FAIL:", f)
print("naive radii:", [r["naive_radius"] for r in st["inputs"]], "local radii:",
      [r["local_radius"] for r in st["inputs"]])
sys.exit(1 if failures else 0)
