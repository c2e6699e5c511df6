#pragma once
// NumPy .npy files (format versions 1.0, 2.0, 3.0; numpy/lib/format.py and NEP 1).
//
// Reading accepts little-endian (or native, '=') float16, float32 and float64 data in C or Fortran order and
// of any rank, including 0-d arrays and zero-length dimensions (an empty array whose other dimensions exceed
// 2^34 is refused: detail::max_array_dimension); Fortran-order data is transposed to C order.
// The header dict is parsed as a strict Python literal with exactly the keys 'descr', 'fortran_order' and
// 'shape'. Everything else (bad magic, truncated header or data, trailing bytes, big-endian, integer,
// complex, object or structured dtypes, negative or overflowing dimensions) throws InputError whose one-line
// message names the source and the problem. The parser never reads outside `bytes` and allocates only after
// checking the shape against the bytes actually present.
#include <cstddef>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/core/io/array.hpp>

namespace regatta::io {

/// What parse_npy does with an integer or boolean array: reject it (a lone .npy file is the array asked
/// for), or return it unconverted (Array::unconverted_dtype, no data) once its size is checked, as the .npz
/// reader does so that an archive's other arrays stay readable; or (`integers`) convert an integer array
/// (int8–int64, uint8–uint64, either byte order) to double exactly — InputError naming the first entry above
/// 2^53 in magnitude — while booleans stay listed (class labels, indices).
enum class NonFloat { reject, list, integers };

/// Parses the complete contents of an .npy file. `source` names it in messages and becomes Array::source.
Array parse_npy(std::span<const std::byte> bytes, std::string_view source,
                NonFloat non_float = NonFloat::reject);
/// read_file_bytes + parse_npy, with the path as the source.
Array read_npy(const std::filesystem::path& path);

/// The bytes numpy's np.save writes for `a` stored as `as` (float32 or float64 only; float32 rounds to
/// nearest): format 1.0, little-endian, C order, the header padded with spaces and a final newline so the
/// data starts at a multiple of 64 bytes. For a float32/float64 array this is byte-identical to np.save.
/// Throws InputError for `as` = f16 or bf16.
std::vector<std::byte> encode_npy(const Array& a, DType as = DType::f64);
/// encode_npy written with write_file_atomic.
void write_npy(const std::filesystem::path& path, const Array& a, DType as = DType::f64);
/// A matrix written as a 2-D array.
void write_npy(const std::filesystem::path& path, const Matrix<double>& m, DType as = DType::f64);

}  // namespace regatta::io
