#pragma once
// Byte-level helpers shared by the file readers: bounds-checked little-endian loads, overflow-checked size
// arithmetic, and quoting of untrusted text for one-line error messages.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace regatta::io::detail {

/// The unsigned integer of type U stored little-endian at bytes[offset, offset + sizeof(U)).
/// Precondition (asserted by callers' bounds checks): offset + sizeof(U) <= bytes.size().
template <class U>
U load_le(std::span<const std::byte> bytes, std::size_t offset) {
  static_assert(std::is_unsigned_v<U>);
  U value = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&value, bytes.data() + offset, sizeof(U));
    return value;
  }
  for (std::size_t i = 0; i < sizeof(U); ++i)
    value |= static_cast<U>(static_cast<U>(std::to_integer<unsigned char>(bytes[offset + i])) << (8 * i));
  return value;
}

/// Appends the little-endian bytes of `value`.
template <class U>
void store_le(std::vector<std::byte>& out, U value) {
  static_assert(std::is_unsigned_v<U>);
  for (std::size_t i = 0; i < sizeof(U); ++i)
    out.push_back(static_cast<std::byte>((value >> (8 * i)) & 0xFF));
}

/// a * b, or nullopt when it does not fit in size_t.
inline std::optional<std::size_t> checked_mul(std::size_t a, std::size_t b) {
  std::size_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// The product of `dims` (1 when empty), or nullopt when it does not fit in size_t. A zero dimension makes
/// the product zero whatever the others are.
inline std::optional<std::size_t> checked_product(std::span<const std::size_t> dims) {
  for (std::size_t d : dims)
    if (d == 0) return 0;
  std::size_t r = 1;
  for (std::size_t d : dims) {
    auto next = checked_mul(r, d);
    if (!next) return std::nullopt;
    r = *next;
  }
  return r;
}

/// The largest dimension of an array the readers return: 2^34, the element count of the largest file they
/// accept (16 GiB) at one byte per element. A non-empty array with a larger dimension cannot be in such a
/// file; an empty one (another dimension zero) can, and is refused as well, since code that sizes anything
/// by one dimension (a batch of B matrices) would try to allocate it.
inline constexpr std::size_t max_array_dimension = std::size_t{1} << 34;

/// The first dimension of `dims` above max_array_dimension, or nullopt.
inline std::optional<std::size_t> oversized_dimension(std::span<const std::size_t> dims) {
  for (std::size_t d : dims)
    if (d > max_array_dimension) return d;
  return std::nullopt;
}

/// Length of the well-formed UTF-8 sequence starting at text[i] (2 to 4 bytes), or 0 when there is none
/// (stray continuation byte, overlong form, surrogate, beyond U+10FFFF, or cut short).
inline std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  const std::size_t n = lead >= 0xC2 && lead <= 0xDF   ? 2
                        : lead >= 0xE0 && lead <= 0xEF ? 3
                        : lead >= 0xF0 && lead <= 0xF4 ? 4
                                                       : 0;
  if (n == 0 || i + n > text.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  const unsigned char second = byte(i + 1);
  if ((lead == 0xE0 && second < 0xA0) || (lead == 0xED && second > 0x9F) || (lead == 0xF0 && second < 0x90) ||
      (lead == 0xF4 && second > 0x8F))
    return 0;
  return n;
}

/// `text` with control characters, DEL and bytes that are not well-formed UTF-8 written as \xNN, so that
/// untrusted names and parser excerpts keep an error message on one line and valid text. Well-formed
/// non-ASCII characters are kept. At most `max_chars` input bytes are kept; longer text ends with "...".
inline std::string printable(std::string_view text, std::size_t max_chars = 200) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    if (i >= max_chars) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
    } else if (const std::size_t n = c >= 0x80 ? utf8_sequence_length(text, i) : 0; n > 0) {
      out.append(text.substr(i, n));
      i += n;
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 0xF];
      ++i;
    }
  }
  return out;
}

/// The bytes as text (no copy of the underlying data's meaning: each byte becomes one char).
inline std::string_view as_chars(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace regatta::io::detail
