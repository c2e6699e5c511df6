#!/usr/bin/python3
"""Reference data for the fused-projection layouts of load_layer (tests/operators/layer_layouts_test.cpp).

Made with:  /usr/bin/python3 tests/data/layouts/generate.py [NAME ...]   (Debian's python3-torch,
python3-numpy; with names, only those files are rewritten)

Two pre-norm attention sublayers, y = x + Attn(Norm(x)), stored under the names real checkpoints use, with
their outputs computed here in torch the way the published model code computes them:

  timm_vit_block.npz  timm VisionTransformer Block: blocks.0.norm1 (LayerNorm, eps 1e-6),
                             blocks.0.attn.qkv (Linear d -> 3d; rows q|k|v, heads contiguous),
                             blocks.0.attn.proj; qkv(x).reshape(n, 3, H, d/H).permute(1, 2, 0, 3),
                             softmax(q k^T * (d/H)^-1/2) v, heads concatenated, proj.
                             Also blocks.0.norm2 and blocks.0.mlp.fc1 (present in real files, not used).
  gpt2_block.npz      Hugging Face GPT2Block: h.0.ln_1 (LayerNorm, eps 1e-5), h.0.attn.c_attn
                             (Conv1D: weight d x 3d, x @ W + b), split into q|k|v, causal mask,
                             softmax(q k^T / sqrt(d/H)) v, h.0.attn.c_proj (Conv1D d x d).
                             Also h.0.ln_2 and h.0.mlp.c_proj (present in real files, not used).

  llama_gqa_block.npz        Hugging Face LlamaDecoderLayer attention without rotary embeddings:
                             layers.0.input_layernorm (RMSNorm, eps 1e-6), q_proj (2 heads), k_proj and
                             v_proj with ONE key/value head (grouped-query attention, repeat_kv), o_proj,
                             causal; no biases.

  llama_rope_block.npz       the same LLaMA layout WITH rotary position embeddings (rope_theta = 10000,
                             stored as `rope_theta`), q/k/v biases (Qwen2 has them; rotated after the bias),
                             one key/value head, causal, n = 7 tokens. The rotary code follows Hugging Face's
                             modeling_llama: inv_freq = 1/(theta^(arange(0, d_h, 2)/d_h)), freqs = position x
                             inv_freq, emb = cat(freqs, freqs), q_embed = q*cos(emb) + rotate_half(q)*sin(emb)
                             with rotate_half([x1, x2]) = [-x2, x1], the same for k; everything in float64
                             (HF computes inv_freq and the tables in float32 by default; regatta's model is
                             the exact map, which float64 approximates to ~1e-16 relative at these positions).

  mha_no_out_proj.npz        nn.MultiheadAttention's in_proj only (no out_proj tensors): the output computed
                             by the module with out_proj set to the identity and a zero bias.

Every tensor is float64, drawn from numpy's PCG64 with a fixed seed, so re-running rewrites the same values.
Each file also holds `input` (n x d) and `output` (n x d).
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
torch.set_default_dtype(torch.float64)
N, D, H = 5, 8, 2


def attention(q, k, v, causal):
    n, d = q.shape
    hd = d // H
    q, k, v = (t.reshape(n, H, hd).transpose(0, 1) for t in (q, k, v))
    scores = q @ k.transpose(-2, -1) * hd ** -0.5
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    return (scores.softmax(-1) @ v).transpose(0, 1).reshape(n, d)


def timm(rng):
    t = {
        "blocks.0.norm1.weight": 1 + 0.2 * rng.standard_normal(D),
        "blocks.0.norm1.bias": 0.1 * rng.standard_normal(D),
        "blocks.0.attn.qkv.weight": rng.standard_normal((3 * D, D)) / np.sqrt(D),
        "blocks.0.attn.qkv.bias": 0.1 * rng.standard_normal(3 * D),
        "blocks.0.attn.proj.weight": rng.standard_normal((D, D)) / np.sqrt(D),
        "blocks.0.attn.proj.bias": 0.1 * rng.standard_normal(D),
        "blocks.0.norm2.weight": 1 + 0.2 * rng.standard_normal(D),
        "blocks.0.norm2.bias": 0.1 * rng.standard_normal(D),
        "blocks.0.mlp.fc1.weight": rng.standard_normal((2 * D, D)) / np.sqrt(D),
    }
    x = torch.tensor(rng.standard_normal((N, D)))
    T = {k: torch.tensor(v) for k, v in t.items()}
    z = F.layer_norm(x, (D,), T["blocks.0.norm1.weight"], T["blocks.0.norm1.bias"], 1e-6)
    qkv = F.linear(z, T["blocks.0.attn.qkv.weight"], T["blocks.0.attn.qkv.bias"])
    q, k, v = qkv.reshape(N, 3, D).unbind(1)
    y = x + F.linear(attention(q, k, v, False), T["blocks.0.attn.proj.weight"], T["blocks.0.attn.proj.bias"])
    t["input"], t["output"] = x.numpy(), y.numpy()
    return t


def gpt2(rng):
    t = {
        "h.0.ln_1.weight": 1 + 0.2 * rng.standard_normal(D),
        "h.0.ln_1.bias": 0.1 * rng.standard_normal(D),
        "h.0.attn.c_attn.weight": rng.standard_normal((D, 3 * D)) / np.sqrt(D),
        "h.0.attn.c_attn.bias": 0.1 * rng.standard_normal(3 * D),
        "h.0.attn.c_proj.weight": rng.standard_normal((D, D)) / np.sqrt(D),
        "h.0.attn.c_proj.bias": 0.1 * rng.standard_normal(D),
        "h.0.ln_2.weight": 1 + 0.2 * rng.standard_normal(D),
        "h.0.mlp.c_proj.weight": rng.standard_normal((4 * D, D)) / np.sqrt(D),
    }
    x = torch.tensor(rng.standard_normal((N, D)))
    T = {k: torch.tensor(v) for k, v in t.items()}
    z = F.layer_norm(x, (D,), T["h.0.ln_1.weight"], T["h.0.ln_1.bias"], 1e-5)
    qkv = z @ T["h.0.attn.c_attn.weight"] + T["h.0.attn.c_attn.bias"]  # Conv1D: x W + b
    q, k, v = qkv.split(D, dim=1)
    y = x + attention(q, k, v, True) @ T["h.0.attn.c_proj.weight"] + T["h.0.attn.c_proj.bias"]
    t["input"], t["output"] = x.numpy(), y.numpy()
    return t


def llama_gqa(rng):
    kv = 1  # grouped-query attention: one key/value head shared by both query heads
    hd = D // H
    t = {
        "layers.0.input_layernorm.weight": 1 + 0.2 * rng.standard_normal(D),
        "layers.0.self_attn.q_proj.weight": rng.standard_normal((D, D)) / np.sqrt(D),
        "layers.0.self_attn.k_proj.weight": rng.standard_normal((kv * hd, D)) / np.sqrt(D),
        "layers.0.self_attn.v_proj.weight": rng.standard_normal((kv * hd, D)) / np.sqrt(D),
        "layers.0.self_attn.o_proj.weight": rng.standard_normal((D, D)) / np.sqrt(D),
        "layers.0.post_attention_layernorm.weight": 1 + 0.2 * rng.standard_normal(D),
    }
    x = torch.tensor(rng.standard_normal((N, D)))
    T = {k: torch.tensor(v) for k, v in t.items()}
    g = T["layers.0.input_layernorm.weight"]
    z = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * g  # LlamaRMSNorm
    q = z @ T["layers.0.self_attn.q_proj.weight"].T
    k = (z @ T["layers.0.self_attn.k_proj.weight"].T).repeat(1, H // kv)  # repeat_kv for kv = 1
    v = (z @ T["layers.0.self_attn.v_proj.weight"].T).repeat(1, H // kv)
    y = x + attention(q, k, v, True) @ T["layers.0.self_attn.o_proj.weight"].T
    t["input"], t["output"] = x.numpy(), y.numpy()
    return t


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def repeat_kv(hidden_states, n_rep):
    kv_heads, n, hd = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    return hidden_states[:, None, :, :].expand(kv_heads, n_rep, n, hd).reshape(kv_heads * n_rep, n, hd)


def llama_rope(rng):
    kv, hd, n, theta = 1, D // H, 7, 10000.0
    p = "layers.0.self_attn."
    t = {
        "layers.0.input_layernorm.weight": 1 + 0.2 * rng.standard_normal(D),
        p + "q_proj.weight": rng.standard_normal((D, D)) / np.sqrt(D),
        p + "q_proj.bias": 0.3 * rng.standard_normal(D),
        p + "k_proj.weight": rng.standard_normal((kv * hd, D)) / np.sqrt(D),
        p + "k_proj.bias": 0.3 * rng.standard_normal(kv * hd),
        p + "v_proj.weight": rng.standard_normal((kv * hd, D)) / np.sqrt(D),
        p + "v_proj.bias": 0.3 * rng.standard_normal(kv * hd),
        p + "o_proj.weight": rng.standard_normal((D, D)) / np.sqrt(D),
    }
    x = torch.tensor(rng.standard_normal((n, D)))
    T = {k: torch.tensor(v) for k, v in t.items()}
    g = T["layers.0.input_layernorm.weight"]
    z = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * g  # LlamaRMSNorm
    # LlamaAttention.forward: projections viewed as (heads, n, head_dim)
    q = F.linear(z, T[p + "q_proj.weight"], T[p + "q_proj.bias"]).view(n, H, hd).transpose(0, 1)
    k = F.linear(z, T[p + "k_proj.weight"], T[p + "k_proj.bias"]).view(n, kv, hd).transpose(0, 1)
    v = F.linear(z, T[p + "v_proj.weight"], T[p + "v_proj.bias"]).view(n, kv, hd).transpose(0, 1)
    # LlamaRotaryEmbedding (default rope type), in float64
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.int64).to(torch.float64) / hd))
    position_ids = torch.arange(n, dtype=torch.float64)
    freqs = position_ids[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    q, k = apply_rotary_pos_emb(q, k, emb.cos(), emb.sin())
    k, v = repeat_kv(k, H // kv), repeat_kv(v, H // kv)
    scores = q @ k.transpose(-2, -1) * hd ** -0.5
    scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    out = (scores.softmax(-1) @ v).transpose(0, 1).reshape(n, D)
    y = x + F.linear(out, T[p + "o_proj.weight"])
    t["input"], t["output"], t["rope_theta"] = x.numpy(), y.numpy(), np.array([theta])
    return t


def mha_no_out_proj(rng):
    t = {
        "in_proj_weight": rng.standard_normal((3 * D, D)) / np.sqrt(D),
        "in_proj_bias": 0.1 * rng.standard_normal(3 * D),
    }
    mha = torch.nn.MultiheadAttention(D, H, bias=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.tensor(t["in_proj_weight"]))
        mha.in_proj_bias.copy_(torch.tensor(t["in_proj_bias"]))
        mha.out_proj.weight.copy_(torch.eye(D))  # the attention map alone: W^O = I, no output bias
        mha.out_proj.bias.zero_()
    mha.eval()
    x = torch.tensor(rng.standard_normal((N, D)))
    y = mha(x[:, None], x[:, None], x[:, None], need_weights=False)[0][:, 0]
    t["input"], t["output"] = x.numpy(), y.detach().numpy()
    return t


def main():
    import sys
    wanted = set(sys.argv[1:])
    for name, make, seed in (("timm_vit_block", timm, 101), ("gpt2_block", gpt2, 102),
                             ("llama_gqa_block", llama_gqa, 103), ("mha_no_out_proj", mha_no_out_proj, 104),
                             ("llama_rope_block", llama_rope, 105)):
        if not wanted or name in wanted:
            np.savez(os.path.join(HERE, name + ".npz"), **make(np.random.default_rng(seed)))


if __name__ == "__main__":
    main()
