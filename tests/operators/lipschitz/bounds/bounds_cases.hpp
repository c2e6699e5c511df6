#pragma once
// The shared part of the bound tests (bounds_test.cpp, bounds_refusals_test.cpp): random and scalar layers,
// dense reference norms, the tolerances of docs/math/README.md#checking, and settings.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>
#include "support/tolerance.hpp"

namespace regatta::lip::bounds_test {

using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Prenorm;

inline AttentionLayer layer_of(AttentionKind kind, int d, int heads, std::uint64_t seed, double scale = 1.0,
                               bool biases = false) {
  operators::RandomLayerSpec spec;
  spec.d = d;
  spec.heads = heads;
  spec.seed = seed;
  spec.scale = scale;
  spec.kind = kind;
  spec.biases = biases;
  return operators::random_layer(spec);
}

/// One-dimensional single-head tied L2 layer with W^Q = W^K = q, W^V = W^O = 1
/// (docs/math/bounds.md#kim-thm32, docs/math/bounds.md#kim-tightness).
inline AttentionLayer scalar_l2_layer(double q) {
  AttentionLayer L;
  L.d = L.heads = L.head_dim = L.value_dim = 1;
  L.kind = AttentionKind::l2;
  L.WQ = {Matrix<double>::Constant(1, 1, q)};
  L.WK = L.WQ;
  L.WV = {Matrix<double>::Constant(1, 1, 1.0)};
  L.WO = Matrix<double>::Constant(1, 1, 1.0);
  return L;
}

inline double svd_norm(const Matrix<double>& M) { return largest_singular_value(M); }

inline double max_row_sum(const Matrix<double>& M) { return M.cwiseAbs().rowwise().sum().maxCoeff(); }

// ---- tolerances (docs/math/README.md#checking) ----

/// Relative accuracy of a reference value written with the significant decimal digits of `text`: one unit in
/// its last digit (whether the table rounded or truncated), at most 10^(1 − digits) relative.
inline mpfr significant_digits_accuracy(const std::string& text) {
  int digits = 0;
  bool leading = true;
  for (char ch : text) {
    if (ch < '0' || ch > '9') continue;
    if (leading && ch == '0') continue;
    leading = false;
    ++digits;
  }
  return pow(mpfr(10), mpfr(1 - digits));
}

/// Absolute accuracy of a reference value written with the decimals of `text`: one unit in its last place.
inline double last_place(const std::string& text) {
  const std::size_t point = text.find('.');
  return std::pow(10.0, -double(point == std::string::npos ? 0 : text.size() - point - 1));
}

/// A bound's formula evaluated in double twice (by evaluate and independently here) from spectral norms and
/// row sums of d×d products: each a chain of ≲ 4·d rounded operations (a product of width d, then JacobiSVD,
/// spectral_norm_reference or a d-term sum), and ≲ 32 more to combine the heads, Λ_n and the radii. c = 2
/// for the two sides.
inline double formula_rounding(Eigen::Index d) {
  return testing::rounding_bound<double>(2, 4.0 * double(d) + 32);
}

/// exp(x) turns a relative error r of its argument x into the relative error x·r of its value, so a formula
/// whose exponentials' arguments sum to `exponents` carries (1 + exponents) times its inputs' rounding.
inline double through_exponentials(double rounding, double exponents) { return rounding * (1 + exponents); }

inline BoundSetting setting_with(std::optional<std::int64_t> n, std::optional<double> radius) {
  BoundSetting s;
  s.n = n;
  s.radius = radius;
  return s;
}

}  // namespace regatta::lip::bounds_test
