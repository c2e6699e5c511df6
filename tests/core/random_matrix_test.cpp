// Seeded random matrix families: deterministic, and each has the spectrum it promises (checked by SVD).
#include <gtest/gtest.h>

#include <Eigen/SVD>
#include <cmath>
#include <regatta/core/random_matrix.hpp>

namespace regatta {
namespace {

Eigen::VectorXd singular_values(const Matrix<double>& m) {
  return Eigen::JacobiSVD<Eigen::MatrixXd>(Eigen::MatrixXd(m)).singularValues();
}

TEST(RandomMatrix, SameSeedSameMatrixOtherSeedOtherMatrix) {
  RandomMatrixSpec spec;
  spec.rows = 5;
  spec.cols = 4;
  spec.seed = 42;
  EXPECT_EQ(random_matrix(spec), random_matrix(spec));
  RandomMatrixSpec other = spec;
  other.seed = 43;
  EXPECT_NE(random_matrix(spec), random_matrix(other));
}

TEST(RandomMatrix, GaussianMomentsAreStandard) {
  const Vector<double> z = standard_normal(200000, 7);
  const double mean = z.mean();
  const double var = (z.array() - mean).square().mean();
  // Standard errors: 1/sqrt(n) = 0.0022 for the mean, sqrt(2/n) = 0.0032 for the variance; allow 5 sigma.
  EXPECT_LT(std::abs(mean), 5 * 0.0022);
  EXPECT_LT(std::abs(var - 1), 5 * 0.0032);
}

TEST(RandomMatrix, LowRankHasTheRequestedRank) {
  RandomMatrixSpec spec;
  spec.rows = 30;
  spec.cols = 20;
  spec.kind = RandomMatrixKind::low_rank;
  spec.rank = 3;
  const Eigen::VectorXd s = singular_values(random_matrix(spec));
  EXPECT_GT(s(2), 1e-3 * s(0));
  EXPECT_LT(s(3), 1e-12 * s(0));  // rounding level of a product of Gaussian factors
}

TEST(RandomMatrix, IllConditionedHasLogSpacedSingularValues) {
  RandomMatrixSpec spec;
  spec.rows = 12;
  spec.cols = 9;
  spec.kind = RandomMatrixKind::ill_conditioned;
  spec.condition = 1e6;
  const Eigen::VectorXd s = singular_values(random_matrix(spec));
  for (int i = 0; i < 9; ++i) EXPECT_NEAR(s(i), std::pow(1e6, -i / 8.0), 1e-13) << i;
}

}  // namespace
}  // namespace regatta
