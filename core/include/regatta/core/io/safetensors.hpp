#pragma once
// safetensors files (huggingface/safetensors): an 8-byte little-endian header length N, N bytes of UTF-8
// JSON mapping tensor names to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the
// data buffer that follows the header), and the data buffer. The optional "__metadata__" entry (a
// string-to-string map) is checked and skipped.
//
// Reading converts F64, F32, F16 and BF16 tensors to double exactly; BOOL, U8-U64, I8-I64, F8_E4M3 and
// F8_E5M2 tensors are listed unconverted (Array::unconverted_dtype, no data). As in the reference
// implementation, the tensors must tile the data buffer exactly: no overlaps and no unaccounted bytes. No
// dimension may exceed 2^34 (detail::max_array_dimension), which only an empty tensor could have.
// Anything else throws InputError whose one-line message names the file, the tensor where there is one,
// and the problem.
#include <cstddef>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <regatta/core/io/array.hpp>

namespace regatta::io {

/// Header lengths above this (100 MB, the reference implementation's limit) are rejected.
inline constexpr std::size_t safetensors_max_header_bytes = 100'000'000;
/// Headers nesting arrays or objects deeper than this are rejected while parsing (a valid header nests 3
/// levels: the header object, a tensor's object, its shape), so hostile nesting can exhaust neither the
/// stack nor memory.
inline constexpr std::size_t safetensors_max_header_depth = 16;
/// Tensors of more dimensions are rejected (numpy's limit, NPY_MAXDIMS).
inline constexpr std::size_t safetensors_max_rank = 64;
/// Headers listing more tensors are rejected while parsing (the largest published checkpoints hold a few
/// thousand tensors per file).
inline constexpr std::size_t safetensors_max_tensors = 65'536;

/// Parses the complete contents of a safetensors file; Array::source is "source:tensor name".
std::map<std::string, Array> parse_safetensors(std::span<const std::byte> bytes, std::string_view source);
/// read_file_bytes + parse_safetensors, with the path as the source.
std::map<std::string, Array> read_safetensors(const std::filesystem::path& path);

/// A safetensors file holding every array, stored as `as` (F32 or F64; float32 rounds to nearest), tensors
/// laid out in name order, the header padded with spaces to a multiple of 8 bytes. Throws InputError for
/// `as` = f16 or bf16 or a tensor named "__metadata__".
std::vector<std::byte> encode_safetensors(const std::map<std::string, Array>& arrays, DType as = DType::f64);
/// encode_safetensors written with write_file_atomic.
void write_safetensors(const std::filesystem::path& path, const std::map<std::string, Array>& arrays,
                       DType as = DType::f64);

}  // namespace regatta::io
