// The reverse and forward sweeps of every node kind (graph/src/vjp_rules.cpp, jvp_rules.cpp) against a second
// computation: central finite differences evaluated in MPFI at 256 bits with the step 2^-40, so the
// difference quotient is the exact derivative to ~1e-24 (truncation) and the only error left is the binary64
// rounding of the sweep (docs/graph.md, "Derivatives" and "Forward mode and Jacobian enclosures"). Each graph
// also checks that the MPFI tangent encloses the directional quotient, uᵀ(J·v) = (Jᵀu)ᵀ·v, and that the
// interval64 Jacobian and gradient over a small box contain the binary64 ones at points of the box. Small
// hand-built graphs, one or two per node kind, with constant and runtime operands and broadcasting.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/graph/attack.hpp>
#include <regatta/graph/derivatives.hpp>
#include <regatta/graph/evaluate.hpp>

namespace {

using namespace regatta;
using namespace regatta::graph;

struct Builder {
  Graph g;
  int value(Shape s, bool constant = false, std::vector<double> data = {}) {
    g.values.push_back(Value{"v" + std::to_string(g.values.size()), std::move(s), constant, std::move(data)});
    return static_cast<int>(g.values.size()) - 1;
  }
  int input(Shape s) {
    g.inputs.push_back(value(std::move(s)));
    return g.inputs.back();
  }
  // A constant of values spread over [lo, hi] (deterministic).
  int constant(Shape s, double lo = -1, double hi = 1, std::uint64_t seed = 7) {
    std::mt19937_64 rng(seed + g.values.size());
    std::vector<double> d(static_cast<std::size_t>(element_count(s)));
    for (double& v : d) v = std::uniform_real_distribution<double>(lo, hi)(rng);
    return value(std::move(s), true, std::move(d));
  }
  int constant_values(Shape s, std::vector<double> d) { return value(std::move(s), true, std::move(d)); }
  int node(Op op, std::vector<int> in, Shape out, Attributes a = {}) {
    const int o = value(std::move(out));
    g.nodes.push_back(Node{op, "n" + std::to_string(g.nodes.size()), std::string(op_name(op)), std::move(in),
                           o, std::move(a)});
    return o;
  }
  Graph done(int out) {
    g.outputs = {out};
    g.source = "hand-built";
    g.validate();
    return g;
  }
};

// J·v (binary64) against the MPFI central difference quotient along v, the MPFI tangent containing that
// quotient (to its truncation error), and uᵀ(J·v) = (Jᵀu)ᵀ·v with u = w and the gradient Jᵀu already checked.
void check_forward_mode(const Graph& g, const std::vector<double>& x, const std::vector<double>& w,
                        const std::vector<double>& grad, std::mt19937_64& rng) {
  const Value& in = g.values[static_cast<std::size_t>(g.inputs[0])];
  std::vector<double> v(x.size());
  for (double& e : v) e = std::uniform_real_distribution<double>(-1, 1)(rng);
  const std::vector<double> jv = jvp(g, x, v);
  ASSERT_EQ(jv.size(), w.size());

  PrecisionGuard guard(256);
  const interval h = interval(1) / interval(std::ldexp(1.0, 40));
  const auto at = [&](int sign) {
    Tensor<interval> t{in.shape, {}};
    for (std::size_t i = 0; i < x.size(); ++i)
      t.data.emplace_back(sign > 0 ? interval(interval(x[i]) + h * interval(v[i]))
                                   : interval(interval(x[i]) - h * interval(v[i])));
    return evaluate<interval>(g, {t})[0].data;
  };
  const std::vector<interval> plus = at(1), minus = at(-1);
  std::vector<interval> xi, vi;
  for (std::size_t i = 0; i < x.size(); ++i) {
    xi.emplace_back(x[i]);
    vi.emplace_back(v[i]);
  }
  const std::vector<interval> jv_mpfi = jvp<interval>(g, xi, vi);
  double scale = 0, dot_jv = 0, dot_grad = 0, dot_scale = 0;
  std::vector<double> fd(jv.size());
  for (std::size_t k = 0; k < jv.size(); ++k) {
    const interval q = (plus[k] - minus[k]) / (interval(2) * h);
    fd[k] = scalar_traits<interval>::to_double(q);
    scale = std::max(scale, std::fabs(fd[k]));
    // The quotient differs from J·v by the truncation O(h²) ≈ 1e-24: the MPFI tangent, widened by 1e-20,
    // holds it.
    const mpfr slack(1e-20);
    EXPECT_TRUE(lower_bound(jv_mpfi[k]) - slack <= lower_bound(q) &&
                upper_bound(q) <= upper_bound(jv_mpfi[k]) + slack)
        << "entry " << k << " of the MPFI tangent of " << op_name(g.nodes.back().op)
        << " misses the quotient";
    dot_jv += w[k] * jv[k];
    dot_scale += std::fabs(w[k] * jv[k]);
  }
  for (std::size_t i = 0; i < x.size(); ++i) {
    dot_grad += grad[i] * v[i];
    dot_scale += std::fabs(grad[i] * v[i]);
  }
  EXPECT_GT(scale, 1e-3) << "a test whose tangent vanishes checks nothing";
  for (std::size_t k = 0; k < jv.size(); ++k)
    EXPECT_NEAR(jv[k], fd[k], 1e-10 * scale) << "entry " << k << " of J·v of " << op_name(g.nodes.back().op);
  EXPECT_NEAR(dot_jv, dot_grad, 1e-12 * dot_scale)
      << "uᵀ(J·v) against (Jᵀu)ᵀ·v, " << op_name(g.nodes.back().op);
}

// The interval64 Jacobian over [x − d, x + d] and the interval64 gradient of w·y over it contain the binary64
// Jacobian and gradient at the centre and at 20 random points of the box (up to their own rounding, 1e-12
// relative); the binary64 Jacobian's rows or columns also reproduce J·v by the other mode.
void check_enclosures(const Graph& g, const std::vector<double>& x, const std::vector<double>& w, double d,
                      std::mt19937_64& rng) {
  std::vector<double> lo(x.size()), hi(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    lo[i] = x[i] - d;
    hi[i] = x[i] + d;
  }
  const Jacobian<interval64> J = jacobian_enclosure(g, lo, hi);
  std::vector<interval64> wi(w.begin(), w.end());
  const std::vector<interval64> G = vjps<interval64>(g, input_box(g, lo, hi), {wi})[0];
  const auto inside = [](const interval64& e, double v) {
    const double slack = 1e-12 * (1 + std::fabs(v));
    return e.lower() - slack <= v && v <= e.upper() + slack;
  };
  for (int s = 0; s <= 20; ++s) {
    std::vector<double> p = x;
    if (s > 0)
      for (std::size_t i = 0; i < x.size(); ++i)
        p[i] = std::uniform_real_distribution<double>(lo[i], hi[i])(rng);
    const Jacobian<double> Jp = jacobian(g, p);
    ASSERT_EQ(Jp.rows, J.rows);
    ASSERT_EQ(Jp.cols, J.cols);
    for (std::size_t e = 0; e < Jp.data.size(); ++e)
      ASSERT_TRUE(inside(J.data[e], Jp.data[e]))
          << "Jacobian entry " << e << " of " << op_name(g.nodes.back().op) << " at sample " << s << ": "
          << Jp.data[e] << " outside [" << J.data[e].lower() << ", " << J.data[e].upper() << "]";
    const std::vector<double> gp = vjp(g, p, w);
    for (std::size_t i = 0; i < gp.size(); ++i)
      ASSERT_TRUE(inside(G[i], gp[i])) << "gradient entry " << i << " of " << op_name(g.nodes.back().op);
    if (s ==
        0) {  // the other mode: J·e_j by forward mode when jacobian used rows, eᵢᵀ·J by reverse otherwise
      for (std::size_t j = 0; j < Jp.cols; ++j) {
        std::vector<double> e(Jp.cols, 0.0);
        e[j] = 1;
        const std::vector<double> col = jvp(g, p, e);
        for (std::size_t i = 0; i < Jp.rows; ++i)
          EXPECT_NEAR(col[i], Jp(i, j), 1e-12 * (1 + std::fabs(Jp(i, j))));
      }
    }
  }
}

// Compares vjp with the MPFI difference quotient in every input coordinate, at a random point of [lo, hi]^n
// and random weights; the tolerance is 1e-10 of the largest gradient entry (the sweep's rounding is ~1e-15).
void check(const Graph& g, double lo, double hi, std::uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  const Value& in = g.values[static_cast<std::size_t>(g.inputs[0])];
  const Value& out = g.values[static_cast<std::size_t>(g.outputs[0])];
  std::vector<double> x(static_cast<std::size_t>(element_count(in.shape)));
  for (double& v : x) v = std::uniform_real_distribution<double>(lo, hi)(rng);
  std::vector<double> w(static_cast<std::size_t>(element_count(out.shape)));
  for (double& v : w) v = std::uniform_real_distribution<double>(-1, 1)(rng);
  const std::vector<double> grad = vjp(g, x, w);
  ASSERT_EQ(grad.size(), x.size());

  PrecisionGuard guard(256);
  const interval h = interval(1) / interval(std::ldexp(1.0, 40));
  const auto objective = [&](std::size_t i, int sign) {
    Tensor<interval> t{in.shape, {}};
    for (double v : x) t.data.emplace_back(v);
    t.data[i] = sign > 0 ? interval(t.data[i] + h) : interval(t.data[i] - h);
    const auto y = evaluate<interval>(g, {t});
    interval s(0);
    for (std::size_t k = 0; k < w.size(); ++k) s += interval(w[k]) * y[0].data[k];
    return s;
  };
  std::vector<double> fd(x.size());
  double scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const interval q = (objective(i, 1) - objective(i, -1)) / (interval(2) * h);
    ASSERT_LT(scalar_traits<interval>::to_double(scalar_traits<interval>::width(q)), 1e-20)
        << "the MPFI difference quotient is not sharp";
    fd[i] = scalar_traits<interval>::to_double(q);
    scale = std::max(scale, std::fabs(fd[i]));
  }
  EXPECT_GT(scale, 1e-3) << "a test whose gradient vanishes checks nothing";
  for (std::size_t i = 0; i < x.size(); ++i)
    EXPECT_NEAR(grad[i], fd[i], 1e-10 * scale) << "coordinate " << i << " of " << op_name(g.nodes.back().op);
  check_forward_mode(g, x, w, grad, rng);
  check_enclosures(g, x, w, 1e-3 * (hi - lo), rng);
}

