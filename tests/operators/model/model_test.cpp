// load_model + forward against PyTorch: tests/data/vit_digits holds a ViT trained by train.py there, in timm
// naming, with torch's float64 logits of the 450 held-out images (the module code is in train.py). Also the
// interval64 forward (an enclosure, which must hold torch's logits), the GELU′ enclosure, and the loader's
// refusals of mismatched tensors and configs.
//
// The region pass is tested in tangent_region_test.cpp, the naive factors in global_bound_test.cpp.
#include <gtest/gtest.h>

#include "vit_fixture.hpp"

namespace regatta::operators {
namespace {

using namespace vit_fixture;

TEST(Model, LoadsTheTimmLayoutWithItsConfig) {
  const Model m = load_model(fixture() / "vit_digits.safetensors");
  EXPECT_EQ(m.image_size, 8);
  EXPECT_EQ(m.patch_size, 2);
  EXPECT_EQ(m.channels, 1);
  EXPECT_EQ(m.width, 32);
  EXPECT_EQ(m.heads, 4);
  EXPECT_EQ(m.mlp_width, 64);
  EXPECT_EQ(m.classes, 10);
  EXPECT_EQ(m.blocks.size(), 2u);
  EXPECT_EQ(m.tokens(), 17);
  EXPECT_TRUE(m.prenorm);
  EXPECT_EQ(m.pooling, Pooling::cls);
  EXPECT_EQ(m.activation, Activation::gelu_erf);
}

TEST(Model, LogitsOfAllTestImagesEqualTorch) {
  const Model m = load_model(fixture() / "vit_digits.safetensors");
  const TestSet t = read_test_set();
  ASSERT_EQ(t.images.shape.size(), 3u);
  const std::size_t count = t.images.shape[0];
  ASSERT_EQ(count, 450u);
  ASSERT_EQ(t.logits.shape, (std::vector<std::size_t>{count, 10}));
  double worst = 0;
  std::size_t agree = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const Vector<double> z = forward(m, image(t, i));
    const Eigen::Map<const Vector<double>> ref(t.logits.data.data() + i * 10, 10);
    const double scale = std::max(1.0, ref.cwiseAbs().maxCoeff());
    worst = std::max(worst, (z - ref).cwiseAbs().maxCoeff() / scale);
    Eigen::Index ours = 0, theirs = 0;
    z.maxCoeff(&ours);
    ref.maxCoeff(&theirs);
    agree += ours == theirs;
  }
  EXPECT_LE(worst, kTorchTolerance);
  EXPECT_EQ(agree, count);
}

TEST(Model, LabelsReadExactlyAsIntegers) {
  const TestSet t = read_test_set();
  ASSERT_EQ(t.labels.shape, (std::vector<std::size_t>{450}));
  ASSERT_TRUE(t.labels.converted());
  for (double y : t.labels.data) {
    EXPECT_EQ(y, std::floor(y));
    EXPECT_GE(y, 0);
    EXPECT_LE(y, 9);
  }
  // Without the option the integer member stays listed, unconverted.
  EXPECT_FALSE(io::read_npz_member(fixture() / "test_set.npz", "labels").converted());
}

TEST(Model, IntervalForwardEnclosesTorch) {
  // The interval64 forward encloses the exact logits of the binary64 weights and image; torch's float64
  // logits are within kTorchTolerance of those (the previous test), so each must lie in the enclosure widened
  // by that much. (The naive enclosure is wide here: LayerNorm and softmax amplify interval widths.)
  const Model m = load_model(fixture() / "vit_digits.safetensors");
  const TestSet t = read_test_set();
  for (std::size_t i = 0; i < 20; ++i) {
    const Vector<interval64> zi = forward<interval64>(m, image(t, i).cast<interval64>());
    for (Eigen::Index c = 0; c < zi.size(); ++c) {
      const double ref = t.logits.data[i * 10 + std::size_t(c)];
      EXPECT_LE(zi(c).lower(), ref + kTorchTolerance) << i << " " << c;
      EXPECT_GE(zi(c).upper(), ref - kTorchTolerance) << i << " " << c;
    }
  }
}

/// GELU′ by central differences with step h: truncation h²/6·max|GELU‴| (|GELU‴| < 1), plus cancellation:
/// the two GELU values, of size ≤ max|x| = 7 on the edges below, each within 4 ulps (erf and a product),
/// divided by 2h.
constexpr double kGeluStep = 1e-5;
const double kGeluDifferenceTolerance =
    kGeluStep * kGeluStep / 6 + testing::rounding_bound<double>(4, 7.0) / kGeluStep;

TEST(Model, GeluDerivativeEnclosuresContainSampledValues) {
  // The interval GELU′ (piecewise monotone endpoints) against the binary64 derivative at points inside,
  // and against a central difference of the binary64 GELU.
  const std::vector<double> edges = {-6.0, -2.0, -1.5, -1.4142, -1.0, -0.1, 0.0, 0.3, 1.4142, 1.5, 3.0, 7.0};
  for (std::size_t a = 0; a + 1 < edges.size(); ++a)
    for (std::size_t b = a + 1; b < edges.size(); ++b) {
      Matrix<interval64> H(1, 1);
      H(0, 0) = interval64::hull(edges[a], edges[b]);
      const interval64 d = activation_derivative(Activation::gelu_erf, H)(0, 0);
      for (int k = 0; k <= 16; ++k) {
        Matrix<double> p(1, 1);
        p(0, 0) = edges[a] + (edges[b] - edges[a]) * k / 16.0;
        const double v = activation_derivative(Activation::gelu_erf, p)(0, 0);
        EXPECT_TRUE(contains(d, v) || std::abs(v - d.lower()) < testing::rounding_bound<double>(8) ||
                    std::abs(v - d.upper()) < testing::rounding_bound<double>(8))
            << p(0, 0) << " in " << d;
        const double h = kGeluStep;
        Matrix<double> lo = p.array() - h, hi = p.array() + h;
        const double fd =
            (activate(Activation::gelu_erf, hi)(0, 0) - activate(Activation::gelu_erf, lo)(0, 0)) / (2 * h);
        EXPECT_NEAR(fd, v, kGeluDifferenceTolerance);
      }
    }
}

TEST(Model, ActivationWithDerivativeIsTheTwoCalls) {
  // The attack's gradient pass takes σ and σ′ from one sweep: the same binary64 numbers as activate and
  // activation_derivative, for every activation, on points spread over [−8, 8] and a few special values.
  Matrix<double> H(7, 301);
  for (Eigen::Index i = 0; i < H.rows(); ++i)
    for (Eigen::Index j = 0; j < H.cols(); ++j) H(i, j) = -8.0 + 16.0 * double(j) / 300.0 + 1e-3 * double(i);
  H(0, 0) = 0.0;
  H(1, 1) = -0.0;
  H(2, 2) = 40.0;
  H(3, 3) = -40.0;
  for (Activation a :
       {Activation::gelu_erf, Activation::gelu_tanh, Activation::relu, Activation::tanh, Activation::silu}) {
    Matrix<double> value, derivative;
    activate_with_derivative(a, H, value, derivative);
    const Matrix<double> v = activate(a, H), d = activation_derivative(a, H);
    for (Eigen::Index i = 0; i < H.rows(); ++i)
      for (Eigen::Index j = 0; j < H.cols(); ++j) {
        EXPECT_EQ(value(i, j), v(i, j)) << int(a) << " at " << H(i, j);
        EXPECT_EQ(derivative(i, j), d(i, j)) << int(a) << " at " << H(i, j);
      }
  }
}

class ModelFiles : public ::testing::Test {
 protected:
  std::filesystem::path dir;
  void SetUp() override {
    dir = std::filesystem::temp_directory_path() /
          ("regatta_model_test_" +
           std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::create_directories(dir);
    std::filesystem::copy_file(fixture() / "config.json", dir / "config.json",
                               std::filesystem::copy_options::overwrite_existing);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::string load_error(const std::map<std::string, io::Array>& arrays) {
    io::write_safetensors(dir / "m.safetensors", arrays);
    try {
      load_model(dir / "m.safetensors");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(ModelFiles, AMismatchedTensorIsNamedWithBothShapes) {
  auto arrays = io::read_safetensors(fixture() / "vit_digits.safetensors");
  io::Array& fc2 = arrays.at("blocks.1.mlp.fc2.weight");
  fc2.shape = {32, 63};
  fc2.data.resize(32 * 63);
  const std::string e = load_error(arrays);
  EXPECT_NE(e.find("blocks.1.mlp.fc2.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("(32, 63)"), std::string::npos) << e;
  EXPECT_NE(e.find("(32, 64)"), std::string::npos) << e;
}

TEST_F(ModelFiles, AnotherLayoutAndAMissingTensorAreRefused) {
  auto arrays = io::read_safetensors(fixture() / "vit_digits.safetensors");
  auto without = arrays;
  without.erase("blocks.0.norm2.bias");
  EXPECT_NE(load_error(without).find("blocks.0.norm2.bias"), std::string::npos);
  std::map<std::string, io::Array> other{{"in_proj_weight", arrays.at("blocks.0.attn.qkv.weight")}};
  EXPECT_NE(load_error(other).find("not a timm ViT layout"), std::string::npos);
}

TEST_F(ModelFiles, AConfigContradictingTheTensorsIsRefused) {
  const auto arrays = io::read_safetensors(fixture() / "vit_digits.safetensors");
  std::ofstream(dir / "config.json") << R"({"heads": 4, "image_size": 16})";
  const std::string e = load_error(arrays);
  EXPECT_NE(e.find("image_size"), std::string::npos) << e;
  std::ofstream(dir / "config.json") << R"({"image_size": 8})";
  EXPECT_NE(load_error(arrays).find("heads"), std::string::npos);
  std::ofstream(dir / "config.json") << R"({"heads": 5})";
  EXPECT_NE(load_error(arrays).find("does not divide"), std::string::npos);
}

}  // namespace
}  // namespace regatta::operators
