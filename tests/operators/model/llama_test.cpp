// load_model's LLaMA layout (RMSNorm pre-norm, grouped-query attention with rotary embeddings, SwiGLU MLP,
// causal, last-token head) against PyTorch: tests/data/text_models/llama holds a tiny seeded model in Hugging
// Face naming with torch float64 logits from a reference forward written in generate.py from the published
// formulas. Also the tied LM head, the optional "model." prefix, the interval64 enclosure, SiLU's interval
// enclosure against pointwise values, the region pass's tangents (finite differences) and its certified
// balls (sampled points keep the label), the affine-form margin (tight at r = 0, below the margin's
// enclosure at sampled points of the ball), and the refusals (a mismatched tensor named with both shapes, a
// config the model does not follow).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/io/json_file.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/io/safetensors.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_affine.hpp>
#include <regatta/operators/model_robustness.hpp>
#include <regatta/operators/model_tensors.hpp>
#include <string>
#include <vector>

#include "support/model_gradient.hpp"
#include "support/tolerance.hpp"

namespace regatta::operators {
namespace {

// The command line's thread setting (core/resources.hpp): Eigen's products on one thread. The passes'
// matrices are small, and on a loaded two-core machine a parallel GEMM's synchronisation made these tests
// several times slower.
const ThreadSetting kThreads = configure_threads();

/// |ours − torch| ≤ kTorchTolerance·max(1, ‖torch‖∞) per logit. Both sides evaluate the same float64 network:
/// two blocks (RMSNorms over 16 features, rotations by cos/sin of the same angles, ≤ 6-key softmaxes, SwiGLU
/// of width 24), the final norm and the head: a chain of ≲ 1024 rounded operations; c = 4 for the two sides'
/// different summation orders (2) and their different cos/sin (torch's of a float64 angle, ours of the
/// binary64 angle i·θ^(−2a/d_h): a few ulp each, 2). A wrong rotation convention, a missing key/value
/// repetition or gate gives errors of 1e-2 or more.
const double kTorchTolerance = testing::rounding_bound<double>(4, 1024);

std::filesystem::path fixture(const std::string& name) {
  return std::filesystem::path(REGATTA_TEST_DATA_DIR) / "text_models" / name;
}

io::Array member(const std::string& name, bool integers = false) {
  return io::read_npz_member(fixture("llama") / "test_set.npz", name, io::default_max_file_bytes,
                             integers ? io::NonFloat::integers : io::NonFloat::list);
}

std::vector<int> ids(const io::Array& tokens, std::size_t i) {
  const std::size_t n = tokens.shape[1];
  std::vector<int> out;
  for (std::size_t k = 0; k < n; ++k) out.push_back(int(tokens.data[i * n + k]));
  return out;
}

/// The worst relative difference of our logits from `reference` (B × classes) over the set.
double worst_difference(const Model& m, const io::Array& tokens, const io::Array& reference) {
  double worst = 0;
  const std::size_t classes = reference.shape[1];
  for (std::size_t i = 0; i < tokens.shape[0]; ++i) {
    const Vector<double> z = forward(m, m.embed_tokens(ids(tokens, i)));
    const Eigen::Map<const Vector<double>> ref(reference.data.data() + i * classes, Eigen::Index(classes));
    worst = std::max(worst, (z - ref).cwiseAbs().maxCoeff() / std::max(1.0, ref.cwiseAbs().maxCoeff()));
  }
  return worst;
}

Model from_tensors(std::map<std::string, io::Array> arrays, nlohmann::json config) {
  return model_from_tensors(
      std::move(arrays), "test", [&config] { return config; }, "config.json");
}

nlohmann::json llama_config() { return io::read_json(fixture("llama") / "config.json"); }
std::map<std::string, io::Array> llama_tensors() {
  return io::read_safetensors(fixture("llama") / "model.safetensors");
}

std::string load_error(std::map<std::string, io::Array> arrays, nlohmann::json config) {
  try {
    from_tensors(std::move(arrays), std::move(config));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(LlamaModel, LoadsWithItsHuggingFaceConfig) {
  const Model m = load_model(fixture("llama") / "model.safetensors");
  EXPECT_EQ(m.layout, "llama");
  EXPECT_TRUE(m.text());
  EXPECT_EQ(m.vocab, 40);
  EXPECT_EQ(m.context, 16);
  EXPECT_EQ(m.width, 16);
  EXPECT_EQ(m.heads, 4);
  EXPECT_EQ(m.mlp_width, 24);
  EXPECT_EQ(m.blocks.size(), 2u);
  EXPECT_EQ(m.classes, 3);
  EXPECT_TRUE(m.prenorm);
  EXPECT_TRUE(m.causal);
  EXPECT_EQ(m.norm, Prenorm::rmsnorm);
  EXPECT_EQ(m.pooling, Pooling::last);
  EXPECT_EQ(m.activation, Activation::silu);
  EXPECT_EQ(m.eps, 1e-6);
  EXPECT_EQ(m.pos_embed.size(), 0);
  for (const TransformerBlock& blk : m.blocks) {
    EXPECT_TRUE(blk.gated());
    ASSERT_TRUE(blk.attention.rotary.has_value());
    EXPECT_EQ(blk.attention.rotary->theta, 100.0);
    EXPECT_EQ(blk.attention.WK.size(), 4u);  // two key/value heads, each repeated over two query heads
    EXPECT_EQ(blk.attention.WK[0], blk.attention.WK[1]);
    EXPECT_NE(blk.attention.WK[1], blk.attention.WK[2]);
  }
  EXPECT_EQ(m.attention_options().prenorm, Prenorm::rmsnorm);
}

TEST(LlamaModel, LogitsEqualTorch) {
  const Model m = load_model(fixture("llama") / "model.safetensors");
  const io::Array tokens = member("tokens", true);
  ASSERT_EQ(tokens.shape, (std::vector<std::size_t>{8, 6}));
  EXPECT_LE(worst_difference(m, tokens, member("logits")), kTorchTolerance);
}

TEST(LlamaModel, WithoutScoreTheHeadIsTheLmHeadOrTheTiedEmbedding) {
  auto arrays = llama_tensors();
  const io::Array lm = member("lm_logits");
  const io::Array tokens = member("tokens", true);
  arrays.erase("score.weight");
  // No head and no tie: refused, naming both heads.
  const std::string e = load_error(arrays, llama_config());
  EXPECT_NE(e.find("lm_head.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("tie_word_embeddings"), std::string::npos) << e;
  nlohmann::json tied = llama_config();
  tied["tie_word_embeddings"] = true;
  const Model m = from_tensors(arrays, tied);
  EXPECT_EQ(m.classes, 40);
  EXPECT_LE(worst_difference(m, tokens, lm), kTorchTolerance);
  // An explicit lm_head equal to the embedding: the same network.
  arrays.emplace("lm_head.weight", arrays.at("model.embed_tokens.weight"));
  EXPECT_LE(worst_difference(from_tensors(arrays, llama_config()), tokens, lm), kTorchTolerance);
}

TEST(LlamaModel, TheModelPrefixIsOptional) {
  // LlamaModel files have no "model." prefix: the same network, bit for bit.
  const auto arrays = llama_tensors();
  std::map<std::string, io::Array> stripped;
  for (const auto& [name, a] : arrays)
    stripped.emplace(name.rfind("model.", 0) == 0 ? name.substr(6) : name, a);
  const Model a = from_tensors(arrays, llama_config()), b = from_tensors(stripped, llama_config());
  const Vector<double> x = a.embed_tokens(ids(member("tokens", true), 0));
  EXPECT_EQ(forward(a, x), forward(b, x));
}

TEST(LlamaModel, IntervalForwardEnclosesTorch) {
  // Torch's logits are within kTorchTolerance of the exact ones, which the interval64 forward encloses.
  const Model m = load_model(fixture("llama") / "model.safetensors");
  const io::Array tokens = member("tokens", true), logits = member("logits");
  for (std::size_t i = 0; i < tokens.shape[0]; ++i) {
    const Vector<interval64> z = forward<interval64>(m, m.embed_tokens(ids(tokens, i)).cast<interval64>());
    for (Eigen::Index c = 0; c < z.size(); ++c) {
      const double ref = logits.data[i * std::size_t(m.classes) + std::size_t(c)];
      EXPECT_LE(z(c).lower(), ref + kTorchTolerance) << i;
      EXPECT_GE(z(c).upper(), ref - kTorchTolerance) << i;
    }
  }
}

TEST(LlamaModel, SiluEnclosuresHoldThePointValues) {
  // The interval SiLU (monotone pieces around its minimum near −1.2785) and SiLU′ (naive formula) hold the
  // double values at points of each interval, on intervals left of, around and right of the minimum, and
  // the minimum itself lies above the constant −0.2785 the enclosure uses.
  std::mt19937_64 rng(21);
  std::uniform_real_distribution<double> uniform(-8, 8);
  for (int k = 0; k < 400; ++k) {
    double a = uniform(rng), b = uniform(rng);
    if (k % 4 == 0) a = -1.2785 - std::fabs(a) / 64, b = -1.2784 + std::fabs(b) / 64;  // around x*
    if (a > b) std::swap(a, b);
    Matrix<interval64> J(1, 1);
    J(0, 0) = interval64::hull(a, b);
    const interval64 v = activate(Activation::silu, J)(0, 0),
                     dv = activation_derivative(Activation::silu, J)(0, 0);
    for (int t = 0; t <= 16; ++t) {
      Matrix<double> x(1, 1);
      x(0, 0) = a + (b - a) * t / 16;
      const double f = activate(Activation::silu, x)(0, 0),
                   df = activation_derivative(Activation::silu, x)(0, 0);
      // The double values are within a few ulp of the exact ones, which the enclosures hold.
      const double ulps = testing::rounding_bound<double>(8) * std::max(1.0, std::fabs(f));
      EXPECT_LE(v.lower(), f + ulps) << a << " " << b;
      EXPECT_GE(v.upper(), f - ulps) << a << " " << b;
      EXPECT_LE(dv.lower(), df + ulps) << a << " " << b;
      EXPECT_GE(dv.upper(), df - ulps) << a << " " << b;
    }
  }
  Matrix<double> minimum(1, 1);
  minimum(0, 0) = -1.2784645427610738;  // x*, the root of 1 + x(1 − s(x)) (mpmath, 40 digits)
  EXPECT_GT(activate(Activation::silu, minimum)(0, 0), -0.2785);
  EXPECT_LT(activate(Activation::silu, minimum)(0, 0), -0.2784);
}

TEST(LlamaModel, SiluCurvatureBoundOfTheAffineRemainderHolds) {
  // model/affine/nonlinear.cpp encloses SiLU″ = s(1 − s)(2 + x(1 − 2s)) and intersects it with |SiLU″| ≤ 1/2
  // (argued there):
  // recomputed here as central differences of SiLU′ (an independent evaluation of the derivative the
  // formula differentiates) on a grid over [−40, 40]. Their error is at most h²/6·max|SiLU⁗| + 8 eps/h
  // (max|SiLU⁗| = 1/2 by mpmath on a grid; 1 is taken). The bound is also attained at 0 within that error,
  // so it is the maximum and not a loose constant.
  const double h = 1e-4;
  const double error = h * h / 6 + testing::rounding_bound<double>(8) / h;
  double worst = 0;
  Matrix<double> x(1, 3);
  for (int k = -400000; k <= 400000; k += 7) {
    const double v = k * 1e-4;
    x << v - h, v, v + h;
    const Matrix<double> d = activation_derivative(Activation::silu, x);
    worst = std::max(worst, std::fabs(d(0, 2) - d(0, 0)) / (2 * h));
  }
  EXPECT_LE(worst, 0.5 + error);
  x << -h, 0, h;
  const Matrix<double> d = activation_derivative(Activation::silu, x);
  EXPECT_GE((d(0, 2) - d(0, 0)) / (2 * h), 0.5 - error);
}

/// Central differences with step h: h²/6·|z‴| (bounded by kThirdDerivativeRatio times the Jacobian's scale)
/// plus the logits' rounding kTorchTolerance·|z| divided by h.
constexpr double kFiniteDifferenceStep = 1e-5;
constexpr double kThirdDerivativeRatio = 1000;

TEST(LlamaModel, EmbeddingJacobianMatchesFiniteDifferences) {
  // The region pass's double tangents through RMSNorm, rotary attention and the gated MLP; each column
  // against a central difference of forward.
  const Model m = load_model(fixture("llama") / "model.safetensors");
  const ConvertedModel<double> md(m);
  const Vector<double> x = m.embed_tokens(ids(member("tokens", true), 1));
  const ModelPass<double> pass = propagate(md, x, 0.0);
  ASSERT_EQ(pass.jacobian.cols(), x.size());
  EXPECT_LE((pass.logits - forward(m, x)).cwiseAbs().maxCoeff(), kTorchTolerance);
  const double h = kFiniteDifferenceStep;
  const double tolerance = h * h / 6 * kThirdDerivativeRatio * pass.jacobian.cwiseAbs().maxCoeff() +
                           kTorchTolerance * std::max(1.0, pass.logits.cwiseAbs().maxCoeff()) / h;
  for (Eigen::Index j = 0; j < x.size(); ++j) {
    Vector<double> e = Vector<double>::Zero(x.size());
    e(j) = h;
    const Vector<double> fd =
        (forward(m, Vector<double>(x + e)) - forward(m, Vector<double>(x - e))) / (2 * h);
    EXPECT_LE((fd - pass.jacobian.col(j)).cwiseAbs().maxCoeff(), tolerance) << j;
  }
}

/// The reverse- and forward-mode chains round along ≲ 1024 operations per stage, each stage amplifying its
/// input's error by ≲ 100, over ≲ 6 stages.
const double kGradientSlack = testing::rounding_bound<double>(100, 6 * 1024);

TEST(LlamaModel, ReverseModeGradientEqualsTheForwardModeJacobian) {
  // logit_gradient through RMSNorm, rotary attention and the gated MLP against propagate's forward mode.
  const Model m = load_model(fixture("llama") / "model.safetensors");
  testing::expect_reverse_mode_matches_forward_mode(m, m.embed_tokens(ids(member("tokens", true), 1)), 6,
                                                    kTorchTolerance, kGradientSlack);
}

/// The interval64 enclosure of min_c z_y − z_c at one point.
interval64 margin_enclosure(const Model& m, const Vector<double>& x, int y) {
  const Vector<interval64> z = forward<interval64>(m, Vector<interval64>(x.cast<interval64>()));
  double lo = INFINITY, up = INFINITY;
  for (Eigen::Index c = 0; c < z.size(); ++c) {
    if (c == y) continue;
    lo = std::min(lo, (z(y) - z(c)).lower());
    up = std::min(up, (z(y) - z(c)).upper());
  }
  return interval64::hull(lo, up);
}

TEST(LlamaModel, RegionAndAffineCertificatesHoldAtSampledPoints) {
  // Per input: the attack flips the label at its radius; the region pass certifies a ball below it whose
  // sphere keeps the label; the affine margin at r = 0 is the margin up to its a-priori rounding slack
  // (kRoundingLoss, as in model_affine_test.cpp: a wrong rotation or gate moves it by O(1)), and at a radius
  // where it is positive it lies below the margin's enclosure at sampled points (sphere, interior, the
  // attack direction); the affine radius lies below the attack radius.
  const double kRoundingLoss = 1e-4;
  const Model m = load_model(fixture("llama") / "model.safetensors");
  EXPECT_EQ(affine_unsupported(m), "");
  const ConvertedModel<double> md(m);
  const ConvertedModel<interval64> mi(m);
  const io::Array tokens = member("tokens", true);
  std::mt19937_64 rng(23);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform;
  for (std::size_t i : {0}) {
    const Vector<double> x = m.embed_tokens(ids(tokens, i));
    Eigen::Index predicted = 0;
    forward(m, x).maxCoeff(&predicted);
    const int y = int(predicted);
    const AttackResult a = attack(md, x, y);
    ASSERT_TRUE(a.found) << i;
    const CertifiedRadius region = certified_radius(mi, x, y, a.radius, 0.5);
    EXPECT_GT(region.radius, 0) << i;
    EXPECT_LE(region.radius, a.radius) << i;
    const interval64 e = margin_enclosure(m, x, y);
    const double at_centre = affine_margin(m, x, y, 0.0);
    EXPECT_LE(at_centre, e.upper()) << i;
    EXPECT_GE(at_centre, e.lower() - kRoundingLoss * std::fabs(e.upper())) << i;
    const CertifiedRadius affine = affine_certified_radius(m, x, y, a.radius, 0.5);
    EXPECT_GT(affine.radius, 0) << i;
    EXPECT_LE(affine.radius, a.radius) << i;
    const Vector<double> towards = (a.point - x).normalized();
    for (double r : {region.radius, affine.radius, 2 * affine.radius}) {
      const double lower = affine_margin(m, x, y, r);
      for (int k = 0; k < 12; ++k) {
        Vector<double> d(x.size());
        for (auto& v : d) v = normal(rng);
        const double t = k % 2 == 0 ? 1.0 : std::pow(uniform(rng), 1.0 / double(x.size()));
        const Vector<double> point = x + (r * t) * (k % 3 == 0 ? towards : Vector<double>(d.normalized()));
        EXPECT_LE(lower, margin_enclosure(m, point, y).upper()) << i << " r = " << r;
        if (r <= std::max(region.radius, affine.radius)) {
          Eigen::Index pred = 0;
          forward(m, point).maxCoeff(&pred);
          EXPECT_EQ(int(pred), y) << i << " r = " << r;
        }
      }
    }
  }
}

TEST(LlamaModel, MismatchedTensorsAndUnmodelledConfigsAreRefused) {
  auto arrays = llama_tensors();
  io::Array& k = arrays.at("model.layers.1.self_attn.k_proj.weight");
  k.shape = {7, 16};
  k.data.resize(7 * 16);
  std::string e = load_error(arrays, llama_config());
  EXPECT_NE(e.find("model.layers.1.self_attn.k_proj.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("(7, 16)"), std::string::npos) << e;
  EXPECT_NE(e.find("(8, 16)"), std::string::npos) << e;
  arrays = llama_tensors();
  io::Array& gate = arrays.at("model.layers.0.mlp.gate_proj.weight");
  gate.shape = {23, 16};
  gate.data.resize(23 * 16);
  e = load_error(arrays, llama_config());
  EXPECT_NE(e.find("model.layers.0.mlp.gate_proj.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("(23, 16)"), std::string::npos) << e;
  EXPECT_NE(e.find("(24, 16)"), std::string::npos) << e;
  const auto refused = [](const char* key, nlohmann::json value) {
    nlohmann::json config = llama_config();
    config[key] = std::move(value);
    return load_error(llama_tensors(), config);
  };
  EXPECT_NE(refused("hidden_act", "gelu").find("hidden_act"), std::string::npos);
  EXPECT_NE(refused("rope_scaling", {{"rope_type", "llama3"}}).find("rope_scaling"), std::string::npos);
  EXPECT_NE(refused("num_key_value_heads", 4).find("k_proj"), std::string::npos);
  EXPECT_NE(refused("num_key_value_heads", 3).find("num_key_value_heads"), std::string::npos);
  EXPECT_NE(refused("rope_theta", -1.0).find("rope_theta"), std::string::npos);
  EXPECT_NE(refused("model_type", "gpt2").find("model_type"), std::string::npos);
  // Meta's original naming is named, not read.
  const auto meta = load_error({{"tok_embeddings.weight", llama_tensors().at("model.embed_tokens.weight")}},
                               llama_config());
  EXPECT_NE(meta.find("Hugging Face naming"), std::string::npos) << meta;
}

}  // namespace
}  // namespace regatta::operators
