// spectral_norm_upper_fast (binary64 certificate) against independent computations: the 256-bit MPFR
// reference (√λ_max of the Gram matrix by SelfAdjointEigenSolver), the MPFI certificate
// spectral_norm_upper_certified, and the norms of sampled member matrices of interval boxes.
#include <gtest/gtest.h>

#include <Eigen/QR>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <regatta/core/convert.hpp>
#include <regatta/core/eigen.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/core/spectral_norm.hpp>

#include "support/tolerance.hpp"

namespace regatta {
namespace {

constexpr unsigned reference_bits = 256;
/// The witness lower bound is ‖Mv‖/‖v‖ for a converged power vector: after a stop at relative change
/// Δ ≤ τ = default_power_tolerance its relative distance below ‖M‖₂ is about Δ/(1 − r⁴) + τ/2
/// (spectral_norm.hpp), r = σ₂/σ₁. The well-conditioned families here have 1 − r⁴ ≥ 10⁻⁴ (Gaussian top
/// gaps at these sizes give ~0.2; the constructed ones are separated by design), hence c = 1 + 10⁴ on τ
/// (measured: ≤ 5.5 τ).
double lower_tightness(const Matrix<double>& M) {
  return (1 + 1e4) * default_power_tolerance<double>(M.rows(), M.cols());
}
/// Relative radius of the interval boxes: small against the entries, large against rounding.
const double box_radius = testing::rounding_bound<double>(1e6);
/// Members sampled per box.
constexpr int members_per_box = 6;

/// Standard normal entries from the library's portable generator (core/random_matrix.hpp).
Matrix<double> gaussian(Eigen::Index m, Eigen::Index n, std::uint64_t seed) {
  const Vector<double> z = standard_normal(m * n, seed);
  return Eigen::Map<const Matrix<double>>(z.data(), m, n);
}

struct Family {
  std::string name;
  Matrix<double> M;
  bool well_conditioned;  ///< the power iteration converges with a gap: the tightness check applies
};

std::vector<Family> families() {
  std::vector<Family> f;
  f.push_back({"gaussian 1x1", gaussian(1, 1, 1), true});
  f.push_back({"gaussian 1x40", gaussian(1, 40, 2), true});
  f.push_back({"gaussian 40x1", gaussian(40, 1, 3), true});
  f.push_back({"gaussian 7x3", gaussian(7, 3, 4), true});
  f.push_back({"gaussian 32x48", gaussian(32, 48, 5), true});
  f.push_back({"gaussian 64x64", gaussian(64, 64, 6), true});
  f.push_back({"gaussian 256x256", gaussian(256, 256, 7), true});
  f.push_back({"rank 1 30x20", gaussian(30, 1, 8) * gaussian(1, 20, 9), true});
  {
    const Eigen::Index n = 24;  // singular values from 1 down to 1e-14 (Householder orthogonal factors)
    const Eigen::MatrixXd U = Eigen::HouseholderQR<Eigen::MatrixXd>(gaussian(n, n, 10)).householderQ();
    const Eigen::MatrixXd V = Eigen::HouseholderQR<Eigen::MatrixXd>(gaussian(n, n, 11)).householderQ();
    Eigen::VectorXd s(n);
    for (Eigen::Index k = 0; k < n; ++k) s(k) = std::pow(10.0, -14.0 * double(k) / double(n - 1));
    f.push_back({"ill-conditioned 24x24", U * s.asDiagonal() * V.transpose(), true});
  }
  f.push_back({"huge 1e150 20x30", gaussian(20, 30, 12) * 1e150, true});
  f.push_back({"tiny 1e-150 30x20", gaussian(30, 20, 13) * 1e-150, true});
  f.push_back({"huge 1e300 10x10", gaussian(10, 10, 14) * 1e300, true});
  f.push_back({"subnormal 12x9", gaussian(12, 9, 15) * 1e-310, false});  // entries keep few bits
  {
    Matrix<double> M = gaussian(16, 16, 16) * 1e-300;
    M(2, 3) = std::numeric_limits<double>::denorm_min();
    M(5, 1) = 1e200;  // one entry 500 orders above the rest: the others underflow when scaled
    f.push_back({"mixed 1e200 and subnormal 16x16", M, true});
  }
  f.push_back({"zero 5x7", Matrix<double>::Zero(5, 7), false});
  return f;
}

mpfr reference(const Matrix<double>& M) { return spectral_norm_reference(matrix_cast<mpfr>(M)); }

class SpectralNormFast : public ::testing::Test {
 protected:
  PrecisionGuard guard_{reference_bits};
};

TEST_F(SpectralNormFast, PointBracketContainsReferenceAndIsTight) {
  for (const auto& [name, M, well] : families()) {
    SCOPED_TRACE(name);
    const mpfr ref = reference(M);
    const CertifiedNormBound b = spectral_norm_upper_fast(M);
    EXPECT_GE(mpfr(b.upper), ref);  // certified
    EXPECT_LE(mpfr(b.lower), ref);  // certified
    EXPECT_LE(b.lower, b.upper);
    // The documented tightness is for matrices whose power iteration converges (the margin is set by the
    // estimate's error); a random 256×256 Gaussian may have too small a gap for 500 steps.
    if (well && spectral_norm_power(M).converged) {
      EXPECT_LE(mpfr(b.upper), ref * (1 + mpfr(fast_upper_tightness)));
      EXPECT_GE(mpfr(b.lower), ref * (1 - mpfr(lower_tightness(M))));
    }
    if (ref == 0) {
      EXPECT_EQ(b.upper, 0.0);
    }
    std::cout << "  [fast tightness] " << name << ": method " << b.method
              << ", upper/reference - 1 = " << (ref > 0 ? double(mpfr(b.upper) / ref - 1) : 0.0)
              << ", attempts " << b.cholesky_attempts << "\n";
  }
}

TEST_F(SpectralNormFast, CholeskyCertificateIsUsedWhereNoNormIdentityIsExact) {
  for (const auto& [name, M, well] : families()) {
    // A vector or rank one (‖M‖_F = ‖M‖₂), or one dominant entry (√(‖M‖₁‖M‖∞) within rounding of ‖M‖₂):
    // the fallback may be as tight.
    if (!well || name.starts_with("gaussian 1x") || name.ends_with("x1") || name.starts_with("rank 1") ||
        name.starts_with("mixed"))
      continue;
    SCOPED_TRACE(name);
    EXPECT_EQ(spectral_norm_upper_fast(M).method, "binary64-cholesky");
  }
}

TEST_F(SpectralNormFast, AgreesWithTheMpfiCertificate) {
  for (const auto& [name, M, well] : families()) {
    if (M.size() > 4096) continue;  // the 106-bit MPFI certificate of 256x256 takes seconds
    SCOPED_TRACE(name);
    const CertifiedNormBound mpfi = spectral_norm_upper_certified(M);
    const CertifiedNormBound fast = spectral_norm_upper_fast(M);
    EXPECT_GE(fast.upper, mpfi.lower);
    EXPECT_GE(mpfi.upper, fast.lower);
  }
}

/// The box [M − ρ|M|, M + ρ|M|] (endpoints rounded outward) and members with random corners/interior points.
Matrix<interval64> box_around(const Matrix<double>& M, double rho) {
  Matrix<interval64> B(M.rows(), M.cols());
  for (Eigen::Index i = 0; i < M.rows(); ++i)
    for (Eigen::Index j = 0; j < M.cols(); ++j) {
      const double r = detail::i64::mul<true>(rho, std::fabs(M(i, j))) + 1e-3 * rho;
      B(i, j) = interval64::hull(detail::i64::add<false>(M(i, j), -r), detail::i64::add<true>(M(i, j), r));
    }
  return B;
}

Matrix<double> member(const Matrix<interval64>& B, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  Matrix<double> X(B.rows(), B.cols());
  for (Eigen::Index i = 0; i < B.rows(); ++i)
    for (Eigen::Index j = 0; j < B.cols(); ++j) {
      const auto bits = gen();
      const double t = (bits & 1) ? ((bits >> 1) & 1 ? 1.0 : 0.0) : double(bits >> 11) * 0x1.0p-53;
      X(i, j) = B(i, j).lower() + t * (B(i, j).upper() - B(i, j).lower());  // corners or interior
      X(i, j) = std::clamp(X(i, j), B(i, j).lower(), B(i, j).upper());
    }
  return X;
}

TEST_F(SpectralNormFast, IntervalBoxBoundsEveryMember) {
  for (const auto& [name, M, well] : families()) {
    if (M.size() > 4096) continue;
    SCOPED_TRACE(name);
    for (double rho : {box_radius, 1e-3}) {
      const Matrix<interval64> B = box_around(M, rho);
      const CertifiedNormBound fast = spectral_norm_upper_fast(B);
      for (int k = 0; k < members_per_box; ++k) {
        const mpfr member_norm = reference(member(B, 100 + k));
        EXPECT_GE(mpfr(fast.upper), member_norm);
        EXPECT_LE(mpfr(fast.lower), member_norm);
      }
      const CertifiedNormBound mpfi = spectral_norm_upper_certified(matrix_cast<interval>(B));
      EXPECT_GE(fast.upper, mpfi.lower);
    }
  }
}

TEST_F(SpectralNormFast, BoxCentredAtZeroIsBoundedByItsRadius) {
  // Midpoint 0: the estimate is 0, no Cholesky runs, and the bound comes from the radius and the fallback.
  const Matrix<double> M = gaussian(9, 13, 40);
  Matrix<interval64> B(M.rows(), M.cols());
  for (Eigen::Index i = 0; i < M.rows(); ++i)
    for (Eigen::Index j = 0; j < M.cols(); ++j)
      B(i, j) = interval64::hull(-std::fabs(M(i, j)), std::fabs(M(i, j)));
  const CertifiedNormBound fast = spectral_norm_upper_fast(B);
  EXPECT_GE(mpfr(fast.upper), reference(Matrix<double>(M.cwiseAbs())));  // |M| is a member (a corner)
  for (int k = 0; k < members_per_box; ++k) EXPECT_GE(mpfr(fast.upper), reference(member(B, 200 + k)));
  EXPECT_EQ(fast.lower, 0.0);
}

TEST_F(SpectralNormFast, NonFiniteEntriesAreInputErrors) {
  Matrix<double> M = gaussian(4, 5, 30);
  M(1, 2) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(spectral_norm_upper_fast(M), InputError);
  M(1, 2) = std::numeric_limits<double>::infinity();
  EXPECT_THROW(spectral_norm_upper_fast(M), InputError);
  Matrix<interval64> B = gaussian(4, 5, 31).cast<interval64>();
  B(3, 0) = interval64::hull(0.0, std::numeric_limits<double>::infinity());
  EXPECT_THROW(spectral_norm_upper_fast(B), InputError);
  B(3, 0) = interval64::nan();
  EXPECT_THROW(spectral_norm_upper_fast(B), InputError);
}

TEST_F(SpectralNormFast, EmptyMatricesGiveZero) {
  EXPECT_EQ(spectral_norm_upper_fast(Matrix<double>(0, 3)).upper, 0.0);
  EXPECT_EQ(spectral_norm_upper_fast(Matrix<interval64>(4, 0)).upper, 0.0);
}

}  // namespace
}  // namespace regatta