TEST(Vjp, ConvWithPaddingStridesDilations) {
  Builder b;
  const int x = b.input({1, 2, 5, 5});
  ConvAttrs a;
  a.strides = {2, 1};
  a.dilations = {1, 2};
  a.pads = {1, 0, 1, 1};
  const int y = b.node(Op::conv, {x, b.constant({3, 2, 3, 3}), b.constant({3})}, {1, 3, 3, 2}, a);
  check(b.done(y), -1, 1);
}

TEST(Vjp, MatmulConstantRightBroadcastBatch) {
  Builder b;
  const int x = b.input({2, 3, 4});
  check(b.done(b.node(Op::matmul, {x, b.constant({1, 4, 2})}, {2, 3, 2})), -1, 1);
}

TEST(Vjp, MatmulBothOperandsRuntime) {  // x·xᵀ: the adjoint reaches x through both operands
  Builder b;
  const int x = b.input({2, 3, 4});
  const int xt = b.node(Op::transpose, {x}, {2, 4, 3}, TransposeAttrs{{0, 2, 1}});
  check(b.done(b.node(Op::matmul, {x, xt}, {2, 3, 3})), -1, 1);
}

TEST(Vjp, MatmulVectorOperands) {
  Builder b;
  const int x = b.input({4});
  const int m = b.node(Op::matmul, {b.constant({3, 4}), x}, {3});
  check(b.done(b.node(Op::matmul, {m, b.constant({3, 2})}, {2})), -1, 1);
}

