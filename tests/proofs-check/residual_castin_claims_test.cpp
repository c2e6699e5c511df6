// resid.fixed_point_inversion and castin.adversarial_regime: expected verdicts, the claims' evaluators
// against independent computations (dense Jacobians of detail::AttentionMap; the library's scaled_layer,
// invert_residual and attend), and injected false variants caught. Fixed sample counts (no clock).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/inversion.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>
#include <regatta/proofs/detail/attention_map.hpp>
#include <regatta/proofs/engine.hpp>
#include <regatta/proofs/registry.hpp>
#include "support/tolerance.hpp"

namespace regatta::proofs {
namespace {

const Claim& claim(const std::string& id) {
  const Claim* c = find_claim(id);
  EXPECT_NE(c, nullptr) << id;
  return *c;
}

EngineOptions quick(long samples = 8) {
  EngineOptions o;
  o.samples = samples;
  return o;
}

/// Every right side of an at_most part multiplied by `factor` (a false variant of a valid claim).
class ScaledRight final : public Claim {
 public:
  ScaledRight(const Claim& base, double factor) : base_(base), info_(base.info()), factor_(factor) {
    info_.id += ".scaled";
  }
  const ClaimInfo& info() const override { return info_; }
  Point sample(Rng& rng) const override { return base_.sample(rng); }
  std::vector<Point> family(const std::string& name) const override { return base_.family(name); }
  void repair(Point& p) const override { base_.repair(p); }
  bool searchable() const override { return base_.searchable(); }
  nlohmann::json describe(const Point& p) const override { return base_.describe(p); }
  Evaluation<double> evaluate_double(const Point& p) const override {
    return scale(base_.evaluate_double(p));
  }
  Evaluation<mpfr> evaluate_mpfr(const Point& p) const override { return scale(base_.evaluate_mpfr(p)); }
  Evaluation<interval> evaluate_interval(const Point& p) const override {
    return scale(base_.evaluate_interval(p));
  }

