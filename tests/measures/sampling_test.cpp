// Samplers: moments within 5 standard errors, exact support properties (sphere radius, ball containment,
// zero-weight atoms never drawn), seeded determinism, and the causal lift of
// docs/math/attention.md#lifted-causal.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regatta/core/error.hpp>
#include <regatta/measures/sampling.hpp>

#include "support/tolerance.hpp"

namespace regatta::measures {
namespace {

constexpr Eigen::Index n_samples = 40000;

/// |mean of column k − expected| <= 5 sd/√n for every column.
void expect_column_means(const Matrix<double>& x, const Vector<double>& expected, double sd) {
  const Vector<double> mean = x.colwise().mean().transpose();
  for (Eigen::Index k = 0; k < x.cols(); ++k)
    EXPECT_NEAR(mean(k), expected(k), 5 * sd / std::sqrt(double(x.rows()))) << "column " << k;
}

TEST(Sampling, DiscreteFrequenciesMatchWeightsAndZeroWeightsAreNeverDrawn) {
  Matrix<double> atoms(4, 1);
  atoms << 0, 1, 2, 3;
  Vector<double> w(4);
  w << 0.1, 0.0, 0.6, 0.3;
  const DiscreteMeasure<double> mu(atoms, w);
  const std::vector<Eigen::Index> idx = sample_indices(mu, n_samples, 5);
  std::vector<double> count(4, 0);
  for (Eigen::Index i : idx) count[std::size_t(i)] += 1;
  EXPECT_EQ(count[1], 0);
  for (Eigen::Index k = 0; k < 4; ++k) {
    const double p = w(k), expected = p * n_samples, sd = std::sqrt(n_samples * p * (1 - p));
    // Five standard deviations of the binomial count, plus the one rounding of p · n (when sd = 0).
    const double product_rounding = testing::rounding_bound<double>(1, 1) * expected;
    EXPECT_NEAR(count[std::size_t(k)], expected, 5 * sd + product_rounding) << "atom " << k;
  }
  const Matrix<double> x = sample(mu, 10, 5);
  for (Eigen::Index k = 0; k < 10; ++k) EXPECT_EQ(x(k, 0), double(idx[std::size_t(k)]));
}

TEST(Sampling, GaussianMomentsWithinFiveStandardErrors) {
  Vector<double> mean(3);
  mean << 1.0, -2.0, 0.5;
  const double sigma = 1.7;
  const Matrix<double> x = sample_gaussian(mean, sigma, n_samples, 11);
  expect_column_means(x, mean, sigma);
  const Matrix<double> c = x.rowwise() - mean.transpose();
  const Matrix<double> second = c.transpose() * c / double(n_samples);
  // Var of a sample variance of N(0, σ²): 2σ⁴/n; of a cross moment: σ⁴/n.
  for (Eigen::Index i = 0; i < 3; ++i)
    for (Eigen::Index j = 0; j < 3; ++j) {
      const double sd = std::pow(sigma, 2) * std::sqrt((i == j ? 2.0 : 1.0) / n_samples);
      EXPECT_NEAR(second(i, j), i == j ? sigma * sigma : 0.0, 5 * sd) << i << "," << j;
    }
}

TEST(Sampling, BallSamplesAreInsideWithTheRightMoments) {
  for (Eigen::Index d : {1, 2, 5}) {
    const double radius = 2.5;
    const Matrix<double> x = sample_ball(d, radius, n_samples, 17 + std::uint64_t(d));
    const Vector<double> norms = x.rowwise().norm();
    EXPECT_LE(norms.maxCoeff(), radius * (1 + 4 * std::numeric_limits<double>::epsilon()));
    expect_column_means(x, Vector<double>::Zero(d), radius / std::sqrt(d + 2.0));
    // ‖x‖²/R² = U^{2/d}: mean d/(d + 2), variance 4d/((d + 4)(d + 2)²).
    const double m = (norms.array().square() / (radius * radius)).mean();
    const double sd = std::sqrt(4.0 * d / ((d + 4.0) * (d + 2.0) * (d + 2.0)) / n_samples);
    EXPECT_NEAR(m, double(d) / (d + 2.0), 5 * sd) << "d " << d;
    // E ‖x‖ = R d/(d + 1).
    const double r = norms.mean() / radius;
    EXPECT_NEAR(r, double(d) / (d + 1.0),
                5 * std::sqrt(double(d) / ((d + 2.0) * (d + 1) * (d + 1)) / n_samples));
  }
}

TEST(Sampling, SphereSamplesHaveExactRadiusAndIsotropicSecondMoment) {
  for (Eigen::Index d : {1, 3, 8}) {
    const double radius = 3.0;
    const Matrix<double> x = sample_sphere(d, radius, n_samples, 23);
    const Vector<double> norms = x.rowwise().norm();
    EXPECT_LE((norms.array() - radius).abs().maxCoeff(), 4 * radius * std::numeric_limits<double>::epsilon());
    expect_column_means(x, Vector<double>::Zero(d), radius / std::sqrt(double(d)));
    // E x_k² = R²/d; x_k²/R² has variance ≤ 1/d (it lies in [0, 1]), loosely.
    for (Eigen::Index k = 0; k < d; ++k)
      EXPECT_NEAR(x.col(k).squaredNorm() / n_samples, radius * radius / d,
                  5 * radius * radius * std::sqrt(1.0 / n_samples));
  }
}

TEST(Sampling, SeededDeterminism) {
  Vector<double> mean = Vector<double>::Zero(2);
  EXPECT_EQ(sample_gaussian(mean, 1.0, 50, 3), sample_gaussian(mean, 1.0, 50, 3));
  EXPECT_NE(sample_gaussian(mean, 1.0, 50, 3), sample_gaussian(mean, 1.0, 50, 4));
  EXPECT_EQ(sample_ball(3, 1.0, 50, 3), sample_ball(3, 1.0, 50, 3));
  EXPECT_NE(sample_ball(3, 1.0, 50, 3), sample_ball(3, 1.0, 50, 4));
  EXPECT_EQ(sample_sphere(3, 1.0, 50, 3), sample_sphere(3, 1.0, 50, 3));
  const auto mu = DiscreteMeasure<double>::empirical(sample_sphere(2, 1.0, 20, 1));
  EXPECT_EQ(sample_indices(mu, 100, 9), sample_indices(mu, 100, 9));
  EXPECT_NE(sample_indices(mu, 100, 9), sample_indices(mu, 100, 10));
  // A prefix of a longer draw is the shorter draw (streams are consumed in order).
  const Matrix<double> long_draw = sample_sphere(2, 1.0, 40, 7);
  EXPECT_EQ(Matrix<double>(long_draw.topRows(20)), sample_sphere(2, 1.0, 20, 7));
}

TEST(Sampling, CausalLiftAppendsTimeIOverN) {
  Matrix<double> x(4, 2);
  x << 1, 2, 3, 4, 5, 6, 7, 8;
  const DiscreteMeasure<double> mu = lift_causal(x);
  ASSERT_EQ(mu.dim(), 3);
  ASSERT_EQ(mu.size(), 4);
  for (Eigen::Index i = 0; i < 4; ++i) {
    EXPECT_EQ(mu.atoms()(i, 2), double(i + 1) / 4);
    EXPECT_EQ(mu.atoms()(i, 0), x(i, 0));
    EXPECT_EQ(mu.weights()(i), 0.25);
  }
  EXPECT_THROW(lift_causal(Matrix<double>(0, 2)), InputError);
}

TEST(Sampling, RejectsBadInput) {
  const Vector<double> mean = Vector<double>::Zero(2);
  EXPECT_THROW(sample_gaussian(mean, 0.0, 5, 1), InputError);
  EXPECT_THROW(sample_gaussian(mean, NAN, 5, 1), InputError);
  EXPECT_THROW(sample_gaussian(mean, 1.0, -1, 1), InputError);
  EXPECT_THROW(sample_gaussian(Vector<double>(0), 1.0, 5, 1), InputError);
  EXPECT_THROW(sample_ball(0, 1.0, 5, 1), InputError);
  EXPECT_THROW(sample_ball(2, -1.0, 5, 1), InputError);
  EXPECT_THROW(sample_sphere(2, INFINITY, 5, 1), InputError);
  EXPECT_EQ(sample_sphere(2, 1.0, 0, 1).rows(), 0);
}

}  // namespace
}  // namespace regatta::measures
