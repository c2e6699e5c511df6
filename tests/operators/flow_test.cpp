// Attention dynamics (operators/flow.hpp): the unnormalised sphere flow increases E_β (its gradient flow,
// dE/dt = Σ a_i |v_i|²: checked both as monotonicity along RK4 and against the finite difference of E along
// the trajectory), RK4 against Dormand–Prince at tight tolerance, the velocity against a dense evaluation,
// particles stay on the sphere, β = 1 collapses to one cluster, the layer field against attend_weighted, the
// layers integrator against repeated residual attention, and input errors.
#include <gtest/gtest.h>

#include <cmath>
#include <regatta/core/error.hpp>
#include <regatta/measures/sampling.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/flow.hpp>

#include "support/tolerance.hpp"

namespace regatta::operators::flow {
namespace {

Vector<double> uniform(Eigen::Index n) { return Vector<double>::Constant(n, 1.0 / double(n)); }

/// Dense Σ_j a_j e^{β⟨x_i,x_j⟩} x_j (and its normalised form), projected: the reference for velocity().
Matrix<double> dense_velocity(const Matrix<double>& X, const Vector<double>& a, double beta,
                              bool normalised) {
  Matrix<double> v(X.rows(), X.cols());
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    Eigen::RowVectorXd s = Eigen::RowVectorXd::Zero(X.cols());
    double z = 0;
    for (Eigen::Index j = 0; j < X.rows(); ++j) {
      const double e = a(j) * std::exp(beta * X.row(i).dot(X.row(j)));
      s += e * X.row(j);
      z += e;
    }
    if (normalised) s /= z;
    v.row(i) = s - s.dot(X.row(i)) * X.row(i);
  }
  return v;
}

TEST(Flow, VelocityMatchesADenseEvaluation) {
  const Matrix<double> X = measures::sample_sphere(3, 1.0, 50, 3);
  const Vector<double> w = uniform(50);
  const Vector<double> omega = w.array().log();
  for (double beta : {0.5, 4.0}) {
    for (bool normalised : {true, false}) {
      ModelSpec spec;
      spec.model = normalised ? Model::sphere : Model::sphere_unnormalized;
      spec.beta = beta;
      const Matrix<double> v = velocity(spec, X, omega);
      const Matrix<double> ref = dense_velocity(X, w, beta, normalised);
      // Each entry: sums of 50 terms of size ≤ e^β; relative rounding ~ 50 eps.
      EXPECT_LE((v - ref).cwiseAbs().maxCoeff(), testing::rounding_bound<double>(16, 50) * std::exp(beta));
    }
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

TEST(Flow, RungeKuttaAndDormandPrinceAgree) {
  const Matrix<double> X0 = measures::sample_sphere(3, 1.0, 40, 5);
  ModelSpec spec;
  spec.model = Model::sphere;
  spec.beta = 1;
  IntegratorOptions rk;
  rk.step = 0.02;
  rk.horizon = 3;
  rk.output_times = {1.5};
  IntegratorOptions dp = rk;
  dp.method = Integrator::dopri5;
  dp.rtol = 1e-10;
  dp.atol = 1e-12;
  const Trajectory a = integrate(spec, X0, {}, rk), b = integrate(spec, X0, {}, dp);
  ASSERT_EQ(b.status, FlowStatus::completed);
  ASSERT_EQ(a.states.size(), b.states.size());
  // RK4's global error is ≤ C·h⁴·T, with C ≲ 2 for this field of unit size and derivatives of order β = 1;
  // Dormand–Prince is within its rtol·|x| + atol (|x| = 1 on the sphere).
  const double rk4_error = 2 * std::pow(rk.step, 4) * rk.horizon + dp.rtol + dp.atol;
  EXPECT_LE((a.states.back() - b.states.back()).cwiseAbs().maxCoeff(), rk4_error);
  EXPECT_GT(b.rejected + b.steps, 0);
  EXPECT_LE(b.max_error_ratio, 1.0);
}

TEST(Flow, LowTemperatureCollapsesToOneCluster) {
  const Matrix<double> X0 = measures::sample_sphere(3, 1.0, 128, 2);
  ModelSpec spec;
  spec.model = Model::sphere;
  spec.beta = 1;
  IntegratorOptions o;
  o.step = 0.1;
  o.horizon = 30;
  const Trajectory tr = integrate(spec, X0, {}, o);
  const double radius = 1e-2;  // the clustering distance
  EXPECT_GT(pair_statistics(tr.states.front(), radius).clusters, 100);
  const PairStatistics end = pair_statistics(tr.states.back(), radius);
  EXPECT_EQ(end.clusters, 1);
  EXPECT_GT(end.min_inner, 1 - radius * radius / 2);  // all within the radius: ⟨x, y⟩ = 1 − |x − y|²/2
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

TEST(Flow, LayerFieldIsTheAttentionOutputAndLayerStepsAreResidualLayers) {
  RandomLayerSpec rs;
  rs.d = 6;
  rs.heads = 2;
  const AttentionLayer layer = random_layer(rs);
  const Matrix<double> X0 = measures::sample_gaussian(Vector<double>::Zero(6), 0.5, 12, 4);
  ModelSpec spec;
  spec.model = Model::self_attention;
  spec.layer = &layer;
  IntegratorOptions o;
  o.method = Integrator::layers;
  o.step = 1;
  o.horizon = 3;
  const Trajectory tr = integrate(spec, X0, {}, o);
  AttentionOptions residual;
  residual.residual = true;
  Matrix<double> Y = X0;
  for (int k = 0; k < 3; ++k) Y = attend(layer, Y, residual);
  EXPECT_LE((tr.states.back() - Y).cwiseAbs().maxCoeff(), testing::rounding_bound<double>(64, 12 * 6 * 3));
}

TEST(Flow, RejectsBadInputBeforeAnyWork) {
  const Matrix<double> X0 = measures::sample_sphere(3, 1.0, 10, 1);
  ModelSpec spec;
  IntegratorOptions o;
  spec.beta = -1;
  EXPECT_THROW(validate(spec, X0, {}, o), InputError);
  spec.beta = NAN;
  EXPECT_THROW(validate(spec, X0, {}, o), InputError);
  spec.beta = 1;
  o.step = 0;
  EXPECT_THROW(validate(spec, X0, {}, o), InputError);
  o.step = 1e-6;
  o.horizon = 10;
  o.max_steps = 1000;
  try {
    validate(spec, X0, {}, o);
    FAIL() << "a horizon of 1e7 steps passed";
  } catch (const InputError& e) {
    EXPECT_EQ(e.subject(), "horizon");
  }
  o.step = 0.1;
  Matrix<double> off = X0;
  off.row(7) *= 1.25;
  try {
    validate(spec, off, {}, o);
    FAIL() << "particles off the sphere passed";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("0.25"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("row 7"), std::string::npos) << e.what();
  }
  spec.model = Model::self_attention;
  EXPECT_THROW(validate(spec, X0, {}, o), InputError);  // no layer
}

}  // namespace
}  // namespace regatta::operators::flow
