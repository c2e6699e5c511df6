#!/usr/bin/env python3
"""Generates the ONNX test models of tests/graph (docs/graph.md, "Tests").

Run with Debian's interpreter (python3-torch 1.13, python3-onnx 1.12):
    /usr/bin/python3 tests/data/onnx/make_onnx_models.py tests/data/onnx

For each model NAME it writes NAME.onnx, NAME.input.npy, NAME.logits.npy and NAME.grad.npy: the input,
torch's output and the gradient of the largest logit (flattened) with respect to the input, all float64. The reference is always torch evaluated in float64 on the same weights as the file:

  * most models are exported in float64 (model.double() before export): the initializers are the binary64
    weights torch uses, and every constant the exporter writes (1/sqrt(2) of GELU, epsilons as tensors) is
    the binary64 value torch uses;
  * vit_vnncomp_like is exported in float32, like the VNN-COMP 2023 ViTs; its weights are rounded to float32
    before export, and the reference is torch in float64 on those float32 values (exact in binary64). Every
    other constant of that graph is chosen exactly representable in float32 (head width 4, so the attention
    scale is 1/2; BatchNorm epsilon 2^-16; ONNX float attributes are float32), so the ONNX semantics
    evaluated in binary64 and torch's float64 forward differ only by rounding order.

The C++ test (tests/graph/onnx_models_test.cpp) compares regatta's double evaluation with the logits to 1e-12.
Malformed and unsupported fixtures for the CLI tests are written to NAME.onnx beside them.
"""
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch
from onnx import TensorProto, helper
from torch import nn

torch.manual_seed(20240611)
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))


class EncoderClassifier(nn.Module):
    """nn.TransformerEncoder over a [1, n, d] token input, mean pooling, a linear head."""

    def __init__(self, norm_first, activation, d=16, heads=4, ff=32, layers=2, classes=3):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation=activation,
                                           batch_first=True, norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        return self.head(self.encoder(x).mean(dim=1))


class ViT(nn.Module):
    """Conv patch embedding, a class-free token sequence with positions, pre-norm blocks with
    nn.MultiheadAttention and a GELU MLP, mean pooling, no final norm."""

    def __init__(self, image=8, patch=4, channels=3, d=16, heads=4, ff=32, depth=2, classes=5):
        super().__init__()
        self.patch = nn.Conv2d(channels, d, patch, stride=patch)
        n = (image // patch) ** 2
        self.pos = nn.Parameter(torch.randn(1, n, d) * 0.1)
        self.norms1 = nn.ModuleList(nn.LayerNorm(d) for _ in range(depth))
        self.norms2 = nn.ModuleList(nn.LayerNorm(d) for _ in range(depth))
        self.attn = nn.ModuleList(nn.MultiheadAttention(d, heads, batch_first=True) for _ in range(depth))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(d, ff), nn.GELU(), nn.Linear(ff, d)) for _ in range(depth))
        self.head = nn.Linear(d, classes)

    def forward(self, img):
        x = self.patch(img).flatten(2).transpose(1, 2) + self.pos
        for n1, a, n2, m in zip(self.norms1, self.attn, self.norms2, self.mlp):
            h = n1(x)
            x = x + a(h, h, h, need_weights=False)[0]
            x = x + m(n2(x))
        return self.head(x.mean(dim=1))


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads, n):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.heads = heads
        self.register_buffer("mask", torch.tril(torch.ones(n, n, dtype=torch.bool)))

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (t.reshape(b, n, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5
        scores = torch.where(self.mask, scores, torch.tensor(-1e9, dtype=scores.dtype))
        y = torch.softmax(scores, dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, n, d))


class GPT(nn.Module):
    """GPT-2 style: embedded tokens in, learned positions, pre-norm causal blocks with a tanh-GELU MLP, final
    LayerNorm, a linear head (the logits of every position)."""

    def __init__(self, n=6, d=16, heads=4, depth=2, vocab=11):
        super().__init__()
        self.pos = nn.Parameter(torch.randn(1, n, d) * 0.1)
        self.ln1 = nn.ModuleList(nn.LayerNorm(d) for _ in range(depth))
        self.ln2 = nn.ModuleList(nn.LayerNorm(d) for _ in range(depth))
        self.attn = nn.ModuleList(CausalSelfAttention(d, heads, n) for _ in range(depth))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))
                                 for _ in range(depth))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, x):
        x = x + self.pos
        for l1, a, l2, m in zip(self.ln1, self.attn, self.ln2, self.mlp):
            x = x + a(l1(x))
            x = x + m(l2(x))
        return self.head(self.ln_f(x))


