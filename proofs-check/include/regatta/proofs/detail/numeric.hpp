#pragma once
// Internal: scalar-generic helpers of the claim evaluators (double, mpfr, interval). For interval every
// function returns an enclosure of the exact value for every point of its arguments.
#include <cmath>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include <regatta/core/detail/scalar_math.hpp>
#include <regatta/core/eigen.hpp>
#include <regatta/core/scalar_traits.hpp>

namespace regatta::proofs::num {

template <class S>
constexpr bool is_interval_v = std::is_same_v<S, interval>;

/// The exact value of a double in S (every binary64 number is exact at ≥ 53 bits).
template <class S>
S lift(double v) {
  return scalar_traits<S>::from_double(v);
}

/// A matrix of doubles lifted exactly to S.
template <class S>
Matrix<S> lift_matrix(const Matrix<double>& m) {
  Matrix<S> out(m.rows(), m.cols());
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) out(i, j) = lift<S>(m(i, j));
  return out;
}

/// The value of a decimal string: double rounds to nearest, mpfr rounds at the working precision, interval
/// encloses the decimal number.
template <class S>
S parse(const char* text) {
  if constexpr (std::is_floating_point_v<S>) {
    return static_cast<S>(std::strtod(text, nullptr));
  } else {
    return S(text);
  }
}

/// True when x is exactly zero (for interval: the degenerate interval [0, 0]).
template <class S>
bool is_zero(const S& x) {
  if constexpr (is_interval_v<S>) {
    return lower_bound(x) == 0 && upper_bound(x) == 0;
  } else {
    return x == 0;
  }
}

/// max(a, b); for interval the hull-max [max(lo), max(hi)], which encloses max over the box.
template <class S>
S smax(const S& a, const S& b) {
  if constexpr (is_interval_v<S>) {
    const mpfr lo = lower_bound(a) > lower_bound(b) ? lower_bound(a) : lower_bound(b);
    const mpfr hi = upper_bound(a) > upper_bound(b) ? upper_bound(a) : upper_bound(b);
    return make_interval(lo, hi);
  } else {
    return a > b ? a : b;
  }
}

/// A quantity q known through two certified bounds, lower ≤ q ≤ upper (e.g. a spectral norm bounded below by
/// ‖J w‖/‖w‖ at an approximate top singular vector w and above by ‖J‖_F): for interval the hull [lower end of
/// `lower`, upper end of `upper`], an enclosure of q itself, so that a relation on q is certified from it in
/// both directions; for point types `estimate` (the value at the approximate solution). An approximation
/// evaluated in interval arithmetic encloses the value *at* the approximation, not the exact quantity:
/// lifting it as the quantity would certify a violation that the exact quantity does not have.
template <class S>
S between(const S& lower, const S& upper, const S& estimate) {
  if constexpr (is_interval_v<S>) {
    (void)estimate;
    // The hull of both: [lower end of lower, upper end of upper] whenever the bounds are consistent.
    const mpfr lo = lower_bound(lower) < lower_bound(upper) ? lower_bound(lower) : lower_bound(upper);
    const mpfr hi = upper_bound(upper) > upper_bound(lower) ? upper_bound(upper) : upper_bound(lower);
    return make_interval(lo, hi);
  } else {
    (void)lower;
    (void)upper;
    return estimate;
  }
}

template <class S>
S smin(const S& a, const S& b) {
  return -smax<S>(-a, -b);
}

template <class S>
S sabs(const S& x) {
  using std::abs;
  return abs(x);
}

template <class S>
S sq(const S& x) {
  return regatta::detail::square(x);
}

/// A point value ≥ every element of every entry (the shift of a stable softmax; any shift is exact
/// mathematically, a point keeps intervals narrow).
template <class S, class Range>
S pivot_max(const Range& values) {
  bool first = true;
  S best{};
  for (const S& v : values) {
    const S p = scalar_traits<S>::pivot(v);
    if constexpr (is_interval_v<S>) {
      if (first || upper_bound(p) > upper_bound(best)) best = p;
    } else {
      if (first || p > best) best = p;
    }
    first = false;
  }
  return best;
}

