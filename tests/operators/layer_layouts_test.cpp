// load_layer on the fused-projection layouts of real checkpoints (timm ViT attn.qkv, GPT-2 Conv1D c_attn)
// with their learned pre-norm weights: attend() on the loaded layer against the outputs torch computed in
// tests/data/layouts/generate.py from the published model code (an independent implementation of the same
// sublayer, y = x + Attn(Norm(x))).
#include <gtest/gtest.h>

#include <string>

#include <regatta/core/error.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/layer_tensors.hpp>
#include "../support/tolerance.hpp"

namespace regatta::operators {
namespace {

const std::string data = std::string(REGATTA_TEST_DATA_DIR) + "/layouts/";
/// The sublayer is ~100 rounded operations deep (LayerNorm, projections of width 8, a softmax over 5 keys);
/// float64 torch and regatta round differently, so 16 × 100 u covers both.
const double forward_tolerance = testing::rounding_bound<double>(16, 100);

void expect_matches_torch(const std::string& file, const std::string& prefix, double eps, bool causal,
                          Prenorm prenorm = Prenorm::layernorm, const RotaryStatement& rope = {}) {
  const auto arrays = io::read_npz(data + file);
  const Matrix<double> X = arrays.at("input").matrix(), Y = arrays.at("output").matrix();
  AttentionLayer layer =
      load_layer(data + file, 2, AttentionKind::dot, prefix, OutputProjection::from_file, rope);
  ASSERT_EQ(layer.norm_gamma.size(), 8) << "the pre-norm weight must be read from the file";
  if (prenorm == Prenorm::layernorm) {
    ASSERT_EQ(layer.norm_beta.size(), 8);
  }
  layer.norm_eps = eps;
  AttentionOptions options;
  options.prenorm = prenorm;
  options.residual = true;
  options.causal = causal;
  const Matrix<double> F = attend(layer, X, options);
  EXPECT_LE((F - Y).cwiseAbs().maxCoeff(), forward_tolerance * (1 + Y.cwiseAbs().maxCoeff()));
  // Without the learned weights the output differs: they are not silently replaced by γ = 1, β = 0.
  layer.norm_gamma.resize(0);
  layer.norm_beta.resize(0);
  EXPECT_GT((attend(layer, X, options) - Y).cwiseAbs().maxCoeff(), 1e3 * forward_tolerance);
}

TEST(LayerLayouts, TimmVitBlockMatchesTorch) {
  expect_matches_torch("timm_vit_block.npz", "blocks.0.", 1e-6, false);
}

TEST(LayerLayouts, Gpt2Conv1dBlockMatchesTorch) {
  expect_matches_torch("gpt2_block.npz", "h.0.", 1e-5, true);
}

TEST(LayerLayouts, LlamaGroupedQueryAttentionMatchesTorch) {
  // The fixture's reference has no rotary embeddings, stated as --rope none.
  const RotaryStatement none = RotaryStatement::none();
  expect_matches_torch("llama_gqa_block.npz", "layers.0.", 1e-6, true, Prenorm::rmsnorm, none);
  const AttentionLayer layer = load_layer(data + "llama_gqa_block.npz", 2, AttentionKind::dot, "layers.0.",
                                          OutputProjection::from_file, none);
  EXPECT_EQ(layer.WK[0], layer.WK[1]);  // one key head shared by both query heads
  EXPECT_FALSE(layer.rotary);
  // 3 query heads do not divide the query width 8, so the key width 4 cannot be a whole number of heads.
  EXPECT_THROW(load_layer(data + "llama_gqa_block.npz", 3, AttentionKind::dot, "layers.0.",
                          OutputProjection::from_file, none),
               InputError);
}

TEST(LayerLayouts, LlamaWithoutARotaryStatementIsRefusedNamingTheFile) {
  // The weights of a LLaMA layer do not hold its rotary base: loading one without saying θ or none would
  // analyse a map without RoPE as the layer.
  for (const char* file : {"llama_gqa_block.npz", "llama_rope_block.npz"}) {
    try {
      load_layer(data + file, 2, AttentionKind::dot, "layers.0.");
      ADD_FAILURE() << file << " loaded without a rotary statement";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(file), std::string::npos) << what;
      EXPECT_NE(what.find("rotary"), std::string::npos) << what;
      EXPECT_NE(what.find("--rope THETA"), std::string::npos) << what;
      EXPECT_NE(what.find("--rope none"), std::string::npos) << what;
    }
  }
  // Other layouts need no statement, and take one (a GPT-NeoX-style layer under other names).
  EXPECT_FALSE(load_layer(data + "timm_vit_block.npz", 2, AttentionKind::dot, "blocks.0.").rotary);
  const AttentionLayer rotated = load_layer(data + "timm_vit_block.npz", 2, AttentionKind::dot, "blocks.0.",
                                            OutputProjection::from_file, RotaryStatement::with_theta(500));
  ASSERT_TRUE(rotated.rotary);
  EXPECT_EQ(rotated.rotary->theta, 500);
}

TEST(LayerLayouts, TensorsInMemoryLoadAsTheFile) {
  // layer_from_tensors is what load_layer calls after reading: the same layer from the same arrays, and the
  // errors name the collection given instead of the file.
  const std::string file = data + "timm_vit_block.npz";
  const AttentionLayer a = load_layer(file, 2, AttentionKind::dot, "blocks.0.");
  const AttentionLayer b =
      layer_from_tensors(io::read_npz(file), "state_dict", 2, AttentionKind::dot, "blocks.0.");
  for (int h = 0; h < 2; ++h) {
    EXPECT_EQ(a.WQ[h], b.WQ[h]);
    EXPECT_EQ(a.WK[h], b.WK[h]);
    EXPECT_EQ(a.WV[h], b.WV[h]);
    EXPECT_EQ(a.bQ[h], b.bQ[h]);
  }
  EXPECT_EQ(a.WO, b.WO);
  EXPECT_EQ(a.bO, b.bO);
  EXPECT_EQ(a.norm_gamma, b.norm_gamma);
  EXPECT_EQ(a.norm_beta, b.norm_beta);
  try {
    layer_from_tensors(io::read_npz(file), "state_dict", 2, AttentionKind::dot, "nothing.");
    ADD_FAILURE() << "no tensor has the prefix";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "state_dict: no tensor name starts with prefix 'nothing.'");
  }
}

