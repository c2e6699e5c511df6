// W_p: the network simplex against the 1-D quantile formula (double and 256-bit MPFR), metric properties,
// reference values, sliced Wasserstein as a lower estimate, and the certified bracket (contains the
// high-precision value, relative width within a few (n + m) eps max C / W_p^p, stays valid for a poor plan).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <regatta/core/precision.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/measures/wasserstein.hpp>
#include "support/tolerance.hpp"

namespace regatta::measures {
namespace {

DiscreteMeasure<double> random_measure(Eigen::Index n, Eigen::Index d, std::uint64_t seed,
                                       bool uniform = false, double shift = 0) {
  Matrix<double> x = random_matrix({n, d, RandomMatrixKind::gaussian, 1, 1e12, seed});
  x.array() += shift;
  if (uniform) return DiscreteMeasure<double>::empirical(std::move(x));
  std::mt19937_64 gen(seed + 1000);
  std::uniform_real_distribution<double> u(0.05, 1);
  Vector<double> w(n);
  for (Eigen::Index i = 0; i < n; ++i) w(i) = u(gen);
  if (n > 3) w(1) = 0;  // a zero weight
  return DiscreteMeasure<double>::from_weights(std::move(x), std::move(w), true);
}

/// A W_p^p or W_p computed in double is a sum of at most n + m positive terms mass · |x - y|^p (the plan of
/// the network simplex is a tree, the quantile coupling is monotone), each a few rounded operations
/// (difference, pow within 1 ulp, product), with masses that are differences of cumulative weight sums, so
/// its relative rounding is ~(n + m) eps. Two such computations are compared: c = 4 (2 for the two sides,
/// 2 for the per-term operations and the masses' own rounding). Measured: at most 0.8 (n + m) eps here.
double cost_rounding(Eigen::Index n, Eigen::Index m) {
  return testing::rounding_bound<double>(4, double(n + m));
}

/// One libm result (pow, sqrt) of an exactly computed argument, against a correctly rounded reference:
/// pow is within 1 ulp and the reference adds half an ulp, so 2 eps relative (n = 2 roundings, c = 1).
const double root_rounding = testing::rounding_bound<double>(1, 2);

/// max |x_i - y_j|^p over the atoms of positive weight: the cost scale against which the certified
/// bracket's rounding is measured (zero-weight atoms carry no mass and are not charged,
/// docs/math/transport.md#cert-upper).
double charged_max_cost(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu, double p) {
  double c = 0;
  for (Eigen::Index i = 0; i < mu.size(); ++i)
    for (Eigen::Index j = 0; j < nu.size(); ++j)
      if (mu.weights()(i) > 0 && nu.weights()(j) > 0)
        c = std::max(c, std::pow((mu.atoms().row(i) - nu.atoms().row(j)).norm(), p));
  return c;
}

/// How wide the certified bracket of W_p^p may be: the rounded plan's masses are off by ~(n + m) eps, and
/// the completion charges that deficit, as the rounded-down c-transform loses, at most ~(n + m) eps max C
/// (max C over the charged atoms). c = 4 over the worst measured 0.42 (n + m) eps max C in these tests.
double bracket_cost_width(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu, double p) {
  return testing::rounding_bound<double>(4, double(mu.size() + nu.size())) * charged_max_cost(mu, nu, p);
}

/// The same bound relative to W_p (or W_p^p, whose relative width is at least as large; W_p = (W_p^p)^(1/p)
/// divides it by p): bracket_cost_width / W_p^p. Scale invariant, so it may be evaluated on the unscaled
/// supports of a scaled pair.
double bracket_relative_width(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu, double p,
                              double cost) {
  return bracket_cost_width(mu, nu, p) / cost;
}

/// The same measure in mpfr at the working precision, with the weights divided by their exact sum: the
/// measure certify_wasserstein brackets (double weights sum to 1 only up to rounding, and a certified bound
/// that is tight to the last bit must be compared with the normalised measure).
DiscreteMeasure<mpfr> to_mpfr(const DiscreteMeasure<double>& m) {
  Vector<mpfr> w = matrix_cast<mpfr>(m.weights());
  const mpfr total = w.sum();
  for (Eigen::Index i = 0; i < w.size(); ++i) w(i) /= total;
  return DiscreteMeasure<mpfr>(matrix_cast<mpfr>(m.atoms()), std::move(w));
}

TEST(Wasserstein, ReferenceValuesOfTheMathReference) {
  // docs/math/transport.md#one-dimensional: mu = (d0 + d2)/2, nu = d1/4 + 3 d3/4: W1 = 1.5, W2^2 = 3.
  Matrix<double> x(2, 1), y(2, 1);
  x << 0, 2;
  y << 1, 3;
  Vector<double> a(2), b(2);
  a << 0.5, 0.5;
  b << 0.25, 0.75;
  const DiscreteMeasure<double> mu(x, a), nu(y, b);
  EXPECT_DOUBLE_EQ(wasserstein_1d(mu, nu, 1.0), 1.5);
  EXPECT_DOUBLE_EQ(wasserstein_1d_cost(mu, nu, 2.0), 3.0);
  EXPECT_DOUBLE_EQ(wasserstein_exact(mu, nu, 1.0).value, 1.5);
  EXPECT_NEAR(wasserstein_exact(mu, nu, 2.0).value, std::sqrt(3.0), root_rounding * std::sqrt(3.0));
}

TEST(Wasserstein, NetworkSimplexAgreesWithQuantileFormulaInOneDimension) {
  for (std::uint64_t seed = 0; seed < 6; ++seed)
    for (double p : {1.0, 2.0, 2.5}) {
      const auto mu = random_measure(30 + Eigen::Index(seed), 1, seed);
      const auto nu = random_measure(23, 1, seed + 77);
      const WassersteinResult w = wasserstein_exact(mu, nu, p);
      ASSERT_EQ(w.status, TransportStatus::optimal);
      // The absolute 1: mass roundings of ~(n + m) eps weighted by costs of order one (Gaussian atoms).
      const double tol = cost_rounding(mu.size(), nu.size()) * (1 + w.cost);
      EXPECT_NEAR(w.cost, wasserstein_1d_cost(mu, nu, p), tol) << "seed " << seed << " p " << p;
      PrecisionGuard guard(256);
      const double reference = static_cast<double>(wasserstein_1d_cost(to_mpfr(mu), to_mpfr(nu), p));
      EXPECT_NEAR(w.cost, reference, tol);
    }
}

TEST(Wasserstein, DegenerateOneDimensionalStress) {
  // Integer atoms (many tied costs), weights with zeros and dyadic values (exact sums), sizes 1..15.
  std::mt19937_64 gen(42);
  for (int trial = 0; trial < 300; ++trial) {
    const Eigen::Index n = 1 + Eigen::Index(gen() % 15), m = 1 + Eigen::Index(gen() % 15);
    auto make = [&](Eigen::Index k) {
      Matrix<double> x(k, 1);
      Vector<double> w(k);
      for (Eigen::Index i = 0; i < k; ++i) {
        x(i, 0) = double(gen() % 5);
        w(i) = double(gen() % 4);
      }
      if (w.sum() == 0) w(0) = 1;
      return DiscreteMeasure<double>::from_weights(std::move(x), std::move(w), true);
    };
    const auto mu = make(n), nu = make(m);
    for (double p : {1.0, 2.0}) {
      const WassersteinResult w = wasserstein_exact(mu, nu, p);
      ASSERT_EQ(w.status, TransportStatus::optimal);
      const double rounding = cost_rounding(n, m);
      EXPECT_NEAR(w.cost, wasserstein_1d_cost(mu, nu, p), rounding * (1 + w.cost))
          << "trial " << trial << " p " << p;
      const double dual = mu.weights().dot(w.plan.u) + nu.weights().dot(w.plan.v);
      // The dual sum cancels (potentials of either sign): its rounding is relative to the sum of |terms|.
      const double dual_scale = mu.weights().dot(w.plan.u.cwiseAbs()) + nu.weights().dot(w.plan.v.cwiseAbs());
      EXPECT_NEAR(dual, w.cost, rounding * dual_scale) << "trial " << trial;
    }
  }
}

TEST(Wasserstein, MetricProperties) {
  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    const auto a = random_measure(17, 3, seed), b = random_measure(21, 3, seed + 10),
               c = random_measure(12, 3, seed + 20, true);
    // Every distance below has at most 21 + 21 atoms on either side.
    const double rounding = cost_rounding(21, 21);
    for (double p : {1.0, 2.0}) {
      const double ab = wasserstein_exact(a, b, p).value, ba = wasserstein_exact(b, a, p).value;
      const double bc = wasserstein_exact(b, c, p).value, ac = wasserstein_exact(a, c, p).value;
      EXPECT_NEAR(ab, ba, rounding * ab);
      EXPECT_LE(ac, ab + bc + rounding * (ab + bc));
      // W_p(a, a): the cost is 0 up to rounding on the scale of the largest cost, and value = cost^(1/p).
      EXPECT_NEAR(wasserstein_exact(a, a, p).value, 0.0,
                  std::pow(cost_rounding(a.size(), a.size()) * charged_max_cost(a, a, p), 1 / p));
      EXPECT_LE(wasserstein_exact(a, b, 1.0).value,
                wasserstein_exact(a, b, 2.0).value * (1 + rounding));  // W1 <= W2
    }
    // Translation: W2(a + t, b + t) = W2(a, b).
    Vector<double> t(3);
    t << 3.0, -1.25, 0.5;
    auto shift = [&](const Vector<double>& x) -> Vector<double> { return x + t; };
    const double w = wasserstein_exact(a, b, 2.0).value;
    EXPECT_NEAR(wasserstein_exact(a.push_forward(shift), b.push_forward(shift), 2.0).value, w, rounding * w);
    // Mean bound: ||m_a - m_b|| <= W1.
    EXPECT_LE((a.mean() - b.mean()).norm(), wasserstein_exact(a, b, 1.0).value * (1 + rounding));
  }
  // Two Diracs: W_p = distance.
  Matrix<double> x(1, 3), y(1, 3);
  x << 1, 2, 3;
  y << -1, 0, 4;
  const auto dx = DiscreteMeasure<double>::empirical(x), dy = DiscreteMeasure<double>::empirical(y);
  EXPECT_NEAR(wasserstein_exact(dx, dy, 2.0).value, 3.0, 3.0 * root_rounding);
  EXPECT_NEAR(wasserstein_exact(dx, dy, 1.0).value, 3.0, 3.0 * root_rounding);
}

// The identity coupling x_i -> y_i is feasible between equal-size uniform measures, so
// W_2(mu_X, mu_Y)^2 <= (1/n) sum_i ||x_i - y_i||^2 = ||X - Y||_F^2 / n.
TEST(Wasserstein, IdentityCouplingBoundsW2OfEmpiricalMeasures) {
  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    RandomMatrixSpec spec;
    spec.rows = 40;
    spec.cols = 3;
    spec.seed = seed;
    const Matrix<double> x = random_matrix(spec);
    spec.seed = seed + 100;
    const Matrix<double> y = x + 0.3 * random_matrix(spec);
    const auto mx = DiscreteMeasure<double>::empirical(x), my = DiscreteMeasure<double>::empirical(y);
    const double bound = (x - y).norm() / std::sqrt(40.0);
    const double w2 = wasserstein_exact(mx, my, 2.0).value;
    // Both sides sum 40 · 3 squared differences (the bound's Frobenius norm is the longer chain).
    EXPECT_LE(w2, bound * (1 + cost_rounding(40 * 3, 40 * 3))) << seed;
    EXPECT_GT(w2, 0.0);
  }
}

