// pgd_attack (graph/src/attack.cpp) on linear classifiers, where the minimiser of the margin over the set is
// known in closed form or by a second algorithm (docs/graph.md, "Attack"); and its refusals of bad sets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include <regatta/core/error.hpp>
#include <regatta/graph/attack.hpp>
#include <regatta/graph/evaluate.hpp>

namespace {

using namespace regatta;
using namespace regatta::graph;

struct Linear {
  Graph graph;
  std::vector<double> W, b;  // y = W x + b, W row-major [classes, n]
  std::size_t n = 0, classes = 0;
  double output(std::size_t c, const std::vector<double>& x) const {
    double s = b[c];
    for (std::size_t k = 0; k < n; ++k) s += W[c * n + k] * x[k];
    return s;
  }
};

// x [1, n] → Gemm (transB) → y [1, classes].
Linear linear(std::size_t n, std::size_t classes, std::uint64_t seed) {
  Linear l;
  l.n = n;
  l.classes = classes;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  l.W.resize(n * classes);
  l.b.resize(classes);
  for (double& v : l.W) v = u(rng);
  for (double& v : l.b) v = u(rng);
  const auto N = static_cast<std::int64_t>(n), C = static_cast<std::int64_t>(classes);
  Graph& g = l.graph;
  g.source = "linear";
  g.values = {Value{"x", {1, N}, false, {}}, Value{"W", {C, N}, true, l.W}, Value{"b", {C}, true, l.b},
              Value{"y", {1, C}, false, {}}};
  g.nodes = {Node{Op::gemm, "fc", "Gemm", {0, 1, 2}, 3, GemmAttrs{1, 1, false, true}}};
  g.inputs = {0};
  g.outputs = {3};
  g.validate();
  return l;
}

std::vector<double> uniform(std::size_t n, double lo, double hi, std::mt19937_64& rng) {
  std::vector<double> v(n);
  for (double& x : v) x = std::uniform_real_distribution<double>(lo, hi)(rng);
  return v;
}

TEST(PgdAttack, LinfBoxFindsTheExactCornerOfATwoClassLinearModel) {
  const Linear l = linear(12, 2, 3);
  std::mt19937_64 rng(5);
  AttackSet s{Norm::linf,
              uniform(12, 0.2, 0.8, rng),
              0.3,
              uniform(12, 0.5, 1.5, rng),
              std::vector<double>(12, 0.0),
              std::vector<double>(12, 1.0)};
  // margin = (W0 − W1)·x + b0 − b1: each coordinate at the end of its interval that the sign of W0 − W1
  // picks.
  std::vector<double> best(12);
  for (std::size_t k = 0; k < 12; ++k) {
    const double lo = std::max(0.0, s.centre[k] - s.radius * s.scale[k]);
    const double hi = std::min(1.0, s.centre[k] + s.radius * s.scale[k]);
    best[k] = l.W[k] - l.W[12 + k] > 0 ? lo : hi;
  }
  const double exact = l.output(0, best) - l.output(1, best);
  AttackOptions o;
  o.steps = 20;
  o.stop_when_found = false;
  const AttackResult r = pgd_attack(l.graph, s, 0, o);
  // The corner's ends c ± r·s are one rounding each; a compiler may contract them into a fused multiply-add
  // in one place and not the other (clang's sanitizer build does), so equality is up to an ulp of [0, 1].
  ASSERT_EQ(r.point.size(), best.size());
  for (std::size_t k = 0; k < best.size(); ++k) EXPECT_NEAR(r.point[k], best[k], 4e-16) << k;
  EXPECT_NEAR(r.margin, exact, 1e-12);
  EXPECT_EQ(r.found, exact < 0);
}

TEST(PgdAttack, L2BallFindsTheClosedFormMinimiser) {
  const Linear l = linear(10, 2, 4);
  std::mt19937_64 rng(6);
  AttackSet s{Norm::l2, uniform(10, -1, 1, rng), 0.7, {}, {}, {}};
  std::vector<double> d(10);
  double dn = 0;
  for (std::size_t k = 0; k < 10; ++k) {
    d[k] = l.W[k] - l.W[10 + k];
    dn += d[k] * d[k];
  }
  dn = std::sqrt(dn);
  std::vector<double> best(10);
  for (std::size_t k = 0; k < 10; ++k) best[k] = s.centre[k] - s.radius * d[k] / dn;
  const double exact = l.output(0, s.centre) - l.output(1, s.centre) - s.radius * dn;
  AttackOptions o;
  o.steps = 30;
  o.stop_when_found = false;
  const AttackResult r = pgd_attack(l.graph, s, 0, o);
  EXPECT_NEAR(r.margin, exact, 1e-12);
  for (std::size_t k = 0; k < 10; ++k) EXPECT_NEAR(r.point[k], best[k], 1e-9);
}

// Over ball ∩ box the minimiser of d·x is clamp(c − t·d) with t the root of ‖clamp(c − t·d) − c‖ = r (or the
// box corner when the ball holds it): a bisection in t, a second algorithm next to PGD's projected steps.
TEST(PgdAttack, L2BallIntersectedWithABoxMatchesTheKktSolution) {
  const Linear l = linear(8, 2, 8);
  std::mt19937_64 rng(9);
  AttackSet s{Norm::l2, uniform(8, 0.3, 0.7, rng),   0.6,
              {},       std::vector<double>(8, 0.1), std::vector<double>(8, 0.9)};
  std::vector<double> d(8);
  for (std::size_t k = 0; k < 8; ++k) d[k] = l.W[k] - l.W[8 + k];
  const auto at = [&](double t) {
    std::vector<double> x(8);
    for (std::size_t k = 0; k < 8; ++k) x[k] = std::clamp(s.centre[k] - t * d[k], 0.1, 0.9);
    return x;
  };
  const auto dist = [&](const std::vector<double>& x) {
    double q = 0;
    for (std::size_t k = 0; k < 8; ++k) q += (x[k] - s.centre[k]) * (x[k] - s.centre[k]);
    return std::sqrt(q);
  };
  double lo = 0, hi = 1e6;
  for (int i = 0; i < 200; ++i) (dist(at(0.5 * (lo + hi))) > s.radius ? hi : lo) = 0.5 * (lo + hi);
  const std::vector<double> best = at(lo);
  ASSERT_LT(dist(at(1e6)), 1e9);
  ASSERT_GT(dist(at(1e6)), s.radius);  // the box is not inside the ball: the constraint is active
  const double exact = l.output(0, best) - l.output(1, best);
  AttackOptions o;
  o.steps = 60;
  o.stop_when_found = false;
  const AttackResult r = pgd_attack(l.graph, s, 0, o);
  EXPECT_NEAR(r.margin, exact, 1e-9);
  EXPECT_LE(dist(r.point), s.radius * (1 + 1e-12));
  for (double v : r.point) {
    EXPECT_GE(v, 0.1);
    EXPECT_LE(v, 0.9);
  }
}

// With several classes the margin is a minimum of linear functions: its minimum over the box is the best,
// over the other classes c, of the corner for y_label − y_c. PGD follows the class that is largest where it
// is, so it needs the restarts; it can never beat the exact minimum.
TEST(PgdAttack, LinfSeveralClassesReachesTheBestCornerWithRestarts) {
  const Linear l = linear(6, 4, 11);
  const std::vector<double> centre(6, 0.0);
  AttackSet s{Norm::linf, centre, 0.5, {}, {}, {}};
  const int label = 2;
  double exact = std::numeric_limits<double>::infinity();
  for (std::size_t c = 0; c < 4; ++c) {
    if (c == label) continue;
    std::vector<double> x(6);
    for (std::size_t k = 0; k < 6; ++k) x[k] = l.W[label * 6 + k] - l.W[c * 6 + k] > 0 ? -0.5 : 0.5;
    exact = std::min(exact, l.output(label, x) - l.output(c, x));
  }
  AttackOptions o;
  o.steps = 20;
  o.restarts = 20;
  o.stop_when_found = false;
  const AttackResult r = pgd_attack(l.graph, s, label, o);
  EXPECT_GE(r.margin, exact - 1e-12);
  EXPECT_NEAR(r.margin, exact, 1e-12);
}

TEST(PgdAttack, StopsAtTheFirstMisclassificationAndIsDeterministic) {
  const Linear l = linear(6, 3, 12);
  AttackSet s{Norm::linf, std::vector<double>(6, 0.0), 3.0, {}, {}, {}};
  AttackOptions o;
  o.restarts = 3;
  o.seed = 42;
  const AttackResult a = pgd_attack(l.graph, s, 0, o), b = pgd_attack(l.graph, s, 0, o);
  ASSERT_TRUE(a.found);
  EXPECT_LT(a.margin, 0);
  EXPECT_EQ(a.point, b.point);
  EXPECT_EQ(a.margin, b.margin);
  EXPECT_LT(a.evaluations, static_cast<std::size_t>(o.steps + 1));  // it ended early, in the first start
  const auto y = evaluate<double>(l.graph, {Tensor<double>{{1, 6}, a.point}})[0].data;
  EXPECT_EQ(a.margin, y[0] - std::max(y[1], y[2]));
}

TEST(PgdAttack, RefusesBadSetsAndLabelsNamingTheGraph) {
  const Linear l = linear(4, 3, 1);
  const auto refused = [&](const AttackSet& s, int label) {
    try {
      pgd_attack(l.graph, s, label);
    } catch (const InputError& e) {
      return std::string(e.what()).find("linear") != std::string::npos;
    }
    return false;
  };
  const std::vector<double> c(4, 0.5);
  EXPECT_TRUE(refused(AttackSet{Norm::l2, c, 0.1, {}, {}, {}}, 3));
  EXPECT_TRUE(refused(AttackSet{Norm::l2, c, 0.1, {}, {}, {}}, -1));
  EXPECT_TRUE(refused(AttackSet{Norm::l2, {0.5, 0.5}, 0.1, {}, {}, {}}, 0));
  EXPECT_TRUE(refused(AttackSet{Norm::l2, c, -1, {}, {}, {}}, 0));
  EXPECT_TRUE(refused(AttackSet{Norm::l2, c, std::nan(""), {}, {}, {}}, 0));
  EXPECT_TRUE(refused(AttackSet{Norm::linf, c, 0.1, {1, 1}, {}, {}}, 0));
  EXPECT_TRUE(refused(AttackSet{Norm::linf, c, 0.1, {}, std::vector<double>(4, 0.7), {}}, 0));  // empty
  EXPECT_TRUE(refused(AttackSet{Norm::l2, c, 0.1, {}, std::vector<double>(4, 0.7), {}}, 0));    // empty
  EXPECT_FALSE(refused(AttackSet{Norm::l2, c, 0.1, {}, {}, {}}, 0));
}

}  // namespace
