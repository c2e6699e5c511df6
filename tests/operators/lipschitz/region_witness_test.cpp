// The certified lower end of the sup of ‖J‖ over a region (operators/lipschitz/region.hpp, region_witness),
// each against an independent computation:
//   the witness lies in the region       ‖X' − X‖_F and max |X' − X| recomputed in long double;
//   its lower end is ‖J(X')‖ there       JacobiSVD and row sums of the dense double Jacobian at X';
//   it is the best point found           at least the centre's norm and every norm at 48 seeded points of
//                                        the ball (JacobiSVD), and at most the certified upper end;
//   its first-order gain                 (lower − ‖J(X)‖₂)/ε against the norm of the gradient of σ_max by
//                                        central differences of the double Jacobian;
//   bad input                            radii ≤ 0, NaN or infinite, non-finite tokens, negative counts.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/region.hpp>
#include "../../support/random_layers.hpp"
#include "../../support/tolerance.hpp"

namespace regatta::lip {
namespace {

using Eigen::Index;
using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Block;
using operators::Prenorm;

/// Norms of a dense double Jacobian may differ from the exact ones by rounding of order (n·d)·u.
const double dense_norm_slack = testing::rounding_bound<double>(64, 64);

struct Case {
  std::string name;
  AttentionKind kind = AttentionKind::dot;
  int heads = 2;
  bool biases = false, causal = false, residual = false;
  Prenorm prenorm = Prenorm::none;
  int sinkhorn = 1;  ///< Sinkhorn iterations: 1 is softmax (structured rows); more takes the all-rows path
};

std::vector<Case> cases() {
  return {{"dot_biases_causal", AttentionKind::dot, 2, true, true},
          {"l2", AttentionKind::l2, 1},
          {"dot_layernorm_residual", AttentionKind::dot, 2, true, false, true, Prenorm::layernorm},
          {"dot_rmsnorm", AttentionKind::dot, 1, false, false, false, Prenorm::rmsnorm},
          {"sinkhorn_3", AttentionKind::dot, 1, false, false, false, Prenorm::none, 3}};
}

constexpr Index n_tokens = 4, width = 4;

AttentionLayer layer_for(const Case& c, std::uint64_t seed) {
  operators::RandomLayerSpec s;
  s.d = width;
  s.heads = c.heads;
  s.kind = c.kind;
  s.biases = c.biases;
  s.seed = seed;
  AttentionLayer L = operators::random_layer(s);
  if (c.prenorm != Prenorm::none) testing::draw_norm_weights(L, seed);
  return L;
}

AttentionOptions options_for(const Case& c) {
  AttentionOptions o;
  o.causal = c.causal;
  o.residual = c.residual;
  o.prenorm = c.prenorm;
  o.sinkhorn_iterations = c.sinkhorn;
  return o;
}

Matrix<double> gaussian(std::uint64_t seed) {
  const Vector<double> z = standard_normal(n_tokens * width, seed);
  return Eigen::Map<const Matrix<double>>(z.data(), n_tokens, width);
}

Matrix<double> double_jacobian(const AttentionLayer& L, const AttentionOptions& o, const Matrix<double>& X) {
  return operators::dense_jacobian(Block<double>(L, o).linearize(X));
}

double row_sum_norm(const Matrix<double>& J) { return J.cwiseAbs().rowwise().sum().maxCoeff(); }

long double frobenius_distance(const Matrix<double>& A, const Matrix<double>& B) {
  long double s = 0;
  for (Index k = 0; k < A.size(); ++k) {
    const long double e = (long double)A.data()[k] - (long double)B.data()[k];
    s += e * e;
  }
  return std::sqrt(s);
}

long double max_distance(const Matrix<double>& A, const Matrix<double>& B) {
  long double m = 0;
  for (Index k = 0; k < A.size(); ++k)
    m = std::max(m, std::fabs((long double)A.data()[k] - (long double)B.data()[k]));
  return m;
}

TEST(RegionWitness, LiesInTheRegionAndItsLowerEndIsTheNormThere) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const AttentionLayer L = layer_for(c, 7);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(11);
    for (const Region region : {Region{RegionShape::ball, 1e-2 * X.norm()}, Region{RegionShape::box, 3e-3}}) {
      SCOPED_TRACE(to_string(region.shape));
      for (const Norm norm : {Norm::two, Norm::inf}) {
        const RegionWitness w = region_witness(L, o, X, region, norm);
        ASSERT_TRUE(w.lower.has_value()) << w.reason;
        const long double distance =
            region.shape == RegionShape::ball ? frobenius_distance(w.input, X) : max_distance(w.input, X);
        EXPECT_LE(distance, (long double)region.radius);
        EXPECT_LE(distance, (long double)w.distance);
        // The ascent reaches the boundary (the norm grows outwards on these layers).
        EXPECT_GT(distance, 0.5L * region.radius);
        const Matrix<double> J = double_jacobian(L, o, w.input);
        const double there = norm == Norm::two ? largest_singular_value(J) : row_sum_norm(J);
        EXPECT_LE(*w.lower, there * (1 + dense_norm_slack));
        // Converged: the certified value is the norm at X' (a converged power iteration, or every row).
        EXPECT_GE(*w.lower, there * (1 - 1e-9));
        EXPECT_LE(*w.lower, w.estimate * (1 + dense_norm_slack));
      }
    }
  }
}