TEST(Wasserstein, OnTheFlyCostsMatchTheDenseSolver) {
  const auto mu = random_measure(40, 2, 3), nu = random_measure(35, 2, 4);
  const WassersteinResult dense = wasserstein_exact(mu, nu, 2.0);
  const TransportPlan cloud = network_simplex(mu.weights(), nu.weights(), mu.atoms(), nu.atoms(), 2.0);
  EXPECT_NEAR(cloud.cost, dense.cost, cost_rounding(mu.size(), nu.size()) * dense.cost);
}

TEST(Wasserstein, SlicedIsAnEstimateBelowTheDistance) {
  const auto mu = random_measure(25, 3, 1), nu = random_measure(30, 3, 2);
  for (double p : {1.0, 2.0}) {
    const SlicedResult s = sliced_wasserstein(mu, nu, p, 64, 7);
    EXPECT_TRUE(s.is_estimate);
    EXPECT_EQ(s.n_directions, 64);
    EXPECT_GT(s.value, 0);
    EXPECT_GT(s.standard_error, 0);
    // Every slice is <= W_p^p, hence so is their mean.
    EXPECT_LE(s.cost, wasserstein_exact(mu, nu, p).cost * (1 + cost_rounding(mu.size(), nu.size())));
    EXPECT_EQ(sliced_wasserstein(mu, nu, p, 64, 7).value, s.value);  // seeded: reproducible
  }
  // In d = 1 every direction is +-1: the slice is the distance itself.
  const auto a = random_measure(10, 1, 5), b = random_measure(9, 1, 6);
  const double w1d = wasserstein_1d(a, b, 2.0);
  EXPECT_NEAR(sliced_wasserstein(a, b, 2.0, 3, 1).value, w1d, cost_rounding(a.size(), b.size()) * w1d);
}

