// Stable log-sum-exp / softmax: the same quantity three ways (streamed one term at a time, blocked and
// merged, naive log(sum(exp))) against MPFR at 256 bits, on corner-biased random logits; intervals must
// enclose the 512-bit value.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <regatta/core/convert.hpp>
#include <regatta/core/log_sum_exp.hpp>
#include <regatta/core/precision.hpp>

#include "support/scalar_names.hpp"
#include "support/tolerance.hpp"

namespace regatta {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Corner-biased logits: moderate values, huge magnitudes (+-700), exact ties, -inf entries, one dominant
// entry.
std::vector<double> random_logits(std::mt19937_64& rng, std::size_t n, int family) {
  std::normal_distribution<double> g(0, 1);
  std::vector<double> x(n);
  for (auto& v : x) v = g(rng);
  switch (family) {
    case 0:  // moderate
      break;
    case 1:  // huge positive: naive exp overflows in double
      for (auto& v : x) v = 700 + 5 * v;
      break;
    case 2:  // huge negative: naive exp underflows to 0 in double
      for (auto& v : x) v = -745 + 3 * v;
      break;
    case 3:  // ties and -inf (masked keys)
      for (std::size_t k = 0; k < n; ++k) x[k] = (k % 3 == 0) ? -kInf : std::round(x[k]);
      break;
    case 4:  // one-hot: one entry dominates by 1e4
      x[n / 2] = 1e4;
      break;
  }
  return x;
}

mpfr reference_lse(const std::vector<double>& x) {  // naive in MPFR: exp never overflows at these sizes
  PrecisionGuard g(256);
  mpfr sum(0);
  for (double v : x)
    if (std::isfinite(v)) sum += exp(mpfr(v));
  return sum == 0 ? -scalar_traits<mpfr>::infinity() : mpfr(log(sum));
}

template <class S>
S streamed(const std::vector<double>& x) {
  auto acc = LogSumExp<S>::identity();
  for (double v : x) acc.push(scalar_cast<S>(v));
  return acc.finalize();
}

template <class S>
S blocked(const std::vector<double>& x, std::size_t block) {
  auto total = LogSumExp<S>::identity();
  for (std::size_t start = 0; start < x.size(); start += block) {
    auto part = LogSumExp<S>::identity();
    for (std::size_t k = start; k < std::min(x.size(), start + block); ++k) part.push(scalar_cast<S>(x[k]));
    total.merge(part);
  }
  return total.finalize();
}

// The documented bound: |error| <= (|result| + 2n + 2) eps, first order.
template <class S>
double tolerance(double result, std::size_t n) {
  return (std::abs(result) + 2.0 * n + 2.0) * scalar_traits<S>::to_double(eps<S>()) * 1.01;
}

template <class S>
class LseAgainstMpfr : public ::testing::Test {};
using PointTypes = testing::TypesOf<scalars::point>;
TYPED_TEST_SUITE(LseAgainstMpfr, PointTypes, testing::ScalarNames);

TYPED_TEST(LseAgainstMpfr, StreamedBlockedAndReferenceAgree) {
  using S = TypeParam;
  PrecisionGuard g(113);  // mpfr at 113 bits: checks the bound at a non-native precision too
  std::mt19937_64 rng(20261129);
  for (std::size_t n : {1u, 2u, 7u, 64u, 1000u}) {
    for (int family = 0; family < 5; ++family) {
      if (std::is_same_v<S, float> && (family == 1 || family == 2 || family == 4)) continue;  // float range
      const auto x = random_logits(rng, n, family);
      const mpfr ref = reference_lse(x);
      if (!scalar_traits<mpfr>::is_finite(ref)) {
        EXPECT_FALSE(scalar_traits<S>::is_finite(streamed<S>(x)));
        continue;
      }
      const double r = scalar_traits<mpfr>::to_double(ref);
      const double tol = tolerance<S>(r, n);
      for (std::size_t block : {std::size_t(1), std::size_t(5), std::size_t(64)}) {
        const S b = blocked<S>(x, block);
        PrecisionGuard wide(256);
        EXPECT_LE(scalar_traits<mpfr>::to_double(abs(scalar_cast<mpfr>(b) - ref)), tol)
            << "n=" << n << " family=" << family << " block=" << block;
      }
      const S s = streamed<S>(x);
      PrecisionGuard wide(256);
      EXPECT_LE(scalar_traits<mpfr>::to_double(abs(scalar_cast<mpfr>(s) - ref)), tol)
          << "n=" << n << " family=" << family;
    }
  }
}

// Softmax-weighted averages streamed with the Rescale factors (one term at a time, and in merged blocks)
// against the direct softmax-then-sum, for logits that overflow a naive exp.
TEST(Lse, RescaleFactorsStreamWeightedAverages) {
  std::mt19937_64 rng(17);
  const auto x = random_logits(rng, 97, 1);
  std::normal_distribution<double> g(0, 1);
  std::vector<double> v(x.size());
  for (auto& t : v) t = g(rng);
  // direct
  const Vector<double> p = softmax<double>(Eigen::Map<const Vector<double>>(x.data(), 97));
  double direct = 0, scale = 0;
  for (int k = 0; k < 97; ++k) {
    direct += p(k) * v[k];
    scale += p(k) * std::abs(v[k]);
  }
  // Each weight exp(x_k − lse) carries the documented error (|x_k − lse| + 2n + 2) eps relative, and the
  // weighted sum n eps more (inside the 2n), on the scale Σ p_k |v_k|; two computations: factor 2.
  const double lse = logsumexp<double>(std::span<const double>(x));
  double max_shift = 0;
  for (double t : x) max_shift = std::max(max_shift, std::abs(t - lse));
  const double average_tol = 2 * tolerance<double>(max_shift, x.size()) * scale;
  // one term at a time
  auto acc = LogSumExp<double>::identity();
  double sum = 0;
  for (int k = 0; k < 97; ++k) {
    const auto r = acc.push(x[k]);
    sum = r.self * sum + r.other * v[k];
  }
  EXPECT_NEAR(sum / acc.scaled_sum, direct, average_tol);
  // blocks of 10, merged
  auto total = LogSumExp<double>::identity();
  double total_sum = 0;
  for (int start = 0; start < 97; start += 10) {
    auto part = LogSumExp<double>::identity();
    double part_sum = 0;
    for (int k = start; k < std::min(97, start + 10); ++k) {
      const auto r = part.push(x[k]);
      part_sum = r.self * part_sum + r.other * v[k];
    }
    const auto r = total.merge(part);
    total_sum = r.self * total_sum + r.other * part_sum;
  }
  EXPECT_NEAR(total_sum / total.scaled_sum, direct, average_tol);
  EXPECT_EQ(total.finalize(), total.finalize());
}

TEST(Lse, NaiveFormulaAgreesWhereItCannotOverflow) {
  std::mt19937_64 rng(7);
  const auto x = random_logits(rng, 300, 0);
  double naive = 0;
  for (double v : x) naive += std::exp(v);
  naive = std::log(naive);
  const double stable = logsumexp<double>(std::span<const double>(x));
  EXPECT_NEAR(stable, naive, tolerance<double>(naive, x.size()) * 2);  // naive has its own n eps error
}

TEST(Lse, NoOverflowAtPlusMinus700InDouble) {
  const std::vector<double> x = {700, 700, -700, 699};
  const double r = logsumexp<double>(std::span<const double>(x));
  ASSERT_TRUE(std::isfinite(r));
  const double expected = 700 + std::log(2 + std::exp(-1.0) + std::exp(-1400.0));
  EXPECT_NEAR(r, expected, tolerance<double>(expected, 4));
  const std::vector<double> neg = {-800, -800};
  EXPECT_NEAR(logsumexp<double>(std::span<const double>(neg)), -800 + std::log(2.0),
              tolerance<double>(-800 + std::log(2.0), 2));
}

TEST(Lse, NoOverflowAtPlusMinus1e300InMpfr) {
  PrecisionGuard g(2048);  // 1e300 + log(1 + e^-5) needs ~1000 bits to be distinguishable from 1e300
  const mpfr big("1e300");
  const std::vector<mpfr> x = {big, mpfr(big - 5), mpfr(-big)};
  const mpfr r = logsumexp<mpfr>(std::span<const mpfr>(x));
  const mpfr expected = big + log1p(exp(mpfr(-5)));
  // The documented bound (|result| + 2n + 2) eps at 2048 bits (an absolute 1e300 · 2^-2047 ≈ 1e-316), and
  // the reference's own rounding: factor 2.
  EXPECT_TRUE(abs(r - expected) <= 2 * (abs(expected) + mpfr(2 * x.size() + 2)) * eps<mpfr>());
  EXPECT_TRUE(r > big);
}

TEST(Lse, AllMinusInfinityRow) {
  const std::vector<double> x = {-kInf, -kInf};
  EXPECT_EQ(logsumexp<double>(std::span<const double>(x)), -kInf);
  EXPECT_EQ(logsumexp<double>(std::span<const double>()), -kInf);
  Vector<double> v(2);
  v << -kInf, -kInf;
  EXPECT_EQ(softmax<double>(v), Vector<double>::Zero(2));
  EXPECT_EQ(log_softmax<double>(v)(0), -kInf);
  const std::vector<interval> xi = {scalar_cast<interval>(-kInf)};
  EXPECT_FALSE(scalar_traits<interval>::is_finite(logsumexp<interval>(std::span<const interval>(xi))));
}

TEST(Lse, PlusInfinityAndNaN) {
  const std::vector<double> x = {1, kInf};
  EXPECT_EQ(logsumexp<double>(std::span<const double>(x)), kInf);
  const std::vector<double> y = {1, std::numeric_limits<double>::quiet_NaN()};
  EXPECT_TRUE(std::isnan(logsumexp<double>(std::span<const double>(y))));
}

TEST(Lse, LogAddExp) {
  // Exact inputs: max + log1p(e^-|a − b|) against max + log 2, each a libm result within 1 ulp and one
  // rounded sum: 2 roundings a side, relative to the result (c = 1, n = 2).
  const double few_ulps = testing::rounding_bound<double>(1, 2);
  EXPECT_NEAR(logaddexp(0.0, 0.0), std::log(2.0), few_ulps * std::log(2.0));
  EXPECT_EQ(logaddexp(-kInf, 3.0), 3.0);
  EXPECT_EQ(logaddexp(-kInf, -kInf), -kInf);
  EXPECT_NEAR(logaddexp(1000.0, 1000.0), 1000 + std::log(2.0), few_ulps * (1000 + std::log(2.0)));
  // log(1 + e^-1000) = e^-1000 (1 + O(e^-1000)) lies below the smallest subnormal: a result within a few ulps
  // of it is exactly 0.
  EXPECT_EQ(logaddexp(-1000.0, 0.0), 0.0);
}

TEST(Softmax, RowsAreProbabilityVectorsWithinBound) {
  std::mt19937_64 rng(11);
  for (int family = 0; family < 5; ++family) {
    const auto x = random_logits(rng, 50, family);
    const Vector<double> v = Eigen::Map<const Vector<double>>(x.data(), 50);
    const Vector<double> p = softmax<double>(v);
    EXPECT_NEAR(p.sum(), 1.0, 60 * eps<double>());
    EXPECT_GE(p.minCoeff(), 0.0);
    // Each entry against MPFR: exp(x_k - lse) at 256 bits.
    const mpfr ref = reference_lse(x);
    PrecisionGuard g(256);
    for (int k = 0; k < 50; ++k) {
      if (!std::isfinite(x[k])) {
        EXPECT_EQ(p(k), 0.0);
        continue;
      }
      const double exact = scalar_traits<mpfr>::to_double(exp(mpfr(x[k]) - ref));
      // relative error of exp(a) with |a| <= 1e4 carrying eps |a| argument error: (|a| + n + 4) eps; below
      // the normal range each rounding (the exp, the normalisation, the reference's) is instead absolute,
      // half a subnormal step: 3 of them.
      const double a = std::abs(x[k] - scalar_traits<mpfr>::to_double(ref));
      const double subnormal_steps = 3 * 0.5 * std::numeric_limits<double>::denorm_min();
      EXPECT_LE(std::abs(p(k) - exact), (a + 60) * eps<double>() * exact + subnormal_steps)
          << family << " " << k;
    }
  }
}

TEST(Interval, LseEnclosesMpfr512Reference) {
  std::mt19937_64 rng(3);
  for (unsigned bits : {53u, 128u, 256u}) {
    for (int family = 0; family < 5; ++family) {
      const auto x = random_logits(rng, 40, family);
      interval enclosure;
      {
        PrecisionGuard g(bits);
        enclosure = blocked<interval>(x, 7);
      }
      PrecisionGuard g(512);
      mpfr sum(0);
      for (double v : x)
        if (std::isfinite(v)) sum += exp(mpfr(v));
      const mpfr ref = log(sum);
      EXPECT_TRUE(contains(enclosure, ref)) << "bits=" << bits << " family=" << family;
      // and it is tight: width <= 2^(8-bits) (|result| + n)
      const mpfr width = upper_bound(enclosure) - lower_bound(enclosure);
      EXPECT_TRUE(width <= ldexp(mpfr(abs(ref) + 100), 8 - static_cast<int>(bits)))
          << "bits=" << bits << " family=" << family;
    }
  }
}

TEST(Interval, SoftmaxEntriesEncloseTheExactValue) {
  PrecisionGuard g(80);
  Vector<interval> x(4);
  x << interval(1), interval(-3), interval(700), interval(700);
  const Vector<interval> p = softmax<interval>(x);
  PrecisionGuard wide(2048);  // e^-699 relative to 2 is 2^-1010: the reference needs > 1010 bits
  const mpfr lse = mpfr(700) + log(mpfr(2) + exp(mpfr(-699)) + exp(mpfr(-703)));
  const double xs[4] = {1, -3, 700, 700};
  for (int k = 0; k < 4; ++k) EXPECT_TRUE(contains(p(k), exp(mpfr(xs[k]) - lse))) << k;
}

TEST(Interval, WideInputIntervalsGiveAnEnclosureOfTheRange) {
  PrecisionGuard g(64);
  // x in [0, 1], y = 0: lse ranges over [log 2, log(1 + e)].
  const std::vector<interval> x = {make_interval(mpfr(0), mpfr(1)), interval(0)};
  const interval r = logsumexp<interval>(std::span<const interval>(x));
  PrecisionGuard wide(256);
  EXPECT_TRUE(lower_bound(r) <= log(mpfr(2)));
  EXPECT_TRUE(upper_bound(r) >= log1p(exp(mpfr(1))));
}

}  // namespace
}  // namespace regatta
