// Enclosures of erf, ReLU and the GELU constants (docs/graph.md, "Evaluation").
#include "scalar_functions.hpp"

#include <mpfr.h>

namespace regatta::graph::detail {

namespace {
// erf at a binary64 point, rounded down or up (MPFR rounds correctly in the requested direction).
double erf_directed(double v, bool up) {
  mpfr_t x, y;
  mpfr_init2(x, 53);
  mpfr_init2(y, 53);
  mpfr_set_d(x, v, MPFR_RNDN);  // exact
  mpfr_erf(y, x, up ? MPFR_RNDU : MPFR_RNDD);
  const double r = mpfr_get_d(y, up ? MPFR_RNDU : MPFR_RNDD);
  mpfr_clear(x);
  mpfr_clear(y);
  return r;
}
mpfr erf_directed(const mpfr& v, bool up) {
  mpfr r;
  mpfr_set_prec(r.backend().data(), mpfr_get_prec(v.backend().data()));
  mpfr_erf(r.backend().data(), v.backend().data(), up ? MPFR_RNDU : MPFR_RNDD);
  return r;
}
}  // namespace

double erf_of(double x) { return std::erf(x); }
interval64 erf_of(const interval64& x) {
  return interval64::hull(erf_directed(x.lower(), false), erf_directed(x.upper(), true));
}
interval erf_of(const interval& x) {
  return make_interval(erf_directed(lower_bound(x), false), erf_directed(upper_bound(x), true));
}

interval relu_of(const interval& x) {
  const mpfr lo = lower_bound(x), hi = upper_bound(x);
  if (lo >= 0) return x;
  if (hi <= 0) return interval(0);
  return make_interval(mpfr(0), hi);
}

double inv_sqrt2(double) { return 1.0 / std::numbers::sqrt2; }
interval64 inv_sqrt2(const interval64&) { return interval64(1.0) / sqrt(interval64(2.0)); }
interval inv_sqrt2(const interval&) { return interval(1) / sqrt(interval(2)); }

double sqrt_2_over_pi(double) { return std::sqrt(2.0 / std::numbers::pi); }
interval64 sqrt_2_over_pi(const interval64&) {
  // π enclosed by the binary64 neighbours of its nearest double.
  const interval64 pi =
      interval64::hull(std::nextafter(std::numbers::pi, 0.0), std::nextafter(std::numbers::pi, 4.0));
  return sqrt(interval64(2.0) / pi);
}
interval sqrt_2_over_pi(const interval&) {
  interval pi;
  mpfi_const_pi(pi.backend().data());
  return sqrt(interval(2) / pi);
}

}  // namespace regatta::graph::detail
