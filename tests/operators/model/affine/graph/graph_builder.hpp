#pragma once
// Small hand-built graph::Graph values and samples of the input sets, for the tests of the affine-form pass
// over graphs (operators/src/model/affine/graph/, docs/models.md#the-graph-pass).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/graph.hpp>
#include <regatta/operators/graph_affine.hpp>

namespace regatta::test {

/// Builds a graph node by node; done() validates it (shapes, arities, attributes).
struct GraphBuilder {
  graph::Graph g;
  GraphBuilder() { g.source = "test graph"; }
  int input(const graph::Shape& shape) {
    g.values.push_back({"x", shape, false, {}});
    g.inputs.push_back(int(g.values.size()) - 1);
    return g.inputs.back();
  }
  int constant(const graph::Shape& shape, std::vector<double> data) {
    g.values.push_back({"c" + std::to_string(g.values.size()), shape, true, std::move(data)});
    return int(g.values.size()) - 1;
  }
  /// A constant of the given shape with entries drawn uniformly from [lo, hi].
  int random_constant(const graph::Shape& shape, std::mt19937_64& rng, double lo = -1, double hi = 1) {
    std::uniform_real_distribution<double> u(lo, hi);
    std::vector<double> data(std::size_t(graph::element_count(shape)));
    for (double& v : data) v = u(rng);
    return constant(shape, std::move(data));
  }
  int node(graph::Op op, std::vector<int> inputs, const graph::Shape& out, graph::Attributes a = {}) {
    g.values.push_back({"v" + std::to_string(g.values.size()), out, false, {}});
    const int id = int(g.values.size()) - 1;
    g.nodes.push_back(graph::Node{op, "n" + std::to_string(g.nodes.size()), std::string(graph::op_name(op)),
                                  std::move(inputs), id, std::move(a)});
    return id;
  }
  graph::Graph done(int output) {
    g.outputs = {output};
    g.validate();
    return g;
  }
};

/// Points of the set: for l2, on the sphere of radius r·(1 − 1e-9) and inside it; for linf, corners, faces
/// and interior points of the box (intersected with [lower, upper] when given).
inline std::vector<std::vector<double>> sample_set(const operators::InputSet& set, int count,
                                                   std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> unit(0, 1);
  const Eigen::Index N = set.centre.size();
  std::vector<std::vector<double>> points;
  for (int k = 0; k < count; ++k) {
    std::vector<double> x(static_cast<std::size_t>(N));
    if (set.norm == operators::InputNorm::l2) {
      std::vector<double> d(static_cast<std::size_t>(N));
      double norm = 0;
      for (double& v : d) {
        v = normal(rng);
        norm += v * v;
      }
      norm = std::sqrt(norm);
      const double length =
          set.radius * (1 - 1e-9) * (k % 2 == 0 ? 1.0 : std::pow(unit(rng), 1.0 / double(N)));
      for (Eigen::Index j = 0; j < N; ++j)
        x[std::size_t(j)] = set.centre(j) + length * d[std::size_t(j)] / norm;
    } else {
      for (Eigen::Index j = 0; j < N; ++j) {
        const double h = set.radius * (set.scale.size() ? set.scale(j) : 1.0);
        // corners for the first third of the points, interior points after
        const double t = k < count / 3 ? (unit(rng) < 0.5 ? -1.0 : 1.0) : 2 * unit(rng) - 1;
        double v = set.centre(j) + t * h;
        if (set.lower.size()) v = std::clamp(v, set.lower(j), set.upper(j));
        x[std::size_t(j)] = v;
      }
    }
    points.push_back(std::move(x));
  }
  return points;
}

/// Asserts that the graph's output at every sampled point lies in the certified ranges: the interval64
/// enclosure of the exact output meets the range, and the double output lies in it up to 1e-9 relative
/// (the double forward's own rounding). Returns the largest observed spread of each output over the points.
inline std::vector<double> expect_enclosed(const graph::Graph& g, const operators::InputSet& set,
                                           const std::vector<interval64>& ranges, int count,
                                           std::uint64_t seed, const std::string& what) {
  const graph::Shape& shape = g.values[std::size_t(g.inputs.front())].shape;
  std::vector<double> lo(ranges.size(), INFINITY), hi(ranges.size(), -INFINITY);
  int failures = 0;
  for (const auto& x : sample_set(set, count, seed)) {
    const auto y = graph::evaluate<double>(g, {graph::Tensor<double>{shape, x}}).front().data;
    const auto yi = graph::evaluate<interval64>(
                        g, {graph::Tensor<interval64>{shape, std::vector<interval64>(x.begin(), x.end())}})
                        .front()
                        .data;
    EXPECT_EQ(y.size(), ranges.size());
    for (std::size_t e = 0; e < y.size() && e < ranges.size(); ++e) {
      lo[e] = std::min(lo[e], y[e]);
      hi[e] = std::max(hi[e], y[e]);
      const double tol = 1e-9 * (1 + std::fabs(y[e]));
      const bool inside = y[e] >= ranges[e].lower() - tol && y[e] <= ranges[e].upper() + tol &&
                          yi[e].upper() >= ranges[e].lower() && yi[e].lower() <= ranges[e].upper();
      if (!inside && ++failures < 5)
        ADD_FAILURE() << what << ": output " << e << " = " << y[e] << " outside [" << ranges[e].lower()
                      << ", " << ranges[e].upper() << "]";
    }
  }
  EXPECT_EQ(failures, 0) << what;
  std::vector<double> spread(ranges.size());
  for (std::size_t e = 0; e < ranges.size(); ++e) spread[e] = hi[e] - lo[e];
  return spread;
}

}  // namespace regatta::test
