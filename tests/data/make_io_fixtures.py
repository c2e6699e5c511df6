#!/usr/bin/python3
"""Writes the file-format fixtures of tests/core/io (numpy only; no regatta code involved).

Made with:  /usr/bin/python3 tests/data/make_io_fixtures.py      (from the repository root; numpy 1.24)

  valid/      files written by numpy itself (np.save, np.savez, np.savez_compressed,
              np.lib.format.write_array) and safetensors files written here from the format description;
              the tests know their contents (arange values and the bit patterns listed below).
  nonfinite/  well-formed files holding NaN/Inf: parsing succeeds, require_finite must reject them.
  malformed/  hostile or broken files; every one must be rejected with a one-line InputError naming the
              file. The corpus test lists the directory, so adding a file here adds a test case.
Every file is below 10 KB. Re-running the script rewrites the same bytes.
"""
import io
import json
import os
import struct
import zipfile

import numpy as np

ROOT = os.path.dirname(os.path.abspath(__file__))
VALID = os.path.join(ROOT, "valid")
NONFINITE = os.path.join(ROOT, "nonfinite")
MALFORMED = os.path.join(ROOT, "malformed")


def write(directory, name, data):
    os.makedirs(directory, exist_ok=True)
    assert len(data) < 10 * 1024, name
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def npy_bytes(arr, version=None):
    buf = io.BytesIO()
    if version is None:
        np.save(buf, arr, allow_pickle=True)
    else:
        np.lib.format.write_array(buf, arr, version=version)
    return buf.getvalue()


def npy_with_header(header, data=b"", version=(1, 0)):
    """An .npy file with an arbitrary header text, framed and padded as numpy frames it."""
    header = header.encode("latin1")
    length_format = "<H" if version[0] == 1 else "<I"
    prefix = 6 + 2 + struct.calcsize(length_format)
    padding = 64 - (prefix + len(header) + 1) % 64
    header = header + b" " * padding + b"\n"
    return b"\x93NUMPY" + bytes(version) + struct.pack(length_format, len(header)) + header + data


def npz_bytes(compressed, **arrays):
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return fix_zip_times(buf.getvalue())


def fix_zip_times(data):
    """np.savez stamps members with the current time; rewrite the archive with a fixed date so that
    re-running the generator reproduces the same bytes."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            fixed = zipfile.ZipInfo(info.filename, date_time=(2024, 1, 1, 0, 0, 0))
            fixed.compress_type = info.compress_type
            dst.writestr(fixed, src.read(info.filename))
    return out.getvalue()


def zip_of(members, compress_type=zipfile.ZIP_STORED):
    """A zip with the given (name, bytes) members, in order (duplicates allowed)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            info.compress_type = compress_type
            z.writestr(info, data)
    return out.getvalue()


def safetensors_bytes(header, buffer, pad=True):
    """header: a dict (serialised compactly) or raw bytes; buffer: the data buffer."""
    text = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + buffer


