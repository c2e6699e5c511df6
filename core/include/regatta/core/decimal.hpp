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
/// An estimate, rounded to nearest: printf's %.<significant>g ("0.0123", "1.5e+20"; "inf", "nan").
inline std::string nearest_decimal(double x, int significant = 6) {
  return to_decimal(x, significant, Rounding::nearest);
}
/// The shortest text (std::to_chars: the fewest significant digits, then the fewest characters) that reads
/// back (round to nearest) as exactly x ("0.1", "1e-300", "5e-324"); "inf", "-inf", "nan" for the non-finite
/// values. For data files, where every double must survive the round trip.
std::string shortest_decimal(double x);
/// An interval's endpoints, outward: "[lower, upper]".
std::string interval_decimal(const interval& x, int significant = 10);

}  // namespace regatta
