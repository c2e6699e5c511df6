#pragma once
// Run-time precision of the multiprecision scalars.
//
// MPFR and MPFI numbers created after a call to set_working_precision(bits) carry `bits` bits of mantissa.
// Boost.Multiprecision counts precision in decimal digits; these helpers translate and always set both the
// mpfr and the interval type so that mixed computations never silently drop to a lower precision.
#include <regatta/core/scalar.hpp>

namespace regatta {

/// Working precision of newly created `mpfr` / `interval` values, in bits (at least the requested value).
unsigned working_precision_bits();

/// Sets the working precision of `mpfr` and `interval` to at least `bits` bits (bits >= 2).
/// Throws InputError (argument "precision") for bits < 2 or bits > max_precision_bits.
void set_working_precision(unsigned bits);

/// Largest precision regatta accepts from a user: 2^20 bits (~315 000 decimal digits).
inline constexpr unsigned max_precision_bits = 1u << 20;

/// Boost.Multiprecision (1.74) gives the result of an operation the precision of its operands, not the
/// working precision. at_working_precision(x) returns x carried at the *current* working precision
/// (exactly when x has no more bits, else rounded to nearest), so that later arithmetic runs at it.
mpfr at_working_precision(const mpfr& x);
interval at_working_precision(const interval& x);  // widened outward if x has more bits

/// RAII: sets the working precision for the lifetime of the guard and restores the previous one.
class PrecisionGuard {
 public:
  explicit PrecisionGuard(unsigned bits);
  ~PrecisionGuard();
  PrecisionGuard(const PrecisionGuard&) = delete;
  PrecisionGuard& operator=(const PrecisionGuard&) = delete;

 private:
  unsigned mpfr_digits10_;
  unsigned interval_digits10_;
};

}  // namespace regatta
