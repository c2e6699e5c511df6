"""The digits ViT's config with its LayerNorm epsilon rounded to float32, as its ONNX export stores it (a
float attribute): certify's tests give it to the safetensors file so that the two files are one function
(docs/models.md#recognised-transformers)."""
import json
import os
import struct


def float32_eps_config(vit_dir, work_dir):
    """Writes WORK_DIR/config_float32_eps.json from VIT_DIR/config.json and returns its path."""
    with open(os.path.join(vit_dir, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    config["layernorm_eps"] = struct.unpack("<f", struct.pack("<f", config["layernorm_eps"]))[0]
    path = os.path.join(work_dir, "config_float32_eps.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f)
    return path
