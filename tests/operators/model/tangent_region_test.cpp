// The forward-mode region pass through a whole model (operators/src/model/tangent_region.cpp) on the ViT
// fixture: its double Jacobian against finite differences of the forward pass, its interval Jacobian over a
// ball against double Jacobians sampled in the ball, reverse mode against forward mode, and certified balls
// against sampling and the attack.
#include <gtest/gtest.h>

#include "vit_fixture.hpp"

namespace regatta::operators {
namespace {

using namespace vit_fixture;

/// Central differences of the binary64 forward with step h: error ≲ h²·|z‴|/6 + c·eps·|z|/h. The third
/// derivatives are bounded relative to the Jacobian's scale by kThirdDerivativeRatio (the two LayerNorms'
/// 1/σ factors, cubed along the chain); the logits are each within kTorchTolerance relative of exact.
constexpr double kFiniteDifferenceStep = 1e-5;
constexpr double kThirdDerivativeRatio = 1000;
double finite_difference_tolerance(double jacobian_scale, double logit_scale) {
  const double h = kFiniteDifferenceStep;
  return h * h / 6 * kThirdDerivativeRatio * jacobian_scale +
         kTorchTolerance * std::max(1.0, logit_scale) / h;
}

TEST(ModelRegion, DoubleJacobianMatchesFiniteDifferences) {
  const Model m = load_model(fixture() / "vit_digits.safetensors");
  const TestSet t = read_test_set();
  const ConvertedModel<double> md(m);
  const Vector<double> x = image(t, 3);
  const ModelPass<double> pass = propagate(md, x, 0.0);
  ASSERT_EQ(pass.jacobian.rows(), 10);
  ASSERT_EQ(pass.jacobian.cols(), 64);
  const double scale = pass.jacobian.cwiseAbs().maxCoeff();
  EXPECT_LE((pass.logits - forward(m, x)).cwiseAbs().maxCoeff(), kTorchTolerance);
  const double tolerance = finite_difference_tolerance(scale, pass.logits.cwiseAbs().maxCoeff());
  for (int j = 0; j < 64; ++j) {
    Vector<double> e = Vector<double>::Zero(64);
    e(j) = kFiniteDifferenceStep;
    const Vector<double> fd =
        (forward(m, Vector<double>(x + e)) - forward(m, Vector<double>(x - e))) / (2 * kFiniteDifferenceStep);
    EXPECT_LE((fd - pass.jacobian.col(j)).cwiseAbs().maxCoeff(), tolerance) << j;
  }
}

/// A radius the region pass certifies for these inputs (so the enclosures are finite), and the slack of the
/// sampled double Jacobians against the exact ones they stand for: the double forward-mode chain rounds
/// along ≲ 128 operations per stage (products of width ≤ 64, a 17-key softmax, a LayerNorm over 32) over
/// five stages, and each stage amplifies the error of its input by at most kStageAmplification (the widths
/// of the r = 0 interval pass, relative to the Jacobian's scale at the head, measure that amplification).
constexpr double kSampledBallRadius = 1e-5;
constexpr double kStageAmplification = 100;
const double kJacobianRoundingSlack = testing::rounding_bound<double>(kStageAmplification, 5 * 128);

TEST(ModelRegion, IntervalJacobianOverTheBallHoldsSampledJacobians) {
  // Independent check of the region pass: the double Jacobian at random points of the ball (and the logits
  // at the centre) lie in the interval64 enclosures, up to the double evaluation's own rounding.
  const Model m = load_model(fixture() / "vit_digits.safetensors");
  const TestSet t = read_test_set();
  const ConvertedModel<double> md(m);
  const ConvertedModel<interval64> mi(m);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  for (std::size_t i : {0u, 5u}) {
    const Vector<double> x = image(t, i);
    const double r = kSampledBallRadius;
    const ModelPass<interval64> region = propagate(mi, x, r);
    ASSERT_EQ(region.jacobian.rows(), 10);
    const ModelPass<double> centre = propagate(md, x, 0.0);
    const double slack = kJacobianRoundingSlack * centre.jacobian.cwiseAbs().maxCoeff();
    for (Eigen::Index c = 0; c < 10; ++c)
      EXPECT_TRUE(region.logits(c).lower() <= centre.logits(c) + kTorchTolerance &&
                  centre.logits(c) - kTorchTolerance <= region.logits(c).upper());
    for (int s = 0; s < 8; ++s) {
      Vector<double> d(64);
      for (auto& v : d) v = normal(rng);
      const Vector<double> p = x + (r * (s + 1) / 8.0 / d.norm()) * d;  // inside the ball
      const ModelPass<double> at = propagate(md, p, 0.0);
      for (Eigen::Index k = 0; k < at.jacobian.size(); ++k) {
        EXPECT_LE(region.jacobian(k).lower(), at.jacobian(k) + slack);
        EXPECT_GE(region.jacobian(k).upper(), at.jacobian(k) - slack);
      }
    }
  }
}

TEST(ModelRegion, ReverseModeGradientEqualsTheForwardModeJacobian) {
  // logit_gradient (the attack's reverse mode) against propagate's forward-mode Jacobian.
  const Model m = load_model(fixture() / "vit_digits.safetensors");
  const TestSet t = read_test_set();
  for (std::size_t i : {0, 7}) {
    SCOPED_TRACE(i);
    testing::expect_reverse_mode_matches_forward_mode(m, image(t, i), 3 + i, kTorchTolerance,
                                                      kJacobianRoundingSlack);
  }
}

TEST(ModelRegion, CertifiedBallsHoldUnderSamplingAndBelowTheAttack) {
  const Model m = load_model(fixture() / "vit_digits.safetensors");
  const TestSet t = read_test_set();
  const ConvertedModel<double> md(m);
  const ConvertedModel<interval64> mi(m);
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  const std::size_t i = 1;
  const Vector<double> x = image(t, i);
  const int y = int(t.labels.data[i]);
  const AttackResult a = attack(md, x, y);
  ASSERT_TRUE(a.found);
  Eigen::Index flipped = 0;
  forward(m, a.point).maxCoeff(&flipped);
  EXPECT_NE(int(flipped), y);
  EXPECT_NEAR((a.point - x).norm(), a.radius, testing::rounding_bound<double>(64, 64) * a.radius);
  const CertifiedRadius c = certified_radius(mi, x, y, a.radius, 0.5);
  EXPECT_GT(c.radius, 0);
  EXPECT_LE(c.radius, a.radius);
  EXPECT_TRUE(certify_ball(mi, x, y, c.radius));
  for (int s = 0; s < 64; ++s) {  // points on the certified sphere keep the label
    Vector<double> d(64);
    for (auto& v : d) v = normal(rng);
    Eigen::Index pred = 0;
    forward(m, Vector<double>(x + (c.radius / d.norm()) * d)).maxCoeff(&pred);
    EXPECT_EQ(int(pred), y);
  }
}

}  // namespace
}  // namespace regatta::operators
