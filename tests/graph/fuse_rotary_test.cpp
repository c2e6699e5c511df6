// The fusion pass on rotary attention (docs/graph.md#fusion): hand-built graphs in the form of Hugging Face's
// LLaMA (q·cos + rotate_half(q)·sin on [n, H, d_h] before the heads are transposed; grouped-query keys and
// values repeated by Expand after the rotation, as its repeat_kv does). What is recorded is
// checked against a second computation: operators' attend with Rotary{θ} (its own tables, its own rotation)
// at the same tokens gives the graph's output, and operators::rotary_of recovers θ from the recorded tables.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>

#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/fuse.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/graph_rotary.hpp>

namespace {

using namespace regatta;
using namespace regatta::graph;

constexpr int n = 5, d = 8, H = 2, dh = 4;

std::vector<double> ramp(int count, double step) {
  std::vector<double> v;
  for (int k = 0; k < count; ++k) v.push_back(std::cos(step * (k + 1)) / 2);
  return v;
}

Matrix<double> rows(const std::vector<double>& data, int r, int c) {
  Matrix<double> m(r, c);
  for (int i = 0; i < r; ++i)
    for (int j = 0; j < c; ++j) m(i, j) = data[static_cast<std::size_t>(i * c + j)];
  return m;
}

enum class Variant { hugging_face, swapped_signs, float32_tables, values_rotated, grouped };

struct Built {
  Graph graph;
  std::vector<double> wq, bq, wk, wv, wo;
};

/// One causal self-attention layer of H heads, rotary on Q and K with base θ (the variant: the HF form, the
/// sign of rotate_half on the other half, tables rounded to float32, the values rotated too, or grouped-query
/// attention: one key/value head rotated, then repeated over the H query heads by Expand as HF's repeat_kv).
Built layer(double theta, Variant variant) {
  const bool grouped = variant == Variant::grouped;
  const int kv = grouped ? 1 : H;
  Built r{{},
          ramp(d * H * dh, 0.7),
          ramp(H * dh, 0.4),
          ramp(d * kv * dh, 1.3),
          ramp(d * kv * dh, 2.1),
          ramp(H * dh * d, 0.9)};
  Graph& g = r.graph;
  const auto value = [&](Shape s, bool constant = false, std::vector<double> data = {}) {
    g.values.push_back(Value{"v" + std::to_string(g.values.size()), std::move(s), constant, std::move(data)});
    return static_cast<int>(g.values.size()) - 1;
  };
  const auto node = [&](Op op, std::vector<int> in, Shape out, Attributes a = {}) {
    const int id = value(std::move(out));
    g.nodes.push_back(
        Node{op, "n" + std::to_string(g.nodes.size()), "test", std::move(in), id, std::move(a)});
    return id;
  };
  std::vector<double> c, s;
  for (int i = 0; i < n; ++i)
    for (int copy = 0; copy < 2; ++copy)
      for (int a = 0; a < dh / 2; ++a) {
        const double phi = i * std::pow(theta, -2.0 * a / dh);
        c.push_back(variant == Variant::float32_tables ? double(float(std::cos(phi))) : std::cos(phi));
        s.push_back(variant == Variant::float32_tables ? double(float(std::sin(phi))) : std::sin(phi));
      }
  const int cos = value({n, 1, dh}, true, c), sin = value({n, 1, dh}, true, s);
  const int x = value({n, d});
  g.inputs = {x};
  const auto rotate = [&](int z) {
    const Shape heads = g.values[static_cast<std::size_t>(z)].shape, halves{heads[0], heads[1], dh / 2};
    const int second = node(Op::slice, {z}, halves, SliceAttrs{{0, 0, dh / 2}, {1, 1, 1}});
    const int first = node(Op::slice, {z}, halves, SliceAttrs{{0, 0, 0}, {1, 1, 1}});
    const int turned =
        variant == Variant::swapped_signs
            ? node(Op::concat, {second, node(Op::neg, {first}, halves)}, heads, ConcatAttrs{2})
            : node(Op::concat, {node(Op::neg, {second}, halves), first}, heads, ConcatAttrs{2});
    return node(Op::add, {node(Op::mul, {z, cos}, heads), node(Op::mul, {turned, sin}, heads)}, heads);
  };
  const auto projected = [&](const std::vector<double>& w, const std::vector<double>* b, bool rotated) {
    int p = node(Op::matmul, {x, value({d, H * dh}, true, w)}, {n, H * dh});
    if (b) p = node(Op::add, {p, value({H * dh}, true, *b)}, {n, H * dh});
    const int z = node(Op::reshape, {p}, {n, H, dh});
    return rotated ? rotate(z) : z;
  };
  const int q = node(Op::transpose, {projected(r.wq, &r.bq, true)}, {H, n, dh}, TransposeAttrs{{1, 0, 2}});
  // [n, kv, d_h] → [kv, n, d_h] → [kv, 1, n, d_h] → Expand [kv, H/kv, n, d_h] → [H, n, d_h].
  const auto repeated = [&](const std::vector<double>& w, bool rotated) {
    int z = node(Op::matmul, {x, value({d, kv * dh}, true, w)}, {n, kv * dh});
    z = node(Op::reshape, {z}, {n, kv, dh});
    if (rotated) z = rotate(z);
    z = node(Op::reshape, {node(Op::transpose, {z}, {kv, n, dh}, TransposeAttrs{{1, 0, 2}})}, {kv, 1, n, dh});
    return node(Op::reshape, {node(Op::expand, {z}, {kv, H / kv, n, dh})}, {H, n, dh});
  };
  const int k =
      grouped ? node(Op::transpose, {repeated(r.wk, true)}, {H, dh, n}, TransposeAttrs{{0, 2, 1}})
              : node(Op::transpose, {projected(r.wk, nullptr, true)}, {H, dh, n}, TransposeAttrs{{1, 2, 0}});
  const int v = grouped ? repeated(r.wv, false)
                        : node(Op::transpose, {projected(r.wv, nullptr, variant == Variant::values_rotated)},
                               {H, n, dh}, TransposeAttrs{{1, 0, 2}});
  std::vector<double> mask(n * n, 0.0);
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) mask[static_cast<std::size_t>(i * n + j)] = -1e9;
  int sc = node(Op::matmul, {q, k}, {H, n, n});
  sc = node(Op::div, {sc, value({}, true, {2.0})}, {H, n, n});  // √d_h = 2 exactly
  sc = node(Op::add, {sc, value({n, n}, true, mask)}, {H, n, n});
  const int p = node(Op::softmax, {sc}, {H, n, n}, SoftmaxAttrs{2, 3});
  int o = node(Op::matmul, {p, v}, {H, n, dh});
  o = node(Op::reshape, {node(Op::transpose, {o}, {n, H, dh}, TransposeAttrs{{1, 0, 2}})}, {n, H * dh});
  g.outputs = {node(Op::matmul, {o, value({H * dh, d}, true, r.wo)}, {n, d})};
  g.source = "hand-built";
  g.validate();
  fuse(g);
  return r;
}

