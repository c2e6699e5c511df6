// Pre-norm and Sinkhorn attention against a naive materialised log-domain implementation written here;
// kernel invariants (row / column sums, convex hull, permutation equivariance, L2 translation invariance);
// stacks; log-weighted contexts.
#include <gtest/gtest.h>

#include "attention_naive.hpp"

namespace regatta::operators {
namespace {

using namespace attention_test;

/// Row-wise LayerNorm / RMSNorm written from docs/math/attention.md#normalisation (biased variance).
Matrix<double> naive_normalize(Prenorm norm, const Matrix<double>& X, const AttentionLayer& L) {
  if (norm == Prenorm::none) return X;
  Matrix<double> out(X.rows(), X.cols());
  const double d = double(X.cols());
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    const double mean = norm == Prenorm::layernorm ? X.row(i).sum() / d : 0.0;
    double second = 0;
    for (Eigen::Index a = 0; a < X.cols(); ++a) second += (X(i, a) - mean) * (X(i, a) - mean);
    const double scale = std::sqrt(second / d + L.norm_eps);
    for (Eigen::Index a = 0; a < X.cols(); ++a) {
      const double gamma = L.norm_gamma.size() ? L.norm_gamma(a) : 1.0;
      const double beta = L.norm_beta.size() && norm == Prenorm::layernorm ? L.norm_beta(a) : 0.0;
      out(i, a) = gamma * (X(i, a) - mean) / scale + beta;
    }
  }
  return out;
}

double naive_lse(const std::vector<double>& t) {
  double top = -std::numeric_limits<double>::infinity();
  for (double x : t) top = std::max(top, x);
  double sum = 0;
  for (double x : t) sum += std::exp(x - top);
  return top + std::log(sum);
}

/// Sinkhorn kernel K^(t) of head h by the definition of docs/math/attention.md#sinkhorn-attention: the
/// materialised logits S + M,
/// then t alternating log-domain normalisations (rows first), K = exp(S + M + f 1ᵀ + 1 gᵀ).
Matrix<double> naive_kernel(const AttentionLayer& L, int h, const Matrix<double>& Xn,
                            const Matrix<double>& Yn, bool causal, int t) {
  const Eigen::Index n = Xn.rows(), m = Yn.rows();
  const double c = 1.0 / std::sqrt(double(L.head_dim));
  Matrix<double> Q = Xn * L.WQ[h], K = Yn * L.WK[h];
  if (!L.bQ.empty()) Q.rowwise() += L.bQ[h].transpose(), K.rowwise() += L.bK[h].transpose();
  const double minus_inf = -std::numeric_limits<double>::infinity();
  Matrix<double> S(n, m);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < m; ++j)
      S(i, j) = causal && j > i                ? minus_inf
                : L.kind == AttentionKind::dot ? c * Q.row(i).dot(K.row(j))
                                               : -c * (Q.row(i) - K.row(j)).squaredNorm();
  Vector<double> f = Vector<double>::Zero(n), g = Vector<double>::Zero(m);
  for (int step = 1; step <= t; ++step) {
    if (step % 2 == 1) {
      for (Eigen::Index i = 0; i < n; ++i) {
        std::vector<double> row;
        for (Eigen::Index j = 0; j < m; ++j) row.push_back(S(i, j) + g(j));
        f(i) = -naive_lse(row);
      }
    } else {
      for (Eigen::Index j = 0; j < m; ++j) {
        std::vector<double> col;
        for (Eigen::Index i = 0; i < n; ++i) col.push_back(S(i, j) + f(i));
        g(j) = -naive_lse(col);
      }
    }
  }
  Matrix<double> out(n, m);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < m; ++j) out(i, j) = std::exp(S(i, j) + f(i) + g(j));
  return out;
}

