#!/usr/bin/python3
"""A ViT built on nn.TransformerEncoder, trained on scikit-learn's digits and exported to ONNX (a regatta
fixture).

Made with:  /usr/bin/python3 tests/data/vit_digits_encoder/train.py   (Debian's python3-torch,
            python3-sklearn, python3-numpy; a few CPU minutes)

The model is what a new user writes with torch's own layers: a Conv2d patch embedding (2x2 patches, 16
tokens), a learned position table, nn.TransformerEncoder of 3 nn.TransformerEncoderLayer (d_model 48, 4 heads,
feed-forward 96, ReLU, post-norm: norm_first=False, batch_first, eps 1e-5, dropout 0.1 while training), mean
pooling over the tokens (no class token) and a linear head to 10 classes. The data split is the digits ViT's
(tests/data/vit_digits/train.py; checked against its test_set.npz). Training and evaluation run in float64 on
one thread with fixed seeds.

Writes next to this file:
  vit_digits_encoder.onnx         torch.onnx.export, opset 17, every weight float64, input `images` (1, 8, 8),
                                  output `logits` (1, 10)
  vit_digits_encoder.logits.npy   torch's float64 logits of the 450 test images (450, 10)
  README.md                       the accuracy and the commands
"""
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vit_digits"))
import training  # noqa: E402  (the split, the training loop, the export)

IMAGE, PATCH, WIDTH, HEADS, FF, DEPTH, CLASSES = 8, 2, 48, 4, 96, 3, 10


class EncoderViT(nn.Module):
    def __init__(self):
        super().__init__()
        tokens = (IMAGE // PATCH) ** 2
        self.patch = nn.Conv2d(1, WIDTH, kernel_size=PATCH, stride=PATCH)
        self.pos = nn.Parameter(torch.randn(1, tokens, WIDTH) * 0.02)
        layer = nn.TransformerEncoderLayer(WIDTH, HEADS, dim_feedforward=FF, dropout=0.1, activation="relu",
                                           batch_first=True, norm_first=False)
        self.encoder = nn.TransformerEncoder(layer, DEPTH, enable_nested_tensor=False)
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, images):  # images: (B, 8, 8)
        x = self.patch(images.unsqueeze(1)).flatten(2).transpose(1, 2) + self.pos
        return self.head(self.encoder(x).mean(dim=1))


DESCRIPTION = ("Conv2d 2x2 patch embedding, position table, nn.TransformerEncoder(d_model=48, nhead=4, "
               "dim_feedforward=96, 3 layers, activation relu, norm_first=False, eps 1e-5), mean pooling, linear head")

if __name__ == "__main__":
    training.train_and_export(EncoderViT, "vit_digits_encoder", HERE, DESCRIPTION, epochs=50)
