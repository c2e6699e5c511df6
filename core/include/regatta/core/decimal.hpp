#pragma once
// Decimal text of binary numbers with a stated rounding direction: the one place where regatta turns a
// number into digits for people (tables, JSON strings, CSV, plot labels).
//
// A certified lower end must be printed rounded DOWN and a certified upper end rounded UP: the printed
// decimal is then itself a valid bound (round-to-nearest could print a lower end above the exact value).
// Estimates are printed rounded to nearest. The conversion is exact: the binary value is converted by MPFR
// with the requested direction (mpfr_snprintf with an explicit rounding mode), never through a
// round-to-nearest intermediate.
#include <string>

#include <regatta/core/scalar.hpp>

namespace regatta {

enum class Rounding { nearest, down, up };

/// `x` with `significant` significant digits (1–40) in the style of printf's %g ("0.0123", "1.5e+20"),
/// rounded in direction `rounding`; "inf", "-inf" and "nan" for the non-finite values. For `down` the text
/// denotes a number <= x, for `up` one >= x.
std::string to_decimal(double x, int significant, Rounding rounding);
std::string to_decimal(const mpfr& x, int significant, Rounding rounding);

/// The certified-bound shorthands: a lower end rounded down, an upper end rounded up.
inline std::string lower_decimal(double x, int significant = 10) {
  return to_decimal(x, significant, Rounding::down);
}
inline std::string upper_decimal(double x, int significant = 10) {
  return to_decimal(x, significant, Rounding::up);
}
/// An interval's endpoints, outward: "[lower, upper]".
std::string interval_decimal(const interval& x, int significant = 10);

}  // namespace regatta