class BatchNormTokens(nn.Module):
    """BatchNorm over the feature axis of [b, n, d] tokens (the VNN-COMP ViTs use it in place of LayerNorm)."""

    def __init__(self, d):
        super().__init__()
        self.bn = nn.BatchNorm1d(d, eps=2.0 ** -16)

    def forward(self, x):
        return self.bn(x.transpose(1, 2)).transpose(1, 2)


class VnncompViT(nn.Module):
    """The structure of the VNN-COMP 2023 ViTs: Conv patch embedding, a CLS token expanded to the batch size
    read from the input's shape (Shape/Gather/ConstantOfShape/Expand in the export), positions, blocks with
    BatchNorm, hand-written attention and a ReLU MLP, the CLS token's output into the head."""

    def __init__(self, image=8, patch=4, channels=3, d=16, heads=4, ff=32, depth=2, classes=10):
        super().__init__()
        self.patch = nn.Conv2d(channels, d, patch, stride=patch)
        n = (image // patch) ** 2 + 1
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.1)
        self.pos = nn.Parameter(torch.randn(1, n, d) * 0.1)
        self.heads = heads
        self.bn1 = nn.ModuleList(BatchNormTokens(d) for _ in range(depth))
        self.bn2 = nn.ModuleList(BatchNormTokens(d) for _ in range(depth))
        self.qkv = nn.ModuleList(nn.Linear(d, 3 * d) for _ in range(depth))
        self.out = nn.ModuleList(nn.Linear(d, d) for _ in range(depth))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(d, ff), nn.ReLU(), nn.Linear(ff, d)) for _ in range(depth))
        self.head = nn.Linear(d, classes)

    def attention(self, k, x):
        b, n, d = x.shape
        h = self.heads
        q, kk, v = self.qkv[k](x).chunk(3, dim=-1)
        q, kk, v = (t.reshape(b, n, h, d // h).permute(0, 2, 1, 3) for t in (q, kk, v))
        a = torch.softmax(q @ kk.transpose(-1, -2) * (d // h) ** -0.5, dim=-1)
        return self.out[k]((a @ v).permute(0, 2, 1, 3).reshape(b, n, d))

    def forward(self, img):
        x = self.patch(img).flatten(2).transpose(1, 2)
        cls = self.cls.expand(x.shape[0], -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos
        for k in range(len(self.qkv)):
            x = x + self.attention(k, self.bn1[k](x))
            x = x + self.mlp[k](self.bn2[k](x))
        return self.head(x[:, 0])


def randomise_batchnorm(model):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm1d):
            with torch.no_grad():
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)


def export(name, model, x, opset, float32=False):
    model.eval()
    if float32:
        model = model.float()
        x = x.float()
    else:
        model = model.double()
        x = x.double()
    path = os.path.join(OUT, name + ".onnx")
    torch.onnx.export(model, (x,), path, opset_version=opset, input_names=["input"], output_names=["logits"],
                      do_constant_folding=True)
    onnx.checker.check_model(onnx.load(path))
    with torch.no_grad():  # the reference: float64 on the same (float32-valued when float32) weights
        y = model.double()(x.double())
    np.save(os.path.join(OUT, name + ".input.npy"), x.double().numpy())
    np.save(os.path.join(OUT, name + ".logits.npy"), y.numpy())
    # The gradient of the largest logit (flattened index argmax) with respect to the input, by autograd in
    # float64 on the same weights: the reference of the graph's reverse sweep (tests/graph/vjp_models_test.cpp).
    xg = x.double().clone().requires_grad_(True)
    label = int(torch.argmax(y.flatten()))
    model.double()(xg).flatten()[label].backward()
    np.save(os.path.join(OUT, name + ".grad.npy"), xg.grad.numpy())
    ops = sorted({n.op_type for n in onnx.load(path).graph.node})
    print(f"{name}: opset {opset}, {os.path.getsize(path)} bytes, ops {' '.join(ops)}")


def save_model(name, nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    with open(os.path.join(OUT, name + ".onnx"), "wb") as f:
        f.write(model.SerializeToString())
    return model


def fixtures():
    vec = lambda n, shape: helper.make_tensor_value_info(n, TensorProto.FLOAT, shape)
    # An operator outside the supported set (Cos), named.
    save_model("unsupported_cos", [helper.make_node("Cos", ["x"], ["y"], name="weird_cos")], [vec("x", [1, 4])],
               [vec("y", [1, 4])])
    # A NaN initializer.
    w = helper.make_tensor("w", TensorProto.FLOAT, [4], [1.0, float("nan"), 0.0, 2.0])
    save_model("nan_initializer", [helper.make_node("Add", ["x", "w"], ["y"], name="add")], [vec("x", [1, 4])],
               [vec("y", [1, 4])], [w])
    # An initializer stored as external data.
    e = helper.make_tensor("w", TensorProto.FLOAT, [4], [0.0] * 4)
    e.ClearField("float_data")
    e.data_location = TensorProto.EXTERNAL
    e.external_data.add(key="location", value="weights.bin")
    save_model("external_data", [helper.make_node("Add", ["x", "w"], ["y"], name="add")], [vec("x", [1, 4])],
               [vec("y", [1, 4])], [e])
    # A runtime input that no output depends on.
    save_model("unused_input", [helper.make_node("Relu", ["x"], ["y"], name="relu")],
               [vec("x", [1, 4]), vec("z", [1, 4])], [vec("y", [1, 4])])
    # A node reading a tensor nothing defines (the checker refuses it too).
    save_model("dangling_input", [helper.make_node("Add", ["x", "ghost"], ["y"], name="add")], [vec("x", [1, 4])],
               [vec("y", [1, 4])])
    # An opset outside 9..17.
    save_model("opset8", [helper.make_node("Relu", ["x"], ["y"], name="relu")], [vec("x", [1, 4])],
               [vec("y", [1, 4])], opset=8)
    # A symbolic batch dimension (bound to 1 by the importer).
    save_model("symbolic_batch", [helper.make_node("Relu", ["x"], ["y"], name="relu")], [vec("x", ["batch", 4])],
               [vec("y", ["batch", 4])])
    # A symbolic dimension that is not the leading batch axis (refused).
    save_model("symbolic_inner", [helper.make_node("Relu", ["x"], ["y"], name="relu")], [vec("x", [1, "n"])],
               [vec("y", [1, "n"])])
    # Truncated protobuf and plain garbage.
    good = open(os.path.join(OUT, "encoder_postnorm_gelu.onnx"), "rb").read()
    open(os.path.join(OUT, "truncated.onnx"), "wb").write(good[: len(good) // 3])
    open(os.path.join(OUT, "garbage.onnx"), "wb").write(bytes(range(256)) * 4)


def verify_fixtures():
    """mlp_tiny: 2 inputs -> Gemm(3) -> Relu -> Gemm(2), dyadic weights, symbolic batch axis: the model of the
    `regatta verify` tests (tests/data/vnnlib), small enough that a grid over its input box decides a property."""
    vec = lambda n, shape: helper.make_tensor_value_info(n, TensorProto.FLOAT, shape)
    w1 = np.array([[1, 1], [1, -1], [-1, 0.5]], dtype=np.float32)
    b1 = np.array([0, 0.5, 0.25], dtype=np.float32)
    w2 = np.array([[1, -1, 0.5], [-0.5, 1, 1]], dtype=np.float32)
    b2 = np.array([0, 0.25], dtype=np.float32)
    inits = [onnx.numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1", transB=1),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], name="fc2", transB=1)]
    save_model("mlp_tiny", nodes, [vec("x", ["batch", 2])], [vec("y", ["batch", 2])], inits)


def main():
    os.makedirs(OUT, exist_ok=True)
    export("encoder_postnorm_gelu", EncoderClassifier(False, "gelu"), torch.randn(1, 5, 16), opset=17)
    export("encoder_prenorm_relu", EncoderClassifier(True, "relu"), torch.randn(1, 5, 16), opset=14)
    export("vit_conv_mha", ViT(), torch.randn(1, 3, 8, 8), opset=13)
    export("gpt_causal", GPT(), torch.randn(1, 6, 16), opset=12)
    vnn = VnncompViT()
    randomise_batchnorm(vnn)
    export("vit_vnncomp_like", vnn, torch.rand(1, 3, 8, 8), opset=9, float32=True)
    fixtures()
    verify_fixtures()


if __name__ == "__main__":
    main()
