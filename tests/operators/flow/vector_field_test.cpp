// The velocity fields of the attention dynamics (operators/src/flow/vector_field.cpp, operators/flow.hpp)
// against direct evaluations of their definitions written here: the sphere and unnormalised sphere fields
// (dense sums Σ_j a_j e^{β⟨x_i,x_j⟩} x_j, projected), the Sinkhorn field (the averaged symmetric updates of f
// and the kernel K_ij = e^{f_i + f_j + β⟨x_i,x_j⟩} a_j, materialised), and the layer fields (attend_weighted,
// attend_cross_weighted).
#include <gtest/gtest.h>

#include <cmath>
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

/// The sphere_sinkhorn field of flow.hpp, materialised: `iterations` averaged symmetric updates
/// f_i ← ½(f_i − log Σ_j a_j e^{f_j + β⟨x_i,x_j⟩}) from f = 0, then v_i = P⊥_{x_i} Σ_j e^{f_i + f_j +
/// β⟨x_i,x_j⟩} a_j x_j.
Matrix<double> dense_sinkhorn_velocity(const Matrix<double>& X, const Vector<double>& a, double beta,
                                       int iterations) {
  const Eigen::Index n = X.rows();
  const Matrix<double> G = beta * X * X.transpose();
  Vector<double> f = Vector<double>::Zero(n);
  for (int t = 0; t < iterations; ++t) {
    Vector<double> next(n);
    for (Eigen::Index i = 0; i < n; ++i) {
      const double m = (G.row(i).transpose() + f).maxCoeff();
      double s = 0;
      for (Eigen::Index j = 0; j < n; ++j) s += a(j) * std::exp(G(i, j) + f(j) - m);
      next(i) = 0.5 * (f(i) - (m + std::log(s)));
    }
    f = next;
  }
  Matrix<double> v(n, X.cols());
  for (Eigen::Index i = 0; i < n; ++i) {
    Eigen::RowVectorXd s = Eigen::RowVectorXd::Zero(X.cols());
    for (Eigen::Index j = 0; j < n; ++j) s += std::exp(f(i) + f(j) + G(i, j)) * a(j) * X.row(j);
    v.row(i) = s - s.dot(X.row(i)) * X.row(i);
  }
  return v;
}

TEST(Flow, SinkhornVelocityMatchesTheMaterialisedSymmetricScaling) {
  const Eigen::Index n = 30;
  const Matrix<double> X = measures::sample_sphere(3, 1.0, n, 8);
  Vector<double> w = Vector<double>::LinSpaced(n, 1, 3);
  w /= w.sum();
  const Vector<double> omega = w.array().log();
  for (double beta : {0.5, 3.0}) {
    ModelSpec spec;
    spec.model = Model::sphere_sinkhorn;
    spec.beta = beta;
    spec.sinkhorn_iterations = 25;
    const Matrix<double> v = velocity(spec, X, omega);
    const Matrix<double> ref = dense_sinkhorn_velocity(X, w, beta, spec.sinkhorn_iterations);
    // Each update is a log-sum-exp over n terms, 25 of them feed f (each halving the error carried from the
    // last); the kernel entries are e^{≤ 2β}-sized sums of n terms: c = 64 over chains of ~ 4n operations.
    EXPECT_LE((v - ref).cwiseAbs().maxCoeff(),
              testing::rounding_bound<double>(64, 4.0 * double(n)) * std::exp(beta))
        << beta;
  }
}

TEST(Flow, LayerFieldsAreTheWeightedAttentionOutputs) {
  RandomLayerSpec rs;
  rs.d = 6;
  rs.heads = 2;
  const AttentionLayer layer = random_layer(rs);
  const Matrix<double> X = measures::sample_gaussian(Vector<double>::Zero(6), 0.7, 9, 6);
  const Matrix<double> C = measures::sample_gaussian(Vector<double>::Zero(6), 0.7, 4, 7);
  Vector<double> w = Vector<double>::LinSpaced(9, 1, 2);
  w /= w.sum();
  const Vector<double> omega = w.array().log();
  ModelSpec spec;
  spec.model = Model::self_attention;
  spec.layer = &layer;
  EXPECT_EQ(velocity(spec, X, omega), attend_weighted(layer, X, omega, spec.attention));
  spec.model = Model::cross_attention;
  spec.context = C;
  EXPECT_EQ(velocity(spec, X, omega), attend_cross_weighted(layer, X, C, Vector<double>(), spec.attention));
}

}  // namespace
}  // namespace regatta::operators::flow
