// graph_lipschitz_factors (operators/graph_naive.hpp, docs/models.md#certifying-a-model-file): on the
// two-layer MLP of tests/data/onnx the bound is the product of the two weights' spectral norms (against
// Eigen's SVD, an independent computation) and above every difference quotient of the graph's own evaluation
// at random pairs; on a hand-built graph with a residual Add, a LayerNorm, a Sigmoid and a Concat the bound
// holds at random pairs too, and on a graph of convolutions (overlapping and strided), BatchNorm and a
// repeating Gather it lies above the exact operator norm (the SVD of the graph's matrix); the digits ViT's
// export (attention: a product of two values that depend on the input) is refused with the node named.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <Eigen/SVD>
#include <regatta/core/eigen.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/onnx_import.hpp>
#include <regatta/operators/graph_naive.hpp>

namespace regatta::operators {
namespace {

const std::string onnx = std::string(REGATTA_TEST_DATA_DIR) + "/onnx/";

std::vector<double> evaluate(const graph::Graph& g, const std::vector<double>& x) {
  return graph::evaluate<double>(g, {graph::Tensor<double>{g.values[std::size_t(g.inputs[0])].shape, x}})[0]
      .data;
}

double distance(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t k = 0; k < a.size(); ++k) s += (a[k] - b[k]) * (a[k] - b[k]);
  return std::sqrt(s);
}

/// The largest ‖f(x) − f(y)‖ / ‖x − y‖ over random pairs (normal, some of them close).
double largest_quotient(const graph::Graph& g, int pairs) {
  const std::size_t n = std::size_t(graph::element_count(g.values[std::size_t(g.inputs[0])].shape));
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0, 1);
  double most = 0;
  for (int p = 0; p < pairs; ++p) {
    std::vector<double> x(n), y(n);
    const double scale = p % 2 ? 1e-3 : 1;
    for (std::size_t k = 0; k < n; ++k) x[k] = 2 * normal(rng), y[k] = x[k] + scale * normal(rng);
    most = std::max(most, distance(evaluate(g, x), evaluate(g, y)) / distance(x, y));
  }
  return most;
}

double spectral_norm(const graph::Graph& g, int v, bool transposed) {
  const graph::Value& w = g.values[std::size_t(v)];
  Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> m(
      w.data.data(), w.shape[0], w.shape[1]);
  const Eigen::MatrixXd a = transposed ? Eigen::MatrixXd(m.transpose()) : Eigen::MatrixXd(m);
  return Eigen::JacobiSVD<Eigen::MatrixXd>(a).singularValues()(0);
}

TEST(GraphNaive, TheMlpBoundIsTheProductOfItsSpectralNorms) {
  const graph::Graph g = graph::import_onnx(onnx + "mlp_tiny.onnx");
  std::string why;
  const auto f = graph_lipschitz_factors(g, why);
  ASSERT_TRUE(f.has_value()) << why;
  ASSERT_EQ(f->size(), 1u);
  double product = 1;
  for (const graph::Node& n : g.nodes)
    if (n.op == graph::Op::gemm)
      product *= spectral_norm(g, n.inputs[1], std::get<graph::GemmAttrs>(n.attributes).trans_b);
  const double L = (*f)[0].upper;
  EXPECT_GE(L, product);
  EXPECT_LE(L, product * (1 + 1e-6)) << "the certified norms are tight for 2 x 2 weights";
  EXPECT_LE(largest_quotient(g, 200), L);
}

TEST(GraphNaive, AResidualGraphWithNormsAndConcatIsBoundedAtRandomPairs) {
  // x [1, 4]; h = LayerNorm(x·W + b); y = concat(sigmoid(h) + x, relu(h))·V: logits [1, 3].
  graph::Graph g;
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0, 1);
  auto value = [&](const std::string& name, graph::Shape shape, bool constant = false) {
    graph::Value v{name, std::move(shape), constant, {}};
    if (constant)
      for (std::int64_t k = 0; k < graph::element_count(v.shape); ++k) v.data.push_back(normal(rng));
    g.values.push_back(std::move(v));
    return int(g.values.size()) - 1;
  };
  auto node = [&](graph::Op op, std::vector<int> in, graph::Shape shape, graph::Attributes at = {}) {
    const int out = value("v" + std::to_string(g.values.size()), std::move(shape));
    g.nodes.push_back({op, "n" + std::to_string(g.nodes.size()), std::string(graph::op_name(op)),
                       std::move(in), out, std::move(at)});
    return out;
  };
  const int x = value("x", {1, 4});
  g.inputs = {x};
  const int h0 = node(graph::Op::matmul, {x, value("W", {4, 4}, true)}, {1, 4});
  const int h1 = node(graph::Op::add, {h0, value("b", {4}, true)}, {1, 4});
  const int h = node(graph::Op::layer_norm, {h1, value("gamma", {4}, true), value("beta", {4}, true)}, {1, 4},
                     graph::LayerNormAttrs{1, 1e-2});
  const int s = node(graph::Op::add, {node(graph::Op::sigmoid, {h}, {1, 4}), x}, {1, 4});
  const int c =
      node(graph::Op::concat, {s, node(graph::Op::relu, {h}, {1, 4})}, {1, 8}, graph::ConcatAttrs{1});
  g.outputs = {node(graph::Op::matmul, {c, value("V", {8, 3}, true)}, {1, 3})};
  g.validate();
  std::string why;
  const auto f = graph_lipschitz_factors(g, why);
  ASSERT_TRUE(f.has_value()) << why;
  const double L = (*f)[0].upper, seen = largest_quotient(g, 2000);
  std::cout << "bound " << L << ", largest difference quotient seen " << seen << "\n";
  EXPECT_LE(seen, L);
  EXPECT_GT(seen, 0);
}

