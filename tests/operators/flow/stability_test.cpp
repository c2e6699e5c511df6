// The certified Grönwall bound of the sphere flows (operators/flow_stability.hpp): the closed-form Lipschitz
// constant L is checked against a second computation — the a-weighted spectral norm of finite-difference
// Jacobians of velocity() at random points of the product of unit balls, pushed up by a random local search
// — and the bound e^{Lt} d_0 against the distance between two integrated trajectories at every step.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <random>
#include <regatta/core/dense_svd.hpp>
#include <regatta/measures/sampling.hpp>
#include <regatta/operators/flow.hpp>
#include <regatta/operators/flow_stability.hpp>

#include "support/tolerance.hpp"

namespace regatta::operators::flow {
namespace {

constexpr double fd_step = 1e-5;

/// Relative error of ‖J‖ from central differences with step h on the product of unit balls, against the
/// field's Lipschitz constant L: truncation h²/6·|V‴| with |V‴| ≤ (1 + β)³·L (each derivative of the
/// weights e^{β⟨x,y⟩} brings a factor ≲ 1 + β), plus cancellation: two velocities, chains of ≲ 4n rounded
/// operations, divided by 2h; the norm gathers the errors of ≤ n·d entries.
double fd_norm_error(double beta, Eigen::Index n, Eigen::Index d) {
  const double h = fd_step;
  return double(n * d) *
         (h * h / 6 * std::pow(1 + beta, 3) + testing::rounding_bound<double>(1, 4.0 * double(n)) / h);
}

/// Central-difference Jacobian of X ↦ V(X) (vec by rows), in the a-weighted norm: W^{1/2} J W^{-1/2}.
Matrix<double> weighted_jacobian(const ModelSpec& spec, const Matrix<double>& X, const Vector<double>& a) {
  const Eigen::Index n = X.rows(), d = X.cols();
  const Vector<double> omega = a.array().log();
  const double h = fd_step;
  Matrix<double> J(n * d, n * d);
  for (Eigen::Index c = 0; c < n * d; ++c) {
    Matrix<double> plus = X, minus = X;
    plus(c / d, c % d) += h;
    minus(c / d, c % d) -= h;
    const Matrix<double> diff = (velocity(spec, plus, omega) - velocity(spec, minus, omega)) / (2 * h);
    for (Eigen::Index r = 0; r < n * d; ++r)
      J(r, c) = std::sqrt(a(r / d)) * diff(r / d, r % d) / std::sqrt(a(c / d));
  }
  return J;
}

double weighted_norm(const ModelSpec& spec, const Matrix<double>& X, const Vector<double>& a) {
  return largest_singular_value(weighted_jacobian(spec, X, a));
}

/// A random point of the product of unit balls: on the sphere with probability ½, else radius U^{1/d}.
Matrix<double> random_point(Eigen::Index n, Eigen::Index d, std::mt19937_64& gen) {
  std::normal_distribution<double> g;
  std::uniform_real_distribution<double> u(0, 1);
  Matrix<double> X(n, d);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index k = 0; k < d; ++k) X(i, k) = g(gen);
    X.row(i).normalize();
    if (u(gen) < 0.5) X.row(i) *= std::pow(u(gen), 1.0 / double(d));
  }
  return X;
}

/// Rows projected back into the unit ball.
void clip_to_ball(Matrix<double>& X) {
  for (Eigen::Index i = 0; i < X.rows(); ++i)
    if (X.row(i).norm() > 1) X.row(i).normalize();
}

TEST(FlowStability, LipschitzConstantBoundsSampledJacobianNorms) {
  std::mt19937_64 gen(7);
  std::normal_distribution<double> g;
  for (Model model : {Model::sphere, Model::sphere_unnormalized}) {
    for (double beta : {0.0, 0.5, 2.0, 4.0}) {
      for (Eigen::Index n : {2, 4}) {
        const Eigen::Index d = n == 2 ? 2 : 3;
        for (bool uniform : {true, false}) {
          Vector<double> a = Vector<double>::Constant(n, 1.0 / double(n));
          if (!uniform) {
            std::uniform_real_distribution<double> u(0.05, 1);
            for (Eigen::Index i = 0; i < n; ++i) a(i) = u(gen);
            a /= a.sum();
          }
          ModelSpec spec;
          spec.model = model;
          spec.beta = beta;
          const FieldLipschitz L = certified_field_lipschitz(spec, uniform ? Vector<double>() : a);
          ASSERT_TRUE(L.available);
          ASSERT_LE(L.constant.lower(), L.constant.upper());
          // Random starts, then a random local search on the norm (step shrinking on failure).
          double best = 0;
          for (int start = 0; start < 6; ++start) {
            Matrix<double> X = random_point(n, d, gen);
            double value = weighted_norm(spec, X, a), step = 0.3;
            for (int trial = 0; trial < 40; ++trial) {
              Matrix<double> Y = X;
              for (Eigen::Index i = 0; i < n; ++i)
                for (Eigen::Index k = 0; k < d; ++k) Y(i, k) += step * g(gen);
              clip_to_ball(Y);
              const double v = weighted_norm(spec, Y, a);
              if (v > value) {
                X = Y;
                value = v;
              } else {
                step *= 0.9;
              }
            }
            best = std::max(best, value);
          }
          EXPECT_LE(best, L.constant.upper() * (1 + fd_norm_error(beta, n, d)))
              << to_string(model) << " beta " << beta << " n " << n << (uniform ? " uniform" : " weighted");
          std::cout << to_string(model) << " beta " << beta << " n " << n
                    << (uniform ? " uniform" : " weighted") << ": largest sampled |J|_a " << best
                    << ", certified L " << L.constant.upper() << " (ratio " << best / L.constant.upper()
                    << ")\n";
        }
      }
    }
  }
}

