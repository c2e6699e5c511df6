#!/usr/bin/python3
"""A small Vision Transformer trained on scikit-learn's bundled digits: regatta's real trained fixture.

Made with:  /usr/bin/python3 tests/data/vit_digits/train.py     (Debian's python3-torch, python3-sklearn,
                                                                  python3-numpy; about a minute on 2 cores)

The model follows timm's VisionTransformer layout and naming (patch_embed.proj, cls_token, pos_embed,
blocks.N.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2}, norm, head): 8x8 grey images, 2x2 patches
(16 tokens) plus a class token, width 32, 4 heads, MLP width 64 with exact (erf) GELU, two pre-LayerNorm
blocks, class-token pooling, 10 logits. Training and evaluation run in float64 with one thread and fixed
seeds, so re-running writes the same numbers.

Writes next to this file:
  vit_digits.safetensors   the weights, float64, in timm naming (written by fixture_files.py: 8 bytes of
                           little-endian header length, a JSON header, then the raw tensors)
  config.json              what the names cannot say: heads, patch size, LayerNorm epsilon, GELU form, pooling
  test_set.npz             the held-out images (450, 8, 8) in [0, 1], labels (int64), torch's float64
                           logits for them, and the test accuracy
  README.md                a summary of the above
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# The shared modules beside this file, also when it is imported from elsewhere (python/tests/test_model.py).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import training  # noqa: E402
from fixture_files import write_npz, write_safetensors  # noqa: E402  (also imported from here by text_models/generate.py)

HERE = os.path.dirname(os.path.abspath(__file__))
torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)
torch.manual_seed(0)

IMAGE, PATCH, WIDTH, HEADS, MLP, DEPTH, CLASSES, EPS = 8, 2, 32, 4, 64, 2, 10, 1e-6


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH, bias=True)
        self.proj = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        b, n, d = x.shape
        hd = d // HEADS
        qkv = self.qkv(x).reshape(b, n, 3, HEADS, hd).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = (q @ k.transpose(-2, -1)) * hd ** -0.5
        out = attn.softmax(dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, n, d))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(WIDTH, MLP)
        self.fc2 = nn.Linear(MLP, WIDTH)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(WIDTH, eps=EPS)
        self.attn = Attention()
        self.norm2 = nn.LayerNorm(WIDTH, eps=EPS)
        self.mlp = Mlp()

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PatchEmbed(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Conv2d(1, WIDTH, kernel_size=PATCH, stride=PATCH)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class VisionTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        tokens = (IMAGE // PATCH) ** 2
        self.patch_embed = PatchEmbed()
        self.cls_token = nn.Parameter(torch.zeros(1, 1, WIDTH))
        self.pos_embed = nn.Parameter(torch.randn(1, tokens + 1, WIDTH) * 0.02)
        self.blocks = nn.Sequential(*[Block() for _ in range(DEPTH)])
        self.norm = nn.LayerNorm(WIDTH, eps=EPS)
        self.head = nn.Linear(WIDTH, CLASSES)

    def forward(self, images):  # images: (B, 8, 8)
        x = self.patch_embed(images.unsqueeze(1))
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def main():
    # The split (scikit-learn only supplies the data: importing this file for its model classes does not need
    # it) and the training loop are the ones the two other digits ViTs use (training.py); this split writes
    # test_set.npz, so it is not checked against it.
    x_train, x_test, y_train, y_test = training.split(checked=False)
    model = VisionTransformer()
    training.train(model, x_train, y_train, epochs=150)
    with torch.no_grad():
        logits = model(x_test)
    accuracy = float((logits.argmax(1) == y_test).double().mean())
    tensors = {name: p.detach().numpy() for name, p in model.state_dict().items()}
    write_safetensors(os.path.join(HERE, "vit_digits.safetensors"), tensors)
    config = {"layout": "timm-vit", "image_size": IMAGE, "patch_size": PATCH, "channels": 1, "heads": HEADS,
              "norm": "pre", "layernorm_eps": EPS, "mlp_activation": "gelu_erf", "pooling": "cls",
              "classes": CLASSES, "depth": DEPTH}
    with open(os.path.join(HERE, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    write_npz(os.path.join(HERE, "test_set.npz"),
              {"images": x_test.numpy(), "labels": y_test.numpy().astype(np.int64),
               "logits": logits.numpy(), "accuracy": np.array(accuracy)})
    parameters = sum(p.numel() for p in model.parameters())
    with open(os.path.join(HERE, "README.md"), "w") as f:
        f.write("# vit_digits: a small trained Vision Transformer (regatta fixture)\n\n"
                "Made by `/usr/bin/python3 tests/data/vit_digits/train.py` with torch %s (float64, one thread, "
                "seeds 0 and 1).\n\n"
                "- data: scikit-learn's bundled digits (8x8, values /16 in [0, 1]); 1347 training and 450 "
                "test images (stratified split, random_state 0)\n"
                "- model: timm ViT layout, 2x2 patches (16 tokens + class token), width %d, %d heads, MLP %d "
                "(exact GELU), %d pre-LayerNorm blocks (eps %g), class-token pooling, %d classes; %d "
                "parameters\n"
                "- test accuracy: %.4f (%d of 450)\n"
                "- files: vit_digits.safetensors (weights), config.json, test_set.npz (images, labels, "
                "torch float64 logits, accuracy)\n"
                % (torch.__version__, WIDTH, HEADS, MLP, DEPTH, EPS, CLASSES, parameters, accuracy,
                   round(accuracy * 450)))
    print("test accuracy %.4f, %d parameters" % (accuracy, parameters))


if __name__ == "__main__":
    main()
