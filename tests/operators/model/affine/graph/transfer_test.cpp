// The affine-form pass over hand-built graphs (operators/src/model/affine/graph/,
// docs/models.md#the-graph-pass): for each node family, every sampled point of the l2 ball and of the linf
// box (corners included) evaluates, by the graph's own double and interval64 forward, inside the certified
// output ranges; for linear graphs the ranges equal the exact ranges of the linear map (computed here from
// the dual norms of its columns); and unsupported graphs are named, not bounded.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include <regatta/core/error.hpp>
#include <regatta/operators/graph_affine.hpp>

#include "graph_builder.hpp"

namespace {

using namespace regatta;
using graph::Op;
using operators::InputNorm;
using operators::InputSet;
using regatta::test::GraphBuilder;

InputSet set_for(const graph::Graph& g, InputNorm norm, double radius, std::uint64_t seed,
                 double spread = 1) {
  const auto N = Eigen::Index(graph::element_count(g.values[std::size_t(g.inputs.front())].shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-spread, spread);
  InputSet set;
  set.norm = norm;
  set.radius = radius;
  set.centre.resize(N);
  for (Eigen::Index j = 0; j < N; ++j) set.centre(j) = u(rng);
  return set;
}

/// The ranges of g over the ball and the box of `radius` enclose the sampled outputs; returns the widest
/// range's half-width over both sets (for the "not absurd" checks).
double check_both(const graph::Graph& g, double radius, const std::string& what, std::uint64_t seed = 1,
                  double spread = 1) {
  double widest = 0;
  for (InputNorm norm : {InputNorm::l2, InputNorm::linf}) {
    const InputSet set = set_for(g, norm, radius, seed, spread);
    const std::vector<interval64> ranges = operators::graph_affine_output_ranges(g, set);
    for (const interval64& r : ranges) {
      EXPECT_TRUE(std::isfinite(r.lower()) && std::isfinite(r.upper())) << what << ": nothing certified";
      widest = std::max(widest, (r.upper() - r.lower()) / 2);
    }
    regatta::test::expect_enclosed(g, set, ranges, 240, seed + 7,
                                   what + (norm == InputNorm::l2 ? " (l2)" : " (linf)"));
  }
  return widest;
}

TEST(GraphAffineLinear, RangesEqualTheExactRangeOfTheLinearMap) {
  // y = ((x·W + b)·2 − 1) / 4 + mean over rows, x of shape [3, 4]: linear, so each output's exact range is
  // its centre ± r·‖column of the map‖ (ℓ₂ for the ball, ℓ₁ for the box), computed here from the map's
  // matrix found by evaluating unit vectors.
  std::mt19937_64 rng(3);
  GraphBuilder b;
  const int x = b.input({3, 4});
  const int W = b.random_constant({4, 5}, rng);
  const int bias = b.random_constant({5}, rng);
  int y = b.node(Op::matmul, {x, W}, {3, 5});
  y = b.node(Op::add, {y, bias}, {3, 5});
  y = b.node(Op::mul, {y, b.constant({1}, {2.0})}, {3, 5});
  y = b.node(Op::sub, {y, b.constant({}, {1.0})}, {3, 5});
  y = b.node(Op::div, {y, b.constant({1, 1}, {4.0})}, {3, 5});
  const int m = b.node(Op::reduce_mean, {y}, {1, 5}, graph::ReduceMeanAttrs{{0}, true});
  y = b.node(Op::add, {y, m}, {3, 5});
  y = b.node(Op::neg, {y}, {3, 5});
  const graph::Graph g = b.done(y);
  const double r = 0.3;
  check_both(g, r, "linear map");
  // The map's matrix J (15 × 12) by differences of the double forward at unit vectors (exact up to rounding).
  const graph::Shape shape{3, 4};
  auto f = [&](const std::vector<double>& v) {
    return graph::evaluate<double>(g, {{shape, v}}).front().data;
  };
  const std::vector<double> zero(12, 0.0), y0 = f(zero);
  Eigen::MatrixXd J(15, 12);
  for (int j = 0; j < 12; ++j) {
    std::vector<double> e = zero;
    e[std::size_t(j)] = 1;
    const auto yj = f(e);
    for (int o = 0; o < 15; ++o) J(o, j) = yj[std::size_t(o)] - y0[std::size_t(o)];
  }
  for (InputNorm norm : {InputNorm::l2, InputNorm::linf}) {
    const InputSet set = set_for(g, norm, r, 1);
    const auto ranges = operators::graph_affine_output_ranges(g, set);
    for (int o = 0; o < 15; ++o) {
      const double exact = r * (norm == InputNorm::l2 ? J.row(o).norm() : J.row(o).lpNorm<1>());
      const double half = (ranges[std::size_t(o)].upper() - ranges[std::size_t(o)].lower()) / 2;
      EXPECT_GE(half, exact * (1 - 1e-9)) << "output " << o;
      EXPECT_LE(half, exact * (1 + 1e-9) + 1e-12) << "output " << o;
    }
    // A functional: the lower bound of y_0 − y_1 is the exact minimum over the set, up to rounding.
    Eigen::MatrixXd C = Eigen::MatrixXd::Zero(1, 15);
    C(0, 0) = 1;
    C(0, 1) = -1;
    const Eigen::RowVectorXd a = J.row(0) - J.row(1);
    const auto yc = f(std::vector<double>(set.centre.data(), set.centre.data() + 12));
    const double exact = yc[0] - yc[1] - r * (norm == InputNorm::l2 ? a.norm() : a.lpNorm<1>());
    const double low = operators::graph_affine_lower_bounds(g, set, C, Eigen::VectorXd::Zero(1)).front();
    EXPECT_LE(low, exact + 1e-12);
    EXPECT_GE(low, exact - 1e-9);
  }
}

TEST(GraphAffineLinear, GemmConvBatchNorm) {
  std::mt19937_64 rng(5);
  {
    GraphBuilder b;
    const int x = b.input({2, 3});
    const int B = b.random_constant({4, 3}, rng), C = b.random_constant({4}, rng);
    const int y = b.node(Op::gemm, {x, B, C}, {2, 4}, graph::GemmAttrs{0.5, 2.0, false, true});
    check_both(b.done(y), 0.2, "gemm");
  }
  {
    GraphBuilder b;  // constant left operand, transposed computed right operand
    const int x = b.input({2, 3});
    const int A = b.random_constant({4, 3}, rng);
    const int y = b.node(Op::gemm, {A, x}, {4, 2}, graph::GemmAttrs{1.0, 1.0, false, true});
    check_both(b.done(y), 0.2, "gemm with constant A");
  }
  {
    GraphBuilder b;  // matmul with a constant left operand and batch axes
    const int x = b.input({2, 3, 2});
    const int A = b.random_constant({4, 3}, rng);
    const int y = b.node(Op::matmul, {A, x}, {2, 4, 2});
    check_both(b.done(y), 0.2, "matmul with constant left operand");
  }
  {
    GraphBuilder b;
    const int x = b.input({1, 2, 5, 5});
    const int W = b.random_constant({3, 2, 3, 3}, rng), bias = b.random_constant({3}, rng);
    int y = b.node(Op::conv, {x, W, bias}, {1, 3, 3, 3}, graph::ConvAttrs{{2, 2}, {1, 1}, {1, 1, 1, 1}});
    const int scale = b.random_constant({3}, rng), shift = b.random_constant({3}, rng),
              mean = b.random_constant({3}, rng), var = b.random_constant({3}, rng, 0.5, 2);
    y = b.node(Op::batch_norm, {y, scale, shift, mean, var}, {1, 3, 3, 3}, graph::BatchNormAttrs{1e-5});
    y = b.node(Op::relu, {y}, {1, 3, 3, 3});
    check_both(b.done(y), 0.1, "conv, batch_norm, relu");
  }
}

TEST(GraphAffineMovement, IndexMapsMoveFormsExactly) {
  std::mt19937_64 rng(7);
  GraphBuilder b;
  const int x = b.input({2, 3, 4});
  int t = b.node(Op::transpose, {x}, {4, 2, 3}, graph::TransposeAttrs{{2, 0, 1}});
  t = b.node(Op::reshape, {t}, {8, 3});
  t = b.node(Op::slice, {t}, {3, 2}, graph::SliceAttrs{{1, 2}, {3, -1}});
  const int c = b.random_constant({3, 2}, rng);
  t = b.node(Op::concat, {t, c}, {3, 4}, graph::ConcatAttrs{1});
  t = b.node(Op::gather, {t}, {3, 2, 2}, graph::GatherAttrs{1, {3, 0, 0, 2}, {2, 2}});
  t = b.node(Op::expand, {t}, {2, 3, 2, 2});
  const int cond = b.constant({2, 1, 1, 2}, {1, 0, 0, 1});
  t = b.node(Op::where, {cond, t, b.random_constant({1}, rng)}, {2, 3, 2, 2});
  t = b.node(Op::identity, {t}, {2, 3, 2, 2});
  const graph::Graph g = b.done(t);
  const double r = 0.25;
  check_both(g, r, "movement");
  // Each output is an input entry (range centre ± r exactly), or a constant (a point).
  for (InputNorm norm : {InputNorm::l2, InputNorm::linf}) {
    const auto ranges = operators::graph_affine_output_ranges(g, set_for(g, norm, r, 1));
    for (const interval64& v : ranges) {
      const double half = (v.upper() - v.lower()) / 2;
      EXPECT_TRUE(half <= 1e-15 || std::fabs(half - r) <= 1e-15) << half;  // 1e-15: outward rounding
    }
  }
}

TEST(GraphAffineNonlinear, ElementwiseFunctions) {
  std::mt19937_64 rng(11);
  const graph::Shape s{2, 3};
  auto unary = [&](Op op, graph::Attributes a = {}) {
    GraphBuilder b;
    const int x = b.input(s);
    const int y = b.node(Op::matmul, {x, b.random_constant({3, 3}, rng)}, s);
    return b.done(b.node(op, {y}, s, a));
  };
  check_both(unary(Op::relu), 0.3, "relu");
  check_both(unary(Op::gelu, graph::GeluAttrs{false}), 0.3, "gelu");
  check_both(unary(Op::gelu, graph::GeluAttrs{true}), 0.3, "gelu (tanh)");
  check_both(unary(Op::erf), 0.3, "erf");
  check_both(unary(Op::tanh), 0.3, "tanh");
  check_both(unary(Op::sigmoid), 0.3, "sigmoid");
  {  // sqrt(x² + 1), 1/(x² + 1), 1/(−x² − 1), x³, x^0.5 of x² + 2
    for (double k : {2.0, 3.0}) {
      GraphBuilder b;
      const int x = b.input(s);
      const int y = b.node(Op::pow, {x, b.constant({}, {k})}, s);
      check_both(b.done(y), 0.3, "pow " + std::to_string(k));
    }
    for (Op op : {Op::sqrt, Op::reciprocal}) {
      for (double sign : {1.0, -1.0}) {
        if (op == Op::sqrt && sign < 0) continue;
        GraphBuilder b;
        const int x = b.input(s);
        int y = b.node(Op::mul, {x, x}, s);
        y = b.node(Op::add, {y, b.constant({}, {1.0})}, s);
        y = b.node(Op::mul, {y, b.constant({}, {sign})}, s);
        check_both(b.done(b.node(op, {y}, s)), 0.3, std::string(graph::op_name(op)));
      }
    }
  }
}

TEST(GraphAffineProducts, ProductsQuotientsMatmulSoftmaxLayerNorm) {
  std::mt19937_64 rng(13);
  {  // x ⊙ (xW) − x / (x² + 2) and a broadcast sum
    GraphBuilder b;
    const int x = b.input({2, 3});
    const int y = b.node(Op::matmul, {x, b.random_constant({3, 3}, rng)}, {2, 3});
    const int p = b.node(Op::mul, {x, y}, {2, 3});
    int d = b.node(Op::mul, {x, x}, {2, 3});
    d = b.node(Op::add, {d, b.constant({}, {2.0})}, {2, 3});
    const int q = b.node(Op::div, {x, d}, {2, 3});
    const int q2 = b.node(Op::div, {b.constant({3}, {1, 2, 3}), d}, {2, 3});
    int z = b.node(Op::sub, {p, q}, {2, 3});
    z = b.node(Op::add, {z, q2}, {2, 3});
    const int row = b.node(Op::slice, {x}, {1, 3}, graph::SliceAttrs{{0, 0}, {1, 1}});
    z = b.node(Op::add, {z, row}, {2, 3});
    check_both(b.done(z), 0.2, "products and quotients");
  }
  {  // one attention head: softmax(Q·Kᵀ/√d)·V, then layer_norm
    GraphBuilder b;
    const int x = b.input({4, 3});
    const int Q = b.node(Op::matmul, {x, b.random_constant({3, 2}, rng)}, {4, 2});
    const int K = b.node(Op::matmul, {x, b.random_constant({3, 2}, rng)}, {4, 2});
    const int V = b.node(Op::matmul, {x, b.random_constant({3, 3}, rng)}, {4, 3});
    const int Kt = b.node(Op::transpose, {K}, {2, 4}, graph::TransposeAttrs{{1, 0}});
    int S = b.node(Op::matmul, {Q, Kt}, {4, 4});
    S = b.node(Op::div, {S, b.constant({}, {std::sqrt(2.0)})}, {4, 4});
    const int P = b.node(Op::softmax, {S}, {4, 4}, graph::SoftmaxAttrs{1, 2});
    int O = b.node(Op::matmul, {P, V}, {4, 3});
    O = b.node(Op::add, {O, x}, {4, 3});
    const int gamma = b.random_constant({3}, rng, 0.5, 1.5), beta = b.random_constant({3}, rng);
    O = b.node(Op::layer_norm, {O, gamma, beta}, {4, 3}, graph::LayerNormAttrs{1, 1e-5});
    check_both(b.done(O), 0.05, "attention head and layer_norm");
  }
  {  // softmax over the first axis (not the contracted one of a following product) and batched matmul
    GraphBuilder b;
    const int x = b.input({2, 3, 2});
    const int P = b.node(Op::softmax, {x}, {2, 3, 2}, graph::SoftmaxAttrs{1, 2});
    const int Pt = b.node(Op::transpose, {P}, {2, 2, 3}, graph::TransposeAttrs{{0, 2, 1}});
    const int y = b.node(Op::matmul, {Pt, x}, {2, 2, 2});
    check_both(b.done(y), 0.1, "batched matmul of forms");
  }
}

TEST(GraphAffine, UnsupportedNodesAreNamedAndRefused) {
  GraphBuilder b;
  const int x = b.input({2});
  const int y = b.node(Op::pow, {x, b.constant({}, {2.5})}, {2});
  const graph::Graph g = b.done(y);
  const std::string why = operators::graph_affine_unsupported(g);
  EXPECT_NE(why.find("n0"), std::string::npos) << why;
  EXPECT_NE(why.find("pow"), std::string::npos) << why;
  InputSet set;
  set.centre = Eigen::VectorXd::Ones(2);
  set.radius = 0.1;
  EXPECT_THROW(operators::graph_affine_output_ranges(g, set), InputError);
  EXPECT_THROW(operators::graph_affine_margin(g, set, 0), InputError);
  GraphBuilder c;
  const int u = c.input({2, 2});
  const int w = c.node(Op::gemm, {u, u}, {2, 2}, graph::GemmAttrs{});
  EXPECT_NE(operators::graph_affine_unsupported(c.done(w)).find("gemm"), std::string::npos);
}

TEST(GraphAffine, BadSetsStopsAndVacuousRanges) {
  GraphBuilder b;
  const int x = b.input({3});
  const int y = b.node(Op::reciprocal, {x}, {3});
  const graph::Graph g = b.done(y);
  InputSet set;
  set.centre = Eigen::VectorXd::Ones(2);  // the input has 3 entries
  EXPECT_THROW(operators::graph_affine_output_ranges(g, set), InputError);
  set.centre = Eigen::VectorXd::Ones(3);
  set.radius = 2;  // 1/x over a range through 0: nothing certified
  for (const interval64& r : operators::graph_affine_output_ranges(g, set))
    EXPECT_FALSE(std::isfinite(r.upper()));
  set.radius = 0.5;
  std::atomic<bool> stop{true};
  operators::GraphAffineOptions options;
  options.stop = &stop;
  EXPECT_EQ(operators::graph_affine_margin(g, set, 0, options), -std::numeric_limits<double>::infinity());
  options.stop = nullptr;
  options.max_bytes = 16;
  EXPECT_THROW(operators::graph_affine_margin(g, set, 0, options), InputError);
  // linf with a valid range: the box is intersected with it (a range outside it would show)
  set.norm = InputNorm::linf;
  set.lower = Eigen::VectorXd::Constant(3, 0.9);
  set.upper = Eigen::VectorXd::Constant(3, 2.0);
  for (const interval64& r : operators::graph_affine_output_ranges(g, set)) {
    EXPECT_LE(r.upper(), 1 / 0.9 * (1 + 1e-12));
    EXPECT_GE(r.lower(), 1 / 1.5 * (1 - 1e-12) - 0.1);  // the chord's gap on [0.9, 1.5] is 0.057
  }
  set.lower(0) = 3;  // empty
  EXPECT_THROW(operators::graph_affine_output_ranges(g, set), InputError);
}

}  // namespace