TEST(Vjp, GemmTransposedWithBroadcastBias) {
  Builder b;
  const int x = b.input({3, 2});
  const int y =
      b.node(Op::gemm, {x, b.constant({4, 3}), b.constant({4})}, {2, 4}, GemmAttrs{0.7, 1.3, true, true});
  check(b.done(y), -1, 1);
}

TEST(Vjp, GemmRuntimeBothOperands) {
  Builder b;
  const int x = b.input({2, 3});
  check(b.done(b.node(Op::gemm, {x, x}, {2, 2}, GemmAttrs{1.5, 1, false, true})), -1, 1);
}

TEST(Vjp, AddBroadcastConstantAndRuntime) {
  Builder b;
  const int x = b.input({2, 3});
  const int m = b.node(Op::reduce_mean, {x}, {2, 1}, ReduceMeanAttrs{{1}, true});
  const int s = b.node(Op::add, {x, b.constant({3})}, {2, 3});
  const int y = b.node(Op::mul, {s, s}, {2, 3});
  check(b.done(b.node(Op::add, {y, m}, {2, 3})), -1, 1);
}

TEST(Vjp, SubBothDirections) {
  Builder b;
  const int x = b.input({2, 3});
  const int s = b.node(Op::sub, {b.constant({1, 3}), x}, {2, 3});
  const int t = b.node(Op::mul, {s, x}, {2, 3});
  const int m = b.node(Op::reduce_mean, {t}, {2, 1}, ReduceMeanAttrs{{1}, true});
  check(b.done(b.node(Op::sub, {t, m}, {2, 3})), -1, 1);
}

