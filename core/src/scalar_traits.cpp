#include <mpfi.h>
#include <mpfr.h>

#include <cmath>
#include <regatta/core/eigen.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/scalar_traits.hpp>

namespace regatta {

namespace {
// Boost.Multiprecision stores precision in decimal digits; MPFR in bits. digits10 -> bits as Boost does it.
unsigned bits_from_digits10(unsigned d) { return boost::multiprecision::detail::digits10_2_2(d); }
unsigned digits10_from_bits(unsigned b) {
  // Smallest d with digits10_2_2(d) >= b, so that the precision never drops below the request.
  unsigned d = boost::multiprecision::detail::digits2_2_10(b);
  while (bits_from_digits10(d) < b) ++d;
  return d;
}
}  // namespace

unsigned working_precision_bits() { return bits_from_digits10(mpfr::default_precision()); }

void set_working_precision(unsigned bits) {
  if (bits < 2 || bits > max_precision_bits)
    throw InputError("precision", "must lie in [2, " + std::to_string(max_precision_bits) + "] bits, got " +
                                      std::to_string(bits));
  const unsigned d = digits10_from_bits(bits);
  mpfr::default_precision(d);
  interval::default_precision(d);
}

mpfr at_working_precision(const mpfr& x) {
  mpfr r;  // created at the working precision
  mpfr_set(r.backend().data(), x.backend().data(), MPFR_RNDN);
  return r;
}

interval at_working_precision(const interval& x) {
  interval r;
  mpfi_set(r.backend().data(), x.backend().data());  // MPFI rounds outward
  return r;
}

PrecisionGuard::PrecisionGuard(unsigned bits)
    : mpfr_digits10_(mpfr::default_precision()), interval_digits10_(interval::default_precision()) {
  set_working_precision(bits);
}

PrecisionGuard::~PrecisionGuard() {
  mpfr::default_precision(mpfr_digits10_);
  interval::default_precision(interval_digits10_);
}

// ---- mpfr ----
int scalar_traits<mpfr>::digits() { return static_cast<int>(working_precision_bits()); }
mpfr scalar_traits<mpfr>::epsilon() {
  mpfr e(1);
  mpfr_mul_2si(e.backend().data(), e.backend().data(), 1 - digits(), MPFR_RNDN);
  return e;
}
mpfr scalar_traits<mpfr>::infinity() {
  mpfr x;
  mpfr_set_inf(x.backend().data(), 1);
  return x;
}
mpfr scalar_traits<mpfr>::quiet_nan() {
  mpfr x;
  mpfr_set_nan(x.backend().data());
  return x;
}
double scalar_traits<mpfr>::to_double(const mpfr& x) { return mpfr_get_d(x.backend().data(), MPFR_RNDN); }
bool scalar_traits<mpfr>::is_finite(const mpfr& x) { return mpfr_number_p(x.backend().data()) != 0; }
bool scalar_traits<mpfr>::is_nan(const mpfr& x) { return mpfr_nan_p(x.backend().data()) != 0; }

// ---- interval ----
mpfr lower_bound(const interval& x) {
  mpfr r;
  mpfr_set_prec(r.backend().data(), mpfi_get_prec(x.backend().data()));
  mpfi_get_left(r.backend().data(), x.backend().data());
  return r;
}
mpfr upper_bound(const interval& x) {
  mpfr r;
  mpfr_set_prec(r.backend().data(), mpfi_get_prec(x.backend().data()));
  mpfi_get_right(r.backend().data(), x.backend().data());
  return r;
}
interval make_interval(const mpfr& lo, const mpfr& hi) {
  interval r;
  const mpfr_prec_t p = std::max(mpfr_get_prec(lo.backend().data()), mpfr_get_prec(hi.backend().data()));
  if (p > mpfi_get_prec(r.backend().data())) mpfi_set_prec(r.backend().data(), p);
  mpfi_interv_fr(r.backend().data(), lo.backend().data(), hi.backend().data());
  return r;
}
interval make_point(const mpfr& x) { return make_interval(x, x); }
interval hull(const interval& a, const interval& b) {
  interval r;
  mpfi_union(r.backend().data(), a.backend().data(), b.backend().data());
  return r;
}
bool certainly_less(const interval& a, const interval& b) { return upper_bound(a) < lower_bound(b); }
bool certainly_less_equal(const interval& a, const interval& b) { return upper_bound(a) <= lower_bound(b); }
bool contains(const interval& x, const mpfr& v) { return lower_bound(x) <= v && v <= upper_bound(x); }

int scalar_traits<interval>::digits() { return static_cast<int>(working_precision_bits()); }
interval scalar_traits<interval>::epsilon() { return make_point(scalar_traits<mpfr>::epsilon()); }
interval scalar_traits<interval>::infinity() { return make_point(scalar_traits<mpfr>::infinity()); }
interval scalar_traits<interval>::quiet_nan() {
  interval x;
  mpfr n = scalar_traits<mpfr>::quiet_nan();
  mpfi_set_fr(x.backend().data(), n.backend().data());
  return x;
}
interval scalar_traits<interval>::lower(const interval& x) { return make_point(lower_bound(x)); }
interval scalar_traits<interval>::upper(const interval& x) { return make_point(upper_bound(x)); }
interval scalar_traits<interval>::midpoint(const interval& x) {
  mpfr m;
  mpfr_set_prec(m.backend().data(), mpfi_get_prec(x.backend().data()));
  mpfi_mid(m.backend().data(), x.backend().data());
  return make_point(m);
}
double scalar_traits<interval>::to_double(const interval& x) {
  mpfr m;
  mpfr_set_prec(m.backend().data(), mpfi_get_prec(x.backend().data()));
  mpfi_mid(m.backend().data(), x.backend().data());
  return mpfr_get_d(m.backend().data(), MPFR_RNDN);
}
bool scalar_traits<interval>::is_finite(const interval& x) {
  return mpfi_bounded_p(x.backend().data()) != 0 && !is_nan(x);
}
bool scalar_traits<interval>::is_nan(const interval& x) { return mpfi_nan_p(x.backend().data()) != 0; }
interval scalar_traits<interval>::width(const interval& x) {
  mpfr w;
  mpfr_sub(w.backend().data(), upper_bound(x).backend().data(), lower_bound(x).backend().data(), MPFR_RNDU);
  return make_point(w);
}

namespace detail {
interval interval_from_double(double x) {
  interval r;
  mpfi_set_d(r.backend().data(), x);  // outward-rounded when the working precision is below 53 bits
  return r;
}
interval interval_from_mpfr(const mpfr& x) {
  interval r;
  mpfi_set_fr(r.backend().data(), x.backend().data());  // outward-rounded when x has more bits
  return r;
}
mpfr mpfr_highest() {
  // Largest finite number at the current precision: the successor of +inf's predecessor, i.e.
  // nextbelow(+inf).
  mpfr x = scalar_traits<mpfr>::infinity();
  mpfr_nextbelow(x.backend().data());
  return x;
}
interval interval_highest() { return make_point(mpfr_highest()); }
int current_digits10() { return static_cast<int>(mpfr::default_precision()); }
}  // namespace detail

}  // namespace regatta
