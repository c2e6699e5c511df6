// resid.fixed_point_inversion and castin.adversarial_regime: expected verdicts, the claims' evaluators
// against independent computations (dense Jacobians of detail::AttentionMap; the library's scaled_layer,
// invert_residual and attend), and injected false variants caught. Fixed sample counts (no clock).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include <Eigen/Eigenvalues>

#include <regatta/core/precision.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/inversion.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>
#include <regatta/proofs/detail/attention_map.hpp>
#include <regatta/proofs/engine.hpp>
#include <regatta/proofs/registry.hpp>

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
  // castin: 0.9·√n ≤ ‖J‖₂ made 0.9·√n ≤ 0.9·‖J‖₂, i.e. ‖J‖₂/√n ≥ 1, false at n = 8 (0.951, bounds.md §4.3).
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

/// The dense Jacobian of f_i = Σ_j softmax_j(a x_i x_j) x_j from the checker's attention map.
template <class S>
Matrix<S> dense_jacobian(const Point& p, bool causal) {
  const long n = p.k.at(0);
  const double a = p.x.at(0), R = p.x.at(1);
  Matrix<S> X(n, 1);
  for (long i = 0; i < n; ++i) X(i, 0) = num::lift<S>(a < 0 ? (i == 0 ? -R : R) : (i == 0 ? R : R / 2));
  detail::AttentionMap<S> map;
  map.kind = detail::ScoreKind::dot;
  map.mask = causal ? detail::MaskKind::causal : detail::MaskKind::none;
  map.heads.push_back({Matrix<S>::Constant(1, 1, num::lift<S>(a)), Matrix<S>::Constant(1, 1, S(1)),
                       Matrix<S>::Constant(1, 1, S(1)), S(1)});
  return map.jacobian(X);
}

/// Largest singular value of a dense double matrix (eigenvalues of JᵀJ).
double spectral_norm(const Matrix<double>& J) {
  const Matrix<double> G = J.transpose() * J;
  const Eigen::SelfAdjointEigenSolver<Matrix<double>> eig(G, Eigen::EigenvaluesOnly);
  return std::sqrt(eig.eigenvalues().maxCoeff());
}

TEST(CastinAdversarialRegime, NormsEqualTheDenseJacobianNorms) {
  const Claim& c = claim("castin.adversarial_regime");
  // Relative accuracy of √λ_max(JᵀJ) in double for these sizes (n ≤ 512, condition of the Gram matrix).
  constexpr double tol = 1e-9;
  int checked = 0;
  for (const Point& p : c.family("single_token_capture")) {
    if (p.k[0] > 512) continue;  // the dense eigenproblem grows like n³
    const Evaluation<double> e = c.evaluate_double(p);
    const int k = active_part(e);
    ASSERT_GE(k, 0);
    const double norm = e[static_cast<std::size_t>(k)].rhs / 10;  // the part is 9√n ≤ 10‖J‖₂
    EXPECT_NEAR(norm, spectral_norm(dense_jacobian<double>(p, false)), tol * norm) << "n = " << p.k[0];
    ++checked;
  }
  EXPECT_EQ(checked, 4);
  // Causal comparison at n = 512: lhs is the exact unmasked norm, rhs the witness lower bound of the masked
  // one, which power iteration drives to the top singular value.
  const Point p = c.family("causal_growth").at(0);
  const Evaluation<double> e = c.evaluate_double(p);
  const Side<double>& s = e.back();
  ASSERT_TRUE(s.active);
  const double unmasked = spectral_norm(dense_jacobian<double>(p, false));
  const double masked = spectral_norm(dense_jacobian<double>(p, true));
  EXPECT_NEAR(s.lhs, unmasked, tol * unmasked);
  EXPECT_LE(s.rhs, masked * (1 + tol));
  EXPECT_GE(s.rhs, masked * (1 - 1e-6));
}

TEST(CastinAdversarialRegime, IntervalEnclosesTheHighPrecisionDenseNorm) {
  PrecisionGuard guard(128);
  const Claim& c = claim("castin.adversarial_regime");
  const Point p = c.family("single_token_capture").at(0);  // n = 8
  ASSERT_EQ(p.k[0], 8);
  const Evaluation<interval> e = c.evaluate_interval(p);
  const interval norm = e[0].rhs / interval(10);
  const mpfr dense = num::norm_2<mpfr>(dense_jacobian<mpfr>(p, false));
  // The enclosure is narrow, and the 128-bit Gram-matrix estimate lies within its relative error (~N eps).
  EXPECT_LT(static_cast<double>(mpfr(upper_bound(norm) - lower_bound(norm))), 1e-25);
  const mpfr mid = (lower_bound(norm) + upper_bound(norm)) / 2;
  EXPECT_LE(static_cast<double>(mpfr(abs(dense - mid))), 1e-30 * static_cast<double>(dense));
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
    const double ratio = (inv.X - m.X).norm() / inv.a_priori_bound;
    // Two evaluations of one map (W^O rounded differently, streamed vs materialised kernels): the error
    // ‖X⁽¹⁾ − X*‖ is a difference of O(1) quantities, so agreement to ~1e-12 relative of the step.
    EXPECT_NEAR(e[0].lhs, ratio, 1e-9 * ratio);
    EXPECT_NEAR(e[1].lhs, ratio, 1e-9 * ratio);
    EXPECT_NEAR(inv.a_posteriori_bound, inv.a_priori_bound, 1e-15 * inv.a_priori_bound);
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
    double prior = 0, posterior = 0;
    for (int k = 1; k <= p.k[4]; ++k) {
      options.max_iterations = k;
      const operators::InversionResult<double> inv = operators::invert_residual<double>(g, Y, options);
      const double step = inv.a_posteriori_bound * (1 - m.c) / m.c;  // ‖X⁽ᵏ⁾ − X⁽ᵏ⁻¹⁾‖
      if (step < 0x1.0p-24 * (1 + Y.norm())) break;
      const double error = (inv.X - m.X).norm();
      prior = std::max(prior, error / inv.a_priori_bound);
      posterior = std::max(posterior, error / inv.a_posteriori_bound);
    }
    // Errors down to 2^(−24) of the scale, evaluated by two implementations: agreement to ~1e-8 relative.
    EXPECT_NEAR(e[0].lhs, prior, 1e-6 * prior);
    EXPECT_NEAR(e[1].lhs, posterior, 1e-6 * posterior);
    // The bi-Lipschitz pair: ‖F(X*+D) − F(X*)‖ with F = id + g from the streamed attend().
    ASSERT_TRUE(e[2].active && e[3].active);
    const Matrix<double> Xp = m.X + m.D;
    const double dF = (m.D + g(Xp) - g(m.X)).norm();
    EXPECT_NEAR(e[2].rhs, dF, 1e-9 * dF);
    EXPECT_NEAR(e[3].lhs, dF, 1e-9 * dF);
    EXPECT_NEAR(e[3].rhs, (1 + m.c) * m.D.norm(), 1e-15 * m.D.norm());
  }
}

}  // namespace
}  // namespace regatta::proofs
