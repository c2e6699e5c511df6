#pragma once
// regatta::interval64: a closed interval [lo, hi] with binary64 endpoints, rounded outward — the fast
// certified scalar (docs/numerics.md, "interval64", says exactly what makes each operation sound).
//
// Arithmetic runs in the default rounding mode (round to nearest, never switched) and corrects each
// endpoint afterwards:
//   + −     the rounding error of the nearest sum is recovered exactly (TwoSum, always exact in binary64
//           without overflow); the endpoint moves one ulp outward only when the error points outward.
//   × ÷ √   the error term of the nearest product / quotient / root is recovered exactly with one fma when
//           the operands lie in [2^-900, 2^900] (where fma's remainders are exact, no underflow), and the
//           endpoint moves one ulp outward when it points outward; outside that range, or without a
//           hardware fma, the endpoint moves one ulp outward unconditionally. Either way the result
//           contains the exact value because IEEE 754 rounds + − × ÷ √ correctly: the nearest result is
//           within half an ulp of the exact one, so its neighbour on the outward side is beyond it.
//   exp, log, log1p, expm1, pow   endpoints from MPFR (correctly rounded in the requested direction) at
//           53 bits, converted to binary64 in the same direction (core/src/interval64.cpp).
// Zeros: x · 0 = 0 exactly for every x, including ±∞ (the product of the sets, not IEEE's NaN). Overflow:
// a finite exact endpoint beyond the binary64 range becomes ±∞ on the outward side and ±DBL_MAX on the
// inward one. NaN (from NaN inputs, ∞ − ∞, 0/0 or a value outside a function's domain) is [NaN, NaN], and
// propagates; scalar_traits<interval64>::is_nan reports it.
//
// Comparisons follow Boost's MPFI number so that generic code behaves identically for both interval types:
// a < b iff every point of a is below every point of b, a == b iff the endpoints are equal, and an ambiguous
// comparison (overlapping, different intervals) throws std::domain_error.
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <iosfwd>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <type_traits>

#include <Eigen/Core>
#include <boost/multiprecision/mpfi.hpp>
#include <boost/multiprecision/mpfr.hpp>

#if defined(__FAST_MATH__)
#error "regatta::interval64 needs IEEE 754 arithmetic: do not compile with -ffast-math"
#endif
static_assert(std::numeric_limits<double>::is_iec559, "interval64 needs IEEE 754 binary64");
static_assert(FLT_EVAL_METHOD == 0, "interval64 needs double expressions evaluated in binary64 (no x87)");

