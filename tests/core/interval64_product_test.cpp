// midrad_product (core/interval64_product.hpp) against two independent computations:
//  1. exact re-evaluation: point matrices A′ ∈ A, B′ ∈ B (vertices, endpoints, random interior points) are
//     multiplied in MPFR at a precision that makes every sum exact, and every exact entry must lie in the
//     midpoint–radius result;
//  2. the scalar interval64 product (the triple loop of outward-rounded operations, which for one entry is
//     the exact hull of its independent terms up to outward rounding): the midpoint–radius radius may exceed
//     its radius by Rump's factor 1.5 (1 when a factor is a point) plus the a-priori rounding term.
// Inputs are random and biased toward corners: point entries, zeros, sign-straddling and one-signed
// intervals, magnitudes from 2^-520 (underflow term active) to 2^40, and non-finite entries (fallback).
#include <gtest/gtest.h>
#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <regatta/core/detail/scalar_math.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/interval64_product.hpp>

#include "support/tolerance.hpp"

namespace regatta {
namespace {

using Eigen::Index;

/// Enough bits for an exact sum of products of doubles in [2^-1074, 2^1024) (products span 2^-2148..2^2048).
constexpr mpfr_prec_t exact_bits = 4400;
/// Rump's bound on the midpoint–radius product of two interval matrices: radius ≤ 1.5 × the hull radius.
constexpr double rump_factor = 1.5;
/// Slack on the a-priori rounding terms of the radius (γ_k|m_A||m_B| + the 1/(1 − γ_k) inflation of the
/// radius GEMMs + k·η): the test allows twice each, which a correct bound never needs.
constexpr double rounding_term_slack = 2;
constexpr int members_per_case = 12;
constexpr int cases = 60;

std::mt19937_64& rng() {
  static std::mt19937_64 g(20261202);
  return g;
}

double uniform(double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng()); }
int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng()); }

/// One entry: a point, a zero, a one-signed or straddling interval; `scale` sets the magnitude.
interval64 random_entry(double scale, bool allow_wide) {
  const double m = scale * uniform(-1, 1);
  switch (pick(allow_wide ? 6 : 3)) {
    case 0:
      return interval64(0.0);
    case 1:
    case 2:
      return interval64(m);
    case 3:
      return interval64::hull(m, m + scale * uniform(0, 1e-6));  // narrow
    case 4: {
      const double w = std::fabs(m) * uniform(0, 0.9);  // one-signed
      return m >= 0 ? interval64::hull(m, m + w) : interval64::hull(m - w, m);
    }
    default:
      return interval64::hull(-scale * uniform(0, 1), scale * uniform(0, 1));  // straddles 0
  }
}

Matrix<interval64> random_box(Index rows, Index cols, double scale, bool allow_wide) {
  Matrix<interval64> M(rows, cols);
  for (Index i = 0; i < M.size(); ++i) M(i) = random_entry(scale * std::ldexp(1.0, pick(9) - 4), allow_wide);
  return M;
}

/// A member of the box: each entry an endpoint (vertices) or a uniform point inside.
Matrix<double> member(const Matrix<interval64>& M, bool vertex) {
  Matrix<double> P(M.rows(), M.cols());
  for (Index i = 0; i < M.size(); ++i) {
    const double lo = M(i).lower(), hi = M(i).upper();
    P(i) = vertex ? (pick(2) ? lo : hi) : std::clamp(lo + (hi - lo) * uniform(0, 1), lo, hi);
  }
  return P;
}

/// Every exact entry of A′·B′ lies in C.
void expect_contains_exact(const Matrix<interval64>& C, const Matrix<double>& A, const Matrix<double>& B) {
  mpfr_t acc, term;
  mpfr_inits2(exact_bits, acc, term, static_cast<mpfr_ptr>(nullptr));
  for (Index i = 0; i < A.rows(); ++i)
    for (Index j = 0; j < B.cols(); ++j) {
      mpfr_set_zero(acc, 1);
      for (Index l = 0; l < A.cols(); ++l) {
        mpfr_set_d(term, A(i, l), MPFR_RNDN);
        mpfr_mul_d(term, term, B(l, j), MPFR_RNDN);  // exact: 106 bits suffice
        mpfr_add(acc, acc, term, MPFR_RNDN);         // exact at exact_bits
      }
      const double lo = C(i, j).lower(), hi = C(i, j).upper();
      EXPECT_TRUE(mpfr_cmp_d(acc, lo) >= 0 && mpfr_cmp_d(acc, hi) <= 0)
          << "entry (" << i << ", " << j << ") " << mpfr_get_d(acc, MPFR_RNDN) << " outside " << C(i, j);
    }
  mpfr_clears(acc, term, static_cast<mpfr_ptr>(nullptr));
}

double radius(const interval64& x) { return (x.upper() - x.lower()) / 2; }
/// η, the smallest subnormal.
constexpr double eta = 0x1p-1074;

/// The midpoint–radius radius against the scalar product's (see the file comment). The rounding terms of
/// the bound are γ_k·(|m_A||m_B|)_ij (midpoint GEMM; the midpoint/radius split adds ulps of the endpoints,
/// covered by using the magnitudes instead of |m|), three k·η underflow terms (each at most doubled by the
/// upward rounding of its 1/(1 − γ_k) factor in the subnormal range), and one ulp per endpoint of C.
void expect_tight(const Matrix<interval64>& C, const Matrix<interval64>& A, const Matrix<interval64>& B,
                  double factor) {
  const Matrix<interval64> scalar = detail::plain_product<interval64>(A, B);
  const double k = double(A.cols());
  const double gamma = testing::rounding_bound<double>(0.5, k);  // k·u with u = eps/2
  for (Index i = 0; i < C.rows(); ++i)
    for (Index j = 0; j < C.cols(); ++j) {
      double mags = 0;
      for (Index l = 0; l < k; ++l) mags += magnitude(A(i, l)) * magnitude(B(l, j));
      const double allowed = factor * radius(scalar(i, j)) * (1 + rounding_term_slack * 2 * gamma) +
                             rounding_term_slack * (gamma * mags + 3 * 2 * k * eta) +
                             testing::rounding_bound<double>(rounding_term_slack, 1) * magnitude(C(i, j));
      EXPECT_LE(radius(C(i, j)), allowed)
          << "entry (" << i << ", " << j << "): " << C(i, j) << " vs scalar " << scalar(i, j);
    }
}

