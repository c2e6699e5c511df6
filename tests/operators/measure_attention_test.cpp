// Attention on measures (docs/math/attention.md#measures) computed against independent evaluations: the token
// path bit for
// bit on empirical measures (docs/math/attention.md#empirical-weighted-grid), a naive weighted value map
// written here (softmax of score + log w),
// repeated tokens against merged weighted atoms, zero-weight atoms, a single atom (F(δ_z) = δ_{Γ(z)},
// docs/math/attention.md#measure-multi-head),
// lifted causal measures (docs/math/attention.md#lifted-causal) against prefixes of the context, and grid
// measures against the fine
// empirical sample they bin (the outputs approach each other as the grid is refined).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <regatta/core/error.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/measures/grid_measure.hpp>
#include <regatta/measures/sampling.hpp>
#include <regatta/measures/wasserstein.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/measure_attention.hpp>
#include <string>
#include <vector>

#include "../support/tolerance.hpp"

namespace regatta::operators {
namespace {

using measures::DiscreteMeasure;
using measures::GridMeasure;

Matrix<double> gaussian(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed) {
  const Vector<double> z = standard_normal(rows * cols, seed);
  return Eigen::Map<const Matrix<double>>(z.data(), rows, cols);
}

bool identical(const Matrix<double>& a, const Matrix<double>& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() && (a.array() == b.array()).all();
}

double max_abs_diff(const Matrix<double>& a, const Matrix<double>& b) {
  EXPECT_EQ(a.rows(), b.rows());
  EXPECT_EQ(a.cols(), b.cols());
  return (a - b).cwiseAbs().maxCoeff();
}

/// An output entry in double: projections of width ≤ 7, a softmax or up to 3 Sinkhorn half-steps over ≤ 12
/// atoms, the per-head sums and the output projection, a chain of ≲ 256 rounded operations. c = 2 for the
/// two evaluations.
const double forward_rounding = testing::rounding_bound<double>(2, 256);

/// forward_rounding relative to the output magnitude (absolute below 1).
double tolerance(const Matrix<double>& reference) {
  return forward_rounding * std::max(1.0, reference.cwiseAbs().maxCoeff());
}

/// A kernel weight w_j e^{s_j}/Z, relative: the score (projections of width 5, biases), whose absolute
/// rounding the exponential makes relative (scores of size ≲ 16 here), and a 12-term normaliser: ≲ 128
/// operations; c = 2 for the two evaluations.
const double kernel_rounding = testing::rounding_bound<double>(2, 128);

AttentionOptions options(bool causal, bool residual, Prenorm prenorm, int t) {
  AttentionOptions o;
  o.causal = causal;
  o.residual = residual;
  o.prenorm = prenorm;
  o.sinkhorn_iterations = t;
  return o;
}

AttentionLayer layer_with_norm(RandomLayerSpec spec) {
  AttentionLayer L = random_layer(spec);
  L.norm_gamma = Vector<double>::Ones(spec.d) + 0.3 * gaussian(spec.d, 1, spec.seed + 500).col(0);
  L.norm_beta = 0.5 * gaussian(spec.d, 1, spec.seed + 501).col(0);
  return L;
}

/// Positive weights of random sizes (spread over six orders of magnitude), summing to 1.
Vector<double> random_weights(Eigen::Index m, std::uint64_t seed) {
  Vector<double> w = (3.0 * gaussian(m, 1, seed).col(0)).array().exp();
  return w / w.sum();
}

/// Score of head h between a query x and a key y (docs/math/attention.md#dot-score,
/// docs/math/attention.md#l2-score), from the layer's definition.
double score(const AttentionLayer& L, int h, const Vector<double>& x, const Vector<double>& y) {
  Vector<double> q = L.WQ[h].transpose() * x, k = L.WK[h].transpose() * y;
  if (!L.bQ.empty()) q += L.bQ[h], k += L.bK[h];
  const double c = 1.0 / std::sqrt(double(L.head_dim));
  return L.kind == AttentionKind::dot ? c * q.dot(k) : -c * (q - k).squaredNorm();
}

/// Γ_μ(x) = Σ_h Σ_j softmax_j(k_h(x, y_j) + log w_j)·v_h(y_j)·WO_h + bO, atom by atom
/// (docs/math/attention.md#empirical-weighted-grid);
/// atoms of weight 0 are skipped. No pre-norm, no residual, softmax only.
Vector<double> naive_gamma(const AttentionLayer& L, const Vector<double>& x,
                           const DiscreteMeasure<double>& mu) {
  const double c = 1.0 / std::sqrt(double(L.head_dim));
  Vector<double> out = Vector<double>::Zero(L.d);
  for (int h = 0; h < L.heads; ++h) {
    std::vector<double> logits;
    double top = -std::numeric_limits<double>::infinity();
    for (Eigen::Index j = 0; j < mu.size(); ++j) {
      const double w = mu.weights()(j);
      logits.push_back(w > 0 ? score(L, h, x, mu.atoms().row(j).transpose()) + std::log(w)
                             : -std::numeric_limits<double>::infinity());
      top = std::max(top, logits.back());
    }
    double sum = 0;
    Vector<double> acc = Vector<double>::Zero(L.value_dim);
    for (Eigen::Index j = 0; j < mu.size(); ++j) {
      const double p = std::exp(logits[std::size_t(j)] - top);
      const Vector<double> y = mu.atoms().row(j).transpose();
      Vector<double> v = L.kind == AttentionKind::dot
                             ? Vector<double>(L.WV[h].transpose() * y)
                             : Vector<double>(L.WV[h].transpose() * L.WQ[h] * (L.WQ[h].transpose() * y) * c);
      if (!L.bV.empty()) v += L.bV[h];
      acc += p * v;
      sum += p;
    }
    out += L.WO.middleRows(Eigen::Index(h) * L.value_dim, L.value_dim).transpose() * (acc / sum);
  }
  if (L.bO.size()) out += L.bO;
  return out;
}

TEST(MeasureAttention, EmpiricalMeasureEqualsTokenPathBitForBit) {
  std::uint64_t seed = 10;
  for (AttentionKind kind : {AttentionKind::dot, AttentionKind::l2})
    for (Prenorm norm : {Prenorm::none, Prenorm::layernorm})
      for (int t : {1, 2, 3})
        for (bool residual : {false, true}) {
          const AttentionLayer layer = layer_with_norm(
              {.d = 6, .heads = 2, .scale = 2.0, .seed = ++seed, .kind = kind, .biases = true});
          const Matrix<double> X = gaussian(9, 6, seed + 1), Y = gaussian(5, 6, seed + 2);
          const AttentionOptions o = options(false, residual, norm, t);
          const DiscreteMeasure<double> mu = DiscreteMeasure<double>::empirical(X);
          const DiscreteMeasure<double> out = attend_measure(layer, mu, o);
          EXPECT_TRUE(identical(out.atoms(), attend(layer, X, o))) << to_string(kind) << " t " << t;
          EXPECT_TRUE(identical(Matrix<double>(out.weights()), Matrix<double>(mu.weights())));
          // Stacks: F_2(F_1(μ_X)) = μ_{F_2(F_1(X))}.
          EXPECT_TRUE(identical(attend_measure_stack({layer, layer}, mu, o).atoms(),
                                attend_stack({layer, layer}, X, o)));
          if (t == 1) {
            const DiscreteMeasure<double> nu = DiscreteMeasure<double>::empirical(Y);
            EXPECT_TRUE(
                identical(attend_measure_cross(layer, mu, nu, o).atoms(), attend_cross(layer, X, Y, o)));
            EXPECT_TRUE(identical(attention_value_map(layer, X, nu, o), attend_cross(layer, X, Y, o)));
          }
          // Causal: the lifted empirical measure (x_i, i/n) maps to (F(X)_i, i/n).
          const AttentionOptions c = options(true, residual, norm, t);
          const DiscreteMeasure<double> lifted = measures::lift_causal(X);
          const DiscreteMeasure<double> out_causal = attend_measure(layer, lifted, c);
          EXPECT_TRUE(identical(out_causal.atoms().leftCols(6), attend(layer, X, c)));
          EXPECT_TRUE(identical(out_causal.atoms().col(6), lifted.atoms().col(6)));
          EXPECT_TRUE(identical(attend_measure_stack({layer, layer, layer}, lifted, c).atoms().leftCols(6),
                                attend_stack({layer, layer, layer}, X, c)));
        }
}

TEST(MeasureAttention, WeightedValueMapAndKernelMatchNaive) {
  for (AttentionKind kind : {AttentionKind::dot, AttentionKind::l2}) {
    const AttentionLayer layer =
        random_layer({.d = 5, .heads = 1, .scale = 3.0, .seed = 30, .kind = kind, .biases = true});
    Vector<double> w = random_weights(12, 31);
    w(4) = 0;  // a zero-weight atom
    w /= w.sum();
    const DiscreteMeasure<double> mu(gaussian(12, 5, 32), w);
    const Matrix<double> X = 1.5 * gaussian(7, 5, 33);
    const Matrix<double> gamma = attention_value_map(layer, X, mu);
    for (Eigen::Index i = 0; i < X.rows(); ++i) {
      const Vector<double> expected = naive_gamma(layer, X.row(i).transpose(), mu);
      EXPECT_LE((gamma.row(i).transpose() - expected).cwiseAbs().maxCoeff(),
                forward_rounding * std::max(1.0, expected.cwiseAbs().maxCoeff()));
      // K_μ(x, ·): probabilities ∝ w_j exp(k(x, y_j)), with density w.r.t. μ in [e^−osc, e^osc]
      // (docs/math/attention.md#measure-kernel).
      const DiscreteMeasure<double> K = measure_kernel(layer, 0, X.row(i).transpose(), mu);
      EXPECT_TRUE(identical(K.atoms(), mu.atoms()));
      EXPECT_EQ(K.weights()(4), 0.0);
      double top = -std::numeric_limits<double>::infinity(), bottom = -top, z = 0;
      for (Eigen::Index j = 0; j < 12; ++j) {
        if (w(j) == 0) continue;
        const double s = score(layer, 0, X.row(i).transpose(), mu.atoms().row(j).transpose());
        top = std::max(top, s), bottom = std::min(bottom, s);
        z += w(j) * std::exp(s);
      }
      for (Eigen::Index j = 0; j < 12; ++j) {
        if (w(j) == 0) continue;
        const double s = score(layer, 0, X.row(i).transpose(), mu.atoms().row(j).transpose());
        EXPECT_NEAR(K.weights()(j), w(j) * std::exp(s) / z, kernel_rounding * K.weights()(j));
        const double density = K.weights()(j) / w(j);
        EXPECT_LE(density, std::exp(top - bottom) * (1 + kernel_rounding));
        EXPECT_GE(density, std::exp(bottom - top) * (1 - kernel_rounding));
      }
    }
  }
}

TEST(MeasureAttention, ZeroWeightAtomsDropOut) {
  const AttentionLayer layer = random_layer({.d = 4, .heads = 2, .scale = 2.0, .seed = 40, .biases = true});
  const Matrix<double> Y = gaussian(6, 4, 41);
  const Vector<double> w = random_weights(6, 42);
  Matrix<double> Y0(7, 4);
  Y0 << Y.topRows(3), 50.0 * Matrix<double>::Ones(1, 4), Y.bottomRows(3);
  Vector<double> w0(7);
  w0 << w.head(3), 0.0, w.tail(3);
  const DiscreteMeasure<double> mu(Y, w), mu0(Y0, w0);
  const Matrix<double> X = gaussian(5, 4, 43);
  // The zero-weight atom is removed before attention: the same computation, bit for bit.
  EXPECT_TRUE(identical(attention_value_map(layer, X, mu0), attention_value_map(layer, X, mu)));
  for (int t : {1, 2, 3}) {
    const AttentionOptions o = options(false, true, Prenorm::none, t);
    const DiscreteMeasure<double> a = attend_measure(layer, mu0, o), b = attend_measure(layer, mu, o);
    EXPECT_TRUE(identical(a.atoms(), b.atoms()));
    EXPECT_TRUE(identical(Matrix<double>(a.weights()), Matrix<double>(b.weights())));
  }
  const DiscreteMeasure<double> K0 = measure_kernel(layer, 1, X.row(0).transpose(), mu0);
  const DiscreteMeasure<double> K = measure_kernel(layer, 1, X.row(0).transpose(), mu);
  EXPECT_EQ(K0.weights()(3), 0.0);
  // The same six weights, normalised once with the zero-weight atom's score among the shifts: an exp and a
  // division of entries ≤ 1 may round differently, c = 2 for the two.
  const double renormalisation = testing::rounding_bound<double>(2, 2);
  EXPECT_LE((K0.weights().head(3) - K.weights().head(3)).cwiseAbs().maxCoeff(), renormalisation);
  EXPECT_LE((K0.weights().tail(3) - K.weights().tail(3)).cwiseAbs().maxCoeff(), renormalisation);
}

TEST(MeasureAttention, MergingEqualAtomsLeavesGammaUnchanged) {
  // μ' splits atom 1 of μ into two equal atoms of masses w_1/4 and 3w_1/4
  // (docs/math/attention.md#empirical-weighted-grid).
  for (AttentionKind kind : {AttentionKind::dot, AttentionKind::l2}) {
    const AttentionLayer layer =
        random_layer({.d = 6, .heads = 2, .scale = 2.0, .seed = 50, .kind = kind, .biases = true});
    const Matrix<double> Y = gaussian(4, 6, 51);
    const Vector<double> w = random_weights(4, 52);
    Matrix<double> Ysplit(5, 6);
    Ysplit << Y.topRows(2), Y.bottomRows(2), Y.row(1);
    Vector<double> wsplit(5);
    wsplit << w(0), 0.25 * w(1), w(2), w(3), 0.75 * w(1);
    const DiscreteMeasure<double> mu(Y, w), split(Ysplit, wsplit);
    const Matrix<double> X = gaussian(6, 6, 53);
    const Matrix<double> expected = attention_value_map(layer, X, mu);
    EXPECT_LE(max_abs_diff(attention_value_map(layer, X, split), expected), tolerance(expected));
    // Sinkhorn self-attention has both marginals μ: splitting an atom changes nothing either.
    for (int t : {1, 2, 3, 4}) {
      const Matrix<double> a = attend_measure(layer, mu, options(false, false, Prenorm::none, t)).atoms();
      const Matrix<double> b = attend_measure(layer, split, options(false, false, Prenorm::none, t)).atoms();
      EXPECT_LE(max_abs_diff(b.topRows(2), a.topRows(2)), tolerance(a)) << "t " << t;
      EXPECT_LE(max_abs_diff(b.middleRows(2, 2), a.bottomRows(2)), tolerance(a));
      EXPECT_LE(max_abs_diff(b.row(4), a.row(1)), tolerance(a));
    }
  }
}

TEST(MeasureAttention, RepeatedTokensAreOneAtomWithTheirMultiplicity) {
  // Tokens (a, a, a, b, c) against the measure 3/5 δ_a + 1/5 δ_b + 1/5 δ_c: softmax and Sinkhorn attention of
  // the tokens give, row by row, the images of the atoms (the token multiplicity is the weight).
  const AttentionLayer layer = layer_with_norm(
      {.d = 6, .heads = 3, .scale = 2.5, .seed = 60, .kind = AttentionKind::dot, .biases = true});
  const Matrix<double> atoms = gaussian(3, 6, 61);
  Matrix<double> tokens(5, 6);
  tokens << atoms.row(0), atoms.row(0), atoms.row(0), atoms.row(1), atoms.row(2);
  const DiscreteMeasure<double> mu(atoms, (Vector<double>(3) << 0.6, 0.2, 0.2).finished());
  for (int t : {1, 2, 3, 4, 9})
    for (Prenorm norm : {Prenorm::none, Prenorm::rmsnorm}) {
      const AttentionOptions o = options(false, true, norm, t);
      const Matrix<double> token_out = attend(layer, tokens, o);
      const Matrix<double> measure_out = attend_measure(layer, mu, o).atoms();
      EXPECT_LE(max_abs_diff(measure_out.row(0), token_out.row(0)), tolerance(token_out)) << "t " << t;
      EXPECT_LE(max_abs_diff(measure_out.row(0), token_out.row(2)), tolerance(token_out));
      EXPECT_LE(max_abs_diff(measure_out.bottomRows(2), token_out.bottomRows(2)), tolerance(token_out));
    }
}

TEST(MeasureAttention, ASingleAtomStaysASingleAtom) {
  // F(δ_z) = δ_{Γ(z)} with Γ(z) = Σ_h (zᵀWV_h + bV_h)·WO_h + bO (docs/math/attention.md#measure-multi-head):
  // every kernel is the unit mass at z.
  const AttentionLayer layer =
      random_layer({.d = 4, .heads = 2, .value_dim = 3, .scale = 5.0, .seed = 70, .biases = true});
  const Matrix<double> z = 3.0 * gaussian(1, 4, 71);
  Matrix<double> expected = layer.bO.transpose();
  for (int h = 0; h < 2; ++h)
    expected += (z * layer.WV[h] + layer.bV[h].transpose()) * layer.WO.middleRows(3 * h, 3);
  for (int t : {1, 2, 5}) {
    const DiscreteMeasure<double> out =
        attend_measure(layer, DiscreteMeasure<double>::empirical(z), options(false, false, Prenorm::none, t));
    ASSERT_EQ(out.size(), 1);
    EXPECT_LE(max_abs_diff(out.atoms(), expected), tolerance(expected)) << "t " << t;
  }
}

TEST(MeasureAttention, CausalLiftedMeasureSeesItsPast) {
  const AttentionLayer layer =
      random_layer({.d = 6, .heads = 2, .scale = 2.0, .seed = 80, .kind = AttentionKind::l2});
  const Eigen::Index m = 8;
  Matrix<double> lifted(m, 7);
  lifted.leftCols(6) = gaussian(m, 6, 81);
  for (Eigen::Index j = 0; j < m; ++j)
    lifted(j, 6) = 0.1 * double(j) + 0.03 * double(j % 3);  // 0, 0.13, 0.26, 0.3, …
  const Vector<double> w = random_weights(m, 82);
  const DiscreteMeasure<double> mu(lifted, w);
  const AttentionOptions causal = options(true, true, Prenorm::none, 1);
  // The push-forward and the value map at the atoms (one prefix group per atom) agree.
  const Matrix<double> pushed = attend_measure(layer, mu, causal).atoms();
  EXPECT_LE(max_abs_diff(attention_value_map(layer, lifted, mu, causal), pushed), tolerance(pushed));
  // A query at time s sees the atoms with t ≤ s: the non-causal value map of the (renormalised) prefix.
  Matrix<double> queries = gaussian(4, 7, 83);
  const double times[4] = {0.0, 0.33, 0.4, 5.0};  // sees 1, 4, 4 and all 8 atoms
  const Eigen::Index seen[4] = {1, 4, 4, 8};
  for (int i = 0; i < 4; ++i) queries(i, 6) = times[i];
  const Matrix<double> gamma = attention_value_map(layer, queries, mu, causal);
  EXPECT_TRUE(identical(gamma.col(6), queries.col(6)));
  for (int i = 0; i < 4; ++i) {
    const DiscreteMeasure<double> prefix =
        DiscreteMeasure<double>::from_weights(lifted.topRows(seen[i]).leftCols(6), w.head(seen[i]), true);
    const Vector<double> x = queries.row(i).head(6).transpose();
    const Vector<double> expected = x + naive_gamma(layer, x, prefix);
    EXPECT_LE((gamma.row(i).head(6).transpose() - expected).cwiseAbs().maxCoeff(),
              forward_rounding * std::max(1.0, expected.cwiseAbs().maxCoeff()))
        << "query " << i;
    // The kernel at a lifted point puts no mass on later atoms.
    const DiscreteMeasure<double> K = measure_kernel(layer, 1, queries.row(i).transpose(), mu, causal);
    EXPECT_EQ(K.weights().tail(m - seen[i]).cwiseAbs().sum(), 0.0);
  }
}

/// The largest distance between corresponding rows.
double max_row_distance(const Matrix<double>& a, const Matrix<double>& b) {
  return (a - b).rowwise().norm().maxCoeff();
}

TEST(MeasureAttention, GridMeasuresApproachTheSampleTheyBin) {
  // The fine empirical measure μ of 1000 points of the unit disc and its histograms μ_h on k×k grids of
  // [−1, 1]²: W_p(μ, μ_h) ≤ r_h = √2/k, so Γ_{μ_h} → Γ_μ and F(μ_h) → F(μ)
  // (docs/math/bounds.md#mf-quantisation). Measured
  // here for k = 4, 8, 16: max_x ‖Γ_{μ_h}(x) − Γ_μ(x)‖ = 2.0e-2, 3.3e-3, 8.4e-4 and W_2(F(μ_h), F(μ)) =
  // 5.4e-3, 1.7e-3, 6.6e-4 (r_h = 0.35, 0.18, 0.088).
  const AttentionLayer layer = random_layer({.d = 2, .heads = 1, .scale = 1.5, .seed = 90});
  const Matrix<double> samples = measures::sample_ball(2, 1.0, 1000, 91);
  const DiscreteMeasure<double> fine = DiscreteMeasure<double>::empirical(samples);
  const Matrix<double> queries = 0.8 * gaussian(20, 2, 92);
  const Matrix<double> gamma_fine = attention_value_map(layer, queries, fine);
  const DiscreteMeasure<double> pushed_fine = attend_measure(layer, fine);
  const Vector<double> lo = Vector<double>::Constant(2, -1.0), hi = Vector<double>::Constant(2, 1.0);
  double previous_gamma = std::numeric_limits<double>::infinity(), previous_w = previous_gamma;
  for (Eigen::Index k : {4, 8, 16}) {
    const GridMeasure grid = GridMeasure::from_samples(lo, hi, {k, k}, samples);
    const double gamma_error = max_row_distance(attention_value_map(layer, queries, grid), gamma_fine);
    const double w2 = measures::wasserstein_exact(attend_measure(layer, grid), pushed_fine, 2.0).value;
    EXPECT_LT(gamma_error, 0.7 * previous_gamma) << "k " << k;
    EXPECT_LT(w2, 0.7 * previous_w) << "k " << k;
    previous_gamma = gamma_error;
    previous_w = w2;
    // The grid overloads are the discrete ones on to_discrete().
    EXPECT_TRUE(
        identical(attend_measure(layer, grid).atoms(), attend_measure(layer, grid.to_discrete()).atoms()));
  }
}

/// The InputError's message mentions every fragment.
void expect_input_error(const std::function<void()>& f, const std::vector<std::string>& fragments) {
  try {
    f();
    ADD_FAILURE() << "expected InputError";
  } catch (const InputError& e) {
    for (const std::string& s : fragments)
      EXPECT_NE(std::string(e.what()).find(s), std::string::npos) << e.what() << " lacks " << s;
  }
}

TEST(MeasureAttention, InputErrors) {
  const AttentionLayer layer = random_layer({.d = 3, .heads = 1, .seed = 100});
  const Matrix<double> X = gaussian(4, 3, 101);
  const DiscreteMeasure<double> mu = DiscreteMeasure<double>::empirical(X);
  const DiscreteMeasure<double> lifted = measures::lift_causal(X);
  const AttentionOptions causal = options(true, false, Prenorm::none, 1);
  const AttentionOptions sinkhorn = options(false, false, Prenorm::none, 2);
  expect_input_error([&] { attend_measure(layer, lifted); }, {"mu", "dimension 4", "d = 3"});
  expect_input_error([&] { attend_measure(layer, mu, causal); }, {"mu", "d + 1 = 4", "lift_causal"});
  Matrix<double> unsorted = lifted.atoms();
  std::swap(unsorted(1, 3), unsorted(2, 3));
  expect_input_error([&] { attend_measure(layer, DiscreteMeasure<double>::empirical(unsorted), causal); },
                     {"mu", "strictly increasing time", "atom 2"});
  expect_input_error([&] { attend_measure_cross(layer, mu, mu, causal); }, {"causal", "not available"});
  expect_input_error([&] { attend_measure_cross(layer, mu, mu, sinkhorn); },
                     {"sinkhorn_iterations", "softmax only"});
  expect_input_error([&] { attention_value_map(layer, X, mu, sinkhorn); }, {"sinkhorn_iterations"});
  expect_input_error([&] { measure_kernel(layer, 0, X.row(0).transpose(), mu, sinkhorn); },
                     {"sinkhorn_iterations"});
  expect_input_error([&] { measure_kernel(layer, 0, Vector<double>::Zero(4), mu); }, {"x"});
  expect_input_error([&] { measure_kernel(layer, 1, X.row(0).transpose(), mu); }, {"head"});
  Vector<double> early = lifted.atoms().row(0).transpose();
  early(3) = 0.0;  // before the first atom (time 1/4)
  expect_input_error([&] { measure_kernel(layer, 0, early, lifted, causal); }, {"x", "sees no atom"});
  expect_input_error([&] { attention_value_map(layer, early.transpose(), lifted, causal); }, {"X", "row 0"});
  expect_input_error([&] { attend_measure_stack({}, mu); }, {"layers", "empty"});
}

}  // namespace
}  // namespace regatta::operators