/// F(X) = [X] + Σ_h K_h^(t)(N(Y) WV_h + 1 bV_hᵀ) WO_h + 1 bOᵀ with the naive pre-norm and kernel.
Matrix<double> naive_block(const AttentionLayer& L, const Matrix<double>& X, const Matrix<double>& Y,
                           const AttentionOptions& o) {
  const Matrix<double> Xn = naive_normalize(o.prenorm, X, L), Yn = naive_normalize(o.prenorm, Y, L);
  const double c = 1.0 / std::sqrt(double(L.head_dim));
  Matrix<double> out = Matrix<double>::Zero(X.rows(), L.d);
  for (int h = 0; h < L.heads; ++h) {
    Matrix<double> V = L.kind == AttentionKind::dot
                           ? Matrix<double>(Yn * L.WV[h])
                           : Matrix<double>(Yn * (L.WQ[h] * L.WQ[h].transpose() * c) * L.WV[h]);
    if (!L.bV.empty()) V.rowwise() += L.bV[h].transpose();
    out += naive_kernel(L, h, Xn, Yn, o.causal, o.sinkhorn_iterations) * V *
           L.WO.middleRows(Eigen::Index(h) * L.value_dim, L.value_dim);
  }
  if (L.bO.size()) out.rowwise() += L.bO.transpose();
  if (o.residual) out += X;
  return out;
}

/// A layer with random pre-norm parameters γ (around 1) and β.
AttentionLayer layer_with_norm(RandomLayerSpec spec) {
  AttentionLayer L = random_layer(spec);
  L.norm_gamma = Vector<double>::Ones(spec.d) + 0.3 * gaussian(spec.d, 1, spec.seed + 500).col(0);
  L.norm_beta = 0.5 * gaussian(spec.d, 1, spec.seed + 501).col(0);
  L.norm_eps = 1e-3;
  return L;
}

AttentionOptions options(bool causal, bool residual, Prenorm prenorm, int t) {
  AttentionOptions o;
  o.causal = causal;
  o.residual = residual;
  o.prenorm = prenorm;
  o.sinkhorn_iterations = t;
  return o;
}

/// (a.array() == b.array()).all() with matching shapes: bit-for-bit equality.
bool identical(const Matrix<double>& a, const Matrix<double>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() && (a.array() == b.array()).all();
}

TEST(Prenorm, MatchesNaiveLayerNormAndRmsNormForSelfAndCross) {
  std::uint64_t seed = 40;
  for (AttentionKind kind : {AttentionKind::dot, AttentionKind::l2})
    for (Prenorm norm : {Prenorm::layernorm, Prenorm::rmsnorm})
      for (bool residual : {false, true})
        for (bool causal : {false, true}) {
          RandomLayerSpec spec{
              .d = 10, .heads = 2, .scale = 2.0, .seed = ++seed, .kind = kind, .biases = true};
          const AttentionLayer layer = layer_with_norm(spec);
          // Tokens far from the origin and of large spread: the normalisation changes them a lot.
          Matrix<double> X = 4.0 * gaussian(8, 10, seed + 100);
          X.array() += 3.0;
          const Matrix<double> Y = 2.0 * gaussian(11, 10, seed + 200);
          const AttentionOptions o = options(causal, residual, norm, 1);
          const Matrix<double> expected = naive_block(layer, X, X, o);
          EXPECT_LE(max_abs_diff(attend(layer, X, o), expected), tolerance(expected))
              << to_string(norm) << " " << to_string(kind);
          if (!causal) {
            const Matrix<double> expected_cross = naive_block(layer, X, Y, o);
            EXPECT_LE(max_abs_diff(attend_cross(layer, X, Y, o), expected_cross), tolerance(expected_cross));
          }
          // The residual adds the un-normalised X, not N(X).
          if (residual) {
            AttentionOptions bare = o;
            bare.residual = false;
            EXPECT_LE(max_abs_diff(attend(layer, X, o) - attend(layer, X, bare), X), tolerance(X));
          }
        }
}

