// The reverse sweep on the committed ONNX models (tests/data/onnx/make_onnx_models.py) against torch
// autograd: NAME.grad.npy is d logit[label]/d input in float64 on the same weights, label the flattened
// argmax of the logits (docs/graph.md, "Derivatives").
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>

#include <regatta/core/io/npy.hpp>
#include <regatta/graph/attack.hpp>
#include <regatta/graph/onnx_import.hpp>

namespace {

using namespace regatta;
using namespace regatta::graph;

const std::string dir = std::string(REGATTA_TEST_DATA_DIR) + "/onnx/";

class VjpModel : public ::testing::TestWithParam<std::string> {};

TEST_P(VjpModel, GradientOfTheLargestLogitMatchesTorchAutograd) {
  const Graph g = import_onnx(dir + GetParam() + ".onnx");
  const io::Array x = io::read_npy(dir + GetParam() + ".input.npy");
  const io::Array logits = io::read_npy(dir + GetParam() + ".logits.npy");
  const io::Array ref = io::read_npy(dir + GetParam() + ".grad.npy");
  ASSERT_EQ(ref.data.size(), x.data.size());
  const auto label = static_cast<std::size_t>(std::max_element(logits.data.begin(), logits.data.end()) -
                                              logits.data.begin());
  std::vector<double> w(logits.data.size(), 0.0);
  w[label] = 1;
  const std::vector<double> grad = vjp(g, x.data, w);
  ASSERT_EQ(grad.size(), ref.data.size());
  double worst = 0, scale = 0;
  for (std::size_t k = 0; k < grad.size(); ++k) {
    worst = std::max(worst, std::fabs(grad[k] - ref.data[k]));
    scale = std::max(scale, std::fabs(ref.data[k]));
  }
  EXPECT_GT(scale, 1e-3);
  EXPECT_LE(worst, 1e-10 * scale) << GetParam() << ": largest difference to torch " << worst << " of "
                                  << scale;
  std::cout << GetParam() << ": largest |gradient - torch| " << worst << ", largest |gradient| " << scale
            << "\n";
}

INSTANTIATE_TEST_SUITE_P(Torch, VjpModel,
                         ::testing::Values("encoder_postnorm_gelu", "encoder_prenorm_relu", "vit_conv_mha",
                                           "gpt_causal", "vit_vnncomp_like", "causal_where_inf",
                                           "causal_add_inf"));

}  // namespace
