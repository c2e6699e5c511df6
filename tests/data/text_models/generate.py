#!/usr/bin/python3
"""Tiny random text models for load_model's GPT-2, BERT and LLaMA layouts and `regatta certify` on text.

Made with:  /usr/bin/python3 tests/data/text_models/generate.py    (Debian's python3-torch, python3-numpy)

Writes, under gpt2/, bert/ and llama/ next to this file, model.safetensors (float64, Hugging Face naming), config.json
(Hugging Face's keys) and test_set.npz with
    tokens  (B, n) int64 token ids,      labels  (B,) int64,
    logits  (B, classes) float64: the reference forward below on the model as stored,
and for GPT-2 and LLaMA also
    lm_logits (B, vocab) float64: the same network with the language-model head tied to the token
              embedding (the model without score.weight: next-token logits at the last position).
Labels are torch's argmax except for the last two inputs, whose labels are moved to the next class (so that
certify also sees misclassified inputs).

The reference forward passes are written here in torch from the structure of Hugging Face's published model
code (transformers' modeling_gpt2.py and modeling_bert.py) and, for LLaMA, from the published formulas
(Touvron et al. 2023; RMSNorm, Zhang & Sennrich 2019; RoPE, Su et al. 2021, in Hugging Face's rotate_half
form; SwiGLU, Shazeer 2020); the transformers package itself is not installed:

  gpt2   GPT2ForSequenceClassification: transformer.wte, transformer.wpe (inputs_embeds + position_embeds),
         blocks h.N: x + attn(ln_1(x)), x + mlp(ln_2(x)); attn: c_attn (Conv1D, x @ W + b) split into q|k|v,
         heads split, q k^T / sqrt(head_dim), causal mask filled with finfo.min, softmax, @ v, heads merged,
         c_proj (Conv1D); mlp: c_proj(gelu_new(c_fc(x))); ln_f; score (Linear, no bias) at the last token
         (no pad token). LayerNorm eps 1e-5.
  bert   BertForSequenceClassification: bert.embeddings (word + token_type 0 + position, LayerNorm eps 1e-12),
         encoder.layer.N: attention.self.{query,key,value} (Linear), q k^T / sqrt(head_dim), softmax, @ v,
         attention.output.LayerNorm(dense(context) + x); output.LayerNorm(output.dense(gelu(intermediate.
         dense(y))) + y) with the exact (erf) GELU; pooler: tanh(dense(first token)); classifier (Linear).
  llama  LlamaForSequenceClassification: model.embed_tokens (no position table), layers N:
         x + attn(rms(x)), x + mlp(rms(x)) with rms(x) = w * x / sqrt(mean(x^2) + eps), eps 1e-6; attn:
         q_proj (4 heads), k_proj and v_proj (2 key/value heads, each repeated over its 2 query heads:
         repeat_kv), q and k rotated by position i with angles i * theta^(-2a/head_dim), theta = 100 (config
         rope_theta), as q*cos + rotate_half(q)*sin with cos = cat(cos, cos), rotate_half([x1, x2]) =
         [-x2, x1]; q k^T / sqrt(head_dim), causal mask, softmax, @ v, o_proj; mlp: down_proj(silu(gate_proj
         (y)) * up_proj(y)), no biases; model.norm; score (Linear, no bias) at the last token.

Also bad/: inputs `regatta certify` must refuse (exit 2, one line, nothing written) with the GPT-2 model:
token_out_of_range.npz, nan_token.npz (float ids with a NaN), too_long.npz (more tokens than positions),
empty_batch.npz, label_out_of_range.npz; and models: mismatched.safetensors (h.0.attn.c_attn.weight of
shape (16, 47), with bad/config.json) and llama_mismatched.safetensors (the LLaMA model with
model.layers.1.self_attn.k_proj.weight of shape (7, 16), to be read with llama/config.json).

Every weight is drawn from numpy's PCG64 with a fixed seed, so re-running rewrites the same values.
"""
import json
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vit_digits"))
from train import write_npz, write_safetensors  # noqa: E402  (the fixtures' one writer: deterministic bytes)
torch.set_default_dtype(torch.float64)
BATCH, LENGTH = 8, 6


