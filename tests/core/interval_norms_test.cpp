// The certified interval-matrix norms of core/interval_norms.hpp against independent computations:
//   ‖·‖∞, ‖·‖₁, ‖·‖_F  the exact maximum over the box, attained at the member of largest magnitudes, summed
//   in
//                      MPFR at 256 bits (exact for these sums): the bound is >= it and within the rounding of
//                      a binary64 sum of the same terms above it;
//   ‖·‖₂               Eigen's JacobiSVD (dense_svd.hpp) of members of the box (its midpoint, its corners of
//                      largest magnitudes, random members): the bound is >= every σ_max, allowing only
//                      JacobiSVD's own rounding, and not loose: for point matrices within 1e-6 of σ_max, for
//                      boxes below σ_max(midpoint) + ‖radius‖_F (the triangle inequality's bound), up to
//                      rounding;
// and +inf for an endpoint that is not finite (an InputError from spectral_norm_bound).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/interval_norms.hpp>
#include <regatta/core/precision.hpp>

namespace regatta {
namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double u = 0x1p-53;

/// A box with Gaussian midpoints and radii `spread`·|N(0,1)| (0: a point matrix).
Matrix<interval64> random_box(Eigen::Index rows, Eigen::Index cols, double spread, std::mt19937_64& rng) {
  std::normal_distribution<double> g(0, 1);
  Matrix<interval64> M(rows, cols);
  for (Eigen::Index k = 0; k < M.size(); ++k) {
    const double mid = g(rng), rad = spread * std::abs(g(rng));
    M(k) = spread == 0 ? interval64(mid) : interval64::hull(mid - rad, mid + rad);
  }
  return M;
}

/// The member with the endpoint of larger magnitude in every entry (it maximises ‖·‖∞, ‖·‖₁ and ‖·‖_F).
Matrix<double> largest_member(const Matrix<interval64>& M) {
  Matrix<double> A(M.rows(), M.cols());
  for (Eigen::Index k = 0; k < M.size(); ++k)
    A(k) = std::abs(M(k).lower()) > std::abs(M(k).upper()) ? M(k).lower() : M(k).upper();
  return A;
}

/// A random member of the box.
Matrix<double> random_member(const Matrix<interval64>& M, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> t(0, 1);
  Matrix<double> A(M.rows(), M.cols());
  for (Eigen::Index k = 0; k < M.size(); ++k) A(k) = M(k).lower() + t(rng) * (M(k).upper() - M(k).lower());
  return A;
}

/// max over rows (columns when `columns`) of Σ |a| in MPFR at 256 bits, and ‖A‖_F²: exact references.
mpfr exact_line_sum(const Matrix<double>& A, bool columns) {
  mpfr best(0);
  for (Eigen::Index a = 0; a < (columns ? A.cols() : A.rows()); ++a) {
    mpfr sum(0);
    for (Eigen::Index b = 0; b < (columns ? A.rows() : A.cols()); ++b)
      sum += abs(mpfr(columns ? A(b, a) : A(a, b)));
    if (sum > best) best = sum;
  }
  return best;
}
mpfr exact_frobenius_squared(const Matrix<double>& A) {
  mpfr sum(0);
  for (Eigen::Index k = 0; k < A.size(); ++k) sum += mpfr(A(k)) * mpfr(A(k));
  return sum;
}

TEST(IntervalNorms, InfOneAndFrobeniusBoundTheExactMaximumTightly) {
  PrecisionGuard guard(256);
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 40; ++trial) {
    const Eigen::Index rows = 1 + trial % 9, cols = 1 + (trial * 7) % 11;
    const Matrix<interval64> M = random_box(rows, cols, trial % 3 == 0 ? 0.0 : 0.1, rng);
    const Matrix<double> A = largest_member(M);
    const double n = double(std::max(rows, cols)) + 2;  // terms of one sum, plus the square and the root
    const mpfr row = exact_line_sum(A, false), col = exact_line_sum(A, true);
    const mpfr frob = sqrt(exact_frobenius_squared(A));
    EXPECT_GE(mpfr(inf_norm_upper(M)), row) << trial;
    EXPECT_GE(mpfr(one_norm_upper(M)), col) << trial;
    EXPECT_GE(mpfr(frobenius_norm_upper(M)), frob) << trial;
    EXPECT_LE(mpfr(inf_norm_upper(M)), row * (1 + 2 * n * u)) << trial;
    EXPECT_LE(mpfr(one_norm_upper(M)), col * (1 + 2 * n * u)) << trial;
    EXPECT_LE(mpfr(frobenius_norm_upper(M)), frob * (1 + 2 * n * u)) << trial;
  }
}

