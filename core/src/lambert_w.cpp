// Lambert W0 and phi^{-1}: see lambert_w.hpp for the contract. Structure:
//   branch-point tests      exact comparison of an MPFR number with -1/e, the representable neighbour below
//   point W0 (float/double) domain handling around boost::math::lambert_w0
//   point W0 (mpfr)         binary64 start + Halley on w e^w - x at working precision + guard bits
//   interval W0             mpfr candidates, certified by the sign of w e^w - x in interval arithmetic
#include <mpfi.h>
#include <mpfr.h>

#include <algorithm>
#include <array>
#include <boost/math/special_functions/lambert_w.hpp>
#include <cassert>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>

#include <regatta/core/convert.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/lambert_w.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/scalar_traits.hpp>

namespace regatta {

namespace {

/// Guard bits of the internal mpfr evaluation: Halley's last step and the final rounding each cost well
/// under one ulp at `working + guard_bits`, so the result rounded to `working` bits is within 1 ulp + 2^-32.
constexpr mpfr_prec_t guard_bits = 32;

/// Candidate half-width of the interval enclosure, in ulps of the working precision, before any widening.
/// The mpfr estimate (computed at working + 16 bits) is within 2^-14 ulp, so 2 ulps leave the sign test
/// a margin of 2 ulps * f'(w), far above the interval-evaluation error at working + guard bits.
constexpr int enclosure_half_width_ulps = 2;

/// Geometric widening factor of the candidates when a sign test fails, and how often to try.
constexpr int widening_factor = 4;
constexpr int max_widenings = 256;

mpfr with_precision(mpfr_prec_t bits) {
  mpfr r;
  mpfr_set_prec(r.backend().data(), bits);  // value NaN
  return r;
}

mpfr rounded(const mpfr& x, mpfr_prec_t bits, mpfr_rnd_t rnd) {
  mpfr r = with_precision(bits);
  mpfr_set(r.backend().data(), x.backend().data(), rnd);
  return r;
}

mpfr_prec_t precision_of(const mpfr& x) { return mpfr_get_prec(x.backend().data()); }

/// -x at the precision of x (exact).
mpfr negated(const mpfr& x) {
  mpfr r = with_precision(precision_of(x));
  mpfr_neg(r.backend().data(), x.backend().data(), MPFR_RNDN);
  return r;
}

/// 1/e rounded in direction `rnd` to `bits` bits.
mpfr inverse_e(mpfr_prec_t bits, mpfr_rnd_t rnd) {
  mpfr r = with_precision(bits);
  mpfr minus_one = with_precision(2);
  mpfr_set_si(minus_one.backend().data(), -1, MPFR_RNDN);
  mpfr_exp(r.backend().data(), minus_one.backend().data(), rnd);
  return r;
}

/// Sign of x - (-1/e): -1 when x < -1/e, +1 when x > -1/e. Exact (never 0: -1/e is irrational); the
/// enclosure [-1/e rounded down, rounded up] is refined until it excludes x.
int compare_with_branch_point(const mpfr& x) {
  assert(!scalar_traits<mpfr>::is_nan(x));
  for (mpfr_prec_t bits = std::max<mpfr_prec_t>(precision_of(x), 64) + 16;; bits *= 2) {
    const mpfr minus_upper = negated(inverse_e(bits, MPFR_RNDU));  // <= -1/e
    const mpfr minus_lower = negated(inverse_e(bits, MPFR_RNDD));  // >= -1/e
    if (x < minus_upper) return -1;
    if (x > minus_lower) return 1;
  }
}

/// The largest number of `bits` bits that is below -1/e: the rounded branch point at that precision.
mpfr rounded_branch_point(mpfr_prec_t bits) { return negated(inverse_e(bits, MPFR_RNDU)); }

template <class T>
std::string to_text(const T& x) {
  std::ostringstream s;
  if constexpr (std::is_floating_point_v<T>) {
    s.precision(std::numeric_limits<T>::max_digits10);
    s << x;
  } else {
    char text[64];  // mpfr_snprintf, not number::str(), which trips GCC 12's -Wrestrict false positive
    mpfr_snprintf(text, sizeof text, "%.20Re", x.backend().data());
    s << text;
  }
  return s.str();
}

[[noreturn]] void throw_below_branch_point(const std::string& value) {
  throw InputError(
      "lambert_w0 argument",
      "is " + value + ", must be >= -1/e = -0.36787944117144232159 (domain of the principal branch W0)");
}

// ---------------------------------------------------------------------------------------------------------
// Point W0, mpfr.

/// e x + 1 for x > -1/e, at twice the needed precision so that it keeps relative accuracy next to -1/e
/// (x has at most max(bits, prec(x)) bits, so |e x + 1| >= ~2^-(prec(x)+2) unless x is the branch point).
mpfr distance_to_branch_point(const mpfr& x, mpfr_prec_t bits) {
  const mpfr_prec_t p = 2 * std::max(bits, precision_of(x)) + 64;
  mpfr e = with_precision(p);
  mpfr one = with_precision(2);
  mpfr_set_ui(one.backend().data(), 1, MPFR_RNDN);
  mpfr_exp(e.backend().data(), one.backend().data(), MPFR_RNDN);
  mpfr t = with_precision(p);
  mpfr_fma(t.backend().data(), e.backend().data(), x.backend().data(), one.backend().data(), MPFR_RNDN);
  return t;
}

/// Extra bits needed near the branch point: W0 has derivative 1/(e^w (1 + w)) and 1 + w ~ p = sqrt(2(ex+1)),
/// so an evaluation of w e^w - x with absolute error 2^-P moves the root by ~2^-P / p.
mpfr_prec_t branch_point_extra_bits(const mpfr& x, mpfr_prec_t bits) {
  if (!(x < 0)) return 0;
  const mpfr t = distance_to_branch_point(x, bits);
  if (!(t > 0)) return bits;  // x is the branch point to within 2^-2bits: at most bits/2 needed, be generous
  const long e = mpfr_get_exp(t.backend().data());  // t in [2^(e-1), 2^e)
  return e >= 0 ? 0 : static_cast<mpfr_prec_t>((-e) / 2 + 2);
}

/// Precision of the internal evaluation for a result of `bits` bits at argument x.
mpfr_prec_t internal_precision(const mpfr& x, mpfr_prec_t bits) {
  return bits + guard_bits + branch_point_extra_bits(x, bits);
}

/// Binary64-accurate (or better) starting value for Halley at precision `p` (the default precision now).
mpfr starting_value(const mpfr& x, mpfr_prec_t working_bits) {
  using std::abs;
  if (x < -0.3) {
    // Branch-point series in p = sqrt(2(e x + 1)) (Corless et al. 1996, eq. 4.22), 5 terms: error O(p^5)
    // with p <= sqrt(2(1 - 0.3 e)) = 0.6; Halley's cubic convergence removes the rest.
    const mpfr t = distance_to_branch_point(x, working_bits);
    mpfr p = t > 0 ? mpfr(sqrt(mpfr(2 * t))) : mpfr(0);
    return mpfr(-1 + p * (1 + p * (mpfr(-1) / 3 + p * (mpfr(11) / 72 + p * (mpfr(-43) / 540)))));
  }
  if (abs(x) < 1e-300) return x;  // W0(x) = x - x^2 + ...: relative error below 1e-300
  if (x < 1e300) return mpfr(boost::math::lambert_w0(static_cast<double>(x)));
  // Beyond binary64: W0(x) = L1 - L2 + L2/L1 + O((L2/L1)^2), L1 = ln x, L2 = ln ln x (Corless et al. 4.19).
  const mpfr l1 = log(x);
  const mpfr l2 = log(l1);
  return mpfr(l1 - l2 + l2 / l1);
}

/// W0(x) for x > -1/e (x != 0, finite), to within a few ulps at `bits` bits.
mpfr w0_mpfr_regular(const mpfr& x, mpfr_prec_t bits) {
  using std::abs;
  const mpfr_prec_t p = internal_precision(x, bits);
  PrecisionGuard guard(static_cast<unsigned>(p));
  mpfr w = rounded(starting_value(x, bits), p, MPFR_RNDN);
  // Halley on f(w) = w e^w - x: f' = e^w (w + 1), f'' = e^w (w + 2),
  // w <- w - f / (f' - f'' f / (2 f')) = w - f / (e^w (w + 1) - (w + 2) f / (2 (w + 1))).
  // Converges cubically from a binary64 start: 53 -> 159 -> 477 -> 1431 bits. Stop when the step is
  // below 2^-(p-4) relative, or when it stops shrinking (rounding noise).
  const mpfr tolerance = ldexp(mpfr(1), -static_cast<int>(p) + 4);
  mpfr previous_step = scalar_traits<mpfr>::infinity();
  for (int iteration = 0; iteration < 64; ++iteration) {
    const mpfr ew = exp(w);
    const mpfr f = w * ew - x;
    const mpfr wp1 = w + 1;
    const mpfr step = f / (ew * wp1 - (w + 2) * f / (2 * wp1));
    w -= step;
    const mpfr size = abs(step);
    if (size <= tolerance * abs(w) || !(size < previous_step)) break;
    previous_step = size;
  }
  return rounded(w, bits, MPFR_RNDN);
}

/// W0 for an mpfr argument, result rounded to `bits` bits. Handles NaN, 0, +inf and the domain.
mpfr w0_mpfr(const mpfr& x, mpfr_prec_t bits) {
  if (scalar_traits<mpfr>::is_nan(x)) return rounded(x, bits, MPFR_RNDN);
  if (x == 0) return rounded(mpfr(0), bits, MPFR_RNDN);
  if (x > 0 && !scalar_traits<mpfr>::is_finite(x)) return rounded(x, bits, MPFR_RNDN);  // +inf
  if (x < 0 && compare_with_branch_point(x) < 0) {
    if (x >= rounded_branch_point(precision_of(x))) return rounded(mpfr(-1), bits, MPFR_RNDN);
    throw_below_branch_point(to_text(x));
  }
  return w0_mpfr_regular(x, bits);
}

// ---------------------------------------------------------------------------------------------------------
// Point W0, float and double.

template <class T>
T rounded_branch_point_of() {
  // -1/e rounded toward -inf at 256 bits, then toward -inf to T: the largest T below -1/e.
  const mpfr c = rounded_branch_point(256);
  if constexpr (std::is_same_v<T, float>)
    return mpfr_get_flt(c.backend().data(), MPFR_RNDD);
  else
    return static_cast<T>(mpfr_get_d(c.backend().data(), MPFR_RNDD));
}

/// Arguments at or below this use the branch-point path of w0_near_branch_point instead of Boost.
constexpr double near_branch_point_threshold = -0.25;

/// W0(x) for c < x <= -0.25 in binary64, accurate to ~1 ulp of W0 of the exact argument.
/// boost::math::lambert_w0 forms e x + 1 in plain double there: an absolute error ~u that becomes
/// u / (1 + W0) in W0, i.e. 2e4 ulp at x = -1/e + 1e-10. Instead, with v = 1 + W0(x) and t = e x + 1,
///   w e^w = x  <=>  g(v) := (v - 1) e^v + 1 = t,   g(v) = sum_{k>=2} (k-1)/k! v^k,
/// where t is formed with e = e_hi + e_lo and one fma (error ~ulp(t)), g by its series (no cancellation),
/// and v by Newton (g' = v e^v) from the branch-point series v = p - p^2/3 + 11/72 p^3 - 43/540 p^4 +
/// 769/17280 p^5, p = sqrt(2t) (Corless et al. 1996, eq. 4.22). Relative error of v: ~u; W0 = v - 1.
double w0_near_branch_point(double x) {
  constexpr double e_hi = 2.718281828459045;       // e rounded to binary64
  constexpr double e_lo = 1.4456468917292502e-16;  // e - e_hi rounded to binary64
  const double t = std::fma(e_hi, x, 1.0) + e_lo * x;
  if (!(t > 0)) return -1.0;
  // Series coefficients c_k = (k-1)/k!, k = 2..25; v <= 1 + W0(-0.25) = 0.643, so the tail is < 1e-29.
  constexpr int terms = 24;
  static const auto coefficients = [] {
    std::array<double, terms> c{};
    double factorial = 1;  // k!
    for (int k = 2; k < terms + 2; ++k) {
      factorial *= k;
      c[k - 2] = (k - 1) / factorial;
    }
    return c;
  }();
  const auto g = [](double v) {
    double s = 0;
    for (int i = terms - 1; i >= 0; --i) s = s * v + coefficients[i];
    return s * v * v;
  };
  const double p = std::sqrt(2 * t);
  double v = p * (1 + p * (-1.0 / 3 + p * (11.0 / 72 + p * (-43.0 / 540 + p * (769.0 / 17280)))));
  // Newton converges quadratically: series error <= ~p^6 <= 0.1 at the threshold, 0.1 -> 1e-2 -> ... 1e-16
  // in 5 steps; 8 is a safe cap, and the loop stops at rounding noise.
  for (int iteration = 0; iteration < 8; ++iteration) {
    const double step = (g(v) - t) / (v * std::exp(v));
    v -= step;
    if (std::fabs(step) <= 0x1p-60 * v) break;
  }
  return v - 1;
}

/// float and double. float is evaluated in double (x is exact there) and rounded once: <= 1/2 ulp + the
/// double error scaled by 2^-29.
template <class T>
T w0_binary(T x) {
  static const T branch_point = rounded_branch_point_of<T>();
  if (std::isnan(x)) return x;
  if (x < branch_point) throw_below_branch_point(to_text(x));
  if (x == branch_point) return T(-1);  // the rounded branch point (nearest T to -1/e, just below it)
  if (std::isinf(x)) return x;          // +inf (Boost reports an overflow error)
  const double xd = static_cast<double>(x);
  if (xd <= near_branch_point_threshold) return static_cast<T>(w0_near_branch_point(xd));
  if (xd == 0) return T(0);
  // Boost's rational approximations are off by up to ~9 ulp on (-0.25, -0.1) (measured against mpfr); one
  // Newton step with an fma residual (error ~u |x| from exp) leaves |dw| <= ~u |w| / (1 + w) + 1/2 ulp.
  double w = boost::math::lambert_w0(xd);
  const double ew = std::exp(w);
  if (std::isfinite(ew)) w -= std::fma(w, ew, -xd) / (ew * (1 + w));
  return static_cast<T>(w);
}

// ---------------------------------------------------------------------------------------------------------
// Interval W0.

/// Sign test of f(w) = w e^w - t at the point w, in interval arithmetic at `p` bits: returns the enclosure.
interval residual_enclosure(const mpfr& w, const mpfr& t, mpfr_prec_t p) {
  PrecisionGuard guard(static_cast<unsigned>(p));
  const interval wi = make_point(w);
  return interval(wi * exp(wi) - make_point(t));
}

enum class Side { lower, upper };

/// A `bits`-bit number b with b <= W0(t) (Side::lower) or b >= W0(t) (Side::upper), certified, close to
/// W0(t). Precondition: t > -1/e or t is +inf, not NaN.
mpfr certified_bound(const mpfr& t, mpfr_prec_t bits, Side side) {
  using std::abs;
  if (t == 0) return rounded(mpfr(0), bits, MPFR_RNDN);                        // W0(0) = 0 exactly
  if (!scalar_traits<mpfr>::is_finite(t)) return rounded(t, bits, MPFR_RNDN);  // W0(+inf) = +inf
  const mpfr estimate = w0_mpfr_regular(t, bits + 16);
  const mpfr_prec_t p = internal_precision(t, bits);
  const mpfr minus_one = rounded(mpfr(-1), bits, MPFR_RNDN);
  mpfr delta = ldexp(abs(estimate), 1 - static_cast<int>(bits)) * enclosure_half_width_ulps;
  for (int attempt = 0; attempt < max_widenings; ++attempt, delta *= widening_factor) {
    mpfr candidate = with_precision(bits);
    if (side == Side::lower) {
      mpfr_sub(candidate.backend().data(), estimate.backend().data(), delta.backend().data(), MPFR_RNDD);
      if (candidate <= minus_one) return minus_one;  // W0 >= -1 on its whole domain
      // f increasing on [-1, inf), f(W0(t)) = 0: f(candidate) <= 0 proves candidate <= W0(t).
      if (upper_bound(residual_enclosure(candidate, t, p)) <= 0) return candidate;
    } else {
      mpfr_add(candidate.backend().data(), estimate.backend().data(), delta.backend().data(), MPFR_RNDU);
      // candidate > -1 (estimate > -1 for t > -1/e): f(candidate) >= 0 proves candidate >= W0(t).
      if (candidate > minus_one && lower_bound(residual_enclosure(candidate, t, p)) >= 0) return candidate;
    }
  }
  assert(false && "lambert_w0: enclosure not certified after max_widenings widenings");
  return side == Side::lower ? minus_one : scalar_traits<mpfr>::infinity();
}

interval w0_interval(const interval& x) {
  if (scalar_traits<interval>::is_nan(x)) return scalar_traits<interval>::quiet_nan();
  const mpfr_prec_t bits = static_cast<mpfr_prec_t>(working_precision_bits());
  const mpfr a = lower_bound(x);
  const mpfr b = upper_bound(x);
  if (a < 0 && compare_with_branch_point(a) < 0) {
    const std::string text = "[" + to_text(a) + ", " + to_text(b) + "]";
    if (b < 0 && compare_with_branch_point(b) < 0)
      throw InputError(
          "lambert_w0 argument",
          "is the interval " + text + ", entirely below -1/e (domain of the principal branch W0)");
    throw InputError("lambert_w0 argument",
                     "is the interval " + text +
                         ", which has elements below -1/e (domain of the principal branch "
                         "W0); its lower end must be >= -1/e");
  }
  return make_interval(certified_bound(a, bits, Side::lower), certified_bound(b, bits, Side::upper));
}

}  // namespace

template <class S>
S lambert_w0(const S& x) {
  if constexpr (std::is_floating_point_v<S>) {
    return w0_binary(x);
  } else if constexpr (std::is_same_v<S, mpfr>) {
    return w0_mpfr(x, static_cast<mpfr_prec_t>(working_precision_bits()));
  } else if constexpr (std::is_same_v<S, interval64>) {
    // Through MPFI at (at least) 53 bits: both conversions enclose, so the result encloses W0(x).
    const PrecisionGuard guard(std::max(53u, working_precision_bits()));
    return scalar_cast<interval64>(w0_interval(scalar_cast<interval>(x)));
  } else {
    static_assert(std::is_same_v<S, interval>);
    return w0_interval(x);
  }
}

template <class S>
S lambert_phi_inverse(const S& y) {
  using std::exp;
  using traits = scalar_traits<S>;
  if (traits::is_nan(y)) return y;
  bool negative = false;
  if constexpr (traits::is_interval)
    negative = lower_bound(y) < 0;
  else
    negative = y < 0;
  if (negative)
    throw InputError("lambert_phi_inverse argument",
                     "has lower end " + to_text(traits::to_double(traits::lower(y))) +
                         ", must be >= 0 (phi(x) = x e^(x+1) is inverted on [0, inf))");
  const S e = exp(S(1));  // an enclosure of e for interval
  return lambert_w0(S(y / e));
}

#define REGATTA_LAMBERT_W_INSTANTIATE(S) \
  template S lambert_w0<S>(const S&);    \
  template S lambert_phi_inverse<S>(const S&);
REGATTA_FOR_EACH_SCALAR(REGATTA_LAMBERT_W_INSTANTIATE)
#undef REGATTA_LAMBERT_W_INSTANTIATE

}  // namespace regatta
