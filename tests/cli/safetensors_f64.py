"""The float64 tensors of a safetensors file, read independently of regatta (the test fixtures hold F64 only)."""
import json
import struct

import numpy as np


def read_safetensors(path):
    """{name: numpy float64 array} of every tensor of the file (a tensor of another dtype is an error)."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F64", (path, name, info["dtype"])
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype="<f8").reshape(info["shape"])
    return out
