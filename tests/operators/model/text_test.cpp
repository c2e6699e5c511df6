// load_model's text layouts (GPT-2, BERT) + forward against PyTorch: tests/data/text_models holds tiny random
// models in Hugging Face naming, written by generate.py there with torch float64 logits from a reference
// forward written from the published model code. Also the tied LM head, the optional wrapper prefixes, the
// interval64 enclosure, the tangents of the region pass on the n·d embedding coordinates (finite
// differences), and the refusals: a mismatched tensor named with both shapes, a config of another layout, an
// unknown layout.
#include <gtest/gtest.h>

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
/// the embedding sum, two blocks (LayerNorms over 16 features, ≤ 6-key softmaxes, MLPs of width 32), the
/// final norm or pooler and the head: a chain of ≲ 1024 rounded operations; c = 4 for the two sides'
/// different summation orders (2) and the LayerNorms' cancelling means (2). A wrong weight mapping, a missing
/// mask or the wrong GELU gives errors of 1e-3 or more.
const double kTorchTolerance = testing::rounding_bound<double>(4, 1024);

std::filesystem::path fixture(const std::string& name) {
  return std::filesystem::path(REGATTA_TEST_DATA_DIR) / "text_models" / name;
}

struct TextSet {
  io::Array tokens, labels, logits;
};

TextSet read_set(const std::string& name) {
  const auto path = fixture(name) / "test_set.npz";
  return {io::read_npz_member(path, "tokens", io::default_max_file_bytes, io::NonFloat::integers),
          io::read_npz_member(path, "labels", io::default_max_file_bytes, io::NonFloat::integers),
          io::read_npz_member(path, "logits")};
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
    const double scale = std::max(1.0, ref.cwiseAbs().maxCoeff());
    worst = std::max(worst, (z - ref).cwiseAbs().maxCoeff() / scale);
  }
  return worst;
}

Model from_tensors(std::map<std::string, io::Array> arrays, const std::string& name) {
  const auto cfg = fixture(name) / "config.json";
  return model_from_tensors(
      std::move(arrays), "test", [&cfg] { return io::read_json(cfg); }, cfg.string());
}

