// Per-token logits (operators/graph_transformer.hpp: output_token_count, select_output_token;
// docs/models.md#per-token-logits-one-position) on the GPT-2-style causal model exported from torch
// (tests/data/onnx/gpt_causal.onnx, make_onnx_models.py class GPT): its attention scale is Div by
// Cast(Pow(4, 0.5)), its head acts on every token. With the last token's row selected the graph is recognised
// as a causal text transformer with last-token pooling, and the recognised Model's logits are torch's last
// row (torch's float64 forward of the same weights, an independent computation); the first and a middle
// token are refused with a reason (no pooling of the Model takes them), while the graph's own forward still
// gives torch's rows. The scale seen through the Cast is still held to the block pipeline's enclosure of
// 1/√d_h.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <regatta/core/io/npy.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/onnx_import.hpp>
#include <regatta/operators/graph_transformer.hpp>
#include <regatta/operators/model.hpp>

namespace regatta::operators {
namespace {

const std::string onnx = std::string(REGATTA_TEST_DATA_DIR) + "/onnx/";

graph::Graph gpt(std::int64_t position) {
  graph::Graph g = graph::import_onnx(onnx + "gpt_causal.onnx");
  select_output_token(g, position);
  return g;
}

/// torch's logits of token `row` at the stored input (gpt_causal.logits.npy is [1, 6, 11]).
std::vector<double> torch_row(std::int64_t row) {
  const io::Array y = io::read_npy(onnx + "gpt_causal.logits.npy");
  EXPECT_EQ(y.shape, (std::vector<std::size_t>{1, 6, 11}));
  return {y.data.begin() + row * 11, y.data.begin() + (row + 1) * 11};
}

void expect_relative(const std::vector<double>& z, const std::vector<double>& torch, double tol,
                     const std::string& what) {
  ASSERT_EQ(z.size(), torch.size()) << what;
  double scale = 0;
  for (double t : torch) scale = std::max(scale, std::fabs(t));
  for (std::size_t j = 0; j < z.size(); ++j)
    EXPECT_NEAR(z[j], torch[j], tol * scale) << what << " logit " << j;
}

TEST(GraphTransformerPosition, TheOutputsTokenAxis) {
  const graph::Graph g = graph::import_onnx(onnx + "gpt_causal.onnx");
  EXPECT_EQ(output_token_count(g), 6);
  EXPECT_EQ(output_token_count(graph::import_onnx(onnx + "vit_conv_mha.onnx")), 0);  // [1, 10]
  EXPECT_EQ(output_token_count(graph::import_onnx(onnx + "mlp_tiny.onnx")), 0);      // [1, 2]
  graph::Graph h = g;
  EXPECT_THROW(select_output_token(h, 6), std::invalid_argument);
  EXPECT_THROW(select_output_token(h, -1), std::invalid_argument);
  select_output_token(h, 5);
  EXPECT_EQ(h.values[std::size_t(h.outputs[0])].shape, (graph::Shape{1, 11}));
  EXPECT_EQ(output_token_count(h), 0);
  // Without a row selected the per-token logits are not a classifier: refused, the scale no longer is.
  std::string why;
  EXPECT_FALSE(recognise_transformer(g, &why).has_value());
  EXPECT_EQ(why.find("attention scale"), std::string::npos) << why;
  std::cout << "per-token logits: " << why << "\n";
}

TEST(GraphTransformerPosition, TheLastTokenIsACausalTextModel) {
  std::string why;
  const auto t = recognise_transformer(gpt(5), &why);
  ASSERT_TRUE(t.has_value()) << why;
  const Model& m = t->model;
  std::cout << t->summary() << "\n";
  EXPECT_EQ(m.layout, "gpt2");
  EXPECT_TRUE(m.text());
  EXPECT_TRUE(m.causal);
  EXPECT_TRUE(m.prenorm);
  EXPECT_EQ(m.blocks.size(), 2u);
  EXPECT_EQ(m.width, 16);
  EXPECT_EQ(m.heads, 4);
  EXPECT_EQ(m.mlp_width, 64);
  EXPECT_EQ(m.activation, Activation::gelu_tanh);
  EXPECT_EQ(m.pooling, Pooling::last);
  EXPECT_TRUE(m.final_norm.present());
  EXPECT_EQ(m.pos_embed.rows(), 6);
  EXPECT_EQ(m.context, 6);
  EXPECT_EQ(m.classes, 11);
  const io::Array x = io::read_npy(onnx + "gpt_causal.input.npy");
  const Vector<double> z = forward<double>(m, t->model_input(x.data));
  expect_relative(std::vector<double>(z.data(), z.data() + z.size()), torch_row(5), 1e-11, "last token");
}

TEST(GraphTransformerPosition, TheFirstTokenAndAMiddleOne) {
  // No pooling of the Model takes token 0 of a causal model (it sees that token alone) or a middle token:
  // refused with a reason; the graph (certify's graph pass) still computes torch's row.
  const io::Array x = io::read_npy(onnx + "gpt_causal.input.npy");
  for (const std::int64_t row : {0, 2}) {
    const graph::Graph g = gpt(row);
    std::string why;
    EXPECT_FALSE(recognise_transformer(g, &why).has_value()) << row;
    EXPECT_NE(why.find(row == 0 ? "first token of a causal model" : "neither the first nor the last token"),
              std::string::npos)
        << why;
    const std::vector<double> y =
        graph::evaluate<double>(g, {graph::Tensor<double>{{1, 6, 16}, x.data}})[0].data;
    expect_relative(y, torch_row(row), 1e-12, "token " + std::to_string(row) + " by the graph");
  }
}

// Seen through the Cast, the scale is still held to the enclosure: Div by Pow(5, 0.5) in place of Pow(4, 0.5)
// scales the scores by 1/sqrt(5), not 1/sqrt(head_dim) = 1/2.
TEST(GraphTransformerPosition, TheScaleThroughTheCastIsChecked) {
  graph::Graph g = gpt(5);
  bool changed = false;
  for (const graph::Node& n : g.nodes)
    if (n.op == graph::Op::pow && g.values[std::size_t(n.inputs[0])].constant &&
        g.values[std::size_t(n.inputs[0])].data == std::vector<double>{4.0}) {
      g.values[std::size_t(n.inputs[0])].data[0] = 5.0;
      changed = true;
      break;
    }
  ASSERT_TRUE(changed) << "no Pow(4, .) in the graph";
  std::string why;
  EXPECT_FALSE(recognise_transformer(g, &why).has_value());
  EXPECT_NE(why.find("scales the scores"), std::string::npos) << why;
}

}  // namespace
}  // namespace regatta::operators
