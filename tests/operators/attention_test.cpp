// Multi-head attention computed two ways: attend() (streamed through pairwise::reduce) against the naive
// implementation of attention_naive.hpp (materialised scores, row softmax, matrix products), for dot and L2
// scores, self and cross attention; untied L2 refused; L2 translation invariance. The weight round trip and
// loader errors are in attention_load_test.cpp, pre-norm, Sinkhorn, invariants, stacks and log-weighted
// contexts in attention_kernels_test.cpp.
#include <gtest/gtest.h>

#include "attention_naive.hpp"

namespace regatta::operators {
namespace {

using namespace attention_test;

TEST(Attend, MatchesNaiveForDotAndL2CausalResidualBiases) {
  std::uint64_t seed = 1;
  for (AttentionKind kind : {AttentionKind::dot, AttentionKind::l2})
    for (bool biases : {false, true})
      for (bool causal : {false, true})
        for (bool residual : {false, true})
          for (double scale : {0.5, 3.0}) {
            RandomLayerSpec spec;
            spec.d = 12;
            spec.heads = 3;
            spec.scale = scale;
            spec.seed = ++seed;
            spec.kind = kind;
            spec.biases = biases;
            const AttentionLayer layer = random_layer(spec);
            const Matrix<double> X = gaussian(9, 12, 1000 + seed);
            const AttentionOptions o{causal, residual};
            const Matrix<double> expected = naive_attend(layer, X, X, o);
            EXPECT_LE(max_abs_diff(attend(layer, X, o), expected), tolerance(expected))
                << to_string(kind) << " biases " << biases << " causal " << causal << " residual " << residual
                << " scale " << scale;
          }
}

TEST(Attend, CrossAttentionMatchesNaiveWithUnequalLengthsAndHeadWidths) {
  for (AttentionKind kind : {AttentionKind::dot, AttentionKind::l2}) {
    RandomLayerSpec spec;
    spec.d = 8;
    spec.heads = 2;
    spec.head_dim = 3;
    spec.value_dim = 5;
    spec.seed = 7;
    spec.kind = kind;
    spec.biases = true;
    const AttentionLayer layer = random_layer(spec);
    const Matrix<double> X = gaussian(6, 8, 11), Y = gaussian(10, 8, 12);
    for (bool causal : {false, true}) {
      const AttentionOptions o{causal, false};
      const Matrix<double> expected = naive_attend(layer, X, Y, o);
      EXPECT_LE(max_abs_diff(attend_cross(layer, X, Y, o), expected), tolerance(expected)) << to_string(kind);
    }
  }
}

TEST(Attend, UntiedL2IsRejectedUnlessAllowed) {
  RandomLayerSpec spec;
  spec.d = 8;
  spec.heads = 2;
  spec.seed = 3;
  AttentionLayer layer = random_layer(spec);  // dot: untied
  layer.kind = AttentionKind::l2;
  const Matrix<double> X = gaussian(5, 8, 4);
  try {
    attend(layer, X);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("untied L2 is outside the L2 theorem"), std::string::npos)
        << e.what();
  }
  AttentionOptions o;
  o.allow_untied_l2 = true;
  const Matrix<double> expected = naive_attend(layer, X, X, o);
  EXPECT_LE(max_abs_diff(attend(layer, X, o), expected), tolerance(expected));
}

TEST(Attend, L2RowsAreTranslationInvariant) {
  // docs/math/attention.md#l2-score: tied L2 without biases has P(X + 1bᵀ) = P(X), so F(X + 1bᵀ) = F(X) +
  // 1·bᵀ Σ_h A_h WV_h
  // WO_h.
  RandomLayerSpec spec;
  spec.d = 6;
  spec.heads = 2;
  spec.seed = 9;
  spec.kind = AttentionKind::l2;
  const AttentionLayer layer = random_layer(spec);
  const Matrix<double> X = gaussian(7, 6, 5);
  const Vector<double> b = gaussian(6, 1, 6).col(0);
  Matrix<double> shifted = X;
  shifted.rowwise() += b.transpose();
  Matrix<double> constant_row = Matrix<double>::Zero(1, 6);
  for (int h = 0; h < layer.heads; ++h)
    constant_row += b.transpose() * layer.WQ[h] * layer.WQ[h].transpose() /
                    std::sqrt(double(layer.head_dim)) * layer.WV[h] *
                    layer.WO.middleRows(h * layer.value_dim, layer.value_dim);
  Matrix<double> expected = attend(layer, X);
  expected.rowwise() += constant_row.row(0);
  EXPECT_LE(max_abs_diff(attend(layer, shifted), expected), shift_growth * tolerance(expected));
}

}  // namespace
}  // namespace regatta::operators
