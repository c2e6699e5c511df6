// The two ViTs written other ways and trained on the digits (tests/data/vit_digits_torchvision: torchvision's
// VisionTransformer; tests/data/vit_digits_encoder: nn.TransformerEncoder, post-norm, ReLU, mean pooling;
// docs/models.md#recognised-transformers). Each committed ONNX file, evaluated by the graph importer and by
// the model recognise_transformer reads from it, must give torch's float64 logits of the 450 test images
// that the training script saved beside it (two independent computations against torch's, to 1e-11 of the
// image's largest logit), and the recognised layout must be the one the script built.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <regatta/core/io/npy.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/onnx_import.hpp>
#include <regatta/operators/graph_transformer.hpp>
#include <regatta/operators/model.hpp>

namespace regatta::operators {
namespace {

const ThreadSetting kThreads = configure_threads();

const std::filesystem::path data(REGATTA_TEST_DATA_DIR);

struct Case {
  std::string name;
  bool prenorm;
  int blocks, width, heads, mlp;
  Activation activation;
  Pooling pooling;
  bool class_token, final_norm;
};

void check(const Case& c) {
  const graph::Graph g = graph::import_onnx((data / c.name / (c.name + ".onnx")).string());
  std::string why;
  const auto t = recognise_transformer(g, &why);
  ASSERT_TRUE(t.has_value()) << c.name << ": " << why;
  const Model& m = t->model;
  EXPECT_EQ(m.prenorm, c.prenorm) << c.name;
  EXPECT_EQ(int(m.blocks.size()), c.blocks) << c.name;
  EXPECT_EQ(m.width, c.width) << c.name;
  EXPECT_EQ(m.heads, c.heads) << c.name;
  EXPECT_EQ(m.mlp_width, c.mlp) << c.name;
  EXPECT_EQ(m.activation, c.activation) << c.name;
  EXPECT_EQ(m.pooling, c.pooling) << c.name;
  EXPECT_EQ(m.class_token, c.class_token) << c.name;
  EXPECT_EQ(m.final_norm.present(), c.final_norm) << c.name;

  const io::Array images = io::read_npz_member(data / "vit_digits" / "test_set.npz", "images");
  const io::Array torch = io::read_npy(data / c.name / (c.name + ".logits.npy"));
  ASSERT_EQ(images.shape, (std::vector<std::size_t>{450, 8, 8}));
  ASSERT_EQ(torch.shape, (std::vector<std::size_t>{450, 10}));
  const graph::Shape& shape = g.values[std::size_t(g.inputs[0])].shape;
  double worst_graph = 0, worst_model = 0;
  for (std::size_t i = 0; i < 450; ++i) {
    const std::vector<double> x(images.data.begin() + std::ptrdiff_t(i * 64),
                                images.data.begin() + std::ptrdiff_t((i + 1) * 64));
    const std::vector<double> y = graph::evaluate<double>(g, {graph::Tensor<double>{shape, x}})[0].data;
    const Vector<double> z = forward<double>(m, t->model_input(x));
    ASSERT_EQ(y.size(), 10u);
    ASSERT_EQ(z.size(), 10);
    // Relative to the image's largest logit: torch's (batched), the importer's and the model's forwards sum
    // in different orders, and the LayerNorms (ε = 1e-6, 1e-5) amplify that: measured 2.1e-12 (torchvision's)
    // and 1.1e-12 (the encoder's).
    double scale = 0;
    for (std::size_t j = 0; j < 10; ++j) scale = std::max(scale, std::fabs(torch.data[i * 10 + j]));
    for (std::size_t j = 0; j < 10; ++j) {
      const double ref = torch.data[i * 10 + j];
      worst_graph = std::max(worst_graph, std::fabs(y[j] - ref) / scale);
      worst_model = std::max(worst_model, std::fabs(z(Eigen::Index(j)) - ref) / scale);
    }
  }
  std::cout << c.name << ": largest difference from torch's logits, relative to the image's largest logit: "
            << worst_graph << " (graph), " << worst_model << " (recognised model)\n";
  EXPECT_LE(worst_graph, 1e-11) << c.name << ": the ONNX graph's logits against torch's";
  EXPECT_LE(worst_model, 1e-11) << c.name << ": the recognised model's logits against torch's";
}

TEST(TrainedVits, TorchvisionVisionTransformer) {
  check({"vit_digits_torchvision", true, 2, 32, 4, 64, Activation::gelu_erf, Pooling::cls, true, true});
}

TEST(TrainedVits, TransformerEncoderPostNormRelu) {
  check({"vit_digits_encoder", false, 3, 48, 4, 96, Activation::relu, Pooling::mean, false, false});
}

}  // namespace
}  // namespace regatta::operators
