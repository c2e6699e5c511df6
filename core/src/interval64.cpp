#include <regatta/core/interval64.hpp>

#include <mpfi.h>
#include <mpfr.h>

#include <regatta/core/convert.hpp>

#include <algorithm>
#include <ostream>
#include <sstream>

namespace regatta {

namespace {

using detail::i64::inf;

// Endpoints of exp, log, log1p, expm1 and pow from MPFR: the argument is exact at 53 bits, MPFR rounds the
// function value correctly in the requested direction at 53 bits (with MPFR's much wider exponent range),
// and mpfr_get_d rounds that to binary64 in the same direction, so a lower (upper) endpoint is ≤ (≥) the
// exact value: two roundings in one direction stay on one side.
struct Workspace {
  mpfr_t x, y, z;
  Workspace() {
    mpfr_init2(x, 53);
    mpfr_init2(y, 53);
    mpfr_init2(z, 53);
  }
  ~Workspace() {
    mpfr_clear(x);
    mpfr_clear(y);
    mpfr_clear(z);
  }
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
};
Workspace& workspace() {
  thread_local Workspace w;
  return w;
}

using Unary = int (*)(mpfr_ptr, mpfr_srcptr, mpfr_rnd_t);

double directed(Unary f, double v, bool up) {
  Workspace& w = workspace();
  const mpfr_rnd_t rnd = up ? MPFR_RNDU : MPFR_RNDD;
  mpfr_set_d(w.x, v, MPFR_RNDN);  // exact: 53 bits hold every binary64
  f(w.y, w.x, rnd);
  return mpfr_get_d(w.y, rnd);
}

/// f(v) enclosed with one MPFR call where the two directed ones would give the same interval: the
/// round-to-nearest value y (53 bits) and its ternary value say on which side of the exact value y lies,
/// and y's binary64 neighbour towards the exact value is the other end (no 53-bit number lies strictly
/// between the exact value and its nearest one). When y does not convert to binary64 exactly (outside the
/// normal range), the two directed calls.
interval64 point_enclosure(Unary f, double v) {
  Workspace& w = workspace();
  mpfr_set_d(w.x, v, MPFR_RNDN);  // exact
  const int side = f(w.y, w.x, MPFR_RNDN);
  const double y = mpfr_get_d(w.y, MPFR_RNDN);
  if (!std::isnormal(y) || mpfr_cmp_d(w.y, y) != 0)
    return interval64::hull(directed(f, v, false), directed(f, v, true));
  if (side == 0) return interval64(y);
  return side > 0 ? interval64::hull(std::nextafter(y, -inf), y)
                  : interval64::hull(y, std::nextafter(y, inf));
}

double directed_pow(double t, double p, bool up) {
  Workspace& w = workspace();
  const mpfr_rnd_t rnd = up ? MPFR_RNDU : MPFR_RNDD;
  mpfr_set_d(w.x, t, MPFR_RNDN);
  mpfr_set_d(w.z, p, MPFR_RNDN);
  mpfr_pow(w.y, w.x, w.z, rnd);
  return mpfr_get_d(w.y, rnd);
}

/// v^n rounded down or up by MPFR (exact argument, correctly rounded in the direction, then to binary64).
double directed_pow_int(double v, long n, bool up) {
  Workspace& w = workspace();
  const mpfr_rnd_t rnd = up ? MPFR_RNDU : MPFR_RNDD;
  mpfr_set_d(w.x, v, MPFR_RNDN);
  mpfr_pow_si(w.y, w.x, n, rnd);
  return mpfr_get_d(w.y, rnd);
}

}  // namespace

namespace fast {

interval64::operator double() const {
  if (is_nan()) return lo_;
  if (lo_ == hi_) return lo_;
  if (std::isinf(lo_) && std::isinf(hi_)) return 0;
  if (std::isinf(lo_)) return hi_;
  if (std::isinf(hi_)) return lo_;
  const double m = 0.5 * lo_ + 0.5 * hi_;  // no overflow; may round outside only through underflow
  return std::min(std::max(m, lo_), hi_);
}

interval64 square(const interval64& x) {
  if (x.is_nan()) return x;
  const interval64 a = abs(x);
  using detail::i64::mul;
  return interval64::hull(mul<false>(a.lower(), a.lower()), mul<true>(a.upper(), a.upper()));
}

interval64 exp(const interval64& x) {
  if (x.is_nan()) return x;
  if (x.lower() == x.upper() && std::isfinite(x.lower())) return point_enclosure(mpfr_exp, x.lower());
  return interval64::hull(directed(mpfr_exp, x.lower(), false), directed(mpfr_exp, x.upper(), true));
}

interval64 expm1(const interval64& x) {
  if (x.is_nan()) return x;
  return interval64::hull(directed(mpfr_expm1, x.lower(), false), directed(mpfr_expm1, x.upper(), true));
}

interval64 log(const interval64& x) {
  if (x.is_nan() || x.upper() < 0) return interval64::nan();
  const double lo = x.lower() <= 0 ? -inf : directed(mpfr_log, x.lower(), false);
  return interval64::hull(lo, directed(mpfr_log, x.upper(), true));  // log 0 = −∞
}

interval64 log1p(const interval64& x) {
  if (x.is_nan() || x.upper() < -1) return interval64::nan();
  const double lo = x.lower() <= -1 ? -inf : directed(mpfr_log1p, x.lower(), false);
  return interval64::hull(lo, directed(mpfr_log1p, x.upper(), true));
}

interval64 pow(const interval64& x, const interval64& y) {
  if (x.is_nan() || y.is_nan() || x.upper() < 0) return interval64::nan();
  // t^p = exp(p · log t) with p · log t bilinear in (p, log t): over the box [a, b] × [p_lo, p_hi] the
  // extremes lie at the corners (MPFR's pow follows C99 at t = 0: 0^p = 0 for p > 0, 1 for p = 0, ∞ below).
  const double a = std::max(x.lower(), 0.0), b = x.upper();
  const double ts[2] = {a, b}, ps[2] = {y.lower(), y.upper()};
  double lo = inf, hi = -inf;
  for (double t : ts)
    for (double p : ps) {
      lo = std::min(lo, directed_pow(t, p, false));
      hi = std::max(hi, directed_pow(t, p, true));
    }
  return interval64::hull(lo, hi);
}

interval64 pow(const interval64& x, int n) {
  if (x.is_nan()) return x;
  if (n == 0) return interval64(1.0);  // x^0 = 1 for every x (MPFR's convention at 0 and ±∞ too)
  const long k = n;
  const double lo = x.lower(), hi = x.upper();
  if (k % 2 == 0) {  // |t|^k: increasing in |t| for k > 0, decreasing for k < 0
    const interval64 a = abs(x);
    if (k > 0)
      return interval64::hull(directed_pow_int(a.lower(), k, false), directed_pow_int(a.upper(), k, true));
    return interval64::hull(directed_pow_int(a.upper(), k, false),
                            a.lower() == 0 ? inf : directed_pow_int(a.lower(), k, true));
  }
  if (k > 0) return interval64::hull(directed_pow_int(lo, k, false), directed_pow_int(hi, k, true));
  // Odd k < 0: decreasing on (−∞, 0) and on (0, ∞), a pole at 0.
  if (lo > 0 || hi < 0)
    return interval64::hull(directed_pow_int(hi, k, false), directed_pow_int(lo, k, true));
  if (lo == 0 && hi == 0) return interval64::nan();
  if (lo == 0) return interval64::hull(directed_pow_int(hi, k, false), inf);
  if (hi == 0) return interval64::hull(-inf, directed_pow_int(lo, k, true));
  return interval64::hull(-inf, inf);
}

interval64::interval64(const mpfr& x) : interval64(detail::interval64_from_mpfr(x)) {}
interval64::interval64(const interval& x) : interval64(detail::interval64_from_interval(x)) {}

}  // namespace fast

namespace detail {
interval64 interval64_from_mpfr(const mpfr& x) {
  return interval64::hull(mpfr_get_d(x.backend().data(), MPFR_RNDD),
                          mpfr_get_d(x.backend().data(), MPFR_RNDU));
}
interval64 interval64_from_interval(const interval& x) {
  return interval64::hull(mpfr_get_d(&x.backend().data()[0].left, MPFR_RNDD),
                          mpfr_get_d(&x.backend().data()[0].right, MPFR_RNDU));
}
interval interval_from_interval64(const interval64& x) {
  interval r;
  if (x.is_nan()) {
    mpfi_set_d(r.backend().data(), x.lower());
    return r;
  }
  mpfi_interv_d(r.backend().data(), x.lower(), x.upper());  // outward below 53 bits
  return r;
}
}  // namespace detail

namespace fast {
std::ostream& operator<<(std::ostream& os, const interval64& x) {
  std::ostringstream s;
  s.precision(17);
  s << '[' << x.lower() << ", " << x.upper() << ']';
  return os << s.str();
}
}  // namespace fast

}  // namespace regatta
