// Brackets (operators/lipschitz/bracket.hpp):
//   * lower ≤ upper on every configuration produced (random layers, kinds, n, R, norms, residual, pre-norm),
//     for the estimates and for the certified ends;
//   * certified lower ≤ double estimate (to rounding) and close to it, estimate ≤ certified upper;
//   * the Kim et al. tightness family (docs/math/bounds.md#kim-tightness): the Jacobian path against the
//     closed form, and the
//     ratio at N = 1000 against the mpmath value of docs/math/bounds.md#kim-tightness-table
//     (17.06548590395152166910, computed there at
//     high precision) and the 0.9 target;
//   * Theorem 3.1 (docs/math/bounds.md#dot-product-unbounded): for d = 1 the mpfr value against the exact 1 +
//     (4/5)s² of the reference
//     input, certified lower ends beyond 10, 100, 1000; for a random multi-head layer certified growth.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include <random>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/lipschitz/bracket.hpp>
#include "support/tolerance.hpp"

namespace regatta::lip {
namespace {

using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Prenorm;

AttentionLayer random_layer(AttentionKind kind, int d, int heads, std::uint64_t seed, double scale = 1.0) {
  operators::RandomLayerSpec spec;
  spec.d = d;
  spec.heads = heads;
  spec.seed = seed;
  spec.scale = scale;
  spec.kind = kind;
  return operators::random_layer(spec);
}

BracketOptions quick(Norm norm, std::int64_t n, std::optional<double> radius, bool certify,
                     std::uint64_t seed) {
  BracketOptions b;
  b.norm = norm;
  b.n = n;
  b.radius = radius;
  b.certify = certify;
  b.search.seed = seed;
  b.search.random_starts = 1;
  b.search.ascent_steps = 8;
  b.search.max_evaluations = 250;
  return b;
}

/// A small deterministic generator for the property test's configurations.
struct Draw {
  std::uint64_t state;
  std::uint64_t next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return state >> 33;
  }
  int integer(int lo, int hi) { return lo + int(next() % std::uint64_t(hi - lo + 1)); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * double(next() % 1000000) / 1e6; }
};

TEST(Bracket, LowerNeverExceedsUpper) {
  Draw draw{2024};
  int with_bound = 0;
  for (int k = 0; k < 24; ++k) {
    const AttentionKind kind = draw.integer(0, 1) ? AttentionKind::l2 : AttentionKind::dot;
    const int heads = draw.integer(1, 2);
    const int d = heads * draw.integer(1, 2);
    const AttentionLayer layer = random_layer(kind, d, heads, draw.next(), draw.uniform(0.3, 3.0));
    AttentionOptions options;
    options.residual = draw.integer(0, 3) == 0;
    options.causal = draw.integer(0, 3) == 0;
    if (draw.integer(0, 4) == 0) options.prenorm = Prenorm::layernorm;
    const Norm norm = draw.integer(0, 1) ? Norm::two : Norm::inf;
    const std::int64_t n = draw.integer(2, 6);
    const std::optional<double> radius = kind == AttentionKind::dot || draw.integer(0, 1)
                                             ? std::optional<double>(draw.uniform(0.2, 3))
                                             : std::nullopt;
    const bool certify = k % 3 == 0;
    const Bracket b = compute_bracket(layer, options, quick(norm, n, radius, certify, k));
    SCOPED_TRACE("case " + std::to_string(k) + ", bound " + b.bound_name);
    EXPECT_GE(b.lower_estimate, 0);
    EXPECT_LE(b.lower_estimate, b.upper_estimate);
    EXPECT_LE(b.lower, b.upper);
    if (std::isfinite(b.upper)) {
      ++with_bound;
      EXPECT_LE(b.ratio, 1);
      EXPECT_DOUBLE_EQ(b.ratio, b.lower / b.upper);
    }
    if (b.lower_certified && b.upper_certified) {
      EXPECT_LE(*b.lower_certified, *b.upper_certified);
    }
  }
  EXPECT_GE(with_bound, 12);  // most configurations have a bound: the property is not vacuous
}

TEST(Bracket, CertifiedEndsBracketTheEstimates) {
  const struct {
    AttentionKind kind;
    Norm norm;
    std::optional<double> radius;
  } cases[] = {{AttentionKind::dot, Norm::two, 1.5},
               {AttentionKind::l2, Norm::two, std::nullopt},
               {AttentionKind::l2, Norm::inf, std::nullopt},
               {AttentionKind::l2, Norm::inf, 0.8}};
  std::uint64_t seed = 3;
  for (const auto& c : cases) {
    const AttentionLayer layer = random_layer(c.kind, 4, 2, seed++);
    const Bracket b = compute_bracket(layer, {}, quick(c.norm, 5, c.radius, true, seed));
    SCOPED_TRACE(b.bound_name);
    ASSERT_TRUE(b.certified) << b.note;
    // Interval enclosure of the exact value at the same point: below the double value up to its rounding,
    // and tight at 128 bits. The double lower estimate is ‖J w‖ (or a row sum of J) for n = 5 tokens of
    // width d = 4: a VJP/JVP chain of n·d + d² + n operations and a sum over n·d entries with their
    // products; c = 4 as for two independent evaluations with cancelling softmax sums.
    const double n = 5, d = 4;
    const double witness_rounding = testing::rounding_bound<double>(4, n * d + d * d + n + 2 * n * d);
    EXPECT_LE(*b.lower_certified, b.lower_estimate * (1 + witness_rounding));
    EXPECT_GE(*b.lower_certified, b.lower_estimate * (1 - witness_rounding));
    // The bound's formula in double (norms of d×d products, ≲ 4·d + 32 operations) may exceed its exact
    // value, which the certified upper end encloses, by its rounding; the exponentials of the dot-product
    // bound at radius 1.5 multiply it by up to 1 + 2‖A‖R² ≲ 16.
    EXPECT_LE(b.upper_estimate, *b.upper_certified * (1 + testing::rounding_bound<double>(16, 4 * d + 32)));
    EXPECT_EQ(b.lower, *b.lower_certified);
    EXPECT_EQ(b.upper, *b.upper_certified);
  }
}

TEST(Bracket, DotProductWithoutRadiusHasNoUpperEnd) {
  const Bracket b =
      compute_bracket(random_layer(AttentionKind::dot, 2, 1, 1), {}, quick(Norm::two, 4, {}, true, 0));
  EXPECT_TRUE(b.bound_name.empty());
  EXPECT_FALSE(std::isfinite(b.upper));
  EXPECT_EQ(b.ratio, 0);
  EXPECT_FALSE(b.certified);
  EXPECT_TRUE(b.lower_certified.has_value());
  EXPECT_FALSE(b.refused.empty());
}

TEST(Bracket, WitnessOutsideTheBallIsNotCertified) {
  const AttentionLayer layer = random_layer(AttentionKind::dot, 2, 1, 2);
  JacobianWitness w;
  w.input = Matrix<double>::Ones(3, 2);  // tokens of norm √2
  w.direction = Matrix<double>::Ones(3, 2);
  const WitnessCertificate inside = certify_witness(layer, {}, w, Norm::two, 1.5, 128);
  EXPECT_TRUE(inside.lower.has_value()) << inside.reason;
  const WitnessCertificate outside = certify_witness(layer, {}, w, Norm::two, 1.4, 128);
  EXPECT_FALSE(outside.lower.has_value());
  EXPECT_NE(outside.reason.find("not certainly inside"), std::string::npos);
}

TEST(Bracket, BadInputIsRefused) {
  const AttentionLayer layer = random_layer(AttentionKind::l2, 2, 1, 0);
  EXPECT_THROW(compute_bracket(layer, {}, quick(Norm::two, 0, {}, false, 0)), InputError);
  BracketOptions b = quick(Norm::two, 3, {}, true, 0);
  b.precision_bits = 20;
  EXPECT_THROW(compute_bracket(layer, {}, b), InputError);
  EXPECT_THROW(compute_bracket(layer, {}, quick(Norm::two, 3, -1.0, false, 0)), InputError);
}

// ---- Kim et al. tightness family ----

TEST(KimTightness, JacobianPathMatchesTheClosedForm) {
  const operators::Block<double> block(kim_unit_layer());
  const Vector<double> u = Vector<double>::Ones(1);
  for (const std::int64_t n : {3, 5, 11, 101})
    for (const double t : {0.5, 1.0, 2.5, 7.0}) {
      const Matrix<double> X = balanced_input(n, u, std::sqrt(t), 0);
      Matrix<double> first = Matrix<double>::Zero(n, 1);
      first(0, 0) = 1;
      const Matrix<double> row = block.linearize(X).vjp(first);
      const double formula = kim_family_row_sum(n, t);
      // The VJP's softmax over n keys and the row's n-term sum, against the closed form's few operations;
      // c = 2 for the two sides.
      EXPECT_NEAR(row.cwiseAbs().sum(), formula,
                  testing::rounding_bound<double>(2, 2.0 * double(n) + 8) * formula)
          << "n = " << n << ", t = " << t;
    }
}

TEST(KimTightness, RatioAtOneThousandTokens) {
  const TightnessPoint p = kim_tightness(1000);
  // docs/math/bounds.md#kim-tightness table (mpmath): max_t ‖J‖∞ = 17.06548590395152166910 at t* =
  // 5.51637598150051867.
  const double lower = 17.06548590395152166910, t_star = 5.51637598150051867;
  // The row sum at the found t is a VJP through a softmax over n = 1000 keys and a 1000-term sum: 2·n
  // operations, c = 4 (the same rounding lets the golden-section search settle where the value is within
  // that much of the maximum).
  const double value_tolerance = testing::rounding_bound<double>(4, 2.0 * 1000) * lower;
  EXPECT_NEAR(p.lower, lower, value_tolerance);
  // The maximum is flat: values within 2·value_tolerance of it lie within √(4·value_tolerance/|f''|) of t*,
  // with the curvature f'' a second difference of the row sum (at a step where its truncation is small).
  const operators::Block<double> block(kim_unit_layer());
  const auto row_sum = [&](double t) {  // the first-row absolute sum of J on the family input at n = 1000
    Matrix<double> first = Matrix<double>::Zero(1000, 1);
    first(0, 0) = 1;
    return block.linearize(balanced_input(1000, Vector<double>::Ones(1), std::sqrt(t), 0))
        .vjp(first)
        .cwiseAbs()
        .sum();
  };
  const double h = 0.01;
  const double curvature =
      std::abs(row_sum(t_star + h) - 2 * row_sum(t_star) + row_sum(t_star - h)) / (h * h);
  EXPECT_NEAR(p.t, t_star, std::sqrt(4 * value_tolerance / curvature));
  EXPECT_GE(p.ratio, 0.9);
  EXPECT_LE(p.lower, p.upper);
}

TEST(KimTightness, RatioIncreasesWithN) {
  double previous = 0;
  for (const std::int64_t n : {2, 10, 100}) {
    const TightnessPoint p = kim_tightness(n);
    EXPECT_GT(p.ratio, previous) << "n = " << n;
    EXPECT_LE(p.ratio, 1);
    previous = p.ratio;
  }
}

// ---- Theorem 3.1 ----

AttentionLayer unit_dot_layer() {
  AttentionLayer layer = kim_unit_layer();
  layer.kind = AttentionKind::dot;
  return layer;
}

TEST(Theorem31, OneDimensionalReferenceInputGrowsQuadratically) {
  // docs/math/bounds.md#dot-product-unbounded: n = 5, a = 1, x = (0, s, −s, s, −s): J_11 = 1/5 + (4/5)s²,
  // J_1j = 1/5, so the first row
  // sums to 1 + (4/5)s² exactly.
  const std::vector<double> scales{4, 12, 36, 1000};
  const std::vector<GrowthPoint> g = theorem31_growth(unit_dot_layer(), {}, 5, scales, Norm::inf, 256);
  ASSERT_EQ(g.size(), scales.size());
  const double thresholds[] = {10, 100, 1000, 1e5};
  // `exact` rounds three times; the double value is the first row's sum, dominated by J_11 = 1/5 + (4/5)s²,
  // a chain of ≲ 4 roundings relative to the sum; the certified end is rounded down once. c = 1.
  const double row_rounding = testing::rounding_bound<double>(1, 4);
  for (std::size_t k = 0; k < g.size(); ++k) {
    const double exact = 1 + 0.8 * scales[k] * scales[k];
    EXPECT_NEAR(g[k].value, exact, row_rounding * exact);
    ASSERT_TRUE(g[k].certified_lower.has_value());
    // Rounded down from a 256-bit enclosure of the exact value: within an ulp or two of the double `exact`.
    EXPECT_LE(*g[k].certified_lower, exact * (1 + row_rounding));
    EXPECT_GE(*g[k].certified_lower, exact * (1 - row_rounding));
    EXPECT_GT(*g[k].certified_lower, thresholds[k]);
  }
}

TEST(Theorem31, RandomMultiHeadLayerExceedsAnyLevel) {
  const AttentionLayer layer = random_layer(AttentionKind::dot, 4, 2, 17);
  const std::vector<double> scales{2, 8, 32, 128};
  for (const Norm norm : {Norm::two, Norm::inf}) {
    const std::vector<GrowthPoint> g = theorem31_growth(layer, {}, 5, scales, norm, 192, 3);
    double previous = 0;
    for (const GrowthPoint& p : g) {
      ASSERT_TRUE(p.certified_lower.has_value());
      // The certified end encloses the exact value that the double value rounds (row_rounding's chain).
      EXPECT_LE(*p.certified_lower, p.value * (1 + testing::rounding_bound<double>(1, 4)));
      EXPECT_GT(*p.certified_lower, previous);
      previous = *p.certified_lower;
    }
    // Quadratic growth: ×16 in c² between consecutive scales, so 10, 100, 1000 are passed.
    EXPECT_GT(*g.back().certified_lower, 1000) << to_string(norm);
  }
}

// On a small domain the region enclosure over [−R, R]^{n×d} is the upper end: it is below the formula
// bound, at least the certified lower end, and at least ‖J(X)‖ at sampled inputs with tokens in B_R
// (JacobiSVD / row sums of the double Jacobian, an independent computation; the slack covers their rounding
// at n·d = 6, 64 rounded operations with a factor 16).
TEST(Bracket, RegionEnclosureGivesTheUpperEndOnASmallDomain) {
  operators::RandomLayerSpec spec;
  spec.d = 2;
  spec.heads = 1;
  spec.seed = 3;
  const AttentionLayer layer = operators::random_layer(spec);
  const AttentionOptions options;
  const double slack = testing::rounding_bound<double>(16, 64);
  for (Norm norm : {Norm::two, Norm::inf}) {
    BracketOptions o;
    o.n = 3;
    o.radius = 0.05;
    o.norm = norm;
    o.certify = true;
    o.search.max_evaluations = 500;
    const Bracket b = compute_bracket(layer, options, o);
    ASSERT_TRUE(b.region_upper.has_value()) << b.region_note;
    EXPECT_EQ(b.bound_name, "region.box_enclosure");
    ASSERT_TRUE(b.upper_certified && b.lower_certified);
    EXPECT_EQ(*b.upper_certified, *b.region_upper);
    EXPECT_LT(*b.region_upper, b.upper_estimate);  // the formula bound in double
    EXPECT_LE(*b.lower_certified, *b.upper_certified);
    std::mt19937_64 gen(7);
    for (int sample = 0; sample < 40; ++sample) {
      Matrix<double> X = Eigen::Map<const Matrix<double>>(standard_normal(6, 100 + sample).data(), 3, 2);
      for (Eigen::Index i = 0; i < 3; ++i)
        X.row(i) *= 0.05 * std::uniform_real_distribution<double>(0, 1)(gen) / X.row(i).norm();
      const Matrix<double> J =
          operators::dense_jacobian(operators::Block<double>(layer, options).linearize(X));
      const double value =
          norm == Norm::two ? largest_singular_value(J) : J.cwiseAbs().rowwise().sum().maxCoeff();
      EXPECT_LE(value, *b.region_upper * (1 + slack));
    }
  }
  // Without a radius there is no region, and the note says why.
  BracketOptions unbounded;
  unbounded.n = 3;
  unbounded.certify = true;
  unbounded.search.max_evaluations = 200;
  const Bracket u = compute_bracket(layer, options, unbounded);
  EXPECT_FALSE(u.region_upper.has_value());
  EXPECT_NE(u.region_note.find("unbounded"), std::string::npos);
}

}  // namespace
}  // namespace regatta::lip
