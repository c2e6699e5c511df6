// Seeded random matrix families: deterministic, and each has the spectrum it promises (checked by SVD).
#include <gtest/gtest.h>

#include <cmath>
#include <regatta/core/dense_svd.hpp>
#include <regatta/core/random_matrix.hpp>

#include "support/tolerance.hpp"

namespace regatta {
namespace {

/// Singular values of a matrix built and decomposed in double are exact up to ~(rows + cols) eps ‖M‖₂: the
/// construction (products with inner dimension ≤ rows, orthonormal factors from QR) and the one-sided Jacobi
/// SVD each have a backward error of that order; c = 4 for the two.
double spectrum_rounding(const RandomMatrixSpec& spec) {
  return testing::rounding_bound<double>(4, double(spec.rows + spec.cols));
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
  // The rank-3 part is well conditioned: for Gaussian factors σ₃/σ₁ is roughly
  // ((√30 − √3)/(√30 + √3))·((√20 − √3)/(√20 + √3)) ≈ 0.23 (measured 0.46); a thousandth of that is still
  // ten orders above the rounding floor where the other singular values sit.
  constexpr double well_conditioned_range = 1e-3;
  EXPECT_GT(s(2), well_conditioned_range * s(0));
  EXPECT_LT(s(3), spectrum_rounding(spec) * s(0));  // rounding level of a product of Gaussian factors
}

TEST(RandomMatrix, IllConditionedHasLogSpacedSingularValues) {
  RandomMatrixSpec spec;
  spec.rows = 12;
  spec.cols = 9;
  spec.kind = RandomMatrixKind::ill_conditioned;
  spec.condition = 1e6;
  const Eigen::VectorXd s = singular_values(random_matrix(spec));
  // σ_i = condition^(−i/8) ≤ 1 = ‖M‖₂: absolute errors on the scale of σ₁.
  for (int i = 0; i < 9; ++i)
    EXPECT_NEAR(s(i), std::pow(spec.condition, -i / 8.0), spectrum_rounding(spec)) << i;
}

}  // namespace
}  // namespace regatta