TEST(Wasserstein, CertifiedBracketContainsHighPrecisionValueAndIsNarrow) {
  for (std::uint64_t seed = 0; seed < 4; ++seed)
    for (double p : {1.0, 2.0, 3.0}) {
      const auto mu = random_measure(50, 1, seed), nu = random_measure(41, 1, seed + 30);
      const WassersteinResult w = wasserstein_exact(mu, nu, p);
      const CertifiedBracket br = certify_wasserstein(mu, nu, p, w.plan);
      ASSERT_TRUE(br.certified);
      PrecisionGuard guard(256);
      const mpfr reference = wasserstein_1d(to_mpfr(mu), to_mpfr(nu), p);
      EXPECT_LE(mpfr(br.lower), reference) << "seed " << seed << " p " << p;
      EXPECT_GE(mpfr(br.upper), reference) << "seed " << seed << " p " << p;
      EXPECT_LE(br.relative_width, bracket_relative_width(mu, nu, p, w.cost))
          << "seed " << seed << " p " << p;
      EXPECT_LE(br.cost_lower, br.cost_upper);
    }
}

// Nearby measures with far zero-weight atoms (found by proofs-check, claim ot.certified_bracket): W_p^p is
// far below the cost scale of the zero-weight atoms, and the bracket must stay relatively tight. Reference:
// the 1-D quantile formula in mpfr at 256 bits on the same measures.
TEST(Wasserstein, CertifiedBracketStaysTightForNearbyMeasuresWithFarZeroWeightAtoms) {
  Matrix<double> x(2, 1), y(3, 1);
  x << -2.1769090795789844e-07, 0.0;
  y << 0.0, 1.0, -3.680683245682436e-07;
  Vector<double> a(2), b(3);
  a << 0.057032046084834254, 0.30924783215937623;
  b << 0.5579324813267538, 0.0, 0.8955789156471192;
  Matrix<double> x2(2, 1), y2(1, 1);
  x2 << -7.560073030048937e-07, -0.5359014529396385;
  y2 << 0.0;
  Vector<double> a2(2), b2(1);
  a2 << 0.07974145827983536, 0.0;
  b2 << 0.6194581778330267;
  const std::pair<DiscreteMeasure<double>, DiscreteMeasure<double>> cases[] = {
      {DiscreteMeasure<double>(x, a / a.sum()), DiscreteMeasure<double>(y, b / b.sum())},
      {DiscreteMeasure<double>(x2, a2 / a2.sum()), DiscreteMeasure<double>(y2, b2 / b2.sum())}};
  for (const auto& [mu, nu] : cases)
    for (double p : {1.0, 2.0}) {
      const WassersteinResult w = wasserstein_exact(mu, nu, p);
      const CertifiedBracket br = certify_wasserstein(mu, nu, p, w.plan, true);
      ASSERT_TRUE(br.certified);
      PrecisionGuard guard(256);
      const mpfr reference = wasserstein_1d_cost(to_mpfr(mu), to_mpfr(nu), p);
      EXPECT_LE(mpfr(br.cost_lower), reference) << "p " << p;
      EXPECT_GE(mpfr(br.cost_upper), reference) << "p " << p;
      // Relative to the charged atoms' costs (1e-7 to 1e-13 here), not to the far zero-weight atom's (~1).
      EXPECT_LE(br.cost_upper - br.cost_lower, bracket_cost_width(mu, nu, p)) << "p " << p;
    }
}

