#!/usr/bin/env python3
"""An independent float64 evaluator of the VNN-COMP 2023 ViT ONNX graphs, in numpy (onnx 1.12 has no
ReferenceEvaluator): the reference that regatta's import and evaluation are checked against (docs/verify.md).

    /usr/bin/python3 bench/vnncomp/onnx_numpy.py MODEL.onnx DATA.pt OUT.npz [N]

writes OUT.npz with `inputs` (N, 3, 32, 32: the first N images of data.pt, normalised with the benchmark's
mean and std, float64), `logits` (N, 10: this evaluator), `labels` (N). Only the operators those graphs use
are implemented (opset 9 semantics; also those of tests/data/onnx/vit_vnncomp_like.onnx); anything else raises.
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper

MEAN = np.array([0.4914, 0.4822, 0.4465])
STD = np.array([0.2023, 0.1994, 0.2010])


def attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def conv(x, w, b, a):
    sh, sw = a.get("strides", [1, 1])
    pt, pl, pb, pr = a.get("pads", [0, 0, 0, 0])
    assert a.get("group", 1) == 1 and a.get("dilations", [1, 1]) == [1, 1]
    x = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    oh, ow = (h - kh) // sh + 1, (wd - kw) // sw + 1
    out = np.zeros((n, m, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw]
            out[:, :, i, j] = np.einsum("nckl,mckl->nm", patch, w)
    return out + (b.reshape(1, -1, 1, 1) if b is not None else 0)


def run(model, x):
    env = {t.name: numpy_helper.to_array(t).astype(np.float64) if numpy_helper.to_array(t).dtype.kind == "f"
           else numpy_helper.to_array(t) for t in model.graph.initializer}
    env[model.graph.input[0].name] = x
    for node in model.graph.node:
        a = attrs(node)
        i = [env[n] if n else None for n in node.input]
        op = node.op_type
        if op == "Constant":
            v = numpy_helper.to_array(a["value"])
            r = v.astype(np.float64) if v.dtype.kind == "f" else v
        elif op == "Add":
            r = i[0] + i[1]
        elif op == "Mul":
            r = i[0] * i[1]
        elif op == "MatMul":
            r = np.matmul(i[0], i[1])
        elif op == "Transpose":
            r = np.transpose(i[0], a.get("perm"))
        elif op == "Concat":
            r = np.concatenate(i, axis=a["axis"])
        elif op == "Reshape":
            shape = [d if d != 0 else i[0].shape[k] for k, d in enumerate(i[1].tolist())]
            r = i[0].reshape(shape)
        elif op == "Unsqueeze":
            r = i[0]
            for ax in sorted(a["axes"]):
                r = np.expand_dims(r, ax)
        elif op == "Shape":
            r = np.array(i[0].shape, dtype=np.int64)
        elif op == "Gather":
            r = np.take(i[0], i[1], axis=a.get("axis", 0))
        elif op == "Slice":
            r = i[0]
            sl = [slice(None)] * r.ndim
            for ax, s, e in zip(a.get("axes", range(len(a["starts"]))), a["starts"], a["ends"]):
                sl[ax] = slice(s, min(e, r.shape[ax]))
            r = r[tuple(sl)]
        elif op == "ConstantOfShape":
            v = numpy_helper.to_array(a["value"]) if "value" in a else np.zeros(1)
            r = np.full(tuple(i[0].tolist()), v.reshape(-1)[0], dtype=np.float64 if v.dtype.kind == "f" else v.dtype)
        elif op == "Expand":
            r = i[0] * np.ones(tuple(i[1].tolist()))
        elif op == "BatchNormalization":
            x0, s, b, m, v = i
            shp = (1, -1) + (1,) * (x0.ndim - 2)
            eps = np.float64(np.float32(a.get("epsilon", 1e-5)))
            r = (x0 - m.reshape(shp)) / np.sqrt(v.reshape(shp) + eps) * s.reshape(shp) + b.reshape(shp)
        elif op == "Softmax":
            ax = a.get("axis", 1)
            flat = i[0].reshape(i[0].shape[:ax] + (-1,))
            e = np.exp(flat - flat.max(axis=-1, keepdims=True))
            r = (e / e.sum(axis=-1, keepdims=True)).reshape(i[0].shape)
        elif op == "Relu":
            r = np.maximum(i[0], 0)
        elif op == "ReduceMean":
            r = i[0].mean(axis=tuple(a["axes"]) if "axes" in a else None, keepdims=bool(a.get("keepdims", 1)))
        elif op == "Gemm":
            A = i[0].T if a.get("transA", 0) else i[0]
            B = i[1].T if a.get("transB", 0) else i[1]
            r = a.get("alpha", 1.0) * A @ B + (a.get("beta", 1.0) * i[2] if len(i) > 2 and i[2] is not None else 0)
        elif op == "Conv":
            r = conv(i[0], i[1], i[2] if len(i) > 2 else None, a)
        elif op == "Equal":
            r = np.equal(i[0], i[1])
        elif op == "Where":
            r = np.where(i[0], i[1], i[2])
        elif op == "Pow":
            r = np.power(i[0], i[1])
        elif op == "Split":  # opset 9: the sizes are an attribute
            ax = a.get("axis", 0)
            sizes = a.get("split", [i[0].shape[ax] // len(node.output)] * len(node.output))
            parts = np.split(i[0], np.cumsum(sizes)[:-1], axis=ax)
            for name, part in zip(node.output, parts):
                env[name] = part
            continue
        else:
            raise NotImplementedError(op)
        env[node.output[0]] = r
    return env[model.graph.output[0].name]


def main():
    import torch
    model = onnx.load(sys.argv[1])
    data = torch.load(sys.argv[2])
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    imgs = data[0][:n].double().numpy()
    x = (imgs - MEAN.reshape(1, 3, 1, 1)) / STD.reshape(1, 3, 1, 1)
    logits = np.concatenate([run(model, x[k:k + 1]) for k in range(n)])
    labels = np.array(data[1][:n]).astype(np.float64)
    np.savez(sys.argv[3], inputs=x, logits=logits, labels=labels)
    print(f"{n} images: numpy evaluator predicts the label for {(logits.argmax(1) == labels).sum()}")


if __name__ == "__main__":
    main()
