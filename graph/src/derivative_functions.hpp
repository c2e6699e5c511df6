#pragma once
// The first derivatives of the elementwise node kinds for each scalar type, shared by the forward-mode
// (jvp_rules.cpp) and reverse-mode (vjp_rules.cpp) rules (docs/graph.md, "Derivatives"): the point value
// for double, an enclosure of the derivative at every point of the interval for interval64 and interval
// (MPFI). At the kink of ReLU the double value is 0 (a subgradient) and the interval value is [0, 1], the
// generalised (Clarke) derivative, so the enclosures stay valid for the mean-value bounds built on them
// (docs/graph.md#forward-mode-and-jacobian-enclosures).
#include <cmath>
#include <numbers>

#include <regatta/core/scalar.hpp>
#include <regatta/graph/graph.hpp>

#include "scalar_functions.hpp"

namespace regatta::graph::detail {

/// Whether v is exactly 0 (a point 0 for the interval types; their comparison operators refuse to order
/// overlapping intervals).
inline bool is_zero(double v) { return v == 0; }
inline bool is_zero(const interval64& v) { return v.lower() == 0 && v.upper() == 0; }
inline bool is_zero(const interval& v) { return lower_bound(v) == 0 && upper_bound(v) == 0; }

double relu_derivative(double x);
interval64 relu_derivative(const interval64& x);
interval relu_derivative(const interval& x);

/// erf′(x) = 2/√π·e^{−x²}.
double erf_derivative(double x);
interval64 erf_derivative(const interval64& x);
interval erf_derivative(const interval& x);

/// d/dx of x·Φ(x) = Φ(x) + x·φ(x); of 0.5·x·(1 + tanh u), u = √(2/π)(x + c·x³) with c = 0.044715 (the
/// binary64 constant the forward uses): 0.5·(1 + tanh u) + 0.5·x·(1 − tanh² u)·√(2/π)(1 + 3c·x²).
double gelu_derivative(double x, bool tanh_approximation);
template <class S>
S gelu_derivative(const S& x, bool tanh_approximation) {
  const S root = sqrt_2_over_pi(x);  // √(2/π)
  if (tanh_approximation) {
    const S c(0.044715);
    const S t = tanh_of(root * (x + c * x * x * x));
    return S(0.5) * (S(1.0) + t) +
           S(0.5) * x * (S(1.0) - square_of(t)) * root * (S(1.0) + S(3.0) * c * square_of(x));
  }
  const S cdf = (S(1.0) + erf_of(x * inv_sqrt2(x))) / S(2.0);
  const S pdf = exp_of(S(-(square_of(x) / S(2.0)))) * root / S(2.0);  // e^{−x²/2}/√(2π)
  return cdf + x * pdf;
}

/// d/dx x^p for a constant p (0 for p = 0, 1 for p = 1).
inline double pow_derivative(double x, double p) {
  return p == 0 ? 0.0 : p == 1 ? 1.0 : p * std::pow(x, p - 1);
}
template <class S>
S pow_derivative(const S& x, double p) {
  return p == 0 ? S(0.0) : p == 1 ? S(1.0) : S(S(p) * pow_of(x, p - 1));
}

/// f′ of the one-operand elementwise node kinds (neg … gelu) from the operand x and the value y = f(x).
template <class S>
S elementwise_derivative(const Node& node, const S& x, const S& y) {
  switch (node.op) {
    case Op::neg:
      return S(-1.0);
    case Op::sqrt:
      return S(S(0.5) / y);
    case Op::reciprocal:
      return S(-y * y);
    case Op::relu:
      return relu_derivative(x);
    case Op::erf:
      return erf_derivative(x);
    case Op::tanh:
      return S(S(1.0) - y * y);
    case Op::sigmoid:
      return S(y * (S(1.0) - y));
    case Op::gelu:
      return gelu_derivative(x, std::get<GeluAttrs>(node.attributes).tanh_approximation);
    default:
      return S(1.0);  // identity
  }
}

}  // namespace regatta::graph::detail