namespace regatta {

namespace detail::i64 {

inline constexpr double inf = std::numeric_limits<double>::infinity();
inline constexpr double max_finite = std::numeric_limits<double>::max();
// Operands and results in [tiny, huge] have exact fma remainders for × ÷ √ (no underflow of the error term).
inline constexpr double tiny = 0x1p-900;
inline constexpr double huge = 0x1p900;
// FP_FAST_FMA comes from <cmath> when the compiler says so (GCC does for an FMA target; clang 14 does not,
// though it emits the instruction): __FMA__, the target's own macro, covers both.
#if defined(FP_FAST_FMA) || defined(__FMA__)
inline constexpr bool tight = true;  // a hardware fma: the error terms are cheap and exact
#else
inline constexpr bool tight = false;  // no hardware fma: every inexact-looking endpoint widens by one ulp
#endif

/// The least double > x (x itself for +∞ and NaN).
inline double next_up(double x) {
  if (!(x < inf)) return x;  // +∞, NaN
  if (x == 0) return std::numeric_limits<double>::denorm_min();
  const auto bits = std::bit_cast<std::uint64_t>(x);
  return std::bit_cast<double>(x > 0 ? bits + 1 : bits - 1);
}
/// The greatest double < x.
inline double next_down(double x) { return -next_up(-x); }

/// One ulp outward from the nearest result r of an operation whose exact result is nonzero with the sign
/// given by `positive`: the bound never crosses zero to the wrong side (0 is a valid bound there, and keeps
/// underflowed results on their side).
template <bool up>
inline double outward(double r, bool positive) {
  if constexpr (up) {
    const double u = next_up(r);
    return (!positive && u > 0) ? 0.0 : u;
  } else {
    const double d = next_down(r);
    return (positive && d < 0) ? 0.0 : d;
  }
}

inline bool in_tight_range(double x) {
  const double a = std::fabs(x);
  return a >= tiny && a <= huge;
}

// ---- endpoint operations rounded down (d) and up (u); inputs are not NaN ----

/// a + b rounded toward −∞ (up = false) or +∞ (up = true).
template <bool up>
inline double add(double a, double b) {
  const double s = a + b;
  if (std::isinf(s)) {
    if (std::isinf(a) || std::isinf(b)) return s;                           // exact (or NaN for ∞ − ∞)
    return up ? (s > 0 ? inf : -max_finite) : (s > 0 ? max_finite : -inf);  // overflow of a finite sum
  }
  const double bb = s - a;
  const double e = (a - (s - bb)) + (b - bb);                    // TwoSum: a + b = s + e exactly
  if (!std::isfinite(e)) return up ? next_up(s) : next_down(s);  // defensive: never trust a non-finite e
  if constexpr (up)
    return e > 0 ? next_up(s) : s;
  else
    return e < 0 ? next_down(s) : s;
}

template <bool up>
inline double mul(double a, double b) {
  if (a == 0 || b == 0) return 0;  // the product of the sets: 0 · x = 0, also for x = ±∞
  const double p = a * b;
  if (std::isinf(p)) {
    if (std::isinf(a) || std::isinf(b)) return p;
    return up ? (p > 0 ? inf : -max_finite) : (p > 0 ? max_finite : -inf);
  }
  if (tight && in_tight_range(a) && in_tight_range(b) && in_tight_range(p)) {
    const double e = std::fma(a, b, -p);  // a · b = p + e exactly
    if constexpr (up)
      return e > 0 ? next_up(p) : p;
    else
      return e < 0 ? next_down(p) : p;
  }
  return outward<up>(p, (a > 0) == (b > 0));
}

// ---- the branch-free product of common operands (interval64's operator*) ----

/// Whether x is 0 or has magnitude in [2^-450, 2^450]: the product of two such numbers is 0 (exactly) or
/// has magnitude in [2^-900, 2^900] = [tiny, huge], so it neither overflows nor underflows and fma recovers
/// its rounding error exactly. The range check costs a few vector-friendly comparisons, no branch per case.
inline bool plain_factor(double x) {
  const double a = std::fabs(x);
  return a == 0 || (a >= 0x1p-450 && a <= 0x1p450);
}

/// x·y rounded toward −∞ (up = false) or +∞ (up = true), for plain factors (plain_factor): the nearest
/// product p and its exact error e = x·y − p (one fma); p moves one ulp outward, by a step of its bit
/// pattern, only when e points outward. Then e ≠ 0, so the exact product is nonzero, at least 2^-900 in
/// magnitude, and so is p; p ± 1 ulp stays finite and on p's side of zero. The same result as mul<up>,
/// computed with selects instead of branches.
template <bool up>
inline double plain_mul(double x, double y) {
  const double p = x * y;
  const double e = std::fma(x, y, -p);
  const auto bits = std::bit_cast<std::int64_t>(p);
  // Toward +∞: a positive p's pattern grows, a negative one's shrinks; toward −∞ the opposite.
  const std::int64_t step = (p > 0) == up ? 1 : -1;
  const double moved = std::bit_cast<double>(bits + step);
  if constexpr (up)
    return e > 0 ? moved : p;
  else
    return e < 0 ? moved : p;
}

inline double min2(double a, double b) { return b < a ? b : a; }  // no NaN here: a plain minsd
inline double max2(double a, double b) { return a < b ? b : a; }

template <bool up>
inline double div(double a, double b) {  // b ≠ 0
  if (a == 0) return 0;
  const double q = a / b;
  if (std::isinf(q)) {
    if (std::isinf(a)) return q;
    return up ? (q > 0 ? inf : -max_finite) : (q > 0 ? max_finite : -inf);
  }
  if (std::isinf(b)) return q;  // a finite: the quotient tends to ±0, an exact bound of the closure
  if (tight && in_tight_range(a) && in_tight_range(b) && in_tight_range(q)) {
    const double r = std::fma(-q, b, a);  // a = q · b + r exactly, so a / b − q = r / b
    const bool above = r != 0 && ((r > 0) == (b > 0));
    const bool below = r != 0 && !above;
    if constexpr (up)
      return above ? next_up(q) : q;
    else
      return below ? next_down(q) : q;
  }
  return outward<up>(q, (a > 0) == (b > 0));
}

template <bool up>
inline double sqrt(double a) {  // a ≥ 0
  if (a == 0 || std::isinf(a)) return a == 0 ? 0 : a;
  const double s = std::sqrt(a);
  if (tight && in_tight_range(a)) {
    const double r = std::fma(-s, s, a);  // a − s² exactly
    if constexpr (up)
      return r > 0 ? next_up(s) : s;
    else
      return r < 0 ? next_down(s) : s;
  }
  return outward<up>(s, true);
}

}  // namespace detail::i64

// The type and its functions live in regatta::fast so that unqualified calls inside namespace regatta on
// built-in types (exp(x) for a double x without `using std::exp`) never find them: they are reached by ADL
// from interval64 arguments only. regatta::interval64 is the name everything uses.
namespace fast {

class interval64 {
 public:
  constexpr interval64() = default;
  /// The point [v, v] (exact); NaN gives the NaN interval.
  constexpr interval64(double v) : lo_(v), hi_(v) {}  // NOLINT: implicit, as for the other scalars
  constexpr interval64(float v) : interval64(static_cast<double>(v)) {}
  constexpr interval64(int v) : interval64(static_cast<double>(v)) {}  // exact
  constexpr interval64(unsigned v) : interval64(static_cast<double>(v)) {}
  /// A 64-bit integer, enclosed (exact up to 2^53 in magnitude, otherwise its two neighbouring doubles).
  interval64(long v) : interval64(from_integer(static_cast<long long>(v))) {}
  interval64(long long v) : interval64(from_integer(v)) {}
  interval64(unsigned long v) : interval64(from_integer(static_cast<unsigned long long>(v))) {}
  interval64(unsigned long long v) : interval64(from_integer(v)) {}

