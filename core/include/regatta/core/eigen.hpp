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

namespace Eigen {

template <>
struct NumTraits<regatta::mpfr> : GenericNumTraits<regatta::mpfr> {
  using Real = regatta::mpfr;
  using NonInteger = regatta::mpfr;
  using Literal = regatta::mpfr;
  using Nested = regatta::mpfr;
  enum {
    IsComplex = 0,
    IsInteger = 0,
    IsSigned = 1,
    RequireInitialization = 1,
    ReadCost = HugeCost,
    AddCost = HugeCost,
    MulCost = HugeCost
  };
  static Real epsilon() { return regatta::scalar_traits<Real>::epsilon(); }
  static Real dummy_precision() { return epsilon() * 1024; }
  static Real highest() { return regatta::detail::mpfr_highest(); }
  static Real lowest() { return -regatta::detail::mpfr_highest(); }
  static Real infinity() { return regatta::scalar_traits<Real>::infinity(); }
  static Real quiet_NaN() { return regatta::scalar_traits<Real>::quiet_nan(); }
  static int digits10() { return regatta::detail::current_digits10(); }
  static int digits() { return regatta::scalar_traits<Real>::digits(); }
};

template <>
struct NumTraits<regatta::interval> : GenericNumTraits<regatta::interval> {
  using Real = regatta::interval;
  using NonInteger = regatta::interval;
  using Literal = regatta::interval;
  using Nested = regatta::interval;
  enum {
    IsComplex = 0,
    IsInteger = 0,
    IsSigned = 1,
    RequireInitialization = 1,
    ReadCost = HugeCost,
    AddCost = HugeCost,
    MulCost = HugeCost
  };
  static Real epsilon() { return regatta::scalar_traits<Real>::epsilon(); }
  static Real dummy_precision() { return epsilon() * 1024; }
  static Real highest() { return regatta::detail::interval_highest(); }
  static Real lowest() { return -regatta::detail::interval_highest(); }
  static Real infinity() { return regatta::scalar_traits<Real>::infinity(); }
  static Real quiet_NaN() { return regatta::scalar_traits<Real>::quiet_nan(); }
  static int digits10() { return regatta::detail::current_digits10(); }
  static int digits() { return regatta::scalar_traits<Real>::digits(); }
};

}  // namespace Eigen

namespace regatta {

template <class S>
using Matrix = Eigen::Matrix<S, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class S>
using Vector = Eigen::Matrix<S, Eigen::Dynamic, 1>;

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
