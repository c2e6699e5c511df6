#pragma once
// The elementwise functions of the node kinds for each scalar type: the point value for double, an
// enclosure of the exact function over the interval for interval64 and interval (docs/graph.md).
#include <cmath>
#include <numbers>

#include <regatta/core/scalar.hpp>
#include <regatta/core/scalar_traits.hpp>

namespace regatta::graph::detail {

// erf: increasing, so the image of [a, b] is [erf a, erf b], each endpoint from MPFR rounded outward.
double erf_of(double x);
interval64 erf_of(const interval64& x);
interval erf_of(const interval& x);

// tanh x = 1 − 2/(e^{2x} + 1): one occurrence of x, so the interval formula is the exact image (rounded out).
inline double tanh_of(double x) { return std::tanh(x); }
template <class S>
S tanh_of(const S& x) {
  return S(1.0) - S(2.0) / (exp(S(2.0) * x) + S(1.0));
}

// σ(x) = 1/(1 + e^{−x}): one occurrence of x.
inline double sigmoid_of(double x) { return 1.0 / (1.0 + std::exp(-x)); }
template <class S>
S sigmoid_of(const S& x) {
  return S(1.0) / (S(1.0) + exp(-x));
}

inline double relu_of(double x) { return x > 0 ? x : 0.0; }
inline interval64 relu_of(const interval64& x) { return max(x, interval64(0.0)); }
interval relu_of(const interval& x);

inline double exp_of(double x) { return std::exp(x); }
template <class S>
S exp_of(const S& x) {
  return exp(x);
}
inline double sqrt_of(double x) { return std::sqrt(x); }
template <class S>
S sqrt_of(const S& x) {
  return sqrt(x);
}
inline double log_of(double x) { return std::log(x); }
template <class S>
S log_of(const S& x) {
  return log(x);
}

/// x² as a product of magnitudes: for an interval straddling 0, |x|·|x| is never negative where x·x is.
inline double square_of(double x) { return x * x; }
template <class S>
S square_of(const S& x) {
  const S m = abs(x);
  return m * m;
}

/// 1/√2 and √(2/π) enclosed in S (a point for double).
double inv_sqrt2(double);
interval64 inv_sqrt2(const interval64&);
interval inv_sqrt2(const interval&);
double sqrt_2_over_pi(double);
interval64 sqrt_2_over_pi(const interval64&);
interval sqrt_2_over_pi(const interval&);

/// GELU: x·Φ(x) with Φ(x) = (1 + erf(x/√2))/2 (a valid enclosure for intervals: every factor is enclosed),
/// or 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))).
template <class S>
S gelu_of(const S& x, bool tanh_approximation) {
  if (tanh_approximation)
    return S(0.5) * x * (S(1.0) + tanh_of(sqrt_2_over_pi(x) * (x + S(0.044715) * x * x * x)));
  return x * (S(1.0) + erf_of(x * inv_sqrt2(x))) / S(2.0);
}

/// x^e for a constant exponent e: repeated products for integers |e| ≤ 64 (exact ONNX Pow semantics on
/// negative bases), √x for e = 1/2, exp(e·log x) otherwise (x > 0).
template <class S>
S pow_of(const S& x, double e) {
  if (e == std::floor(e) && std::fabs(e) <= 64) {
    auto n = static_cast<long>(std::fabs(e));
    S r(1.0), b = x;
    while (n > 0) {
      if (n & 1) r = r * b;
      n >>= 1;
      if (n > 0) b = b * b;
    }
    return e < 0 ? S(1.0) / r : r;
  }
  if (e == 0.5) return sqrt_of(x);
  if constexpr (std::is_same_v<S, double>)
    return std::pow(x, e);
  else
    return exp_of(S(e) * log_of(x));
}

}  // namespace regatta::graph::detail