def valid_files():
    a34 = np.arange(12, dtype=np.float64).reshape(3, 4)
    write(VALID, "arange_3x4_f64.npy", npy_bytes(a34))
    write(VALID, "arange_3x4_f32.npy", npy_bytes(a34.astype(np.float32)))
    # float16 specials: 2^-24 (smallest subnormal), 65504 (largest finite), 2^-14 (smallest normal), 1/3.
    h = np.array([[0.0, 2.0**-24, 65504.0], [-1.5, 1.0 / 3.0, 2.0**-14]], dtype=np.float16)
    write(VALID, "specials_2x3_f16.npy", npy_bytes(h))
    write(VALID, "fortran_2x3x4_f64.npy", npy_bytes(np.asfortranarray(np.arange(24.0).reshape(2, 3, 4))))
    write(VALID, "fortran_3x2_f32.npy", npy_bytes(np.asfortranarray(np.arange(6, dtype=np.float32).reshape(3, 2))))
    write(VALID, "version2_arange_5_f64.npy", npy_bytes(np.arange(5.0), version=(2, 0)))
    write(VALID, "version3_arange_5_f32.npy", npy_bytes(np.arange(5, dtype=np.float32), version=(3, 0)))
    write(VALID, "scalar_f64.npy", npy_bytes(np.array(3.5)))
    write(VALID, "empty_0x3_f64.npy", npy_bytes(np.zeros((0, 3))))
    write(VALID, "vector_5_f64.npy", npy_bytes(np.arange(5.0)))
    # A header written by a Python 2 numpy ("3L") and a hand-written header without the trailing comma.
    write(VALID, "python2_long_shape.npy",
          npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (3L,), }", np.arange(3.0).tobytes()))
    write(VALID, "compact_header.npy",
          npy_with_header('{"shape":(2,),"fortran_order":False,"descr":"<f4"}', np.arange(2, dtype="<f4").tobytes()))

    members = dict(W=np.arange(6.0).reshape(2, 3), b=np.arange(3, dtype=np.float32))
    write(VALID, "savez_stored.npz", npz_bytes(False, **members))
    write(VALID, "savez_compressed.npz", npz_bytes(True, **members))

    # safetensors: W F64 (2,3) = arange(6); b F32 (3,) = arange(3); h F16 bits; g BF16 bits.
    h_bits = np.array([0x3C00, 0x0001, 0x7BFF, 0xC000, 0x0400, 0x8000], dtype="<u2")  # 1, 2^-24, 65504, -2, 2^-14, -0
    g_bits = np.array([0x3F80, 0xC040, 0x0001], dtype="<u2")  # 1, -3, 2^-133 (float32 subnormal)
    parts = [("W", "F64", [2, 3], np.arange(6.0).astype("<f8").tobytes()),
             ("b", "F32", [3], np.arange(3, dtype="<f4").tobytes()),
             ("g", "BF16", [3], g_bits.tobytes()),
             ("h", "F16", [2, 3], h_bits.tobytes())]
    header, buffer = {"__metadata__": {"format": "pt"}}, b""
    for name, dtype, shape, data in parts:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(buffer), len(buffer) + len(data)]}
        buffer += data
    write(VALID, "mixed.safetensors", safetensors_bytes(header, buffer))
    # Integer, boolean and 8-bit float tensors beside float ones (BERT's int64 position_ids, a dataset's
    # labels): listed unconverted, the float tensors read as usual.
    w = np.arange(6.0).astype("<f8").tobytes()
    ids = np.arange(4, dtype="<i8").tobytes()
    write(VALID, "int64_beside_float.safetensors", safetensors_bytes(
        {"W": {"dtype": "F64", "shape": [2, 3], "data_offsets": [0, 48]},
         "position_ids": {"dtype": "I64", "shape": [1, 4], "data_offsets": [48, 80]},
         "mask": {"dtype": "BOOL", "shape": [2], "data_offsets": [80, 82]},
         "q": {"dtype": "F8_E4M3", "shape": [6], "data_offsets": [82, 88]}}, w + ids + b"\x01\x00" + bytes(6)))
    write(VALID, "int64_beside_float.npz", npz_bytes(
        False, images=np.arange(6.0).reshape(2, 3), labels=np.array([3, 7], dtype=np.int64),
        mask=np.array([True, False])))
    # A zero-size tensor and a 0-d tensor.
    write(VALID, "edge_shapes.safetensors", safetensors_bytes(
        {"empty": {"dtype": "F32", "shape": [0, 4], "data_offsets": [0, 0]},
         "scalar": {"dtype": "F64", "shape": [], "data_offsets": [0, 8]}}, struct.pack("<d", 2.5)))


def nonfinite_files():
    write(NONFINITE, "nan_payload.npy", npy_bytes(np.array([1.0, 2.0, np.nan, 4.0])))
    write(NONFINITE, "inf_payload.npy", npy_bytes(np.array([[1.0, 2.0], [3.0, -np.inf]], dtype=np.float32)))