void check_case(const Matrix<interval64>& A, const Matrix<interval64>& B) {
  const Matrix<interval64> C = midrad_product(A, B);
  ASSERT_EQ(C.rows(), A.rows());
  ASSERT_EQ(C.cols(), B.cols());
  for (int s = 0; s < members_per_case; ++s) {
    const bool vertex = s % 2 == 0;
    expect_contains_exact(C, member(A, vertex), member(B, vertex));
  }
  expect_tight(C, A, B, rump_factor);
}

TEST(Interval64Product, EnclosesExactProductsOfMembers) {
  for (int c = 0; c < cases; ++c) {
    const Index n = 1 + pick(6), k = 1 + pick(12), p = 1 + pick(6);
    const double scale = std::ldexp(1.0, pick(50) - 10);
    check_case(random_box(n, k, scale, true), random_box(k, p, 1.0 / scale, true));
  }
}

TEST(Interval64Product, TinyEntriesKeepTheUnderflowTerm) {
  // Entries near 2^-520: products reach the subnormal range, where the k·η term is what keeps C sound.
  for (int c = 0; c < cases / 2; ++c) {
    const Index n = 1 + pick(4), k = 1 + pick(8), p = 1 + pick(4);
    check_case(random_box(n, k, 0x1p-520, true), random_box(k, p, 0x1p-530, true));
  }
}

TEST(Interval64Product, PointFactorIsAsTightAsTheScalarProduct) {
  for (int c = 0; c < cases; ++c) {
    const Index n = 1 + pick(6), k = 1 + pick(12), p = 1 + pick(6);
    const Matrix<interval64> A = random_box(n, k, 1.0, true);
    const Matrix<double> B = member(random_box(k, p, 1.0, false), false);
    const Matrix<interval64> Bi = B.cast<interval64>();
    const Matrix<interval64> C = midrad_product(A, B), Ct = midrad_product(Matrix<double>(B.transpose()),
                                                                           Matrix<interval64>(A.transpose()));
    for (int s = 0; s < members_per_case; ++s) {
      const Matrix<double> Am = member(A, s % 2 == 0);
      expect_contains_exact(C, Am, B);
      expect_contains_exact(Ct, B.transpose(), Am.transpose());
    }
    expect_tight(C, A, Bi, 1.0);
    expect_tight(Ct, Matrix<interval64>(Bi.transpose()), Matrix<interval64>(A.transpose()), 1.0);
    // The interval-typed point factor takes the same path as the double one.
    const Matrix<interval64> Ci = midrad_product(A, Bi);
    for (Index i = 0; i < C.size(); ++i) EXPECT_TRUE(C(i) == Ci(i));
  }
}

TEST(Interval64Product, PointTimesPointEnclosesTheExactProduct) {
  const Matrix<double> A = member(random_box(5, 9, 1.0, false), false),
                       B = member(random_box(9, 4, 1.0, false), false);
  const Matrix<interval64> C = midrad_product(A.cast<interval64>().eval(), B);
  expect_contains_exact(C, A, B);
  for (Index i = 0; i < C.size(); ++i) EXPECT_GE(C(i).upper(), C(i).lower());
}

TEST(Interval64Product, ExactZerosStayExact) {
  // A zero row of A (a tangent that does not reach a token) gives an exactly zero row, without a subnormal
  // radius.
  Matrix<interval64> A = random_box(3, 5, 1.0, true);
  A.row(1).setConstant(interval64(0.0));
  const Matrix<interval64> C = midrad_product(A, random_box(5, 4, 1.0, true));
  for (Index j = 0; j < C.cols(); ++j) EXPECT_TRUE(C(1, j) == interval64(0.0)) << C(1, j);
}

TEST(Interval64Product, NonFiniteEntriesFallBackToTheScalarProduct) {
  const double inf = std::numeric_limits<double>::infinity();
  Matrix<interval64> A = random_box(3, 4, 1.0, true), B = random_box(4, 2, 1.0, true);
  A(0, 1) = interval64::hull(1.0, inf);
  B(2, 0) = interval64::hull(-1e308, 1e308);
  const Matrix<interval64> C = midrad_product(A, B), S = detail::plain_product<interval64>(A, B);
  for (Index i = 0; i < C.size(); ++i) {
    EXPECT_EQ(C(i).lower(), S(i).lower());
    EXPECT_EQ(C(i).upper(), S(i).upper());
  }
  // Finite entries whose GEMM overflows fall back too, and the result still encloses.
  Matrix<interval64> H = Matrix<interval64>::Constant(2, 3, interval64(1e300)), G = H.transpose();
  const Matrix<interval64> O = midrad_product(H, G);
  EXPECT_EQ(O(0, 0).upper(), inf);
}

TEST(Interval64Product, FastProductMatchesEigenForDouble) {
  const Matrix<double> A = Matrix<double>::Random(4, 6), B = Matrix<double>::Random(6, 3);
  const Matrix<double> C = fast_product<double>(A, B), E = A * B;
  EXPECT_EQ(C, E);
}

}  // namespace
}  // namespace regatta
