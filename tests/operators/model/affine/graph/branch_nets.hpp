#pragma once
// Small dense nets built as graphs for the branch-and-bound tests (branch_test.cpp: ReLU phases;
// general_branch_test.cpp: input ranges of other nonlinearities), with a plain Eigen forward that reports the
// input of every split node, and the helpers both tests use to bound and sample branches.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <regatta/graph/verify.hpp>
#include <regatta/operators/graph_affine_branch.hpp>

#include "graph_builder.hpp"

namespace regatta::test {

using graph::Op;
using graph::Phase;

constexpr std::size_t no_split = std::numeric_limits<std::size_t>::max();

inline double activation(Op op, double x) {
  switch (op) {
    case Op::gelu:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Op::tanh:
      return std::tanh(x);
    case Op::sigmoid:
      return 1 / (1 + std::exp(-x));
    default:
      return std::max(x, 0.0);
  }
}

/// A net of dense layers (W_l·h + b_l) with the activation `act` between them (not after the last); with
/// `norm`, each hidden layer's h is followed by h / √(h² + 4) (mul, add, sqrt, reciprocal, mul nodes), so
/// that √ and 1/x of computed values are split too. Weights: weight_scale·N(0, 1)/√in, biases 0.3·N(0, 1).
struct Net {
  std::vector<Matrix<double>> W;  // out × in
  std::vector<Vector<double>> b;
  Op act;
  bool norm;
  graph::Graph g;
  std::vector<std::size_t> split_nodes;  // graph.nodes index of each split node, in order

  Net(const std::vector<int>& widths, Op a, std::uint64_t seed, bool with_norm = false,
      double weight_scale = 1.5)
      : act(a), norm(with_norm) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal;
    GraphBuilder gb;
    int h = gb.input({1, widths[0]});
    const auto mark = [&] { split_nodes.push_back(gb.g.nodes.size() - 1); };
    for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
      const int in = widths[l], out = widths[l + 1];
      Matrix<double> w(out, in);
      Vector<double> bias(out);
      for (int i = 0; i < out; ++i) {
        for (int j = 0; j < in; ++j) w(i, j) = weight_scale * normal(rng) / std::sqrt(double(in));
        bias(i) = 0.3 * normal(rng);
      }
      std::vector<double> wt(std::size_t(in * out)), bt(bias.data(), bias.data() + out);
      for (int j = 0; j < in; ++j)
        for (int i = 0; i < out; ++i) wt[std::size_t(j * out + i)] = w(i, j);  // [in, out] row-major
      h = gb.node(Op::matmul, {h, gb.constant({in, out}, wt)}, {1, out});
      h = gb.node(Op::add, {h, gb.constant({out}, bt)}, {1, out});
      if (l + 2 < widths.size()) {
        h = act == Op::gelu ? gb.node(Op::gelu, {h}, {1, out}, graph::GeluAttrs{false})
                            : gb.node(act, {h}, {1, out});
        mark();
        if (norm) {
          const int sq = gb.node(Op::mul, {h, h}, {1, out});
          const int shifted = gb.node(Op::add, {sq, gb.constant({1}, {4.0})}, {1, out});
          const int root = gb.node(Op::sqrt, {shifted}, {1, out});
          mark();
          const int inv = gb.node(Op::reciprocal, {root}, {1, out});
          mark();
          h = gb.node(Op::mul, {h, inv}, {1, out});
        }
      }
      W.push_back(w);
      b.push_back(bias);
    }
    g = gb.done(h);
  }
  /// The output, and the input of every split node (in split_nodes' order).
  Vector<double> forward(const Vector<double>& x, std::vector<Vector<double>>& inputs) const {
    Vector<double> h = x;
    inputs.clear();
    for (std::size_t l = 0; l < W.size(); ++l) {
      h = W[l] * h + b[l];
      if (l + 1 == W.size()) break;
      inputs.push_back(h);
      h = h.unaryExpr([this](double v) { return activation(act, v); });
      if (norm) {
        const Vector<double> shifted = h.array().square() + 4.0;
        inputs.push_back(shifted);
        const Vector<double> root = shifted.array().sqrt();
        inputs.push_back(root);
        h = h.array() / root.array();
      }
    }
    return h;
  }
};

