// The observables of a trajectory (operators/src/flow/observables.cpp): the interaction energy against its
// definition summed densely here and against the gradient-flow identity of the unnormalised sphere flow
// (dE/dt = Σ a_i |v_i|²: checked both as monotonicity along RK4 and against the finite difference of E along
// the trajectory), and the pair statistics against a brute-force count.
#include <gtest/gtest.h>

#include <cmath>
#include <regatta/measures/sampling.hpp>
#include <regatta/operators/flow.hpp>

#include "support/tolerance.hpp"

namespace regatta::operators::flow {
namespace {

Vector<double> uniform(Eigen::Index n) { return Vector<double>::Constant(n, 1.0 / double(n)); }

TEST(Flow, InteractionEnergyMatchesItsDenseDefinition) {
  const Eigen::Index n = 40;
  const Matrix<double> X = measures::sample_sphere(4, 1.0, n, 9);
  Vector<double> w = Vector<double>::LinSpaced(n, 0.5, 2);
  w(3) = 0;  // a zero weight drops the particle
  w /= w.sum();
  for (double beta : {0.0, 0.7, 5.0}) {
    double dense = 0;
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < n; ++j)
        dense += w(i) * w(j) * (beta == 0 ? X.row(i).dot(X.row(j)) : std::exp(beta * X.row(i).dot(X.row(j))));
    dense /= beta == 0 ? 2.0 : 2 * beta;
    // A sum of n² positive terms (β > 0) or of signed ones bounded by 1 (β = 0): c = 16 for the exponentials.
    EXPECT_NEAR(interaction_energy(X, w, beta), dense,
                testing::rounding_bound<double>(16, double(n * n)) * std::max(1.0, std::abs(dense)))
        << beta;
  }
}

/// |E‴|/E' along the unnormalised sphere flow at β = 2 (the velocities change on a time scale ≳ 1/(2β)).
constexpr double energy_third_ratio = 10;

TEST(Flow, UnnormalisedSphereFlowIncreasesTheEnergyAtTheRateOfItsSquaredVelocity) {
  const Eigen::Index n = 64;
  const Matrix<double> X0 = measures::sample_sphere(3, 1.0, n, 11);
  const Vector<double> w = uniform(n);
  ModelSpec spec;
  spec.model = Model::sphere_unnormalized;
  spec.beta = 2;
  IntegratorOptions o;
  o.step = 0.01;
  o.horizon = 2;
  for (int k = 1; k < 40; ++k) o.output_times.push_back(0.05 * k);
  const Trajectory tr = integrate(spec, X0, w, o);
  ASSERT_EQ(tr.states.size(), 41u);
  std::vector<double> energy;
  for (const auto& X : tr.states) energy.push_back(interaction_energy(X, w, spec.beta));
  const Vector<double> omega = w.array().log();
  // The rounding of E: a double sum over n² pairs, c = 16 (the exponentials and products on each term).
  const double energy_rounding = testing::rounding_bound<double>(16, double(n * n));
  for (std::size_t k = 1; k < energy.size(); ++k) {
    // RK4's error over a record interval (local O(h⁵) per step) is far below the energy increments here;
    // the rounding of E is ~n² eps · E.
    EXPECT_GE(energy[k], energy[k - 1] - energy_rounding * energy[k]) << k;
    // dE/dt = Σ a_i |v_i|²: the centred difference over the recorded times against the midpoint rate.
    if (k + 1 < energy.size()) {
      const double dt = tr.times[k + 1] - tr.times[k - 1];
      const double rate = (energy[k + 1] - energy[k - 1]) / dt;
      const Matrix<double> v = velocity(spec, tr.states[k], omega);
      const double predicted = (w.array() * v.rowwise().squaredNorm().array()).sum();
      // Centred difference over ±dt/2: truncation (dt/2)²/6·|E‴|, with |E‴| ≤ energy_third_ratio·E' here,
      // plus the rounding of the two energies divided by dt.
      const double half = dt / 2;
      EXPECT_NEAR(rate, predicted,
                  half * half / 6 * energy_third_ratio * predicted + 2 * energy_rounding * energy[k + 1] / dt)
          << "t " << tr.times[k];
    }
  }
  EXPECT_GT(energy.back(), energy.front());
  // The particles are projected back onto the sphere: a normalisation of d = 3 coordinates, c = 2.
  for (const auto& X : tr.states)
    EXPECT_LE((X.rowwise().norm().array() - 1).abs().maxCoeff(), testing::rounding_bound<double>(2, 3 + 1));
}

TEST(Flow, PairStatisticsMatchABruteForceCount) {
  Matrix<double> X(6, 2);
  X << 0, 0, 0.5, 0, 1.0, 0, 5, 5, 5.4, 5, 9, 9;  // chains {0,1,2}, {3,4}, {5} at radius 0.6
  const PairStatistics s = pair_statistics(X, 0.6, 2);
  EXPECT_EQ(s.clusters, 3);
  double lo = INFINITY, hi = -INFINITY;
  for (Eigen::Index i = 0; i < 6; ++i)
    for (Eigen::Index j = 0; j < 6; ++j)
      if (i != j) {
        lo = std::min(lo, X.row(i).dot(X.row(j)));
        hi = std::max(hi, X.row(i).dot(X.row(j)));
      }
  EXPECT_DOUBLE_EQ(s.max_inner, hi);
  EXPECT_DOUBLE_EQ(s.min_inner, lo);
}

}  // namespace
}  // namespace regatta::operators::flow
