#pragma once
// The reverse-mode gradient of a model's logits (logit_gradient, the attack's) against the forward-mode
// Jacobian of propagate: wᵀJ for random class weights w. Two binary64 evaluations of the same derivative in
// different orders, so they agree to a rounding bound that each test file derives for its models.
#include <gtest/gtest.h>

#include <random>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_robustness.hpp>

namespace regatta::testing {

/// Checks logit_gradient at x against propagate: the logits within `logit_tolerance`, the gradient within
/// `relative_slack` times the Jacobian's largest entry times ‖w‖₁.
inline void expect_reverse_mode_matches_forward_mode(const operators::Model& m, const Vector<double>& x,
                                                     std::uint64_t seed, double logit_tolerance,
                                                     double relative_slack) {
  const operators::ConvertedModel<double> md(m);
  const operators::ModelPass<double> pass = operators::propagate(md, x, 0.0);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  Vector<double> w(m.classes);
  for (auto& v : w) v = normal(rng);
  const operators::LogitGradient g =
      operators::logit_gradient(md, x, [&w](const Vector<double>&) { return w; });
  ASSERT_EQ(g.gradient.size(), x.size());
  EXPECT_LE((g.logits - pass.logits).cwiseAbs().maxCoeff(), logit_tolerance);
  const double tolerance = relative_slack * pass.jacobian.cwiseAbs().maxCoeff() * w.lpNorm<1>();
  EXPECT_LE((g.gradient - pass.jacobian.transpose() * w).cwiseAbs().maxCoeff(), tolerance);
}

}  // namespace regatta::testing
