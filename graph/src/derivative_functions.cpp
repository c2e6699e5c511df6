// Enclosures of the derivatives of ReLU, erf and GELU (derivative_functions.hpp; docs/graph.md,
// "Derivatives").
#include "derivative_functions.hpp"

namespace regatta::graph::detail {

double relu_derivative(double x) { return x > 0 ? 1.0 : 0.0; }
interval64 relu_derivative(const interval64& x) {
  if (x.is_nan()) return x;
  if (x.lower() > 0) return interval64(1.0);
  if (x.upper() < 0) return interval64(0.0);
  return interval64::hull(0.0, 1.0);
}
interval relu_derivative(const interval& x) {
  const mpfr lo = lower_bound(x), hi = upper_bound(x);
  if (lo > 0) return interval(1);
  if (hi < 0) return interval(0);
  return make_interval(mpfr(0), mpfr(1));
}

double erf_derivative(double x) { return 2 / std::sqrt(std::numbers::pi) * std::exp(-x * x); }
// 2/√π = √(2/π)·√2, both enclosed.
interval64 erf_derivative(const interval64& x) {
  return sqrt_2_over_pi(x) * sqrt(interval64(2.0)) * exp(-square_of(x));
}
interval erf_derivative(const interval& x) {
  return sqrt_2_over_pi(x) * sqrt(interval(2)) * exp(interval(-square_of(x)));
}

double gelu_derivative(double x, bool tanh_approximation) {
  if (tanh_approximation) {
    const double c = std::sqrt(2.0 / std::numbers::pi);
    const double t = std::tanh(c * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
  }
  const double cdf = 0.5 * (1 + std::erf(x / std::numbers::sqrt2));
  const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
  return cdf + x * pdf;
}

}  // namespace regatta::graph::detail
