// Optimised ReLU slopes (operators/src/model/affine/graph/slopes.hpp, docs/verify.md#optimised-relu-slopes):
// (a) on random ReLU MLPs the bound with optimised slopes of the last ReLU node lies below the functional at
// every sampled point of the box (a plain Eigen forward computes it), is never below the fixed slopes' bound
// and is above it on most nets; (b) the same sampling catches a substitution with a wrong remainder (each
// range's upper end moved to 0, so that slope 0 claims relu(z) = 0); (c) the slopes chosen by the
// subgradient steps come within 3 % of the improvement of the best certified bound over a grid of slopes on
// nets with few unstable elements in the last ReLU node.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include <regatta/operators/graph_affine.hpp>

#include "../../../../../operators/src/model/affine/graph/slopes.hpp"
#include "../../../../../operators/src/model/affine/graph/walk.hpp"
#include "branch_nets.hpp"

namespace {

using namespace regatta;
using graph::Op;
using operators::affine::Index;
using operators::affine::Pass;
namespace gp = operators::affine::gp;
constexpr double inf = std::numeric_limits<double>::infinity();

/// The functional y_0 − y_1 (one row).
Matrix<double> difference(int outputs) {
  Matrix<double> C = Matrix<double>::Zero(1, outputs);
  C(0, 0) = 1;
  C(0, 1) = -1;
  return C;
}

/// The least y_0 − y_1 over `samples` points of [−r, r]^n, every other one a corner.
double sampled_minimum(const test::Net& m, int n, double r, std::uint64_t seed, int samples = 20000) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-r, r);
  double least = inf;
  std::vector<Vector<double>> inputs;
  for (int s = 0; s < samples; ++s) {
    Vector<double> x(n);
    for (int j = 0; j < n; ++j) x(j) = s % 2 == 0 ? (u(rng) < 0 ? -r : r) : u(rng);
    const Vector<double> y = m.forward(x, inputs);
    least = std::min(least, y(0) - y(1));
  }
  return least;
}

/// The pass over the box with the last relu node's relaxation recorded (as walk.cpp records it).
struct Walked {
  Pass p;
  gp::Objective objective;
  std::optional<gp::ReluRelaxation> relu;
};
Walked walk(const test::Net& m, const operators::InputSet& set, const Matrix<double>& C) {
  Walked out;
  std::size_t last = 0;
  for (std::size_t i = 0; i < m.g.nodes.size(); ++i)
    if (m.g.nodes[i].op == Op::relu) last = i;
  const gp::NodeOverride record = [&](std::size_t index, const graph::Node& node,
                                      const std::vector<gp::Operand>& in, Pass& pass,
                                      operators::affine::Form& result) {
    if (index != last) return false;
    std::vector<Index> fresh;
    result = gp::split_transfer(node, *in[0].form, pass, nullptr, &fresh);
    out.relu = gp::relu_relaxation(index, *in[0].form, fresh, pass, nullptr);
    return true;
  };
  gp::WalkState w = gp::start_walk(m.g, set, out.p);
  advance(m.g, w, out.p, operators::GraphAffineOptions{}, m.g.nodes.size(), &record);
  const operators::affine::Form Y = gp::final_form(m.g, w);
  out.objective = gp::objectives(Y, C, Vector<double>::Zero(1), Y.A.cols(), out.p).front();
  return out;
}

TEST(OptimisedSlopes, BoundHoldsOnSamplesAndImproves) {
  const int n = 6;
  int improved = 0, nets = 0;
  double closed = 0;
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    const test::Net m({n, 24, 24, 3}, Op::relu, seed, false, 1.0);
    const double r = 0.4;
    const operators::InputSet set =
        test::box(Vector<double>::Constant(n, -r), Vector<double>::Constant(n, r));
    const Matrix<double> C = difference(3);
    operators::GraphAffineOptions fixed;
    fixed.slope_steps = 0;
    const double plain = operators::graph_affine_lower_bounds(m.g, set, C, Vector<double>(), fixed)[0];
    const double tuned = operators::graph_affine_lower_bounds(m.g, set, C, Vector<double>())[0];
    const double least = sampled_minimum(m, n, r, seed);
    ASSERT_TRUE(std::isfinite(plain));
    EXPECT_LE(tuned, least) << "seed " << seed;
    EXPECT_GE(tuned, plain) << "seed " << seed;
    ++nets;
    if (tuned > plain) {
      ++improved;
      closed += (tuned - plain) / (least - plain);
    }
  }
  std::cout << improved << " of " << nets << " nets improved, mean gap closed "
            << (improved ? closed / improved : 0) << "\n";
  EXPECT_GE(improved, nets / 2);
}