// W_p is homogeneous: supports scaled by an exact power of two 2^k have W_p scaled by 2^k. Where the costs
// of the scaled supports leave the double range (W_p^p of 1e-330 at coordinates of 1e-110 and p = 3, or
// coordinates of 1e-160), the bracket must still be as tight as on the unscaled supports: the two
// computations (tiny supports, and O(1) supports divided by 2^k afterwards) must overlap and both be narrow.
TEST(Wasserstein, CertifiedBracketIsScaleInvariantForTinySupports) {
  for (int k : {-365, -531, 400}) {
    for (double p : {1.0, 2.0, 3.0}) {
      const auto mu = random_measure(12, 2, 40), nu = random_measure(9, 2, 41);
      const DiscreteMeasure<double> mu_k(Matrix<double>(mu.atoms() * std::ldexp(1.0, k)), mu.weights());
      const DiscreteMeasure<double> nu_k(Matrix<double>(nu.atoms() * std::ldexp(1.0, k)), nu.weights());
      const WassersteinResult w = wasserstein_exact(mu, nu, p), w_k = wasserstein_exact(mu_k, nu_k, p);
      EXPECT_NEAR(w_k.value, std::ldexp(w.value, k), cost_rounding(12, 9) * std::ldexp(w.value, k))
          << "k " << k << " p " << p;
      const CertifiedBracket br = certify_wasserstein(mu, nu, p, w.plan, true);
      const CertifiedBracket br_k = certify_wasserstein(mu_k, nu_k, p, w_k.plan, true);
      ASSERT_TRUE(br.certified && br_k.certified) << "k " << k << " p " << p;
      EXPECT_GT(br_k.lower, 0) << "k " << k << " p " << p;
      EXPECT_LE(br_k.lower, std::ldexp(br.upper, k)) << "k " << k << " p " << p;
      EXPECT_GE(br_k.upper, std::ldexp(br.lower, k)) << "k " << k << " p " << p;
      // The costs of the scaled supports may underflow in double: the bound is taken on the unscaled ones.
      EXPECT_LE(br_k.relative_width, bracket_relative_width(mu, nu, p, w.cost)) << "k " << k << " p " << p;
    }
  }
  // Two atoms 3e-110 apart (the distance itself is W_p for every p): exact reference.
  Matrix<double> x(1, 1), y(1, 1);
  x << 0.0;
  y << 3e-110;
  const DiscreteMeasure<double> a = DiscreteMeasure<double>::empirical(x),
                                b = DiscreteMeasure<double>::empirical(y);
  const WassersteinResult w = wasserstein_exact(a, b, 3.0);
  EXPECT_EQ(w.value, 3e-110);
  const CertifiedBracket br = certify_wasserstein(a, b, 3.0, w.plan, true);
  ASSERT_TRUE(br.certified);
  EXPECT_LE(br.lower, 3e-110);
  EXPECT_GE(br.upper, 3e-110);
  // One atom each (max C = W_p^p, which is subnormal in double here): the width is that of a handful of
  // directed roundings.
  EXPECT_LE(br.relative_width, cost_rounding(a.size(), b.size()));
  // Subnormal supports: 2^shift itself overflows there (shift > 1023), and multiplying by it made the costs
  // 0 · inf = NaN; the exact solver refused valid input. The distance is again W_p for every p.
  for (double p : {1.0, 2.0, 3.0}) {
    y << 1e-320;
    const DiscreteMeasure<double> tiny = DiscreteMeasure<double>::empirical(y);
    const WassersteinResult wt = wasserstein_exact(a, tiny, p);
    EXPECT_EQ(wt.value, 1e-320) << "p " << p;
    const CertifiedBracket bt = certify_wasserstein(a, tiny, p, wt.plan, true);
    ASSERT_TRUE(bt.certified) << "p " << p;
    EXPECT_LE(bt.lower, 1e-320) << "p " << p;
    EXPECT_GE(bt.upper, 1e-320) << "p " << p;
  }
}