TEST(FlowStability, GronwallBoundHoldsAlongTwoNearbyTrajectories) {
  const Eigen::Index n = 24;
  for (Model model : {Model::sphere, Model::sphere_unnormalized}) {
    for (double beta : {1.0, 4.0}) {
      const Matrix<double> X0 = measures::sample_sphere(3, 1.0, n, 5);
      Matrix<double> Y0 = X0 + 1e-3 * measures::sample_gaussian(Vector<double>::Zero(3), 1.0, n, 6);
      Y0.rowwise().normalize();
      ModelSpec spec;
      spec.model = model;
      spec.beta = beta;
      IntegratorOptions o;
      o.step = 0.01;
      o.horizon = 2;
      for (int k = 1; k < 20; ++k) o.output_times.push_back(0.1 * k);
      const Trajectory tx = integrate(spec, X0, {}, o), ty = integrate(spec, Y0, {}, o);
      const FieldLipschitz L = certified_field_lipschitz(spec);
      const interval64 d0 = projected_distance(X0, Y0);
      EXPECT_LE(d0.lower(), weighted_distance(tx.states[0], ty.states[0]));
      EXPECT_GE(d0.upper(), weighted_distance(tx.states[0], ty.states[0]));
      ASSERT_EQ(tx.times.size(), ty.times.size());
      for (std::size_t k = 0; k < tx.times.size(); ++k) {
        const double measured = weighted_distance(tx.states[k], ty.states[k]);
        const double bound = gronwall_upper(L.constant.upper(), d0.upper(), tx.times[k]);
        EXPECT_LE(measured, bound) << to_string(model) << " beta " << beta << " t " << tx.times[k];
      }
      // The bound grows exactly like e^{Lt}: at t = 0 it is the initial distance itself.
      EXPECT_EQ(gronwall_upper(L.constant.upper(), d0.upper(), 0), d0.upper());
    }
  }
}

TEST(FlowStability, ProjectedDistanceEnclosesTheDistanceOfTheNormalisedRows) {
  std::mt19937_64 gen(3);
  for (bool uniform : {true, false}) {
    const Matrix<double> X = random_point(7, 3, gen) * 3.0, Y = random_point(7, 3, gen) * 0.5;
    Vector<double> a = Vector<double>::Constant(7, 1.0 / 7);
    if (!uniform) a << 0.1, 0.2, 0.0, 0.3, 0.1, 0.2, 0.1;
    Matrix<double> Xn = X, Yn = Y;
    Xn.rowwise().normalize();
    Yn.rowwise().normalize();
    const double estimate = weighted_distance(Xn, Yn, a);
    const interval64 enclosure = projected_distance(X, Y, uniform ? Vector<double>() : a);
    // The estimate rounds along ≲ 16 operations (a row normalisation of d = 3, the differences and squares,
    // the weighted sum of 7 rows, a square root); the enclosure is certified and rounds outward along the
    // same chain at both ends, with the normalisation's dependency widening it by ≲ 4: width ≤ 2·4 times.
    const double distance_rounding = testing::rounding_bound<double>(1, 16);
    EXPECT_LE(enclosure.lower(), estimate * (1 + distance_rounding));
    EXPECT_GE(enclosure.upper(), estimate * (1 - distance_rounding));
    EXPECT_LE(enclosure.upper() - enclosure.lower(), 8 * distance_rounding * estimate);
  }
}

TEST(FlowStability, NoBoundForTheSinkhornAndLayerModels) {
  for (Model model : {Model::sphere_sinkhorn, Model::self_attention, Model::cross_attention}) {
    ModelSpec spec;
    spec.model = model;
    const FieldLipschitz L = certified_field_lipschitz(spec);
    EXPECT_FALSE(L.available);
    EXPECT_FALSE(L.reason.empty());
  }
}

}  // namespace
}  // namespace regatta::operators::flow
