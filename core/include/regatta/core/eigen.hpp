#pragma once
// Eigen glue for the multiprecision scalars: regatta's own Eigen::NumTraits specialisations.
//
// Boost ships an Eigen adaptor, but its NumTraits has had defects (lowest() returning a positive number in
// some versions, digits10 frozen at compile time for variable precision). These specialisations read the
// *current* working precision, and lowest() == -highest(). Include this header, not <Eigen/Core> alone,
// wherever Eigen matrices of mpfr or interval are used.
#include <Eigen/Core>

#include <regatta/core/scalar_traits.hpp>

namespace regatta::detail {
// Defined in core/src/scalar_traits.cpp (they depend on the run-time precision).
mpfr mpfr_highest();
int current_digits10();
interval interval_highest();
}  // namespace regatta::detail

namespace regatta::detail {
template <class T>
T numtraits_highest();
template <>
inline mpfr numtraits_highest<mpfr>() {
  return mpfr_highest();
}
template <>
inline interval numtraits_highest<interval>() {
  return interval_highest();
}

/// The NumTraits shared by the run-time-precision types: every member reads the *current* precision.
template <class T>
struct MultiprecisionNumTraits : Eigen::GenericNumTraits<T> {
  using Real = T;
  using NonInteger = T;
  using Literal = T;
  using Nested = T;
  enum {
    IsComplex = 0,
    IsInteger = 0,
    IsSigned = 1,
    RequireInitialization = 1,
    ReadCost = Eigen::HugeCost,
    AddCost = Eigen::HugeCost,
    MulCost = Eigen::HugeCost
  };
  static Real epsilon() { return scalar_traits<Real>::epsilon(); }
  static Real dummy_precision() { return epsilon() * 1024; }
  static Real highest() { return numtraits_highest<Real>(); }
  static Real lowest() { return -numtraits_highest<Real>(); }
  static Real infinity() { return scalar_traits<Real>::infinity(); }
  static Real quiet_NaN() { return scalar_traits<Real>::quiet_nan(); }
  static int digits10() { return current_digits10(); }
  static int digits() { return scalar_traits<Real>::digits(); }
};
}  // namespace regatta::detail

namespace Eigen {

template <>
struct NumTraits<regatta::mpfr> : regatta::detail::MultiprecisionNumTraits<regatta::mpfr> {};
template <>
struct NumTraits<regatta::interval> : regatta::detail::MultiprecisionNumTraits<regatta::interval> {};

}  // namespace Eigen

namespace regatta {

template <class S>
using Matrix = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class S>
using Vector = Eigen::Matrix<S, Eigen::Dynamic, 1>;
/// A read-only view of a row-major matrix with unit inner stride: binds a Matrix<S>, a block of whole rows
/// or a Map of someone else's C-ordered buffer (a NumPy array) without copying. Entry points that only read
/// their input take this, so that a caller holding foreign memory need not copy it into a Matrix first.
template <class S>
using MatrixRef = Eigen::Ref<const Matrix<S>>;

/// Converts every entry with scalar_cast<To> (see convert.hpp for what each direction guarantees).
template <class To, class Derived>
Matrix<To> matrix_cast(const Eigen::MatrixBase<Derived>& m);

}  // namespace regatta

#include <regatta/core/convert.hpp>

template <class To, class Derived>
regatta::Matrix<To> regatta::matrix_cast(const Eigen::MatrixBase<Derived>& m) {
  Matrix<To> out(m.rows(), m.cols());
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j) out(i, j) = scalar_cast<To>(m(i, j));
  return out;
}
