// recognise_transformer (operators/graph_transformer.hpp, docs/models.md#recognised-transformers) on the
// digits ViT of tests/data/vit_digits: its ONNX export, read by the ONNX importer and matched node by node,
// must give the model the safetensors reader gives (every weight bit for bit: two independent readers of two
// files), and graph_input_robustness on the graph the certified radii of the safetensors path. A graph with
// one extra node, another attention scale or another LayerNorm ε, and a recorded attention layer that is not
// the graph's, are refused with a reason. Two other exported ViTs of tests/data/onnx are recognised (their
// models give torch's logits, and the graph's own attack finds nothing inside a certified ball); a third is
// refused with a reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <regatta/core/io/npy.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/graph/attack.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/fuse.hpp>
#include <regatta/graph/onnx_import.hpp>
#include <regatta/operators/graph_robustness.hpp>
#include <regatta/operators/graph_transformer.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_robustness.hpp>

namespace regatta::operators {
namespace {

const ThreadSetting kThreads = configure_threads();

const std::filesystem::path dir = std::filesystem::path(REGATTA_TEST_DATA_DIR) / "vit_digits";

graph::Graph digits_graph() { return graph::import_onnx((dir / "vit_digits.onnx").string()); }

RecognisedTransformer recognised(const graph::Graph& g) {
  std::string why;
  const auto t = recognise_transformer(g, &why);
  if (!t) ADD_FAILURE() << "not recognised: " << why;
  return t ? *t : RecognisedTransformer{};
}

std::string refusal(const graph::Graph& g) {
  std::string why;
  const auto t = recognise_transformer(g, &why);
  EXPECT_FALSE(t.has_value());
  EXPECT_FALSE(why.empty());
  return why;
}

template <class A, class B>
void expect_same(const A& a, const B& b, const std::string& what) {
  ASSERT_EQ(a.rows(), b.rows()) << what;
  ASSERT_EQ(a.cols(), b.cols()) << what;
  EXPECT_TRUE((a.array() == b.array()).all()) << what << " differs";
}

TEST(GraphTransformer, TheDigitsExportIsRecognised) {
  const RecognisedTransformer t = recognised(digits_graph());
  const Model& m = t.model;
  EXPECT_EQ(m.blocks.size(), 2u);
  EXPECT_EQ(m.width, 32);
  EXPECT_EQ(m.heads, 4);
  EXPECT_EQ(m.mlp_width, 64);
  EXPECT_TRUE(m.prenorm);
  EXPECT_EQ(m.activation, Activation::gelu_erf);
  EXPECT_EQ(m.pooling, Pooling::cls);
  EXPECT_TRUE(m.class_token);
  EXPECT_EQ(m.patch_size, 2);
  EXPECT_EQ(m.image_size, 8);
  EXPECT_EQ(m.channels, 1);
  EXPECT_EQ(m.classes, 10);
  EXPECT_TRUE(t.model_index.empty());  // the [1, 8, 8] image is already in (C, H, W) order
  EXPECT_NE(t.summary().find("pre-norm ViT: 2 blocks, width 32, 4 heads"), std::string::npos) << t.summary();
}

TEST(GraphTransformer, EveryWeightIsTheSafetensorsFilesBitForBit) {
  const Model a = load_model(dir / "vit_digits.safetensors");
  const Model b = recognised(digits_graph()).model;
  expect_same(a.patch.W, b.patch.W, "patch.W");
  expect_same(a.patch.b, b.patch.b, "patch.b");
  expect_same(a.cls_token, b.cls_token, "cls_token");
  expect_same(a.pos_embed, b.pos_embed, "pos_embed");
  ASSERT_EQ(a.blocks.size(), b.blocks.size());
  for (std::size_t k = 0; k < a.blocks.size(); ++k) {
    const TransformerBlock &x = a.blocks[k], &y = b.blocks[k];
    const std::string at = "block " + std::to_string(k) + " ";
    expect_same(x.norm1.gamma, y.norm1.gamma, at + "norm1.gamma");
    expect_same(x.norm1.beta, y.norm1.beta, at + "norm1.beta");
    expect_same(x.norm2.gamma, y.norm2.gamma, at + "norm2.gamma");
    expect_same(x.norm2.beta, y.norm2.beta, at + "norm2.beta");
    const AttentionLayer &p = x.attention, &q = y.attention;
    ASSERT_EQ(p.heads, q.heads);
    EXPECT_EQ(p.head_dim, q.head_dim);
    for (int h = 0; h < p.heads; ++h) {
      const std::string hh = at + "head " + std::to_string(h) + " ";
      expect_same(p.WQ[std::size_t(h)], q.WQ[std::size_t(h)], hh + "WQ");
      expect_same(p.WK[std::size_t(h)], q.WK[std::size_t(h)], hh + "WK");
      expect_same(p.WV[std::size_t(h)], q.WV[std::size_t(h)], hh + "WV");
      expect_same(p.bQ[std::size_t(h)], q.bQ[std::size_t(h)], hh + "bQ");
      expect_same(p.bK[std::size_t(h)], q.bK[std::size_t(h)], hh + "bK");
      expect_same(p.bV[std::size_t(h)], q.bV[std::size_t(h)], hh + "bV");
    }
    expect_same(p.WO, q.WO, at + "WO");
    expect_same(p.bO, q.bO, at + "bO");
    expect_same(p.norm_gamma, q.norm_gamma, at + "attention norm_gamma");
    expect_same(x.fc1.W, y.fc1.W, at + "fc1.W");
    expect_same(x.fc1.b, y.fc1.b, at + "fc1.b");
    expect_same(x.fc2.W, y.fc2.W, at + "fc2.W");
    expect_same(x.fc2.b, y.fc2.b, at + "fc2.b");
  }
  expect_same(a.final_norm.gamma, b.final_norm.gamma, "final_norm.gamma");
  expect_same(a.final_norm.beta, b.final_norm.beta, "final_norm.beta");
  expect_same(a.head.W, b.head.W, "head.W");
  expect_same(a.head.b, b.head.b, "head.b");
  // ε: the ONNX attribute is a float32, 1e-6 rounded to single precision; the safetensors config says 1e-6.
  EXPECT_EQ(a.eps, 1e-6);
  EXPECT_EQ(b.eps, double(1e-6f));
}

// The ONNX export's LayerNorm ε is a float32 attribute: 1e-6 rounded to single precision (2.5e-9 below it),
// so the graph's function is the safetensors model's with that ε. With the safetensors model given the same
// ε the certified radii (and attack radii) are identical; with its own 1e-6 they differ by the effect of that
// ε alone (a few 1e-9 relative). Two images (three searches of about 1 CPU-s each per image): a third image
// goes through the same code again.
TEST(GraphTransformer, TheCertifiedRadiiAreTheSafetensorsPaths) {
  const Model own = load_model(dir / "vit_digits.safetensors");
  Model same_eps = own;
  same_eps.eps = double(1e-6f);
  for (TransformerBlock& b : same_eps.blocks) b.attention.norm_eps = same_eps.eps;
  const ConvertedModel<double> md_own(own), md_same(same_eps);
  const ConvertedModel<interval64> mi_own(own), mi_same(same_eps);
  const graph::Graph g = digits_graph();
  const auto path = dir / "test_set.npz";
  const io::Array images = io::read_npz_member(path, "images");
  const io::Array labels =
      io::read_npz_member(path, "labels", io::default_max_file_bytes, io::NonFloat::integers);
  const std::size_t n = images.shape[1] * images.shape[2];
  for (std::size_t i = 0; i < 2; ++i) {
    const std::vector<double> x(images.data.begin() + std::ptrdiff_t(i * n),
                                images.data.begin() + std::ptrdiff_t((i + 1) * n));
    const Vector<double> xv = Eigen::Map<const Vector<double>>(x.data(), Eigen::Index(n));
    const int y = int(labels.data[i]);
    const double inf = std::numeric_limits<double>::infinity();
    const InputRobustness s =
        input_robustness(md_same, mi_same, xv, y, inf, 0.01, RadiusMethod::affine, false);
    const InputRobustness t = input_robustness(md_own, mi_own, xv, y, inf, 0.01, RadiusMethod::affine, false);
    const InputRobustness o = graph_input_robustness(g, x, y, GraphRobustnessOptions{});
    EXPECT_GT(s.certified, 0) << "image " << i;
    EXPECT_EQ(o.certified, s.certified) << "image " << i;
    EXPECT_EQ(o.attack, s.attack) << "image " << i;
    EXPECT_EQ(o.margin_lower, s.margin_lower) << "image " << i;
    EXPECT_EQ(o.prediction, s.prediction);
    EXPECT_EQ(o.method, RadiusMethod::affine);
    const double relative = std::fabs(o.certified - t.certified) / t.certified;
    std::cout << "image " << i << ": certified " << o.certified << " (ONNX), " << t.certified
              << " (safetensors, eps 1e-6): relative difference " << relative << "\n";
    EXPECT_LE(relative, 1e-8) << "image " << i;
  }
}

TEST(GraphTransformer, AnExtraNodeIsRefused) {
  graph::Graph g = digits_graph();
  const int logits = g.outputs[0];
  g.values.push_back({"extra", g.values[std::size_t(logits)].shape, false, {}});
  g.nodes.push_back({graph::Op::relu, "extra_relu", "Relu", {logits}, int(g.values.size()) - 1, {}});
  g.validate();
  const std::string why = refusal(g);
  EXPECT_NE(why.find("extra_relu"), std::string::npos) << why;
  EXPECT_NE(why.find("not part of the transformer"), std::string::npos) << why;
}

TEST(GraphTransformer, AnotherAttentionScaleIsRefused) {
  graph::Graph g = digits_graph();
  int changed = 0;
  for (const graph::Node& n : g.nodes)
    if (n.op == graph::Op::pow) {
      graph::Value& base = g.values[std::size_t(n.inputs[0])];
      ASSERT_TRUE(base.constant);
      if (base.data[0] == 8.0) base.data[0] = 9;  // head_dim ** -0.5, as train.py writes the scale
      EXPECT_EQ(base.data[0], 9.0);               // (the two layers may share the constant)
      ++changed;
    }
  ASSERT_GT(changed, 0);
  g.attention = graph::find_attention(g);
  ASSERT_EQ(g.attention.size(), 2u);
  const std::string why = refusal(g);
  EXPECT_NE(why.find("not 1/sqrt(8)"), std::string::npos) << why;
}

TEST(GraphTransformer, AnotherLayerNormEpsilonIsRefused) {
  graph::Graph g = digits_graph();
  for (graph::Node& n : g.nodes)
    if (n.op == graph::Op::layer_norm) {
      std::get<graph::LayerNormAttrs>(n.attributes).epsilon = 1e-5;  // the first one only
      break;
    }
  const std::string why = refusal(g);
  EXPECT_NE(why.find("epsilon"), std::string::npos) << why;
}

TEST(GraphTransformer, TheGuardRefusesARecordedLayerThatIsNotTheGraphs) {
  graph::Graph g = digits_graph();
  g.attention[1].wv[2][5] += 1e-3;  // the record disagrees with the graph's own weights
  const std::string why = refusal(g);
  EXPECT_NE(why.find("differs from the graph's"), std::string::npos) << why;
}

TEST(GraphTransformer, AGraphWithoutAttentionIsRefused) {
  const graph::Graph g = graph::import_onnx(std::string(REGATTA_TEST_DATA_DIR) + "/onnx/mlp_tiny.onnx");
  refusal(g);
}

// The other exported ViTs of tests/data/onnx: torchvision's VisionTransformer (sequence-first attention
// inside nn.MultiheadAttention, class token) and a ViT with mean pooling and no class token are recognised,
// and the recognised model reproduces torch's float64 logits at the stored input (an independent
// computation); the VNN-COMP-like ViT (BatchNorm instead of LayerNorm) is refused with a reason.
TEST(GraphTransformer, TheOtherExportedVits) {
  const std::string onnx = std::string(REGATTA_TEST_DATA_DIR) + "/onnx/";
  for (const std::string name : {"vit_torchvision", "vit_conv_mha"}) {
    const graph::Graph g = graph::import_onnx(onnx + name + ".onnx");
    std::string why;
    const auto t = recognise_transformer(g, &why);
    ASSERT_TRUE(t.has_value()) << name << ": " << why;
    std::cout << name << ": " << t->summary() << "\n";
    const io::Array x = io::read_npy(onnx + name + ".input.npy");
    const io::Array torch = io::read_npy(onnx + name + ".logits.npy");
    const Vector<double> z = forward<double>(t->model, t->model_input(x.data));
    ASSERT_EQ(z.size(), Eigen::Index(torch.data.size()));
    for (std::size_t j = 0; j < torch.data.size(); ++j)
      EXPECT_NEAR(z(Eigen::Index(j)), torch.data[j], 1e-11) << name << " logit " << j;
  }
  EXPECT_EQ(recognise_transformer(graph::import_onnx(onnx + "vit_conv_mha.onnx"), nullptr)->model.pooling,
            Pooling::mean);
  const std::string why = refusal(graph::import_onnx(onnx + "vit_vnncomp_like.onnx"));
  std::cout << "vit_vnncomp_like: " << why << "\n";
}

// A certificate of the recognised model is one of the graph: projected gradient descent on the graph itself
// finds no misclassified point inside the certified ball (the mean-pooled ViT, at torch's input).
TEST(GraphTransformer, TheGraphAttackFindsNothingInsideTheCertifiedBall) {
  const std::string onnx = std::string(REGATTA_TEST_DATA_DIR) + "/onnx/";
  const graph::Graph g = graph::import_onnx(onnx + "vit_conv_mha.onnx");
  const io::Array x = io::read_npy(onnx + "vit_conv_mha.input.npy");
  const graph::Shape& shape = g.values[std::size_t(g.inputs[0])].shape;
  const std::vector<double> y = graph::evaluate<double>(g, {graph::Tensor<double>{shape, x.data}})[0].data;
  const int label = int(std::max_element(y.begin(), y.end()) - y.begin());
  const InputRobustness r = graph_input_robustness(g, x.data, label, GraphRobustnessOptions{});
  ASSERT_GT(r.certified, 0);
  EXPECT_LE(r.certified, r.attack);
  graph::AttackSet a{graph::Norm::l2, x.data, r.certified, {}, {}, {}};
  graph::AttackOptions o;
  o.steps = 200;
  o.restarts = 4;
  EXPECT_FALSE(graph::pgd_attack(g, a, label, o).found) << "a misclassified point inside the certified ball";
}

}  // namespace
}  // namespace regatta::operators