TEST(Vjp, MulBroadcastRuntimeOperands) {
  Builder b;
  const int x = b.input({2, 3});
  const int m = b.node(Op::reduce_mean, {x}, {3}, ReduceMeanAttrs{{0}, false});
  const int y = b.node(Op::mul, {x, m}, {2, 3});
  check(b.done(b.node(Op::mul, {y, b.constant({2, 1})}, {2, 3})), -1, 1);
}

TEST(Vjp, DivRuntimeNumeratorAndDenominator) {
  Builder b;
  const int x = b.input({2, 3});
  const int d = b.node(Op::add, {b.node(Op::mul, {x, x}, {2, 3}), b.constant_values({1}, {1.0})}, {2, 3});
  const int q = b.node(Op::div, {x, d}, {2, 3});
  check(b.done(b.node(Op::div, {b.constant({3}, 0.5, 2), q}, {2, 3})), 0.3, 1.5);
}

TEST(Vjp, PowIntegerFractionalAndSquareRootExponents) {
  Builder b;
  const int x = b.input({2, 4});
  check(b.done(b.node(Op::pow, {x, b.constant_values({4}, {2, 3, 1.5, 0.5})}, {2, 4})), 0.5, 2);
}

TEST(Vjp, PowNegativeBaseIntegerExponents) {
  Builder b;
  const int x = b.input({2, 3});
  check(b.done(b.node(Op::pow, {x, b.constant_values({3}, {3, -1, -2})}, {2, 3})), -2, -0.5);
}

TEST(Vjp, WhereBothBranchesRuntime) {
  Builder b;
  const int x = b.input({2, 3});
  const int n = b.node(Op::mul, {x, x}, {2, 3});
  const int c = b.constant_values({2, 3}, {1, 0, 0, 1, 1, 0});
  const int y = b.node(Op::where, {c, x, n}, {2, 3});
  check(b.done(b.node(Op::where, {b.constant_values({3}, {0, 1, 0}), y, b.constant({2, 1})}, {2, 3})), -1, 1);
}

Graph unary_chain(Op op, Attributes a = {}) {
  Builder b;
  const int x = b.input({2, 3});
  const int y = b.node(op, {x}, {2, 3}, std::move(a));
  return b.done(b.node(Op::matmul, {y, b.constant({3, 2})}, {2, 2}));  // mixes the coordinates
}

