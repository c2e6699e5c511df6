// The rotary tables (rotary.hpp): binary64 estimates for double, MPFI enclosures for the certified types.
#include "rotary.hpp"

#include <algorithm>
#include <cmath>

#include <mpfi.h>

#include <regatta/core/precision.hpp>
#include <regatta/core/scalar.hpp>

namespace regatta::operators::detail {

namespace {

/// Calls emit(i, a, cos, sin) with MPFI enclosures, at `bits` bits, of cos φ_{i,a} and sin φ_{i,a},
/// φ_{i,a} = i·exp(−(2a/d_h)·log θ); every operation is MPFI's, rounded outward.
template <class Emit>
void enclosures(double theta, Eigen::Index positions, int head_dim, mpfr_prec_t bits, Emit emit) {
  mpfi_t log_theta, frequency, angle, c, s;
  for (mpfi_ptr x : {log_theta, frequency, angle, c, s}) mpfi_init2(x, bits);
  mpfi_set_d(log_theta, theta);
  mpfi_log(log_theta, log_theta);
  for (int a = 0; a < head_dim / 2; ++a) {
    mpfi_mul_si(frequency, log_theta, -2L * a);
    mpfi_div_si(frequency, frequency, head_dim);
    mpfi_exp(frequency, frequency);
    for (Eigen::Index i = 0; i < positions; ++i) {
      mpfi_mul_si(angle, frequency, long(i));
      mpfi_cos(c, angle);
      mpfi_sin(s, angle);
      emit(i, Eigen::Index(a), c, s);
    }
  }
  for (mpfi_ptr x : {log_theta, frequency, angle, c, s}) mpfi_clear(x);
}

}  // namespace

template <class S>
RotaryTables<S> rotary_tables(const Rotary& rotary, Eigen::Index positions, int head_dim) {
  RotaryTables<S> t;
  t.cos.resize(positions, head_dim / 2);
  t.sin.resize(positions, head_dim / 2);
  if constexpr (std::is_same_v<S, double> || std::is_same_v<S, float>) {
    for (int a = 0; a < head_dim / 2; ++a) {
      const double frequency = std::pow(rotary.theta, -2.0 * a / head_dim);
      for (Eigen::Index i = 0; i < positions; ++i) {
        const double angle = double(i) * frequency;
        t.cos(i, a) = S(std::cos(angle));
        t.sin(i, a) = S(std::sin(angle));
      }
    }
  } else if constexpr (std::is_same_v<S, interval64>) {
    enclosures(
        rotary.theta, positions, head_dim, 85,
        [&](Eigen::Index i, Eigen::Index a, mpfi_srcptr c, mpfi_srcptr s) {
          t.cos(i, a) = interval64::hull(mpfr_get_d(&c->left, MPFR_RNDD), mpfr_get_d(&c->right, MPFR_RNDU));
          t.sin(i, a) = interval64::hull(mpfr_get_d(&s->left, MPFR_RNDD), mpfr_get_d(&s->right, MPFR_RNDU));
        });
  } else {
    const auto bits = mpfr_prec_t(working_precision_bits()) + 32;
    enclosures(rotary.theta, positions, head_dim, bits,
               [&](Eigen::Index i, Eigen::Index a, mpfi_srcptr c, mpfi_srcptr s) {
                 S cs, sn;  // at the working precision
                 if constexpr (std::is_same_v<S, interval>) {
                   mpfi_set(cs.backend().data(), c);  // rounded outward
                   mpfi_set(sn.backend().data(), s);
                 } else {
                   mpfi_mid(cs.backend().data(), c);  // rounded to nearest
                   mpfi_mid(sn.backend().data(), s);
                 }
                 t.cos(i, a) = cs;
                 t.sin(i, a) = sn;
               });
  }
  return t;
}

#define REGATTA_INSTANTIATE(S) template RotaryTables<S> rotary_tables<S>(const Rotary&, Eigen::Index, int);
REGATTA_FOR_EACH_EXACT64_SCALAR(REGATTA_INSTANTIATE)
#undef REGATTA_INSTANTIATE

}  // namespace regatta::operators::detail
