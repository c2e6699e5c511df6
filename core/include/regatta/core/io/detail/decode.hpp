#pragma once
// Little-endian element decoding shared by the .npy and safetensors readers.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <regatta/core/io/array.hpp>
#include <regatta/core/io/detail/bytes.hpp>
#include <regatta/core/io/detail/half.hpp>

namespace regatta::io::detail {

/// The `count` elements of `dtype` stored little-endian at the start of `bytes`, converted to double exactly.
/// Precondition: count * dtype_size(dtype) <= bytes.size() (callers check it against the file first).
inline std::vector<double> decode_le(std::span<const std::byte> bytes, DType dtype, std::size_t count) {
  std::vector<double> out(count);
  switch (dtype) {
    case DType::f64:
      for (std::size_t i = 0; i < count; ++i)
        out[i] = std::bit_cast<double>(load_le<std::uint64_t>(bytes, 8 * i));
      break;
    case DType::f32:
      for (std::size_t i = 0; i < count; ++i)
        out[i] = std::bit_cast<float>(load_le<std::uint32_t>(bytes, 4 * i));
      break;
    case DType::f16:
      for (std::size_t i = 0; i < count; ++i) out[i] = half_to_double(load_le<std::uint16_t>(bytes, 2 * i));
      break;
    case DType::bf16:
      for (std::size_t i = 0; i < count; ++i)
        out[i] = bfloat16_to_double(load_le<std::uint16_t>(bytes, 2 * i));
      break;
  }
  return out;
}

/// Appends `values` as little-endian float64 (f64) or float32 rounded to nearest (f32).
/// Precondition: dtype is f32 or f64.
inline void encode_le(std::span<const double> values, DType dtype, std::vector<std::byte>& out) {
  out.reserve(out.size() + values.size() * (dtype == DType::f64 ? 8 : 4));
  for (double v : values) {
    if (dtype == DType::f64)
      store_le(out, std::bit_cast<std::uint64_t>(v));
    else
      store_le(out, std::bit_cast<std::uint32_t>(static_cast<float>(v)));
  }
}

}  // namespace regatta::io::detail