TEST(Vjp, Neg) { check(unary_chain(Op::neg), -1, 1); }
TEST(Vjp, Sqrt) { check(unary_chain(Op::sqrt), 0.2, 2); }
TEST(Vjp, Reciprocal) { check(unary_chain(Op::reciprocal), 0.2, 2); }
TEST(Vjp, Relu) { check(unary_chain(Op::relu), -1, 1, 3); }
TEST(Vjp, GeluErf) { check(unary_chain(Op::gelu, GeluAttrs{false}), -2, 2); }
TEST(Vjp, GeluTanh) { check(unary_chain(Op::gelu, GeluAttrs{true}), -2, 2); }
TEST(Vjp, Erf) { check(unary_chain(Op::erf), -1.5, 1.5); }
TEST(Vjp, Tanh) { check(unary_chain(Op::tanh), -2, 2); }
TEST(Vjp, Sigmoid) { check(unary_chain(Op::sigmoid), -3, 3); }
TEST(Vjp, Identity) { check(unary_chain(Op::identity), -1, 1); }

TEST(Vjp, ReluIsZeroWhereTheInputIsNegative) {
  const Graph g = unary_chain(Op::relu);
  const auto grad = vjp(g, {-1, 2, -3, 4, -5, 6}, {1, 1, 1, 1});
  EXPECT_EQ(grad[0], 0.0);
  EXPECT_EQ(grad[2], 0.0);
  EXPECT_EQ(grad[4], 0.0);
  EXPECT_NE(grad[1], 0.0);
}

TEST(Vjp, TransposeThreeAxes) {
  Builder b;
  const int x = b.input({2, 3, 4});
  const int t = b.node(Op::transpose, {x}, {4, 2, 3}, TransposeAttrs{{2, 0, 1}});
  check(b.done(b.node(Op::mul, {t, t}, {4, 2, 3})), -1, 1);
}

TEST(Vjp, Reshape) {
  Builder b;
  const int x = b.input({2, 3, 4});
  const int r = b.node(Op::reshape, {x}, {6, 4});
  check(b.done(b.node(Op::matmul, {r, b.constant({4, 2})}, {6, 2})), -1, 1);
}

TEST(Vjp, SliceWithStepsAndNegativeStep) {
  Builder b;
  const int x = b.input({4, 6});
  const int s = b.node(Op::slice, {x}, {2, 2}, SliceAttrs{{1, 5}, {2, -3}});
  check(b.done(b.node(Op::mul, {s, s}, {2, 2})), -1, 1);
}

TEST(Vjp, GatherRepeatedIndices) {  // a repeated index receives the sum of its readers' adjoints
  Builder b;
  const int x = b.input({2, 3});
  const int y = b.node(Op::gather, {x}, {2, 2, 2}, GatherAttrs{1, {0, 2, 2, 1}, {2, 2}});
  check(b.done(b.node(Op::mul, {y, y}, {2, 2, 2})), -1, 1);
}

TEST(Vjp, Expand) {
  Builder b;
  const int x = b.input({3, 1});
  const int y = b.node(Op::expand, {x}, {2, 3, 4});
  check(b.done(b.node(Op::mul, {y, b.constant({2, 3, 4})}, {2, 3, 4})), -1, 1);
}

TEST(Vjp, ConcatRuntimeAndConstantParts) {
  Builder b;
  const int x = b.input({2, 2, 3});
  const int n = b.node(Op::mul, {x, x}, {2, 2, 3});
  const int c = b.node(Op::concat, {x, b.constant({2, 1, 3}), n}, {2, 5, 3}, ConcatAttrs{1});
  check(b.done(b.node(Op::matmul, {c, b.constant({3, 2})}, {2, 5, 2})), -1, 1);
}

TEST(Vjp, SoftmaxOneAxis) {
  Builder b;
  const int x = b.input({2, 3, 4});
  check(b.done(b.node(Op::softmax, {x}, {2, 3, 4}, SoftmaxAttrs{1, 2})), -2, 2);
}

TEST(Vjp, SoftmaxTrailingBlock) {  // the opset-1/11 semantics: one softmax over axes [1, 3)
  Builder b;
  const int x = b.input({2, 3, 2});
  check(b.done(b.node(Op::softmax, {x}, {2, 3, 2}, SoftmaxAttrs{1, 3})), -2, 2);
}

TEST(Vjp, LayerNormTwoAxesBroadcastScaleAndBias) {
  Builder b;
  const int x = b.input({2, 3, 4});
  const int y = b.node(Op::layer_norm, {x, b.constant({4}, 0.5, 1.5), b.constant({3, 4})}, {2, 3, 4},
                       LayerNormAttrs{1, 1e-5});
  check(b.done(y), -2, 2);
}