  /// The enclosure of an MPFR number or an MPFI interval (regatta::mpfr, regatta::interval of scalar.hpp):
  /// endpoints rounded outward to binary64. Implicit because it never loses the guarantee, so generic code
  /// that builds an MPFI enclosure (make_interval of MPFR endpoints) returns it as an interval64 directly.
  interval64(const boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<0>,
                                                 boost::multiprecision::et_off>& x);
  interval64(const boost::multiprecision::number<boost::multiprecision::mpfi_float_backend<0>,
                                                 boost::multiprecision::et_off>& x);

  /// [lo, hi] as given (lo ≤ hi is the caller's promise; NaN in either gives the NaN interval).
  static constexpr interval64 hull(double lo, double hi) {
    interval64 r;
    if (lo != lo || hi != hi) {
      r.lo_ = r.hi_ = std::numeric_limits<double>::quiet_NaN();
    } else {
      r.lo_ = lo;
      r.hi_ = hi;
    }
    return r;
  }
  static constexpr interval64 nan() { return hull(std::numeric_limits<double>::quiet_NaN(), 0); }

  constexpr double lower() const { return lo_; }
  constexpr double upper() const { return hi_; }
  constexpr bool is_nan() const { return lo_ != lo_ || hi_ != hi_; }

  interval64& operator+=(const interval64& o) { return *this = *this + o; }
  interval64& operator-=(const interval64& o) { return *this = *this - o; }
  interval64& operator*=(const interval64& o) { return *this = *this * o; }
  interval64& operator/=(const interval64& o) { return *this = *this / o; }

