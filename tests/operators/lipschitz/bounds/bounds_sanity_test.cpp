// Each theoretical bound of operators/lipschitz/bounds.hpp against Lipschitz ratios measured on the layer
// itself (operators::attend, central-difference Jacobians, exact W_p of small empirical measures): a bound
// must never be exceeded. Where docs/math/bounds.md gives an extremal family, the measured value is also
// compared with
// its reference (kim.lower_family_inf, the kim.thm32_2_quoted witness, the tight cases of Theorem A,
// softmax, LayerNorm and RMSNorm).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/measures/discrete_measure.hpp>
#include <regatta/measures/wasserstein.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>
#include <regatta/operators/normalization.hpp>
#include "support/tolerance.hpp"

namespace regatta::lip {
namespace {

using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Prenorm;
using Empirical = measures::DiscreteMeasure<double>;

/// Central differences with step h: truncation h²/6·‖F‴‖ plus cancellation, the two evaluations of F (chains
/// of ≲ 16 rounded operations: products of width 3, a softmax over ≤ 6 keys) divided by 2h. On these
/// unit-scale layers (weights and inputs of size ≲ 3) ‖F‴‖ ≤ fd_third_derivative_ratio·‖J‖ and ‖F‖ ≲ ‖J‖, so
/// fd_slack bounds the error relative to ‖J‖ (hence to any upper bound on it).
constexpr double fd_step = 1e-5;
constexpr double fd_third_derivative_ratio = 1000;
const double fd_slack =
    fd_step * fd_step / 6 * fd_third_derivative_ratio + testing::rounding_bound<double>(1, 16) / fd_step;

/// The error of one central-difference entry for |F‴| ≤ third and |F| ≤ value (chains as for fd_slack).
double fd_entry_error(double third, double value) {
  return fd_step * fd_step / 6 * third + testing::rounding_bound<double>(1, 16) * value / fd_step;
}

AttentionLayer layer_of(AttentionKind kind, int d, int heads, std::uint64_t seed, double scale) {
  operators::RandomLayerSpec spec;
  spec.d = d;
  spec.heads = heads;
  spec.head_dim = 2;  // heads need not divide d
  spec.seed = seed;
  spec.scale = scale;
  spec.kind = kind;
  return operators::random_layer(spec);
}

/// d = H = 1 single head with W^Q = q, W^K = k, W^V = v, W^O = 1.
AttentionLayer scalar_layer(AttentionKind kind, double q, double k, double v) {
  AttentionLayer L;
  L.d = L.heads = L.head_dim = L.value_dim = 1;
  L.kind = kind;
  L.WQ = {Matrix<double>::Constant(1, 1, q)};
  L.WK = {Matrix<double>::Constant(1, 1, k)};
  L.WV = {Matrix<double>::Constant(1, 1, v)};
  L.WO = Matrix<double>::Constant(1, 1, 1.0);
  return L;
}

Matrix<double> gaussian(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed) {
  const Vector<double> z = standard_normal(rows * cols, seed);
  return Eigen::Map<const Matrix<double>>(z.data(), rows, cols);
}

/// Rows rescaled to norms spread over (0, R] (a quarter of them on the sphere): inputs in B_R^n.
Matrix<double> in_ball(Eigen::Index rows, Eigen::Index cols, double R, std::uint64_t seed) {
  Matrix<double> X = gaussian(rows, cols, seed);
  for (Eigen::Index i = 0; i < rows; ++i) {
    const double target = i % 4 == 0 ? R : R * double(i % 4) / 4.0;
    X.row(i) *= target / X.row(i).norm();
  }
  return X;
}

/// Dense Jacobian of X ↦ attend(X) by central differences, row-major vectorisation (index i·d + a).
Matrix<double> fd_jacobian(const AttentionLayer& L, const AttentionOptions& o, const Matrix<double>& X) {
  const Eigen::Index n = X.rows(), d = X.cols(), N = n * d;
  Matrix<double> J(N, N);
  for (Eigen::Index c = 0; c < N; ++c) {
    Matrix<double> plus = X, minus = X;
    plus(c / d, c % d) += fd_step;
    minus(c / d, c % d) -= fd_step;
    const Matrix<double> diff =
        (operators::attend(L, plus, o) - operators::attend(L, minus, o)) / (2 * fd_step);
    for (Eigen::Index r = 0; r < N; ++r) J(r, c) = diff(r / d, r % d);
  }
  return J;
}

double norm_two(const Matrix<double>& M) { return largest_singular_value(M); }
double norm_inf(const Matrix<double>& M) { return M.cwiseAbs().rowwise().sum().maxCoeff(); }

BoundSetting with(std::optional<std::int64_t> n, std::optional<double> radius) {
  BoundSetting s;
  s.n = n;
  s.radius = radius;
  return s;
}

double wasserstein(const Matrix<double>& A, const Matrix<double>& B, double p) {
  return measures::wasserstein_exact(Empirical::empirical(A), Empirical::empirical(B), p).value;
}

std::vector<AttentionOptions> option_variants(bool with_causal) {
  std::vector<AttentionOptions> out(4);
  out[1].residual = true;
  out[2].prenorm = Prenorm::layernorm;
  out[2].residual = true;
  out[3].prenorm = Prenorm::rmsnorm;
  if (with_causal) out[0].causal = true;
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// L2 attention (Kim et al.)
// ---------------------------------------------------------------------------------------------------------

TEST(KimSanity, JacobianNormsStayBelowBothBounds) {
  double worst_inf = 0, worst_two = 0;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    AttentionLayer L = layer_of(AttentionKind::l2, 3, seed % 2 + 1, seed, 0.5 * double(seed));
    L.norm_eps = 0.5;
    for (const AttentionOptions& o : option_variants(true)) {
      const BoundSetting s = with(4, std::nullopt);
      const double ub_inf = evaluate<double>(Bound::kim_inf, L, o, s);
      const double ub_two = evaluate<double>(Bound::kim_two, L, o, s);
      for (std::uint64_t k = 0; k < 3; ++k) {
        const Matrix<double> X = gaussian(4, 3, 100 * seed + k) * (0.5 + double(k));
        const Matrix<double> J = fd_jacobian(L, o, X);
        EXPECT_LE(norm_inf(J), ub_inf * (1 + fd_slack));
        EXPECT_LE(norm_two(J), ub_two * (1 + fd_slack));
        worst_inf = std::max(worst_inf, norm_inf(J) / ub_inf);
        worst_two = std::max(worst_two, norm_two(J) / ub_two);
        // Secant ratio between far-apart inputs.
        const Matrix<double> Y = gaussian(4, 3, 200 * seed + k);
        const Matrix<double> dF = operators::attend(L, X, o) - operators::attend(L, Y, o);
        EXPECT_LE(dF.norm() / (X - Y).norm(), ub_two);
        EXPECT_LE(dF.cwiseAbs().maxCoeff() / (X - Y).cwiseAbs().maxCoeff(), ub_inf);
      }
    }
  }
  RecordProperty("worst_ratio_inf", std::to_string(worst_inf));
  RecordProperty("worst_ratio_two", std::to_string(worst_two));
}

TEST(KimSanity, LowerFamilyReachesItsReferenceValueBelowTheBound) {
  // kim.lower_family_inf: n = 3, unit weights, x = (0, √t, −√t) at t* = 1.82306107317032167 has
  // ‖J‖∞ = 2.292244292681286689584 and ‖J‖₂ = 1.9433537437755222 (docs/math/bounds.md#kim-thm32), below UB_∞
  // = 2.852222.
  const AttentionLayer L = scalar_layer(AttentionKind::l2, 1, 1, 1);
  const double t = 1.82306107317032167;
  Matrix<double> X(3, 1);
  X << 0, std::sqrt(t), -std::sqrt(t);
  const Matrix<double> J = fd_jacobian(L, {}, X);
  // Unit weights, |x| ≤ 1.4: the Gaussian-kernel softmax and its derivatives to third order stay below 100.
  // Both norms move by at most ‖ΔJ‖ ≤ 3 entries' errors (3 × 3 Jacobian).
  const double error = 3 * fd_entry_error(100, X.cwiseAbs().maxCoeff());
  EXPECT_NEAR(norm_inf(J), 2.292244292681286689584, error);
  EXPECT_NEAR(norm_two(J), 1.9433537437755222, error);
  EXPECT_LT(norm_inf(J), evaluate<double>(Bound::kim_inf, L, {}, with(3, std::nullopt)));
}

TEST(KimSanity, QuotedTwoNormFormIsViolatedAndTheDerivedFormIsNot) {
  // kim.thm32_2_quoted: n = 3, W^Q = 5, x = (0, √t*, −√t*)/5 gives ‖J‖₂ = 48.5838435944
  // (docs/math/bounds.md#kim-thm32-quoted).
  const AttentionLayer L = scalar_layer(AttentionKind::l2, 5, 5, 1);
  const double t = 1.8230610731703216724;
  Matrix<double> X(3, 1);
  X << 0, std::sqrt(t) / 5, -std::sqrt(t) / 5;
  const double j = norm_two(fd_jacobian(L, {}, X));
  // F(x) = G(5x) for the unit-weight layer G above: third derivatives 5³ times G's (≤ 100).
  EXPECT_NEAR(j, 48.5838435944, 3 * fd_entry_error(125 * 100, 5 * X.cwiseAbs().maxCoeff()));
  const BoundSetting s = with(3, std::nullopt);
  EXPECT_GT(j, kim_thm32_2_quoted_claim<double>(L, {}, s));
  EXPECT_LT(j, evaluate<double>(Bound::kim_two, L, {}, s));
}

// ---------------------------------------------------------------------------------------------------------
// Dot-product attention on B_R (Castin et al.)
// ---------------------------------------------------------------------------------------------------------

TEST(CastinSanity, JacobianNormOnTheBallStaysBelowTheSqrtNBound) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    AttentionLayer L = layer_of(AttentionKind::dot, 3, 2, 10 + seed, double(seed));
    L.norm_eps = 0.3;
    for (const AttentionOptions& o : option_variants(true)) {
      const double R = 1.5;
      const double ub = evaluate<double>(Bound::castin_sqrt_n, L, o, with(5, R));
      for (std::uint64_t k = 0; k < 3; ++k) {
        const Matrix<double> X = in_ball(5, 3, R, 30 * seed + k);
        EXPECT_LE(norm_two(fd_jacobian(L, o, X)), ub * (1 + fd_slack));
        const Matrix<double> Y = in_ball(5, 3, R, 60 * seed + k);
        EXPECT_LE((operators::attend(L, X, o) - operators::attend(L, Y, o)).norm() / (X - Y).norm(), ub);
      }
    }
  }
  // The adversarial input of docs/math/bounds.md#castin-adversarial (A = −1, R = 2): x_1 = −R, x_2..x_n = R.
  const AttentionLayer A = scalar_layer(AttentionKind::dot, 1, -1, 1);
  for (int n : {8, 32}) {
    Matrix<double> X = Matrix<double>::Constant(n, 1, 2.0);
    X(0, 0) = -2.0;
    EXPECT_LE(norm_two(fd_jacobian(A, {}, X)), evaluate<double>(Bound::castin_sqrt_n, A, {}, with(n, 2.0)));
  }
}

