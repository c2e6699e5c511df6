// The mean-field claims (proofs-check/src/claims/mean_field_*.cpp) reach their expected verdicts; their
// constants agree with lip::evaluate's mean-field bounds and their left sides with the library's measure
// attention (operators/measure_attention.hpp) and exact transport; the Theorem B family follows the closed
// form of docs/math/bounds.md#mean-field; a halved bound is refuted with a certified counterexample. Fixed
// sample counts (no
// clock).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <regatta/core/precision.hpp>
#include <regatta/measures/wasserstein.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>
#include <regatta/operators/measure_attention.hpp>
#include <regatta/proofs/engine.hpp>
#include <regatta/proofs/registry.hpp>
#include "support/tolerance.hpp"

namespace regatta::proofs {
namespace {

const Claim& claim(const std::string& id) {
  const Claim* c = find_claim(id);
  if (c == nullptr) throw std::runtime_error("claim not registered: " + id);
  return *c;
}

EngineOptions quick(long samples = 8) {
  EngineOptions o;
  o.samples = samples;
  o.seed = 0;
  return o;
}

/// A one-head dot-product layer with A_h = A and V_h = V exactly: head_dim 4 (√4 = 2), WQ = [2A | 0],
/// WK = [I | 0], WV = Vᵀ, WO = I (d ≤ 4).
operators::AttentionLayer layer_of(const Matrix<double>& A, const Matrix<double>& V) {
  const int d = static_cast<int>(A.rows());
  operators::AttentionLayer layer;
  layer.d = d;
  layer.heads = 1;
  layer.head_dim = 4;
  layer.value_dim = d;
  Matrix<double> WQ = Matrix<double>::Zero(d, 4), WK = Matrix<double>::Zero(d, 4);
  WQ.leftCols(d) = 2 * A;
  WK.leftCols(d) = Matrix<double>::Identity(d, d);
  layer.WQ = {WQ};
  layer.WK = {WK};
  layer.WV = {Matrix<double>(V.transpose())};
  layer.WO = Matrix<double>::Identity(d, d);
  return layer;
}

// A measure pair in the layout of mean_field.hpp (mode "moved": ν = μ with atom 1 moved by δ), in d = 2.
const Matrix<double> Y = (Matrix<double>(3, 2) << 0.9, -0.4, -0.7, 0.5, 0.2, 1.1).finished();
const Vector<double> w = (Vector<double>(3) << 0.25, 0.5, 0.25).finished();
const Vector<double> delta = (Vector<double>(2) << 0.003, -0.002).finished();
const Matrix<double> A = (Matrix<double>(2, 2) << -0.6, 0.2, 0.1, -0.4).finished();
const Matrix<double> V = (Matrix<double>(2, 2) << 0.8, -0.3, 0.5, 1.1).finished();

std::vector<double> pair_coordinates() {
  std::vector<double> x;
  for (long j = 0; j < 3; ++j)
    for (long k = 0; k < 2; ++k) x.push_back(Y(j, k));
  for (long j = 0; j < 3; ++j) x.push_back(w(j));
  for (long j = 0; j < 3; ++j)
    for (long k = 0; k < 2; ++k) x.push_back(j == 1 ? delta(k) : 0.0);
  for (long j = 0; j < 3; ++j) x.push_back(w(j));
  return x;
}
void append(std::vector<double>& x, const Matrix<double>& m) {
  for (long i = 0; i < m.rows(); ++i)
    for (long j = 0; j < m.cols(); ++j) x.push_back(m(i, j));
}
Matrix<double> moved_atoms() {
  Matrix<double> Z = Y;
  Z.row(1) += delta.transpose();
  return Z;
}
/// The largest atom norm of both measures and the exact W_1 = w_1 ‖δ‖ of one atom moved (estimates).
double radius() { return std::max(Y.rowwise().norm().maxCoeff(), moved_atoms().rowwise().norm().maxCoeff()); }
double moved_w1() { return w(1) * (moved_atoms().row(1) - Y.row(1)).norm(); }

/// The mean-field constants (C_B, L_R, the depth bound) two ways, the claim's and lip::evaluate's: ~16
/// rounded operations per layer (norms of 2 × 2 matrices, radii, an exponential) in different orders; c = 16
/// for both sides and the exponential's amplification of its argument's rounding (arguments ≲ 8 here).
double formula_rounding(int layers) { return testing::rounding_bound<double>(16, 16.0 * layers); }

/// Two forward passes of the measure attention (the claim's and the library's token path) differ by
/// rounding on the scale of their outputs: ~32 rounded operations for d = 2 and 3 atoms (scores, a softmax,
/// values, output), c = 16 for the two code paths.
const double forward_rounding = testing::rounding_bound<double>(16, 32);

TEST(MeanFieldClaims, ExpectedVerdictsWithEightSamples) {
  for (const char* id : {"mf.context_lipschitz", "mf.context_general", "mf.self_lipschitz",
                         "mf.misspecification", "mf.depth", "mf.infinite_depth"}) {
    const ClaimResult r = check_claim(claim(id), quick());
    EXPECT_TRUE(r.matches()) << id << ": " << to_string(r.verdict) << " " << r.note;
    EXPECT_EQ(r.verdict, Verdict::holds) << id;
    // `holds` allows an excess over 1 of at most 2^(32 − b) relative (engine.hpp; more is `inconclusive`),
    // b = the part's accuracy_bits (53 for parts from double solvers), else the working precision.
    const std::vector<Part>& parts = claim(id).info().parts;
    ASSERT_EQ(parts.size(), r.parts.size()) << id;
    for (std::size_t k = 0; k < parts.size(); ++k) {
      if (parts[k].kind != PartKind::at_most) continue;
      const int bits = parts[k].accuracy_bits > 0 ? parts[k].accuracy_bits : int(quick().precision);
      EXPECT_LE(r.parts[k].max_ratio, 1.0 + std::ldexp(1.0, 32 - bits)) << id << " " << parts[k].name;
    }
    EXPECT_GT(r.family_points, 0) << id;
  }
}

TEST(MeanFieldClaims, ContextConstantMatchesLipEvaluateAndLeftSideMatchesMeasureAttention) {
  const Vector<double> query = (Vector<double>(2) << 1.3, -0.8).finished();
  Point p;
  p.x = pair_coordinates();
  append(p.x, Matrix<double>(query.transpose()));
  append(p.x, A);
  append(p.x, V);
  p.k = {3, 2, 0, 1, 1};
  const Evaluation<double> e = claim("mf.context_lipschitz").evaluate_double(p);
  ASSERT_TRUE(e[0].active);
  // Right side / W_1 is the claim's C_B; lip::evaluate computes the same formula from the layer.
  lip::BoundSetting setting;
  setting.radius = radius();
  setting.query_radius = query.norm();
  const operators::AttentionLayer layer = layer_of(A, V);
  const double cb = lip::evaluate<double>(lip::Bound::mf_context, layer, {}, setting);
  EXPECT_NEAR(e[0].rhs / moved_w1(), cb, formula_rounding(1) * cb);
  // Left side: ‖Γ_μ(x) − Γ_ν(x)‖ from attention_value_map (the token path of the library).
  const measures::DiscreteMeasure<double> mu(Y, w), nu(moved_atoms(), w);
  const Matrix<double> X = query.transpose();
  const double gap =
      (operators::attention_value_map(layer, X, mu) - operators::attention_value_map(layer, X, nu)).norm();
  // A difference of two outputs: its rounding is relative to their size, not to the gap.
  const double gap_tol = forward_rounding * (operators::attention_value_map(layer, X, mu).norm() +
                                             operators::attention_value_map(layer, X, nu).norm());
  EXPECT_NEAR(e[0].lhs, gap, gap_tol);
  // The pushed-forward part with η = δ_x: W_1 of two Dirac masses is the same gap.
  EXPECT_NEAR(e[1].lhs, gap, gap_tol);
}

TEST(MeanFieldClaims, SelfConstantAndOutputDistanceMatchTheLibrary) {
  Point p;
  p.x = pair_coordinates();
  append(p.x, A);
  append(p.x, V);
  p.k = {3, 2, 0};
  const Evaluation<double> e = claim("mf.self_lipschitz").evaluate_double(p);
  lip::BoundSetting setting;
  setting.radius = radius();
  const operators::AttentionLayer layer = layer_of(A, V);
  const double lr = lip::evaluate<double>(lip::Bound::mf_self, layer, {}, setting);
  EXPECT_NEAR(e[0].rhs / moved_w1(), lr, formula_rounding(1) * lr);
  // W_p(Fμ, Fν) from attend_measure and the network simplex.
  const measures::DiscreteMeasure<double> mu(Y, w), nu(moved_atoms(), w);
  const auto Fmu = operators::attend_measure(layer, mu), Fnu = operators::attend_measure(layer, nu);
  // W_p is 1-Lipschitz in each atom: two forward passes move it by forward_rounding times the atoms'
  // size; the transport itself rounds by ~(n + m) eps relative (c = 4, as for two costs).
  const double atoms =
      std::max(Fmu.atoms().rowwise().norm().maxCoeff(), Fnu.atoms().rowwise().norm().maxCoeff());
  for (int q : {1, 2}) {
    const double expected = measures::wasserstein_exact(Fmu, Fnu, q).value;
    const double tol = forward_rounding * atoms + testing::rounding_bound<double>(4, 3 + 3) * expected;
    EXPECT_NEAR(e[q - 1].lhs, expected, tol) << "p = " << q;
  }
}

TEST(MeanFieldClaims, DepthConstantMatchesLipEvaluateForATiedStack) {
  for (bool residual : {false, true}) {
    Point p;
    p.x = pair_coordinates();
    for (int l = 0; l < 3; ++l) {
      append(p.x, A);
      append(p.x, V);
    }
    p.k = {3, 3, 2, 0, residual ? 1 : 0};
    const Evaluation<double> e = claim("mf.depth").evaluate_double(p);
    lip::BoundSetting setting;
    setting.radius = radius();
    setting.depth = 3;
    operators::AttentionOptions options;
    options.residual = residual;
    const double bound = lip::evaluate<double>(lip::Bound::mf_depth, layer_of(A, V), options, setting);
    EXPECT_NEAR(e[0].rhs / moved_w1(), bound, formula_rounding(3) * bound) << "residual " << residual;
    // Left side: three layers of attend_measure_stack and the network simplex.
    const std::vector<operators::AttentionLayer> stack(3, layer_of(A, V));
    const measures::DiscreteMeasure<double> mu(Y, w), nu(moved_atoms(), w);
    const auto Fmu = operators::attend_measure_stack(stack, mu, options);
    const auto Fnu = operators::attend_measure_stack(stack, nu, options);
    const double expected = measures::wasserstein_exact(Fmu, Fnu, 1).value;
    // Each of the 3 layers adds forward_rounding on the atoms' scale; these layers are mild (‖V‖₂ ≈ 1.3,
    // |A| < 1), so later layers carry it forward at most a few times over, inside forward_rounding's c.
    const double atoms =
        std::max(Fmu.atoms().rowwise().norm().maxCoeff(), Fnu.atoms().rowwise().norm().maxCoeff());
    const double tol =
        3 * forward_rounding * (1 + atoms) + testing::rounding_bound<double>(4, 3 + 3) * expected;
    EXPECT_NEAR(e[0].lhs, expected, tol) << "residual " << residual;
  }
}

TEST(MeanFieldClaims, TheoremBFamilyFollowsTheClosedForm) {
  // docs/math/bounds.md#mean-field: at eps = e^-12, R = R' = 2, a = 1 the t -> 0 ratio is (w/eps)(1 + 2aRR'(1
  // - w)) against the
  // bound (1 + 2aRR') e^(2aRR'), w = eps e^(2aRR') / (1 - eps + eps e^(2aRR')); computed here in long double.
  const long double eps = std::exp(-12.0L), E = std::exp(8.0L), wl = eps * E / (1 - eps + eps * E);
  const long double closed = (wl / eps) * (1 + 8 * (1 - wl)) / (9 * E);
  // The reference value of docs/math/bounds.md#mf-theorem-b-family, quoted to four decimals: half a unit of
  // its last place.
  const double quoted_to_four_decimals = 0.5 * std::pow(10.0, -4);
  EXPECT_NEAR(static_cast<double>(closed), 0.9663, quoted_to_four_decimals);
  const Claim& c = claim("mf.context_lipschitz");
  const PrecisionGuard guard(128);
  int checked = 0;
  for (const Point& p : c.family("theorem_b")) {
    // eps = e^-12, R = 2 and the smaller move t = 10^-7 (layout of mean_field.hpp: Y, a, D, c).
    if (p.x[2] != std::exp(-12.0) || p.x[0] != -2 || p.x[4] != 1e-7) continue;
    ++checked;
    const Evaluation<mpfr> e = c.evaluate_mpfr(p);
    const double limit = static_cast<double>(e[2].lhs / e[2].rhs);
    // The 128-bit ratio rounded once to double against ~10 long-double operations (each below a double
    // rounding): c·n = 4·4 eps.
    EXPECT_NEAR(limit, static_cast<double>(closed), testing::rounding_bound<double>(4, 4) * limit);
    // At the family's finite move t the ratio of the statement itself is within O(t) of the limit: its
    // slope in t is of the order of the bound's factor 1 + 2aRR' = 9 (measured: 1.04); c = 10 on top.
    const double t = p.x[4];
    EXPECT_NEAR(static_cast<double>(e[0].lhs / e[0].rhs), limit, 10 * 9 * t);
    EXPECT_TRUE(e[3].active);
  }
  EXPECT_EQ(checked, 1);
  // Theorem C on the same family: the W_1 ratio approaches (1 + 2aR²)/(1 + 3aR²) = 9/13 from below.
  const Claim& s = claim("mf.self_lipschitz");
  double best = 0;
  for (const Point& p : s.family("theorem_b")) {
    const Evaluation<mpfr> e = s.evaluate_mpfr(p);
    best = std::max(best, static_cast<double>(e[0].lhs / e[0].rhs));
  }
  EXPECT_GT(best, 0.68);
  EXPECT_LT(best, 9.0 / 13.0);
}

/// A valid claim made false: every right side of an at_most part multiplied by 1/2.
class HalvedBound final : public Claim {
 public:
  explicit HalvedBound(const Claim& base) : base_(base), info_(base.info()) { info_.id += ".halved"; }
  const ClaimInfo& info() const override { return info_; }
  Point sample(Rng& rng) const override { return base_.sample(rng); }
  std::vector<Point> family(const std::string& name) const override { return base_.family(name); }
  void repair(Point& p) const override { base_.repair(p); }
  Evaluation<double> evaluate_double(const Point& p) const override {
    return halve(base_.evaluate_double(p));
  }
  Evaluation<mpfr> evaluate_mpfr(const Point& p) const override { return halve(base_.evaluate_mpfr(p)); }
  Evaluation<interval> evaluate_interval(const Point& p) const override {
    return halve(base_.evaluate_interval(p));
  }

 private:
  template <class S>
  Evaluation<S> halve(Evaluation<S> e) const {
    for (std::size_t k = 0; k < e.size(); ++k)
      if (info_.parts[k].kind == PartKind::at_most) e[k].rhs = e[k].rhs / S(2);
    return e;
  }
  const Claim& base_;
  ClaimInfo info_;
};

TEST(MeanFieldClaims, HalvedBoundsAreRefutedWithCertifiedCounterexamples) {
  for (const char* id : {"mf.context_lipschitz", "mf.self_lipschitz", "mf.context_general"}) {
    const HalvedBound bad(claim(id));
    const ClaimResult r = check_claim(bad, quick());
    EXPECT_EQ(r.verdict, Verdict::refuted) << id;
    ASSERT_TRUE(r.counterexample.has_value()) << id;
    EXPECT_TRUE(r.counterexample->certified) << id;
    EXPECT_GT(r.counterexample->ratio, 1.0) << id;
  }
}

}  // namespace
}  // namespace regatta::proofs