TEST(Sinkhorn, OneHalfStepIsExactlySoftmax) {
  RandomLayerSpec spec{.d = 8, .heads = 2, .scale = 2.0, .seed = 60, .biases = true};
  const AttentionLayer layer = random_layer(spec);
  const Matrix<double> X = gaussian(9, 8, 61);
  for (bool causal : {false, true}) {
    const AttentionOptions softmax{causal, true};
    AttentionOptions one = softmax;
    one.sinkhorn_iterations = 1;
    // t = 1 runs the softmax reduce itself: the self, cross and zero-log-weight entry points agree bit for
    // bit, and the result is the naive softmax attention to rounding.
    const Matrix<double> out = attend(layer, X, one);
    EXPECT_TRUE(identical(out, attend_cross(layer, X, X, one)));
    EXPECT_TRUE(identical(out, attend_weighted(layer, X, Vector<double>::Zero(9), one)));
    const Matrix<double> expected = naive_attend(layer, X, X, softmax);
    EXPECT_LE(max_abs_diff(out, expected), tolerance(expected));
    // Kernel: the naive row softmax.
    for (int h = 0; h < 2; ++h) {
      const Matrix<double> expected = naive_kernel(layer, h, X, X, causal, 1);
      EXPECT_LE(max_abs_diff(attention_kernel(layer, h, X, X, one), expected), kernel_rounding);
    }
  }
}

TEST(Sinkhorn, MatchesNaiveLogDomainImplementation) {
  std::uint64_t seed = 70;
  for (AttentionKind kind : {AttentionKind::dot, AttentionKind::l2})
    for (bool causal : {false, true})
      for (int t : {2, 3, 4, 7, 10}) {
        RandomLayerSpec spec{.d = 9, .heads = 3, .scale = 2.5, .seed = ++seed, .kind = kind, .biases = true};
        const AttentionLayer layer = layer_with_norm(spec);
        const Matrix<double> X = gaussian(7, 9, seed + 10), Y = gaussian(5, 9, seed + 20);
        for (Prenorm norm : {Prenorm::none, Prenorm::layernorm}) {
          const AttentionOptions o = options(causal, t % 2 == 0, norm, t);
          const Matrix<double> expected = naive_block(layer, X, X, o);
          EXPECT_LE(max_abs_diff(attend(layer, X, o), expected), tolerance(expected))
              << to_string(kind) << " causal " << causal << " t " << t;
          // Cross-attention: m < n, so causal Sinkhorn is defined (every column sees a query).
          const Matrix<double> expected_cross = naive_block(layer, X, Y, o);
          EXPECT_LE(max_abs_diff(attend_cross(layer, X, Y, o), expected_cross), tolerance(expected_cross));
          const Matrix<double> Xn = naive_normalize(norm, X, layer), Yn = naive_normalize(norm, Y, layer);
          for (int h = 0; h < layer.heads; ++h)
            EXPECT_LE(
                max_abs_diff(attention_kernel(layer, h, X, Y, o), naive_kernel(layer, h, Xn, Yn, causal, t)),
                kernel_rounding);
        }
      }
}

TEST(Sinkhorn, RowsSumToOneAfterOddStepsAndColumnsAfterEvenSteps) {
  const double tol = 64 * 12 * std::numeric_limits<double>::epsilon();  // a sum of 12 entries ≤ 1
  for (AttentionKind kind : {AttentionKind::dot, AttentionKind::l2})
    for (bool causal : {false, true}) {
      RandomLayerSpec spec{.d = 8, .heads = 2, .scale = 3.0, .seed = 80, .kind = kind};
      const AttentionLayer layer = random_layer(spec);
      const Matrix<double> X = gaussian(12, 8, 81);
      for (int t = 1; t <= 8; ++t) {
        const Matrix<double> K = attention_kernel(layer, 1, X, X, options(causal, false, Prenorm::none, t));
        EXPECT_GE(K.minCoeff(), 0.0);
        const Vector<double> sums =
            t % 2 == 1 ? Vector<double>(K.rowwise().sum()) : Vector<double>(K.colwise().sum().transpose());
        EXPECT_LE((sums.array() - 1.0).abs().maxCoeff(), tol) << "t " << t;
        if (causal) {  // masked entries are exactly 0
          for (Eigen::Index i = 0; i < 12; ++i)
            for (Eigen::Index j = i + 1; j < 12; ++j) EXPECT_EQ(K(i, j), 0.0);
        }
      }
    }
}

