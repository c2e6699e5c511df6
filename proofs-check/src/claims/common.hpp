#pragma once
// Internal: what every claim file uses — side constructors, the relative defect of an identity, Λ_n, part
// constructors, and the registration macro (register.hpp). Points are decoded through layout.hpp.
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/lambert_w.hpp>
#include <regatta/proofs/claim.hpp>
#include <regatta/proofs/detail/numeric.hpp>
#include "register.hpp"

namespace regatta::proofs::claims {

using num::lift;

template <class S>
Side<S> le(S lhs, S rhs) {
  return Side<S>{std::move(lhs), std::move(rhs), true};
}
/// lhs ≤ rhs for sides that may be zero or of either sign, as (lhs − rhs) + 1 ≤ 1: the ratio is then 1 plus
/// the signed excess, and equality (at any magnitude) is ratio 1.
template <class S>
Side<S> le_shifted(const S& lhs, const S& rhs) {
  return Side<S>{lhs - rhs + S(1), S(1), true};
}
template <class S>
Side<S> eq(S value, S reference) {
  return Side<S>{std::move(value), std::move(reference), true};
}
template <class S>
Side<S> grows(S quantity) {
  return Side<S>{std::move(quantity), S(0), true};
}
template <class S>
Side<S> off() {
  return Side<S>{S(0), S(0), false};
}

/// ‖a − b‖ / (1 + ‖b‖), entrywise 2-norms (Frobenius for matrices): the defect of an identity a = b, compared
/// with 0.
template <class A, class B>
typename A::Scalar relative_defect(const Eigen::MatrixBase<A>& a, const Eigen::MatrixBase<B>& b) {
  using S = typename A::Scalar;
  return num::euclidean_norm<S>(Matrix<S>(a - b)) / (S(1) + num::euclidean_norm<S>(b));
}

/// Λ_n = W0((n − 1)/e) (claims kim.*; enclosure for interval).
template <class S>
S lambda_n(long n) {
  return lambert_phi_inverse<S>(lift<S>(static_cast<double>(n - 1)));
}

/// ClaimInfo::evaluated_at of a claim whose sides contain spectral norms num::norm_2 (numeric.hpp).
inline const std::string spectral_norm_evaluation =
    "Spectral norms are enclosed, not estimated: the lower end is ||M v|| / ||v|| in interval arithmetic at "
    "the double power-iteration vector v of the midpoint matrix (lifted exactly; every v gives a valid lower "
    "bound), the upper end an interval Cholesky certificate of theta^2 I - M^T M (or ||M||_F); the iterate "
    "enters only through that quotient.";

/// Part constructors.
inline Part at_most(std::string name, int accuracy_bits = 0) {
  Part p{std::move(name), PartKind::at_most};
  p.accuracy_bits = accuracy_bits;
  return p;
}
/// Bits of a double computation (the accuracy of parts evaluated by double solvers).
inline constexpr int double_bits = 53;
inline Part equal(std::string name, int slack_bits = 32) {
  Part p{std::move(name), PartKind::equal};
  p.slack_bits = slack_bits;
  return p;
}
inline Part growth(std::string name) { return Part{std::move(name), PartKind::growth}; }

}  // namespace regatta::proofs::claims