/// Head h's columns of a stacked d x (heads·d_h) matrix.
Matrix<double> head(const std::vector<double>& w, int h, int heads = H) {
  return rows(w, d, heads * dh).middleCols(h * dh, dh);
}

TEST(FusionRotary, RecordsQueriesAndKeysRotatedWithTheGraphsTables) {
  const Built b = layer(10000, Variant::hugging_face);
  ASSERT_EQ(b.graph.attention.size(), 1u)
      << (b.graph.fusion.not_attention.empty() ? "" : b.graph.fusion.not_attention[0]);
  const AttentionPattern& p = b.graph.attention[0];
  ASSERT_TRUE(p.q_rotary && p.k_rotary);
  EXPECT_EQ(p.mask, AttentionMask::causal);
  EXPECT_EQ(p.scale, 0.5);
  // The tables as applied: row i, coordinate c = the graph's constant [i, 0, c].
  const auto& table = b.graph.values[static_cast<std::size_t>(p.q_rotary->cos)].data;
  EXPECT_EQ(p.q_rotary->cos_table, table);
  EXPECT_EQ(p.k_rotary->cos_table, table);
  EXPECT_EQ(p.q_rotary->sin_table, b.graph.values[static_cast<std::size_t>(p.q_rotary->sin)].data);
  for (int h = 0; h < H; ++h) {
    EXPECT_EQ(rows(p.wq[h], d, dh), head(b.wq, h));
    EXPECT_EQ(rows(p.wk[h], d, dh), head(b.wk, h));
  }
  std::string why;
  const auto rotary = operators::rotary_of(p, &why);
  ASSERT_TRUE(rotary) << why;
  EXPECT_EQ(rotary->theta, 10000);
}

