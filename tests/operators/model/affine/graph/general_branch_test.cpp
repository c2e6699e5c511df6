// Branch and bound on the input ranges of general nonlinearities (graph_affine_branch.hpp,
// docs/verify.md#general-splits): (a) on random MLPs with GELU, tanh or sigmoid, and on a net with √ and 1/x
// of computed values, every branch's certified bound lies below the objective at every sampled point of the
// box whose split inputs (computed here by a second, plain Eigen forward) meet the branch's constraints —
// and the same check catches a bounder whose half-lines are swapped; (b) on a 2-input GELU net the bound,
// split deeper and deeper, closes most of its gap to the minimum found by a dense grid; (c) regatta's verify
// with GELU splitting proves a property that the root's affine bound does not, and never proves one with a
// known counterexample.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <string>

#include <regatta/graph/verify.hpp>
#include <regatta/graph/vnnlib.hpp>
#include <regatta/operators/graph_affine_branch.hpp>
#include <regatta/operators/graph_verify_bounds.hpp>

#include "branch_nets.hpp"

namespace {

using namespace regatta;
using graph::Op;
using graph::Phase;
constexpr double inf = std::numeric_limits<double>::infinity();
constexpr std::size_t none = test::no_split;
using test::box;
using test::grow;
using test::meets;
using test::Net;
using test::property;

/// The bound of every branch down to depth 6 against the sampled points of the box [−r, r]^n that meet its
/// constraints, and the same branches with the half-lines swapped, all of them or the last one (which must
/// violate the check somewhere).
void check_branches(const Net& m, int n, double r, const char* what, std::vector<Op> kinds = {},
                    bool must_catch_swaps = true) {
  const Vector<double> lo = Vector<double>::Constant(n, -r), hi = Vector<double>::Constant(n, r);
  Matrix<double> C(1, 2);
  C << 1, -1;  // y0 − y1
  operators::GraphAffineBranching bounder(m.g, box(lo, hi), C, Vector<double>(), {}, 20, kinds);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(-r, r);
  std::vector<std::vector<Vector<double>>> inputs;
  std::vector<double> objective;
  for (int s = 0; s < 8000; ++s) {
    Vector<double> x(n);
    for (int j = 0; j < n; ++j) x(j) = s % 4 == 0 ? (u(rng) < 0 ? -r : r) : u(rng);
    std::vector<Vector<double>> in;
    const Vector<double> y = m.forward(x, in);
    inputs.push_back(in);
    objective.push_back(y(0) - y(1));
  }
  EXPECT_LE(bounder.root().lower[0], *std::min_element(objective.begin(), objective.end())) << what;
  std::cout << what << ": root " << bounder.root().lower[0] << " (sampled min "
            << *std::min_element(objective.begin(), objective.end()) << ")\n";
  int branches = 0, checked = 0, swapped_violations = 0;
  std::map<Op, int> split;
  grow(bounder, {}, bounder.root(), 6,
       [&](const std::vector<Phase>& phases, const graph::PhaseBranchBounds& at) {
         ++branches;
         if (!phases.empty()) ++split[m.g.nodes[phases.back().node].op];
         double least = inf;
         for (std::size_t s = 0; s < inputs.size(); ++s)
           if (meets(m, inputs[s], phases)) least = std::min(least, objective[s]);
         if (at.empty) {
           EXPECT_EQ(least, inf) << what << ": a branch called empty has sampled points";
           return;
         }
         EXPECT_LE(at.lower[0], least) << what << ", depth " << phases.size();
         if (phases.empty() || least == inf) return;
         ++checked;
         std::vector<Phase> swapped = phases;
         for (Phase& ph : swapped) ph.active = !ph.active;
         const graph::PhaseBranchBounds wrong = bounder.bound(swapped, {});
         std::vector<Phase> sibling = phases;
         sibling.back().active = !sibling.back().active;
         const graph::PhaseBranchBounds other = bounder.bound(sibling, {});
         if ((!wrong.empty && wrong.lower[0] > least) || (!other.empty && other.lower[0] > least))
           ++swapped_violations;
       });
  EXPECT_GT(checked, 20) << what;
  if (must_catch_swaps) {
    EXPECT_GT(swapped_violations, 0) << what << ": the sampling check cannot tell the half-lines apart";
  }
  std::cout << what << ": " << branches << " branches, " << checked << " checked on samples, "
            << swapped_violations << " caught with swapped half-lines; split kinds:";
  for (const auto& [op, count] : split) std::cout << " " << graph::op_name(op) << " " << count;
  std::cout << "\n";
}

TEST(GeneralBranching, EveryBranchBoundHoldsOnItsRegion) {
  for (Op act : {Op::gelu, Op::tanh, Op::sigmoid}) {
    const Net m({2, 4, 2}, act, 3);
    check_branches(m, 2, 1.0, graph::op_name(act).data());
  }
}

// The √ and 1/x splits alone barely move this net's bound (their remainders are small beside tanh's), so
// the swapped half-lines are not caught there; with every kind split they are.
TEST(GeneralBranching, SqrtAndReciprocalBranchesHoldOnTheirRegions) {
  const Net m({2, 4, 4, 2}, Op::tanh, 5, true);
  check_branches(m, 2, 0.4, "tanh with h/sqrt(h^2+4), sqrt and reciprocal split", {Op::sqrt, Op::reciprocal},
                 false);
  check_branches(m, 2, 0.4, "tanh with h/sqrt(h^2+4), every kind split");
}

TEST(GeneralBranching, RejectsAKindItDoesNotSplitAndAConstraintOutsideTheKinds) {
  const Net m({2, 3, 1}, Op::gelu, 1);
  const Vector<double> lo = Vector<double>::Constant(2, -1.0), hi = Vector<double>::Constant(2, 1.0);
  Matrix<double> C(1, 1);
  C << 1;
  EXPECT_THROW(operators::GraphAffineBranching(m.g, box(lo, hi), C, Vector<double>(), {}, 20, {Op::matmul}),
               std::invalid_argument);
  operators::GraphAffineBranching relu_only(m.g, box(lo, hi), C, Vector<double>(), {}, 20, {Op::relu});
  EXPECT_EQ(relu_only.root().branch_on[0].first, none) << "a GELU offered when only relu is split";
  EXPECT_THROW(relu_only.bound({{m.split_nodes[0], 0, true, 0.0}}, {}), std::invalid_argument);
  EXPECT_FALSE(operators::GraphAffineBranching::has_split_node(m.g, {Op::relu}));
  EXPECT_TRUE(operators::GraphAffineBranching::has_split_node(m.g, {}));
}

/// The least leaf bound after splitting every branch on branch_on until `depth`.
double tree_bound(operators::GraphAffineBranching& b, int depth) {
  double least = inf;
  grow(b, {}, b.root(), depth, [&](const std::vector<Phase>& phases, const graph::PhaseBranchBounds& at) {
    const bool leaf = int(phases.size()) == depth || at.empty || at.branch_on[0].first == none;
    if (leaf && !at.empty) least = std::min(least, at.lower[0]);
  });
  return least;
}

TEST(GeneralBranching, ConvergesTowardsTheGridMinimumOnATwoInputGeluNet) {
  for (std::uint64_t seed = 21; seed <= 23; ++seed) {
    const Net m({2, 5, 5, 1}, Op::gelu, seed);
    const Vector<double> lo = Vector<double>::Constant(2, -1.0), hi = Vector<double>::Constant(2, 1.0);
    Matrix<double> C(1, 1);
    C << 1;
    operators::GraphAffineBranching bounder(m.g, box(lo, hi), C, Vector<double>(), {}, 60);
    const double grid = test::grid_minimum(m);  // an upper bound of the true minimum
    const double root = bounder.root().lower[0];
    const double d6 = tree_bound(bounder, 6), d10 = tree_bound(bounder, 10);
    std::cout << "seed " << seed << ": root " << root << ", depth 6 " << d6 << ", depth 10 " << d10
              << ", grid " << grid << "\n";
    EXPECT_LE(root, grid);
    EXPECT_LE(d10, grid) << "seed " << seed;
    EXPECT_GE(d6, root) << "seed " << seed;
    EXPECT_GE(d10, d6 - 1e-9) << "seed " << seed;
    EXPECT_LT(grid - d10, 0.5 * (grid - root) + 1e-3)
        << "seed " << seed << ": root " << root << ", split " << d10 << ", grid " << grid;
  }
}

TEST(GeneralBranching, VerifyProvesAGeluPropertyTheRootDoesNot) {
  const int n = 12;
  const Net m({n, 12, 12, 1}, Op::gelu, 8);
  const double r = 0.3;
  const double sampled = test::sampled_minimum(m, n, r);
  Matrix<double> C(1, 1);
  C << 1;
  const Vector<double> lo = Vector<double>::Constant(n, -r), hi = Vector<double>::Constant(n, r);
  operators::GraphAffineBranching root(m.g, box(lo, hi), C, Vector<double>());
  const double affine = root.root().lower[0];
  ASSERT_LT(affine, sampled);
  const double t = affine + 0.5 * (sampled - affine);  // a threshold the root does not refute
  const graph::Property p = graph::parse_vnnlib(property(n, r, t), "p.vnnlib");
  graph::VerifyOptions options;
  options.timeout_seconds = 20;
  options.phase_bounds = operators::affine_phase_bounds(m.g, nullptr, std::nullopt, {Op::gelu});
  const graph::VerifyResult proved = graph::verify(m.g, p, options);
  std::cout << "affine root " << affine << ", threshold " << t << ", sampled min " << sampled << ": "
            << graph::verdict_name(proved.verdict) << " (" << proved.phase_branches << " branches, depth "
            << proved.phase_max_depth << ", " << proved.seconds << " s)\n";
  EXPECT_EQ(proved.verdict, graph::Verdict::unsat) << proved.reason;
  EXPECT_EQ(proved.splitting, "phase");
  EXPECT_EQ(proved.phase_branches_by_kind.count("gelu"), 1u);
  EXPECT_EQ(proved.phase_branches_by_kind.at("gelu"), proved.phase_branches);
  options.timeout_seconds = 5;
  for (double above : {sampled, sampled + 0.02}) {
    const graph::VerifyResult r2 =
        graph::verify(m.g, graph::parse_vnnlib(property(n, r, above), "q.vnnlib"), options);
    EXPECT_NE(r2.verdict, graph::Verdict::unsat) << above;
  }
}

}  // namespace
