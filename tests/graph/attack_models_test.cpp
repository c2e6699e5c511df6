// pgd_attack on a committed ONNX model (tests/data/onnx/vit_vnncomp_like.onnx, a VNN-COMP-shaped ViT with
// inputs in [0, 1]) against random search over the same ℓ∞ set (docs/graph.md, "Attack").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>
#include <string>

#include <regatta/core/io/npy.hpp>
#include <regatta/graph/attack.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/onnx_import.hpp>

namespace {

using namespace regatta;
using namespace regatta::graph;

const std::string dir = std::string(REGATTA_TEST_DATA_DIR) + "/onnx/";

struct Model {
  Graph graph = import_onnx(dir + "vit_vnncomp_like.onnx");
  io::Array x = io::read_npy(dir + "vit_vnncomp_like.input.npy");
  io::Array logits = io::read_npy(dir + "vit_vnncomp_like.logits.npy");
  int label() const {
    return static_cast<int>(std::max_element(logits.data.begin(), logits.data.end()) - logits.data.begin());
  }
  AttackSet set(double radius) const {
    const std::size_t n = x.data.size();
    return AttackSet{
        Norm::linf, x.data, radius, {}, std::vector<double>(n, 0.0), std::vector<double>(n, 1.0)};
  }
  double margin(const std::vector<double>& p) const {
    const auto y =
        evaluate<double>(graph, {Tensor<double>{Shape(x.shape.begin(), x.shape.end()), p}})[0].data;
    double other = -std::numeric_limits<double>::infinity();
    for (std::size_t c = 0; c < y.size(); ++c)
      if (static_cast<int>(c) != label()) other = std::max(other, y[c]);
    return y[static_cast<std::size_t>(label())] - other;
  }
  // The lowest margin over `count` uniform random points and as many random corners of the set.
  double random_search(double radius, int count, std::uint64_t seed) const {
    std::mt19937_64 rng(seed);
    double best = std::numeric_limits<double>::infinity();
    const AttackSet s = set(radius);
    for (int i = 0; i < count; ++i) {
      std::vector<double> p(x.data.size()), q(x.data.size());
      for (std::size_t k = 0; k < p.size(); ++k) {
        const double lo = std::max(0.0, s.centre[k] - radius), hi = std::min(1.0, s.centre[k] + radius);
        p[k] = std::uniform_real_distribution<double>(lo, hi)(rng);
        q[k] = (rng() & 1) ? hi : lo;
      }
      best = std::min({best, margin(p), margin(q)});
    }
    return best;
  }
};

// At every radius PGD's margin is at most that of the best of 1000 random points and 1000 random corners; at
// 0.03 it finds a misclassification (margin < 0, re-evaluated at its point, inside the set) that the random
// search misses. The label's margin at the input is 0.047.
TEST(PgdAttackModel, BeatsRandomSearchAndFindsAMisclassification) {
  const Model m;
  ASSERT_GT(m.margin(m.x.data), 0);
  for (double r : {0.005, 0.01, 0.02, 0.03}) {
    AttackOptions o;
    o.steps = 50;
    o.restarts = 2;
    o.stop_when_found = false;
    const AttackResult a = pgd_attack(m.graph, m.set(r), m.label(), o);
    const double random = m.random_search(r, 1000, 3);
    EXPECT_LE(a.margin, random) << "radius " << r;
    EXPECT_EQ(a.margin, m.margin(a.point));
    for (std::size_t k = 0; k < a.point.size(); ++k) {
      EXPECT_LE(std::fabs(a.point[k] - m.x.data[k]), r + 1e-15);  // centre ± radius, rounded to nearest
      EXPECT_GE(a.point[k], 0.0);
      EXPECT_LE(a.point[k], 1.0);
    }
    std::cout << "radius " << r << ": PGD margin " << a.margin << ", best random " << random << "\n";
    if (r == 0.03) {
      EXPECT_TRUE(a.found);
      EXPECT_LT(a.margin, 0);
      EXPECT_GT(random, 0);
    }
  }
}

TEST(PgdAttackModel, TheSameSeedGivesTheSamePoint) {
  const Model m;
  AttackOptions o;
  o.steps = 20;
  o.restarts = 2;
  o.seed = 9;
  o.stop_when_found = false;
  const AttackResult a = pgd_attack(m.graph, m.set(0.02), m.label(), o);
  const AttackResult b = pgd_attack(m.graph, m.set(0.02), m.label(), o);
  EXPECT_EQ(a.point, b.point);
  EXPECT_EQ(a.margin, b.margin);
  EXPECT_EQ(a.evaluations, b.evaluations);
  EXPECT_EQ(a.evaluations, 3u * 21u);
}

}  // namespace