TEST(Vjp, LayerNormLastAxisNoBias) {
  Builder b;
  const int x = b.input({3, 5});
  check(b.done(b.node(Op::layer_norm, {x, b.constant({5})}, {3, 5}, LayerNormAttrs{1, 0.25})), -2, 2);
}

TEST(Vjp, ReduceMeanTwoAxes) {
  Builder b;
  const int x = b.input({2, 3, 4});
  const int m = b.node(Op::reduce_mean, {x}, {3}, ReduceMeanAttrs{{0, 2}, false});
  check(b.done(b.node(Op::mul, {m, m}, {3})), -1, 1);
}

TEST(Vjp, BatchNormPerChannel) {
  Builder b;
  const int x = b.input({2, 3, 4});
  const int y =
      b.node(Op::batch_norm,
             {x, b.constant({3}, 0.5, 1.5), b.constant({3}), b.constant({3}), b.constant({3}, 0.5, 2)},
             {2, 3, 4}, BatchNormAttrs{1e-3});
  check(b.done(b.node(Op::mul, {y, y}, {2, 3, 4})), -1, 1);
}

TEST(Vjp, AnOutputThatIgnoresTheInputHasGradientZero) {
  Builder b;
  const int x = b.input({2});
  const int y = b.node(Op::neg, {b.constant({2})}, {2});
  b.node(Op::neg, {x}, {2});
  const Graph g = b.done(y);
  EXPECT_EQ(vjp(g, {1, 2}, {1, 1}), (std::vector<double>{0, 0}));
  EXPECT_EQ(jvp<double>(g, {1, 2}, {1, 1}), (std::vector<double>{0, 0}));
  const Jacobian<interval64> J = jacobian_enclosure(g, {0, 1}, {1, 2});
  for (const interval64& e : J.data) EXPECT_TRUE(e.lower() == 0 && e.upper() == 0);
}

TEST(Vjp, WrongSizesAreInputErrorsNamingTheSource) {
  const Graph g = unary_chain(Op::tanh);
  EXPECT_THROW(vjp(g, {1, 2, 3}, {1, 1, 1, 1}), InputError);
  try {
    vjp(g, {1, 2, 3, 4, 5, 6}, {1, 1});
    FAIL() << "no error for 2 weights";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("hand-built"), std::string::npos) << e.what();
  }
}

TEST(Jvp, WrongSizesAndBoxesAreInputErrorsNamingTheSource) {
  const Graph g = unary_chain(Op::tanh);
  EXPECT_THROW(jvp<double>(g, {1, 2, 3}, {1, 2, 3}), InputError);
  EXPECT_THROW(jvp<double>(g, {1, 2, 3, 4, 5, 6}, {1, 2}), InputError);
  EXPECT_THROW(jacobian_enclosure(g, {0, 0, 0, 0, 0, 0}, {1, 1, 1, -1, 1, 1}), InputError);
  try {
    jacobian_enclosure(g, {0, 0, 0, 0, 0, 0}, {1, 1, 1, NAN, 1, 1});
    FAIL() << "no error for a NaN end";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("hand-built"), std::string::npos) << e.what();
  }
}

TEST(Jvp, ReluEnclosureIsTheGeneralisedDerivativeAcrossTheKink) {  // [0, 1] where the box straddles 0
  Builder b;
  const Graph g = b.done(b.node(Op::relu, {b.input({3})}, {3}));
  const Jacobian<interval64> J = jacobian_enclosure(g, {-1, -0.5, 0.5}, {-0.5, 0.5, 1});
  EXPECT_TRUE(J(0, 0).lower() == 0 && J(0, 0).upper() == 0);
  EXPECT_TRUE(J(1, 1).lower() == 0 && J(1, 1).upper() == 1);
  EXPECT_TRUE(J(2, 2).lower() == 1 && J(2, 2).upper() == 1);
  EXPECT_TRUE(J(0, 1).lower() == 0 && J(0, 1).upper() == 0);
}

}  // namespace
