#!/usr/bin/env python3
"""`local`, `attend` and `inspect` on a safetensors model (--model M.safetensors --node NAME; the model's graph,
docs/graph.md#front-ends-safetensors-layouts) against the same layer read as a weights file (two routes, the
same numbers).

Route 1: regatta reads tests/data/text_models/gpt2/model.safetensors as a whole model, builds its graph,
evaluates it at token embeddings E and rebuilds the attention layer blocks.0.attn from what the fusion pass
recorded. Route 2: this script computes the layer's input tokens itself in numpy (ln_1(E + wpe[:n]) with the
file's transformer.h.0.ln_1 weights and the config's epsilon) and runs `local --layer model.safetensors
--prefix transformer.h.0. --heads 2 --causal` (the layer reader of GPT-2's Conv1D layout). The Jacobian
norms, certified bounds and delta must agree to 1e-9 relative, attend's outputs to 1e-12. The same two
routes on LLaMA's rotary attention (route 2: RMSNorm in numpy, then `attend --layer ... --rope 100`, the
config's rope_theta; route 1 reads θ back from the graph's tables). Also: `--node all` on the digits ViT gives
one line per block, an input of the wrong length is refused with one line and exit 2, and `inspect` shows the
graph view of each layout.

    local_safetensors.py REGATTA DATA_DIR WORK_DIR      (exit 77: numpy missing, the test is skipped)
"""
import json
import os
import shutil
import subprocess
import sys

try:
    import numpy as np

    from safetensors_f64 import read_safetensors
except ImportError:
    sys.exit(77)

REGATTA, DATA, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
failures = []

GPT2 = os.path.join(DATA, "text_models", "gpt2", "model.safetensors")
VIT = os.path.join(DATA, "vit_digits", "vit_digits.safetensors")
LLAMA = os.path.join(DATA, "text_models", "llama", "model.safetensors")


def run(*args, expect=0):
    r = subprocess.run([REGATTA, *args], capture_output=True, text=True)
    if r.returncode != expect:
        failures.append(f"{' '.join(args)}: exit {r.returncode} (expected {expect}): {r.stderr.strip()}")
        return None
    if expect == 2 and len(r.stderr.strip().splitlines()) != 1:
        failures.append(f"{' '.join(args)}: stderr is not one line: {r.stderr!r}")
    return r.stdout if expect == 0 else r.stderr


def close(what, a, b, rel):
    if a is None or b is None or abs(a - b) > rel * max(1.0, abs(a), abs(b)):
        failures.append(f"{what}: {a} vs {b}")


# The input: the embedding rows of 5 tokens, moved off the table by a little noise.
weights = read_safetensors(GPT2)
eps = json.load(open(os.path.join(os.path.dirname(GPT2), "config.json")))["layer_norm_epsilon"]
rng = np.random.default_rng(3)
E = weights["transformer.wte.weight"][[3, 1, 4, 1, 5]] + 0.05 * rng.standard_normal((5, 16))
INPUT = os.path.join(WORK, "embeddings.npy")
np.save(INPUT, E)
x = E + weights["transformer.wpe.weight"][:5]
mean = x.mean(axis=1, keepdims=True)
var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
TOKENS = os.path.join(WORK, "tokens.npy")
np.save(TOKENS, (x - mean) / np.sqrt(var + eps) * weights["transformer.h.0.ln_1.weight"]
         + weights["transformer.h.0.ln_1.bias"])

common = ["--certify", "--json"]
by_model = run("local", "--model", GPT2, "--node", "blocks.0.attn", "--input", INPUT, *common)
by_file = run("local", "--layer", GPT2, "--prefix", "transformer.h.0.", "--heads", "2", "--causal", "--input", TOKENS,
              *common)
if by_model and by_file:
    m, f = json.loads(by_model), json.loads(by_file)
    if m.get("node") != "blocks.0.attn":
        failures.append(f"local --model JSON names node {m.get('node')!r}")
    for key in ["jacobian_norm_2", "jacobian_norm_2_certified_lower", "jacobian_norm_2_certified_upper",
                "jacobian_norm_inf", "jacobian_norm_inf_certified_upper", "delta", "delta_certified_upper"]:
        close(f"local {key}", m.get(key), f.get(key), 1e-9)

OUT_MODEL, OUT_FILE = os.path.join(WORK, "y_model.npy"), os.path.join(WORK, "y_file.npy")
a = run("attend", "--model", GPT2, "--node", "blocks.0.attn", "--input", INPUT, "--out", OUT_MODEL, "--json")
b = run("attend", "--layer", GPT2, "--prefix", "transformer.h.0.", "--heads", "2", "--causal", "--input", TOKENS,
        "--out", OUT_FILE)
