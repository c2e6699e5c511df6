// The runs of nonzero coefficients that measure() marks (Form::nonzero, for_each_run in
// operators/src/model/affine/form.hpp) and the products that skip the rest (matmul in products.hpp), and
// sum_up's memo of its constants: each against a second computation that does not use them (a column-by-
// column scan of the matrix, the dense accumulation of every term, the formula evaluated afresh).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "../../../../operators/src/model/affine/form.hpp"
#include "../../../../operators/src/model/affine/products.hpp"

namespace regatta::operators::affine {
namespace {

/// N rows on K columns, zero except for random runs of random lengths (some crossing the 32-column blocks
/// and the 64-block words), with −0, subnormals, NaN and ∞ among the other values when `odd`.
Form sparse_form(Index N, Index K, std::uint64_t seed, bool odd) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<Index> column(0, K - 1), length(1, 80), runs(0, 6), pick(0, 9);
  Form F{Vector<double>::Zero(N), Matrix<double>::Zero(N, K), Vector<double>::Zero(N)};
  for (Index e = 0; e < N; ++e) {
    F.c(e) = unit(rng);
    for (Index r = runs(rng); r > 0; --r) {
      const Index j0 = column(rng), w = length(rng);
      for (Index j = j0; j < std::min(K, j0 + w); ++j) {
        double v = unit(rng);
        if (odd) {
          const Index k = pick(rng);
          v = k == 0   ? -0.0
              : k == 1 ? 1e-310
              : k == 2 ? (e % 7 == 3 ? std::numeric_limits<double>::quiet_NaN() : v)
              : k == 3 ? (e % 7 == 5 ? std::numeric_limits<double>::infinity() : v)
                       : v;
        }
        F.A(e, j) = v;
      }
    }
  }
  return F;
}

/// Whether column j of row e holds a value other than ±0 (NaN counts).
bool nonzero(const Form& F, Index e, Index j) { return !(F.A(e, j) == 0.0); }

TEST(FormRuns, CoverEveryNonzeroAndOnlyBlocksThatHoldOne) {
  Pass p;
  p.q = 5;
  for (const Index K : {Index(1), Index(31), Index(32), Index(33), Index(700), Index(2048), Index(4133)}) {
    const Form F = sparse_form(23, K, std::uint64_t(K), true);
    // NaN and ∞ make the row sums throw Vacuous: with the sums cached already, measure marks the blocks only
    F.sums = F.ranges = F.inputs = Vector<double>::Zero(F.size());
    measure(F, p, true);
    ASSERT_EQ(F.nonzero_cols, K);
    for (Index e = 0; e < F.size(); ++e)
      for (const auto& [from, to] : std::vector<std::pair<Index, Index>>{
               {0, K}, {0, K / 2}, {K / 3, K}, {32, 544}, {7, 71}, {K, K + 40}}) {
        std::vector<char> covered(static_cast<std::size_t>(K + 64), 0);
        Index last_end = -1;
        for_each_run(F, e, from, to, [&](Index j, Index w) {
          ASSERT_GT(w, 0);
          ASSERT_GE(j, std::max(from, Index(0)));
          ASSERT_LE(j + w, std::min(to, K));
          ASSERT_GT(j, last_end);  // increasing, disjoint and not adjacent (adjacent runs are merged)
          last_end = j + w;
          for (Index c = j; c < j + w; ++c) covered[std::size_t(c)] = 1;
        });
        for (Index j = std::max(from, Index(0)); j < std::min(to, K); ++j) {
          if (nonzero(F, e, j)) {
            EXPECT_TRUE(covered[std::size_t(j)]) << "K " << K << " row " << e << " col " << j;
          }
          if (covered[std::size_t(j)]) {  // its block of 32 holds a nonzero
            bool any = false;
            for (Index c = j / column_block * column_block;
                 c < std::min(K, (j / column_block + 1) * column_block); ++c)
              any = any || nonzero(F, e, c);
            EXPECT_TRUE(any) << "K " << K << " row " << e << " col " << j;
          }
        }
      }
  }
}

TEST(FormRuns, ColumnsAddedAfterMeasureAreZerosAndForgetDropsTheMarks) {
  Pass p;
  p.q = 3;
  p.next = 300;
  Form F = sparse_form(9, 300, 17, false);
  measure(F, p, true);
  F.A.conservativeResize(Eigen::NoChange, 400);  // zero columns appended later (as coefficients() leaves)
  F.A.rightCols(100).setZero();
  for (Index e = 0; e < F.size(); ++e)
    for_each_run(F, e, 0, 400, [&](Index j, Index w) { EXPECT_LE(j + w, 300); });
  Vector<double> beta = Vector<double>::Zero(F.size());
  beta(4) = 0.5;
  add_fresh(F, beta, p);  // writes a coefficient and forgets the caches
  EXPECT_LT(F.nonzero_cols, 0);
  measure(F, p, true);
  bool seen = false;
  for_each_run(F, 4, 0, F.A.cols(), [&](Index j, Index w) { seen = seen || (j <= 300 && 300 < j + w); });
  EXPECT_TRUE(seen);
}

/// matmul's coefficients against the dense accumulation of every term (F_e·c_G + c_F·G_f over all columns,
/// in the order of the inner index), bit for bit: the runs leave out only terms w·0.
TEST(FormRuns, MatmulEqualsTheDenseAccumulation) {
  const Index n = 5, inner = 7, m_out = 4, K = 1500;
  Pass p;
  p.q = 10;
  p.next = K;
  const Form F = sparse_form(n * inner, K, 101, false), G = sparse_form(inner * m_out, K - 300, 202, false);
  auto a = [](Index i, Index j) { return i * inner + j; };
  auto b = [](Index j, Index k) { return j * m_out + k; };
  auto allowed = [](Index i, Index j) { return (i + j) % 3 != 1; };
  const Form out = matmul(F, G, n, inner, m_out, a, b, allowed, p);
  Matrix<double> dense = Matrix<double>::Zero(n * m_out, K);
  for (Index i = 0; i < n; ++i)
    for (Index k = 0; k < m_out; ++k)
      for (Index j = 0; j < inner; ++j) {
        if (!allowed(i, j)) continue;
        auto row = dense.row(i * m_out + k);
        row.head(G.A.cols()) += F.c(a(i, j)) * G.A.row(b(j, k));
        row += G.c(b(j, k)) * F.A.row(a(i, j));
      }
  ASSERT_GE(out.A.cols(), K);
  Index differ = 0, nonzeros = 0;
  for (Index o = 0; o < n * m_out; ++o)
    for (Index j = 0; j < K; ++j) {
      differ += std::bit_cast<std::uint64_t>(out.A(o, j)) != std::bit_cast<std::uint64_t>(dense(o, j));
      nonzeros += dense(o, j) != 0;
    }
  EXPECT_EQ(differ, 0);
  EXPECT_GT(nonzeros, K / 4);  // the case has coefficients to get wrong
}

/// sum_up and gamma_of from the memo against the formula evaluated afresh, for more counts than the memo
/// holds (so that slots are reused) and back again.
TEST(FormRuns, SumUpMemoGivesTheFormulasValues) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> unit(0.0, 1e3);
  for (int round = 0; round < 3; ++round)
    for (double m : {1.0, 2.0, 3.0, 17.0, 64.0, 65.0, 1000.0, 4133.0, 4069.0, 33.0, 32.0, 1e6, 0.0}) {
      const double x = unit(rng);
      const I mu = I(m) * I(unit_roundoff);
      const double gamma = hi(mu / (I(1.0) - mu));
      EXPECT_EQ(gamma_of(m), gamma) << m;
      EXPECT_EQ(sum_up(x, m), hi((I(x) + I(m) * I(underflow_unit)) / (I(1.0) - I(gamma)))) << m;
      EXPECT_EQ(sum_up(x, sum_constants(m)), sum_up(x, m)) << m;
    }
  EXPECT_THROW(sum_up(std::numeric_limits<double>::infinity(), 3.0), Vacuous);
}

}  // namespace
}  // namespace regatta::operators::affine