TEST(CastinSanity, LocalBoundDominatesTheJacobianAtTheInput) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    AttentionLayer L = layer_of(AttentionKind::dot, 3, 2, 20 + seed, double(seed));
    L.norm_eps = 0.3;
    BoundSetting s;
    for (const AttentionOptions& o : option_variants(true)) {
      for (std::uint64_t k = 0; k < 3; ++k) {
        s.input = gaussian(6, 3, 40 * seed + k) * double(k + 1);
        const double ub = evaluate<double>(Bound::castin_local, L, o, s);
        EXPECT_LE(norm_two(fd_jacobian(L, o, s.input)), ub * (1 + fd_slack));
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Measure level (Theorems A–C, stacks)
// ---------------------------------------------------------------------------------------------------------

TEST(MeasureSanity, QueryLipschitzIsTightOnItsExtremalFamilyAndHoldsInWp) {
  // Theorem A is attained: d = 1, A = a, μ = ½(δ_R + δ_−R), x = 0: Γ'_μ(0) = V a R² exactly.
  const double a = 0.7, R = 1.3, v = -1.4;
  const AttentionLayer L = scalar_layer(AttentionKind::dot, std::sqrt(a), std::sqrt(a), v);
  Matrix<double> context(2, 1), q(2, 1);
  context << R, -R;
  q << fd_step, -fd_step;
  const Matrix<double> out = operators::attend_cross(L, q, context);
  const double derivative = (out(0, 0) - out(1, 0)) / (2 * fd_step);
  const double ub = evaluate<double>(Bound::mf_query, L, {}, with(std::nullopt, R));
  // Γ(x) = v R tanh(a R x): Γ‴(0) = −2 v a³R⁴ = −2(aR)²·Γ'(0), so the truncation is h²/3·(aR)²·ub; the
  // outputs are weighted means of ±R (size |v|R before the cancellation), each within 4 ulps.
  const double truncation = fd_step * fd_step / 3 * (a * R) * (a * R) * ub;
  EXPECT_NEAR(std::abs(derivative), ub,
              truncation + testing::rounding_bound<double>(4) * std::abs(v) * R / fd_step);
  // evaluate's product of four 1×1 norms against this one, each side rounding four times.
  EXPECT_NEAR(ub, std::abs(v) * a * R * R, testing::rounding_bound<double>(2, 4) * ub);

  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const AttentionLayer M = layer_of(AttentionKind::dot, 3, 2, 50 + seed, double(seed));
    for (AttentionOptions o : option_variants(false)) {
      const double Rc = 1.2;
      const double bound = evaluate<double>(Bound::mf_query, M, o, with(std::nullopt, Rc));
      const Matrix<double> Y = in_ball(7, 3, Rc, 70 + seed);
      const Matrix<double> X1 = gaussian(5, 3, 80 + seed) * 2.0, X2 = gaussian(6, 3, 90 + seed);
      const Matrix<double> F1 = operators::attend_cross(M, X1, Y, o),
                           F2 = operators::attend_cross(M, X2, Y, o);
      for (double p : {1.0, 2.0}) EXPECT_LE(wasserstein(F1, F2, p), bound * wasserstein(X1, X2, p));
    }
  }
}

TEST(MeasureSanity, ContextLipschitzBoundsTheChangeOfEveryQuery) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    const AttentionLayer L = layer_of(AttentionKind::dot, 3, 2, 110 + seed, double(seed));
    for (AttentionOptions o : option_variants(false)) {
      const double R = 1.1, Rq = 0.7;
      BoundSetting s = with(std::nullopt, R);
      s.query_radius = Rq;
      const double bound = evaluate<double>(Bound::mf_context, L, o, s);
      const Matrix<double> mu = in_ball(6, 3, R, 120 + seed), nu = in_ball(4, 3, R, 130 + seed);
      const Matrix<double> queries = in_ball(5, 3, Rq, 140 + seed);
      const Matrix<double> diff =
          operators::attend_cross(L, queries, mu, o) - operators::attend_cross(L, queries, nu, o);
      const double w1 = wasserstein(mu, nu, 1.0);
      for (Eigen::Index i = 0; i < diff.rows(); ++i) EXPECT_LE(diff.row(i).norm(), bound * w1);
    }
  }
}