TEST(OptimisedSlopes, SamplingCatchesAWrongRemainder) {
  const int n = 6;
  int caught = 0;
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    const test::Net m({n, 24, 3}, Op::relu, seed, false, 1.0);
    const double r = 0.4;
    const operators::InputSet set =
        test::box(Vector<double>::Constant(n, -r), Vector<double>::Constant(n, r));
    Walked w = walk(m, set, difference(3));
    ASSERT_TRUE(w.relu.has_value());
    const double least = sampled_minimum(m, n, r, seed);
    const std::vector<double> slopes = gp::choose_slopes(w.objective, w.objective.a, *w.relu, w.p, 20);
    const double right = gp::certified_bound(gp::substitute(w.objective, *w.relu, slopes, w.p), {}, {}, w.p);
    EXPECT_LE(right, least) << "seed " << seed;
    // A wrong remainder: each range's upper end moved to 0, so that with slope 0 the relaxation claims
    // relu(z) = 0 (m′ = 0) where z > 0 is possible.
    gp::ReluRelaxation wrong = *w.relu;
    for (double& u : wrong.upper) u = 0;
    const std::vector<double> zeros(wrong.column.size(), 0.0);
    const double bad = gp::certified_bound(gp::substitute(w.objective, wrong, zeros, w.p), {}, {}, w.p);
    if (bad > least) ++caught;
  }
  std::cout << caught << " of 16 wrong remainders caught\n";
  EXPECT_GE(caught, 8) << "the sampling check cannot tell a wrong remainder from a right one";
}

TEST(OptimisedSlopes, ReachTheBestSlopesOfAGrid) {
  const int n = 4;
  int compared = 0;
  for (std::uint64_t seed = 1; seed <= 40 && compared < 6; ++seed) {
    const test::Net m({n, 8, 3, 2}, Op::relu, seed, false, 1.0);
    const double r = 0.5;
    const operators::InputSet set =
        test::box(Vector<double>::Constant(n, -r), Vector<double>::Constant(n, r));
    Walked w = walk(m, set, difference(2));
    if (!w.relu || w.relu->column.size() < 2) continue;
    const std::size_t u = w.relu->column.size();
    // The best certified bound over the grid {0, 0.05, ..., 1}^u of slopes.
    double grid = -inf;
    std::vector<int> at(u, 0);
    for (;;) {
      std::vector<double> slopes(u);
      for (std::size_t j = 0; j < u; ++j) slopes[j] = at[j] / 20.0;
      grid =
          std::max(grid, gp::certified_bound(gp::substitute(w.objective, *w.relu, slopes, w.p), {}, {}, w.p));
      std::size_t j = 0;
      while (j < u && ++at[j] > 20) at[j++] = 0;
      if (j == u) break;
    }
    const double plain = gp::certified_bound(w.objective, {}, {}, w.p);
    const std::vector<double> chosen = gp::choose_slopes(w.objective, w.objective.a, *w.relu, w.p, 20);
    const double tuned = gp::certified_bound(gp::substitute(w.objective, *w.relu, chosen, w.p), {}, {}, w.p);
    std::cout << "seed " << seed << ": " << u << " unstable, fixed " << plain << ", chosen " << tuned
              << ", grid best " << grid << "\n";
    EXPECT_GE(tuned, std::max(plain, grid - 0.03 * (grid - plain))) << "seed " << seed;
    ++compared;
  }
  EXPECT_GE(compared, 3);
}

}  // namespace
