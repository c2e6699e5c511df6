#!/usr/bin/python3
"""Writes tests/data/hostile/: files built to exhaust a reader (stack, memory, time) rather than merely
break its format. Every one must be rejected quickly with a one-line InputError naming the file; the corpus
test (tests/core/io/malformed_corpus_test.cpp) lists the directory, so adding a file adds a test case.

Made with:  /usr/bin/python3 tests/data/make_hostile_fixtures.py   (from the repository root; ~20 s)

Hostile inputs too large to commit (10^5 tensors or members) are built in memory by the tests themselves;
inputs that git cannot store (FIFOs, devices, sockets) are made by tests/core/io/file_bytes_test.cpp.
Re-running the script rewrites the same bytes.

Also writes tests/data/hostile_cli/: small files every reader accepts (an empty batch of 2^34 inputs, empty
matrices and vectors, weights that are zero, negative, huge or do not sum to 1) that a command must refuse
with one line naming the file; tests/cli/CMakeLists.txt runs them through the options that read them.
"""
import bz2
import io
import json
import os
import struct
import zipfile


HOSTILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile")
HOSTILE_CLI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile_cli")
DEPTH = 80_000  # deep enough to overflow the stack of a recursive parser, printer or destructor
OBJECT_DEPTH = 50_000  # objects take 5 bytes a level


def write(name, data):
    os.makedirs(HOSTILE, exist_ok=True)
    assert len(data) < 400 * 1024, name
    with open(os.path.join(HOSTILE, name), "wb") as f:
        f.write(data)


def safetensors(header_text, buffer=b""):
    text = header_text.encode() if isinstance(header_text, str) else header_text
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + buffer


def nested(depth, leaf="0"):
    return "[" * depth + leaf + "]" * depth


def safetensors_files():
    w = struct.pack("<3d", 1, 2, 3)
    write("deep_shape.safetensors",
          safetensors('{"W":{"dtype":"F64","shape":' + nested(DEPTH) + ',"data_offsets":[0,24]}}', w))
    write("deep_offsets.safetensors",
          safetensors('{"W":{"dtype":"F64","shape":[3],"data_offsets":' + nested(DEPTH) + '}}', w))
    write("deep_dtype.safetensors",
          safetensors('{"W":{"dtype":' + nested(DEPTH, '"F64"') + ',"shape":[3],"data_offsets":[0,24]}}', w))
    write("deep_metadata.safetensors",
          safetensors('{"__metadata__":{"a":' + '{"":' * OBJECT_DEPTH + '"c"' + "}" * OBJECT_DEPTH + '},'
                      '"W":{"dtype":"F64","shape":[3],"data_offsets":[0,24]}}', w))
    write("deep_objects_as_entry.safetensors", safetensors('{"W":' + '{"":' * OBJECT_DEPTH + "1" + "}" * OBJECT_DEPTH + "}"))
    # 2^40 elements declared over 8 bytes of data: must fail on the byte count, never allocate.
    write("shape_2_pow_40.safetensors",
          safetensors('{"W":{"dtype":"F64","shape":[1048576,1048576],"data_offsets":[0,8]}}', w[:8]))
    # Rank 1000 of ones: a valid byte count, but no reader should accept a 1000-dimensional array.
    write("rank_1000.safetensors",
          safetensors('{"W":{"dtype":"F64","shape":[' + ",".join(["1"] * 1000) + '],"data_offsets":[0,8]}}',
                      w[:8]))


def npy_member(data_bytes_after_header, shape):
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': %s, }" % (shape,)
    header = header.encode("latin1")
    padding = 64 - (10 + len(header) + 1) % 64
    header = header + b" " * padding + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + data_bytes_after_header


def zip_with(name, data, compress_type):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
        info.compress_type = compress_type
        z.writestr(info, data)
    return bytearray(out.getvalue())


def patch_uncompressed_size(archive, size):
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        pos = bytes(archive).index(signature) + offset
        struct.pack_into("<I", archive, pos, size)
    return bytes(archive)


def npz_files():
    # 200 MiB of zeros in an .npy member, bzip2-compressed to a few hundred bytes (ratio ~10^6; deflate, what
    # numpy writes, cannot exceed 1032:1). With its true size recorded, the ratio check refuses it before
    # decompressing; with a small size recorded (a lie), decompression must stop just past that size.
    n = (200 << 20) // 8
    member = npy_member(bytes(8 * n), "(%d,)" % n)
    bomb = zip_with("W.npy", member, zipfile.ZIP_BZIP2)
    write("bzip2_bomb.npz", bytes(bomb))
    write("bzip2_bomb_lying_size.npz", patch_uncompressed_size(bytearray(bomb), 1000))
    # Claims 4 GiB - 2 from a 30-byte stored member.
    small = zip_with("W.npy", npy_member(b"", "(0,)"), zipfile.ZIP_STORED)
    write("stored_member_claims_4_gib.npz", patch_uncompressed_size(small, 0xFFFFFFFE))


def empty_shape_files():
    # Zero elements, so the byte count (none) is right, but dimensions of 2^40 beside the zero: a reader
    # must refuse them (no dimension above 2^34 fits in a readable file), or a command sizing a batch by the
    # first one tries to reserve 2^40 matrices.
    big = 1 << 40
    write("empty_dims_2_pow_40.npy", npy_member(b"", "(%d, 0, %d)" % (big, big)))
    write("empty_dims_2_pow_40.safetensors",
          safetensors('{"W":{"dtype":"F64","shape":[%d,0,%d],"data_offsets":[0,0]}}' % (big, big)))


def npy_f8(values, shape):
    return npy_member(struct.pack("<%dd" % len(values), *values), shape)


def write_cli(name, data):
    os.makedirs(HOSTILE_CLI, exist_ok=True)
    with open(os.path.join(HOSTILE_CLI, name), "wb") as f:
        f.write(data)


def cli_files():
    """tests/data/hostile_cli/: files every reader accepts but a command must refuse with one line naming
    the file (tests/cli/CMakeLists.txt, the block 'Hostile inputs through every option')."""
    # An empty batch of 2^34 inputs (the largest dimension a reader accepts): nothing may be sized by it.
    write_cli("empty_batch_2_pow_34.npy", npy_member(b"", "(%d, 0, 2)" % (1 << 34)))
    write_cli("empty_0x2.npy", npy_member(b"", "(0, 2)"))
    write_cli("empty_2x0.npy", npy_member(b"", "(2, 0)"))
    write_cli("empty_vector.npy", npy_member(b"", "(0,)"))
    tokens = [0.5, -0.25, 0.125, 1.0, -1.0, 0.75]
    write_cli("tokens_3x2.npy", npy_f8(tokens, "(3, 2)"))
    write_cli("weights_3_zero.npy", npy_f8([0.0, 0.0, 0.0], "(3,)"))
    write_cli("weights_3_negative.npy", npy_f8([0.5, -0.25, 0.75], "(3,)"))
    write_cli("weights_3_sum_2.npy", npy_f8([0.5, 0.5, 1.0], "(3,)"))
    write_cli("weights_3_huge.npy", npy_f8([1e308, 1e308, 1e308], "(3,)"))
    write_cli("weights_2.npy", npy_f8([0.5, 0.5], "(2,)"))


if __name__ == "__main__":
    safetensors_files()
    npz_files()
    empty_shape_files()
    cli_files()
