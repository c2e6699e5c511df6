// The Havens et al. local sensitivity (operators/lipschitz/local.hpp, docs/math/bounds.md#havens-local),
// each quantity against an independent computation:
//   ξ, κ_h, δ and its variants          JacobiSVD of the explicit Kronecker matrices of
//                                       docs/math/bounds.md#havens-xi to docs/math/bounds.md#havens-kappa,
//                                       built here from their definitions with P_h from the streamed
//                                       attention_kernel(), and the formulas of
//                                       docs/math/bounds.md#havens-delta, docs/math/bounds.md#havens-naive,
//                                       docs/math/bounds.md#havens-gradnorm transcribed
//                                       here from those dense quantities;
//   δ, naive variants, L_GN             ‖F(X') − F(X)‖_F from the streamed attend() on perturbations in the
//                                       ball (holds-claims havens.local_delta, havens.naive_ordering,
//                                       havens.gradnorm_comparator), and the orderings of
//                                       docs/math/bounds.md#havens-naive;
//   certified radius                    the margin of a linear readout never flips inside the radius;
#include <gtest/gtest.h>

#include "local_cases.hpp"

namespace regatta::lip {
namespace {

using namespace local_test;

struct HavensCase {
  std::string name;
  int d, heads, head_dim;
  bool biases, causal, residual;
  double scale;
  Index n;
};

std::vector<HavensCase> havens_cases() {
  return {{"plain", 6, 2, 0, false, false, false, 1.0, 5},
          {"residual_causal", 4, 2, 0, false, true, true, 1.5, 6},
          {"biases", 6, 3, 2, true, false, false, 1.0, 4},
          {"large_scores", 4, 1, 4, false, false, true, 3.0, 5},
          {"biases_causal_residual", 5, 1, 3, true, true, true, 2.0, 4}};
}

AttentionLayer havens_layer(const HavensCase& h, std::uint64_t seed) {
  operators::RandomLayerSpec s;
  s.d = h.d;
  s.heads = h.heads;
  s.head_dim = h.head_dim;
  s.biases = h.biases;
  s.scale = h.scale;
  s.seed = seed;
  return operators::random_layer(s);
}

AttentionOptions havens_options(const HavensCase& h) {
  AttentionOptions o;
  o.causal = h.causal;
  o.residual = h.residual;
  return o;
}

/// The Kronecker matrices of docs/math/bounds.md#havens-xi to docs/math/bounds.md#havens-kappa built from
/// their definitions (row-major vec):
/// ξ: I_n ⊗ (W^skip)ᵀ + Σ_h P_h ⊗ (W^VO_h)ᵀ;  κ_h: I_n ⊗ X A_hᵀ + (B_h ⊗ I_n) K_{n,d}, with
/// vec(AYB) = (A ⊗ Bᵀ) vec(Y) and K_{n,d} vec(E) = vec(Eᵀ).
Matrix<double> kron(const Matrix<double>& A, const Matrix<double>& B) {
  Matrix<double> K(A.rows() * B.rows(), A.cols() * B.cols());
  for (Index i = 0; i < A.rows(); ++i)
    for (Index j = 0; j < A.cols(); ++j)
      K.block(i * B.rows(), j * B.cols(), B.rows(), B.cols()) = A(i, j) * B;
  return K;
}

Matrix<double> commutation(Index n, Index d) {
  Matrix<double> K = Matrix<double>::Zero(n * d, n * d);
  for (Index i = 0; i < n; ++i)
    for (Index b = 0; b < d; ++b) K(b * n + i, i * d + b) = 1;
  return K;
}

struct HeadMatrices {
  Matrix<double> P, WVO, A, B;
};

std::vector<HeadMatrices> head_matrices(const AttentionLayer& L, const AttentionOptions& o,
                                        const Matrix<double>& X) {
  std::vector<HeadMatrices> out;
  for (int h = 0; h < L.heads; ++h) {
    HeadMatrices m;
    m.P = operators::attention_kernel(L, h, X, X, o);
    m.WVO = L.WV[h] * L.WO.middleRows(Index(h) * L.value_dim, L.value_dim);
    m.A = L.WQ[h] * L.WK[h].transpose() / std::sqrt(double(L.head_dim));
    Matrix<double> Q = X * L.WQ[h];
    if (!L.bQ.empty()) Q.rowwise() += L.bQ[h].transpose();
    m.B = Q * L.WK[h].transpose() / std::sqrt(double(L.head_dim));
    out.push_back(m);
  }
  return out;
}

class HavensCases : public ::testing::TestWithParam<HavensCase> {};

/// One double evaluation of a Havens ingredient or of its dense reference here: the apply of ξ's or κ_h's
/// Kronecker operator (rows of n·d terms around a product of width d) and an n·d-term norm, 2·n·d + d
/// rounded operations. c = 8: the two sides (2) and the rotations of JacobiSVD (4).
double havens_rounding(const HavensCase& c) {
  return testing::rounding_bound<double>(8, double(2 * c.n * c.d + c.d));
}

/// σ_max of a small dense matrix (A_h, W^VO_h: d×d; P_h: n×n) formed by a product of width ≤ max(n, d) and
/// taken by JacobiSVD here and by spectral_norm_reference in havens_estimates: 2·max(n, d) operations, c = 8
/// as above.
double small_norm_rounding(const HavensCase& c) {
  return testing::rounding_bound<double>(8, 2.0 * double(std::max<Index>(c.n, c.d)));
}

/// The formulas of docs/math/bounds.md#havens-delta to docs/math/bounds.md#havens-gradnorm combine the
/// ingredients by sums of positive products over ≤ 3 heads,
/// at most 32 rounded operations, with no cancellation: two evaluation orders differ by 2 × 32 eps.
const double formula_rounding = testing::rounding_bound<double>(2, 32);

TEST_P(HavensCases, IngredientsAndFormulasMatchDirectDenseComputations) {
  const HavensCase c = GetParam();
  const AttentionLayer L = havens_layer(c, 201);
  const AttentionOptions o = havens_options(c);
  const Matrix<double> X = gaussian(c.n, c.d, 21);
  const HavensIngredients<double> q = havens_estimates(L, o, X);
  const auto heads = head_matrices(L, o, X);
  const Index n = c.n, d = c.d;
  Matrix<double> Mxi = c.residual ? Matrix<double>(Matrix<double>::Identity(n * d, n * d))
                                  : Matrix<double>(Matrix<double>::Zero(n * d, n * d));
  for (const auto& m : heads) Mxi += kron(m.P, m.WVO.transpose());
  // Lanczos reaches n·d ≤ 30 dimensions, where its error r²/gap (Kato–Temple) is far below rounding.
  const double rounding = havens_rounding(c), small = small_norm_rounding(c);
  EXPECT_NEAR(q.xi, sigma_max(Mxi), rounding * sigma_max(Mxi))
      << c.name;  // havens.xi_exact / power_iteration
  for (int h = 0; h < c.heads; ++h) {
    const auto& m = heads[h];
    const Matrix<double> Mk = kron(Matrix<double>::Identity(n, n), Matrix<double>(X * m.A.transpose())) +
                              kron(m.B, Matrix<double>::Identity(n, n)) * commutation(n, d);
    const double kappa = sigma_max(Mk);
    EXPECT_NEAR(q.kappa[h], kappa, rounding * kappa) << c.name << " head " << h;  // havens.score_identity
    EXPECT_NEAR(q.score[h], sigma_max(m.A), small * (1 + sigma_max(m.A))) << c.name;
    EXPECT_NEAR(q.values[h], sigma_max(m.WVO), small * (1 + sigma_max(m.WVO))) << c.name;
    EXPECT_NEAR(q.input_values[h], sigma_max(X * m.WVO), rounding * (1 + sigma_max(X * m.WVO))) << c.name;
    EXPECT_NEAR(q.kernel[h], sigma_max(m.P), small * sigma_max(m.P)) << c.name;
  }
  // ξ is attained (havens.xi_exact): the witness direction realises ‖T₁‖ = ε ξ.
  const Matrix<double> w = q.xi_estimate->witness;
  Vector<double> image = Mxi * Eigen::Map<const Vector<double>>(w.data(), w.size());
  EXPECT_NEAR(image.norm(), q.xi, rounding * q.xi) << c.name;

  // The formulas of docs/math/bounds.md#havens-delta, docs/math/bounds.md#havens-naive and
  // docs/math/bounds.md#havens-gradnorm transcribed here from the dense quantities above.
  const double skip = c.residual ? 1.0 : 0.0, sqrt_n = std::sqrt(double(n)), Xnorm = sigma_max(X);
  const double inv_sqrt_dh = 1 / std::sqrt(double(L.head_dim));
  for (double eps : {0.01, 0.2, 0.7}) {
    double delta = eps * sigma_max(Mxi), kernel_xi = skip, weights_xi = skip, kernel = 0, weights = 0;
    double gradnorm = skip;
    const double B = X.norm() + eps;
    for (int h = 0; h < c.heads; ++h) {
      const auto& m = heads[h];
      const Matrix<double> Mk = kron(Matrix<double>::Identity(n, n), Matrix<double>(X * m.A.transpose())) +
                                kron(m.B, Matrix<double>::Identity(n, n)) * commutation(n, d);
      const double W = sigma_max(m.WVO), A = sigma_max(m.A);
      const double qb = L.bQ.empty() ? 0.0 : (L.WK[h] * L.bQ[h]).norm() * inv_sqrt_dh;
      const Matrix<double> WO_h = L.WO.middleRows(Index(h) * L.value_dim, L.value_dim);
      delta += 0.5 * (eps * sigma_max(Mk) + eps * eps * A) * (sigma_max(X * m.WVO) + eps * W);
      kernel_xi += sigma_max(m.P) * W;
      weights_xi += sqrt_n * sigma_max(L.WV[h]) * sigma_max(WO_h);
      const double kappa1 = sigma_max(X * m.A.transpose()) + sigma_max(m.B);
      const double kappa2 = 2 * Xnorm * A + sqrt_n * qb;
      kernel += 0.5 * (eps * kappa1 + eps * eps * A) * W * (Xnorm + eps);
      weights += 0.5 * (eps * kappa2 + eps * eps * A) * W * (Xnorm + eps);
      gradnorm += W * (sqrt_n + sigma_max(L.WQ[h]) * sigma_max(L.WK[h]) * inv_sqrt_dh * B * B +
                       0.5 * sqrt_n * qb * B);
    }
    kernel += eps * kernel_xi;
    weights += eps * weights_xi;
    // The ingredients differ by `rounding`, the two transcriptions of the formulas by formula_rounding.
    const double formulas = rounding + formula_rounding;
    EXPECT_NEAR(havens_delta(q, eps), delta, formulas * delta) << c.name << " eps " << eps;
    EXPECT_NEAR(havens_delta_naive_kernel(q, eps), kernel, formulas * kernel) << c.name;
    EXPECT_NEAR(havens_delta_naive_weights(q, eps), weights, formulas * weights) << c.name;
    EXPECT_NEAR(havens_gradnorm_lipschitz(q, eps), gradnorm, formulas * gradnorm) << c.name;
  }
}

TEST_P(HavensCases, ScorePerturbationStaysWithinEpsilonKappaPlusEpsilonSquaredA) {
  // havens.score_identity: S(X + E) − S(X) = 𝓛(E) + E A Eᵀ up to row constants (which the softmax ignores),
  // hence ‖ΔS − row constants‖_F ≤ ε κ + ε²‖A‖.
  const HavensCase c = GetParam();
  const AttentionLayer L = havens_layer(c, 211);
  const AttentionOptions o = havens_options(c);
  const Matrix<double> X = gaussian(c.n, c.d, 22);
  const HavensIngredients<double> q = havens_estimates(L, o, X);
  const auto score = [&](const Matrix<double>& Y, int h) {
    Matrix<double> Q = Y * L.WQ[h], K = Y * L.WK[h];
    if (!L.bQ.empty()) Q.rowwise() += L.bQ[h].transpose();
    if (!L.bK.empty()) K.rowwise() += L.bK[h].transpose();
    return Matrix<double>(Q * K.transpose() / std::sqrt(double(L.head_dim)));
  };
  for (std::uint64_t k = 0; k < 6; ++k) {
    const double eps = 0.05 * double(k + 1);
    Matrix<double> E = gaussian(c.n, c.d, 300 + k);
    E *= eps / E.norm();
    for (int h = 0; h < c.heads; ++h) {
      Matrix<double> dS = score(X + E, h) - score(X, h);
      const Vector<double> row_means = dS.rowwise().mean();
      dS.colwise() -= row_means;
      EXPECT_LE(dS.norm(), (eps * q.kappa[h] + eps * eps * q.score[h]) * (1 + havens_rounding(c))) << c.name;
    }
  }
}

TEST_P(HavensCases, DeltaBoundsTheOutputChangeAndTheOrderingsHold) {
  const HavensCase c = GetParam();
  const AttentionLayer L = havens_layer(c, 221);
  const AttentionOptions o = havens_options(c);
  const Matrix<double> X = gaussian(c.n, c.d, 23);
  const HavensIngredients<double> q = havens_estimates(L, o, X);
  const Matrix<double> F0 = operators::attend(L, X, o);
  const Block<double> block(L, o);
  const Linearization<double> lin = block.linearize(X);
  const double jacobian = sigma_max(operators::dense_jacobian(lin));
  const auto coeff = havens_delta_coefficients(q);
  // c₁ ≥ ‖DF(X)‖ (havens.local_delta), up to the rounding of both sides.
  EXPECT_GE(coeff[0], jacobian * (1 - havens_rounding(c) - jacobian_rounding(c.n, c.d))) << c.name;
  const Matrix<double> top = jacobian_norm_2(lin).witness;
  for (double eps : {0.01, 0.1, 0.5}) {
    const double delta = havens_delta(q, eps);
    EXPECT_NEAR(delta, coeff[0] * eps + coeff[1] * eps * eps + coeff[2] * eps * eps * eps,
                formula_rounding * delta);
    const double kernel = havens_delta_naive_kernel(q, eps), weights = havens_delta_naive_weights(q, eps);
    EXPECT_LE(delta, kernel * (1 + formula_rounding)) << c.name;  // havens.naive_ordering
    EXPECT_LE(kernel, weights * (1 + formula_rounding)) << c.name;
    const double gradnorm = eps * havens_gradnorm_lipschitz(q, eps);
    double worst = 0;
    for (std::uint64_t k = 0; k < 12; ++k) {
      // The top singular directions of J and of ξ's operator, then random directions.
      Matrix<double> E = k == 0 ? top : k == 1 ? q.xi_estimate->witness : gaussian(c.n, c.d, 400 + k);
      E *= eps / E.norm();
      const double change = (operators::attend(L, Matrix<double>(X + E), o) - F0).norm();
      worst = std::max(worst, change);
      EXPECT_LE(change, delta) << c.name << " eps " << eps;     // havens.local_delta
      EXPECT_LE(change, gradnorm) << c.name << " eps " << eps;  // havens.gradnorm_comparator
    }
    EXPECT_GT(worst, 0.0);
  }
}

TEST_P(HavensCases, CertifiedIngredientsEncloseTheEstimates) {
  const HavensCase c = GetParam();
  const AttentionLayer L = havens_layer(c, 231);
  const AttentionOptions o = havens_options(c);
  const Matrix<double> X = gaussian(c.n, c.d, 24);
  const HavensIngredients<double> q = havens_estimates(L, o, X);
  const PrecisionGuard guard(128);
  for (Index limit : {Index(0), dense_certification_limit}) {
    const HavensIngredients<interval> ci = havens_certified(L, o, X, q, limit);
    const auto inside = [](const interval& e, double v, double rel) {
      return lower_bound(e) <= mpfr(v * (1 + rel)) && upper_bound(e) >= mpfr(v * (1 - rel));
    };
    // The enclosures hold the exact values; the estimates are their double evaluations.
    const double rounding = havens_rounding(c);
    EXPECT_TRUE(inside(ci.xi, q.xi, rounding)) << c.name << " limit " << limit;
    for (int h = 0; h < c.heads; ++h) {
      EXPECT_TRUE(inside(ci.kappa[h], q.kappa[h], rounding)) << c.name;
      EXPECT_TRUE(inside(ci.score[h], q.score[h], rounding)) << c.name;
      EXPECT_TRUE(inside(ci.kernel[h], q.kernel[h], rounding)) << c.name;
    }
    if (limit > 0) {  // the dense certificates are tight: the Cholesky certificate's slack, and rounding
      EXPECT_LE(double(upper_bound(ci.xi)), q.xi * (1 + certified_upper_tightness + rounding)) << c.name;
      EXPECT_NE(ci.certificate.find("Kronecker"), std::string::npos);
    }
    for (double eps : {0.01, 0.3}) {
      const interval delta = havens_delta(ci, eps);
      EXPECT_GE(upper_bound(delta), mpfr(havens_delta(q, eps) * (1 - rounding - formula_rounding))) << c.name;
      EXPECT_GE(upper_bound(havens_delta_naive_weights(ci, eps)), upper_bound(delta)) << c.name;
    }
  }
}

TEST_P(HavensCases, CertifiedRadiusKeepsTheArgmaxOfALinearReadout) {
  // havens.certified_radius: logits g = R vec(F(X)) with ‖R‖₂ = L_out; inside the radius no perturbation
  // (random directions, the top singular direction of J) changes the predicted class.
  const HavensCase c = GetParam();
  const AttentionLayer L = havens_layer(c, 241);
  const AttentionOptions o = havens_options(c);
  const Matrix<double> X = gaussian(c.n, c.d, 25);
  const Index classes = 4;
  const Matrix<double> R = gaussian(classes, c.n * c.d, 26, 0.5);
  const double readout = sigma_max(R);
  const auto logits = [&](const Matrix<double>& Y) -> Vector<double> {
    const Matrix<double> F = operators::attend(L, Y, o);
    return R * Eigen::Map<const Vector<double>>(F.data(), F.size());
  };
  const Vector<double> g = logits(X);
  Index y = 0;
  g.maxCoeff(&y);
  double runner_up = -std::numeric_limits<double>::infinity();
  for (Index j = 0; j < classes; ++j)
    if (j != y) runner_up = std::max(runner_up, g(j));
  const double margin = g(y) - runner_up;
  ASSERT_GT(margin, 0);
  const HavensIngredients<double> q = havens_estimates(L, o, X);
  MarginSetting s;
  s.margin = margin;
  s.readout_lipschitz = readout;
  const RadiusResult est = havens_certified_radius(q, s);
  EXPECT_GT(est.radius, 0) << c.name;
  EXPECT_LT(std::sqrt(2.0) * readout * havens_delta(q, est.radius), margin) << c.name;
  EXPECT_GE(std::sqrt(2.0) * readout * havens_delta(q, est.first_failure), margin) << c.name;
  EXPECT_LE(est.first_failure - est.radius, s.relative_tolerance * est.radius) << c.name;  // bisection's stop
  const PrecisionGuard guard(128);
  const RadiusResult cert = havens_certified_radius(havens_certified(L, o, X, q), s);
  // δ(ε) grows at least linearly in ε, so a relative change of δ moves the radius by at most as much. The
  // estimates are from below by at most Lanczos's error at the default tolerance (plus rounding), the
  // certified upper ends above by at most the Cholesky certificate's slack; each radius is bisected to
  // s.relative_tolerance.
  const double from_below = lanczos_error(SpectralOptions{}.relative_tolerance) + havens_rounding(c);
  const double bisection = 2 * s.relative_tolerance;
  EXPECT_LE(cert.radius, est.radius * (1 + from_below + bisection)) << c.name;
  EXPECT_GE(cert.radius, est.radius * (1 - certified_upper_tightness - from_below - bisection)) << c.name;
  const Matrix<double> top = jacobian_norm_2(Block<double>(L, o).linearize(X)).witness;
  for (std::uint64_t k = 0; k < 10; ++k) {
    Matrix<double> E = k == 0 ? top : gaussian(c.n, c.d, 500 + k);
    E *= cert.radius / E.norm();
    const Vector<double> gp = logits(X + E);
    Index yp = 0;
    gp.maxCoeff(&yp);
    EXPECT_EQ(yp, y) << c.name << " direction " << k;
  }
  MarginSetting bad = s;
  bad.margin = 0;
  EXPECT_THROW(havens_certified_radius(q, bad), InputError);
}

INSTANTIATE_TEST_SUITE_P(Cases, HavensCases, ::testing::ValuesIn(havens_cases()),
                         [](const ::testing::TestParamInfo<HavensCase>& info) { return info.param.name; });

TEST(Havens, RefusesLayersOutsideTheReconstruction) {
  for (const Config& c : configs()) {
    const bool applies = c.kind == AttentionKind::dot && c.prenorm == Prenorm::none && c.sinkhorn == 1;
    const AttentionLayer L = layer_for(c, 251);
    EXPECT_EQ(!havens_refusal(L, options_for(c)).has_value(), applies) << c.name;
    if (!applies) {
      try {
        havens_estimates(L, options_for(c), gaussian(3, c.d, 1));
        ADD_FAILURE() << c.name << ": no InputError";
      } catch (const InputError& e) {
        EXPECT_EQ(e.subject(), "havens.local_delta");
      }
    }
  }
  const AttentionLayer L = layer_for(Config{}, 252);
  const HavensIngredients<double> q = havens_estimates(L, {}, gaussian(3, 6, 2));
  EXPECT_THROW(havens_delta(q, 0.0), InputError);
  EXPECT_THROW(havens_delta(q, -1.0), InputError);
}

}  // namespace
}  // namespace regatta::lip
