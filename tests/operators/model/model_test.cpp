// load_model + forward against PyTorch: tests/data/vit_digits holds a ViT trained by train.py there, in timm
// naming, with torch's float64 logits of the 450 held-out images (the module code is in train.py). Also the
// interval64 forward (an enclosure, which must hold torch's logits), the GELU′ enclosure, and the loader's
// refusals of mismatched tensors and configs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/io/safetensors.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_robustness.hpp>
#include <string>

#include "support/model_gradient.hpp"
#include "support/tolerance.hpp"

namespace regatta::operators {
namespace {

// The command line's thread setting (core/resources.hpp): Eigen's products on one thread. The passes'
// matrices are small, and on a loaded two-core machine a parallel GEMM's synchronisation made these tests
// several times slower.
const ThreadSetting kThreads = configure_threads();

/// |ours − torch| ≤ kTorchTolerance·max(1, ‖torch‖∞) per logit. Both sides evaluate the same float64 network:
/// the patch embedding, two blocks (LayerNorms over 32 features, 17-key softmaxes, MLPs of width 64) and the
/// head are a chain of ≲ 1024 rounded operations; c = 4 for the two sides' different orders (2) and the
/// LayerNorms' cancelling means (2). A wrong weight mapping gives O(1) errors.
const double kTorchTolerance = testing::rounding_bound<double>(4, 1024);

const std::filesystem::path& fixture() {
  static const std::filesystem::path dir = std::filesystem::path(REGATTA_TEST_DATA_DIR) / "vit_digits";
  return dir;
}

struct TestSet {
  io::Array images, labels, logits;
};

TestSet read_test_set() {
  const auto path = fixture() / "test_set.npz";
  return {io::read_npz_member(path, "images"),
          io::read_npz_member(path, "labels", io::default_max_file_bytes, io::NonFloat::integers),
          io::read_npz_member(path, "logits")};
}

Vector<double> image(const TestSet& t, std::size_t i) {
  const std::size_t n = t.images.shape[1] * t.images.shape[2];
  return Eigen::Map<const Vector<double>>(t.images.data.data() + i * n, Eigen::Index(n));
}

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

/// Central differences of the binary64 forward with step h: error ≲ h²·|z‴|/6 + c·eps·|z|/h. The third
/// derivatives are bounded relative to the Jacobian's scale by kThirdDerivativeRatio (the two LayerNorms'
/// 1/σ factors, cubed along the chain); the logits are each within kTorchTolerance relative of exact.
constexpr double kFiniteDifferenceStep = 1e-5;
constexpr double kThirdDerivativeRatio = 1000;
double finite_difference_tolerance(double jacobian_scale, double logit_scale) {
  const double h = kFiniteDifferenceStep;
  return h * h / 6 * kThirdDerivativeRatio * jacobian_scale +
         kTorchTolerance * std::max(1.0, logit_scale) / h;
}

TEST(ModelRegion, DoubleJacobianMatchesFiniteDifferences) {
  const Model m = load_model(fixture() / "vit_digits.safetensors");
  const TestSet t = read_test_set();
  const ConvertedModel<double> md(m);
  const Vector<double> x = image(t, 3);
  const ModelPass<double> pass = propagate(md, x, 0.0);
  ASSERT_EQ(pass.jacobian.rows(), 10);
  ASSERT_EQ(pass.jacobian.cols(), 64);
  const double scale = pass.jacobian.cwiseAbs().maxCoeff();
  EXPECT_LE((pass.logits - forward(m, x)).cwiseAbs().maxCoeff(), kTorchTolerance);
  const double tolerance = finite_difference_tolerance(scale, pass.logits.cwiseAbs().maxCoeff());
  for (int j = 0; j < 64; ++j) {
    Vector<double> e = Vector<double>::Zero(64);
    e(j) = kFiniteDifferenceStep;
    const Vector<double> fd =
        (forward(m, Vector<double>(x + e)) - forward(m, Vector<double>(x - e))) / (2 * kFiniteDifferenceStep);
    EXPECT_LE((fd - pass.jacobian.col(j)).cwiseAbs().maxCoeff(), tolerance) << j;
  }
}

/// A radius the region pass certifies for these inputs (so the enclosures are finite), and the slack of the
/// sampled double Jacobians against the exact ones they stand for: the double forward-mode chain rounds
/// along ≲ 128 operations per stage (products of width ≤ 64, a 17-key softmax, a LayerNorm over 32) over
/// five stages, and each stage amplifies the error of its input by at most kStageAmplification (the widths
/// of the r = 0 interval pass, relative to the Jacobian's scale at the head, measure that amplification).
constexpr double kSampledBallRadius = 1e-5;
constexpr double kStageAmplification = 100;
const double kJacobianRoundingSlack = testing::rounding_bound<double>(kStageAmplification, 5 * 128);

TEST(ModelRegion, IntervalJacobianOverTheBallHoldsSampledJacobians) {
  // Independent check of the region pass: the double Jacobian at random points of the ball (and the logits
  // at the centre) lie in the interval64 enclosures, up to the double evaluation's own rounding.
  const Model m = load_model(fixture() / "vit_digits.safetensors");
  const TestSet t = read_test_set();
  const ConvertedModel<double> md(m);
  const ConvertedModel<interval64> mi(m);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  for (std::size_t i : {0u, 5u}) {
    const Vector<double> x = image(t, i);
    const double r = kSampledBallRadius;
    const ModelPass<interval64> region = propagate(mi, x, r);
    ASSERT_EQ(region.jacobian.rows(), 10);
    const ModelPass<double> centre = propagate(md, x, 0.0);
    const double slack = kJacobianRoundingSlack * centre.jacobian.cwiseAbs().maxCoeff();
    for (Eigen::Index c = 0; c < 10; ++c)
      EXPECT_TRUE(region.logits(c).lower() <= centre.logits(c) + kTorchTolerance &&
                  centre.logits(c) - kTorchTolerance <= region.logits(c).upper());
    for (int s = 0; s < 8; ++s) {
      Vector<double> d(64);
      for (auto& v : d) v = normal(rng);
      const Vector<double> p = x + (r * (s + 1) / 8.0 / d.norm()) * d;  // inside the ball
      const ModelPass<double> at = propagate(md, p, 0.0);
      for (Eigen::Index k = 0; k < at.jacobian.size(); ++k) {
        EXPECT_LE(region.jacobian(k).lower(), at.jacobian(k) + slack);
        EXPECT_GE(region.jacobian(k).upper(), at.jacobian(k) - slack);
      }
    }
  }
}

TEST(ModelRegion, ReverseModeGradientEqualsTheForwardModeJacobian) {
  // logit_gradient (the attack's reverse mode) against propagate's forward-mode Jacobian.
  const Model m = load_model(fixture() / "vit_digits.safetensors");
  const TestSet t = read_test_set();
  for (std::size_t i : {0, 7}) {
    SCOPED_TRACE(i);
    testing::expect_reverse_mode_matches_forward_mode(m, image(t, i), 3 + i, kTorchTolerance,
                                                      kJacobianRoundingSlack);
  }
}

TEST(ModelRegion, CertifiedBallsHoldUnderSamplingAndBelowTheAttack) {
  const Model m = load_model(fixture() / "vit_digits.safetensors");
  const TestSet t = read_test_set();
  const ConvertedModel<double> md(m);
  const ConvertedModel<interval64> mi(m);
  std::mt19937_64 rng(11);
  std::normal_distribution<double> normal;
  const std::size_t i = 1;
  const Vector<double> x = image(t, i);
  const int y = int(t.labels.data[i]);
  const AttackResult a = attack(md, x, y);
  ASSERT_TRUE(a.found);
  Eigen::Index flipped = 0;
  forward(m, a.point).maxCoeff(&flipped);
  EXPECT_NE(int(flipped), y);
  EXPECT_NEAR((a.point - x).norm(), a.radius, testing::rounding_bound<double>(64, 64) * a.radius);
  const CertifiedRadius c = certified_radius(mi, x, y, a.radius, 0.5);
  EXPECT_GT(c.radius, 0);
  EXPECT_LE(c.radius, a.radius);
  EXPECT_TRUE(certify_ball(mi, x, y, c.radius));
  for (int s = 0; s < 64; ++s) {  // points on the certified sphere keep the label
    Vector<double> d(64);
    for (auto& v : d) v = normal(rng);
    Eigen::Index pred = 0;
    forward(m, Vector<double>(x + (c.radius / d.norm()) * d)).maxCoeff(&pred);
    EXPECT_EQ(int(pred), y);
  }
}

TEST(ModelRegion, NaiveFactorsAreCertifiedUpperBoundsOfSampledSlopes) {
  // Each factor bounds its stage's Lipschitz constant: compare the product with the slope of the whole
  // network between nearby points (a lower estimate), which it must exceed.
  const Model m = load_model(fixture() / "vit_digits.safetensors");
  std::string why;
  const auto factors = global_lipschitz_factors(m, why);
  ASSERT_TRUE(factors.has_value()) << why;
  EXPECT_EQ(factors->size(), 1 + 2 * m.blocks.size() + 2);
  double product = 1;
  for (const auto& f : *factors) {
    EXPECT_GT(f.upper, 0) << f.stage;
    product *= f.upper;
  }
  const TestSet t = read_test_set();
  const ConvertedModel<double> md(m);
  const ModelPass<double> pass = propagate(md, image(t, 2), 0.0);
  EXPECT_GE(product, spectral_norm_upper_certified(pass.jacobian).lower);
}

TEST(ModelRegion, NaiveFactorsRefuseStagesTheyDoNotBound) {
  // The factors bound LayerNorm stages and ungated MLPs: the same model with RMSNorm, or with a gate on one
  // MLP, has no naive certificate, and says why (LLaMA files reach neither case today, being causal).
  const Model vit = load_model(fixture() / "vit_digits.safetensors");
  std::string why;
  Model rms = vit;
  rms.norm = Prenorm::rmsnorm;
  EXPECT_FALSE(global_lipschitz_factors(rms, why).has_value());
  EXPECT_NE(why.find("RMSNorm"), std::string::npos) << why;
  Model gated = vit;
  gated.blocks.back().gate = gated.blocks.back().fc1;
  EXPECT_FALSE(global_lipschitz_factors(gated, why).has_value());
  EXPECT_NE(why.find("gated"), std::string::npos) << why;
  EXPECT_TRUE(global_lipschitz_factors(vit, why).has_value()) << why;
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
