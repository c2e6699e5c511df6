// Rotary position embeddings (layer.hpp): the forward pass against torch's float64 evaluation of Hugging
// Face's LLaMA attention code (tests/data/layouts/generate.py, llama_rope_block.npz), the relative-position
// property of RoPE scores, certified enclosures (interval64, MPFI) against mpfr at 256 bits, and the
// refusals: invalid settings, every published bound, the Havens reconstruction, and measures.
// Derivatives (JVP/VJP duality, central differences at 256 bits, interval JVP/VJP) run on rotary layers in
// differentiable_test.cpp (the dot_rope configurations).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <regatta/core/convert.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/core/scalar.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>
#include <regatta/operators/lipschitz/havens.hpp>
#include <regatta/operators/lipschitz/region.hpp>
#include <regatta/operators/lipschitz/structured_rows.hpp>
#include <regatta/operators/measure_attention.hpp>
#include "../support/tolerance.hpp"

namespace regatta::operators {
namespace {

const std::string fixture = std::string(REGATTA_TEST_DATA_DIR) + "/layouts/llama_rope_block.npz";

/// The sublayer is ~100 rounded operations deep (RMSNorm, projections of width 8, the rotation, a softmax
/// over at most 7 keys); the angles i·θ^(−2a/d_h) are rounded differently by torch (1/θ^x) and regatta
/// (θ^(−x)), by a few ulp times i ≤ 6, which moves cos and sin by as much. float64 torch and regatta round
/// independently, so 16 × 100 u covers both (the bound of layer_layouts_test.cpp).
const double forward_tolerance = testing::rounding_bound<double>(16, 100);
/// Log-ratios of kernel entries of a softmax row, each entry rounded through ~20 operations (score of width
/// d_h = 4, its rotation, exp, the division by the row sum): the row sum cancels exactly in a ratio, so the
/// log-ratio errs by the scores' errors, 4 × 20 u with a safety factor of 4 for scores of size ~3.
const double log_ratio_tolerance = testing::rounding_bound<double>(16, 20);
/// Width of the interval64 forward: ~100 outward roundings on the chain, times the wrapping of the interval
/// softmax (exp(s − c) and Σ exp(s − c) as independent, up to the row's dynamic range e^(max s − min s),
/// below 2^12 here), 2^4 safety.
const double interval64_width = testing::rounding_bound<double>(0x1p16, 100);

struct Fixture {
  AttentionLayer layer;
  AttentionOptions options;
  Matrix<double> input, output;
};

Fixture llama_rope() {
  const auto arrays = io::read_npz(fixture);
  Fixture f;
  const double theta = arrays.at("rope_theta").vector()(0);
  f.layer = load_layer(fixture, 2, AttentionKind::dot, "layers.0.", OutputProjection::from_file,
                       RotaryStatement::with_theta(theta));
  f.layer.norm_eps = 1e-6;  // LlamaRMSNorm's eps in the fixture
  f.options.prenorm = Prenorm::rmsnorm;
  f.options.residual = true;
  f.options.causal = true;
  f.input = arrays.at("input").matrix();
  f.output = arrays.at("output").matrix();
  return f;
}

double max_abs(const Matrix<double>& m) { return m.cwiseAbs().maxCoeff(); }

TEST(Rotary, LlamaLayerMatchesHuggingFaceCodeInTorch) {
  const Fixture f = llama_rope();
  ASSERT_TRUE(f.layer.rotary);
  EXPECT_EQ(f.layer.rotary->theta, 10000);
  ASSERT_EQ(f.layer.bQ.size(), 2u) << "the fixture has q/k/v biases (rotated after the bias)";
  const double scale = 1 + max_abs(f.output);
  // The streamed double path and the generic block, each against torch.
  EXPECT_LE(max_abs(attend(f.layer, f.input, f.options) - f.output), forward_tolerance * scale);
  EXPECT_LE(max_abs(Block<double>(f.layer, f.options).forward(f.input) - f.output),
            forward_tolerance * scale);
  // The rotation is not ignored: the same weights without it are far from torch's output.
  AttentionLayer plain = f.layer;
  plain.rotary.reset();
  EXPECT_GT(max_abs(attend(plain, f.input, f.options) - f.output), 1e6 * forward_tolerance * scale);
}

TEST(Rotary, ScoresDependOnRelativePositionOnly) {
  // With every token equal (no biases, no pre-norm) the score of query i and key j is q·R_{j−i}k: a function
  // of j − i. So within a row the log-ratio of neighbouring kernel entries depends only on j − i:
  // log P_{i,j} − log P_{i,j+1} = log P_{i+1,j+1} − log P_{i+1,j+2}. Without RoPE every score is equal.
  RandomLayerSpec spec;
  spec.d = 6;
  spec.heads = 2;
  spec.head_dim = 4;
  spec.seed = 3;
  spec.scale = 2;
  AttentionLayer layer = random_layer(spec);
  layer.rotary = Rotary{5.0};
  const Vector<double> token = standard_normal(6, 11);
  const Matrix<double> X = token.transpose().replicate(6, 1);
  for (int h = 0; h < 2; ++h) {
    const Matrix<double> P = attention_kernel(layer, h, X, X);
    for (Eigen::Index i = 0; i + 1 < P.rows(); ++i)
      for (Eigen::Index j = 0; j + 2 < P.cols(); ++j) {
        const double here = std::log(P(i, j) / P(i, j + 1)),
                     shifted = std::log(P(i + 1, j + 1) / P(i + 1, j + 2));
        EXPECT_NEAR(here, shifted, log_ratio_tolerance) << "head " << h << " (" << i << ", " << j << ")";
      }
    EXPECT_GT(max_abs(P.array() - 1.0 / 6), 1e3 * log_ratio_tolerance) << "the rotation must act";
  }
  // Cross-attention places keys at the context's row indices: with Y = X it is self-attention.
  const Matrix<double> Z = 0.8 * Eigen::Map<const Matrix<double>>(standard_normal(30, 12).data(), 5, 6);
  EXPECT_EQ(attend_cross(layer, Z, Z), attend(layer, Z));
}

TEST(Rotary, CertifiedForwardEnclosesTheExactMap) {
  // interval64 and MPFI (128 bits) forward passes of the torch fixture's layer against mpfr at 256 bits,
  // whose rounding (2^-240 relative) is far inside both enclosures.
  const Fixture f = llama_rope();
  Matrix<mpfr> exact;
  {
    const PrecisionGuard high(256);
    exact = Block<mpfr>(f.layer, f.options).forward(matrix_cast<mpfr>(f.input));
  }
  const PrecisionGuard guard(128);
  const Matrix<interval64> fast =
      Block<interval64>(f.layer, f.options).forward(matrix_cast<interval64>(f.input));
  const Matrix<interval> wide = Block<interval>(f.layer, f.options).forward(matrix_cast<interval>(f.input));
  for (Eigen::Index i = 0; i < exact.rows(); ++i)
    for (Eigen::Index a = 0; a < exact.cols(); ++a) {
      EXPECT_TRUE(mpfr(fast(i, a).lower()) <= exact(i, a) && exact(i, a) <= mpfr(fast(i, a).upper()))
          << "(" << i << ", " << a << ")";
      EXPECT_LT(fast(i, a).upper() - fast(i, a).lower(), interval64_width * (1 + max_abs(f.output)));
      EXPECT_TRUE(contains(wide(i, a), exact(i, a))) << "(" << i << ", " << a << ")";
      // And the exact map is torch's (the float64 reference is within its rounding of it).
      EXPECT_NEAR(scalar_traits<mpfr>::to_double(exact(i, a)), f.output(i, a),
                  forward_tolerance * (1 + max_abs(f.output)));
    }
}

/// Long sequences: the double tables take cos and sin of the rounded angle i·θ^(−2a/d_h), off by a few ulp of
/// i ≤ 255, so the rotated queries and keys carry an error ~ 4·256 u on top of the ~100-operation chain of
/// the forward pass; 16 × (4·256 + 100) u covers it with the safety factor of forward_tolerance.
const double long_sequence_tolerance = testing::rounding_bound<double>(16, 4 * 256 + 100);

TEST(Rotary, LongSequencesStayCloseToTheExactMapAndInsideTheCertifiedOne) {
  // 256 tokens, so angles up to 255 rad in the fastest plane: the double forward against mpfr at 256 bits
  // (whose tables are the midpoints of MPFI enclosures), and the interval64 forward around it.
  RandomLayerSpec spec;
  spec.d = 4;
  spec.heads = 1;
  spec.seed = 9;
  AttentionLayer layer = random_layer(spec);
  layer.rotary = Rotary{10000};
  AttentionOptions options;
  options.causal = true;
  const Eigen::Index n = 256;
  const Matrix<double> X = Eigen::Map<const Matrix<double>>(standard_normal(n * 4, 21).data(), n, 4);
  const Matrix<double> ours = attend(layer, X, options);
  Matrix<mpfr> exact;
  {
    const PrecisionGuard high(256);
    exact = Block<mpfr>(layer, options).forward(matrix_cast<mpfr>(X));
  }
  const Matrix<interval64> enclosure = Block<interval64>(layer, options).forward(matrix_cast<interval64>(X));
  double worst = 0;
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index a = 0; a < 4; ++a) {
      worst = std::max(worst, std::abs(ours(i, a) - scalar_traits<mpfr>::to_double(exact(i, a))));
      ASSERT_TRUE(mpfr(enclosure(i, a).lower()) <= exact(i, a) &&
                  exact(i, a) <= mpfr(enclosure(i, a).upper()))
          << "(" << i << ", " << a << ")";
    }
  EXPECT_LE(worst, long_sequence_tolerance * (1 + max_abs(ours)));
}

TEST(Rotary, InvalidSettingsAreRefusedNamingRotary) {
  RandomLayerSpec spec;
  spec.d = 6;
  spec.heads = 2;  // head_dim 3: odd
  AttentionLayer odd = random_layer(spec);
  odd.rotary = Rotary{10000};
  const auto expect_rotary_error = [](const AttentionLayer& layer) {
    try {
      layer.validate();
      ADD_FAILURE() << "validated";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("rotary"), std::string::npos) << e.what();
    }
  };
  expect_rotary_error(odd);
  spec.head_dim = 2;
  AttentionLayer layer = random_layer(spec);
  for (double theta : {0.0, -1.0, std::numeric_limits<double>::infinity()}) {
    layer.rotary = Rotary{theta};
    expect_rotary_error(layer);
  }
  spec.kind = AttentionKind::l2;
  AttentionLayer l2 = random_layer(spec);
  l2.rotary = Rotary{10000};
  expect_rotary_error(l2);
}