/// max over rows and columns of |sum − 1|.
double doubly_stochastic_error(const Matrix<double>& K) {
  return std::max((K.rowwise().sum().array() - 1.0).abs().maxCoeff(),
                  (K.colwise().sum().array() - 1.0).abs().maxCoeff());
}

TEST(Sinkhorn, DoublyStochasticLimitWithoutMask) {
  // Sinkhorn's theorem (docs/math/attention.md#sinkhorn-attention): the marginal error of K^(t) decreases to
  // 0 (linearly in t for a
  // positive matrix). Measured on this input: 0.24 at t = 3, 6e-3 at t = 11, 9e-12 at t = 61, 3e-16 from
  // t = 101 on.
  RandomLayerSpec spec{.d = 8, .heads = 2, .scale = 1.0, .seed = 90};
  const AttentionLayer layer = random_layer(spec);
  const Matrix<double> X = gaussian(10, 8, 91);
  const AttentionOptions few = options(false, false, Prenorm::none, 3);
  const AttentionOptions many = options(false, false, Prenorm::none, 101);
  const double error_few = doubly_stochastic_error(attention_kernel(layer, 0, X, X, few));
  const double error_many = doubly_stochastic_error(attention_kernel(layer, 0, X, X, many));
  EXPECT_GT(error_few, 1e-2);
  // By t = 101 the linear convergence has reached the rounding floor of a 10-term sum.
  EXPECT_LE(error_many, sum_rounding(X.rows()));
  // The limit is a fixed point: one more half-step changes the kernel by rounding only.
  EXPECT_LE(max_abs_diff(attention_kernel(layer, 0, X, X, options(false, false, Prenorm::none, 102)),
                         attention_kernel(layer, 0, X, X, many)),
            sum_rounding(X.rows()));
}

TEST(Sinkhorn, CausalTendsToTheIdentity) {
  // The only doubly stochastic lower-triangular matrix is I (docs/math/attention.md#sinkhorn-attention);
  // K^(t) approaches it slowly.
  // Measured max |K − I|: 0.93 (t = 1), 0.39 (11), 0.075 (101), 0.0087 (1001).
  RandomLayerSpec spec{.d = 6, .heads = 1, .scale = 1.0, .seed = 100};
  const AttentionLayer layer = random_layer(spec);
  const Matrix<double> X = gaussian(6, 6, 101);
  double previous = std::numeric_limits<double>::infinity();
  for (int t : {1, 11, 101, 1001}) {
    const Matrix<double> K = attention_kernel(layer, 0, X, X, options(true, false, Prenorm::none, t));
    const double distance = (K - Matrix<double>::Identity(6, 6)).cwiseAbs().maxCoeff();
    EXPECT_LT(distance, previous) << "t " << t;
    previous = distance;
  }
  EXPECT_LT(previous, 0.05);
}

TEST(Invariants, KernelRowsSumToOneAndOutputsAreConvexCombinationsOfTheValues) {
  // One head, W^O = I, no biases: out = K·(X WV) with K ≥ 0 and unit row sums, so every output row is a
  // convex combination of the value rows.
  for (AttentionKind kind : {AttentionKind::dot, AttentionKind::l2})
    for (int t : {1, 3, 5}) {
      RandomLayerSpec spec{.d = 5, .heads = 1, .value_dim = 5, .scale = 4.0, .seed = 110, .kind = kind};
      AttentionLayer layer = random_layer(spec);
      layer.WO = Matrix<double>::Identity(5, 5);
      const Matrix<double> X = 3.0 * gaussian(9, 5, 111);
      const AttentionOptions o = options(false, false, Prenorm::none, t);
      const Matrix<double> K = attention_kernel(layer, 0, X, X, o);
      EXPECT_GE(K.minCoeff(), 0.0);
      EXPECT_LE((K.rowwise().sum().array() - 1.0).abs().maxCoeff(), sum_rounding(K.cols()));
      const Matrix<double> values =
          kind == AttentionKind::dot
              ? Matrix<double>(X * layer.WV[0])
              : Matrix<double>(X * layer.WQ[0] * layer.WQ[0].transpose() / std::sqrt(5.0) * layer.WV[0]);
      const Matrix<double> out = attend(layer, X, o);
      EXPECT_LE(max_abs_diff(out, K * values), tolerance(out));
      // Coordinate-wise consequence: each output lies in the bounding box of the values.
      for (Eigen::Index a = 0; a < 5; ++a) {
        EXPECT_LE(out.col(a).maxCoeff(), values.col(a).maxCoeff() + tolerance(out));
        EXPECT_GE(out.col(a).minCoeff(), values.col(a).minCoeff() - tolerance(out));
      }
    }
}

