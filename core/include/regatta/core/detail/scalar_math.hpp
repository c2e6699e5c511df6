#pragma once
// Internal: small scalar primitives that need care for interval arithmetic, shared by the generic and the
// materialised pairwise paths and by the spectral-norm routines.
#include <mpfi.h>
#include <mpfr.h>

#include <cmath>
#include <type_traits>

#include <regatta/core/eigen.hpp>
#include <regatta/core/precision.hpp>

namespace regatta::detail {

/// x² — for interval the tight square ⊆ [0, ∞) (x · x would treat the two factors as independent).
template <class S>
S square(const S& x) {
  if constexpr (std::is_same_v<S, interval>) {
    interval r;
    mpfi_sqr(r.backend().data(), x.backend().data());
    return r;
  } else if constexpr (std::is_same_v<S, interval64>) {
    return ::regatta::fast::square(x);
  } else {
    return x * x;
  }
}

/// dist^p for dist ≥ 0, p ≥ 1. For interval: t ↦ t^p is increasing on [0, ∞) and monotone in p for fixed t,
/// so over [a, b] × [p_lo, p_hi] the extremes are at corners, each rounded outward; 0^p = 0 exactly.
template <class S>
S pow_nonnegative(const S& dist, const S& p) {
  if constexpr (std::is_same_v<S, interval>) {
    const mpfr a = lower_bound(dist), b = upper_bound(dist);
    const mpfr p_lo = lower_bound(p), p_hi = upper_bound(p);
    mpfr lo1, lo2, hi1, hi2;  // working precision
    mpfr_pow(lo1.backend().data(), a.backend().data(), p_lo.backend().data(), MPFR_RNDD);
    mpfr_pow(lo2.backend().data(), a.backend().data(), p_hi.backend().data(), MPFR_RNDD);
    mpfr_pow(hi1.backend().data(), b.backend().data(), p_lo.backend().data(), MPFR_RNDU);
    mpfr_pow(hi2.backend().data(), b.backend().data(), p_hi.backend().data(), MPFR_RNDU);
    return make_interval(lo1 < lo2 ? lo1 : lo2, hi1 > hi2 ? hi1 : hi2);
  } else if constexpr (std::is_same_v<S, interval64>) {
    return ::regatta::fast::pow(dist, p);  // the same corner rule, endpoints from MPFR
  } else {
    using std::pow;
    return pow(dist, p);
  }
}

/// Every entry carried at the current working precision (a copy for fixed-precision types: IEEE and
/// interval64); see at_working_precision.
/// Takes any dense expression (a matrix, an Eigen::Ref view of caller-owned data) and returns a plain matrix.
template <class Derived>
typename Derived::PlainObject at_working_precision_all(const Eigen::DenseBase<Derived>& a) {
  using S = typename Derived::Scalar;
  if constexpr (!scalar_traits<S>::is_multiprecision) {
    return a;
  } else {
    typename Derived::PlainObject r(a.rows(), a.cols());
    for (Eigen::Index i = 0; i < a.rows(); ++i)
      for (Eigen::Index j = 0; j < a.cols(); ++j) r(i, j) = at_working_precision(a(i, j));
    return r;
  }
}

/// a · b by the plain triple loop (no blocking, no reassociation): the reference order of summation, and the
/// only product available for scalar types that Eigen's GEMM kernels do not handle well.
template <class S>
Matrix<S> plain_product(const Matrix<S>& a, const Matrix<S>& b) {
  Matrix<S> r(a.rows(), b.cols());
  for (Eigen::Index i = 0; i < a.rows(); ++i)
    for (Eigen::Index c = 0; c < b.cols(); ++c) {
      S acc(0);
      for (Eigen::Index k = 0; k < a.cols(); ++k) acc += a(i, k) * b(k, c);
      r(i, c) = acc;
    }
  return r;
}

}  // namespace regatta::detail