/// softmax of the entries with visible[j] (all when `visible` is empty); invisible entries get exactly 0.
template <class S>
std::vector<S> softmax(const std::vector<S>& s, const std::vector<bool>& visible = {}) {
  using std::exp;
  const std::size_t m = s.size();
  std::vector<S> shown;
  for (std::size_t j = 0; j < m; ++j)
    if (visible.empty() || visible[j]) shown.push_back(s[j]);
  const S c = pivot_max<S>(shown);
  std::vector<S> p(m, S(0));
  S total(0);
  for (std::size_t j = 0; j < m; ++j)
    if (visible.empty() || visible[j]) {
      p[j] = exp(s[j] - c);
      total += p[j];
    }
  for (std::size_t j = 0; j < m; ++j)
    if (visible.empty() || visible[j]) p[j] /= total;
  return p;
}

/// log Σ_j exp(s_j), shifted by a point pivot.
template <class S>
S log_sum_exp(const std::vector<S>& s) {
  using std::exp;
  using std::log;
  const S c = pivot_max<S>(s);
  S total(0);
  for (const S& v : s) total += exp(v - c);
  return c + log(total);
}

template <class S, class Derived>
S euclidean_norm(const Eigen::MatrixBase<Derived>& v) {
  using std::sqrt;
  S total(0);
  for (Eigen::Index i = 0; i < v.rows(); ++i)
    for (Eigen::Index j = 0; j < v.cols(); ++j) total += sq<S>(v(i, j));
  return sqrt(total);
}

/// ‖M‖_F.
template <class S>
S frobenius(const Matrix<S>& M) {
  return euclidean_norm<S>(M);
}

/// ‖M‖∞ = max_i Σ_j |M_ij| (induced ℓ∞ norm).
template <class S>
S norm_inf(const Matrix<S>& M) {
  S best(0);
  for (Eigen::Index i = 0; i < M.rows(); ++i) {
    S row(0);
    for (Eigen::Index j = 0; j < M.cols(); ++j) row += sabs<S>(M(i, j));
    best = smax<S>(best, row);
  }
  return best;
}

/// ‖M‖₁ = max_j Σ_i |M_ij| (induced ℓ1 norm).
template <class S>
S norm_1(const Matrix<S>& M) {
  S best(0);
  for (Eigen::Index j = 0; j < M.cols(); ++j) {
    S col(0);
    for (Eigen::Index i = 0; i < M.rows(); ++i) col += sabs<S>(M(i, j));
    best = smax<S>(best, col);
  }
  return best;
}

/// ‖M‖₂. double: Jacobi SVD; mpfr: √λ_max of the Gram matrix at the working precision (an estimate with
/// relative error about N·eps); interval: [certified lower bound from the power-iteration witness,
/// min(certified Cholesky bound, ‖M‖_F)] — the Frobenius norm makes rank-one matrices tight.
template <class S>
S norm_2(const Matrix<S>& M);
template <>
double norm_2<double>(const Matrix<double>& M);
template <>
mpfr norm_2<mpfr>(const Matrix<mpfr>& M);
template <>
interval norm_2<interval>(const Matrix<interval>& M);

/// a · b by the plain triple loop (every scalar type).
template <class S>
Matrix<S> mul(const Matrix<S>& a, const Matrix<S>& b) {
  return regatta::detail::plain_product(a, b);
}

/// Decimal text of an interval's ends with `digits` significant digits, outward (core/decimal.hpp): the
/// lower end rounded down, the upper end rounded up, so that [lower_text, upper_text] encloses x.
std::string lower_text(const interval& x, int digits = 20);
std::string upper_text(const interval& x, int digits = 20);
/// Endpoints of an interval rounded outward to doubles.
double lower_double(const interval& x);
double upper_double(const interval& x);

}  // namespace regatta::proofs::num