// A far atom of subnormal weight: the completion of the rounded plan must charge that atom its own (tiny)
// deficit, not the whole missing mass times the diameter. mu = (1 - w) d_0 + w d_{1e100}, nu = d_{1/2}, p =
// 2: W_2^2 = (1 - w)/4 + w (1e100 - 1/2)^2, with w = 2^-1074 a positive subnormal: 1/4 + 4.9e-124, i.e. W_2 =
// 1/2 to double precision.
TEST(Wasserstein, CertifiedBracketWithAFarAtomOfSubnormalWeight) {
  Matrix<double> x(2, 1), y(1, 1);
  x << 0.0, 1e100;
  y << 0.5;
  Vector<double> a(2), b(1);
  a << 1.0, std::numeric_limits<double>::denorm_min();
  b << 1.0;
  const DiscreteMeasure<double> mu(x, a), nu(y, b);
  const WassersteinResult w = wasserstein_exact(mu, nu, 2.0);
  const CertifiedBracket br = certify_wasserstein(mu, nu, 2.0, w.plan, true);
  ASSERT_TRUE(br.certified);
  EXPECT_LE(br.lower, 0.5);
  EXPECT_GE(br.upper, 0.5);
  // The far atom enters with its subnormal deficit only, so the bracket is as narrow as for the pair
  // (0, 1/2) alone: ~(n + m) eps relative, not (n + m) eps times the far cost 1e200.
  const double width = cost_rounding(mu.size(), nu.size());
  EXPECT_LE(br.upper, 0.5 * (1 + width));
  EXPECT_GE(br.lower, 0.5 * (1 - width));
}

