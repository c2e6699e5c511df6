// The havens.* claims (docs/math/bounds.md#havens-local): each reaches its catalogue verdict, certified, on a
// fixed
// sample budget; their evaluators agree with independent computations — the streamed forward pass attend()
// for the left sides and the library's Havens ingredients (lipschitz/local.hpp: matrix-free Lanczos,
// certified enclosures, δ, δ_naive, L_GN, the certified radius by bisection) for the right sides; and false
// variants (a bound halved, an identity off by 2^-200) are refuted with certified counterexamples.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <regatta/core/precision.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/local.hpp>
#include <regatta/proofs/engine.hpp>
#include <regatta/proofs/registry.hpp>
#include "support/tolerance.hpp"

namespace regatta::proofs {
namespace {

using operators::AttentionLayer;
using operators::AttentionOptions;
using Mat = Matrix<double>;

const Claim& claim(const std::string& id) {
  const Claim* c = find_claim(id);
  if (c == nullptr) throw std::runtime_error("claim not registered: " + id);
  return *c;
}

EngineOptions quick(long samples = 8, unsigned precision = 128) {
  EngineOptions o;
  o.samples = samples;
  o.precision = precision;
  return o;
}

Mat gaussian(std::uint64_t seed, long rows, long cols) {
  Rng rng(seed);
  Mat M(rows, cols);
  for (long i = 0; i < rows; ++i)
    for (long j = 0; j < cols; ++j) M(i, j) = rng.normal();
  return M;
}

void append(std::vector<double>& x, const Mat& M) { x.insert(x.end(), M.data(), M.data() + M.size()); }
void append(std::vector<double>& x, const Vector<double>& v) {
  x.insert(x.end(), v.data(), v.data() + v.size());
}

/// A random layer with the biases of mode 0 (none), 1 (query, value, output) or 2 (all).
AttentionLayer layer_with(int biases, std::uint64_t seed) {
  operators::RandomLayerSpec spec;
  spec.d = 4;
  spec.heads = 2;
  spec.head_dim = 2;
  spec.value_dim = 3;
  spec.scale = 1.5;
  spec.seed = seed;
  spec.biases = biases > 0;
  AttentionLayer L = operators::random_layer(spec);
  if (biases == 1) L.bK.clear();
  return L;
}

/// The claims' point layout (proofs-check/src/claims/havens/havens.hpp): k = {n, d, H, d_h, d_v, causal,
/// residual, biases}; x = per head W^Q, W^K, W^V | W^O | per head b_Q, b_V; b_O | per head b_K | X | ε | U.
Point layer_point(const AttentionLayer& L, int biases, const AttentionOptions& o, const Mat& X) {
  Point p;
  p.k = {X.rows(), L.d, L.heads, L.head_dim, L.value_dim, o.causal ? 1L : 0L, o.residual ? 1L : 0L, biases};
  for (int h = 0; h < L.heads; ++h) {
    append(p.x, L.WQ[h]);
    append(p.x, L.WK[h]);
    append(p.x, L.WV[h]);
  }
  append(p.x, L.WO);
  if (biases >= 1) {
    for (int h = 0; h < L.heads; ++h) {
      append(p.x, L.bQ[h]);
      append(p.x, L.bV[h]);
    }
    append(p.x, L.bO);
  }
  if (biases == 2)
    for (int h = 0; h < L.heads; ++h) append(p.x, L.bK[h]);
  append(p.x, X);
  return p;
}

Point perturbed_point(const AttentionLayer& L, int biases, const AttentionOptions& o, const Mat& X,
                      double eps, const Mat& U) {
  Point p = layer_point(L, biases, o, X);
  p.x.push_back(eps);
  append(p.x, U);
  return p;
}

bool overlap(const interval& a, const interval& b) {
  return lower_bound(a) <= upper_bound(b) && lower_bound(b) <= upper_bound(a);
}

double mid(const interval& a) { return static_cast<double>(mpfr((lower_bound(a) + upper_bound(a)) / 2)); }

/// The library's ξ, κ_h (hence δ and ‖DF‖₂) are matrix-free Lanczos estimates, from below, stopped at the
/// relative accuracy τ of SpectralOptions (matrix_free.hpp): the claims' dense or enclosed norms may lie
/// above them by τ relative (on these small layers they agree to rounding, observed ~1e-16).
const double lanczos_tolerance = lip::SpectralOptions{}.relative_tolerance;

/// Two forward passes of one layer (the claim's Block in S, the streamed attend()) differ by rounding on the
/// scale of the outputs: a chain of ~32 rounded operations at these sizes (scores over d = 4, a softmax over
/// n ≤ 4 keys, values over n, the output projection over H·d_v = 6 terms), c = 16 for the two different
/// code paths (blocked and streamed sums, the interval midpoint).
const double forward_rounding = testing::rounding_bound<double>(16, 32);

// ---------------------------------------------------------------------------------------------------------
// Verdicts
// ---------------------------------------------------------------------------------------------------------

TEST(HavensClaims, EveryClaimReachesItsCatalogueVerdictCertified) {
  const std::vector<std::pair<std::string, Verdict>> expected = {
      {"havens.local_delta", Verdict::holds},         {"havens.xi_exact", Verdict::identity},
      {"havens.score_identity", Verdict::identity},   {"havens.naive_ordering", Verdict::holds},
      {"havens.gradnorm_comparator", Verdict::holds}, {"havens.certified_radius", Verdict::holds},
      {"havens.power_iteration", Verdict::holds}};
  for (const auto& [id, verdict] : expected) {
    const ClaimResult r = check_claim(claim(id), quick());
    EXPECT_EQ(r.verdict, verdict) << id << ": " << r.note;
    EXPECT_TRUE(r.certified) << id << ": " << r.note;
    EXPECT_EQ(r.skipped_points, 0) << id;
    for (const PartOutcome& part : r.parts) {
      EXPECT_FALSE(part.failed) << id << " " << part.name;
      if (part.kind == PartKind::at_most && part.evaluated > 0) {
        EXPECT_LE(part.max_ratio, 1.0) << id << " " << part.name;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// The evaluators against independent computations
// ---------------------------------------------------------------------------------------------------------

struct Config {
  int biases;
  bool causal, residual;
};

class HavensAgainstLibrary : public ::testing::TestWithParam<Config> {};

TEST_P(HavensAgainstLibrary, LeftSidesMatchAttendAndRightSidesEncloseTheLibraryIngredients) {
  const Config c = GetParam();
  const AttentionLayer L = layer_with(c.biases, 31 + static_cast<std::uint64_t>(c.biases));
  AttentionOptions o;
  o.causal = c.causal;
  o.residual = c.residual;
  const Mat X = gaussian(41, 4, 4) * 0.8, U = gaussian(43, 4, 4);
  const double eps = 0.3;
  const Point p = perturbed_point(L, c.biases, o, X, eps, U);
  const Evaluation<double> ed = claim("havens.local_delta").evaluate_double(p);
  PrecisionGuard guard(128);
  const Evaluation<interval> local = claim("havens.local_delta").evaluate_interval(p);
  const Evaluation<interval> gradnorm = claim("havens.gradnorm_comparator").evaluate_interval(p);

  // Left side: ‖F(X + E) − F(X)‖_F by the streamed double forward pass (a different code path from Block).
  const Mat E = U * (eps / U.norm());
  const double change = (operators::attend(L, Mat(X + E), o) - operators::attend(L, X, o)).norm();
  // A difference of two outputs: its rounding is relative to their sizes, not to the change.
  const double change_tol =
      forward_rounding * (operators::attend(L, Mat(X + E), o).norm() + operators::attend(L, X, o).norm());
  EXPECT_NEAR(mid(local[0].lhs), change, change_tol);
  EXPECT_NEAR(ed[0].lhs, change, change_tol);

  // Right sides: the library's certified ingredients (matrix-free witnesses, its own Kronecker certificates).
  const lip::HavensIngredients<double> q = lip::havens_estimates(L, o, X);
  const lip::HavensIngredients<interval> qc = lip::havens_certified(L, o, X, q);
  EXPECT_TRUE(overlap(local[0].rhs, lip::havens_delta(qc, eps)));
  EXPECT_NEAR(mid(local[0].rhs), lip::havens_delta(q, eps), lanczos_tolerance * lip::havens_delta(q, eps));
  EXPECT_TRUE(overlap(local[1].rhs, lip::havens_delta_coefficients(qc)[0]));  // c₁
  EXPECT_TRUE(overlap(gradnorm[0].rhs, interval(eps) * lip::havens_gradnorm_lipschitz(qc, eps)));
  // ‖DF(X)‖₂ (claim: norm of the library's dense Jacobian) against the library's matrix-free estimate.
  const lip::SpectralEstimate jn =
      lip::jacobian_norm_2(operators::Block<double>(L, o).linearize(X), lip::SpectralOptions{});
  EXPECT_NEAR(mid(local[1].lhs), jn.estimate, lanczos_tolerance * jn.estimate);

  // Naive variants: δ ≤ δ_naive (kernel) ≤ δ_naive (weights) against the library's.
  Point naive = p;
  naive.x.push_back(0);  // j of 1 e_jᵀ
  const Evaluation<interval> ordering = claim("havens.naive_ordering").evaluate_interval(naive);
  const std::size_t last = ordering.size() - 1;
  EXPECT_TRUE(overlap(ordering[last - 1].lhs, lip::havens_delta(qc, eps)));
  EXPECT_TRUE(overlap(ordering[last].lhs, lip::havens_delta_naive_kernel(qc, eps)));
  EXPECT_TRUE(overlap(ordering[last].rhs, lip::havens_delta_naive_weights(qc, eps)));
}

INSTANTIATE_TEST_SUITE_P(Biases, HavensAgainstLibrary,
                         ::testing::Values(Config{0, false, false}, Config{0, true, true},
                                           Config{1, false, true}, Config{2, true, false}));

TEST(HavensClaims, OneHeadWithoutSkipXiIsTheProductOfNormsAndOneHotKernelsHaveNormSqrtN) {
  // ξ = ‖P ⊗ Wᵀ‖₂ = ‖P‖₂‖W‖₂ (closed form of a Kronecker norm); the claim's equal part compares it with the
  // Kronecker matrix's norm, the library (kernel level, H = 1, no skip) with its own ‖P_h‖₂ ‖W^VO_h‖₂.
  operators::RandomLayerSpec spec;
  spec.d = 3;
  spec.heads = 1;
  spec.head_dim = 2;
  spec.value_dim = 3;
  spec.seed = 5;
  const AttentionLayer L = operators::random_layer(spec);
  const AttentionOptions o;
  const Mat X = gaussian(51, 4, 3), U = gaussian(53, 4, 3);
  Point p = perturbed_point(L, 0, o, X, 0.1, U);
  p.x.push_back(2);
  PrecisionGuard guard(128);
  const Evaluation<interval> e = claim("havens.naive_ordering").evaluate_interval(p);
  ASSERT_TRUE(e[1].active);
  EXPECT_FALSE(e[0].active);
  const lip::HavensIngredients<double> q = lip::havens_estimates(L, o, X);
  // Two products of spectral norms of matrices with ≤ n·d = 12 entries (sums of ≤ 12 terms each), the
  // claim's in intervals and the library's in double: c = 4 for the two sides and the product.
  const double norm_rounding = testing::rounding_bound<double>(4, double(X.size()));
  EXPECT_NEAR(mid(e[1].lhs), q.kernel[0] * q.values[0], norm_rounding * q.xi);
  EXPECT_NEAR(mid(e[1].lhs), q.xi, lanczos_tolerance * q.xi);
  // ‖1 e_jᵀ‖₂ = √n exactly: the enclosure of the norm contains √4 = 2.
  EXPECT_TRUE(overlap(e[6].lhs, interval(2)));
}

TEST(HavensClaims, PowerIterationComparesTheLibraryLanczosWithTheDenseNorms) {
  // On a random layer the library's matrix-free Lanczos agrees with the dense Kronecker norm (claim parts
  // "from below", ratio ≤ 1 within the rounding of one evaluation) to that rounding.
  const AttentionLayer L = layer_with(1, 61);
  AttentionOptions o;
  o.residual = true;
  const Mat X = gaussian(63, 3, 4), V = gaussian(65, 3, 4), W = gaussian(67, 3, 4);
  Point p = perturbed_point(L, 1, o, X, 0.1, V);
  for (long i = 0; i < W.size(); ++i) p.x.push_back(W.data()[i]);
  const Evaluation<double> e = claim("havens.power_iteration").evaluate_double(p);
  const lip::HavensIngredients<double> q = lip::havens_estimates(L, o, X);
  const Eigen::Index nd = X.size();
  // The claim's allowance r_ξ for one double evaluation of ‖M w‖: default_power_tolerance(n d, n d) times
  // the sum of the absolute terms ‖W^skip‖_F + Σ_h ‖P_h‖_F ‖W^VO_h‖_F, bounded here by ‖P_h‖_F ≤ √n (rows
  // of a Markov kernel) and ‖W^VO_h‖_F ≤ √min(d, d_v) ‖W^VO_h‖₂.
  double terms = o.residual ? std::sqrt(double(L.d)) : 0;
  for (int h = 0; h < L.heads; ++h)
    terms += std::sqrt(double(X.rows()) * std::min(L.d, L.value_dim)) * q.values[std::size_t(h)];
  const double one_evaluation = default_power_tolerance<double>(nd, nd);
  const double allowance = one_evaluation * terms;
  EXPECT_NEAR(e[3].lhs, q.xi, 0);  // the library value itself
  // Dense σ_max + r_ξ vs Lanczos: r_ξ, and Lanczos' own rounding (its Krylov space is the whole n d = 12
  // dimensional space, so its error is that of an evaluation, another r_ξ at most).
  EXPECT_NEAR(e[3].rhs, q.xi, 2 * allowance);
  EXPECT_LE(e[0].lhs, e[0].rhs * (1 + one_evaluation));  // a random V is below σ_max
  // ... and not at it: a random direction's quotient is ‖M‖_F/√(n d) on average, far below σ_max here
  // (measured 0.4 σ_max); require a shortfall far above any rounding.
  constexpr double shortfall = 1e-3;
  EXPECT_LT(e[0].lhs, e[0].rhs * (1 - shortfall));
  // Matrix-free = Kronecker: 2 + 2H relative defects of matrices whose entries are sums of ≤ n d products,
  // rounded differently by the two constructions (c = 4: both sides and the products).
  EXPECT_NEAR(e[2].lhs, 0.0, (2 + 2 * L.heads) * testing::rounding_bound<double>(4, double(nd)));
}

TEST(HavensClaims, CertifiedRadiusComposesTheLibraryDeltaAndItsBisectionRadius) {
  // k = layer | {d0, C, y}; x = layer weights | Z | W_emb | W_cls | b | μ | ε | U.
  const AttentionLayer L = layer_with(0, 71);
  const AttentionOptions o;
  const long n = 3, d0 = 2, C = 3;
  const Mat Z = gaussian(73, n, d0), Wemb = gaussian(75, d0, 4), Wcls = gaussian(77, 4, C),
            U = gaussian(79, n, d0);
  const double eps = 0.02;
  const Mat X = Z * Wemb;
  const double l_in = spectral_norm_reference<double>(Wemb);
  const double l_out = spectral_norm_reference<double>(Wcls) / std::sqrt(static_cast<double>(n));
  const lip::HavensIngredients<double> q = lip::havens_estimates(L, o, X);
  for (double mu : {2.0, 0.5}) {
    Point p = layer_point(L, 0, o, Mat(Mat::Zero(0, 0)));
    p.k.insert(p.k.end(), {d0, C, 1});
    p.k[0] = n;
    append(p.x, Z);
    append(p.x, Wemb);
    append(p.x, Wcls);
    append(p.x, Vector<double>(Vector<double>::Zero(C)));
    p.x.push_back(mu);
    p.x.push_back(eps);
    append(p.x, U);
    const Evaluation<double> e = claim("havens.certified_radius").evaluate_double(p);
    // Composition: ε₁ = ‖W_emb‖ε, δ_g = L_out δ(X, ε₁) with the library's δ.
    // ‖W_emb‖₂ ε two ways: the norm of a d0 × 4 matrix (sums of ≤ 8 terms), c = 4 for both sides.
    EXPECT_NEAR(e[0].rhs, l_in * eps, testing::rounding_bound<double>(4, double(Wemb.size())) * l_in * eps);
    const double delta_g = l_out * lip::havens_delta(q, l_in * eps);
    EXPECT_NEAR(e[2].rhs, delta_g, lanczos_tolerance * delta_g);
    EXPECT_EQ(e[4].active, mu > 1);
    // The margin is μ√2δ_g: the library's bisection radius lies beyond ε exactly when μ > 1.
    lip::MarginSetting s;
    s.margin = mu * std::sqrt(2.0) * delta_g;
    s.readout_lipschitz = l_out;
    s.embedding_lipschitz = l_in;
    const lip::RadiusResult r = lip::havens_certified_radius(q, s);
    if (mu > 1) {
      EXPECT_GT(r.radius, eps);
      EXPECT_LT(e[4].lhs, e[4].rhs);  // the argmax did not change under the claim's perturbation
    } else {
      // The radius ε* solves √2 δ_g(ε*) = μ √2 δ_g(ε) < √2 δ_g(ε), so ε* < ε, and the bisection's first
      // failure lies within its stopping rule (hi − lo ≤ τ lo) above ε*.
      EXPECT_LT(r.first_failure, eps * (1 + s.relative_tolerance));
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// False variants are caught
// ---------------------------------------------------------------------------------------------------------

/// Forwards to a claim; `scale` multiplies the right side of every at_most part, `shift` the reference of
/// every equal part by (1 + shift).
class Altered final : public Claim {
 public:
  Altered(const Claim& base, double scale, double shift)
      : base_(base), info_(base.info()), scale_(scale), shift_(shift) {
    info_.id += ".altered";
  }
  const ClaimInfo& info() const override { return info_; }
  Point sample(Rng& rng) const override { return base_.sample(rng); }
  std::vector<Point> family(const std::string& name) const override { return base_.family(name); }
  void repair(Point& p) const override { base_.repair(p); }
  bool searchable() const override { return base_.searchable(); }
  Evaluation<double> evaluate_double(const Point& p) const override {
    return alter(base_.evaluate_double(p));
  }
  Evaluation<mpfr> evaluate_mpfr(const Point& p) const override { return alter(base_.evaluate_mpfr(p)); }
  Evaluation<interval> evaluate_interval(const Point& p) const override {
    return alter(base_.evaluate_interval(p));
  }

 private:
  template <class S>
  Evaluation<S> alter(Evaluation<S> e) const {
    S shift(1);
    for (int i = 0; i < 200; ++i) shift /= S(2);  // 2^-200, exact
    for (std::size_t k = 0; k < e.size(); ++k) {
      if (info_.parts[k].kind == PartKind::at_most)
        e[k].rhs = e[k].rhs * scalar_traits<S>::from_double(scale_);
      if (info_.parts[k].kind == PartKind::equal && shift_ != 0) e[k].rhs = e[k].rhs * (S(1) + shift) + shift;
    }
    return e;
  }
  const Claim& base_;
  ClaimInfo info_;
  double scale_, shift_;
};

TEST(HavensClaims, HalvedDeltaIsRefutedByTheAdversarialPoints) {
  const Altered half(claim("havens.local_delta"), 0.5, 0);
  const ClaimResult r = check_claim(half, quick());
  EXPECT_EQ(r.verdict, Verdict::refuted);
  ASSERT_TRUE(r.counterexample.has_value());
  EXPECT_TRUE(r.counterexample->certified);
  EXPECT_GT(r.counterexample->ratio, 1.0);
}

TEST(HavensClaims, XiIdentityOffBy2ToTheMinus200IsRefuted) {
  const Altered off(claim("havens.xi_exact"), 1, 1);
  const ClaimResult r = check_claim(off, quick(4, 256));
  EXPECT_EQ(r.verdict, Verdict::refuted);
  EXPECT_TRUE(r.certified) << "the interval at 512 bits excludes 0";
}

}  // namespace
}  // namespace regatta::proofs
