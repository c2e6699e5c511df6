// recognise_transformer (operators/graph_transformer.hpp, docs/models.md#recognised-transformers) on the
// graphs of the safetensors layouts (model_graph.hpp): the timm ViT of tests/data/vit_digits and its variants
// (mean pooling, post-norm with ReLU, no class token, final norm absent), GPT-2 (causal, last token) at two
// lengths, BERT (post-norm, embedding LayerNorm, token type, tanh pooler) at two lengths and LLaMA (RMSNorm,
// rotary attention with grouped key/value heads, SwiGLU, causal, last token) at two lengths, of
// tests/data/text_models. The Model read back from the graph's nodes must be the Model the graph was written
// from, every weight and flag bit for bit (the writer and the reader are two independent walks), so that
// `regatta certify` gives the same rows on either. Two text encoders exported from torch to ONNX are
// recognised and give torch's logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <regatta/core/io/npy.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/operators/graph_robustness.hpp>
#include <regatta/operators/graph_transformer.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_graph.hpp>
#ifdef REGATTA_HAVE_ONNX
#include <regatta/graph/onnx_import.hpp>
#endif

#include "model_files.hpp"

namespace regatta::operators {
namespace {

using model_files::digits;
using model_files::text;

template <class A, class B>
void expect_same(const A& a, const B& b, const std::string& what) {
  ASSERT_EQ(a.rows(), b.rows()) << what;
  ASSERT_EQ(a.cols(), b.cols()) << what;
  EXPECT_TRUE((a.array() == b.array()).all()) << what << " differs";
}

void expect_same_norm(const NormParameters& a, const NormParameters& b, const std::string& what) {
  expect_same(a.gamma, b.gamma, what + " gamma");
  expect_same(a.beta, b.beta, what + " beta");
}

void expect_same_affine(const Affine& a, const Affine& b, const std::string& what) {
  expect_same(a.W, b.W, what + " W");
  expect_same(a.b, b.b, what + " b");
}

/// The recognised model r against the model m the graph was written from, on an input of `tokens` rows.
void expect_same_model(const Model& r, const Model& m, Eigen::Index tokens, const std::string& name) {
  SCOPED_TRACE(name);
  EXPECT_EQ(r.layout, m.layout);
  EXPECT_EQ(r.input, m.input);
  EXPECT_EQ(r.width, m.width);
  EXPECT_EQ(r.heads, m.heads);
  EXPECT_EQ(r.mlp_width, m.mlp_width);
  EXPECT_EQ(r.classes, m.classes);
  EXPECT_EQ(r.prenorm, m.prenorm);
  EXPECT_EQ(r.causal, m.causal);
  EXPECT_EQ(r.norm, m.norm);
  EXPECT_EQ(r.class_token, m.class_token);
  EXPECT_EQ(r.eps, m.eps);
  EXPECT_EQ(r.activation, m.activation);
  EXPECT_EQ(r.pooling, m.pooling);
  if (m.text()) {
    EXPECT_EQ(r.context, tokens);
    EXPECT_EQ(r.vocab, 0);  // the graph starts at the embeddings
    if (m.pos_embed.size() != 0)
      expect_same(r.pos_embed, Matrix<double>(m.pos_embed.topRows(tokens)), "pos_embed");
    else
      EXPECT_EQ(r.pos_embed.size(), 0);
    expect_same(r.token_type, m.token_type, "token_type");
    expect_same_norm(r.embed_norm, m.embed_norm, "embed_norm");
  } else {
    EXPECT_EQ(r.image_size, m.image_size);
    EXPECT_EQ(r.patch_size, m.patch_size);
    EXPECT_EQ(r.channels, m.channels);
    expect_same_affine(r.patch, m.patch, "patch");
    if (m.class_token) expect_same(r.cls_token, m.cls_token, "cls_token");
    expect_same(r.pos_embed, m.pos_embed, "pos_embed");
  }
  ASSERT_EQ(r.blocks.size(), m.blocks.size());
  for (std::size_t k = 0; k < m.blocks.size(); ++k) {
    const std::string at = "block " + std::to_string(k);
    const TransformerBlock &a = r.blocks[k], &b = m.blocks[k];
    expect_same_norm(a.norm1, b.norm1, at + " norm1");
    expect_same_norm(a.norm2, b.norm2, at + " norm2");
    expect_same_affine(a.fc1, b.fc1, at + " fc1");
    expect_same_affine(a.fc2, b.fc2, at + " fc2");
    ASSERT_EQ(a.gated(), b.gated()) << at;
    if (b.gated()) expect_same_affine(a.gate, b.gate, at + " gate");
    const AttentionLayer &p = a.attention, &q = b.attention;
    EXPECT_EQ(p.kind, q.kind) << at;
    EXPECT_EQ(p.heads, q.heads) << at;
    EXPECT_EQ(p.head_dim, q.head_dim) << at;
    EXPECT_EQ(p.value_dim, q.value_dim) << at;
    ASSERT_EQ(p.WQ.size(), q.WQ.size()) << at;
    for (std::size_t h = 0; h < q.WQ.size(); ++h) {
      expect_same(p.WQ[h], q.WQ[h], at + " WQ");
      expect_same(p.WK[h], q.WK[h], at + " WK");
      expect_same(p.WV[h], q.WV[h], at + " WV");
      if (!q.bQ.empty()) expect_same(p.bQ[h], q.bQ[h], at + " bQ");
      if (!q.bK.empty()) expect_same(p.bK[h], q.bK[h], at + " bK");
      if (!q.bV.empty()) expect_same(p.bV[h], q.bV[h], at + " bV");
    }
    ASSERT_EQ(p.rotary.has_value(), q.rotary.has_value()) << at;
    if (q.rotary) EXPECT_EQ(p.rotary->theta, q.rotary->theta) << at;
    expect_same(p.WO, q.WO, at + " WO");
    expect_same(p.bO, q.bO, at + " bO");
    if (m.prenorm) {
      expect_same(p.norm_gamma, q.norm_gamma, at + " pre-norm gamma");
      expect_same(p.norm_beta, q.norm_beta, at + " pre-norm beta");
      EXPECT_EQ(p.norm_eps, q.norm_eps) << at;
    }
  }
  expect_same_norm(r.final_norm, m.final_norm, "final_norm");
  expect_same_affine(r.pooler, m.pooler, "pooler");
  expect_same_affine(r.head, m.head, "head");
}

/// The model read from the graph of m is m (or `read`, when given).
void expect_recognised(const Model& m, Eigen::Index tokens, const std::string& name,
                       const Model* read = nullptr) {
  const Eigen::Index length = m.text() ? tokens * m.width : m.input_size();
  std::string why;
  const auto t = recognise_transformer(model_graph(m, length, name), &why);
  ASSERT_TRUE(t.has_value()) << name << ": " << why;
  EXPECT_TRUE(t->model_index.empty()) << name;
  expect_same_model(t->model, read ? *read : m, tokens, name);
}

const ThreadSetting kThreads = configure_threads();

TEST(GraphTransformerLayouts, TheDigitsVitAndItsVariants) {
  const Model vit = digits();
  expect_recognised(vit, 0, "timm-vit");
  Model mean = vit;
  mean.pooling = Pooling::mean;
  expect_recognised(mean, 0, "timm-vit mean pooling");
  Model post = vit;
  post.prenorm = false;
  post.activation = Activation::relu;
  expect_recognised(post, 0, "timm-vit post-norm relu");
  Model no_cls = vit;
  no_cls.class_token = false;
  no_cls.pooling = Pooling::mean;
  no_cls.pos_embed = Matrix<double>(vit.pos_embed.bottomRows(vit.patch_count()));
  expect_recognised(no_cls, 0, "timm-vit without class token");
  Model bare = vit;
  bare.final_norm = {};
  expect_recognised(bare, 0, "timm-vit without final norm");
}

TEST(GraphTransformerLayouts, Gpt2AndBert) {
  const Model gpt2 = text("gpt2");
  expect_recognised(gpt2, gpt2.context, "gpt2");
  expect_recognised(gpt2, 5, "gpt2 5 tokens");
  // One token: the causal mask is empty, so the graph reads as an unmasked model pooling its first (and
  // only) token, the same function (certify keeps the file's flags then).
  Model one = gpt2;
  one.causal = false;
  one.pooling = Pooling::cls;
  one.layout = "bert";
  expect_recognised(gpt2, 1, "gpt2 1 token", &one);
  const Model bert = text("bert");
  expect_recognised(bert, 7, "bert");
  Model bert_tanh = bert;
  bert_tanh.activation = Activation::gelu_tanh;
  expect_recognised(bert_tanh, 3, "bert tanh gelu");
}

TEST(GraphTransformerLayouts, Llama) {
  const Model llama = text("llama");
  ASSERT_TRUE(llama.blocks[0].attention.rotary.has_value());
  expect_recognised(llama, 16, "llama");
  expect_recognised(llama, 5, "llama 5 tokens");
  // A θ other than the file's: read back from the graph's tables.
  Model other = llama;
  for (auto& blk : other.blocks) blk.attention.rotary->theta = 500000;
  expect_recognised(other, 7, "llama theta 500000");
}

// graph_input_robustness does not hand a rotary graph to the recognised Model (whose rotation is exact, the
// graph's tables rounded): LLaMA's row is the graph pass's (refuted NaN marks it), GPT-2's the Model's.
TEST(GraphTransformerLayouts, RobustnessOfARotaryGraphWalksTheGraph) {
  for (const std::string name : {"llama", "gpt2"}) {
    const Model m = text(name);
    const Eigen::Index n = 4;
    std::vector<double> x;
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < m.width; ++j) x.push_back(0.1 * std::sin(double(3 * i + j)));
    const graph::Graph g = model_graph(m, Eigen::Index(x.size()), name);
    const graph::Shape& shape = g.values[std::size_t(g.inputs[0])].shape;
    const std::vector<double> y = graph::evaluate<double>(g, {graph::Tensor<double>{shape, x}})[0].data;
    const int label = int(std::max_element(y.begin(), y.end()) - y.begin());
    const InputRobustness r = graph_input_robustness(g, x, label, GraphRobustnessOptions{});
    EXPECT_EQ(std::isnan(r.refuted), name == "llama") << name;
    EXPECT_GT(r.certified, 0) << name;
    EXPECT_LE(r.certified, r.attack) << name;
  }
}

TEST(GraphTransformerLayouts, AGatedRmsNormVit) {
  // The digits ViT with RMSNorm and a SwiGLU MLP: read back as written, except the LayerNorm biases that an
  // RMSNorm does not use (model_graph writes none, so the Model read has none).
  Model gated = digits();
  gated.activation = Activation::silu;
  gated.norm = Prenorm::rmsnorm;
  for (auto& blk : gated.blocks) {
    blk.gate = blk.fc1;
    blk.gate.W = blk.fc1.W.reverse();
  }
  Model read = gated;
  for (auto& blk : read.blocks) {
    blk.norm1.beta.resize(0);
    blk.norm2.beta.resize(0);
    blk.attention.norm_beta.resize(0);
  }
  read.final_norm.beta.resize(0);
  expect_recognised(gated, 0, "gated rmsnorm ViT", &read);
}

#ifdef REGATTA_HAVE_ONNX
// Text transformers exported from torch (tests/data/onnx/make_onnx_models.py: nn.TransformerEncoder layers on
// an input of 5 token embeddings, mean pooling, pre-norm ReLU and post-norm GELU) are recognised, and the
// model read reproduces torch's float64 logits at the stored input (an independent computation).
TEST(GraphTransformerLayouts, TheExportedTextEncoders) {
  const std::string onnx = std::string(REGATTA_TEST_DATA_DIR) + "/onnx/";
  for (const std::string name : {"encoder_prenorm_relu", "encoder_postnorm_gelu"}) {
    std::string why;
    const auto t = recognise_transformer(graph::import_onnx(onnx + name + ".onnx"), &why);
    ASSERT_TRUE(t.has_value()) << name << ": " << why;
    std::cout << name << ": " << t->summary() << "\n";
    EXPECT_TRUE(t->model.text());
    EXPECT_EQ(t->model.prenorm, name == "encoder_prenorm_relu");
    const io::Array x = io::read_npy(onnx + name + ".input.npy");
    const io::Array torch = io::read_npy(onnx + name + ".logits.npy");
    const Vector<double> z = forward<double>(t->model, t->model_input(x.data));
    ASSERT_EQ(z.size(), Eigen::Index(torch.data.size()));
    for (std::size_t j = 0; j < torch.data.size(); ++j)
      EXPECT_NEAR(z(Eigen::Index(j)), torch.data[j], 1e-11) << name << " logit " << j;
  }
}
#endif

}  // namespace
}  // namespace regatta::operators
