#!/usr/bin/env python3
"""Writes the labelled test sets of gpt_causal.onnx (make_onnx_models.py, class GPT: per-token logits
[1, 6, 11] of 6 token embeddings of width 16) for `regatta certify --model gpt_causal.onnx`:

  * gpt_causal.test_set.npz: `images` (8, 6, 16) float64, the stored input gpt_causal.input.npy and 7 seeded
    perturbations of it (standard normal added), and `labels` (8,): torch's argmax of the LAST token's
    logits (certify's default --position last, the next-token prediction);
  * gpt_causal.test_set_first.npz: the same images, labelled by the argmax of token 0's logits (--position 0).

The labels are torch's: the exported graph evaluated in float64 node by node (onnx_torch.py), checked first
against torch's own logits of the model at the stored input (gpt_causal.logits.npy, to 1e-12).

    /usr/bin/python3 tests/data/onnx/make_gpt_causal_test_set.py tests/data/onnx
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnx_torch import OnnxTorch  # noqa: E402


def main(out):
    model = OnnxTorch(os.path.join(out, "gpt_causal.onnx"))
    x0 = np.load(os.path.join(out, "gpt_causal.input.npy"))
    torch_logits = np.load(os.path.join(out, "gpt_causal.logits.npy"))
    y0 = model(x0).numpy()
    assert np.max(np.abs(y0 - torch_logits)) <= 1e-12 * np.max(np.abs(torch_logits)), "onnx_torch is not torch"
    rng = np.random.default_rng(20261207)
    images = np.concatenate([x0, x0 + 1.0 * rng.standard_normal((7,) + x0.shape[1:])]).astype(np.float64)
    logits = np.stack([model(images[i:i + 1]).numpy()[0] for i in range(len(images))])  # (8, 6, 11)
    for name, row in (("gpt_causal.test_set.npz", -1), ("gpt_causal.test_set_first.npz", 0)):
        labels = np.argmax(logits[:, row, :], axis=1).astype(np.int64)
        np.savez(os.path.join(out, name), images=images, labels=labels)
        print(f"{name}: images {images.shape}, labels {labels.tolist()}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