TEST(Wasserstein, CertifiedBracketInHigherDimensionAndForAPoorPlan) {
  const auto mu = random_measure(60, 3, 11), nu = random_measure(70, 3, 12, true);
  for (double p : {1.0, 2.0, 1.5}) {
    const WassersteinResult w = wasserstein_exact(mu, nu, p);
    const CertifiedBracket br = certify_wasserstein(mu, nu, p, w.plan, true);
    ASSERT_TRUE(br.certified);
    // w.value is a double computation (rounding errors of ~(n + m) eps relative either way), so the bracket
    // must contain it up to that rounding only.
    const double rounding = cost_rounding(mu.size(), nu.size());
    EXPECT_LE(br.lower, w.value * (1 + rounding));
    EXPECT_GE(br.upper, w.value * (1 - rounding));
    EXPECT_LE(br.relative_width, bracket_relative_width(mu, nu, p, w.cost)) << "p " << p;
    // Independent coupling a (x) b and zero potentials: still a valid (wide) bracket.
    TransportPlan poor;
    poor.u = Eigen::VectorXd::Zero(mu.size());
    poor.v = Eigen::VectorXd::Zero(nu.size());
    for (Eigen::Index i = 0; i < mu.size(); ++i)
      for (Eigen::Index j = 0; j < nu.size(); ++j)
        poor.entries.push_back({i, j, mu.weights()(i) * nu.weights()(j)});
    const CertifiedBracket wide = certify_wasserstein(mu, nu, p, poor);
    EXPECT_TRUE(wide.certified);
    EXPECT_LE(wide.lower, br.lower);
    EXPECT_GE(wide.upper, br.upper);
  }
}

TEST(Wasserstein, RejectsMalformedInput) {
  const auto a = random_measure(5, 2, 1), b = random_measure(4, 3, 2), c = random_measure(4, 2, 3);
  EXPECT_THROW(wasserstein_exact(a, b, 2.0), InputError);  // dimension mismatch
  EXPECT_THROW(wasserstein_exact(a, c, 0.5), InputError);  // p < 1
  EXPECT_THROW(wasserstein_exact(a, c, std::numeric_limits<double>::quiet_NaN()), InputError);
  EXPECT_THROW(wasserstein_1d(a, c, 2.0), InputError);  // not one-dimensional
  EXPECT_THROW(sliced_wasserstein(a, c, 2.0, 0, 1), InputError);
  TransportPlan wrong;
  wrong.u = Eigen::VectorXd::Zero(3);
  EXPECT_THROW(certify_wasserstein(a, c, 2.0, wrong), InputError);
  wrong.u = Eigen::VectorXd::Zero(5);
  wrong.entries.push_back({0, 9, 0.1});
  EXPECT_THROW(certify_wasserstein(a, c, 2.0, wrong), InputError);
}

}  // namespace
}  // namespace regatta::measures