/// The graph's exact ℓ2 operator norm when it is linear: the SVD of its matrix, column j = f(e_j) − f(0).
double linear_norm(const graph::Graph& g) {
  const std::size_t n = std::size_t(graph::element_count(g.values[std::size_t(g.inputs[0])].shape));
  const std::vector<double> zero = evaluate(g, std::vector<double>(n, 0.0));
  Eigen::MatrixXd m(Eigen::Index(zero.size()), Eigen::Index(n));
  for (std::size_t j = 0; j < n; ++j) {
    std::vector<double> e(n, 0.0);
    e[j] = 1;
    const std::vector<double> y = evaluate(g, e);
    for (std::size_t i = 0; i < y.size(); ++i) m(Eigen::Index(i), Eigen::Index(j)) = y[i] - zero[i];
  }
  return Eigen::JacobiSVD<Eigen::MatrixXd>(m).singularValues()(0);
}

TEST(GraphNaive, ConvolutionsBatchNormAndGather) {
  // x [1, 2, 5, 5]; an overlapping 3 x 3 convolution (stride 1, padding 1: an input entry in 9 patches),
  // BatchNorm, flattened, a Gather repeating an entry, and a strided 2 x 2 one (no overlap) on the side.
  graph::Graph g;
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal(0, 1);
  auto value = [&](const std::string& name, graph::Shape shape, std::vector<double> data = {}) {
    const bool constant = !data.empty();
    g.values.push_back({name, std::move(shape), constant, std::move(data)});
    return int(g.values.size()) - 1;
  };
  auto random = [&](std::int64_t count, double shift = 0) {
    std::vector<double> v;
    for (std::int64_t k = 0; k < count; ++k) v.push_back(shift + normal(rng));
    return v;
  };
  auto node = [&](graph::Op op, std::vector<int> in, graph::Shape shape, graph::Attributes at = {}) {
    const int out = value("v" + std::to_string(g.values.size()), std::move(shape));
    g.nodes.push_back({op, "n" + std::to_string(g.nodes.size()), std::string(graph::op_name(op)),
                       std::move(in), out, std::move(at)});
    return out;
  };
  const int x = value("x", {1, 2, 5, 5});
  g.inputs = {x};
  graph::ConvAttrs same;
  same.pads = {1, 1, 1, 1};
  const int c = node(graph::Op::conv, {x, value("K", {3, 2, 3, 3}, random(54))}, {1, 3, 5, 5}, same);
  std::vector<double> var = random(3);
  for (double& v : var) v = v * v + 0.5;
  const int b = node(graph::Op::batch_norm,
                     {c, value("scale", {3}, random(3)), value("B", {3}, random(3)),
                      value("mean", {3}, random(3)), value("var", {3}, var)},
                     {1, 3, 5, 5}, graph::BatchNormAttrs{1e-5});
  const int f = node(graph::Op::reshape, {b}, {1, 75});
  const int picked = node(graph::Op::gather, {f}, {1, 4}, graph::GatherAttrs{1, {0, 7, 7, 30}, {4}});
  graph::ConvAttrs strided;
  strided.strides = {2, 2};
  const int d = node(graph::Op::conv, {x, value("S", {1, 2, 2, 2}, random(8))}, {1, 1, 2, 2}, strided);
  const int side = node(graph::Op::reshape, {d}, {1, 4});
  g.outputs = {node(graph::Op::concat, {picked, side}, {1, 8}, graph::ConcatAttrs{1})};
  g.validate();
  std::string why;
  const auto bound = graph_lipschitz_factors(g, why);
  ASSERT_TRUE(bound.has_value()) << why;
  const double L = (*bound)[0].upper, exact = linear_norm(g);
  std::cout << "bound " << L << ", exact operator norm " << exact << "\n";
  EXPECT_GE(L, exact);
  EXPECT_LE(largest_quotient(g, 200), L);
}

TEST(GraphNaive, AttentionIsRefusedWithTheNodeNamed) {
  const std::string path = std::string(REGATTA_TEST_DATA_DIR) + "/vit_digits/vit_digits.onnx";
  const graph::Graph g = graph::import_onnx(path);
  std::string why;
  EXPECT_FALSE(graph_lipschitz_factors(g, why).has_value());
  EXPECT_NE(why.find("product of two values that depend on the input"), std::string::npos) << why;
  EXPECT_NE(why.find("node '"), std::string::npos) << why;
}

}  // namespace
}  // namespace regatta::operators