def layer_norm(x, w, b, eps):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, eps)


def split_heads(x, heads):  # (n, d) -> (heads, n, d/heads)
    n, d = x.shape
    return x.reshape(n, heads, d // heads).transpose(0, 1)


def merge_heads(x):  # (heads, n, hd) -> (n, heads*hd)
    h, n, hd = x.shape
    return x.transpose(0, 1).reshape(n, h * hd)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


# ---------------------------------------------------------------------------------------------------- GPT-2

GPT2 = dict(vocab_size=50, n_positions=16, n_embd=16, n_head=2, n_layer=2, inner=32, num_labels=3,
            layer_norm_epsilon=1e-5)


def gpt2_weights(rng):
    c = GPT2
    d, m = c["n_embd"], c["inner"]
    t = {"transformer.wte.weight": rng.standard_normal((c["vocab_size"], d)),
         "transformer.wpe.weight": 0.3 * rng.standard_normal((c["n_positions"], d))}
    for b in range(c["n_layer"]):
        p = f"transformer.h.{b}."
        for ln in ("ln_1", "ln_2"):
            t[p + ln + ".weight"] = 1 + 0.2 * rng.standard_normal(d)
            t[p + ln + ".bias"] = 0.1 * rng.standard_normal(d)
        # Conv1D stores weights in x out.
        t[p + "attn.c_attn.weight"] = rng.standard_normal((d, 3 * d)) / np.sqrt(d)
        t[p + "attn.c_attn.bias"] = 0.1 * rng.standard_normal(3 * d)
        t[p + "attn.c_proj.weight"] = rng.standard_normal((d, d)) / np.sqrt(d)
        t[p + "attn.c_proj.bias"] = 0.1 * rng.standard_normal(d)
        t[p + "mlp.c_fc.weight"] = rng.standard_normal((d, m)) / np.sqrt(d)
        t[p + "mlp.c_fc.bias"] = 0.1 * rng.standard_normal(m)
        t[p + "mlp.c_proj.weight"] = rng.standard_normal((m, d)) / np.sqrt(m)
        t[p + "mlp.c_proj.bias"] = 0.1 * rng.standard_normal(d)
    t["transformer.ln_f.weight"] = 1 + 0.2 * rng.standard_normal(d)
    t["transformer.ln_f.bias"] = 0.1 * rng.standard_normal(d)
    t["score.weight"] = rng.standard_normal((c["num_labels"], d))
    return t


def gpt2_hidden(w, ids):
    """GPT2Model: the final hidden states (n, d) of one sequence, after ln_f."""
    c = GPT2
    eps, heads = c["layer_norm_epsilon"], c["n_head"]
    W = {k: torch.tensor(v) for k, v in w.items()}
    n = ids.shape[0]
    x = W["transformer.wte.weight"][ids] + W["transformer.wpe.weight"][torch.arange(n)]
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    for b in range(c["n_layer"]):
        p = f"transformer.h.{b}."
        h = layer_norm(x, W[p + "ln_1.weight"], W[p + "ln_1.bias"], eps)
        qkv = h @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]
        q, k, v = (split_heads(t, heads) for t in qkv.split(c["n_embd"], dim=1))
        scores = q @ k.transpose(-1, -2) / (v.size(-1) ** 0.5)
        scores = torch.where(causal, scores, torch.tensor(torch.finfo(scores.dtype).min))
        a = merge_heads(torch.softmax(scores, dim=-1) @ v)
        x = x + (a @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"])
        h = layer_norm(x, W[p + "ln_2.weight"], W[p + "ln_2.bias"], eps)
        h = gelu_new(h @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"])
        x = x + (h @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"])
    return layer_norm(x, W["transformer.ln_f.weight"], W["transformer.ln_f.bias"], eps)


def gpt2(rng):
    c = GPT2
    w = gpt2_weights(rng)
    tokens = rng.integers(0, c["vocab_size"], size=(BATCH, LENGTH))
    logits, lm_logits = [], []
    for ids in tokens:
        hidden = gpt2_hidden(w, torch.tensor(ids))
        logits.append((hidden @ torch.tensor(w["score.weight"]).T)[-1])
        lm_logits.append((hidden @ torch.tensor(w["transformer.wte.weight"]).T)[-1])
    config = {"model_type": "gpt2", "vocab_size": c["vocab_size"], "n_positions": c["n_positions"],
              "n_embd": c["n_embd"], "n_head": c["n_head"], "n_layer": c["n_layer"], "n_inner": c["inner"],
              "activation_function": "gelu_new", "layer_norm_epsilon": c["layer_norm_epsilon"]}
    return w, config, tokens, torch.stack(logits).numpy(), {"lm_logits": torch.stack(lm_logits).numpy()}


# ----------------------------------------------------------------------------------------------------- BERT

BERT = dict(vocab_size=40, max_position_embeddings=16, type_vocab_size=2, hidden_size=16,
            num_attention_heads=2, num_hidden_layers=2, intermediate_size=32, num_labels=3, layer_norm_eps=1e-12)


def bert_weights(rng):
    c = BERT
    d, m = c["hidden_size"], c["intermediate_size"]

    def linear(t, name, out, inp, scale=1.0):  # torch Linear: out x in
        t[name + ".weight"] = scale * rng.standard_normal((out, inp)) / np.sqrt(inp)
        t[name + ".bias"] = 0.1 * rng.standard_normal(out)

    def norm(t, name):
        t[name + ".weight"] = 1 + 0.2 * rng.standard_normal(d)
        t[name + ".bias"] = 0.1 * rng.standard_normal(d)

    e = "bert.embeddings."
    t = {e + "word_embeddings.weight": rng.standard_normal((c["vocab_size"], d)),
         e + "position_embeddings.weight": 0.3 * rng.standard_normal((c["max_position_embeddings"], d)),
         e + "token_type_embeddings.weight": 0.3 * rng.standard_normal((c["type_vocab_size"], d))}
    norm(t, e + "LayerNorm")
    for b in range(c["num_hidden_layers"]):
        p = f"bert.encoder.layer.{b}."
        for role in ("query", "key", "value"):
            linear(t, p + "attention.self." + role, d, d)
        linear(t, p + "attention.output.dense", d, d)
        norm(t, p + "attention.output.LayerNorm")
        linear(t, p + "intermediate.dense", m, d)
        linear(t, p + "output.dense", d, m)
        norm(t, p + "output.LayerNorm")
    linear(t, "bert.pooler.dense", d, d)
    linear(t, "classifier", c["num_labels"], d, scale=2.0)
    return t


def bert_logits(w, ids):
    c = BERT
    eps, heads = c["layer_norm_eps"], c["num_attention_heads"]
    W = {k: torch.tensor(v) for k, v in w.items()}

    def lin(name, x):
        return x @ W[name + ".weight"].T + W[name + ".bias"]

    def ln(name, x):
        return layer_norm(x, W[name + ".weight"], W[name + ".bias"], eps)

    n = ids.shape[0]
    e = "bert.embeddings."
    x = (W[e + "word_embeddings.weight"][ids] + W[e + "token_type_embeddings.weight"][torch.zeros(n, dtype=int)]
         + W[e + "position_embeddings.weight"][torch.arange(n)])
    x = ln(e + "LayerNorm", x)
    for b in range(c["num_hidden_layers"]):
        p = f"bert.encoder.layer.{b}."
        q, k, v = (split_heads(lin(p + "attention.self." + r, x), heads) for r in ("query", "key", "value"))
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))
        context = merge_heads(torch.softmax(scores, dim=-1) @ v)
        x = ln(p + "attention.output.LayerNorm", lin(p + "attention.output.dense", context) + x)
        h = torch.nn.functional.gelu(lin(p + "intermediate.dense", x))
        x = ln(p + "output.LayerNorm", lin(p + "output.dense", h) + x)
    pooled = torch.tanh(lin("bert.pooler.dense", x[0]))
    return lin("classifier", pooled)


def bert(rng):
    c = BERT
    w = bert_weights(rng)
    tokens = rng.integers(0, c["vocab_size"], size=(BATCH, LENGTH))
    logits = torch.stack([bert_logits(w, torch.tensor(ids)) for ids in tokens]).numpy()
    config = {k: v for k, v in c.items() if k != "num_labels"}
    config.update({"model_type": "bert", "hidden_act": "gelu"})
    return w, config, tokens, logits, {}


# ---------------------------------------------------------------------------------------------------- LLaMA

LLAMA = dict(vocab_size=40, max_position_embeddings=16, hidden_size=16, intermediate_size=24,
             num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2, rms_norm_eps=1e-6,
             rope_theta=100.0, num_labels=3)


def llama_weights(rng):
    c = LLAMA
    d, m = c["hidden_size"], c["intermediate_size"]
    kv = c["num_key_value_heads"] * d // c["num_attention_heads"]

    def linear(t, name, out, inp, scale=1.0):  # torch Linear: out x in, no bias
        t[name + ".weight"] = scale * rng.standard_normal((out, inp)) / np.sqrt(inp)

    t = {"model.embed_tokens.weight": rng.standard_normal((c["vocab_size"], d))}
    for b in range(c["num_hidden_layers"]):
        p = f"model.layers.{b}."
        t[p + "input_layernorm.weight"] = 1 + 0.2 * rng.standard_normal(d)
        linear(t, p + "self_attn.q_proj", d, d, scale=2.0)  # sizeable scores, so attention is not uniform
        linear(t, p + "self_attn.k_proj", kv, d, scale=2.0)
        linear(t, p + "self_attn.v_proj", kv, d)
        linear(t, p + "self_attn.o_proj", d, d)
        t[p + "post_attention_layernorm.weight"] = 1 + 0.2 * rng.standard_normal(d)
        linear(t, p + "mlp.gate_proj", m, d, scale=2.0)  # gate values over the curved part of SiLU
        linear(t, p + "mlp.up_proj", m, d)
        linear(t, p + "mlp.down_proj", d, m)
    t["model.norm.weight"] = 1 + 0.2 * rng.standard_normal(d)
    linear(t, "score", c["num_labels"], d, scale=2.0)
    return t


def rms_norm(x, w, eps):
    return w * (x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotary(x, theta):
    """x (heads, n, head_dim): row i rotated by the angles i * theta^(-2a/head_dim), a < head_dim/2."""
    hd, n = x.shape[-1], x.shape[-2]
    inv_freq = theta ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    angles = torch.outer(torch.arange(n, dtype=torch.float64), inv_freq)
    full = torch.cat((angles, angles), dim=-1)
    return x * torch.cos(full) + rotate_half(x) * torch.sin(full)


def llama_hidden(w, ids):
    """LlamaModel: the final hidden states (n, d) of one sequence, after model.norm."""
    c = LLAMA
    eps, heads, kv_heads = c["rms_norm_eps"], c["num_attention_heads"], c["num_key_value_heads"]
    W = {k: torch.tensor(v) for k, v in w.items()}

    def lin(name, x):
        return x @ W[name + ".weight"].T

    n = ids.shape[0]
    x = W["model.embed_tokens.weight"][ids]
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    for b in range(c["num_hidden_layers"]):
        p = f"model.layers.{b}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = rotary(split_heads(lin(p + "self_attn.q_proj", h), heads), c["rope_theta"])
        k = rotary(split_heads(lin(p + "self_attn.k_proj", h), kv_heads), c["rope_theta"])
        v = split_heads(lin(p + "self_attn.v_proj", h), kv_heads)
        k = k.repeat_interleave(heads // kv_heads, dim=0)  # repeat_kv: query head j reads kv head j // 2
        v = v.repeat_interleave(heads // kv_heads, dim=0)
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.size(-1))
        scores = torch.where(causal, scores, torch.tensor(-math.inf))
        x = x + lin(p + "self_attn.o_proj", merge_heads(torch.softmax(scores, dim=-1) @ v))
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        gate = lin(p + "mlp.gate_proj", h)
        x = x + lin(p + "mlp.down_proj", gate * torch.sigmoid(gate) * lin(p + "mlp.up_proj", h))
    return rms_norm(x, W["model.norm.weight"], eps)


def llama(rng):
    c = LLAMA
    w = llama_weights(rng)
    tokens = rng.integers(0, c["vocab_size"], size=(BATCH, LENGTH))
    logits, lm_logits = [], []
    for ids in tokens:
        hidden = llama_hidden(w, torch.tensor(ids))
        logits.append((hidden @ torch.tensor(w["score.weight"]).T)[-1])
        lm_logits.append((hidden @ torch.tensor(w["model.embed_tokens.weight"]).T)[-1])
    config = {k: v for k, v in c.items() if k != "num_labels"}
    config.update({"model_type": "llama", "hidden_act": "silu", "tie_word_embeddings": False,
                   "rope_scaling": None})
    return w, config, tokens, torch.stack(logits).numpy(), {"lm_logits": torch.stack(lm_logits).numpy()}


def bad_inputs(rng):
    out = os.path.join(HERE, "bad")
    os.makedirs(out, exist_ok=True)
    c = GPT2
    tokens = rng.integers(0, c["vocab_size"], size=(2, 4)).astype(np.int64)
    labels = np.array([0, 1], dtype=np.int64)
    high = tokens.copy()
    high[1, 2] = c["vocab_size"]
    nan = tokens.astype(np.float64)
    nan[0, 3] = np.nan
    cases = {"token_out_of_range": {"tokens": high, "labels": labels},
             "nan_token": {"tokens": nan, "labels": labels},
             "too_long": {"tokens": rng.integers(0, 5, size=(2, c["n_positions"] + 1)), "labels": labels},
             "empty_batch": {"tokens": np.zeros((0, 4), dtype=np.int64), "labels": np.zeros(0, dtype=np.int64)},
             "label_out_of_range": {"tokens": tokens, "labels": np.array([0, 3], dtype=np.int64)}}
    for name, arrays in cases.items():
        write_npz(os.path.join(out, name + ".npz"), arrays)
    d = 16
    write_safetensors(os.path.join(out, "mismatched.safetensors"), {
        "wte.weight": rng.standard_normal((4, d)), "wpe.weight": rng.standard_normal((4, d)),
        "h.0.ln_1.weight": np.ones(d), "h.0.ln_1.bias": np.zeros(d),
        "h.0.ln_2.weight": np.ones(d), "h.0.ln_2.bias": np.zeros(d),
        "h.0.attn.c_attn.weight": rng.standard_normal((d, 3 * d - 1))})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2", "n_head": 2}, f, indent=2)
        f.write("\n")


def bad_llama(weights):
    """The LLaMA model with one key projection of the wrong shape (7 rows instead of 2 heads x 4)."""
    w = dict(weights)
    w["model.layers.1.self_attn.k_proj.weight"] = w["model.layers.1.self_attn.k_proj.weight"][:7]
    write_safetensors(os.path.join(HERE, "bad", "llama_mismatched.safetensors"), w)


def main():
    made = {}
    for name, make, seed in (("gpt2", gpt2, 16), ("bert", bert, 17), ("llama", llama, 19)):
        rng = np.random.Generator(np.random.PCG64(seed))
        weights, config, tokens, logits, extra = make(rng)
        made[name] = weights
        labels = logits.argmax(axis=1)
        labels[-2:] = (labels[-2:] + 1) % logits.shape[1]
        out = os.path.join(HERE, name)
        os.makedirs(out, exist_ok=True)
        write_safetensors(os.path.join(out, "model.safetensors"), weights)
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
            f.write("\n")
        write_npz(os.path.join(out, "test_set.npz"),
                  {"tokens": tokens.astype(np.int64), "labels": labels.astype(np.int64), "logits": logits, **extra})
        print(name, "parameters", sum(v.size for v in weights.values()), "labels", labels.tolist())
    bad_inputs(np.random.Generator(np.random.PCG64(18)))
    bad_llama(made["llama"])


if __name__ == "__main__":
    main()
