// Causal masks filled with −inf (docs/graph.md#non-finite-constants): torch's two usual exports
// (tests/data/onnx/make_inf_mask_models.py) import, every forward and derivative path stays finite and agrees
// with torch or a second computation, the fusion pass records the exact causal mask; −inf anywhere else,
// +inf and NaN are refused, on files and on hand-built graphs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <regatta/core/error.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/graph/attack.hpp>
#include <regatta/graph/derivatives.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/local_lipschitz.hpp>
#include <regatta/graph/onnx_import.hpp>

#include "onnx_fixtures.hpp"

namespace {

using namespace regatta;
using namespace regatta::graph;

using namespace regatta::graph::onnx_fixtures;
constexpr double inf = std::numeric_limits<double>::infinity();

bool holds_minus_inf(const Graph& g) {
  for (const Value& v : g.values)
    if (v.constant && std::find(v.data.begin(), v.data.end(), -inf) != v.data.end()) return true;
  return false;
}

class InfMask : public ::testing::TestWithParam<std::string> {};

// The −inf constant stays in the graph (no substitution by a large negative number) and the attention is
// recorded with the exact causal mask: fill −inf, masked weights exactly 0.
TEST_P(InfMask, ImportsWithTheExactCausalMask) {
  const Case c = load(GetParam());
  EXPECT_TRUE(holds_minus_inf(c.graph));
  ASSERT_EQ(c.graph.attention.size(), 1u);
  const AttentionPattern& p = c.graph.attention[0];
  EXPECT_EQ(p.mask, AttentionMask::causal);
  EXPECT_EQ(p.mask_fill, -inf);
  EXPECT_EQ(p.heads, 4);
  EXPECT_EQ(p.tokens, 6);
}

// MPFI at 128 bits encloses torch's logits; the softmax weights above the diagonal are exactly 0 in
// double, interval64 and MPFI.
TEST_P(InfMask, MpfiEnclosesTheLogitsAndMaskedWeightsAreExactlyZero) {
  const Case c = load(GetParam());
  const auto box = evaluate(
      c.graph, std::vector<Tensor<interval>>{
                   {c.input.shape, std::vector<interval>(c.input.data.begin(), c.input.data.end())}});
  for (std::size_t k = 0; k < box[0].data.size(); ++k) {
    EXPECT_LE(lower_bound(box[0].data[k]), c.logits.data[k] + 1e-12);
    EXPECT_GE(upper_bound(box[0].data[k]), c.logits.data[k] - 1e-12);
    EXPECT_LT(upper_bound(box[0].data[k]) - lower_bound(box[0].data[k]), 1e-9);
  }
  int weights = -1;  // the softmax's output
  for (const Node& n : c.graph.nodes)
    if (n.op == Op::softmax) weights = n.output;
  ASSERT_GE(weights, 0);
  const auto all_d = evaluate_all(c.graph, std::vector<Tensor<double>>{c.input});
  const auto all_i = evaluate_all(
      c.graph, std::vector<Tensor<interval64>>{
                   {c.input.shape, std::vector<interval64>(c.input.data.begin(), c.input.data.end())}});
  const auto all_m = evaluate_all(
      c.graph, std::vector<Tensor<interval>>{
                   {c.input.shape, std::vector<interval>(c.input.data.begin(), c.input.data.end())}});
  const auto& wm = all_m[static_cast<std::size_t>(weights)];
  const auto& wd = all_d[static_cast<std::size_t>(weights)];
  const auto& wi = all_i[static_cast<std::size_t>(weights)];
  ASSERT_EQ(wd.data.size(), 4u * 6u * 6u);
  for (std::size_t e = 0; e < wd.data.size(); ++e) {
    const std::size_t i = (e / 6) % 6, j = e % 6;
    if (j > i) {
      EXPECT_EQ(wd.data[e], 0.0);
      EXPECT_EQ(wi.data[e].lower(), 0.0);
      EXPECT_EQ(wi.data[e].upper(), 0.0);
      EXPECT_EQ(lower_bound(wm.data[e]), 0.0);
      EXPECT_EQ(upper_bound(wm.data[e]), 0.0);
    } else {
      EXPECT_GT(wd.data[e], 0.0);
    }
  }
}

// The derivative paths at the stored input: forward mode against the reverse sweep's Jacobian,
// the MPFI Jacobian at the point and the interval64 one over a small box around it around the double one, the
// local Lipschitz bound finite and above its estimate, and the attack's margins finite.
TEST_P(InfMask, DerivativesLipschitzAndAttackStayFinite) {
  const Case c = load(GetParam());
  const Jacobian<double> J = jacobian(c.graph, c.input.data);
  const Jacobian<interval64> E = jacobian_enclosure_at(c.graph, c.input.data);
  ASSERT_EQ(J.data.size(), E.data.size());
  for (std::size_t k = 0; k < J.data.size(); ++k) {
    ASSERT_TRUE(std::isfinite(J.data[k]));
    EXPECT_LE(E.data[k].lower(), J.data[k] + 1e-12);
    EXPECT_GE(E.data[k].upper(), J.data[k] - 1e-12);
  }
  // interval64 over a small box around the input: finite, and around the Jacobian at its centre.
  std::vector<double> lo = c.input.data, hi = c.input.data;
  for (std::size_t k = 0; k < lo.size(); ++k) lo[k] -= 1e-4, hi[k] += 1e-4;
  const Jacobian<interval64> B = jacobian_enclosure(c.graph, lo, hi);
  for (std::size_t k = 0; k < J.data.size(); ++k) {
    ASSERT_TRUE(std::isfinite(B.data[k].lower()) && std::isfinite(B.data[k].upper()));
    EXPECT_LE(B.data[k].lower(), J.data[k] + 1e-12);
    EXPECT_GE(B.data[k].upper(), J.data[k] - 1e-12);
  }
  // Forward mode (J has fewer rows than columns: it is built by the reverse sweep) along a direction.
  std::vector<double> v(J.cols);
  for (std::size_t j = 0; j < J.cols; ++j) v[j] = std::sin(double(j) + 1);
  const std::vector<double> jv = jvp(c.graph, c.input.data, v);
  ASSERT_EQ(jv.size(), J.rows);
  for (std::size_t i = 0; i < J.rows; ++i) {
    double row = 0;
    for (std::size_t j = 0; j < J.cols; ++j) row += J(i, j) * v[j];
    EXPECT_NEAR(jv[i], row, 1e-12);
  }
  const WholeLipschitz l = local_lipschitz(c.graph, c.input.data);
  EXPECT_TRUE(std::isfinite(l.certified));
  EXPECT_GT(l.estimate, 0.0);
  EXPECT_GE(l.certified, l.estimate * (1 - 1e-9));
  // The model's output is [1, 6, 5] (every token's logits): the attack runs on it flattened, a label of the
  // last token's row.
  AttackSet set{Norm::linf, c.input.data, 0.05, {}, {}, {}};
  AttackOptions o;
  o.steps = 10;
  const AttackResult a = pgd_attack(c.graph, set, 27, o);
  EXPECT_TRUE(std::isfinite(a.margin));
  for (double v : a.point) EXPECT_TRUE(std::isfinite(v));
}

INSTANTIATE_TEST_SUITE_P(Torch, InfMask, ::testing::Values("causal_where_inf", "causal_add_inf"));

TEST(InfMaskRefusal, OutsideAMaskPlusInfAndWholeRows) {
  expect_refused("inf_outside_mask.onnx", "node 'relu' (Relu): reads 'y', which holds -inf");
  expect_refused("pos_inf_mask.onnx", "tensor 'm' holds NaN or +Inf (refused)");
  expect_refused("inf_masked_row.onnx", "node 'softmax' (Softmax): every entry of a softmax row is masked");
}

// Hand-built graphs: scores [2, 3] (the input), a constant mask, the node under test.
Graph masked(Op reader, std::vector<double> mask) {
  Graph g;
  g.source = "hand.onnx";
  g.values = {{"x", {2, 3}, false, {}},
              {"m", {2, 3}, true, std::move(mask)},
              {"s", {2, 3}, false, {}},
              {"y", {2, 3}, false, {}}};
  g.inputs = {0};
  g.nodes.push_back({Op::add, "add", "Add", {0, 1}, 2, {}});
  Node r{reader, "r", "R", {2}, 3, {}};
  if (reader == Op::softmax) r.attributes = SoftmaxAttrs{1, 2};
  if (reader == Op::mul) r.inputs = {2, 2};
  g.nodes.push_back(r);
  g.outputs = {3};
  return g;
}

TEST(InfMaskRefusal, GraphValidateHoldsMinusInfToMasks) {
  const std::vector<double> causal{0, -inf, -inf, 0, 0, -inf};
  EXPECT_NO_THROW(masked(Op::softmax, causal).validate());
  const auto refused = [](const Graph& g, const std::string& part) {
    try {
      g.validate();
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  refused(masked(Op::mul, causal), "node 'r' (R): reads 's', which holds -inf");
  refused(masked(Op::identity, causal), "its output 'y' holds -inf and is a graph output");
  refused(masked(Op::softmax, {0, -inf, -inf, -inf, -inf, -inf}), "every entry of a softmax row");
  refused(masked(Op::softmax, {0, inf, 0, 0, 0, 0}), "'m' holds NaN or +Inf");
  refused(masked(Op::softmax, {0, std::nan(""), 0, 0, 0, 0}), "'m' holds NaN or +Inf");
  // A softmax over the other axis: the columns hold a finite entry each except the last.
  Graph cols = masked(Op::softmax, causal);
  cols.nodes[1].attributes = SoftmaxAttrs{0, 1};
  refused(cols, "every entry of a softmax row");
  // The double forward of the accepted graph: masked weights exactly 0, no NaN.
  const auto y = evaluate<double>(masked(Op::softmax, causal), {Tensor<double>{{2, 3}, {1, 2, 3, 4, 5, 6}}});
  EXPECT_EQ(y[0].data[1], 0.0);
  EXPECT_EQ(y[0].data[2], 0.0);
  EXPECT_EQ(y[0].data[0], 1.0);
  EXPECT_EQ(y[0].data[5], 0.0);
  EXPECT_NEAR(y[0].data[3], 1 / (1 + std::exp(1.0)), 1e-15);
}

}  // namespace
