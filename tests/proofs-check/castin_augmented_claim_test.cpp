// castin.sqrt_n_augmented: the expected verdict, certified, at fixed sample counts (no clock); a false
// variant (the right side scaled down) refuted with a certified counterexample; and the claim's left side
// against an independent computation — the Jacobian of the bias-free detail::AttentionMap on the augmented
// tokens (x, 1) (docs/bounds.md, "Biased layers", step 3), restricted to the original coordinates — and its
// right side against the formula from full SVDs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <regatta/core/dense_svd.hpp>
#include <regatta/proofs/detail/attention_map.hpp>
#include <regatta/proofs/engine.hpp>
#include <regatta/proofs/registry.hpp>
#include "../support/tolerance.hpp"

namespace regatta::proofs {
namespace {

const char* const id = "castin.sqrt_n_augmented";

const Claim& claim() {
  const Claim* c = find_claim(id);
  EXPECT_NE(c, nullptr) << id;
  return *c;
}

EngineOptions quick(long samples) {
  EngineOptions o;
  o.samples = samples;
  return o;
}

/// Every right side multiplied by `factor` (a false variant of the claim).
class ScaledRight final : public Claim {
 public:
  ScaledRight(const Claim& base, double factor) : base_(base), info_(base.info()), factor_(factor) {
    info_.id += ".scaled";
  }
  const ClaimInfo& info() const override { return info_; }
  Point sample(Rng& rng) const override { return base_.sample(rng); }
  std::vector<Point> family(const std::string& name) const override { return base_.family(name); }
  void repair(Point& p) const override { base_.repair(p); }
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

TEST(CastinAugmentedClaim, HoldsCertified) {
  for (long samples : {16L, 128L}) {
    const ClaimResult r = check_claim(claim(), quick(samples));
    EXPECT_EQ(r.verdict, Verdict::holds) << r.note;
    EXPECT_TRUE(r.certified) << r.note;
    ASSERT_FALSE(r.parts.empty());
    EXPECT_GT(r.parts.front().evaluated, samples);  // points are in the domain, not all skipped
  }
}

TEST(CastinAugmentedClaim, RightSideScaledDownIsRefutedWithACertifiedCounterexample) {
  const ClaimResult ok = check_claim(claim(), quick(64));
  ASSERT_GT(ok.max_ratio, 0.0);
  // Scaled so that the largest ratio found (an estimate) is 2: the variant is false at that point.
  const ScaledRight bad(claim(), ok.max_ratio / 2);
  const ClaimResult r = check_claim(bad, quick(64));
  EXPECT_EQ(r.verdict, Verdict::refuted);
  EXPECT_TRUE(r.certified);
  ASSERT_TRUE(r.counterexample.has_value());
  EXPECT_TRUE(r.counterexample->certified);
  EXPECT_GT(r.counterexample->ratio, 1.0);
}

double svd_norm(const Matrix<double>& M) { return largest_singular_value(M); }

TEST(CastinAugmentedClaim, SidesMatchTheAugmentedBiasFreeMapAndTheSvdFormula) {
  // Every adversarial point is d = d_h = 1, one head: x = (R, X, WQ, WK, WV, bQ, bK, bV, WO, bO).
  const double tolerance = testing::rounding_bound<double>(10, 1000);
  int checked = 0;
  for (const Point& p : claim().family("adversarial")) {
    const long n = p.k[0];
    if (p.k[4] != 0)
      continue;  // the unmasked points (AttentionMap takes the same causal mask; one is enough)
    const double R = p.x[0];
    Matrix<double> X(n, 1);
    for (long i = 0; i < n; ++i) X(i, 0) = p.x[static_cast<std::size_t>(1 + i)];
    const std::size_t w = static_cast<std::size_t>(1 + n);
    const double wq = p.x[w], wk = p.x[w + 1], wv = p.x[w + 2], bq = p.x[w + 3], bk = p.x[w + 4],
                 bv = p.x[w + 5], wo = p.x[w + 6];
    // Augmented tokens (x, 1): q̃ = [wq; bq], k̃ = [wk; bk], value-output map [wv·wo; bv·wo] (2×1).
    Matrix<double> Xa(n, 2);
    Xa.col(0) = X.col(0);
    Xa.col(1).setOnes();
    detail::AttentionMap<double> map;
    map.kind = detail::ScoreKind::dot;
    Matrix<double> WQ(2, 1), WK(2, 1), Wval(2, 1);
    WQ << wq, bq;
    WK << wk, bk;
    Wval << wv * wo, bv * wo;
    map.heads.push_back({WQ, WK, Wval, 1.0});
    const Matrix<double> Ja = map.jacobian(Xa);  // n × 2n: columns j·2 + b
    Matrix<double> J(n, n);
    for (long j = 0; j < n; ++j) J.col(j) = Ja.col(2 * j);  // derivative in x_j only (the 1 is constant)
    const Evaluation<double> e = claim().evaluate_double(p);
    ASSERT_EQ(e.size(), 1u);
    EXPECT_NEAR(e[0].lhs, svd_norm(J), tolerance * svd_norm(J));
    // Right side: √3|wv·wo|((a² + c²/t²)(R² + t²)²(4n + 1) + n)^{1/2}, a = wq·wk, c = wk·bq (d_h = 1), the
    // smallest over t = 2^k, |k| ≤ 8 (docs/bounds.md, Remark).
    double rhs = std::numeric_limits<double>::infinity();
    for (int k = -8; k <= 8; ++k) {
      const double t = std::pow(2.0, k), rr = R * R + t * t;
      Matrix<double> M(2, 1);
      M << wq * wk, wk * bq / t;
      const double a = svd_norm(M);
      rhs =
          std::min(rhs, std::sqrt(3.0) * std::abs(wv * wo) * std::sqrt(a * a * rr * rr * (4.0 * n + 1) + n));
    }
    EXPECT_NEAR(e[0].rhs, rhs, tolerance * rhs);
    EXPECT_LE(e[0].lhs, e[0].rhs);
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

}  // namespace
}  // namespace regatta::proofs
