// Compensated summation against exact sums (MPFR at 2100 bits holds any sum of doubles exactly here).
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <regatta/core/compensated_sum.hpp>
#include <regatta/core/convert.hpp>
#include <regatta/core/precision.hpp>

namespace regatta {
namespace {

mpfr exact_sum(const std::vector<double>& x) {
  PrecisionGuard g(2200);  // exponents of the test data span < 2100 bits: every partial sum is exact
  mpfr s(0);
  for (double v : x) s += mpfr(v);
  return s;
}

// Ill-conditioned: large terms that cancel, plus small ones that carry the answer.
std::vector<double> cancelling(std::mt19937_64& rng, std::size_t n) {
  std::normal_distribution<double> g(0, 1);
  std::vector<double> x;
  for (std::size_t k = 0; k < n; ++k) {
    const double big = std::ldexp(g(rng), 60);
    x.push_back(big);
    x.push_back(g(rng));
    x.push_back(-big);
  }
  std::shuffle(x.begin(), x.end(), rng);
  return x;
}

TEST(CompensatedSum, MeetsTheDocumentedBoundOnCancellingSums) {
  std::mt19937_64 rng(5);
  const double u = eps<double>() / 2;
  for (std::size_t n : {10u, 100u, 1000u}) {
    const auto x = cancelling(rng, n);
    const double c = compensated_sum<double>(std::span<const double>(x));
    double abs_sum = 0, naive = 0;
    for (double v : x) {
      abs_sum += std::abs(v);
      naive += v;
    }
    const mpfr exact = exact_sum(x);
    PrecisionGuard g(2200);
    const double err = scalar_traits<mpfr>::to_double(abs(mpfr(c) - exact));
    const double exact_d = scalar_traits<mpfr>::to_double(exact);
    const double m = static_cast<double>(x.size());
    EXPECT_LE(err, 2 * u * std::abs(exact_d) + 2 * m * m * u * u * abs_sum) << n;
    // and it beats the plain sum by orders of magnitude on this data
    const double naive_err = scalar_traits<mpfr>::to_double(abs(mpfr(naive) - exact));
    // (the smallest subnormal keeps the strict comparison satisfiable when both errors are 0)
    EXPECT_LT(err * 1e3, naive_err + std::numeric_limits<double>::denorm_min()) << n;
  }
}

TEST(CompensatedSum, FloatAndMpfr) {
  std::vector<float> x = {1e8f, 1.0f, -1e8f, 1.0f};
  EXPECT_EQ(compensated_sum<float>(std::span<const float>(x)), 2.0f);
  PrecisionGuard g(64);
  const mpfr big = ldexp(mpfr(1), 100);
  const std::vector<mpfr> y = {big, mpfr(1), mpfr(-big), mpfr(1)};
  EXPECT_EQ(compensated_sum<mpfr>(std::span<const mpfr>(y)), mpfr(2));
}

TEST(CompensatedSum, IntervalEnclosesExactSum) {
  std::mt19937_64 rng(9);
  const auto x = cancelling(rng, 50);
  std::vector<interval> xi;
  PrecisionGuard g(53);
  for (double v : x) xi.push_back(interval(v));
  const interval s = compensated_sum<interval>(std::span<const interval>(xi));
  const mpfr exact = exact_sum(x);
  EXPECT_TRUE(contains(s, exact));
}

TEST(CompensatedDot, Dot2AgainstExact) {
  std::mt19937_64 rng(13);
  std::normal_distribution<double> g(0, 1);
  std::vector<double> a, b;
  for (int k = 0; k < 200; ++k) {  // a·b cancels: pairs (t, s) and (t, -s)
    const double t = std::ldexp(g(rng), 40), s = g(rng);
    a.push_back(t), b.push_back(s), a.push_back(t), b.push_back(-s);
    a.push_back(g(rng)), b.push_back(g(rng));
  }
  const double d = compensated_dot<double>(std::span<const double>(a), std::span<const double>(b));
  PrecisionGuard wide(2200);
  mpfr exact(0), abs_dot(0);
  for (std::size_t k = 0; k < a.size(); ++k) {
    exact += mpfr(a[k]) * mpfr(b[k]);
    abs_dot += abs(mpfr(a[k]) * mpfr(b[k]));
  }
  const double u = eps<double>() / 2, n = static_cast<double>(a.size());
  const double bound = 2 * u * std::abs(scalar_traits<mpfr>::to_double(exact)) +
                       4 * n * n * u * u * scalar_traits<mpfr>::to_double(abs_dot);
  EXPECT_LE(scalar_traits<mpfr>::to_double(abs(mpfr(d) - exact)), bound);
}

}  // namespace
}  // namespace regatta