def malformed_npy():
    a34 = npy_bytes(np.arange(12.0).reshape(3, 4))
    data12 = np.arange(12.0).tobytes()
    good = "{'descr': '<f8', 'fortran_order': False, 'shape': %s, }"
    files = {
        "empty.npy": b"",
        "bad_magic.npy": b"NOTNUMPY" + a34[8:],
        "truncated_magic.npy": a34[:4],
        "truncated_preamble.npy": a34[:9],
        "truncated_header.npy": a34[:40],
        "truncated_data.npy": a34[:-8],
        "header_length_beyond_file.npy": a34[:8] + struct.pack("<H", 5000) + a34[10:],
        "unsupported_version.npy": a34[:6] + bytes([4, 0]) + a34[8:],
        "shape_bigger_than_data.npy": npy_with_header(good % "(4, 4)", data12),
        "shape_smaller_than_data.npy": npy_with_header(good % "(2, 4)", data12),
        "trailing_garbage.npy": a34 + b"\x00",
        "big_endian_f8.npy": npy_bytes(np.arange(4.0).astype(">f8")),
        "big_endian_f4.npy": npy_bytes(np.arange(4.0).astype(">f4")),
        "int64.npy": npy_bytes(np.arange(4, dtype=np.int64)),
        "uint8.npy": npy_bytes(np.arange(4, dtype=np.uint8)),
        "bool.npy": npy_bytes(np.array([True, False])),
        "complex128.npy": npy_bytes(np.arange(4.0) + 1j),
        "object.npy": npy_bytes(np.array([1.0, "x", None], dtype=object)),
        "structured.npy": npy_bytes(np.zeros(2, dtype=[("a", "<f8"), ("b", "<f8")])),
        "unicode_strings.npy": npy_bytes(np.array(["ab", "cd"])),
        "float128.npy": npy_with_header("{'descr': '<f16', 'fortran_order': False, 'shape': (1,), }", bytes(16)),
        "no_byte_order_f8.npy": npy_with_header("{'descr': '|f8', 'fortran_order': False, 'shape': (1,), }", bytes(8)),
        "negative_dim.npy": npy_with_header(good % "(-1, 12)", data12),
        "shape_overflow.npy": npy_with_header(good % "(%d, %d)" % (2**62, 2**62), data12),
        "dim_beyond_64_bits.npy": npy_with_header(good % "(%d,)" % 2**70, data12),
        "shape_not_tuple.npy": npy_with_header(good % "[3, 4]", data12),
        "shape_float.npy": npy_with_header(good % "(3.0, 4)", data12),
        "shape_expression.npy": npy_with_header(good % "(2+1, 4)", data12),
        "header_garbage_after_dict.npy": npy_with_header((good % "(3, 4)") + " garbage", data12),
        "header_not_dict.npy": npy_with_header("[('descr', '<f8')]", data12),
        "header_not_python.npy": npy_with_header("descr=<f8 shape=3,4", data12),
        "header_unterminated_string.npy": npy_with_header("{'descr': '<f8, 'fortran_order': False}", data12),
        "header_missing_shape.npy": npy_with_header("{'descr': '<f8', 'fortran_order': False, }", data12),
        "header_extra_key.npy": npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (12,), 'x': 1}", data12),
        "header_duplicate_key.npy": npy_with_header("{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (12,)}", data12),
        "header_newline_in_key.npy": npy_with_header("{'de\\nscr': '<f8', 'fortran_order': False, 'shape': (12,)}", data12),
        "fortran_order_not_bool.npy": npy_with_header("{'descr': '<f8', 'fortran_order': 0, 'shape': (12,), }", data12),
        "header_deep_nesting.npy": npy_with_header("{'descr': " + "(" * 200 + ")" * 200 + "}", data12),
        "header_with_nul.npy": npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (12,), }\x00", data12),
    }
    for name, data in files.items():
        write(MALFORMED, name, data)


