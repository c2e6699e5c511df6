#pragma once
// The shared part of the attention tests (attention_test.cpp, attention_load_test.cpp,
// attention_kernels_test.cpp): random matrices, the naive definition of attention evaluated entry by entry,
// and the rounding tolerances of comparing two double evaluations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <regatta/core/error.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/core/io/safetensors.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>
#include <string>
#include <vector>

#include "../support/tolerance.hpp"

namespace regatta::operators::attention_test {

inline Matrix<double> gaussian(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed) {
  const Vector<double> z = standard_normal(rows * cols, seed);
  return Eigen::Map<const Matrix<double>>(z.data(), rows, cols);
}

/// The definition of docs/math/attention.md#layers, evaluated entry by entry.
inline Matrix<double> naive_attend(const AttentionLayer& L, const Matrix<double>& X, const Matrix<double>& Y,
                                   const AttentionOptions& o) {
  const Eigen::Index n = X.rows(), m = Y.rows();
  const double c = 1.0 / std::sqrt(double(L.head_dim));
  Matrix<double> out = Matrix<double>::Zero(n, L.d);
  for (int h = 0; h < L.heads; ++h) {
    Matrix<double> Q = X * L.WQ[h], K = Y * L.WK[h];
    Matrix<double> V = L.kind == AttentionKind::dot
                           ? Matrix<double>(Y * L.WV[h])
                           : Matrix<double>(Y * (L.WQ[h] * L.WQ[h].transpose() * c) * L.WV[h]);
    if (!L.bQ.empty()) {
      Q.rowwise() += L.bQ[h].transpose();
      K.rowwise() += L.bK[h].transpose();
      V.rowwise() += L.bV[h].transpose();
    }
    Matrix<double> P(n, m);
    for (Eigen::Index i = 0; i < n; ++i) {
      for (Eigen::Index j = 0; j < m; ++j) {
        const double s = L.kind == AttentionKind::dot ? c * Q.row(i).dot(K.row(j))
                                                      : -c * (Q.row(i) - K.row(j)).squaredNorm();
        P(i, j) = o.causal && j > i ? -std::numeric_limits<double>::infinity() : s;
      }
      const double mx = P.row(i).maxCoeff();
      P.row(i) = (P.row(i).array() - mx).exp();
      P.row(i) /= P.row(i).sum();
    }
    out += P * V * L.WO.middleRows(Eigen::Index(h) * L.value_dim, L.value_dim);
  }
  if (L.bO.size()) out.rowwise() += L.bO.transpose();
  if (o.residual) out += X;
  return out;
}

inline double max_abs_diff(const Matrix<double>& a, const Matrix<double>& b) {
  EXPECT_EQ(a.rows(), b.rows());
  EXPECT_EQ(a.cols(), b.cols());
  return (a - b).cwiseAbs().maxCoeff();
}

/// An output entry in double: projections of width ≤ 12, a softmax or up to 10 Sinkhorn half-steps over
/// ≤ 11 keys, the per-head sums and the output projection, a chain of ≲ 512 rounded operations. c = 2 for
/// the two evaluations.
inline const double forward_rounding = testing::rounding_bound<double>(2, 512);

/// forward_rounding relative to the output magnitude (absolute below 1).
inline double tolerance(const Matrix<double>& reference) {
  return forward_rounding * std::max(1.0, reference.cwiseAbs().maxCoeff());
}

/// A kernel entry (≤ 1): the score (projections of width ≤ 10, a head-width product, the biases), its
/// exponential, which turns the score's absolute rounding into a relative one (scores of size ≲ 8 here),
/// and up to 10 normalisations over ≤ 12 entries: ≲ 128 operations. c = 2 for the two evaluations.
inline const double kernel_rounding = testing::rounding_bound<double>(2, 128);

/// A sum of n kernel entries ≤ 1 against 1: n roundings; c = 4 for the entries' own rounding.
inline double sum_rounding(Eigen::Index n) { return testing::rounding_bound<double>(4, double(n)); }

/// Tied L2 under a translation X + 1bᵀ: the shifted scores and projections round relative to |x + b| rather
/// than |x|, with |b| ≲ 2|x| here: the rounding grows by (1 + 2)² = 9.
inline constexpr double shift_growth = 9;

/// The InputError's message mentions every fragment.
inline void expect_input_error(const std::function<void()>& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    for (const std::string& s : fragments)
      EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what() << " lacks " << s;
  }
}

}  // namespace regatta::operators::attention_test
