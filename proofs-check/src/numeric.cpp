#include <regatta/proofs/detail/numeric.hpp>

#include <mpfi.h>
#include <mpfr.h>

#include <string>

#include <regatta/core/decimal.hpp>
#include <regatta/core/dense_svd.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/spectral_norm.hpp>

namespace regatta::proofs::num {

template <>
double norm_2<double>(const Matrix<double>& M) {
  return largest_singular_value(M);
}

template <>
mpfr norm_2<mpfr>(const Matrix<mpfr>& M) {
  if (M.size() == 0) return mpfr(0);
  return spectral_norm_reference<mpfr>(M);
}

template <>
interval norm_2<interval>(const Matrix<interval>& M) {
  if (M.size() == 0) return interval(0);
  // The lower end: the interval value of ‖M v‖/‖v‖ at the power vector of the midpoint matrix (≤ ‖M'‖₂ for
  // every M' in the box); the upper end: the smaller of the certified Cholesky bound and ‖M‖_F.
  const Matrix<double> mid = matrix_cast<double>(M);
  const PowerIterationResult<double> power = spectral_norm_power<double>(mid);
  const interval witness = certified_lower_bound_from_vector(M, power.right_vector);
  const CertifiedNormBound bound = spectral_norm_upper_certified<interval>(M);
  const mpfr frob_hi = upper_bound(frobenius<interval>(M));
  mpfr hi(bound.upper);
  if (frob_hi < hi) hi = frob_hi;
  mpfr lo = lower_bound(witness);
  if (lo < 0) lo = 0;
  if (hi < lo) hi = lo;  // cannot happen for a valid witness; keeps the interval well formed
  return make_interval(lo, hi);
}

std::string lower_text(const interval& x, int digits) {
  return to_decimal(lower_bound(x), digits, Rounding::down);
}
std::string upper_text(const interval& x, int digits) {
  return to_decimal(upper_bound(x), digits, Rounding::up);
}

double lower_double(const interval& x) { return mpfr_get_d(lower_bound(x).backend().data(), MPFR_RNDD); }
double upper_double(const interval& x) { return mpfr_get_d(upper_bound(x).backend().data(), MPFR_RNDU); }

}  // namespace regatta::proofs::num
