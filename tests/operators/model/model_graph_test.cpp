// The safetensors layouts as graphs (operators/include/regatta/operators/model_graph.hpp): the graph of each
// committed model (timm ViT, GPT-2, BERT, LLaMA) and of variants built from them (mean pooling, post-norm,
// ReLU, no class token, gated MLP) against the Model's own forward pass (two independent evaluations: the
// graph walk of graph/src/evaluate.cpp and the operators' matrix code of forward.cpp), the attention layers
// the fusion pass finds against the Model's weights, and the digits ViT against its ONNX export.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/core/scalar.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/operators/graph_rotary.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_graph.hpp>
#ifdef REGATTA_HAVE_ONNX
#include <regatta/graph/onnx_import.hpp>
#endif

#include "model_files.hpp"

namespace regatta::operators {
namespace {

using model_files::data;
using model_files::digits;
using model_files::text;

/// A random input the model accepts: pixels in [0, 1], or n token-embedding rows of random ids plus noise.
Vector<double> random_input(const Model& m, int n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  if (!m.text()) {
    Vector<double> x(m.input_size());
    for (auto& v : x) v = std::uniform_real_distribution<double>(0, 1)(rng);
    return x;
  }
  std::vector<int> ids(static_cast<std::size_t>(n));
  for (int& id : ids) id = std::uniform_int_distribution<int>(0, m.vocab - 1)(rng);
  Vector<double> x = m.embed_tokens(ids);
  for (auto& v : x) v += std::normal_distribution<double>(0, 0.1)(rng);
  return x;
}

template <class S>
std::vector<graph::Tensor<S>> as_input(const graph::Graph& g, const Vector<double>& x) {
  graph::Tensor<S> t{g.values[static_cast<std::size_t>(g.inputs[0])].shape, {}};
  for (double v : x) t.data.emplace_back(v);
  return {t};
}

struct Variant {
  std::string name;
  Model model;
  int tokens;  // text: the input's rows
};

std::vector<Variant> variants() {
  std::vector<Variant> out;
  const Model vit = digits();
  out.push_back({"timm-vit", vit, 0});
  Model mean = vit;
  mean.pooling = Pooling::mean;
  out.push_back({"timm-vit mean pooling", mean, 0});
  Model post = vit;
  post.prenorm = false;
  post.activation = Activation::relu;
  out.push_back({"timm-vit post-norm relu", post, 0});
  Model no_cls = vit;
  no_cls.class_token = false;
  no_cls.pooling = Pooling::mean;
  no_cls.pos_embed = Matrix<double>(vit.pos_embed.bottomRows(vit.patch_count()));
  out.push_back({"timm-vit without class token", no_cls, 0});
  Model gated = vit;
  gated.activation = Activation::silu;
  gated.norm = Prenorm::rmsnorm;
  for (auto& blk : gated.blocks) {
    blk.gate = blk.fc1;
    blk.gate.W = blk.fc1.W.reverse();  // another matrix of the same shape
  }
  out.push_back({"timm-vit gated rmsnorm", gated, 0});
  const Model gpt2 = text("gpt2");
  out.push_back({"gpt2", gpt2, gpt2.context});
  out.push_back({"gpt2 5 tokens", gpt2, 5});
  const Model bert = text("bert");
  out.push_back({"bert", bert, 7});
  Model bert_tanh = bert;
  bert_tanh.activation = Activation::gelu_tanh;
  out.push_back({"bert tanh gelu", bert_tanh, 1});
  const Model llama = text("llama");
  out.push_back({"llama", llama, 9});
  out.push_back({"llama full context", llama, llama.context});
  return out;
}

TEST(ModelGraph, DoubleEvaluationEqualsTheModelForward) {
  for (const Variant& v : variants()) {
    const Model& m = v.model;
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      const Vector<double> x = random_input(m, v.tokens, seed);
      const graph::Graph g = model_graph(m, x.size(), "test.safetensors");
      const Vector<double> expected = forward(m, x);
      const auto got = graph::evaluate(g, as_input<double>(g, x));
      ASSERT_EQ(got.size(), 1u);
      ASSERT_EQ(got[0].shape, (graph::Shape{1, m.classes})) << v.name;
      double scale = 1, worst = 0;
      for (Eigen::Index k = 0; k < expected.size(); ++k) scale = std::max(scale, std::fabs(expected(k)));
      for (Eigen::Index k = 0; k < expected.size(); ++k)
        worst = std::max(worst, std::fabs(got[0].data[std::size_t(k)] - expected(k)));
      EXPECT_LE(worst, 1e-12 * scale) << v.name << " seed " << seed;
      if (seed == 1)
        std::cout << v.name << ": |graph - forward| = " << worst << " (logits up to " << scale << ")\n";
    }
  }
}

TEST(ModelGraph, MpfiEvaluationLiesInTheModelEnclosure) {
  // The graph in MPFI at 256 bits (a tight enclosure of the graph's exact function at a point) against the
  // Model's interval64 forward (an enclosure of the Model's exact function): two enclosures of the same
  // function by different code. The graph's function differs from the Model's by e^(−1e9) where the causal
  // mask is additive (far below the Model's interval widths, which the test prints); LLaMA's rotary tables
  // enter with their enclosure radius, so the graph's enclosure holds the Model's exact rotation.
  for (const Variant& v : variants()) {
    const Model& m = v.model;
    const Vector<double> x = random_input(m, v.tokens, 7);
    const graph::Graph g = model_graph(m, x.size());
    const Vector<interval64> box = forward(m, Vector<interval64>(x.cast<interval64>()));
    std::vector<graph::Tensor<interval>> tight;
    {
      PrecisionGuard guard(256);
      tight = graph::evaluate(g, as_input<interval>(g, x));
    }
    double widest = 0;
    for (Eigen::Index k = 0; k < box.size(); ++k) {
      const interval& t = tight[0].data[std::size_t(k)];
      EXPECT_LE(box(k).lower(), lower_bound(t)) << v.name << " logit " << k;
      EXPECT_GE(box(k).upper(), upper_bound(t)) << v.name << " logit " << k;
      widest = std::max(widest, box(k).upper() - box(k).lower());
    }
    std::cout << v.name << ": widest Model interval64 logit " << widest << "\n";
  }
}

TEST(ModelGraph, Interval64EnclosesTheDoubleForward) {
  for (const Variant& v : variants()) {
    const Model& m = v.model;
    const Vector<double> x = random_input(m, v.tokens, 11);
    const graph::Graph g = model_graph(m, x.size());
    const auto box = graph::evaluate(g, as_input<interval64>(g, x));
    const Vector<double> point = forward(m, x);
    for (Eigen::Index k = 0; k < point.size(); ++k) {  // up to the double forward's own rounding
      EXPECT_LE(box[0].data[std::size_t(k)].lower(), point(k) + 1e-12) << v.name;
      EXPECT_GE(box[0].data[std::size_t(k)].upper(), point(k) - 1e-12) << v.name;
    }
  }
}

double max_difference(const std::vector<double>& a, const Matrix<double>& b) {
  EXPECT_EQ(a.size(), std::size_t(b.size()));
  double worst = 0;
  for (Eigen::Index i = 0; i < b.rows(); ++i)
    for (Eigen::Index j = 0; j < b.cols(); ++j)
      worst = std::max(worst, std::fabs(a[std::size_t(i * b.cols() + j)] - b(i, j)));
  return worst;
}

TEST(ModelGraph, FusionFindsEveryAttentionLayerWithTheModelsWeights) {
  for (const Variant& v : variants()) {
    const Model& m = v.model;
    const Vector<double> x = random_input(m, v.tokens, 3);
    const graph::Graph g = model_graph(m, x.size());
    ASSERT_EQ(g.attention.size(), m.blocks.size())
        << v.name << (g.fusion.not_attention.empty() ? "" : ": " + g.fusion.not_attention[0]);
    const Eigen::Index n = m.text() ? x.size() / m.width : m.tokens();
    for (std::size_t b = 0; b < m.blocks.size(); ++b) {
      const graph::AttentionPattern& p = g.attention[b];
      const AttentionLayer& l = m.blocks[b].attention;
      EXPECT_EQ(p.name, "blocks." + std::to_string(b) + ".attn");
      EXPECT_TRUE(p.self());
      EXPECT_EQ(p.tokens, n);
      EXPECT_EQ(p.width, m.width);
      EXPECT_EQ(p.heads, l.heads);
      EXPECT_EQ(p.head_dim, l.head_dim);
      EXPECT_EQ(p.value_dim, l.value_dim);
      EXPECT_NEAR(p.scale, 1 / std::sqrt(double(l.head_dim)), 1e-15);
      EXPECT_EQ(p.mask, m.causal && n > 1 ? graph::AttentionMask::causal : graph::AttentionMask::none)
          << v.name;
      ASSERT_EQ(p.wq.size(), std::size_t(l.heads));
      for (int h = 0; h < l.heads; ++h) {
        EXPECT_EQ(max_difference(p.wq[std::size_t(h)], l.WQ[std::size_t(h)]), 0) << v.name;
        EXPECT_EQ(max_difference(p.wk[std::size_t(h)], l.WK[std::size_t(h)]), 0) << v.name;
        EXPECT_EQ(max_difference(p.wv[std::size_t(h)], l.WV[std::size_t(h)]), 0) << v.name;
        if (!l.bQ.empty()) {
          EXPECT_EQ(max_difference(p.bq[std::size_t(h)], l.bQ[std::size_t(h)].transpose()), 0);
        }
        if (!l.bV.empty()) {
          EXPECT_EQ(max_difference(p.bv[std::size_t(h)], l.bV[std::size_t(h)].transpose()), 0);
        }
      }
      // LLaMA's rotary embeddings: on queries and keys, with tables from which rotary_of reads the θ.
      EXPECT_EQ(p.q_rotary.has_value(), l.rotary.has_value()) << v.name;
      EXPECT_EQ(p.k_rotary.has_value(), l.rotary.has_value()) << v.name;
      if (l.rotary) {
        std::string why;
        const auto r = rotary_of(p, &why);
        ASSERT_TRUE(r.has_value()) << v.name << ": " << why;
        if (n > 1) EXPECT_EQ(r->theta, l.rotary->theta) << v.name;
      }
      EXPECT_TRUE(p.output_projection);
      EXPECT_EQ(max_difference(p.wo, l.WO), 0) << v.name;
      if (l.bO.size() != 0) {
        EXPECT_EQ(max_difference(p.bo, l.bO.transpose()), 0) << v.name;
      }
    }
  }
}

TEST(ModelGraph, RotaryTablesRadiusEnclosesTheExactRotation) {
  // The graph's binary64 cos/sin tables carry an enclosure radius
  // (docs/graph.md#enclosure-radii-of-constants) computed from rotary.hpp's MPFI tables. Independently: cos
  // and sin of the exact angle i·θ^(−2a/d_h) in MPFR at 256 bits (θ^(−2a/d_h) by pow, not by exp of a log),
  // every stored entry within the radius of it.
  const Model llama = text("llama");
  const AttentionLayer& l = llama.blocks[0].attention;
  ASSERT_TRUE(l.rotary.has_value());
  const Eigen::Index n = llama.context;
  const graph::Graph g = model_graph(llama, n * llama.width);
  const graph::Value *cos = nullptr, *sin = nullptr;
  for (const graph::Value& v : g.values) {
    if (v.name == "rotary.cos") cos = &v;
    if (v.name == "rotary.sin") sin = &v;
  }
  ASSERT_TRUE(cos && sin);
  EXPECT_TRUE(g.has_inexact_constants());
  EXPECT_GT(cos->radius, 0);
  EXPECT_LT(cos->radius, 1e-14);  // a few ulp of the angle at the last position, not a loose bound
  EXPECT_EQ(cos->shape, (graph::Shape{n, 1, l.head_dim}));
  PrecisionGuard guard(256);
  const int half = l.head_dim / 2;
  double worst = 0;
  for (Eigen::Index i = 0; i < n; ++i)
    for (int c = 0; c < l.head_dim; ++c) {
      const mpfr angle =
          mpfr(double(i)) * pow(mpfr(l.rotary->theta), mpfr(-2 * (c % half)) / mpfr(l.head_dim));
      const std::size_t e = std::size_t(i * l.head_dim + c);
      const double dc = std::fabs(double(mpfr(cos->data[e]) - boost::multiprecision::cos(angle)));
      const double ds = std::fabs(double(mpfr(sin->data[e]) - boost::multiprecision::sin(angle)));
      EXPECT_LE(dc, cos->radius) << "cos at position " << i << ", column " << c;
      EXPECT_LE(ds, sin->radius) << "sin at position " << i << ", column " << c;
      worst = std::max({worst, dc, ds});
    }
  // The tables are roundings (the check can fail): without the radius some entry would be off.
  EXPECT_GT(worst, 0);
  std::cout << "rotary tables: radius " << cos->radius << ", largest |stored - exact| " << worst << "\n";
  // Every other constant of the graph is exact (the Model's binary64 weights).
  for (const graph::Value& v : g.values)
    if (v.constant && &v != cos && &v != sin) {
      EXPECT_EQ(v.radius, 0) << v.name;
    }
}

TEST(ModelGraph, NamesItsSourceAndRefusesABadLength) {
  const Model vit = digits();
  EXPECT_EQ(model_graph(vit, vit.input_size(), "digits.safetensors").source, "digits.safetensors (timm-vit)");
  EXPECT_THROW(model_graph(vit, vit.input_size() - 1), InputError);
  const Model gpt2 = text("gpt2");
  EXPECT_THROW(model_graph(gpt2, gpt2.width * (gpt2.context + 1)), InputError);
  EXPECT_THROW(model_graph(gpt2, gpt2.width + 1), InputError);
}

#ifdef REGATTA_HAVE_ONNX
TEST(ModelGraph, DigitsVitEqualsItsOnnxExport) {
  // ONNX writes LayerNormalization's epsilon as a float32 attribute (9.999999974752427e-07 for 1e-6): the
  // export is the network with that ε, which moves the logits by up to 1e-11 (the class token's row has a
  // small variance). Compared with the same ε, the two graphs are the same function.
  Model vit = digits();
  vit.eps = double(float(vit.eps));
  for (auto& blk : vit.blocks) blk.attention.norm_eps = vit.eps;
  const graph::Graph ours = model_graph(vit, vit.input_size());
  const graph::Graph onnx = graph::import_onnx((data / "vit_digits" / "vit_digits.onnx").string());
  const io::Array images = io::read_npz_member(data / "vit_digits" / "test_set.npz", "images");
  const std::size_t size = std::size_t(vit.input_size());
  double worst = 0;
  for (std::size_t i = 0; i < 20; ++i) {
    const Vector<double> x =
        Eigen::Map<const Vector<double>>(images.data.data() + i * size, Eigen::Index(size));
    const auto a = graph::evaluate(ours, as_input<double>(ours, x));
    const auto b = graph::evaluate(onnx, as_input<double>(onnx, x));
    ASSERT_EQ(a[0].data.size(), b[0].data.size());
    for (std::size_t k = 0; k < a[0].data.size(); ++k) {
      worst = std::max(worst, std::fabs(a[0].data[k] - b[0].data[k]));
      EXPECT_NEAR(a[0].data[k], b[0].data[k], 1e-12 * std::max(1.0, std::fabs(b[0].data[k])));
    }
  }
  EXPECT_EQ(ours.attention.size(), onnx.attention.size());
  std::cout << "digits ViT: |safetensors graph - ONNX graph| <= " << worst << " over 20 images\n";
}
#endif

}  // namespace
}  // namespace regatta::operators
