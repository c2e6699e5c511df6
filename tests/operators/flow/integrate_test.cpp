// Time integration of the attention dynamics (operators/src/flow/integrate.cpp): RK4 and Dormand–Prince
// against the closed form of two particles on the circle at β = 0 (the angle φ between them obeys
// φ' = −sin φ, so tan(φ/2) = tan(φ₀/2)·e^{−t}), with RK4's fourth order seen in the error ratio of halved
// steps; RK4 against Dormand–Prince at tight tolerance; β = 1 collapses to one cluster; the layers
// integrator against repeated residual attention; and input errors.
#include <gtest/gtest.h>

#include <cmath>
#include <regatta/core/error.hpp>
#include <regatta/measures/sampling.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/flow.hpp>
#include <vector>

#include "support/tolerance.hpp"

namespace regatta::operators::flow {
namespace {

/// Two particles on the unit circle at angles ±φ/2 around the x axis.
Matrix<double> two_on_the_circle(double phi) {
  Matrix<double> X(2, 2);
  X << std::cos(phi / 2), -std::sin(phi / 2), std::cos(phi / 2), std::sin(phi / 2);
  return X;
}

/// The angle between the two particles of a state.
double angle(const Matrix<double>& X) {
  return std::atan2(X(0, 0) * X(1, 1) - X(0, 1) * X(1, 0), X.row(0).dot(X.row(1)));
}

// At β = 0 both sphere fields are v_1 = ½ P⊥_{x_1} x_2, of size ½ sin φ towards x_2 (and v_2 the mirror
// image): φ' = −sin φ, solved by tan(φ/2) = tan(φ₀/2)·e^{−t}; the bisector stays fixed.
TEST(Flow, TwoParticlesAtZeroTemperatureFollowTheClosedForm) {
  const double phi0 = 2.5, horizon = 3;
  const double exact = 2 * std::atan(std::tan(phi0 / 2) * std::exp(-horizon));
  for (Model model : {Model::sphere, Model::sphere_unnormalized}) {
    ModelSpec spec;
    spec.model = model;
    spec.beta = 0;
    IntegratorOptions o;
    o.horizon = horizon;
    std::vector<double> errors;
    for (double step : {0.2, 0.1, 0.05}) {
      o.step = step;
      const Trajectory tr = integrate(spec, two_on_the_circle(phi0), {}, o);
      ASSERT_EQ(tr.status, FlowStatus::completed);
      const Matrix<double>& X = tr.states.back();
      errors.push_back(std::abs(angle(X) - exact));
      // The bisector (the x axis) is kept: the two particles stay mirror images.
      EXPECT_LE(std::abs(X(0, 0) - X(1, 0)) + std::abs(X(0, 1) + X(1, 1)), 1e-12) << to_string(model);
    }
    // Fourth order: halving the step divides the error by 2⁴ = 16 (between 10 and 22 with the higher-order
    // terms at these steps), and the finest error is small.
    for (std::size_t k = 1; k < errors.size(); ++k) {
      EXPECT_GT(errors[k - 1] / errors[k], 10) << to_string(model) << " " << k;
      EXPECT_LT(errors[k - 1] / errors[k], 22) << to_string(model) << " " << k;
    }
    EXPECT_LT(errors.back(), 1e-5) << to_string(model);
    // Dormand–Prince at a tight tolerance lands on the closed form to its tolerance.
    o.method = Integrator::dopri5;
    o.step = 0.1;
    o.rtol = 1e-11;
    o.atol = 1e-13;
    const Trajectory dp = integrate(spec, two_on_the_circle(phi0), {}, o);
    ASSERT_EQ(dp.status, FlowStatus::completed);
    EXPECT_NEAR(angle(dp.states.back()), exact, 1e-8) << to_string(model);
  }
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