TEST(FusionRotary, OperatorsRotaryAttentionGivesTheGraphsOutput) {
  for (const auto& [theta, variant] :
       {std::pair{10000.0, Variant::hugging_face}, std::pair{500000.0, Variant::hugging_face},
        std::pair{1234.5, Variant::hugging_face}, std::pair{100.0, Variant::grouped}}) {
    const bool grouped = variant == Variant::grouped;
    const Built b = layer(theta, variant);
    ASSERT_EQ(b.graph.attention.size(), 1u)
        << (b.graph.fusion.not_attention.empty() ? "" : b.graph.fusion.not_attention[0]);
    const AttentionPattern& p = b.graph.attention[0];
    std::string why;
    const auto rotary = operators::rotary_of(p, &why);
    ASSERT_TRUE(rotary) << why;
    EXPECT_EQ(rotary->theta, theta);
    operators::AttentionLayer l;
    l.d = d;
    l.heads = H;
    l.head_dim = l.value_dim = dh;
    for (int h = 0; h < H; ++h) {
      l.WQ.push_back(head(b.wq, h));
      l.bQ.push_back(Eigen::Map<const Vector<double>>(b.bq.data() + h * dh, dh));
      // Grouped: every query head shares the one key/value head; the pattern repeats it per head.
      l.WK.push_back(grouped ? head(b.wk, 0, 1) : head(b.wk, h));
      l.WV.push_back(grouped ? head(b.wv, 0, 1) : head(b.wv, h));
      EXPECT_EQ(rows(p.wk[h], d, dh), l.WK.back());
      EXPECT_EQ(rows(p.wv[h], d, dh), l.WV.back());
    }
    l.WO = rows(b.wo, H * dh, d);
    l.rotary = rotary;
    l.validate();
    const Tensor<double> x{{n, d}, ramp(n * d, 0.31)};
    const auto out = evaluate(b.graph, std::vector<Tensor<double>>{x})[0];
    operators::AttentionOptions options;
    options.causal = true;
    const Matrix<double> Y = operators::attend(l, rows(x.data, n, d), options);
    EXPECT_LE((Y - rows(out.data, n, d)).cwiseAbs().maxCoeff(), 1e-14) << "theta " << theta;
    // Without the rotation the output differs: the test can see a dropped rotary embedding.
    l.rotary.reset();
    EXPECT_GT(
        (operators::attend(l, rows(x.data, n, d), options) - rows(out.data, n, d)).cwiseAbs().maxCoeff(),
        1e-3);
  }
}

TEST(FusionRotary, AnotherSignConventionIsNotAttention) {
  const Built b = layer(10000, Variant::swapped_signs);
  EXPECT_TRUE(b.graph.attention.empty());
  ASSERT_EQ(b.graph.fusion.not_attention.size(), 1u);
  EXPECT_NE(b.graph.fusion.not_attention[0].find("rotary embedding is not q*cos + rotate_half(q)*sin"),
            std::string::npos)
      << b.graph.fusion.not_attention[0];
}

TEST(FusionRotary, RotatedValuesAreNotAttention) {
  const Built b = layer(10000, Variant::values_rotated);
  EXPECT_TRUE(b.graph.attention.empty());
  ASSERT_EQ(b.graph.fusion.not_attention.size(), 1u);
  EXPECT_NE(b.graph.fusion.not_attention[0].find("the values are rotated"), std::string::npos)
      << b.graph.fusion.not_attention[0];
}

TEST(FusionRotary, TablesNoThetaRegeneratesAreRecordedButGiveNoRotary) {
  const Built b = layer(10000, Variant::float32_tables);
  ASSERT_EQ(b.graph.attention.size(), 1u);
  std::string why;
  EXPECT_FALSE(operators::rotary_of(b.graph.attention[0], &why));
  EXPECT_NE(why.find("no rotary θ regenerates"), std::string::npos) << why;
}

}  // namespace
