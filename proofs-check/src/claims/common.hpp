#pragma once
// Internal: what every claim file uses — side constructors, point decoding, Λ_n, and the registration
// macro (register.hpp).
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

/// Reads consecutive coordinates of a point as matrices and scalars (exact lifts to S).
class Reader {
 public:
  explicit Reader(const Point& p) : p_(p) {}
  template <class S>
  Matrix<S> matrix(Eigen::Index rows, Eigen::Index cols) {
    Matrix<S> m(rows, cols);
    for (Eigen::Index i = 0; i < rows; ++i)
      for (Eigen::Index j = 0; j < cols; ++j) m(i, j) = lift<S>(next());
    return m;
  }
  template <class S>
  Vector<S> vector(Eigen::Index n) {
    Vector<S> v(n);
    for (Eigen::Index i = 0; i < n; ++i) v(i) = lift<S>(next());
    return v;
  }
  template <class S>
  S scalar() {
    return lift<S>(next());
  }
  double raw() { return next(); }

 private:
  double next() { return offset_ < p_.x.size() ? p_.x[offset_++] : 0.0; }
  const Point& p_;
  std::size_t offset_ = 0;
};

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

/// The matrix with rows of a point's coordinates, as nlohmann::json (counterexample files).
inline nlohmann::json rows_json(const std::vector<double>& x, std::size_t offset, long rows, long cols) {
  nlohmann::json out = nlohmann::json::array();
  for (long i = 0; i < rows; ++i) {
    nlohmann::json row = nlohmann::json::array();
    for (long j = 0; j < cols; ++j) {
      const std::size_t at = offset + static_cast<std::size_t>(i * cols + j);
      row.push_back(at < x.size() ? x[at] : 0.0);
    }
    out.push_back(row);
  }
  return out;
}

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