  friend constexpr interval64 operator-(const interval64& a) { return hull(-a.hi_, -a.lo_); }
  friend constexpr interval64 operator+(const interval64& a) { return a; }
  friend interval64 operator+(const interval64& a, const interval64& b) {
    if (a.is_nan() || b.is_nan()) return nan();
    return hull(detail::i64::add<false>(a.lo_, b.lo_), detail::i64::add<true>(a.hi_, b.hi_));
  }
  friend interval64 operator-(const interval64& a, const interval64& b) {
    if (a.is_nan() || b.is_nan()) return nan();
    return hull(detail::i64::add<false>(a.lo_, -b.hi_), detail::i64::add<true>(a.hi_, -b.lo_));
  }
  /// With a hardware fma and four plain endpoints (detail::i64::plain_factor; never NaN or ±∞) the hull of
  /// the four corner products, each rounded outward by its exact error term, branch-free: the corners of a
  /// box hold the extremes of the bilinear x·y, and rounding toward ∓∞ is monotone, so the minimum of the
  /// rounded-down corners is the rounded-down minimum (the result equals the case analysis of multiply()).
  /// Everything else (zeros against ±∞, huge or tiny endpoints, no fma) takes multiply().
#if defined(__GNUC__)
  [[gnu::always_inline]]
#endif
  friend inline interval64
  operator*(const interval64& a, const interval64& b) {
    using namespace detail::i64;
    if constexpr (tight) {
      const double al = a.lo_, ah = a.hi_, bl = b.lo_, bh = b.hi_;
      if (plain_factor(al) & plain_factor(ah) & plain_factor(bl) & plain_factor(bh)) {
        interval64 r;
        r.lo_ = min2(min2(plain_mul<false>(al, bl), plain_mul<false>(al, bh)),
                     min2(plain_mul<false>(ah, bl), plain_mul<false>(ah, bh)));
        r.hi_ = max2(max2(plain_mul<true>(al, bl), plain_mul<true>(al, bh)),
                     max2(plain_mul<true>(ah, bl), plain_mul<true>(ah, bh)));
        return r;
      }
    }
    return multiply(a, b);
  }
  friend interval64 operator/(const interval64& a, const interval64& b) { return divide(a, b); }

  // Boost.Multiprecision's MPFI semantics (see the header comment).
  // NaN compares unordered: every comparison but != is false.
  friend bool operator<(const interval64& a, const interval64& b) { return compare(a, b) == -1; }
  friend bool operator>(const interval64& a, const interval64& b) { return compare(a, b) == 1; }
  friend bool operator<=(const interval64& a, const interval64& b) {
    const int c = compare(a, b);
    return c == -1 || c == 0;
  }
  friend bool operator>=(const interval64& a, const interval64& b) {
    const int c = compare(a, b);
    return c == 1 || c == 0;
  }
  friend bool operator==(const interval64& a, const interval64& b) { return compare(a, b) == 0; }
  friend bool operator!=(const interval64& a, const interval64& b) { return !(a == b); }

  /// Nearest double of the midpoint (an estimate, not certified).
  explicit operator double() const;

 private:
  static interval64 from_integer(long long v) {
    const double d = static_cast<double>(v);  // nearest
    if (v >= -(1LL << 53) && v <= (1LL << 53)) return interval64(d);
    return hull(detail::i64::next_down(d), detail::i64::next_up(d));
  }
  static interval64 from_integer(unsigned long long v) {
    const double d = static_cast<double>(v);
    if (v <= (1ULL << 53)) return interval64(d);
    return hull(detail::i64::next_down(d), detail::i64::next_up(d));
  }
  /// −1, 0, 1 for a < b, a == b, a > b; 2 when unordered (NaN); throws when ambiguous.
  static int compare(const interval64& a, const interval64& b) {
    if (a.is_nan() || b.is_nan()) return 2;
    if (a.hi_ < b.lo_) return -1;
    if (a.lo_ > b.hi_) return 1;
    if (a.lo_ == b.lo_ && a.hi_ == b.hi_) return 0;
    throw std::domain_error("ambiguous comparison between two overlapping interval64 values");
  }
  static interval64 multiply(const interval64& a, const interval64& b);
  static interval64 divide(const interval64& a, const interval64& b);