def malformed_npz():
    stored = npz_bytes(False, W=np.arange(6.0).reshape(2, 3))
    compressed = npz_bytes(True, W=np.arange(64.0).reshape(8, 8))
    # Flip a data byte of the stored member (its CRC no longer matches).
    at = stored.index(b"\x93NUMPY") + 128 + 3
    corrupted = stored[:at] + bytes([stored[at] ^ 0xFF]) + stored[at + 1:]
    # Damage the middle of the deflate stream of the compressed member.
    start = compressed.index(b"W.npy") + len("W.npy")
    mid = start + 40
    corrupted_deflate = compressed[:mid] + b"\xff\xff\xff\xff" + compressed[mid + 4:]
    # Claim a larger uncompressed size (local header and central directory) for a stored member.
    lying = bytearray(stored)
    member_size = len(npy_bytes(np.arange(6.0).reshape(2, 3)))
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        pos = bytes(lying).index(signature) + offset
        assert struct.unpack_from("<I", lying, pos)[0] == member_size
        struct.pack_into("<I", lying, pos, member_size + 1000)
    files = {
        "empty.npz": b"",
        "not_a_zip.npz": b"this is plain text, not a zip archive\n" * 4,
        "npy_renamed.npz": npy_bytes(np.arange(3.0)),
        "truncated.npz": stored[: len(stored) // 2],
        "truncated_tail.npz": stored[:-10],
        "corrupted_member.npz": corrupted,
        "corrupted_compressed_member.npz": corrupted_deflate,
        "lying_uncompressed_size.npz": bytes(lying),
        "non_npy_member.npz": zip_of([("W.npy", npy_bytes(np.arange(3.0))), ("readme.txt", b"hello\n")]),
        "no_arrays.npz": zip_of([]),
        "duplicate_member.npz": zip_of([("W.npy", npy_bytes(np.arange(3.0))), ("W.npy", npy_bytes(np.arange(4.0)))]),
        "member_int64_truncated.npz": zip_of([("W.npy", npy_bytes(np.arange(3.0))),
                                              ("labels.npy", npy_bytes(np.arange(3, dtype=np.int64))[:-4])]),
        "member_truncated_npy.npz": zip_of([("W.npy", npy_bytes(np.arange(3.0))[:-4])]),
        "directory_member.npz": zip_of([("W.npy", npy_bytes(np.arange(3.0))), ("dir/", b"")]),
    }
    for name, data in files.items():
        write(MALFORMED, name, data)


def malformed_safetensors():
    w = np.arange(6.0).astype("<f8").tobytes()
    entry = {"dtype": "F64", "shape": [2, 3], "data_offsets": [0, 48]}

    def one(info, buffer=w):
        return safetensors_bytes({"W": info}, buffer)

    files = {
        "empty.safetensors": b"",
        "short.safetensors": b"\x10\x00\x00\x00\x00",
        "header_length_beyond_file.safetensors": struct.pack("<Q", 4096) + b'{"W":{}}',
        "header_length_huge.safetensors": struct.pack("<Q", 2**63) + b"{}",
        "header_length_over_limit.safetensors": struct.pack("<Q", 100_000_001) + b"{}",
        "bad_json.safetensors": safetensors_bytes(b'{"W": {"dtype": "F64", "shape": [2, 3], ', w),
        "json_not_object.safetensors": safetensors_bytes(b"[1, 2, 3]", b""),
        "header_not_utf8.safetensors": safetensors_bytes(b'{"W\xff": {"dtype": "F64", "shape": [2, 3], "data_offsets": [0, 48]}}', w),
        "entry_not_object.safetensors": safetensors_bytes({"W": [1, 2]}, w),
        "missing_dtype.safetensors": one({"shape": [2, 3], "data_offsets": [0, 48]}),
        "missing_offsets.safetensors": one({"dtype": "F64", "shape": [2, 3]}),
        "offsets_not_pair.safetensors": one({"dtype": "F64", "shape": [2, 3], "data_offsets": [0, 24, 48]}),
        "shape_negative.safetensors": one({"dtype": "F64", "shape": [-2, 3], "data_offsets": [0, 48]}),
        "shape_float.safetensors": one({"dtype": "F64", "shape": [2.0, 3], "data_offsets": [0, 48]}),
        "shape_overflow.safetensors": one({"dtype": "F64", "shape": [2**62, 2**62], "data_offsets": [0, 48]}),
        "dtype_unknown.safetensors": one({"dtype": "Q7", "shape": [2, 3], "data_offsets": [0, 48]}),
        # Integer tensors are listed, not converted, but their byte counts are checked all the same.
        "dtype_i64_size_mismatch.safetensors": one({"dtype": "I64", "shape": [2, 2], "data_offsets": [0, 48]}),
        "dtype_newline_name.safetensors": safetensors_bytes({"a\nb": {"dtype": "F64", "shape": [1], "data_offsets": [0, 1]}}, b"\x01"),
        "offsets_out_of_range.safetensors": one({"dtype": "F64", "shape": [2, 3], "data_offsets": [8, 56]}),
        "offsets_reversed.safetensors": one({"dtype": "F64", "shape": [0], "data_offsets": [48, 0]}),
        "offsets_shape_mismatch.safetensors": one({"dtype": "F64", "shape": [2, 2], "data_offsets": [0, 48]}),
        "overlapping.safetensors": safetensors_bytes(
            {"A": {"dtype": "F64", "shape": [4], "data_offsets": [0, 32]},
             "B": {"dtype": "F64", "shape": [4], "data_offsets": [16, 48]}}, w),
        "hole.safetensors": safetensors_bytes(
            {"A": {"dtype": "F64", "shape": [2], "data_offsets": [0, 16]},
             "B": {"dtype": "F64", "shape": [2], "data_offsets": [32, 48]}}, w),
        "trailing_bytes.safetensors": one(entry, w + bytes(8)),
        "bad_metadata.safetensors": safetensors_bytes({"__metadata__": {"n": 3}, "W": entry}, w),
        "deep_nesting.safetensors": safetensors_bytes(b"{\"W\": " + b"[" * 5000 + b"]" * 5000 + b"}", b""),
        "duplicate_tensor.safetensors": safetensors_bytes(
            b'{"W": {"dtype": "F64", "shape": [3], "data_offsets": [0, 24]},'
            b' "W": {"dtype": "F64", "shape": [3], "data_offsets": [24, 48]}}', w),
    }
    for name, data in files.items():
        write(MALFORMED, name, data)


def malformed_json():
    write(MALFORMED, "bad_syntax.json", b'{\n  "epsilon": 0.1,\n  "steps": [1, 2,\n}\n')
    write(MALFORMED, "empty.json", b"")


if __name__ == "__main__":
    valid_files()
    nonfinite_files()
    malformed_npy()
    malformed_npz()
    malformed_safetensors()
    malformed_json()