std::string load_error(std::map<std::string, io::Array> arrays, const std::string& name) {
  try {
    from_tensors(std::move(arrays), name);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

/// The same tensors with `prefix` removed from every name that has it.
std::map<std::string, io::Array> strip(const std::map<std::string, io::Array>& arrays,
                                       const std::string& prefix) {
  std::map<std::string, io::Array> out;
  for (const auto& [name, a] : arrays)
    out.emplace(name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name, a);
  return out;
}

TEST(TextModel, LoadsGpt2WithItsHuggingFaceConfig) {
  const Model m = load_model(fixture("gpt2") / "model.safetensors");
  EXPECT_EQ(m.layout, "gpt2");
  EXPECT_TRUE(m.text());
  EXPECT_EQ(m.vocab, 50);
  EXPECT_EQ(m.context, 16);
  EXPECT_EQ(m.width, 16);
  EXPECT_EQ(m.heads, 2);
  EXPECT_EQ(m.mlp_width, 32);
  EXPECT_EQ(m.blocks.size(), 2u);
  EXPECT_EQ(m.classes, 3);
  EXPECT_TRUE(m.prenorm);
  EXPECT_TRUE(m.causal);
  EXPECT_EQ(m.pooling, Pooling::last);
  EXPECT_EQ(m.activation, Activation::gelu_tanh);
  EXPECT_EQ(m.eps, 1e-5);
  EXPECT_TRUE(m.attention_options().causal);
}

TEST(TextModel, Gpt2LogitsEqualTorch) {
  const Model m = load_model(fixture("gpt2") / "model.safetensors");
  const TextSet t = read_set("gpt2");
  ASSERT_EQ(t.tokens.shape, (std::vector<std::size_t>{8, 6}));
  EXPECT_LE(worst_difference(m, t.tokens, t.logits), kTorchTolerance);
}

TEST(TextModel, Gpt2WithoutScoreIsTheTiedLanguageModelHead) {
  auto arrays = io::read_safetensors(fixture("gpt2") / "model.safetensors");
  arrays.erase("score.weight");
  const Model m = from_tensors(arrays, "gpt2");
  EXPECT_EQ(m.classes, 50);
  const io::Array lm = io::read_npz_member(fixture("gpt2") / "test_set.npz", "lm_logits");
  EXPECT_LE(worst_difference(m, read_set("gpt2").tokens, lm), kTorchTolerance);
}

TEST(TextModel, WrapperPrefixesAreOptional) {
  // GPT2Model / BertModel files have no "transformer." / "bert." prefix: the same network, bit for bit.
  for (const auto& [name, prefix] : {std::pair{"gpt2", "transformer."}, std::pair{"bert", "bert."}}) {
    const auto arrays = io::read_safetensors(fixture(name) / "model.safetensors");
    const Model a = from_tensors(arrays, name), b = from_tensors(strip(arrays, prefix), name);
    const TextSet t = read_set(name);
    const Vector<double> x = a.embed_tokens(ids(t.tokens, 0));
    EXPECT_EQ(forward(a, x), forward(b, x)) << name;
  }
}

TEST(TextModel, LoadsBertAndItsLogitsEqualTorch) {
  const Model m = load_model(fixture("bert") / "model.safetensors");
  EXPECT_EQ(m.layout, "bert");
  EXPECT_EQ(m.vocab, 40);
  EXPECT_EQ(m.context, 16);
  EXPECT_FALSE(m.prenorm);
  EXPECT_FALSE(m.causal);
  EXPECT_EQ(m.pooling, Pooling::cls);
  EXPECT_TRUE(m.embed_norm.present());
  EXPECT_FALSE(m.final_norm.present());
  EXPECT_EQ(m.pooler.W.rows(), 16);
  EXPECT_EQ(m.eps, 1e-12);
  EXPECT_EQ(m.activation, Activation::gelu_erf);
  const TextSet t = read_set("bert");
  EXPECT_LE(worst_difference(m, t.tokens, t.logits), kTorchTolerance);
}

TEST(TextModel, IntervalForwardEnclosesTorch) {
  // Torch's logits are within kTorchTolerance of the exact ones, which the interval64 forward encloses.
  for (const char* name : {"gpt2", "bert"}) {
    const Model m = load_model(fixture(name) / "model.safetensors");
    const TextSet t = read_set(name);
    for (std::size_t i = 0; i < t.tokens.shape[0]; ++i) {
      const Vector<interval64> z =
          forward<interval64>(m, m.embed_tokens(ids(t.tokens, i)).cast<interval64>());
      for (Eigen::Index c = 0; c < z.size(); ++c) {
        const double ref = t.logits.data[i * std::size_t(m.classes) + std::size_t(c)];
        EXPECT_LE(z(c).lower(), ref + kTorchTolerance) << name << " " << i;
        EXPECT_GE(z(c).upper(), ref - kTorchTolerance) << name << " " << i;
      }
    }
  }
}

/// Central differences with step h: h²/6·|z‴| (bounded by kThirdDerivativeRatio times the Jacobian's scale:
/// LayerNorm 1/σ factors cubed along the chain) plus the logits' rounding kTorchTolerance·|z| divided by h.
constexpr double kFiniteDifferenceStep = 1e-5;
constexpr double kThirdDerivativeRatio = 1000;

TEST(TextModel, EmbeddingJacobianMatchesFiniteDifferences) {
  // The region pass's double tangents start on the n·d embedding coordinates (and go through BERT's
  // embedding LayerNorm and tanh pooler); each column against a central difference of forward.
  for (const char* name : {"gpt2", "bert"}) {
    const Model m = load_model(fixture(name) / "model.safetensors");
    const ConvertedModel<double> md(m);
    const Vector<double> x = m.embed_tokens(ids(read_set(name).tokens, 1));
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
      EXPECT_LE((fd - pass.jacobian.col(j)).cwiseAbs().maxCoeff(), tolerance) << name << " " << j;
    }
  }
}

/// The reverse- and forward-mode chains round along ≲ 1024 operations per stage, each stage amplifying its
/// input's error by ≲ 100, over ≲ 6 stages.
const double kGradientSlack = testing::rounding_bound<double>(100, 6 * 1024);

TEST(TextModel, ReverseModeGradientEqualsTheForwardModeJacobian) {
  // logit_gradient (the attack's reverse mode, through BERT's embedding LayerNorm, post-norm blocks and
  // pooler, GPT-2's causal pre-norm blocks) against propagate's forward-mode Jacobian.
  for (const char* name : {"gpt2", "bert"}) {
    SCOPED_TRACE(name);
    const Model m = load_model(fixture(name) / "model.safetensors");
    testing::expect_reverse_mode_matches_forward_mode(m, m.embed_tokens(ids(read_set(name).tokens, 1)), 4,
                                                      kTorchTolerance, kGradientSlack);
  }
}

TEST(TextModel, CertifiedEmbeddingBallsHoldUnderSamplingAndBelowTheAttack) {
  // GPT-2, one input: the attack flips the label at its radius, the certified radius is below it, and points
  // on the certified sphere around the token-embedding matrix keep the label.
  const Model m = load_model(fixture("gpt2") / "model.safetensors");
  const TextSet t = read_set("gpt2");
  const ConvertedModel<double> md(m);
  const ConvertedModel<interval64> mi(m);
  const Vector<double> x = m.embed_tokens(ids(t.tokens, 0));
  const int y = int(t.labels.data[0]);
  const AttackResult a = attack(md, x, y);
  ASSERT_TRUE(a.found);
  Eigen::Index flipped = 0;
  forward(m, a.point).maxCoeff(&flipped);
  EXPECT_NE(int(flipped), y);
  const CertifiedRadius c = certified_radius(mi, x, y, a.radius, 0.5);
  EXPECT_GT(c.radius, 0);
  EXPECT_LE(c.radius, a.radius);
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal;
  for (int s = 0; s < 64; ++s) {
    Vector<double> d(x.size());
    for (auto& v : d) v = normal(rng);
    Eigen::Index pred = 0;
    forward(m, Vector<double>(x + (c.radius / d.norm()) * d)).maxCoeff(&pred);
    EXPECT_EQ(int(pred), y);
  }
}

TEST(TextModel, AMismatchedTensorIsNamedWithBothShapes) {
  auto arrays = io::read_safetensors(fixture("gpt2") / "model.safetensors");
  io::Array& fc = arrays.at("transformer.h.1.mlp.c_fc.weight");
  fc.shape = {16, 31};
  fc.data.resize(16 * 31);
  std::string e = load_error(arrays, "gpt2");
  EXPECT_NE(e.find("transformer.h.1.mlp.c_fc.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("(16, 31)"), std::string::npos) << e;
  EXPECT_NE(e.find("(16, 32)"), std::string::npos) << e;

  auto bert = io::read_safetensors(fixture("bert") / "model.safetensors");
  io::Array& key = bert.at("bert.encoder.layer.0.attention.self.key.weight");
  key.shape = {15, 16};
  key.data.resize(15 * 16);
  e = load_error(bert, "bert");
  EXPECT_NE(e.find("bert.encoder.layer.0.attention.self.key.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("(15, 16)"), std::string::npos) << e;
  EXPECT_NE(e.find("(16, 16)"), std::string::npos) << e;
}

TEST(TextModel, LlamaUnknownLayoutsAndContradictingConfigsAreRefused) {
  const auto arrays = io::read_safetensors(fixture("gpt2") / "model.safetensors");
  const io::Array& any = arrays.at("transformer.wte.weight");
  // LLaMA names are the LLaMA layout (model_llama_test.cpp): GPT-2's config contradicts it.
  const std::string llama = load_error(
      {{"model.embed_tokens.weight", any}, {"model.layers.0.self_attn.q_proj.weight", any}}, "gpt2");
  EXPECT_NE(llama.find("llama layout"), std::string::npos) << llama;
  const std::string other = load_error({{"embedding.weight", any}}, "gpt2");
  EXPECT_NE(other.find("h.0.attn.c_attn.weight"), std::string::npos) << other;
  EXPECT_NE(other.find("found: embedding.weight"), std::string::npos) << other;
  // GPT-2 tensors read with BERT's config: the model_type says another layout.
  EXPECT_NE(load_error(arrays, "bert").find("model_type"), std::string::npos);
  // Without score.weight the head is the LM head: BERT requires its classifier.
  auto bert = io::read_safetensors(fixture("bert") / "model.safetensors");
  bert.erase("classifier.weight");
  EXPECT_NE(load_error(bert, "bert").find("classifier.weight"), std::string::npos);
}

}  // namespace
}  // namespace regatta::operators