if a is not None and b is not None:
    difference = np.abs(np.load(OUT_MODEL) - np.load(OUT_FILE)).max()
    if not difference <= 1e-12:
        failures.append(f"attend outputs differ by {difference}")
    if not json.loads(a)["graph_difference"] <= 1e-12:
        failures.append(f"attend --model: graph_difference {json.loads(a)['graph_difference']}")
    if json.loads(a)["causal"] is not True:
        failures.append("attend --model: the causal mask was not taken")

# LLaMA: the rotary layer rebuilt from the graph (θ read from its tables) against the layer read from the file
# with the config's θ, at the tokens RMSNorm(E)·γ computed here.
llama = read_safetensors(LLAMA)
llama_config = json.load(open(os.path.join(os.path.dirname(LLAMA), "config.json")))
LLAMA_TOKENS = os.path.join(WORK, "llama_tokens.npy")
np.save(LLAMA_TOKENS, E / np.sqrt((E ** 2).mean(axis=1, keepdims=True) + llama_config["rms_norm_eps"])
        * llama["model.layers.0.input_layernorm.weight"])
OUT_LLAMA_MODEL, OUT_LLAMA_FILE = os.path.join(WORK, "y_llama_model.npy"), os.path.join(WORK, "y_llama_file.npy")
a = run("attend", "--model", LLAMA, "--node", "blocks.0.attn", "--input", INPUT, "--out", OUT_LLAMA_MODEL, "--json")
b = run("attend", "--layer", LLAMA, "--prefix", "model.layers.0.", "--heads", "4", "--causal", "--rope",
        str(llama_config["rope_theta"]), "--input", LLAMA_TOKENS, "--out", OUT_LLAMA_FILE)
if a is not None and b is not None:
    difference = np.abs(np.load(OUT_LLAMA_MODEL) - np.load(OUT_LLAMA_FILE)).max()
    if not difference <= 1e-12:
        failures.append(f"LLaMA attend outputs differ by {difference}")
    if not json.loads(a)["graph_difference"] <= 1e-12:
        failures.append(f"LLaMA attend --model: graph_difference {json.loads(a)['graph_difference']}")
by_model = run("local", "--model", LLAMA, "--node", "blocks.1.attn", "--input", INPUT, "--norms-only")
if by_model is not None and "rotary theta 100" not in by_model:
    failures.append(f"LLaMA local --model does not state the rotary theta:\n{by_model}")

# The digits ViT: an 8x8 image (any shape with the 64 pixels), one line per block with --node all.
IMAGE = os.path.join(WORK, "image.npy")
np.save(IMAGE, np.random.default_rng(5).uniform(0, 1, (8, 8)))
text = run("local", "--model", VIT, "--node", "all", "--input", IMAGE, "--norms-only")
if text is not None and len([line for line in text.splitlines() if line.startswith("blocks.")]) != 2:
    failures.append(f"--node all on the ViT is not one line per block:\n{text}")

# Refusals: one line, exit 2, nothing written.
REFUSED = os.path.join(WORK, "refused.npy")
message = run("local", "--model", VIT, "--node", "all", "--input", INPUT, expect=2)
if message is not None and "takes 64" not in message:
    failures.append(f"wrong-length refusal says: {message.strip()}")
run("attend", "--model", GPT2, "--node", "nope", "--input", INPUT, "--out", REFUSED, expect=2)
if os.path.exists(REFUSED):
    failures.append("attend wrote its output on a refusal")

# inspect: the graph view of every layout after the arrays.
for path, layout, layers in [(VIT, "timm-vit", 2), (GPT2, "gpt2", 2), (LLAMA, "llama", 2),
                             (os.path.join(DATA, "text_models", "bert", "model.safetensors"), "bert", 2)]:
    out = run("inspect", "--json", path)
    if out is None:
        continue
    g = json.loads(out)[0].get("graph", {})
    if g.get("layout") != layout or len(g.get("attention", [])) != layers:
        failures.append(f"inspect {path}: layout {g.get('layout')}, {len(g.get('attention', []))} attention layers")
out = run("inspect", LLAMA)
if out is not None and out.count("rotary on Q and K (theta 100, tables regenerated bit for bit)") != 2:
    failures.append(f"inspect of LLaMA does not show two rotary layers of theta 100:\n{out}")
out = run("inspect", "--tokens", "3", GPT2)
if out is not None and "attention layers found: 2" not in out:
    failures.append("inspect --tokens 3 of GPT-2 does not list its attention layers")
run("inspect", "--tokens", "3", VIT, expect=2)
run("inspect", "--tokens", "3", INPUT, expect=2)
run("inspect", "--tokens", "17", GPT2, expect=2)

for failure in failures:
    print("FAIL:", failure)
print("local_safetensors:", "ok" if not failures else f"{len(failures)} failures")
sys.exit(1 if failures else 0)
