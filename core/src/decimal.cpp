#include <regatta/core/decimal.hpp>

#include <mpfr.h>
#include <algorithm>
#include <charconv>
#include <cmath>

#include <regatta/core/scalar_traits.hpp>

namespace regatta {

namespace {

mpfr_rnd_t mode(Rounding rounding) {
  switch (rounding) {
    case Rounding::down:
      return MPFR_RNDD;
    case Rounding::up:
      return MPFR_RNDU;
    default:
      return MPFR_RNDN;
  }
}

std::string print(mpfr_srcptr x, int significant, Rounding rounding) {
  if (mpfr_nan_p(x)) return "nan";
  if (mpfr_inf_p(x)) return mpfr_signbit(x) ? "-inf" : "inf";
  significant = std::clamp(significant, 1, 40);
  char buffer[128];  // 40 digits, sign, point, exponent of a 64-bit exponent range: far below 128
  mpfr_snprintf(buffer, sizeof buffer, "%.*R*g", significant, mode(rounding), x);
  return buffer;
}

}  // namespace

std::string to_decimal(double x, int significant, Rounding rounding) {
  mpfr_t t;
  mpfr_init2(t, 53);
  mpfr_set_d(t, x, MPFR_RNDN);  // exact: a binary64 number has 53 bits
  std::string text = print(t, significant, rounding);
  mpfr_clear(t);
  return text;
}

std::string to_decimal(const mpfr& x, int significant, Rounding rounding) {
  return print(x.backend().data(), significant, rounding);
}

std::string shortest_decimal(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buffer[64];  // 17 significant digits, sign, point and exponent
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, x);
  return std::string(buffer, result.ptr);
}

std::string interval_decimal(const interval& x, int significant) {
  return "[" + to_decimal(lower_bound(x), significant, Rounding::down) + ", " +
         to_decimal(upper_bound(x), significant, Rounding::up) + "]";
}

}  // namespace regatta