 private:
  template <class S>
  Evaluation<S> scale(Evaluation<S> e) const {
    for (Side<S>& side : e) side.rhs = side.rhs * S(factor_);
    return e;
  }
  const Claim& base_;
  ClaimInfo info_;
  double factor_;
};

/// The index of the single active part of an evaluation (−1 when none or several).
template <class S>
int active_part(const Evaluation<S>& e) {
  int found = -1;
  for (std::size_t k = 0; k < e.size(); ++k)
    if (e[k].active) {
      if (found >= 0) return -1;
      found = static_cast<int>(k);
    }
  return found;
}

TEST(ResidCastinClaims, ExpectedVerdictsCertified) {
  for (const char* id : {"resid.fixed_point_inversion", "castin.adversarial_regime"})
    for (long samples : {8L, 64L}) {
      const ClaimResult r = check_claim(claim(id), quick(samples));
      EXPECT_EQ(r.verdict, Verdict::holds) << id << ": " << r.note;
      EXPECT_TRUE(r.certified) << id << ": " << r.note;
      for (const PartOutcome& part : r.parts) EXPECT_GT(part.evaluated, 0) << id << " " << part.name;
    }
}

TEST(ResidCastinClaims, InjectedFalseVariantsAreRefuted) {
  // castin: 0.9·√n ≤ ‖J‖₂ made 0.9·√n ≤ 0.9·‖J‖₂, i.e. ‖J‖₂/√n ≥ 1, false at n = 8 (0.951,
  // docs/math/bounds.md#castin-adversarial).
  const ScaledRight castin(claim("castin.adversarial_regime"), 0.9);
  const ClaimResult c = check_claim(castin, quick());
  EXPECT_EQ(c.verdict, Verdict::refuted);
  ASSERT_TRUE(c.counterexample.has_value());
  EXPECT_TRUE(c.counterexample->certified);
  EXPECT_EQ(c.counterexample->point["n"], 8);
  // resid: halving the right sides claims F is (1 + L)/2-Lipschitz (< 1), false since F ≈ id for small g.
  const ScaledRight resid(claim("resid.fixed_point_inversion"), 0.5);
  const ClaimResult r = check_claim(resid, quick());
  EXPECT_EQ(r.verdict, Verdict::refuted);
  ASSERT_TRUE(r.counterexample.has_value());
  EXPECT_TRUE(r.counterexample->certified);
}

// ---- castin.adversarial_regime: the O(n) closed form against the dense Jacobian ----

/// The construction's tokens (n×1).
template <class S>
Matrix<S> construction_tokens(const Point& p) {
  const long n = p.k.at(0);
  const double a = p.x.at(0), R = p.x.at(1);
  Matrix<S> X(n, 1);
  for (long i = 0; i < n; ++i) X(i, 0) = num::lift<S>(a < 0 ? (i == 0 ? -R : R) : (i == 0 ? R : R / 2));
  return X;
}

/// f_i = Σ_j softmax_j(a x_i x_j) x_j as the checker's attention map.
template <class S>
detail::AttentionMap<S> construction_map(const Point& p, bool causal) {
  detail::AttentionMap<S> map;
  map.kind = detail::ScoreKind::dot;
  map.mask = causal ? detail::MaskKind::causal : detail::MaskKind::none;
  map.heads.push_back({Matrix<S>::Constant(1, 1, num::lift<S>(p.x.at(0))), Matrix<S>::Constant(1, 1, S(1)),
                       Matrix<S>::Constant(1, 1, S(1)), S(1)});
  return map;
}

/// The dense Jacobian of the construction's map.
template <class S>
Matrix<S> dense_jacobian(const Point& p, bool causal) {
  return construction_map<S>(p, causal).jacobian(construction_tokens<S>(p));
}

/// The two largest eigenvalues λ₁ ≥ λ₂ of JᵀJ for a dense double matrix J with at least two columns.
std::pair<double, double> top_gram_eigenvalues(const Matrix<double>& J) {
  const Matrix<double> G = J.transpose() * J;
  const Eigen::VectorXd ev = symmetric_eigen(G, false).values;  // ascending
  return {ev(ev.size() - 1), ev(ev.size() - 2)};
}

/// Largest singular value of a dense double matrix (eigenvalues of JᵀJ).
double spectral_norm(const Matrix<double>& J) { return std::sqrt(top_gram_eigenvalues(J).first); }

/// Relative rounding of √λ_max(JᵀJ) for an n × n matrix J, against the claim's O(n) closed form: forming
/// JᵀJ (dot products of n terms) and the backward-stable symmetric eigensolver each put an error of ~n eps
/// ‖JᵀJ‖ on λ_max = ‖JᵀJ‖, the square root halves it. c = 4: the two sources, and the closed form's own
/// sums of n terms. Measured: at most 0.6 n eps (n = 8 … 512).
double gram_norm_rounding(long n) { return testing::rounding_bound<double>(4, double(n)); }

TEST(CastinAdversarialRegime, NormsEqualTheDenseJacobianNorms) {
  const Claim& c = claim("castin.adversarial_regime");
  int checked = 0;
  for (const Point& p : c.family("single_token_capture")) {
    if (p.k[0] > 512) continue;  // the dense eigenproblem grows like n³
    const Evaluation<double> e = c.evaluate_double(p);
    const int k = active_part(e);
    ASSERT_GE(k, 0);
    const double norm = e[static_cast<std::size_t>(k)].rhs / 10;  // the part is 9√n ≤ 10‖J‖₂
    EXPECT_NEAR(norm, spectral_norm(dense_jacobian<double>(p, false)), gram_norm_rounding(p.k[0]) * norm)
        << "n = " << p.k[0];
    ++checked;
  }
  EXPECT_EQ(checked, 4);
  // Causal comparison at n = 512: lhs is the exact unmasked norm, rhs the witness lower bound of the masked
  // one, which power iteration drives to the top singular value.
  const Point p = c.family("causal_growth").at(0);
  const Evaluation<double> e = c.evaluate_double(p);
  const Side<double>& s = e.back();
  ASSERT_TRUE(s.active);
  const long n = p.k[0];
  const double unmasked = spectral_norm(dense_jacobian<double>(p, false));
  const auto [lambda1, lambda2] = top_gram_eigenvalues(dense_jacobian<double>(p, true));
  const double masked = std::sqrt(lambda1);
  EXPECT_NEAR(s.lhs, unmasked, gram_norm_rounding(n) * unmasked);
  EXPECT_LE(s.rhs, masked * (1 + gram_norm_rounding(n)));
  // The witness stops once ‖J w‖² changes by less than 1e-14 relative in a step (the claim's rule,
  // castin_regime.cpp); the Rayleigh quotient's remaining errors then shrink by q = (λ₂/λ₁)² per step, so
  // its shortfall is at most 1e-14 · q/(1 − q) relative, on top of the rounding.
  constexpr double witness_stop = 1e-14;
  const double q = (lambda2 / lambda1) * (lambda2 / lambda1);
  EXPECT_GE(s.rhs, masked * (1 - witness_stop * q / (1 - q) - gram_norm_rounding(n)));
}

TEST(CastinAdversarialRegime, IntervalEnclosesTheHighPrecisionDenseNorm) {
  PrecisionGuard guard(128);
  const Claim& c = claim("castin.adversarial_regime");
  const Point p = c.family("single_token_capture").at(0);  // n = 8
  ASSERT_EQ(p.k[0], 8);
  const Evaluation<interval> e = c.evaluate_interval(p);
  const interval norm = e[0].rhs / interval(10);
  const mpfr dense = num::norm_2<mpfr>(dense_jacobian<mpfr>(p, false));
  // The enclosure is narrow: the closed form is a chain of ~2n operations (sums over the n = 8 tokens, a
  // square root), each widening the interval by both ends' outward rounding (and operands that recur);
  // c = 8 · 2 for that (measured width: 20 eps ‖J‖₂ at 128 bits).
  const double width = testing::rounding_bound<mpfr>(8, 2 * 8) * static_cast<double>(dense);
  EXPECT_LT(static_cast<double>(mpfr(upper_bound(norm) - lower_bound(norm))), width);
  // The 128-bit Gram-matrix estimate lies within its relative error (~N eps for N = 8, num::norm_2; c = 4
  // as for gram_norm_rounding) of the enclosure's midpoint.
  const mpfr mid = (lower_bound(norm) + upper_bound(norm)) / 2;
  EXPECT_LE(static_cast<double>(mpfr(abs(dense - mid))),
            testing::rounding_bound<mpfr>(4, 8) * static_cast<double>(dense));
}

TEST(CastinAdversarialRegime, CausalSideEnclosesTheExactNormNotThePowerIterationQuotient) {
  // The causal ‖J‖₂ is evaluated at a power-iteration vector w; ‖J w‖/‖w‖ lies below ‖J‖₂ by the
  // iteration's error. Enclosed as a point interval at that quotient (the old side), a relation on ‖J‖₂ could
  // be "certified" false by the quotient's shortfall. The side must be an enclosure of ‖J‖₂ itself: its
  // upper end at least a certified lower bound of ‖J‖₂ from an independent witness (the top eigenvector of
  // JᵀJ of the dense double Jacobian, evaluated on the dense interval Jacobian of the checker's attention
  // map, valid for any vector), and its lower end at most ‖J‖₂ (the dense double norm within its rounding).
  PrecisionGuard guard(128);
  const Claim& c = claim("castin.adversarial_regime");
  const Point p = c.family("causal_growth").at(0);
  const long n = p.k[0];
  const Side<interval> side = c.evaluate_interval(p).back();
  ASSERT_TRUE(side.active);
  const Matrix<double> Jd = dense_jacobian<double>(p, true);
  const SymmetricEigen eig = symmetric_eigen(Jd.transpose() * Jd, true);
  const Vector<double> v = eig.vectors.col(n - 1);
  // ‖J v‖/‖v‖ in interval arithmetic by one JVP of the map at the exact tokens along the exact v.
  const detail::AttentionMap<interval> map = construction_map<interval>(p, true);
  const Matrix<interval> X = construction_tokens<interval>(p);
  const Matrix<interval> vi = num::lift_matrix<interval>(Matrix<double>(v));
  const interval below =
      num::euclidean_norm<interval>(map.jvp(map.state(X), X, vi)) / num::euclidean_norm<interval>(vi);
  // Measured: the quotient at the claim's witness is below this certified bound by 2.4e-27 relative, far
  // above the 128-bit enclosure widths, so a point interval at the quotient fails here.
  EXPECT_GE(upper_bound(side.rhs), lower_bound(below));
  const double masked = std::sqrt(eig.values(n - 1));
  EXPECT_LE(static_cast<double>(lower_bound(side.rhs)), masked * (1 + gram_norm_rounding(n)));
  // The relation still certifies: the unmasked norm (10.4) lies below the quotient (21.1).
  EXPECT_LT(upper_bound(side.lhs), lower_bound(side.rhs));
}

// ---- resid.fixed_point_inversion against the library's inversion path ----

/// The family point's layer with W^O scaled by c/B₂ through operators::scaled_layer (W^O rounded in double,
/// unlike the claim, which scales in S).
struct LibraryMap {
  operators::AttentionLayer layer;
  operators::AttentionOptions options;
  Matrix<double> X, D;
  double c;
};

LibraryMap library_map(const Point& p) {
  const long n = p.k[0], d = p.k[1], H = p.k[2], dh = p.k[3];
  LibraryMap m;
  operators::AttentionLayer layer;
  layer.d = static_cast<int>(d);
  layer.heads = static_cast<int>(H);
  layer.head_dim = layer.value_dim = static_cast<int>(dh);
  layer.kind = operators::AttentionKind::l2;
  std::size_t at = 0;
  const auto take = [&](long rows, long cols) {
    Matrix<double> out(rows, cols);
    for (long i = 0; i < rows; ++i)
      for (long j = 0; j < cols; ++j) out(i, j) = p.x[at++];
    return out;
  };
  m.X = take(n, d);
  m.D = take(n, d);
  for (long h = 0; h < H; ++h) layer.WQ.push_back(take(d, dh));
  layer.WK = layer.WQ;
  for (long h = 0; h < H; ++h) layer.WV.push_back(take(d, dh));
  layer.WO = take(H * dh, d);
  m.c = p.x[at];
  m.options.causal = p.k[5] != 0;
  double B = 0;
  {
    PrecisionGuard guard(128);
    lip::BoundSetting setting;
    setting.n = n;
    B = num::upper_double(lip::evaluate<interval>(lip::Bound::kim_two, layer, m.options, setting));
  }
  m.layer = operators::scaled_layer(layer, m.c, B);
  return m;
}

/// The claim's resolution (residual.cpp): steps below this fraction of 1 + ‖Y‖ are not counted.
constexpr double step_resolution = 0x1.0p-24;

/// Two evaluations of one residual map g (the claim's in S, the library's attend(); W^O rounded differently,
/// streamed vs materialised kernels) differ by rounding on the scale 1 + ‖Y‖ of their arguments: a chain of
/// ~32 rounded operations for these sizes (ℓ2 scores over d ≤ 3, a softmax over n ≤ 5 keys, values and
/// output projection over H·d_h ≤ 3 terms), c = 16 for both sides and the scaling of W^O by c/B₂. A norm
/// of a difference of such quantities of size e is then off by map_rounding · (1 + ‖Y‖)/e relative.
/// (Measured: below 2·10⁻⁴ of these bounds; the two implementations round almost alike, which a test cannot
/// assume.)
const double map_rounding = testing::rounding_bound<double>(16, 32);

TEST(ResidFixedPointInversion, OneStepRatioEqualsTheLibraryInversionBounds) {
  const Claim& c = claim("resid.fixed_point_inversion");
  for (Point p : c.family("contractive_l2")) {
    p.k[4] = 1;  // K = 1: both iteration parts are ‖X⁽¹⁾ − X*‖ / (L/(1−L)‖X⁽¹⁾ − X⁽⁰⁾‖)
    const Evaluation<double> e = c.evaluate_double(p);
    ASSERT_TRUE(e[0].active && e[1].active);
    const LibraryMap m = library_map(p);
    const auto g = [&](const Matrix<double>& X) { return operators::attend(m.layer, X, m.options); };
    const Matrix<double> Y = m.X + g(m.X);
    operators::InversionOptions options;
    options.lipschitz = m.c;
    options.tolerance = 1e-300;
    options.max_iterations = 1;
    const operators::InversionResult<double> inv = operators::invert_residual<double>(g, Y, options);
    ASSERT_EQ(inv.iterations, 1);
    const double error = (inv.X - m.X).norm(), ratio = error / inv.a_priori_bound;
    // ‖X⁽¹⁾ − X*‖ is a difference of quantities of size ‖Y‖, evaluated through two implementations of g.
    const double tol = map_rounding * (1 + Y.norm()) / error * ratio;
    EXPECT_NEAR(e[0].lhs, ratio, tol);
    EXPECT_NEAR(e[1].lhs, ratio, tol);
    // At K = 1 both bounds are L/(1 − L) ‖X⁽¹⁾ − X⁽⁰⁾‖, in two orders of 3 rounded operations.
    EXPECT_NEAR(inv.a_posteriori_bound, inv.a_priori_bound,
                testing::rounding_bound<double>(2, 3) * inv.a_priori_bound);
  }
}

TEST(ResidFixedPointInversion, LongerRunsAndPairsAgreeWithTheLibrary) {
  const Claim& c = claim("resid.fixed_point_inversion");
  for (const Point& p : c.family("thm31_inputs")) {
    const Evaluation<double> e = c.evaluate_double(p);
    const LibraryMap m = library_map(p);
    const auto g = [&](const Matrix<double>& X) { return operators::attend(m.layer, X, m.options); };
    // The claim's ratios are maxima over the iterations k ≤ K whose step is at least 2^(−24)(1 + ‖Y‖) in
    // double: the same maxima from the library's inversion run for k = 1, 2, … iterations.
    ASSERT_TRUE(e[0].active && e[1].active);
    const Matrix<double> Y = m.X + g(m.X);
    operators::InversionOptions options;
    options.lipschitz = m.c;
    options.tolerance = 1e-300;
    // Each counted ratio error/bound is off by map_rounding (1 + ‖Y‖)/error relative, i.e. by
    // map_rounding (1 + ‖Y‖)/bound absolutely; the maxima by at most the largest of these.
    double prior = 0, posterior = 0, prior_tol = 0, posterior_tol = 0;
    for (int k = 1; k <= p.k[4]; ++k) {
      options.max_iterations = k;
      const operators::InversionResult<double> inv = operators::invert_residual<double>(g, Y, options);
      const double step = inv.a_posteriori_bound * (1 - m.c) / m.c;  // ‖X⁽ᵏ⁾ − X⁽ᵏ⁻¹⁾‖
      if (step < step_resolution * (1 + Y.norm())) break;
      const double error = (inv.X - m.X).norm();
      prior = std::max(prior, error / inv.a_priori_bound);
      posterior = std::max(posterior, error / inv.a_posteriori_bound);
      prior_tol = std::max(prior_tol, map_rounding * (1 + Y.norm()) / inv.a_priori_bound);
      posterior_tol = std::max(posterior_tol, map_rounding * (1 + Y.norm()) / inv.a_posteriori_bound);
    }
    EXPECT_NEAR(e[0].lhs, prior, prior_tol);
    EXPECT_NEAR(e[1].lhs, posterior, posterior_tol);
    // The bi-Lipschitz pair: ‖F(X*+D) − F(X*)‖ with F = id + g from the streamed attend().
    ASSERT_TRUE(e[2].active && e[3].active);
    const Matrix<double> Xp = m.X + m.D;
    const double dF = (m.D + g(Xp) - g(m.X)).norm();
    // A difference of two values of F, each of size ~‖Y‖ + ‖D‖.
    const double dF_tol = map_rounding * (1 + Y.norm() + m.D.norm());
    EXPECT_NEAR(e[2].rhs, dF, dF_tol);
    EXPECT_NEAR(e[3].lhs, dF, dF_tol);
    // (1 + c)‖D‖ two ways: a norm of n·d terms and two operations, each side.
    const double dnorm_tol = testing::rounding_bound<double>(2, double(m.D.size() + 2)) * m.D.norm();
    EXPECT_NEAR(e[3].rhs, (1 + m.c) * m.D.norm(), dnorm_tol);
  }
}

}  // namespace
}  // namespace regatta::proofs