TEST(RegionWitness, IsAtLeastTheCentreAndSampledPointsAndAtMostTheUpperEnd) {
  for (const Case& c : cases()) {
    if (c.sinkhorn != 1) continue;  // the upper end (region enclosure) needs softmax attention
    SCOPED_TRACE(c.name);
    const AttentionLayer L = layer_for(c, 23);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(29);
    const double eps = 1e-2 * X.norm();
    RegionOptions options;
    options.closed_form = false;
    options.second_order = true;
    options.lower_witness = true;
    const RegionNormReport r = region_jacobian_norms(L, o, X, Region{RegionShape::ball, eps}, options);
    ASSERT_TRUE(r.certified) << r.status;
    ASSERT_TRUE(r.two_witness && r.two_witness->lower) << (r.two_witness ? r.two_witness->reason : "none");
    ASSERT_TRUE(r.inf_witness && r.inf_witness->lower) << (r.inf_witness ? r.inf_witness->reason : "none");
    const double two = *r.two_witness->lower, inf = *r.inf_witness->lower;
    EXPECT_LE(two, r.two_upper);
    EXPECT_LE(inf, r.inf_upper);
    const Matrix<double> J0 = double_jacobian(L, o, X);
    EXPECT_GT(two, largest_singular_value(J0));
    EXPECT_GT(inf, row_sum_norm(J0));
    for (int sample = 0; sample < 48; ++sample) {
      const Matrix<double> U = gaussian(1000 + sample);
      const Matrix<double> J = double_jacobian(L, o, X + (eps / U.norm()) * U);
      EXPECT_GE(two, largest_singular_value(J) * (1 - dense_norm_slack)) << "sample " << sample;
      EXPECT_GE(inf, row_sum_norm(J) * (1 - dense_norm_slack)) << "sample " << sample;
    }
  }
}

TEST(RegionWitness, FirstOrderGainIsTheGradientNormOfTheLargestSingularValue) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const AttentionLayer L = layer_for(c, 31);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(37);
    // ‖∇σ_max(J(X))‖ by central differences of the double Jacobian along each coordinate (σ_max simple here).
    const double h = 1e-6 * X.norm();
    double gradient2 = 0;
    for (Index k = 0; k < X.size(); ++k) {
      Matrix<double> P = X, M = X;
      P.data()[k] += h;
      M.data()[k] -= h;
      const double g = (largest_singular_value(double_jacobian(L, o, P)) -
                        largest_singular_value(double_jacobian(L, o, M))) /
                       (2 * h);
      gradient2 += g * g;
    }
    const double rate = std::sqrt(gradient2);
    const double eps = 1e-5 * X.norm();
    const RegionWitness w = region_witness(L, o, X, Region{RegionShape::ball, eps}, Norm::two);
    ASSERT_TRUE(w.lower.has_value()) << w.reason;
    const double gain = (*w.lower - largest_singular_value(double_jacobian(L, o, X))) / eps;
    // σ(X + δ) = σ(X) + ∇σ·δ + O(ε²): the best point of the ball gains ε‖∇σ‖ up to the curvature term.
    EXPECT_NEAR(gain, rate, 2e-2 * rate + 1e-6);
  }
}

TEST(RegionWitness, BadInputIsRefused) {
  const Case c = cases().front();
  const AttentionLayer L = layer_for(c, 41);
  const AttentionOptions o = options_for(c);
  const Matrix<double> X = gaussian(43);
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (const double r : {0.0, -1.0, nan, inf})
    EXPECT_THROW(region_witness(L, o, X, Region{RegionShape::ball, r}, Norm::two), InputError) << r;
  Matrix<double> bad = X;
  bad(1, 2) = nan;
  EXPECT_THROW(region_witness(L, o, bad, Region{RegionShape::ball, 0.1}, Norm::two), InputError);
  RegionWitnessOptions negative;
  negative.random_starts = -1;
  EXPECT_THROW(region_witness(L, o, X, Region{RegionShape::box, 0.1}, Norm::inf, negative), InputError);
}

}  // namespace
}  // namespace regatta::lip
