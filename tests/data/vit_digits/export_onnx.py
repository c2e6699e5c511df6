#!/usr/bin/python3
"""Export the digits ViT (train.py's torch module, weights from vit_digits.safetensors) to ONNX.

Made with:  /usr/bin/python3 tests/data/vit_digits/export_onnx.py     (Debian's python3-torch, python3-numpy)

Loads the float64 weights of vit_digits.safetensors into train.py's VisionTransformer (float64) and writes
vit_digits.onnx next to this file with torch.onnx.export: opset 17 (LayerNormalization is one node), a fixed
batch of 1, input `images` of shape (1, 8, 8) with pixels in [0, 1], output `logits` (1, 10), every weight
float64. `regatta certify --model vit_digits.onnx` runs the generic graph pass on it, beside the
safetensors path (docs/models.md). Before writing, the script checks that the module reproduces the logits
train.py stored in test_set.npz (to 1e-12), so the ONNX file is the trained model.
"""
import json
import os
import struct
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train  # noqa: E402  (the module definition; its main() is not run)


def read_safetensors(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F64":
            raise SystemExit(f"{path}: tensor {name} is {info['dtype']}, expected F64")
        begin, end = info["data_offsets"]
        array = np.frombuffer(data[begin:end], dtype="<f8").reshape(info["shape"])
        tensors[name] = torch.tensor(array.copy(), dtype=torch.float64)
    return tensors


def main():
    torch.set_default_dtype(torch.float64)
    model = train.VisionTransformer().double()
    weights = read_safetensors(os.path.join(HERE, "vit_digits.safetensors"))
    model.load_state_dict(weights, strict=True)  # every name present, none extra
    model.eval()
    with np.load(os.path.join(HERE, "test_set.npz")) as z:
        images, logits = torch.tensor(z["images"]), torch.tensor(z["logits"])
    with torch.no_grad():
        diff = (model(images) - logits).abs().max().item()
    if not diff <= 1e-12:
        raise SystemExit(f"the module's logits differ from test_set.npz's by {diff}")
    out = os.path.join(HERE, "vit_digits.onnx")
    torch.onnx.export(model, (images[:1].clone(),), out, opset_version=17, input_names=["images"],
                      output_names=["logits"], do_constant_folding=True)
    print(f"wrote {out} (max |logit - test_set.npz| = {diff:.3g})")


if __name__ == "__main__":
    main()