TEST(LayerLayouts, NoOutputProjectionIsTheIdentityWhenAskedAndAnErrorOtherwise) {
  const std::string file = data + "mha_no_out_proj.npz";
  const auto arrays = io::read_npz(file);
  const AttentionLayer layer = load_layer(file, 2, AttentionKind::dot, "", OutputProjection::identity);
  const Matrix<double> Y = arrays.at("output").matrix();
  EXPECT_LE((attend(layer, arrays.at("input").matrix()) - Y).cwiseAbs().maxCoeff(),
            forward_tolerance * (1 + Y.cwiseAbs().maxCoeff()));
  EXPECT_THROW(load_layer(file, 2), InputError);  // the projection is missing and was not waived
  // A file with an output projection cannot be read as one without.
  EXPECT_THROW(
      load_layer(data + "timm_vit_block.npz", 2, AttentionKind::dot, "blocks.0.", OutputProjection::identity),
      InputError);
}

TEST(LayerLayouts, AmbiguousOrMissingTensorsNameTheFile) {
  // Heads that do not divide the width, and a prefix with no tensors, are one-line errors naming the file.
  try {
    load_layer(data + "timm_vit_block.npz", 3, AttentionKind::dot, "blocks.0.");
    FAIL() << "3 heads do not divide 8";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("timm_vit_block.npz"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_layer(data + "gpt2_block.npz", 2, AttentionKind::dot, "h.1."), InputError);
}

}  // namespace
}  // namespace regatta::operators
