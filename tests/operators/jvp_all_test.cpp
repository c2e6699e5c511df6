// Linearization::jvp_all (many tangents at once, block_tangents.cpp) against jvp one tangent at a time
// (block_derivatives.cpp), two code paths for the same derivative: in double they agree to rounding; in
// interval64 jvp_all's enclosure contains the double JVP at every member point tried (the box's corners of
// the tangents, evaluated tangent by tangent in double) and is at most a small factor wider than the
// per-tangent interval64 enclosure. Configurations cover dot and l2 scores, Sinkhorn kernels, causal masks,
// pre-norms, residuals, biases, rotary embeddings and a stack of two blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <regatta/core/interval64.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/layer.hpp>

#include "support/random_layers.hpp"
#include "support/tolerance.hpp"

namespace regatta::operators {
namespace {

/// Rounded operations on one entry's longest chain through a block's JVP at these sizes (n ≤ 6, d ≤ 8, two
/// blocks): the pre-norm bracket 2d + 4, the query/key/value maps d each, scores d_h, t ≤ 3 kernel steps of
/// n terms, the value products n and the heads; below 100 per block.
constexpr double jvp_chain = 200;
/// c = 64 as for one double block evaluation (differentiable_test.cpp): exp in the kernel carries the
/// score's relative error; two paths add their errors.
const double two_paths = testing::rounding_bound<double>(2 * 64, jvp_chain);
/// jvp_all's midpoint–radius products are exact hulls for a point factor and at most 1.5× the hull for two
/// interval factors (Rump), once per product on the chain (value map, score, kernel product: three
/// compounding products per block, two blocks), plus the products' own rounding terms: 1.5^6 ≈ 11.4.
constexpr double width_factor = 12;
/// Tangents per test (the region pass of a model has one per input coordinate).
constexpr int tangent_count = 7;

struct Config {
  std::string name;
  AttentionKind kind = AttentionKind::dot;
  int d = 6, heads = 2;
  bool biases = false, causal = false, residual = false;
  Prenorm prenorm = Prenorm::none;
  int sinkhorn = 1;
  int blocks = 1;
  double rope_theta = 0;  ///< > 0: rotary position embeddings with this base
};

std::vector<Config> configs() {
  return {{"dot"},
          {"dot_layernorm_residual_biases", AttentionKind::dot, 8, 2, true, false, true, Prenorm::layernorm},
          {"dot_causal_rmsnorm", AttentionKind::dot, 6, 3, false, true, true, Prenorm::rmsnorm},
          {"l2_residual", AttentionKind::l2, 6, 2, true, false, true},
          {"dot_sinkhorn3", AttentionKind::dot, 4, 2, false, false, false, Prenorm::none, 3},
          {"dot_layernorm_stack", AttentionKind::dot, 8, 4, true, false, true, Prenorm::layernorm, 1, 2},
          {"dot_rope_causal", AttentionKind::dot, 8, 2, false, true, true, Prenorm::rmsnorm, 1, 1, 7.5}};
}

Matrix<double> gaussian(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed, double scale = 1.0) {
  const Vector<double> z = standard_normal(rows * cols, seed);
  return scale * Eigen::Map<const Matrix<double>>(z.data(), rows, cols);
}

template <class S>
Stack<S> stack_for(const Config& c) {
  std::vector<Block<S>> blocks;
  for (int b = 0; b < c.blocks; ++b) {
    RandomLayerSpec s;
    s.d = c.d;
    s.heads = c.heads;
    s.kind = c.kind;
    s.biases = c.biases;
    s.seed = 40 + std::uint64_t(b);
    AttentionLayer L = random_layer(s);
    if (c.prenorm != Prenorm::none) testing::draw_norm_weights(L, s.seed);
    if (c.rope_theta > 0) L.rotary = Rotary{c.rope_theta};
    AttentionOptions o;
    o.causal = c.causal;
    o.residual = c.residual;
    o.prenorm = c.prenorm;
    o.sinkhorn_iterations = c.sinkhorn;
    blocks.emplace_back(L, o);
  }
  return Stack<S>(std::move(blocks));
}

class JvpAll : public ::testing::TestWithParam<Config> {};

TEST_P(JvpAll, DoubleEqualsOneTangentAtATime) {
  const Config& c = GetParam();
  const Eigen::Index n = 5;
  const Linearization<double> lin = stack_for<double>(c).linearize(gaussian(n, c.d, 1));
  std::vector<Matrix<double>> T;
  for (int p = 0; p < tangent_count; ++p) T.push_back(gaussian(n, c.d, 100 + std::uint64_t(p)));
  const std::vector<Matrix<double>> all = lin.jvp_all(T);
  ASSERT_EQ(all.size(), T.size());
  for (std::size_t p = 0; p < T.size(); ++p) {
    const Matrix<double> one = lin.jvp(T[p]);
    EXPECT_LE((all[p] - one).cwiseAbs().maxCoeff(), two_paths * (1 + one.cwiseAbs().maxCoeff())) << p;
  }
}

TEST_P(JvpAll, IntervalEnclosesMembersAndStaysNearThePerTangentWidth) {
  const Config& c = GetParam();
  const Eigen::Index n = 5;
  const Matrix<double> X = gaussian(n, c.d, 1);
  // A small box around X (the region of a pass) and interval tangents of relative width 10⁻³.
  const double box = 1e-6, tangent_width = 1e-3;
  Matrix<interval64> Xi(n, c.d);
  for (Eigen::Index k = 0; k < X.size(); ++k) Xi(k) = interval64::hull(X(k) - box, X(k) + box);
  const Linearization<interval64> lin = stack_for<interval64>(c).linearize(Xi);
  const Linearization<double> point = stack_for<double>(c).linearize(X);
  std::vector<Matrix<double>> Td;
  std::vector<Matrix<interval64>> T;
  for (int p = 0; p < tangent_count; ++p) {
    Td.push_back(gaussian(n, c.d, 100 + std::uint64_t(p)));
    Matrix<interval64> t(n, c.d);
    for (Eigen::Index k = 0; k < t.size(); ++k) {
      const double v = Td.back()(k), w = tangent_width * std::fabs(v);
      t(k) = p == 0 ? interval64(v) : interval64::hull(v - w, v + w);  // tangent 0 is a point
    }
    T.push_back(t);
  }
  const std::vector<Matrix<interval64>> all = lin.jvp_all(T);
  ASSERT_EQ(all.size(), T.size());
  for (std::size_t p = 0; p < T.size(); ++p) {
    const Matrix<interval64> one = lin.jvp(T[p]);
    // Members: the double JVP at X of the tangent's centre and of two opposite corners.
    for (int corner = -1; corner <= 1; ++corner) {
      Matrix<double> v = Td[p];
      if (p != 0)
        for (Eigen::Index k = 0; k < v.size(); ++k) v(k) += corner * tangent_width * std::fabs(v(k));
      const Matrix<double> value = point.jvp(v);
      for (Eigen::Index k = 0; k < value.size(); ++k)
        EXPECT_TRUE(contains(all[p](k), value(k)))
            << "tangent " << p << " entry " << k << ": " << value(k) << " outside " << all[p](k);
    }
    for (Eigen::Index k = 0; k < one.size(); ++k) {
      const double w_all = all[p](k).upper() - all[p](k).lower(), w_one = one(k).upper() - one(k).lower();
      EXPECT_LE(w_all, width_factor * w_one + two_paths * std::fabs(one(k).upper()))
          << "tangent " << p << " entry " << k << ": " << all[p](k) << " vs " << one(k);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, JvpAll, ::testing::ValuesIn(configs()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace regatta::operators