TEST(MeasureSanity, SelfAttentionAndStacksAreLipschitzInWp) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    AttentionLayer L = layer_of(AttentionKind::dot, 3, 2, 150 + seed, 0.5 * double(seed));
    L.norm_eps = 0.4;
    for (AttentionOptions o : option_variants(false)) {
      const double R = 1.0;
      BoundSetting s = with(std::nullopt, R);
      s.depth = 2;
      const double self = evaluate<double>(Bound::mf_self, L, o, s);
      const double depth = evaluate<double>(Bound::mf_depth, L, o, s);
      for (std::uint64_t k = 0; k < 3; ++k) {
        const Matrix<double> X = in_ball(6, 3, R, 160 + 10 * seed + k),
                             Y = in_ball(5, 3, R, 190 + 10 * seed + k);
        const Matrix<double> FX = operators::attend(L, X, o), FY = operators::attend(L, Y, o);
        const Matrix<double> FFX = operators::attend(L, FX, o), FFY = operators::attend(L, FY, o);
        for (double p : {1.0, 2.0}) {
          const double w = wasserstein(X, Y, p);
          EXPECT_LE(wasserstein(FX, FY, p), self * w);
          EXPECT_LE(wasserstein(FFX, FFY, p), depth * w);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Softmax and normalisation constants (tight)
// ---------------------------------------------------------------------------------------------------------

TEST(ComponentSanity, SoftmaxLayerNormAndRmsNormAttainTheirConstants) {
  // Softmax at p = (½, ½, 0): direction (1, −1, 0) gives the ratio ½ in ℓ₂.
  const auto softmax = [](const Vector<double>& z) {
    const Vector<double> e = (z.array() - z.maxCoeff()).exp();
    return Vector<double>(e / e.sum());
  };
  Vector<double> z(3), dir(3);
  z << 0, 0, -60;
  dir << 1, -1, 0;
  const double h = 1e-6;
  const double ratio = (softmax(z + h * dir) - softmax(z - h * dir)).norm() / (2 * h * dir.norm());
  const AttentionLayer L = layer_of(AttentionKind::dot, 6, 2, 170, 1.0);
  const double half = evaluate<double>(Bound::softmax_half, L, {}, {});
  // Along dir the softmax is σ(2t) on the first two entries: σ(2t)‴ = −1 at 0 against the slope ½, so the
  // truncation is h²/3 relative; the entries (≈ ½, an exp and a division each) lose 4 ulps, divided by 2h.
  const double softmax_fd_error = h * h / 3 + testing::rounding_bound<double>(4) / h;
  EXPECT_LE(ratio, half * (1 + softmax_fd_error));
  EXPECT_GT(ratio, half * (1 - softmax_fd_error));

  // LayerNorm with constant γ at a constant input and RMSNorm at 0: ratio max|γ|/√ε
  // (docs/math/bounds.md#layernorm, docs/math/bounds.md#rmsnorm);
  // ∞-norm Jacobians at random inputs stay below √d max|γ|/√ε.
  AttentionLayer N = L;
  N.norm_gamma = Vector<double>::Constant(6, -1.5);
  N.norm_eps = 0.09;
  for (Prenorm p : {Prenorm::layernorm, Prenorm::rmsnorm}) {
    AttentionOptions o;
    o.prenorm = p;
    const Bound two = p == Prenorm::layernorm ? Bound::layernorm_two : Bound::rmsnorm_two;
    const Bound inf = p == Prenorm::layernorm ? Bound::layernorm_inf : Bound::rmsnorm_inf;
    const double ub_two = evaluate<double>(two, N, o, {}), ub_inf = evaluate<double>(inf, N, o, {});
    const Matrix<double> x = Matrix<double>::Constant(1, 6, p == Prenorm::layernorm ? 0.8 : 0.0);
    Matrix<double> v = gaussian(1, 6, 171);
    v.array() -= v.mean();  // orthogonal to 1: the LayerNorm bracket acts as the identity there
    const Matrix<double> jv = operators::normalize_rows_jvp<double>(p, x, N.norm_gamma, N.norm_eps, v);
    // The normalisation's JVP over d = 6 features (mean, variance, a division: ≲ 16 rounded operations) and
    // the two 6-term norms, against a constant of three operations: c = 2 for the two sides.
    const double norm_rounding = testing::rounding_bound<double>(2, 16);
    EXPECT_NEAR(jv.norm() / v.norm(), ub_two, norm_rounding * ub_two);
    for (std::uint64_t k = 0; k < 5; ++k) {
      const Matrix<double> y = gaussian(1, 6, 172 + k) * 0.3;
      Matrix<double> J(6, 6);
      for (int c = 0; c < 6; ++c)
        J.col(c) = operators::normalize_rows_jvp<double>(
                       p, y, N.norm_gamma, N.norm_eps, Matrix<double>(Matrix<double>::Identity(6, 6).row(c)))
                       .transpose();
      EXPECT_LE(norm_two(J), ub_two * (1 + norm_rounding));
      EXPECT_LE(norm_inf(J), ub_inf * (1 + norm_rounding));
    }
  }
}

}  // namespace
}  // namespace regatta::lip
