#pragma once
// regatta::scalar_traits<S>: the project-owned contract of a scalar type.
//
// Generic code asks this trait, never std::numeric_limits directly: numeric_limits of a variable-precision
// MPFR number reports INT_MAX digits, and an interval has no single "value". For every S:
//
//   is_interval       true when S encloses a set of reals (results are certified enclosures)
//   is_multiprecision true for mpfr and interval (precision set at run time, see precision.hpp); interval64
//                     is an interval type with binary64 endpoints (fixed 53 bits); its traits are in
//                     interval64.hpp, next to the type
//   name()            "float", "double", "mpfr", "interval", "interval64"
//   digits()          mantissa bits of a value created now (the working precision for mpfr / interval)
//   epsilon()         2^(1 - digits()): the distance from 1 to the next representable number
//   lower(x), upper(x) the endpoints of x as S (for a point type both are x itself)
//   midpoint(x)       a point value inside x (x itself for a point type)
//   pivot(x)          a *point* value of S that is >= every element of x; used as the shift of a stable
//                     log-sum-exp, where any shift gives the exact identity and only a point keeps
//                     intervals narrow
//   to_double(x)      nearest double of midpoint(x)
//   from_double(v)    exact conversion (every binary64 number is exact in mpfr / interval at >= 53 bits;
//                     to float it rounds to nearest)
//   is_finite(x), is_nan(x)
//   width(x)          upper - lower, rounded up (0 for a point type)
#include <cmath>
#include <limits>
#include <string_view>
#include <type_traits>

#include <regatta/core/scalar.hpp>

namespace regatta {

template <class S>
struct scalar_traits;

template <class S>
requires std::is_floating_point_v<S>
struct scalar_traits<S> {
  static constexpr bool is_interval = false;
  static constexpr bool is_multiprecision = false;
  static constexpr std::string_view name() { return std::is_same_v<S, float> ? "float" : "double"; }
  static int digits() { return std::numeric_limits<S>::digits; }
  static S epsilon() { return std::numeric_limits<S>::epsilon(); }
  static S infinity() { return std::numeric_limits<S>::infinity(); }
  static S quiet_nan() { return std::numeric_limits<S>::quiet_NaN(); }
  static S lower(S x) { return x; }
  static S upper(S x) { return x; }
  static S midpoint(S x) { return x; }
  static S pivot(S x) { return x; }
  static double to_double(S x) { return static_cast<double>(x); }
  static S from_double(double v) { return static_cast<S>(v); }
  static bool is_finite(S x) { return std::isfinite(x); }
  static bool is_nan(S x) { return std::isnan(x); }
  static S width(S) { return S(0); }
};

template <>
struct scalar_traits<mpfr> {
  static constexpr bool is_interval = false;
  static constexpr bool is_multiprecision = true;
  static constexpr std::string_view name() { return "mpfr"; }
  static int digits();
  static mpfr epsilon();
  static mpfr infinity();
  static mpfr quiet_nan();
  static const mpfr& lower(const mpfr& x) { return x; }
  static const mpfr& upper(const mpfr& x) { return x; }
  static const mpfr& midpoint(const mpfr& x) { return x; }
  static const mpfr& pivot(const mpfr& x) { return x; }
  static double to_double(const mpfr& x);
  static mpfr from_double(double v) { return mpfr(v); }
  static bool is_finite(const mpfr& x);
  static bool is_nan(const mpfr& x);
  static mpfr width(const mpfr&) { return mpfr(0); }
};

template <>
struct scalar_traits<interval> {
  static constexpr bool is_interval = true;
  static constexpr bool is_multiprecision = true;
  static constexpr std::string_view name() { return "interval"; }
  static int digits();
  static interval epsilon();
  static interval infinity();
  static interval quiet_nan();
  static interval lower(const interval& x);
  static interval upper(const interval& x);
  static interval midpoint(const interval& x);
  /// The upper endpoint as a degenerate interval [u, u].
  static interval pivot(const interval& x) { return upper(x); }
  static double to_double(const interval& x);
  static interval from_double(double v) { return interval(v); }
  /// True when both endpoints are finite.
  static bool is_finite(const interval& x);
  /// True when either endpoint is NaN.
  static bool is_nan(const interval& x);
  static interval width(const interval& x);
};

/// Machine epsilon of S at the current working precision.
template <class S>
S eps() {
  return scalar_traits<S>::epsilon();
}

// ---- interval endpoint helpers (return MPFR numbers, exact copies of the endpoints) ----
mpfr lower_bound(const interval& x);
mpfr upper_bound(const interval& x);
/// Degenerate interval [x, x] (exact).
interval make_point(const mpfr& x);
/// Interval [lo, hi] (exact endpoints); asserts lo <= hi.
interval make_interval(const mpfr& lo, const mpfr& hi);
/// Smallest interval containing both arguments.
interval hull(const interval& a, const interval& b);
/// Certainly-less predicates: true iff every element of a is < (<=) every element of b.
bool certainly_less(const interval& a, const interval& b);
bool certainly_less_equal(const interval& a, const interval& b);
/// True when the interval contains the point v.
bool contains(const interval& x, const mpfr& v);

}  // namespace regatta