inline operators::InputSet box(const Vector<double>& lo, const Vector<double>& hi) {
  operators::InputSet set;
  set.norm = operators::InputNorm::linf;
  set.radius = 1;
  set.centre = (lo + hi) / 2;
  set.scale = (hi - lo) / 2 * (1 + 1e-12);
  set.lower = lo;
  set.upper = hi;
  return set;
}

/// Whether the sampled point's split-node inputs meet every constraint of the branch.
inline bool meets(const Net& m, const std::vector<Vector<double>>& inputs, const std::vector<Phase>& phases) {
  for (const Phase& ph : phases) {
    const std::size_t k =
        std::size_t(std::find(m.split_nodes.begin(), m.split_nodes.end(), ph.node) - m.split_nodes.begin());
    const double x = inputs.at(k)(Eigen::Index(ph.element));
    if (ph.active ? x < ph.threshold : x > ph.threshold) return false;
  }
  return true;
}

/// Every branch of the tree of depth `depth` grown by branch_on and branch_at (functional 0).
inline void grow(
    operators::GraphAffineBranching& b, const std::vector<Phase>& phases, const graph::PhaseBranchBounds& at,
    int depth, const std::function<void(const std::vector<Phase>&, const graph::PhaseBranchBounds&)>& visit) {
  visit(phases, at);
  if (depth == 0 || at.empty || at.branch_on[0].first == no_split) return;
  for (bool active : {true, false}) {
    std::vector<Phase> child = phases;
    child.push_back({at.branch_on[0].first, at.branch_on[0].second, active, at.branch_at[0]});
    grow(b, child, b.bound(child, at.multipliers), depth - 1, visit);
  }
}

/// The least output 0 of the net over `samples` points of the box [−r, r]^n (every other one a corner): a
/// value the function takes, so a threshold above it has a counterexample.
inline double sampled_minimum(const Net& m, int n, double r, int samples = 20000) {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(-r, r);
  double least = std::numeric_limits<double>::infinity();
  std::vector<Vector<double>> inputs;
  for (int s = 0; s < samples; ++s) {
    Vector<double> x(n);
    for (int j = 0; j < n; ++j) x(j) = s % 2 == 0 ? (u(rng) < 0 ? -r : r) : u(rng);
    least = std::min(least, m.forward(x, inputs)(0));
  }
  return least;
}

/// The least output 0 of a 2-input net over the 1001 × 1001 grid of [−1, 1]²: an upper bound of its true
/// minimum there.
inline double grid_minimum(const Net& m) {
  double least = std::numeric_limits<double>::infinity();
  std::vector<Vector<double>> inputs;
  for (int i = 0; i <= 1000; ++i)
    for (int j = 0; j <= 1000; ++j) {
      Vector<double> x(2);
      x << -1 + 2.0 * i / 1000, -1 + 2.0 * j / 1000;
      least = std::min(least, m.forward(x, inputs)(0));
    }
  return least;
}

/// "Y_0 ≤ t is impossible on the box [−r, r]^n" as VNNLIB text (unsat: min y > t).
inline std::string property(int n, double r, double t) {
  std::string s;
  for (int j = 0; j < n; ++j) s += "(declare-const X_" + std::to_string(j) + " Real)\n";
  s += "(declare-const Y_0 Real)\n";
  char buf[128];
  for (int j = 0; j < n; ++j) {
    std::snprintf(buf, sizeof buf, "(assert (>= X_%d %.17g))\n(assert (<= X_%d %.17g))\n", j, -r, j, r);
    s += buf;
  }
  std::snprintf(buf, sizeof buf, "(assert (<= Y_0 %.17g))\n", t);
  return s + buf;
}

}  // namespace regatta::test
