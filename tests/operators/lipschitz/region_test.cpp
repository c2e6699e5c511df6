// Region enclosures of the Jacobian (operators/lipschitz/region.hpp), each against an independent
// computation:
//   the enclosure [J] over a box       the dense Jacobian of the generic engine in 256-bit mpfr at sampled
//                                      points of the box (corners and random points): every entry inside;
//   sup over the region of ‖J‖₂, ‖J‖∞  JacobiSVD and row sums of the double Jacobian at sampled points of
//                                      the ball and the box: never above the certified sup;
//   first-order tightness              the excess (sup − ‖J(X)‖₂)/‖J(X)‖₂ shrinks linearly with the radius;
//   robustness radius                  a linear readout's argmax never changes at sampled points of the
//                                      certified ball (forward passes of the streamed attention in double);
//   honest outcomes                    a vast box is "not certified: enclosure too wide"; bad radii throw.
#include <gtest/gtest.h>

#include <Eigen/SVD>
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <regatta/core/convert.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
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

/// Containment of a 256-bit reference value rounded to double in an interval64 entry: the rounding to
/// double moves it by at most half an ulp, so a few ulps of slack keep the test exact in spirit.
const double containment_slack = testing::rounding_bound<double>(4);
/// Sampled norms in double (JacobiSVD, row sums of a double Jacobian) may exceed their exact values by
/// rounding of order (n·d)·u; 64 covers the dense Jacobian's accumulation at these sizes.
const double sampled_norm_slack = testing::rounding_bound<double>(64, 64);

Matrix<double> gaussian(Index rows, Index cols, std::uint64_t seed, double scale = 1.0) {
  const Vector<double> z = standard_normal(rows * cols, seed);
  return scale * Eigen::Map<const Matrix<double>>(z.data(), rows, cols);
}

struct Case {
  std::string name;
  AttentionKind kind = AttentionKind::dot;
  int d = 4, heads = 2;
  bool biases = false, causal = false, residual = false;
  Prenorm prenorm = Prenorm::none;
  Index n = 4;
  double rope_theta = 0;  ///< > 0: rotary position embeddings with this base
};

std::vector<Case> cases() {
  return {{"dot"},
          {"dot_biases_causal_residual", AttentionKind::dot, 4, 2, true, true, true},
          {"l2_biases", AttentionKind::l2, 4, 2, true},
          {"dot_layernorm_weights", AttentionKind::dot, 4, 1, true, false, true, Prenorm::layernorm},
          {"l2_rmsnorm", AttentionKind::l2, 4, 2, false, false, true, Prenorm::rmsnorm, 3},
          {"dot_rope_biases_causal", AttentionKind::dot, 4, 1, true, true, true, Prenorm::none, 4, 7.5}};
}

AttentionLayer layer_for(const Case& c, std::uint64_t seed) {
  operators::RandomLayerSpec s;
  s.d = c.d;
  s.heads = c.heads;
  s.kind = c.kind;
  s.biases = c.biases;
  s.seed = seed;
  AttentionLayer L = operators::random_layer(s);
  if (c.prenorm != Prenorm::none) testing::draw_norm_weights(L, seed);
  if (c.rope_theta > 0) L.rotary = operators::Rotary{c.rope_theta};
  return L;
}

AttentionOptions options_for(const Case& c) {
  AttentionOptions o;
  o.causal = c.causal;
  o.residual = c.residual;
  o.prenorm = c.prenorm;
  return o;
}

Matrix<double> double_jacobian(const AttentionLayer& L, const AttentionOptions& o, const Matrix<double>& X) {
  return operators::dense_jacobian(Block<double>(L, o).linearize(X));
}

double sigma_max(const Matrix<double>& M) { return Eigen::JacobiSVD<Eigen::MatrixXd>(M).singularValues()(0); }

