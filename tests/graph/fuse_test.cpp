// The fusion pass (docs/graph.md#fusion) on the committed ONNX models: every attention layer found with its
// heads and dimensions, and the independent check that matters: the operators' attention forward of a layer
// rebuilt from the recorded weights, at the tokens the graph evaluation gives at the layer's input, equals
// the graph's own value at the layer's output. LayerNorm/GELU rewrites are counted here; that they keep the
// logits equal to torch's is onnx_models_test's check (it imports through the same pass).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include <regatta/core/error.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/fuse.hpp>
#include <regatta/graph/onnx_import.hpp>
#include <regatta/operators/attention.hpp>

namespace {

using namespace regatta;
using namespace regatta::graph;

const std::string dir = std::string(REGATTA_TEST_DATA_DIR) + "/onnx/";

struct Expected {
  std::string model;
  int layers, tokens, heads, head_dim;
  AttentionMask mask;
  int layer_norms, gelus;
  bool projection;
};

const Expected models[] = {
    {"encoder_postnorm_gelu", 2, 5, 4, 4, AttentionMask::none, 0, 2, true},
    {"encoder_prenorm_relu", 2, 5, 4, 4, AttentionMask::none, 4, 0, true},
    {"vit_conv_mha", 2, 4, 4, 4, AttentionMask::none, 4, 2, true},
    {"gpt_causal", 2, 6, 4, 4, AttentionMask::causal, 5, 2, true},
    {"vit_vnncomp_like", 2, 5, 4, 4, AttentionMask::none, 0, 0, true},
};

Matrix<double> rows(const std::vector<double>& data, int r, int c) {
  Matrix<double> m(r, c);
  for (int i = 0; i < r; ++i)
    for (int j = 0; j < c; ++j) m(i, j) = data[static_cast<std::size_t>(i * c + j)];
  return m;
}

/// The layer in operators' convention: the scale on Q·Kᵀ folded into W_Q, b_Q where it is not 1/√d_h.
operators::AttentionLayer rebuild(const AttentionPattern& p) {
  operators::AttentionLayer l;
  l.d = p.width;
  l.heads = p.heads;
  l.head_dim = p.head_dim;
  l.value_dim = p.value_dim;
  const double fold = p.scale * std::sqrt(double(p.head_dim));
  for (int h = 0; h < p.heads; ++h) {
    l.WQ.push_back(rows(p.wq[h], p.width, p.head_dim) * fold);
    l.WK.push_back(rows(p.wk[h], p.width, p.head_dim));
    l.WV.push_back(rows(p.wv[h], p.width, p.value_dim));
    if (!p.bq.empty()) l.bQ.push_back(Eigen::Map<const Vector<double>>(p.bq[h].data(), p.head_dim) * fold);
    if (!p.bk.empty()) l.bK.push_back(Eigen::Map<const Vector<double>>(p.bk[h].data(), p.head_dim));
    if (!p.bv.empty()) l.bV.push_back(Eigen::Map<const Vector<double>>(p.bv[h].data(), p.value_dim));
  }
  l.WO = rows(p.wo, p.heads * p.value_dim, p.out_width);
  if (!p.bo.empty()) l.bO = Eigen::Map<const Vector<double>>(p.bo.data(), p.out_width);
  return l;
}

std::vector<Tensor<double>> values_at_input(const Graph& g, const std::string& model) {
  const io::Array x = io::read_npy(dir + model + ".input.npy");
  return evaluate_all(
      g, std::vector<Tensor<double>>{Tensor<double>{Shape(x.shape.begin(), x.shape.end()), x.data}});
}

double worst_difference(const Graph& g, const std::vector<Tensor<double>>& v, const AttentionPattern& p,
                        const operators::AttentionLayer& layer) {
  const Matrix<double> X = rows(v[static_cast<std::size_t>(p.input)].data, p.tokens, p.width);
  operators::AttentionOptions options;
  options.causal = p.mask == AttentionMask::causal;
  const Matrix<double> Y = operators::attend(layer, X, options);
  const Matrix<double> G = rows(v[static_cast<std::size_t>(p.output)].data, p.tokens, p.out_width);
  EXPECT_EQ(element_count(g.values[static_cast<std::size_t>(p.output)].shape), Y.size());
  return (Y - G).cwiseAbs().maxCoeff();
}

class Fusion : public ::testing::TestWithParam<Expected> {};

TEST_P(Fusion, FindsEveryAttentionLayerWithItsDimensions) {
  const Expected& e = GetParam();
  const Graph g = import_onnx(dir + e.model + ".onnx");
  EXPECT_EQ(g.fusion.layer_norms.size(), std::size_t(e.layer_norms));
  EXPECT_EQ(g.fusion.gelus.size(), std::size_t(e.gelus));
  EXPECT_TRUE(g.fusion.not_attention.empty()) << g.fusion.not_attention.front();
  ASSERT_EQ(g.attention.size(), std::size_t(e.layers));
  for (const AttentionPattern& p : g.attention) {
    EXPECT_TRUE(p.self()) << p.name;
    EXPECT_EQ(p.tokens, e.tokens);
    EXPECT_EQ(p.context_tokens, e.tokens);
    EXPECT_EQ(p.width, 16);
    EXPECT_EQ(p.out_width, 16);
    EXPECT_EQ(p.heads, e.heads);
    EXPECT_EQ(p.head_dim, e.head_dim);
    EXPECT_EQ(p.value_dim, e.head_dim);
    EXPECT_EQ(p.mask, e.mask);
    if (e.mask == AttentionMask::causal) {
      EXPECT_EQ(p.mask_fill, -1e9);  // torch.where(mask, s, -1e9)
    }
    EXPECT_EQ(p.output_projection, e.projection);
    EXPECT_DOUBLE_EQ(p.scale, 0.5);  // 1/√4
    EXPECT_EQ(p.wq.size(), std::size_t(e.heads));
    EXPECT_EQ(p.bq.size(), std::size_t(e.heads));  // every model's projections have biases
    EXPECT_EQ(p.bo.size(), 16u);
    EXPECT_FALSE(p.nodes.empty());
  }
  // The names are the softmax nodes' names, distinct.
  EXPECT_NE(g.attention[0].name, g.attention[1].name);
}

TEST_P(Fusion, OperatorsForwardOfTheRebuiltLayerEqualsTheGraphValue) {
  const Expected& e = GetParam();
  const Graph g = import_onnx(dir + e.model + ".onnx");
  const auto v = values_at_input(g, e.model);
  for (const AttentionPattern& p : g.attention) {
    const operators::AttentionLayer layer = rebuild(p);
    const double worst = worst_difference(g, v, p, layer);
    EXPECT_LE(worst, 1e-12) << e.model << " " << p.name;
    std::cout << e.model << " " << p.name << ": |attend - graph| = " << worst << "\n";
    // The comparison can fail: one weight of one head changed by 1e-3 moves the output.
    operators::AttentionLayer wrong = layer;
    wrong.WV[static_cast<std::size_t>(p.heads - 1)](0, 0) += 1e-3;
    EXPECT_GT(worst_difference(g, v, p, wrong), 1e-7) << e.model << " " << p.name;
  }
}

INSTANTIATE_TEST_SUITE_P(CommittedModels, Fusion, ::testing::ValuesIn(models),
                         [](const auto& info) { return info.param.model; });

TEST(Fusion, TheRewrittenNodesAreOfTheFusedKinds) {
  const Graph g = import_onnx(dir + "gpt_causal.onnx");
  int layer_norms = 0, gelus = 0, erfs_or_tanhs = 0, pows = 0;
  for (const Node& n : g.nodes) {
    layer_norms += n.op == Op::layer_norm;
    gelus += n.op == Op::gelu && std::get<GeluAttrs>(n.attributes).tanh_approximation;
    erfs_or_tanhs += n.op == Op::erf || n.op == Op::tanh;
    pows += n.op == Op::pow && !g.values[static_cast<std::size_t>(n.inputs[0])].constant;
  }
  EXPECT_EQ(layer_norms, 5);
  EXPECT_EQ(gelus, 2);
  EXPECT_EQ(erfs_or_tanhs, 0);
  EXPECT_EQ(pows, 0);  // the only Pow nodes of runtime values were the LayerNorms' squares
  g.validate();
}

TEST(Fusion, FindAttentionAgreesWithWhatTheImporterRecorded) {
  const Graph g = import_onnx(dir + "vit_conv_mha.onnx");
  const auto again = find_attention(g);
  ASSERT_EQ(again.size(), g.attention.size());
  for (std::size_t k = 0; k < again.size(); ++k) {
    EXPECT_EQ(again[k].name, g.attention[k].name);
    EXPECT_EQ(again[k].wq, g.attention[k].wq);
    EXPECT_EQ(again[k].wo, g.attention[k].wo);
  }
}

TEST(Fusion, ModelsWithoutAttentionRecordNone) {
  const Graph g = import_onnx(dir + "mlp_tiny.onnx");
  EXPECT_TRUE(g.attention.empty());
  EXPECT_TRUE(g.fusion.layer_norms.empty());
}

// Hand-built graphs: each rewrite keeps the double forward (to rounding), and what must not fuse does not.
struct Builder {
  Graph g;
  int add(Value v) {
    g.values.push_back(std::move(v));
    return static_cast<int>(g.values.size()) - 1;
  }
  int input(Shape s) {
    const int id = add(Value{"x", std::move(s), false, {}});
    g.inputs.push_back(id);
    return id;
  }
  int constant(std::vector<double> data, Shape s = {1}) {
    return add(Value{"c" + std::to_string(g.values.size()), std::move(s), true, std::move(data)});
  }
  int node_shaped(Op op, std::vector<int> in, Shape out, Attributes a = {}) {
    const int id = add(Value{"v" + std::to_string(g.values.size()), std::move(out), false, {}});
    g.nodes.push_back(
        Node{op, "n" + std::to_string(g.nodes.size()), "test", std::move(in), id, std::move(a)});
    return id;
  }
  int node(Op op, std::vector<int> in, Attributes a = {}) {
    Shape out = g.values[static_cast<std::size_t>(in[0])].shape;
    if (op == Op::reduce_mean) out.back() = 1;
    if ((op == Op::mul || op == Op::add || op == Op::div) &&
        g.values[static_cast<std::size_t>(in[0])].constant)
      out = g.values[static_cast<std::size_t>(in[1])].shape;
    const int id = add(Value{"v" + std::to_string(g.values.size()), out, false, {}});
    g.nodes.push_back(
        Node{op, "n" + std::to_string(g.nodes.size()), "test", std::move(in), id, std::move(a)});
    return id;
  }
  Graph done(int output) {
    g.outputs = {output};
    g.source = "hand-built";
    g.validate();
    return g;
  }
};

const ReduceMeanAttrs last_axis{{2}, true};

double forward_difference(const Graph& before, const Graph& after) {
  Tensor<double> x{before.values[static_cast<std::size_t>(before.inputs[0])].shape, {}};
  for (std::int64_t k = 0; k < element_count(x.shape); ++k) x.data.push_back(std::sin(1.7 * double(k)) * 2);
  const auto a = evaluate(before, std::vector<Tensor<double>>{x})[0];
  const auto b = evaluate(after, std::vector<Tensor<double>>{x})[0];
  double worst = 0;
  for (std::size_t k = 0; k < a.data.size(); ++k) worst = std::max(worst, std::fabs(a.data[k] - b.data[k]));
  return worst;
}

int count(const Graph& g, Op op) {
  return static_cast<int>(
      std::count_if(g.nodes.begin(), g.nodes.end(), [op](const Node& n) { return n.op == op; }));
}

TEST(FusionRewrites, LayerNormWithoutGammaGetsAScaleOfOnes) {
  Builder b;
  const int x = b.input({1, 3, 4});
  const int s = b.node(Op::sub, {x, b.node(Op::reduce_mean, {x}, last_axis)});
  const int var = b.node(Op::reduce_mean, {b.node(Op::mul, {s, s})}, last_axis);
  const int y = b.node(Op::div, {s, b.node(Op::sqrt, {b.node(Op::add, {b.constant({1e-5}), var})})});
  const Graph before = b.done(y);
  Graph after = before;
  fuse(after);
  EXPECT_EQ(after.fusion.layer_norms.size(), 1u);
  ASSERT_EQ(after.nodes.size(), 1u);
  EXPECT_EQ(after.nodes[0].op, Op::layer_norm);
  EXPECT_EQ(std::get<LayerNormAttrs>(after.nodes[0].attributes).epsilon, 1e-5);
  EXPECT_LE(forward_difference(before, after), 1e-15);
}

TEST(FusionRewrites, AnIntermediateReadElsewhereKeepsTheLayerNormApart) {
  Builder b;
  const int x = b.input({1, 3, 4});
  const int s = b.node(Op::sub, {x, b.node(Op::reduce_mean, {x}, last_axis)});
  const int var = b.node(Op::reduce_mean, {b.node(Op::mul, {s, s})}, last_axis);
  const int y = b.node(Op::div, {s, b.node(Op::sqrt, {b.node(Op::add, {var, b.constant({1e-5})})})});
  Graph g = b.done(b.node(Op::add, {y, s}));  // x − mean read after the LayerNorm too
  fuse(g);
  EXPECT_TRUE(g.fusion.layer_norms.empty());
  EXPECT_EQ(count(g, Op::layer_norm), 0);
}

TEST(FusionRewrites, RmsNormIsRecognisedNotRewritten) {
  Builder b;
  const int x = b.input({1, 3, 4});
  const int ms = b.node(Op::reduce_mean, {b.node(Op::pow, {x, b.constant({2})})}, last_axis);
  const int inv = b.node(Op::reciprocal, {b.node(Op::sqrt, {b.node(Op::add, {ms, b.constant({1e-6})})})});
  const int y = b.node(Op::mul, {b.node(Op::mul, {x, inv}), b.constant({1, 2, 3, 4}, {4})});
  Graph g = b.done(y);
  const std::size_t nodes = g.nodes.size();
  fuse(g);
  EXPECT_EQ(g.fusion.rms_norms.size(), 1u);
  EXPECT_TRUE(g.fusion.layer_norms.empty());
  EXPECT_EQ(g.nodes.size(), nodes);
}

// x · (mean(x²) + ε)^(−1/2) as torch exports its two spellings: rsqrt as Div(1, Sqrt) and x ** -0.5 as Pow;
// a numerator other than 1 or another exponent is a different function and is not listed.
TEST(FusionRewrites, RmsNormWrittenAsRsqrtOrPowerIsRecognised) {
  for (int form = 0; form < 4; ++form) {
    Builder b;
    const int x = b.input({1, 3, 4});
    const int ms = b.node(Op::reduce_mean, {b.node(Op::mul, {x, x})}, last_axis);
    const int sum = b.node(Op::add, {ms, b.constant({1e-6})});
    int inv = -1;
    if (form == 0) inv = b.node(Op::div, {b.constant({1}), b.node(Op::sqrt, {sum})});
    if (form == 1) inv = b.node(Op::pow, {sum, b.constant({-0.5})});
    if (form == 2) inv = b.node(Op::div, {b.constant({2}), b.node(Op::sqrt, {sum})});
    if (form == 3) inv = b.node(Op::pow, {sum, b.constant({-0.25})});
    Graph g = b.done(b.node(Op::mul, {b.node(Op::mul, {x, inv}), b.constant({1, 2, 3, 4}, {4})}));
    fuse(g);
    EXPECT_EQ(g.fusion.rms_norms.size(), form < 2 ? 1u : 0u) << "form " << form;
  }
}

// The centred form through rsqrt is a LayerNorm: rewritten, with the same forward.
TEST(FusionRewrites, LayerNormThroughRsqrtIsRewritten) {
  Builder b;
  const int x = b.input({1, 3, 4});
  const int s = b.node(Op::sub, {x, b.node(Op::reduce_mean, {x}, last_axis)});
  const int var = b.node(Op::reduce_mean, {b.node(Op::mul, {s, s})}, last_axis);
  const int add = b.node(Op::add, {var, b.constant({1e-5})});
  const int inv = b.node(Op::div, {b.constant({1}), b.node(Op::sqrt, {add})});
  const Graph before = b.done(b.node(Op::add, {b.node(Op::mul, {s, inv}), b.constant({0.5, -1, 2, 0}, {4})}));
  Graph after = before;
  fuse(after);
  EXPECT_EQ(after.fusion.layer_norms.size(), 1u);
  EXPECT_EQ(count(after, Op::layer_norm), 1);
  EXPECT_LE(forward_difference(before, after), 1e-15);
}

TEST(FusionRewrites, ErfGeluInAnotherAssociation) {
  Builder b;
  const int x = b.input({2, 5});
  const int p = b.node(
      Op::add,
      {b.node(Op::erf, {b.node(Op::mul, {b.constant({std::numbers::sqrt2 / 2}), x})}), b.constant({1})});
  const Graph before = b.done(b.node(Op::mul, {b.node(Op::mul, {x, b.constant({0.5})}), p}));
  Graph after = before;
  fuse(after);
  ASSERT_EQ(after.nodes.size(), 1u);
  EXPECT_EQ(after.nodes[0].op, Op::gelu);
  EXPECT_FALSE(std::get<GeluAttrs>(after.nodes[0].attributes).tanh_approximation);
  EXPECT_LE(forward_difference(before, after), 1e-15);
}

TEST(FusionRewrites, Float32ConstantsAreNotFused) {
  Builder b;
  const int x = b.input({2, 5});
  const int e = b.node(Op::erf, {b.node(Op::div, {x, b.constant({double(float(std::numbers::sqrt2))})})});
  const int p = b.node(Op::add, {e, b.constant({1})});
  Graph g = b.done(b.node(Op::mul, {b.node(Op::mul, {x, p}), b.constant({0.5})}));
  fuse(g);
  EXPECT_TRUE(g.fusion.gelus.empty());
  EXPECT_EQ(count(g, Op::erf), 1);
}

std::vector<double> ramp(int count, double step) {
  std::vector<double> v;
  for (int k = 0; k < count; ++k) v.push_back(std::cos(step * (k + 1)) / 2);
  return v;
}

// Cross-attention of one head on 2-D tokens, K transposed after its projection, a factor on the scores and
// (optionally) a constant additive mask: recorded with its context, and (unmasked) equal to attend_cross.
Graph cross_attention(bool masked) {
  const int n = 3, m = 4, d = 5, k = 2, v = 3;
  Builder b;
  const int x = b.input({n, d}), y = b.input({m, d});
  const int q = b.node_shaped(Op::matmul, {x, b.constant(ramp(d * k, 0.7), {d, k})}, {n, k});
  const int key = b.node_shaped(Op::matmul, {y, b.constant(ramp(d * k, 1.3), {d, k})}, {m, k});
  const int kt = b.node_shaped(Op::transpose, {key}, {k, m}, TransposeAttrs{{1, 0}});
  int s = b.node_shaped(Op::mul, {b.node_shaped(Op::matmul, {q, kt}, {n, m}), b.constant({0.375})}, {n, m});
  if (masked) s = b.node_shaped(Op::add, {s, b.constant({0, -1, 0, -2}, {1, m})}, {n, m});
  const int p = b.node_shaped(Op::softmax, {s}, {n, m}, SoftmaxAttrs{1, 2});
  const int val = b.node_shaped(Op::matmul, {y, b.constant(ramp(d * v, 2.1), {d, v})}, {m, v});
  const int o = b.node_shaped(Op::matmul, {p, val}, {n, v});
  const int out = b.node_shaped(Op::matmul, {o, b.constant(ramp(v * d, 0.9), {v, d})}, {n, d});
  Graph g = b.done(out);
  fuse(g);
  return g;
}

TEST(FusionAttention, CrossAttentionOnTwoDimensionalTokens) {
  const Graph g = cross_attention(false);
  ASSERT_EQ(g.attention.size(), 1u) << (g.fusion.not_attention.empty() ? "" : g.fusion.not_attention[0]);
  const AttentionPattern& p = g.attention[0];
  EXPECT_FALSE(p.self());
  EXPECT_EQ(p.input, g.inputs[0]);
  EXPECT_EQ(p.context, g.inputs[1]);
  EXPECT_EQ(p.tokens, 3);
  EXPECT_EQ(p.context_tokens, 4);
  EXPECT_EQ(p.heads, 1);
  EXPECT_EQ(p.head_dim, 2);
  EXPECT_EQ(p.value_dim, 3);
  EXPECT_EQ(p.scale, 0.375);
  EXPECT_TRUE(p.output_projection);
  EXPECT_TRUE(p.bq.empty());
  std::vector<Tensor<double>> in{Tensor<double>{{3, 5}, ramp(15, 0.31)},
                                 Tensor<double>{{4, 5}, ramp(20, 0.57)}};
  const auto v = evaluate_all(g, in);
  const Matrix<double> Y =
      operators::attend_cross(rebuild(p), rows(in[0].data, 3, 5), rows(in[1].data, 4, 5));
  EXPECT_LE((Y - rows(v[static_cast<std::size_t>(p.output)].data, 3, 5)).cwiseAbs().maxCoeff(), 1e-15);
}

TEST(FusionAttention, AConstantAdditiveMaskIsRecordedAsSuch) {
  const Graph g = cross_attention(true);
  ASSERT_EQ(g.attention.size(), 1u);
  const AttentionPattern& p = g.attention[0];
  EXPECT_EQ(p.mask, AttentionMask::additive);
  ASSERT_EQ(p.mask_values.size(), 12u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p.mask_values[static_cast<std::size_t>(i * 4 + 3)], -2.0);
}

}  // namespace