TEST(Invariants, PermutationEquivariance) {
  const Eigen::Index n = 8;
  Eigen::PermutationMatrix<Eigen::Dynamic> perm(n);
  for (Eigen::Index i = 0; i < n; ++i) perm.indices()(i) = int((3 * i + 5) % n);
  for (AttentionKind kind : {AttentionKind::dot, AttentionKind::l2})
    for (int t : {1, 2, 3})
      for (Prenorm norm : {Prenorm::none, Prenorm::rmsnorm}) {
        RandomLayerSpec spec{.d = 6, .heads = 2, .scale = 2.0, .seed = 120, .kind = kind, .biases = true};
        const AttentionLayer layer = layer_with_norm(spec);
        const Matrix<double> X = gaussian(n, 6, 121);
        const AttentionOptions o = options(false, true, norm, t);
        const Matrix<double> permuted_input = perm * X;
        const Matrix<double> expected = perm * attend(layer, X, o);
        EXPECT_LE(max_abs_diff(attend(layer, permuted_input, o), expected), tolerance(expected));
      }
}

TEST(Invariants, L2SinkhornKernelsAreTranslationInvariant) {
  // docs/math/attention.md#l2-score: tied L2 scores are translation invariant, hence so are all K^(t); for
  // odd t the rows
  // sum to 1 and f(X + 1bᵀ) = f(X) + 1·bᵀ Σ_h A_h WV_h WO_h.
  RandomLayerSpec spec{.d = 6, .heads = 2, .seed = 130, .kind = AttentionKind::l2};
  const AttentionLayer layer = random_layer(spec);
  const Matrix<double> X = gaussian(7, 6, 131);
  const Vector<double> b = 2.0 * gaussian(6, 1, 132).col(0);
  Matrix<double> shifted = X;
  shifted.rowwise() += b.transpose();
  Matrix<double> constant_row = Matrix<double>::Zero(1, 6);
  for (int h = 0; h < layer.heads; ++h)
    constant_row += b.transpose() * layer.WQ[h] * layer.WQ[h].transpose() /
                    std::sqrt(double(layer.head_dim)) * layer.WV[h] *
                    layer.WO.middleRows(h * layer.value_dim, layer.value_dim);
  for (int t : {2, 3, 6}) {
    const AttentionOptions o = options(false, false, Prenorm::none, t);
    for (int h = 0; h < layer.heads; ++h)
      EXPECT_LE(
          max_abs_diff(attention_kernel(layer, h, shifted, shifted, o), attention_kernel(layer, h, X, X, o)),
          shift_growth * kernel_rounding);
    if (t % 2 == 1) {
      Matrix<double> expected = attend(layer, X, o);
      expected.rowwise() += constant_row.row(0);
      EXPECT_LE(max_abs_diff(attend(layer, shifted, o), expected), shift_growth * tolerance(expected));
    }
  }
}

