#!/usr/bin/env python3
"""`local` and `attend` on an attention layer of an ONNX model (--model M.onnx --node NAME) against the same
layer written out as a weights file (two routes, the same numbers; docs/cli.md#attention-layers-of-an-onnx-model).

Route 1: regatta imports tests/data/onnx/gpt_causal.onnx, evaluates it at gpt_causal.input.npy and rebuilds
the first attention layer from what its fusion pass recorded. Route 2: this script reads the same ONNX file
with the onnx package, writes the layer's weights in the GPT-2 layout (attn.c_attn / attn.c_proj, Conv1D
in x out) and computes the layer's input tokens itself in numpy (LayerNorm(x + pos) with the model's ln1.0
weights), then runs `local --layer ... --causal`. The Jacobian norms, certified bounds and delta must agree to
1e-9 relative; attend's outputs to 1e-12; `--node all` must repeat the single-node numbers.

    local_model.py REGATTA DATA_DIR WORK_DIR      (exit 77: numpy or onnx missing, the test is skipped)
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
    sys.exit(77)

REGATTA, DATA, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures = []

MODEL = os.path.join(DATA, "onnx", "gpt_causal.onnx")
INPUT = os.path.join(DATA, "onnx", "gpt_causal.input.npy")
NODE = "/attn.0/Softmax"

graph = onnx.load(MODEL).graph
initializers = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
produced = {out: node for node in graph.node for out in node.output}
by_name = {node.name: node for node in graph.node}


def constant(name):
    """An initializer, or a Constant / Identity-of-a-constant node's value (float64)."""
    if name in initializers:
        return initializers[name].astype(np.float64)
    node = produced[name]
    if node.op_type == "Identity":
        return constant(node.input[0])
    if node.op_type == "Constant":
        return numpy_helper.to_array(node.attribute[0].t).astype(np.float64)
    raise KeyError(name)


def operand(node_name, k):
    return constant(by_name[node_name].input[k])


# The layer's weights: qkv = x @ W + b (W: d x 3d, columns q | k | v), proj likewise: GPT-2's Conv1D layout.
weights = {
    "attn.c_attn.weight": operand("/attn.0/qkv/MatMul", 1),
    "attn.c_attn.bias": operand("/attn.0/qkv/Add", 0),
    "attn.c_proj.weight": operand("/attn.0/proj/MatMul", 1),
    "attn.c_proj.bias": operand("/attn.0/proj/Add", 0),
}
LAYER = os.path.join(WORK, "gpt_attn0.npz")
np.savez(LAYER, **weights)

# The tokens at the layer's input: LayerNorm(x + pos), population variance, the model's epsilon.
x = np.load(INPUT)[0] + constant("pos")[0]
gamma, beta = operand("/ln1.0/Mul", 1), operand("/ln1.0/Add_1", 1)
eps = float(operand("/ln1.0/Add", 1))
mean = x.mean(axis=1, keepdims=True)
var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
TOKENS = os.path.join(WORK, "tokens.npy")
np.save(TOKENS, (x - mean) / np.sqrt(var + eps) * gamma + beta)


def run(*args, expect=0):
    r = subprocess.run([REGATTA, *args], capture_output=True, text=True)
    if r.returncode != expect:
        failures.append(f"{' '.join(args)}: exit {r.returncode} (expected {expect}): {r.stderr.strip()}")
        return None
    return r.stdout


def close(what, a, b, rel):
    if a is None or b is None or abs(a - b) > rel * max(1.0, abs(a), abs(b)):
        failures.append(f"{what}: {a} vs {b}")


# local: the same numbers by both routes.
common = ["--certify", "--json"]
by_model = run("local", "--model", MODEL, "--node", NODE, "--input", INPUT, *common)
by_file = run("local", "--layer", LAYER, "--heads", "4", "--causal", "--input", TOKENS, *common)
if by_model and by_file:
    m, f = json.loads(by_model), json.loads(by_file)
    if m.get("node") != NODE:
        failures.append(f"local --model JSON names node {m.get('node')!r}")
    for key in ["jacobian_norm_2", "jacobian_norm_2_certified_lower", "jacobian_norm_2_certified_upper",
                "jacobian_norm_inf", "jacobian_norm_inf_certified_upper", "delta", "delta_certified_upper"]:
        close(f"local {key}", m.get(key), f.get(key), 1e-9)
    all_layers = run("local", "--model", MODEL, "--node", "all", "--input", INPUT, *common)
    if all_layers:
        layers = json.loads(all_layers)["layers"]
        if [layer["node"] for layer in layers] != [NODE, "/attn.1/Softmax"]:
            failures.append(f"--node all lists {[layer['node'] for layer in layers]}")
        else:
            for key in ["jacobian_norm_2", "jacobian_norm_2_certified_upper", "delta"]:
                close(f"--node all {key}", layers[0].get(key), m.get(key), 1e-12)
    text = run("local", "--model", MODEL, "--node", "all", "--input", INPUT, "--norms-only")
    if text is not None and len([line for line in text.splitlines() if line.startswith("/attn.")]) != 2:
        failures.append(f"--node all text output is not one line per layer:\n{text}")

# attend: the same output by both routes, and the graph's own value at the layer's output.
OUT_MODEL, OUT_FILE = os.path.join(WORK, "y_model.npy"), os.path.join(WORK, "y_file.npy")
a = run("attend", "--model", MODEL, "--node", NODE, "--input", INPUT, "--out", OUT_MODEL, "--json")
b = run("attend", "--layer", LAYER, "--heads", "4", "--causal", "--input", TOKENS, "--out", OUT_FILE)
if a is not None and b is not None:
    difference = np.abs(np.load(OUT_MODEL) - np.load(OUT_FILE)).max()
    if not difference <= 1e-12:
        failures.append(f"attend outputs differ by {difference}")
    graph_difference = json.loads(a)["graph_difference"]
    if not graph_difference <= 1e-12:
        failures.append(f"attend --model: graph_difference {graph_difference}")
    if json.loads(a)["causal"] is not True:
        failures.append("attend --model: the causal mask was not taken")

# Nothing is written on a refusal.
REFUSED = os.path.join(WORK, "refused.npy")
run("attend", "--model", MODEL, "--node", "nope", "--input", INPUT, "--out", REFUSED, expect=2)
if os.path.exists(REFUSED):
    failures.append("attend wrote its output on a refused --node")

for failure in failures:
    print("FAIL:", failure)
print("local_model:", "ok" if not failures else f"{len(failures)} failures")
sys.exit(1 if failures else 0)