  double lo_ = 0;
  double hi_ = 0;
};

// ---- interval64 multiplication and division by the signs of the endpoints ----
inline interval64 interval64::multiply(const interval64& a, const interval64& b) {
  using detail::i64::mul;
  if (a.is_nan() || b.is_nan()) return nan();
  const double al = a.lo_, ah = a.hi_, bl = b.lo_, bh = b.hi_;
  if (al >= 0) {
    if (bl >= 0) return hull(mul<false>(al, bl), mul<true>(ah, bh));
    if (bh <= 0) return hull(mul<false>(ah, bl), mul<true>(al, bh));
    return hull(mul<false>(ah, bl), mul<true>(ah, bh));
  }
  if (ah <= 0) {
    if (bl >= 0) return hull(mul<false>(al, bh), mul<true>(ah, bl));
    if (bh <= 0) return hull(mul<false>(ah, bh), mul<true>(al, bl));
    return hull(mul<false>(al, bh), mul<true>(al, bl));
  }
  if (bl >= 0) return hull(mul<false>(al, bh), mul<true>(ah, bh));
  if (bh <= 0) return hull(mul<false>(ah, bl), mul<true>(al, bl));
  return hull(std::fmin(mul<false>(al, bh), mul<false>(ah, bl)),
              std::fmax(mul<true>(al, bl), mul<true>(ah, bh)));
}

inline interval64 interval64::divide(const interval64& a, const interval64& b) {
  using detail::i64::div;
  using detail::i64::inf;
  if (a.is_nan() || b.is_nan()) return nan();
  const double al = a.lo_, ah = a.hi_, bl = b.lo_, bh = b.hi_;
  if (bl > 0) {
    if (al >= 0) return hull(div<false>(al, bh), div<true>(ah, bl));
    if (ah <= 0) return hull(div<false>(al, bl), div<true>(ah, bh));
    return hull(div<false>(al, bl), div<true>(ah, bl));
  }
  if (bh < 0) {
    if (al >= 0) return hull(div<false>(ah, bh), div<true>(al, bl));
    if (ah <= 0) return hull(div<false>(ah, bl), div<true>(al, bh));
    return hull(div<false>(ah, bh), div<true>(al, bh));
  }
  // 0 ∈ b: no finite enclosure. [0, 0] / b is NaN (0/0); otherwise the one-sided or the whole line.
  if (bl == 0 && bh == 0) return nan();
  if (al == 0 && ah == 0) return interval64(0.0);
  if (bl == 0) {  // b = [0, bh], bh > 0: a / b = a · [1/bh, +∞)
    if (al >= 0) return hull(div<false>(al, bh), inf);
    if (ah <= 0) return hull(-inf, div<true>(ah, bh));
  } else if (bh == 0) {  // b = [bl, 0], bl < 0: a · (−∞, 1/bl]
    if (al >= 0) return hull(-inf, div<true>(al, bl));
    if (ah <= 0) return hull(div<false>(ah, bl), inf);
  }
  return hull(-inf, inf);
}

// ---- functions found by ADL from generic code ----
inline interval64 abs(const interval64& x) {
  if (x.is_nan()) return x;
  if (x.lower() >= 0) return interval64::hull(std::fabs(x.lower()), x.upper());  // −0 → +0
  if (x.upper() <= 0) return interval64::hull(-x.upper(), -x.lower());
  return interval64::hull(0, std::fmax(-x.lower(), x.upper()));
}
inline interval64 fabs(const interval64& x) { return abs(x); }
/// √ on the part of x in [0, ∞) (NaN if x < 0 entirely).
inline interval64 sqrt(const interval64& x) {
  if (x.is_nan() || x.upper() < 0) return interval64::nan();
  return interval64::hull(x.lower() <= 0 ? 0 : detail::i64::sqrt<false>(x.lower()),
                          detail::i64::sqrt<true>(x.upper()));
}
/// x² ⊆ [0, ∞): tighter than x · x, which treats the two factors as independent.
interval64 square(const interval64& x);
interval64 exp(const interval64& x);
interval64 expm1(const interval64& x);
/// log on the part of x in [0, ∞) (log 0 = −∞; NaN if x < 0 entirely).
interval64 log(const interval64& x);
/// log1p on the part of x in [−1, ∞).
interval64 log1p(const interval64& x);
/// x^y on the part of x in [0, ∞), for every y in the interval y (0^y = 0 for y > 0, 0^0 = 1).
interval64 pow(const interval64& x, const interval64& y);
/// x^n for an integer n: endpoints from MPFR (t ↦ tⁿ is monotone on each sign, or in |t| for even n).
interval64 pow(const interval64& x, int n);
/// Smallest interval containing the maxima (minima) of every pair of points.
inline interval64 max(const interval64& a, const interval64& b) {
  if (a.is_nan() || b.is_nan()) return interval64::nan();
  return interval64::hull(std::fmax(a.lower(), b.lower()), std::fmax(a.upper(), b.upper()));
}
inline interval64 min(const interval64& a, const interval64& b) {
  if (a.is_nan() || b.is_nan()) return interval64::nan();
  return interval64::hull(std::fmin(a.lower(), b.lower()), std::fmin(a.upper(), b.upper()));
}
inline bool isnan(const interval64& x) { return x.is_nan(); }
inline bool isfinite(const interval64& x) { return std::isfinite(x.lower()) && std::isfinite(x.upper()); }
inline bool isinf(const interval64& x) { return std::isinf(x.lower()) || std::isinf(x.upper()); }

// ---- endpoint helpers, the same names as for interval (double endpoints) ----
inline double lower_bound(const interval64& x) { return x.lower(); }
inline double upper_bound(const interval64& x) { return x.upper(); }
inline interval64 make_interval(double lo, double hi) { return interval64::hull(lo, hi); }
inline interval64 hull(const interval64& a, const interval64& b) {
  if (a.is_nan() || b.is_nan()) return interval64::nan();
  return interval64::hull(std::fmin(a.lower(), b.lower()), std::fmax(a.upper(), b.upper()));
}
inline bool certainly_less(const interval64& a, const interval64& b) { return a.upper() < b.lower(); }
inline bool certainly_less_equal(const interval64& a, const interval64& b) { return a.upper() <= b.lower(); }
inline bool contains(const interval64& x, double v) { return x.lower() <= v && v <= x.upper(); }
/// a ∩ b for two enclosures of the same exact values: never empty in exact arithmetic, so where the two are
/// disjoint (a rounding accident) a is kept.
inline interval64 intersect(const interval64& a, const interval64& b) {
  const double lo = std::max(a.lower(), b.lower()), hi = std::min(a.upper(), b.upper());
  return lo <= hi ? interval64::hull(lo, hi) : a;
}
/// The magnitude max(|lower|, |upper|): the largest absolute value of a member.
inline double magnitude(const interval64& x) { return std::max(std::fabs(x.lower()), std::fabs(x.upper())); }

/// "[lo, hi]" with both endpoints to 17 significant digits.
std::ostream& operator<<(std::ostream& os, const interval64& x);

}  // namespace fast

using fast::interval64;

// ---- the scalar contract (scalar_traits.hpp lists its members) ----
template <class S>
struct scalar_traits;

template <>
struct scalar_traits<interval64> {
  static constexpr bool is_interval = true;
  static constexpr bool is_multiprecision = false;
  static constexpr std::string_view name() { return "interval64"; }
  static int digits() { return 53; }
  static interval64 epsilon() { return interval64(std::numeric_limits<double>::epsilon()); }
  static interval64 infinity() { return interval64(std::numeric_limits<double>::infinity()); }
  static interval64 quiet_nan() { return interval64::nan(); }
  static interval64 lower(const interval64& x) { return interval64(x.lower()); }
  static interval64 upper(const interval64& x) { return interval64(x.upper()); }
  static interval64 midpoint(const interval64& x) { return interval64(static_cast<double>(x)); }
  /// The upper endpoint as a point [u, u].
  static interval64 pivot(const interval64& x) { return interval64(x.upper()); }
  static double to_double(const interval64& x) { return static_cast<double>(x); }
  static interval64 from_double(double v) { return interval64(v); }
  /// True when both endpoints are finite (false for NaN).
  static bool is_finite(const interval64& x) { return isfinite(x); }
  static bool is_nan(const interval64& x) { return x.is_nan(); }
  static interval64 width(const interval64& x) {
    return interval64(detail::i64::add<true>(x.upper(), -x.lower()));
  }
};

}  // namespace regatta

// ---- Eigen ----
namespace Eigen {
template <>
struct NumTraits<regatta::interval64> : GenericNumTraits<regatta::interval64> {
  using Real = regatta::interval64;
  using NonInteger = regatta::interval64;
  using Literal = regatta::interval64;
  using Nested = regatta::interval64;
  enum {
    IsComplex = 0,
    IsInteger = 0,
    IsSigned = 1,
    RequireInitialization = 1,
    ReadCost = 2,
    AddCost = 8,
    MulCost = 16
  };
  static Real epsilon() { return Real(std::numeric_limits<double>::epsilon()); }
  static Real dummy_precision() { return Real(1024 * std::numeric_limits<double>::epsilon()); }
  static Real highest() { return Real(std::numeric_limits<double>::max()); }
  static Real lowest() { return Real(-std::numeric_limits<double>::max()); }
  static Real infinity() { return Real(std::numeric_limits<double>::infinity()); }
  static Real quiet_NaN() { return Real::nan(); }
  static int digits10() { return std::numeric_limits<double>::digits10; }
  static int max_digits10() { return std::numeric_limits<double>::max_digits10; }
  static int digits() { return std::numeric_limits<double>::digits; }
};
}  // namespace Eigen