TEST(Stack, EqualsRepeatedAttend) {
  RandomLayerSpec a{.d = 6, .heads = 2, .scale = 0.8, .seed = 140, .biases = true};
  RandomLayerSpec b = a;
  b.seed = 141;
  b.kind = AttentionKind::l2;
  const AttentionLayer first = layer_with_norm(a), second = layer_with_norm(b);
  const Matrix<double> X = gaussian(7, 6, 142);
  for (int t : {1, 2}) {
    const AttentionOptions o = options(true, true, Prenorm::layernorm, t);
    const Matrix<double> repeated = attend(first, attend(second, attend(first, X, o), o), o);
    EXPECT_TRUE(identical(attend_stack({first, second, first}, X, o), repeated));
    EXPECT_TRUE(identical(attend_stack({first}, X, o), attend(first, X, o)));
  }
  EXPECT_THROW(attend_stack({}, X), InputError);
  RandomLayerSpec wide = a;
  wide.d = 8;
  expect_input_error([&] { attend_stack({first, random_layer(wide)}, X); }, {"layers[1]", "d = 8"});
}

TEST(Sinkhorn, InputErrors) {
  RandomLayerSpec spec{.d = 4, .heads = 2, .seed = 150};
  const AttentionLayer layer = random_layer(spec);
  const Matrix<double> X = gaussian(3, 4, 151), Y = gaussian(5, 4, 152);
  expect_input_error([&] { attend(layer, X, options(false, false, Prenorm::none, 0)); },
                     {"sinkhorn_iterations", ">= 1"});
  expect_input_error([&] { attend_cross(layer, X, Y, options(true, false, Prenorm::none, 2)); },
                     {"Y", "n = 3, m = 5"});
  EXPECT_NO_THROW(attend_cross(layer, X, Y, options(true, false, Prenorm::none, 1)));
  expect_input_error([&] { attention_kernel(layer, 2, X, X); }, {"head", "0..1"});
  expect_input_error([&] { attend_weighted(layer, X, Vector<double>::Zero(4)); },
                     {"log_weights", "expected 3"});
  Vector<double> nan_weights = Vector<double>::Zero(3);
  nan_weights(1) = std::numeric_limits<double>::quiet_NaN();
  expect_input_error([&] { attend_weighted(layer, X, nan_weights); }, {"log_weights", "NaN"});
  expect_input_error(
      [&] {
        attend_cross_weighted(layer, X, Y, Vector<double>::Zero(5), options(false, false, Prenorm::none, 2));
      },
      {"sinkhorn_iterations", "self-attention only"});
}

TEST(Weighted, LogWeightsEnterTheLogitsAndMinusInfinityDropsAKey) {
  // docs/math/attention.md#empirical-weighted-grid: attending to context (y_0, y_1, y_1) with uniform weights
  // is attending to (y_0, y_1)
  // with weights (1/3, 2/3); a key with log-weight −∞ is absent.
  RandomLayerSpec spec{.d = 6, .heads = 2, .scale = 2.0, .seed = 160, .biases = true};
  const AttentionLayer layer = random_layer(spec);
  const Matrix<double> X = gaussian(4, 6, 161), Y = gaussian(2, 6, 162);
  Matrix<double> repeated(3, 6);
  repeated << Y.row(0), Y.row(1), Y.row(1);
  const Vector<double> w = (Vector<double>(2) << std::log(1.0 / 3.0), std::log(2.0 / 3.0)).finished();
  const Matrix<double> expected = attend_cross(layer, X, repeated);
  EXPECT_LE(max_abs_diff(attend_cross_weighted(layer, X, Y, w), expected), tolerance(expected));
  Matrix<double> with_far_key(3, 6);
  with_far_key << Y.row(0), 1e3 * Matrix<double>::Ones(1, 6), Y.row(1);
  const double minus_inf = -std::numeric_limits<double>::infinity();
  const Vector<double> dropped = (Vector<double>(3) << 0.0, minus_inf, 0.0).finished();
  EXPECT_LE(max_abs_diff(attend_cross_weighted(layer, X, with_far_key, dropped), attend_cross(layer, X, Y)),
            tolerance(expected));
  const Matrix<double> K = attention_kernel_weighted(layer, 0, X, with_far_key, dropped);
  EXPECT_EQ(K.col(1).cwiseAbs().maxCoeff(), 0.0);
}

}  // namespace
}  // namespace regatta::operators
