#pragma once
// Internal: the matrix product of the generic (scalar-templated) numerical code, one definition for the
// library: Eigen's product for IEEE types (blocked, vectorised), the plain triple loop for the multiprecision
// and interval types, whose every operation (outward-rounded for interval) then runs at the working
// precision and which Eigen's blocked kernels do not handle well. (proofs-check keeps the plain loop for
// every type: numeric.hpp's num::mul, the reference order of summation.)
#include <type_traits>

#include <regatta/core/detail/scalar_math.hpp>
#include <regatta/core/eigen.hpp>

namespace regatta::detail {

/// a · b for Eigen expressions a, b of scalar S (evaluated once).
template <class S, class A, class B>
Matrix<S> product(const A& a, const B& b) {
  if constexpr (std::is_floating_point_v<S>) {
    Matrix<S> r(a.rows(), b.cols());
    r.noalias() = a * b;
    return r;
  } else if constexpr (std::is_same_v<A, Matrix<S>> && std::is_same_v<B, Matrix<S>>) {
    return plain_product<S>(a, b);
  } else {
    return plain_product<S>(Matrix<S>(a), Matrix<S>(b));
  }
}

}  // namespace regatta::detail
