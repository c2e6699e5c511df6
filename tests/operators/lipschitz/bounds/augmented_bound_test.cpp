// castin.sqrt_n_augmented (docs/bounds.md, "Biased layers: the augmented castin.sqrt_n") checked against
//   * the formula computed here from the full matrices (Eigen's JacobiSVD of [A_h; c_hᵀ/t] and of V_h, the
//     smallest term over t = 2^k, the radius of the pre-norm written out), for random biased layers;
//   * the scalar types: the interval enclosure (128 bits) contains the mpfr value at 256 bits, and its upper
//     end is at least the double estimate;
//   * the truth: the certified lower end of ‖J(X)‖₂ (lip::certify_witness at the top singular vector of the
//     dense Jacobian of operators::Block) at sampled and ascended inputs with tokens in B_R stays below the
//     certified upper end; and the same witnesses exceed the formula with c_h dropped (castin.sqrt_n at
//     radius √(R² + 1) on ‖A_h‖₂ only), so the check can fail;
// and every refusal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>
#include <regatta/operators/lipschitz/bracket.hpp>
#include "support/tolerance.hpp"

namespace regatta::lip {
namespace {

using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Prenorm;

/// The estimate and the independent formula differ by the rounding of a few SVDs of small matrices and a
/// sum of H terms: 10⁴ binary64 roundings covers the SVD iterations and the products with margin.
const double formula_tolerance = testing::rounding_bound<double>(10, 1000);

AttentionLayer biased_layer(int d, int heads, std::uint64_t seed, double scale = 1.0) {
  operators::RandomLayerSpec spec;
  spec.d = d;
  spec.heads = heads;
  spec.seed = seed;
  spec.scale = scale;
  spec.biases = true;
  return operators::random_layer(spec);
}

BoundSetting setting_with(std::optional<std::int64_t> n, std::optional<double> radius) {
  BoundSetting s;
  s.n = n;
  s.radius = radius;
  return s;
}

double svd_norm(const Matrix<double>& M) { return largest_singular_value(M); }

/// The bare multi-head sum of the derivation's result, written from the full matrices, with the Remark's
/// appended coordinate t = 2^k per head (|k| ≤ 8, the smallest term): √3‖V_h‖(‖[A_h; c_hᵀ/t]‖²(R² +
/// t²)²(4n+1)
/// + n)^{1/2}. With `with_bias` false, c_h is dropped (the formula a derivation that forgot the query bias
/// would give).
double independent_sum(const AttentionLayer& L, std::int64_t n, double R, bool with_bias) {
  const double nn = double(n);
  double sum = 0;
  for (int h = 0; h < L.heads; ++h) {
    const double root = std::sqrt(double(L.head_dim));
    const Vector<double> c = with_bias ? Vector<double>(L.WK[h] * L.bQ[h] / root) : Vector<double>::Zero(L.d);
    const Matrix<double> V = L.WV[h] * L.WO.middleRows(h * L.value_dim, L.value_dim);
    double best = std::numeric_limits<double>::infinity();
    for (int k = -8; k <= 8; ++k) {
      const double t = std::pow(2.0, k), rr = R * R + t * t;
      Matrix<double> M(L.d + 1, L.d);
      M.topRows(L.d) = L.WQ[h] * L.WK[h].transpose() / root;
      M.row(L.d) = c.transpose() / t;
      const double a = svd_norm(M);
      best = std::min(best, std::sqrt(3.0) * svd_norm(V) * std::sqrt(a * a * rr * rr * (4 * nn + 1) + nn));
    }
    sum += best;
  }
  return sum;
}

TEST(AugmentedBound, DoubleValueMatchesTheFormulaFromFullSvds) {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const AttentionLayer L = biased_layer(6, seed == 2 ? 1 : 2, seed, 1.5);
    for (bool residual : {false, true})
      for (bool causal : {false, true}) {
        AttentionOptions o;
        o.residual = residual;
        o.causal = causal;
        const double expected = independent_sum(L, 6, 1.5, true) + (residual ? 1 : 0);
        const double value = evaluate<double>(Bound::castin_sqrt_n_augmented, L, o, setting_with(6, 1.5));
        EXPECT_NEAR(value, expected, formula_tolerance * expected) << seed;
      }
    // Pre-norm: R = √d‖γ‖∞ + ‖β‖ (LayerNorm), constant times max|γ|/√ε.
    AttentionLayer P = L;
    P.norm_gamma = Vector<double>::LinSpaced(6, 0.5, 1.3);
    P.norm_beta = Vector<double>::LinSpaced(6, -0.2, 0.2);
    P.norm_eps = 0.1;
    AttentionOptions o;
    o.prenorm = Prenorm::layernorm;
    o.residual = true;
    const double R = std::sqrt(6.0) * 1.3 + P.norm_beta.norm();
    const double expected = 1 + independent_sum(P, 4, R, true) * 1.3 / std::sqrt(0.1);
    const double value =
        evaluate<double>(Bound::castin_sqrt_n_augmented, P, o, setting_with(4, std::nullopt));
    EXPECT_NEAR(value, expected, formula_tolerance * expected) << seed;
  }
}

TEST(AugmentedBound, IntervalEnclosesMpfrAndIsAtLeastTheEstimate) {
  for (std::uint64_t seed : {4u, 5u}) {
    const AttentionLayer L = biased_layer(6, 2, seed, 2.0);
    for (bool causal : {false, true}) {
      AttentionOptions o;
      o.causal = causal;
      const BoundSetting s = setting_with(9, 0.7);
      mpfr reference;
      {
        const PrecisionGuard guard(256);
        reference = evaluate<mpfr>(Bound::castin_sqrt_n_augmented, L, o, s);
      }
      const PrecisionGuard guard(128);
      const interval enclosure = evaluate<interval>(Bound::castin_sqrt_n_augmented, L, o, s);
      EXPECT_TRUE(contains(enclosure, reference)) << seed;
      const double estimate = evaluate<double>(Bound::castin_sqrt_n_augmented, L, o, s);
      const std::vector<BoundReport> reports = theoretical_bounds(L, o, s);
      const BoundReport& r = reports[static_cast<std::size_t>(Bound::castin_sqrt_n_augmented)];
      ASSERT_TRUE(r.applies) << r.reason;
      EXPECT_GE(r.certified_upper, estimate);
      EXPECT_EQ(r.value, estimate);
    }
  }
}

/// Tokens in B_R: each row scaled to norm `fraction`·R.
Matrix<double> in_ball(const Matrix<double>& Z, double R, const Vector<double>& fraction) {
  Matrix<double> X = Z;
  for (Eigen::Index i = 0; i < X.rows(); ++i) X.row(i) *= fraction(i) * R / X.row(i).norm();
  return X;
}

/// The estimate ‖J(X)‖₂ and the top right singular vector (as an n×d direction).
std::pair<double, Matrix<double>> jacobian_top(const operators::Block<double>& block,
                                               const Matrix<double>& X) {
  const Matrix<double> J = operators::dense_jacobian(block.linearize(X));
  const DenseSvd svd = dense_svd(J, false, true);  // J is square: its thin V is the full one
  Matrix<double> v(X.rows(), X.cols());
  for (Eigen::Index i = 0; i < X.rows(); ++i)
    for (Eigen::Index a = 0; a < X.cols(); ++a) v(i, a) = svd.V(i * X.cols() + a, 0);
  return {svd.singular_values(0), v};
}

TEST(AugmentedBound, CertifiedUpperEndIsAboveCertifiedJacobianNormsInTheBall) {
  // A layer (d = 2) whose query bias dominates the scores (bQ scaled by 100): the bias-free formula at radius
  // √(R² + t²) is then below ‖J‖₂ at the ascended inputs, while the augmented bound stays above.
  const double R = 1.0;
  const std::int64_t n = 4;
  AttentionLayer L = biased_layer(2, 1, 7, 1.0);
  for (auto& b : L.bQ) b *= 100;
  const operators::Block<double> block(L, {});
  const double upper =
      theoretical_bounds(L, {}, setting_with(n, R))[static_cast<std::size_t>(Bound::castin_sqrt_n_augmented)]
          .certified_upper;
  ASSERT_GT(upper, 0);
  double best_lower = 0;
  for (std::uint64_t seed = 0; seed < 6; ++seed) {
    const Vector<double> z = standard_normal(n * L.d, 100 + seed);
    Matrix<double> X = in_ball(Eigen::Map<const Matrix<double>>(z.data(), n, L.d), R,
                               Vector<double>::Constant(n, seed % 2 == 0 ? 1 - 1e-9 : 0.5));
    if (seed < 2) {
      // Tokens ±R·e with e ⊥ c: the bias term c_hᵀx_j is equal for all of them, the softmax is balanced, and
      // moving a token along c changes the output by about R‖c‖ (the term that the bias-free formula misses).
      const Vector<double> c = L.WK[0] * L.bQ[0];
      Vector<double> e(2);
      e << -c(1), c(0);
      e /= e.norm();
      for (Eigen::Index i = 0; i < n; ++i) X.row(i) = ((i + seed) % 2 == 0 ? 1.0 : -1.0) * R * (1 - 1e-9) * e;
    }
    // The start and the end of a normalised projected ascent along ∂‖J‖₂/∂X (central differences), tokens
    // kept in B_R.
    std::vector<Matrix<double>> points{X};
    const double step = 0.02, h = 1e-6;
    for (int it = 0; it < 40; ++it) {
      Matrix<double> g(n, L.d);
      for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index a = 0; a < L.d; ++a) {
          Matrix<double> Xp = X, Xm = X;
          Xp(i, a) += h;
          Xm(i, a) -= h;
          g(i, a) = (jacobian_top(block, Xp).first - jacobian_top(block, Xm).first) / (2 * h);
        }
      if (g.norm() == 0) break;
      X += step * g / g.norm();
      for (Eigen::Index i = 0; i < n; ++i)
        if (X.row(i).norm() > R * (1 - 1e-9)) X.row(i) *= R * (1 - 1e-9) / X.row(i).norm();
    }
    points.push_back(X);
    for (const Matrix<double>& P : points) {
      JacobianWitness w;
      w.input = P;
      w.direction = jacobian_top(block, P).second;
      const WitnessCertificate c = certify_witness(L, {}, w, Norm::two, R, 128);
      ASSERT_TRUE(c.lower.has_value()) << c.reason;
      EXPECT_LE(*c.lower, upper) << "seed " << seed;
      best_lower = std::max(best_lower, *c.lower);
    }
  }
  // The check can fail: without c_h the formula is below the witnesses found.
  EXPECT_GT(best_lower, independent_sum(L, n, R, false));
}