TEST(Rotary, EveryPublishedAttentionBoundAndSpecialisedPathRefusesIt) {
  RandomLayerSpec spec;
  spec.d = 4;
  spec.heads = 2;
  spec.seed = 5;
  AttentionLayer layer = random_layer(spec);
  layer.rotary = Rotary{10000};
  AttentionOptions options;
  lip::BoundSetting setting;
  setting.n = 4;
  setting.radius = 1.0;
  setting.input = Eigen::Map<const Matrix<double>>(standard_normal(16, 2).data(), 4, 4);
  // Without RoPE the dot-product bounds apply to this configuration; with it none does, each saying why.
  AttentionLayer plain = layer;
  plain.rotary.reset();
  const auto with = lip::theoretical_bounds(layer, options, setting);
  const auto without = lip::theoretical_bounds(plain, options, setting);
  ASSERT_EQ(with.size(), without.size());
  int refused_for_rope = 0;
  for (std::size_t k = 0; k < with.size(); ++k) {
    if (with[k].bound == lip::Bound::softmax_half) {  // a property of softmax alone
      EXPECT_TRUE(with[k].applies);
      continue;
    }
    EXPECT_FALSE(with[k].applies) << lip::info(with[k].bound).id;
    if (without[k].applies) {
      EXPECT_NE(with[k].reason.find("rotary"), std::string::npos) << with[k].reason;
      ++refused_for_rope;
    }
  }
  EXPECT_GE(refused_for_rope, 3)
      << "castin.sqrt_n, castin.local and the mean-field bounds apply without RoPE";
  // The Havens reconstruction has no rotation in its score perturbation; the structured rows (and the
  // region enclosures built on them) do (local_test.cpp, region_test.cpp: the dot_rope configurations).
  const auto havens = lip::havens_refusal(layer, options);
  ASSERT_TRUE(havens.has_value());
  EXPECT_NE(havens->find("rotary"), std::string::npos) << *havens;
  EXPECT_FALSE(lip::structured_rows_refusal(layer, options).has_value());
  EXPECT_FALSE(lip::region_refusal(layer, options).has_value());
  // Measures have no positions.
  const measures::DiscreteMeasure<double> mu(setting.input, Vector<double>::Constant(4, 0.25));
  EXPECT_THROW(attend_measure(layer, mu, options), InputError);
}

}  // namespace
}  // namespace regatta::operators