/// A point of the box: corner k (bit pattern over the first 20 entries, the rest from the generator) or a
/// uniform point.
Matrix<double> box_point(const Matrix<double>& X, double r, std::mt19937_64& gen, bool corner) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Matrix<double> P = X;
  for (Index k = 0; k < X.size(); ++k) {
    const double t = u(gen);
    P.data()[k] += r * (corner ? (t < 0 ? -1.0 : 1.0) : t);
  }
  return P;
}

/// A point on the sphere of radius ε around X (Frobenius).
Matrix<double> sphere_point(const Matrix<double>& X, double eps, std::uint64_t seed) {
  Matrix<double> U = gaussian(X.rows(), X.cols(), seed);
  return X + (eps / U.norm()) * U;
}

TEST(RegionEnclosure, ContainsTheJacobianAtSampledPointsOfTheBox) {
  const PrecisionGuard guard(256);
  std::mt19937_64 gen(11);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const AttentionLayer L = layer_for(c, 3);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(c.n, c.d, 5);
    const double r = 0.05;
    const Matrix<interval64> J = block_dense_jacobian_on_box<interval64>(L, o, region_box(X, r));
    for (int sample = 0; sample < 6; ++sample) {
      const Matrix<double> P = box_point(X, r, gen, sample % 2 == 0);
      const Matrix<mpfr> ref = operators::dense_jacobian(Block<mpfr>(L, o).linearize(matrix_cast<mpfr>(P)));
      ASSERT_EQ(ref.rows(), J.rows());
      for (Index i = 0; i < J.rows(); ++i)
        for (Index k = 0; k < J.cols(); ++k) {
          const double v = ref(i, k).convert_to<double>();
          const double slack = containment_slack * std::max(1.0, std::fabs(v));
          ASSERT_LE(J(i, k).lower(), v + slack) << "entry " << i << ", " << k;
          ASSERT_GE(J(i, k).upper(), v - slack) << "entry " << i << ", " << k;
        }
    }
  }
}

TEST(RegionNorms, SupBoundsEverySampledNormInTheBallAndTheBox) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const AttentionLayer L = layer_for(c, 13);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(c.n, c.d, 17);
    const double eps = 0.02 * X.norm();
    // Soundness of the enclosure at a radius where it is loose: without the closed-form comparison (which
    // may call it too wide; tested below), so that the sampled norms are checked against it.
    RegionOptions options;
    options.closed_form = false;
    const RegionNormReport ball = region_jacobian_norms(L, o, X, Region{RegionShape::ball, eps}, options);
    const RegionNormReport box = region_jacobian_norms(L, o, X, Region{RegionShape::box, eps / 4}, options);
    ASSERT_TRUE(ball.certified) << ball.status;
    ASSERT_TRUE(box.certified) << box.status;
    std::mt19937_64 gen(19);
    for (int sample = 0; sample < 20; ++sample) {
      const Matrix<double> Jb = double_jacobian(L, o, sphere_point(X, eps, 100 + sample));
      EXPECT_LE(sigma_max(Jb), ball.two_upper * (1 + sampled_norm_slack));
      EXPECT_LE(Jb.cwiseAbs().rowwise().sum().maxCoeff(), ball.inf_upper * (1 + sampled_norm_slack));
      const Matrix<double> Jx = double_jacobian(L, o, box_point(X, eps / 4, gen, sample % 2 == 0));
      EXPECT_LE(sigma_max(Jx), box.two_upper * (1 + sampled_norm_slack));
      EXPECT_LE(Jx.cwiseAbs().rowwise().sum().maxCoeff(), box.inf_upper * (1 + sampled_norm_slack));
    }
    // The box of half-width ε contains the ball of radius ε, so the ball's enclosure is that box's.
    const RegionNormReport same = region_jacobian_norms(L, o, X, Region{RegionShape::box, eps}, options);
    EXPECT_EQ(same.two_upper, ball.two_upper);
  }
}

