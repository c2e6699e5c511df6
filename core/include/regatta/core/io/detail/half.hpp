#pragma once
// Exact conversion of the 16-bit floating-point formats to double (every value is representable).
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace regatta::io::detail {

/// IEEE 754 binary16: 1 sign bit, 5 exponent bits (bias 15), 10 fraction bits. Subnormals are
/// fraction * 2^-24; exponent 31 is infinity (fraction 0) or NaN (quiet NaN of the same sign).
inline double half_to_double(std::uint16_t bits) {
  const bool negative = (bits & 0x8000u) != 0;
  const unsigned exponent = (bits >> 10) & 0x1Fu;
  const unsigned fraction = bits & 0x3FFu;
  double magnitude;
  if (exponent == 0)
    magnitude = std::ldexp(static_cast<double>(fraction), -24);
  else if (exponent == 31)
    magnitude =
        fraction == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  else
    magnitude = std::ldexp(static_cast<double>(fraction | 0x400u), static_cast<int>(exponent) - 25);
  return negative ? -magnitude : magnitude;
}

/// bfloat16: the upper 16 bits of an IEEE binary32 (same exponent range, 7 fraction bits).
inline double bfloat16_to_double(std::uint16_t bits) {
  return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16));
}

}  // namespace regatta::io::detail