TEST(IntervalNorms, SpectralBoundsHoldForMembersAndAreNotLoose) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 30; ++trial) {
    const Eigen::Index rows = 1 + trial % 12, cols = 1 + (trial * 5) % 13;
    const double spread = trial % 3 == 0 ? 0.0 : 0.05;
    const Matrix<interval64> M = random_box(rows, cols, spread, rng);
    const double fast = spectral_norm_upper(M);
    const CertifiedNormBound tight = spectral_norm_bound(M);
    EXPECT_LE(tight.upper, fast) << trial;  // the MPFI refinement only replaces a larger bound
    // JacobiSVD's σ_max carries a relative error of a few k·u (k = max(rows, cols)): allowed for, so a bound
    // below the true σ_max by more than that fails.
    const double svd_slack = 1 - 8 * double(std::max(rows, cols)) * u;
    std::vector<Matrix<double>> members = {
        largest_member(M),
        Matrix<double>(M.unaryExpr([](const interval64& x) { return x.lower() / 2 + x.upper() / 2; }))};
    for (int k = 0; k < 8; ++k) members.push_back(random_member(M, rng));
    for (const Matrix<double>& A : members) {
      const double sigma = largest_singular_value(A);
      EXPECT_GE(fast, sigma * svd_slack) << trial;
      EXPECT_GE(tight.upper, sigma * svd_slack) << trial;
      EXPECT_LE(tight.lower, tight.upper) << trial;
    }
    // Not loose: a point matrix within 1e-6 relative of σ_max (the certificate's documented tightness is far
    // below that); a box below σ_max(midpoint) + ‖radius‖_F, rounding allowed for.
    const Matrix<double> mid = members[1];
    double radius_sq = 0;
    for (Eigen::Index k = 0; k < M.size(); ++k)
      radius_sq += std::pow(std::max(M(k).upper() - mid(k), mid(k) - M(k).lower()), 2);
    const double cap = spread == 0 ? largest_singular_value(mid) * (1 + 1e-6)
                                   : (largest_singular_value(mid) + std::sqrt(radius_sq)) * (1 + 1e-6);
    EXPECT_LE(fast, cap) << trial << " " << tight.method;
    EXPECT_LE(tight.upper, cap) << trial;
  }
}

TEST(IntervalNorms, NonFiniteEndpointsGiveInfinityOrThrowAndEmptyMatricesZero) {
  Matrix<interval64> M = Matrix<interval64>::Constant(2, 3, interval64(1.0));
  M(1, 2) = interval64::hull(-inf, 1.0);
  EXPECT_FALSE(all_finite(M));
  EXPECT_EQ(inf_norm_upper(M), inf);
  EXPECT_EQ(one_norm_upper(M), inf);
  EXPECT_EQ(frobenius_norm_upper(M), inf);
  EXPECT_EQ(spectral_norm_upper(M), inf);
  EXPECT_THROW((void)spectral_norm_bound(M), InputError);  // the region passes name the input then
  const Matrix<interval64> empty(0, 4);
  EXPECT_TRUE(all_finite(empty));
  EXPECT_EQ(inf_norm_upper(empty), 0);
  EXPECT_EQ(one_norm_upper(empty), 0);
  EXPECT_EQ(frobenius_norm_upper(empty), 0);
}

}  // namespace
}  // namespace regatta
