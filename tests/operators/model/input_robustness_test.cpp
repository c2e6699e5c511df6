// The per-input robustness record and its summary (operators/src/model/input_robustness.cpp): the summary's
// medians against a sort and the exact mean of the middle pair in 256-bit MPFR (the certified ones rounded
// down, the attack's to nearest); the naive denominator √2·Π L_k against its 256-bit value; and on the ViT
// fixture, each record's certified numbers against its estimates (margin_lower ≤ margin, the naive and the
// certified radius ≤ the attack radius, naive = margin_lower / denominator rounded down).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <regatta/core/precision.hpp>

#include "vit_fixture.hpp"

namespace regatta::operators {
namespace {

using namespace vit_fixture;

/// The exact median of v in 256-bit MPFR (the mean of the middle pair for an even count).
mpfr exact_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? mpfr(v[n / 2]) : (mpfr(v[n / 2 - 1]) + mpfr(v[n / 2])) / 2;
}

TEST(InputRobustness, SummaryMediansAreExactOrRoundedDownWhereCertified) {
  PrecisionGuard guard(256);
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> r(0, 1);
  for (int count : {1, 2, 5, 8, 13}) {
    std::vector<InputRobustness> rows(static_cast<std::size_t>(count));
    std::vector<double> certified, attack, naive, local;
    long correct = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      InputRobustness& row = rows[i];
      row.label = int(i % 3);
      row.prediction = i % 4 == 0 ? 1 : row.label;
      row.certified = r(rng) / 3;  // thirds: the mean of two is rarely a double
      row.attack = i == 1 ? std::numeric_limits<double>::infinity() : 0.1 + r(rng);
      row.naive = r(rng) / 7;
      row.has_local = i % 2 == 0;
      row.local = r(rng) / 11;
      certified.push_back(row.certified);
      attack.push_back(row.attack);
      naive.push_back(row.naive);
      if (row.has_local) local.push_back(row.local);
      correct += row.prediction == row.label;
    }
    const RobustnessSummary s = summarize(rows);
    EXPECT_EQ(s.clean_accuracy, double(correct) / count);
    for (const auto& [got, values] : {std::pair{s.median_certified, certified},
                                      std::pair{s.median_naive, naive}, std::pair{s.median_local, local}}) {
      const mpfr exact = exact_median(values);
      EXPECT_LE(mpfr(got), exact) << count;
      EXPECT_GE(mpfr(std::nextafter(got, std::numeric_limits<double>::infinity())), exact) << count;
    }
    // The attack's median is an estimate: the double nearest the exact mean (inf when the middle is inf).
    const mpfr exact_attack = exact_median(attack);
    if (isinf(exact_attack))
      EXPECT_TRUE(std::isinf(s.median_attack));
    else
      EXPECT_LE(abs(mpfr(s.median_attack) - exact_attack), abs(exact_attack) * 0x1p-53) << count;
  }
}

TEST(InputRobustness, NaiveDenominatorIsRoundedUp) {
  PrecisionGuard guard(256);
  const std::vector<LipschitzFactor> factors = {{"a", 3.7, ""}, {"b", 1.0 / 3, ""}, {"c", 1e5 + 0.1, ""}};
  mpfr exact = sqrt(mpfr(2));
  for (const LipschitzFactor& f : factors) exact *= mpfr(f.upper);
  const double d = naive_denominator(factors);
  EXPECT_GE(mpfr(d), exact);
  EXPECT_LE(mpfr(d), exact * (1 + 8 * 0x1p-53));
}

TEST(InputRobustness, CertifiedNumbersOfARecordStayBelowItsEstimates) {
  const Model m = load_model(fixture() / "vit_digits.safetensors");
  const TestSet t = read_test_set();
  const ConvertedModel<double> md(m);
  const ConvertedModel<interval64> mi(m);
  std::string why;
  const auto factors = global_lipschitz_factors(m, why);
  ASSERT_TRUE(factors.has_value()) << why;
  const double denominator = naive_denominator(*factors);
  PrecisionGuard guard(256);
  for (std::size_t i : {0u, 5u}) {
    const int y = int(t.labels.data[i]);
    const InputRobustness r = input_robustness(md, mi, image(t, i), y, denominator);
    EXPECT_EQ(r.label, y);
    EXPECT_LE(r.margin_lower, r.margin) << i;
    EXPECT_GE(r.margin_lower, r.margin - 1e-6 * std::max(1.0, std::abs(r.margin))) << i;  // tight at a point
    if (r.margin_lower > 0) {
      EXPECT_LE(mpfr(r.naive), mpfr(r.margin_lower) / mpfr(denominator)) << i;
      EXPECT_GT(r.naive, 0) << i;
    }
    EXPECT_LE(r.naive, r.attack) << i;
    EXPECT_LE(r.certified, r.attack) << i;
    if (r.prediction == y && r.margin_lower > 0) {
      EXPECT_GT(r.certified, 0) << i;
    }
  }
}

}  // namespace
}  // namespace regatta::operators
