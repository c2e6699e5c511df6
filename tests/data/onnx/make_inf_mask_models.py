#!/usr/bin/env python3
"""Generates the ONNX fixtures with causal masks filled with -inf (docs/graph.md#non-finite-constants).

Run with Debian's interpreter (python3-torch, python3-onnx):
    /usr/bin/python3 tests/data/onnx/make_inf_mask_models.py tests/data/onnx

torch's two usual causal-mask exports, each a float64 model with NAME.onnx, NAME.input.npy, NAME.logits.npy
(torch's float64 output at that input) and NAME.grad.npy (the gradient of the largest logit), and for the
first NAME.test_set.npz (inputs and torch's labels at the last token, for certify):

  * causal_where_inf: nanoGPT's att.masked_fill(bias == 0, float('-inf')), exported as
    Where(cond, -inf, scores) -> Softmax;
  * causal_add_inf: nn.MultiheadAttention with attn_mask = nn.Transformer.generate_square_subsequent_mask(n),
    exported as scores + M -> Softmax with M holding -inf above the diagonal.

And hostile files the importer refuses: -inf added to a MatMul output that no Softmax reads
(inf_outside_mask), +inf in an additive mask before a Softmax (pos_inf_mask), and a mask whose first row is
all -inf (inf_masked_row: the softmax there is 0/0).
"""
import math
import os
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn

torch.manual_seed(20261207)
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
N, D, HEADS, CLASSES = 6, 16, 4, 5


class MaskedFillAttention(nn.Module):
    """nanoGPT's CausalSelfAttention: a lower-triangular buffer, masked_fill with -inf."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)
        self.register_buffer("bias", torch.tril(torch.ones(N, N)).view(1, 1, N, N))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        y = torch.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class NanoBlock(nn.Module):
    """One nanoGPT block (pre-norm, the masked-fill attention, a tanh-GELU MLP), a final LayerNorm and a head
    over every token."""

    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(D)
        self.attn = MaskedFillAttention()
        self.ln2 = nn.LayerNorm(D)
        self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(approximate="tanh"), nn.Linear(2 * D, D))
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, CLASSES)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return self.head(self.ln_f(x))


class MhaMasked(nn.Module):
    """nn.MultiheadAttention with the square subsequent mask (-inf above the diagonal), residual, a head."""

    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(D, HEADS, batch_first=True)
        self.head = nn.Linear(D, CLASSES)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(N))

    def forward(self, x):
        y, _ = self.mha(x, x, x, attn_mask=self.mask, need_weights=False)
        return self.head(x + y)


def export(name, model, x, opset):
    model = model.double().eval()
    x = x.double()
    path = os.path.join(OUT, name + ".onnx")
    torch.onnx.export(model, (x,), path, opset_version=opset, input_names=["input"], output_names=["logits"],
                      do_constant_folding=True)
    onnx.checker.check_model(onnx.load(path))
    with torch.no_grad():
        y = model(x)
    np.save(os.path.join(OUT, name + ".input.npy"), x.numpy())
    np.save(os.path.join(OUT, name + ".logits.npy"), y.numpy())
    xg = x.clone().requires_grad_(True)
    label = int(torch.argmax(y.flatten()))
    model(xg).flatten()[label].backward()
    np.save(os.path.join(OUT, name + ".grad.npy"), xg.grad.numpy())
    ops = sorted({n.op_type for n in onnx.load(path).graph.node})
    print(f"{name}: opset {opset}, {os.path.getsize(path)} bytes, ops {' '.join(ops)}")


def test_set(name, model, count=3):
    """NAME.test_set.npz: `count` random inputs and torch's label at the last token (certify's default
    --position)."""
    x = torch.randn(count, N, D, dtype=torch.float64)
    with torch.no_grad():
        labels = model.double().eval()(x)[:, -1, :].argmax(dim=1)
    np.savez(os.path.join(OUT, name + ".test_set.npz"), images=x.numpy(), labels=labels.numpy())


def save_model(name, nodes, inputs, outputs, initializers):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    with open(os.path.join(OUT, name + ".onnx"), "wb") as f:
        f.write(model.SerializeToString())


def hostile():
    vec = lambda n, shape: helper.make_tensor_value_info(n, TensorProto.DOUBLE, shape)
    w = numpy_helper.from_array(np.eye(4), "w")
    causal = np.triu(np.full((4, 4), -np.inf), 1)
    # -inf added to a MatMul output that goes on to the graph's output (no Softmax reads it).
    save_model("inf_outside_mask",
               [helper.make_node("MatMul", ["x", "w"], ["s"], name="scores"),
                helper.make_node("Add", ["s", "m"], ["y"], name="add_mask"),
                helper.make_node("Relu", ["y"], ["out"], name="relu")],
               [vec("x", [4, 4])], [vec("out", [4, 4])], [w, numpy_helper.from_array(causal, "m")])
    # +inf where a mask would hold -inf.
    save_model("pos_inf_mask",
               [helper.make_node("MatMul", ["x", "w"], ["s"], name="scores"),
                helper.make_node("Add", ["s", "m"], ["y"], name="add_mask"),
                helper.make_node("Softmax", ["y"], ["out"], name="softmax", axis=-1)],
               [vec("x", [4, 4])], [vec("out", [4, 4])], [w, numpy_helper.from_array(-causal, "m")])
    # A mask whose first row is -inf throughout.
    row = causal.copy()
    row[0, :] = -np.inf
    save_model("inf_masked_row",
               [helper.make_node("MatMul", ["x", "w"], ["s"], name="scores"),
                helper.make_node("Add", ["s", "m"], ["y"], name="add_mask"),
                helper.make_node("Softmax", ["y"], ["out"], name="softmax", axis=-1)],
               [vec("x", [4, 4])], [vec("out", [4, 4])], [w, numpy_helper.from_array(row, "m")])


def main():
    os.makedirs(OUT, exist_ok=True)
    nano = NanoBlock()
    export("causal_where_inf", nano, torch.randn(1, N, D), opset=14)
    test_set("causal_where_inf", nano)
    export("causal_add_inf", MhaMasked(), torch.randn(1, N, D), opset=14)
    hostile()


if __name__ == "__main__":
    main()
