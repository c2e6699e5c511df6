// ONNX models exported by torch (tests/data/onnx/make_onnx_models.py): regatta's import and double
// evaluation against torch's float64 logits on the same weights, interval enclosures of them, and the
// refusal of malformed, unsupported and hostile files (docs/graph.md, "Tests").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>

#include <regatta/core/error.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/onnx_import.hpp>

#include "onnx_fixtures.hpp"

namespace {

using namespace regatta;
using namespace regatta::graph;

using namespace regatta::graph::onnx_fixtures;

template <class S>
Tensor<S> cast(const Tensor<double>& t) {
  return Tensor<S>{t.shape, std::vector<S>(t.data.begin(), t.data.end())};
}

class OnnxModel : public ::testing::TestWithParam<std::string> {};

TEST_P(OnnxModel, DoubleEvaluationMatchesTorchFloat64) {
  const Case c = load(GetParam());
  const auto out = evaluate(c.graph, std::vector<Tensor<double>>{c.input});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].shape, Shape(c.logits.shape.begin(), c.logits.shape.end()));
  double worst = 0, scale = 0;
  for (std::size_t k = 0; k < out[0].data.size(); ++k) {
    worst = std::max(worst, std::fabs(out[0].data[k] - c.logits.data[k]));
    scale = std::max(scale, std::fabs(c.logits.data[k]));
  }
  EXPECT_GT(scale, 0.1);  // the logits are not trivially small
  EXPECT_LE(worst, 1e-12) << GetParam() << ": largest difference to torch " << worst;
  RecordProperty("max_abs_difference", std::to_string(worst));
}

TEST_P(OnnxModel, Interval64EnclosesTheForward) {
  const Case c = load(GetParam());
  const auto point = evaluate(c.graph, std::vector<Tensor<double>>{c.input});
  const auto box = evaluate(c.graph, std::vector<Tensor<interval64>>{cast<interval64>(c.input)});
  ASSERT_EQ(box[0].shape, point[0].shape);
  double widest = 0;
  for (std::size_t k = 0; k < box[0].data.size(); ++k) {
    const interval64& v = box[0].data[k];
    // The enclosure of the exact forward holds the float64 results up to their own rounding error.
    EXPECT_LE(v.lower(), c.logits.data[k] + 1e-12);
    EXPECT_GE(v.upper(), c.logits.data[k] - 1e-12);
    EXPECT_LE(v.lower(), point[0].data[k] + 1e-12);
    EXPECT_GE(v.upper(), point[0].data[k] - 1e-12);
    widest = std::max(widest, v.upper() - v.lower());
  }
  // Naive interval forward of a point input: dependency effects (LayerNorm's x − mean, softmax's shift)
  // widen it well beyond the rounding error, but it stays far below the logits' scale. torchvision's ViT
  // widens most: five LayerNorms of width 48, the first on its zero class token plus small positions (a row
  // of tiny variance whose 1/σ is large); measured 2.1e-4.
  EXPECT_LT(widest, GetParam() == "vit_torchvision" ? 1e-3 : 1e-7) << GetParam();
  std::cout << GetParam() << ": widest interval64 logit enclosure " << widest << "\n";
}

INSTANTIATE_TEST_SUITE_P(Torch, OnnxModel,
                         ::testing::Values("encoder_postnorm_gelu", "encoder_prenorm_relu", "vit_conv_mha",
                                           "gpt_causal", "vit_vnncomp_like", "vit_torchvision",
                                           "causal_where_inf", "causal_add_inf"));

TEST(OnnxImport, MpfiIntervalEnclosesTheLogits) {
  const Case c = load("vit_vnncomp_like");
  const auto box = evaluate(c.graph, std::vector<Tensor<interval>>{cast<interval>(c.input)});
  for (std::size_t k = 0; k < box[0].data.size(); ++k) {
    EXPECT_LE(lower_bound(box[0].data[k]), c.logits.data[k] + 1e-12);
    EXPECT_GE(upper_bound(box[0].data[k]), c.logits.data[k] - 1e-12);
  }
}

TEST(OnnxImport, VnncompLikeModelFoldsItsShapeSubgraph) {
  const Graph g = import_onnx(dir + "vit_vnncomp_like.onnx");
  // The CLS token's batch-size chain (Shape → Gather → ... → ConstantOfShape → Expand) is folded away.
  auto folded = [&](const std::string& op) {
    for (const auto& [name, count] : g.folded)
      if (name == op) return count;
    return 0;
  };
  EXPECT_GE(folded("Shape"), 1);
  EXPECT_GE(folded("ConstantOfShape"), 1);
  for (const Node& n : g.nodes) EXPECT_NE(n.source_op, "Shape");
  for (const Value& v : g.values)
    for (std::int64_t d : v.shape) EXPECT_GE(d, 0);
  EXPECT_EQ(g.opset, 9);
}

TEST(OnnxImport, RefusesBadFiles) {
  expect_refused("unsupported_cos.onnx", "Cos (node 'weird_cos')");
  expect_refused("nan_initializer.onnx", "NaN");
  expect_refused("external_data.onnx", "external data");
  expect_refused("unused_input.onnx", "'z' is not used");
  expect_refused("dangling_input.onnx", "ghost");
  expect_refused("opset8.onnx", "opset 8");
  expect_refused("symbolic_inner.onnx", "symbolic or empty dimension 'n'");
  expect_refused("truncated.onnx", "protobuf");
  expect_refused("garbage.onnx", "protobuf");
}

// A leading symbolic batch axis is bound to 1, in the input and in the output that shares its parameter.
TEST(OnnxImport, BindsLeadingBatchDimension) {
  const Graph g = import_onnx(dir + "symbolic_batch.onnx");
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.values[static_cast<std::size_t>(g.inputs[0])].shape, (Shape{1, 4}));
  EXPECT_EQ(g.values[static_cast<std::size_t>(g.outputs[0])].shape, (Shape{1, 4}));
  const auto out = evaluate<double>(g, {Tensor<double>{{1, 4}, {-1, 2, -0.5, 3}}});
  EXPECT_EQ(out[0].data, (std::vector<double>{0, 2, 0, 3}));
}

TEST(OnnxImport, LimitsAreEnforced) {
  OnnxLimits small;
  small.max_file_bytes = 1000;
  EXPECT_THROW(import_onnx(dir + "gpt_causal.onnx", small), InputError);
  OnnxLimits few;
  few.max_nodes = 10;
  EXPECT_THROW(import_onnx(dir + "gpt_causal.onnx", few), InputError);
  OnnxLimits tiny;
  tiny.max_tensor_elements = 100;
  EXPECT_THROW(import_onnx(dir + "gpt_causal.onnx", tiny), InputError);
}

TEST(OnnxImport, WrongInputShapeIsRefused) {
  const Case c = load("gpt_causal");
  Tensor<double> bad = c.input;
  bad.shape = {1, 96};
  EXPECT_THROW(evaluate(c.graph, std::vector<Tensor<double>>{bad}), InputError);
}

}  // namespace