TEST(RegionNorms, ExcessOverTheCentreShrinksLinearlyWithTheRadius) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const AttentionLayer L = layer_for(c, 23);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(c.n, c.d, 29);
    const double centre = sigma_max(double_jacobian(L, o, X));
    RegionOptions options;
    options.closed_form = false;
    std::vector<double> excess;
    for (double eps : {1e-3, 1e-4, 1e-5}) {
      const RegionNormReport r = region_jacobian_norms(L, o, X, Region{RegionShape::ball, eps}, options);
      ASSERT_TRUE(r.certified) << r.status;
      excess.push_back(r.two_upper / centre - 1);
      EXPECT_GE(excess.back(), -sampled_norm_slack);
    }
    // First order: a tenth of the radius gives about a tenth of the excess (5× allows the second-order
    // part and the certificate's fixed relative margin ~1e-10).
    EXPECT_LT(excess[1], excess[0] / 5);
    EXPECT_LT(excess[2], excess[1] / 5);
  }
}

TEST(RegionRadius, LinearReadoutNeverFlipsInsideTheCertifiedBall) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const AttentionLayer L = layer_for(c, 31);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(c.n, c.d, 37);
    const Index nd = X.size();
    // Readout: 3 logits from vec(F(X)); its ℓ₂ Lipschitz constant is its spectral norm (inflated by the
    // SVD's rounding so that it is an upper bound).
    const Matrix<double> R = gaussian(3, nd, 41, 1.0 / std::sqrt(double(nd)));
    const double lr = sigma_max(R) * (1 + sampled_norm_slack);
    const auto logits = [&](const Matrix<double>& Z) {
      const Matrix<double> F = operators::attend(L, Z, o);
      return Vector<double>(R * Eigen::Map<const Vector<double>>(F.data(), F.size()));
    };
    const Vector<double> g = logits(X);
    Index y = 0;
    g.maxCoeff(&y);
    double runner = -std::numeric_limits<double>::infinity();
    for (Index k = 0; k < g.size(); ++k)
      if (k != y) runner = std::max(runner, g(k));
    MarginSetting setting;
    setting.margin = g(y) - runner;
    setting.readout_lipschitz = lr;
    const double centre = sigma_max(double_jacobian(L, o, X));
    const RegionRadiusResult res = region_certified_radius(L, o, X, setting, centre);
    ASSERT_GT(res.radius, 0);
    EXPECT_LE(res.radius, res.first_order_limit);
    EXPECT_GE(res.sup_two_at_radius, centre * (1 - sampled_norm_slack));
    for (int sample = 0; sample < 50; ++sample) {
      const Vector<double> h = logits(sphere_point(X, res.radius, 200 + sample));
      Index yy = 0;
      h.maxCoeff(&yy);
      EXPECT_EQ(yy, y);
    }
    // With a certified upper bound for a larger radius the margin would be exceeded at the first failure.
    EXPECT_GT(res.first_failure, res.radius);
  }
}

TEST(RegionNorms, AVastBoxIsNotCertifiedAndBadRadiiAreRefused) {
  const Case c = cases()[0];
  const AttentionLayer L = layer_for(c, 43);
  const AttentionOptions o = options_for(c);
  const Matrix<double> X = gaussian(c.n, c.d, 47);
  const RegionNormReport wide = region_jacobian_norms(L, o, X, Region{RegionShape::box, 1e3});
  EXPECT_FALSE(wide.certified);
  EXPECT_EQ(wide.status.rfind("not certified: enclosure too wide", 0), 0u) << wide.status;
  for (double bad : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()})
    EXPECT_THROW(region_jacobian_norms(L, o, X, Region{RegionShape::ball, bad}), InputError);
  AttentionOptions sinkhorn = o;
  sinkhorn.sinkhorn_iterations = 3;
  EXPECT_TRUE(region_refusal(L, sinkhorn).has_value());
  EXPECT_THROW(region_jacobian_norms(L, sinkhorn, X, Region{RegionShape::ball, 0.1}), InputError);
  MarginSetting setting;
  setting.margin = -1;
  EXPECT_THROW(region_certified_radius(L, o, X, setting, 1.0), InputError);
}

}  // namespace
}  // namespace regatta::lip
