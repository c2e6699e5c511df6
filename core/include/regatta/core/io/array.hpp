#pragma once
// The in-memory form of an array read from a file (.npy, .npz, .safetensors): a shape, the values converted
// to double, and where they came from (for error messages).
//
// Every supported file dtype (float16, bfloat16, float32, float64) converts to double exactly, so `data`
// holds precisely the values stored in the file; `source_dtype` records the storage precision (the CLI uses
// it to pick tolerances, e.g. float32 weights carry 2^-24 relative rounding each).
//
// Containers (.npz, .safetensors) may also hold integer, boolean or 8-bit float tensors (BERT checkpoints
// carry int64 position_ids, datasets int64 labels). Those are listed, not converted: the Array has its
// shape and `unconverted_dtype`, no data, and using it as a matrix or vector throws InputError naming it.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <regatta/core/eigen.hpp>

namespace regatta::io {

/// The floating-point storage types the readers accept.
enum class DType { f16, bf16, f32, f64 };

/// "float16", "bfloat16", "float32", "float64".
std::string_view dtype_name(DType dtype);
/// Bytes per element: 2, 2, 4, 8.
std::size_t dtype_size(DType dtype);

struct Array {
  /// Dimensions, outermost first; empty for a 0-d (scalar) array. A zero dimension makes an empty array.
  std::vector<std::size_t> shape;
  /// The values in row-major (C) order; data.size() equals the product of `shape` (1 for a 0-d array),
  /// except for an unconverted array, whose data is empty.
  std::vector<double> data;
  DType source_dtype = DType::f64;
  /// Names the origin in error messages: "weights.npy", "model.npz:W", "model.safetensors:layer.0.W".
  std::string source;
  /// Empty for an array of one of the DType float types. Otherwise the file's element type, numpy's name
  /// ("int64", "uint8", "bool", "float8_e4m3fn"): the values were not converted and `data` is empty.
  std::string unconverted_dtype;

  /// Whether the values were converted (unconverted_dtype is empty).
  bool converted() const { return unconverted_dtype.empty(); }

  /// Number of elements: the product of `shape` (1 for a 0-d array).
  std::size_t size() const;
  /// A 2-D array as rows x cols; a 1-D array of length n as an n x 1 column. Any other rank, or an
  /// unconverted array, throws InputError naming `source`.
  Matrix<double> matrix() const;
  /// A 1-D array, or a 2-D array with one row or one column, as a vector. Anything else throws InputError.
  Vector<double> vector() const;
};

/// A 2-D Array (shape {rows, cols}, source_dtype f64) holding the entries of `m`.
Array from_matrix(const Matrix<double>& m, std::string source = "matrix");

/// Throws InputError naming `a.source` and its type unless `a` was converted (an integer, boolean or 8-bit
/// float tensor listed by a container reader cannot be used as data).
void require_converted(const Array& a);

/// Throws InputError naming `a.source`, the first offending flat (C-order) index and its multi-index, and
/// whether the entry is NaN or infinite, unless every entry is finite. Calls require_converted first.
void require_finite(const Array& a);

/// Python's repr of a shape tuple: "()", "(5,)", "(3, 4)". Used in messages and in .npy headers.
std::string shape_repr(const std::vector<std::size_t>& shape);

}  // namespace regatta::io
