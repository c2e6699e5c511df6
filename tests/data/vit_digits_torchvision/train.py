#!/usr/bin/python3
"""torchvision's VisionTransformer trained on scikit-learn's digits and exported to ONNX (a regatta fixture).

Made with:  /usr/bin/python3 tests/data/vit_digits_torchvision/train.py   (Debian's python3-torch,
            python3-torchvision, python3-sklearn, python3-numpy; a few CPU minutes)

The model is torchvision.models.VisionTransformer as a new user would size it for 8x8 grey digits: image 8,
patch 2 (16 tokens + class token), hidden 32, 4 heads, MLP 64, 2 layers (its own pre-LayerNorm blocks with
nn.MultiheadAttention, exact GELU, eps 1e-6, final LayerNorm, class-token pooling), 10 classes. Its patch
convolution is replaced by a one-channel one (torchvision's is for RGB), and a wrapper adds the channel
axis, so the ONNX input is the (1, 8, 8) image of tests/data/vit_digits/test_set.npz. The data split is the
digits ViT's (tests/data/vit_digits/train.py: 1347 training, 450 test images, stratified, random_state 0;
checked against its test_set.npz). Training and evaluation run in float64 on one thread with fixed seeds.

Writes next to this file:
  vit_digits_torchvision.onnx         torch.onnx.export, opset 17, every weight float64, input `images`
                                      (1, 8, 8), output `logits` (1, 10)
  vit_digits_torchvision.logits.npy   torch's float64 logits of the 450 test images (450, 10)
  README.md                           the accuracy and the commands
"""
import os
import sys

import torch
import torch.nn as nn
from torchvision.models import VisionTransformer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "vit_digits"))
import training  # noqa: E402  (the split, the training loop, the export)

IMAGE, PATCH, WIDTH, HEADS, MLP, DEPTH, CLASSES = 8, 2, 32, 4, 64, 2, 10


class Digits(nn.Module):
    """(B, 8, 8) images -> torchvision's ViT on (B, 1, 8, 8)."""

    def __init__(self):
        super().__init__()
        self.vit = VisionTransformer(image_size=IMAGE, patch_size=PATCH, num_layers=DEPTH, num_heads=HEADS,
                                     hidden_dim=WIDTH, mlp_dim=MLP, num_classes=CLASSES)
        self.vit.conv_proj = nn.Conv2d(1, WIDTH, kernel_size=PATCH, stride=PATCH)

    def forward(self, images):
        return self.vit(images.unsqueeze(1))


DESCRIPTION = ("torchvision.models.VisionTransformer(image_size=8, patch_size=2, num_layers=2, num_heads=4, "
               "hidden_dim=32, mlp_dim=64, num_classes=10) with a one-channel conv_proj; pre-LayerNorm blocks "
               "(eps 1e-6), exact GELU, class token, final LayerNorm")

if __name__ == "__main__":
    training.train_and_export(Digits, "vit_digits_torchvision", HERE, DESCRIPTION, epochs=150)