TEST(AugmentedBound, Refusals) {
  const AttentionLayer biased = biased_layer(4, 2, 9);
  operators::RandomLayerSpec spec;
  spec.d = 4;
  spec.heads = 2;
  spec.seed = 9;
  const AttentionLayer plain = operators::random_layer(spec);
  spec.kind = AttentionKind::l2;
  spec.biases = true;
  const AttentionLayer l2 = operators::random_layer(spec);
  const BoundSetting ok = setting_with(5, 1.0);
  const auto reason = [](const AttentionLayer& L, const AttentionOptions& o, const BoundSetting& s) {
    return refusal(Bound::castin_sqrt_n_augmented, L, o, s).value_or("");
  };
  const auto mentions = [](const std::string& text, const std::string& what) {
    return text.find(what) != std::string::npos;
  };
  EXPECT_EQ(reason(biased, {}, ok), "");
  AttentionOptions causal;
  causal.causal = true;
  EXPECT_EQ(reason(biased, causal, ok), "");  // masks allowed
  EXPECT_TRUE(mentions(reason(plain, {}, ok), "castin.sqrt_n applies and is tighter"));
  EXPECT_EQ(refusal(Bound::castin_sqrt_n, plain, {}, ok), std::nullopt);
  EXPECT_TRUE(mentions(reason(l2, {}, ok), "L2 layer"));
  AttentionOptions sinkhorn;
  sinkhorn.sinkhorn_iterations = 3;
  EXPECT_TRUE(mentions(reason(biased, sinkhorn, ok), "Sinkhorn"));
  EXPECT_TRUE(mentions(reason(biased, {}, setting_with(std::nullopt, 1.0)), "--n"));
  EXPECT_TRUE(mentions(reason(biased, {}, setting_with(5, std::nullopt)), "--radius"));
  AttentionOptions prenorm;
  prenorm.prenorm = Prenorm::rmsnorm;
  EXPECT_EQ(reason(biased, prenorm, setting_with(5, std::nullopt)), "");
  // The biased layer is refused by castin.sqrt_n, and evaluate throws with the ID.
  EXPECT_TRUE(refusal(Bound::castin_sqrt_n, biased, {}, ok).has_value());
  EXPECT_THROW(evaluate<double>(Bound::castin_sqrt_n_augmented, plain, {}, ok), InputError);
}

}  // namespace
}  // namespace regatta::lip
