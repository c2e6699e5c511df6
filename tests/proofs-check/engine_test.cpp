// The checker engine catches false claims injected into valid ones, and reaches the expected verdicts on
// representative catalogue claims. Every run uses a fixed sample count (no clock), except the one check that
// the opt-in budget draws at least min_samples.
#include <gtest/gtest.h>
#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <string>

#include <regatta/core/decimal.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/proofs/detail/numeric.hpp>
#include <regatta/proofs/engine.hpp>
#include <regatta/proofs/registry.hpp>
#include "support/tolerance.hpp"

namespace regatta::proofs {
namespace {

/// Forwards everything to a registered claim and lets a subclass edit the evaluations.
class Decorated : public Claim {
 public:
  Decorated(const Claim& base, std::string suffix) : base_(base), info_(base.info()) { info_.id += suffix; }
  const ClaimInfo& info() const override { return info_; }
  Point sample(Rng& rng) const override { return base_.sample(rng); }
  std::vector<Point> family(const std::string& name) const override { return base_.family(name); }
  void repair(Point& p) const override { base_.repair(p); }
  bool searchable() const override { return base_.searchable(); }
  nlohmann::json describe(const Point& p) const override { return base_.describe(p); }
  Evaluation<double> evaluate_double(const Point& p) const override { return edit(base_.evaluate_double(p)); }
  Evaluation<mpfr> evaluate_mpfr(const Point& p) const override { return edit(base_.evaluate_mpfr(p)); }
  Evaluation<interval> evaluate_interval(const Point& p) const override {
    return edit(base_.evaluate_interval(p));
  }

 protected:
  virtual Evaluation<double> edit(Evaluation<double> e) const = 0;
  virtual Evaluation<mpfr> edit(Evaluation<mpfr> e) const = 0;
  virtual Evaluation<interval> edit(Evaluation<interval> e) const = 0;
  ClaimInfo& mutable_info() { return info_; }

 private:
  const Claim& base_;
  ClaimInfo info_;
};

/// A valid bound made false: every right side of an at_most part multiplied by `factor` (< 1).
class ScaledBound final : public Decorated {
 public:
  ScaledBound(const Claim& base, double factor) : Decorated(base, ".scaled"), factor_(factor) {}

 private:
  template <class S>
  Evaluation<S> scale(Evaluation<S> e) const {
    for (std::size_t k = 0; k < e.size(); ++k)
      if (info().parts[k].kind == PartKind::at_most) e[k].rhs = e[k].rhs * S(factor_);
    return e;
  }
  Evaluation<double> edit(Evaluation<double> e) const override { return scale(std::move(e)); }
  Evaluation<mpfr> edit(Evaluation<mpfr> e) const override { return scale(std::move(e)); }
  Evaluation<interval> edit(Evaluation<interval> e) const override { return scale(std::move(e)); }
  double factor_;
};

/// An identity made false by one unit in the last place at `bits` bits: reference × (1 + 2^(1 − bits)).
class PerturbedIdentity final : public Decorated {
 public:
  PerturbedIdentity(const Claim& base, int bits) : Decorated(base, ".perturbed"), bits_(bits) {}

 private:
  template <class S>
  Evaluation<S> perturb(Evaluation<S> e) const {
    S ulp(1);
    for (int i = 0; i < bits_ - 1; ++i) ulp /= S(2);  // exact at any precision >= bits
    for (std::size_t k = 0; k < e.size(); ++k)
      if (info().parts[k].kind == PartKind::equal && e[k].active) e[k].rhs = e[k].rhs * (S(1) + ulp);
    return e;
  }
  Evaluation<double> edit(Evaluation<double> e) const override { return perturb(std::move(e)); }
  Evaluation<mpfr> edit(Evaluation<mpfr> e) const override { return perturb(std::move(e)); }
  Evaluation<interval> edit(Evaluation<interval> e) const override { return perturb(std::move(e)); }
  int bits_;
};

EngineOptions quick(unsigned precision = 128, long samples = 16) {
  EngineOptions o;
  o.samples = samples;
  o.precision = precision;
  o.seed = 7;
  return o;
}

const Claim& claim(const std::string& id) {
  const Claim* c = find_claim(id);
  EXPECT_NE(c, nullptr) << id;
  return *c;
}

TEST(ProofsEngine, ValidBoundHoldsAndHalfOfItIsRefutedWithACertifiedCounterexample) {
  for (const char* id : {"softmax.half", "kim.lemma_phi", "layernorm.lip2"}) {
    const ClaimResult ok = check_claim(claim(id), quick());
    EXPECT_EQ(ok.verdict, Verdict::holds) << id << ": " << ok.note;
    const ScaledBound half(claim(id), 0.5);
    const ClaimResult bad = check_claim(half, quick());
    EXPECT_EQ(bad.verdict, Verdict::refuted) << id;
    EXPECT_TRUE(bad.certified) << id;
    ASSERT_TRUE(bad.counterexample.has_value()) << id;
    EXPECT_TRUE(bad.counterexample->certified) << id;
    EXPECT_GT(bad.counterexample->ratio, 1.0) << id;
  }
}

TEST(ProofsEngine, IdentityPerturbedByOneUlpAt256BitsIsCaught) {
  for (const char* id : {"kim.phi_lambert", "kim.lower_family_inf", "mf.max_entropy"}) {
    const ClaimResult ok = check_claim(claim(id), quick(256, 8));
    EXPECT_EQ(ok.verdict, Verdict::identity) << id << ": " << ok.note;
    for (const PartOutcome& part : ok.parts)
      if (part.kind == PartKind::equal && part.evaluated > 0) {
        // The error shrinks with the precision: at 512 bits it is far below the 256-bit rounding level.
        EXPECT_LT(part.error_2p, std::ldexp(1.0, -400)) << id << " " << part.name;
      }
    const PerturbedIdentity off(claim(id), 256);
    const ClaimResult bad = check_claim(off, quick(256, 8));
    EXPECT_EQ(bad.verdict, Verdict::refuted) << id;
    EXPECT_TRUE(bad.certified) << id << " (the interval at 512 bits excludes 0)";
  }
}

TEST(ProofsEngine, SameSeedSameSamples) {
  const Claim& c = claim("kim.kernel_rowsum");
  const ClaimResult a = check_claim(c, quick(128, 24)), b = check_claim(c, quick(128, 24));
  EXPECT_EQ(a.max_ratio, b.max_ratio);
  EXPECT_EQ(a.parts[0].max_ratio_double, b.parts[0].max_ratio_double);
  EXPECT_EQ(a.random_points, 24);
  EXPECT_EQ(a.climb_steps, 24);
}

TEST(ProofsEngine, DefaultRunChecksTheClaimsFixedCountsWhateverTheClock) {
  // No --samples, no --budget: the claim's default counts, so two machines check the same points.
  const Claim& c = claim("softmax.half");
  EngineOptions o;
  EXPECT_EQ(o.samples, 0);
  EXPECT_EQ(o.budget_seconds, 0);
  const ClaimResult a = check_claim(c, o), b = check_claim(c, o);
  EXPECT_EQ(a.random_points, c.info().default_samples);
  EXPECT_EQ(a.climb_steps, c.info().default_samples);
  EXPECT_EQ(a.max_ratio, b.max_ratio);
  for (std::size_t k = 0; k < a.parts.size(); ++k)
    EXPECT_EQ(a.parts[k].max_ratio_double, b.parts[k].max_ratio_double) << k;
  // --samples overrides the default for every claim; the budget is the opt-in alternative (at least
  // min_samples of each, then as many as the clock allows).
  o.samples = 5;
  EXPECT_EQ(check_claim(c, o).random_points, 5);
  o.samples = 0;
  o.budget_seconds = 1e-6;
  const ClaimResult budget = check_claim(c, o);
  EXPECT_GE(budget.random_points, o.min_samples);
  EXPECT_GE(budget.climb_steps, o.min_samples);
  for (const ClaimPtr& p : registry()) EXPECT_GE(p->info().default_samples, 1) << p->info().id;
}

TEST(ProofsEngine, QuotedKimBoundIsRefutedWithACertifiedCounterexampleFile) {
  EngineOptions o = quick(128, 8);
  o.out_dir = std::filesystem::temp_directory_path() / "regatta_proofs_engine_test";
  const ClaimResult r = check_claim(claim("kim.thm32_2_quoted"), o);
  EXPECT_EQ(r.verdict, Verdict::refuted);
  ASSERT_TRUE(r.counterexample.has_value());
  EXPECT_TRUE(r.counterexample->certified);
  // docs/math/bounds.md#kim-thm32: ‖J‖₂ ≥ 48.58 against the quoted bound 24.70 at n = 3, W^Q = 5.
  EXPECT_GT(r.counterexample->ratio, 1.9);
  EXPECT_TRUE(std::filesystem::exists(r.counterexample->file));
  std::filesystem::remove_all(o.out_dir);
}

/// Whether the decimal `text` is <= (sign −1) or >= (sign +1) the binary number `v`, decided exactly: the
/// text read at 512 bits rounded toward v's side bounds the decimal on the other side.
bool decimal_on_side(const std::string& text, mpfr_srcptr v, int sign) {
  mpfr_t t;
  mpfr_init2(t, 512);
  EXPECT_EQ(mpfr_set_str(t, text.c_str(), 10, sign < 0 ? MPFR_RNDU : MPFR_RNDD), 0) << text;
  const int c = mpfr_cmp(t, v);
  mpfr_clear(t);
  return sign < 0 ? c <= 0 : c >= 0;
}
bool decimal_le(const std::string& text, const mpfr& v) {
  return decimal_on_side(text, v.backend().data(), -1);
}
bool decimal_ge(const std::string& text, const mpfr& v) {
  return decimal_on_side(text, v.backend().data(), 1);
}
/// The order of two decimals of 20 digits (−1, 0, 1): read at 512 bits to nearest, distinct ones stay
/// distinct and ordered (their spacing is far above 2^−512 relative).
int decimal_cmp(const std::string& a, const std::string& b) {
  mpfr_t x, y;
  mpfr_inits2(512, x, y, static_cast<mpfr_ptr>(nullptr));
  EXPECT_EQ(mpfr_set_str(x, a.c_str(), 10, MPFR_RNDN), 0) << a;
  EXPECT_EQ(mpfr_set_str(y, b.c_str(), 10, MPFR_RNDN), 0) << b;
  const int c = mpfr_cmp(x, y);
  mpfr_clears(x, y, static_cast<mpfr_ptr>(nullptr));
  return c;
}

TEST(ProofsEngine, CounterexampleDecimalsEncloseTheirIntervals) {
  // Ends that 20 digits cannot hold (thirds, sevenths at 128 bits, of both signs and far exponents): the
  // printed lower end must lie at or below the exact lower end and the printed upper end at or above the
  // upper one. Round-to-nearest (the former printing) lands on the wrong side for about half of them.
  PrecisionGuard guard(128);
  long nearest_wrong = 0, cases = 0;
  for (int num : {1, -1, 2, -2, 5, -5}) {
    for (int den : {3, 7, 9}) {
      for (int e : {-300, -20, 0, 17, 250}) {
        mpfr a = mpfr(num) / mpfr(den);
        mpfr_mul_2si(a.backend().data(), a.backend().data(), e, MPFR_RNDN);
        const interval x = make_interval(mpfr(a - abs(a) / mpfr(1 << 20)), a);
        const mpfr lo = lower_bound(x), hi = upper_bound(x);
        EXPECT_TRUE(decimal_le(num::lower_text(x), lo)) << num::lower_text(x);
        EXPECT_TRUE(decimal_ge(num::upper_text(x), hi)) << num::upper_text(x);
        nearest_wrong += !decimal_le(to_decimal(lo, 20, Rounding::nearest), lo);
        nearest_wrong += !decimal_ge(to_decimal(hi, 20, Rounding::nearest), hi);
        ++cases;
      }
    }
  }
  EXPECT_GT(nearest_wrong, cases / 4);  // the check above would catch round-to-nearest

  // And the strings of a real counterexample (kim.thm32_2_quoted) are ordered, with lhs above rhs.
  const ClaimResult r = check_claim(claim("kim.thm32_2_quoted"), quick(128, 8));
  ASSERT_TRUE(r.counterexample.has_value());
  const Counterexample& c = *r.counterexample;
  EXPECT_LE(decimal_cmp(c.lhs_lower, c.lhs_upper), 0);
  EXPECT_LE(decimal_cmp(c.rhs_lower, c.rhs_upper), 0);
  EXPECT_GT(decimal_cmp(c.lhs_lower, c.rhs_upper), 0);
}

TEST(ProofsEngine, UnboundedClaimsPassEveryThresholdWithCertifiedGrowth) {
  for (const char* id : {"kim.thm31_dp_unbounded", "kim.l2_necessity_untied", "kim.l2_necessity_masked_diag",
                         "kim.l2_necessity_rank_value"}) {
    const ClaimResult r = check_claim(claim(id), quick(128, 4));
    EXPECT_EQ(r.verdict, Verdict::unbounded) << id << ": " << r.note;
    ASSERT_FALSE(r.growth.empty()) << id;
    for (std::size_t k = 1; k < r.growth.size(); ++k)
      EXPECT_GT(r.growth[k].certified_lower, r.growth[k - 1].certified_upper) << id;
  }
}

TEST(ProofsEngine, ThmDpGrowthMatchesTheClosedForm) {
  // docs/math/bounds.md#dot-product-unbounded: J_11 = 1/5 + 4 s²/5 on x = (0, s, −s, s, −s); the family
  // doubles s from 1.
  const ClaimResult r = check_claim(claim("kim.thm31_dp_unbounded"), quick(128, 4));
  ASSERT_GE(r.growth.size(), 5u);
  for (std::size_t k = 0; k < r.growth.size(); ++k) {
    const double s = std::ldexp(1.0, static_cast<int>(k));
    // j11 rounds 1/5, 4/5 and the sum (0.8 s² is exact for s a power of two): within 2 roundings of J_11,
    // which the certified ends enclose; c = 1, n = 2.
    const double j11 = 0.2 + 0.8 * s * s, j11_rounding = testing::rounding_bound<double>(1, 2);
    EXPECT_LE(r.growth[k].certified_lower, j11 * (1 + j11_rounding))
        << k;  // the max entry is J_11 for s >= 1
    EXPECT_GE(r.growth[k].certified_upper, j11 * (1 - j11_rounding)) << k;
  }
}

/// The claim IDs of the committed docs/claims.md: its index ("| [`id`](#...)") and its missing-claims table
/// ("| `id` |"). The page is generated from the registry, so a claim that the linker dropped, or a claim
/// added without regenerating the page, shows here.
std::vector<std::string> documented_ids(bool missing) {
  std::ifstream in(std::string(REGATTA_TEST_DATA_DIR) + "/../../docs/claims.md");
  EXPECT_TRUE(in) << "docs/claims.md not found";
  std::vector<std::string> ids;
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) section = line;
    const std::string start = missing ? "| `" : "| [`";
    if (section == (missing ? "## Missing claims" : "## Index") && line.rfind(start, 0) == 0)
      ids.push_back(line.substr(start.size(), line.find('`', start.size()) - start.size()));
  }
  return ids;
}

TEST(ProofsRegistry, EveryCatalogueClaimIsRegisteredOrListedMissingOnce) {
  std::set<std::string> ids;
  std::vector<std::string> registered;
  for (const ClaimPtr& c : registry()) {
    EXPECT_TRUE(ids.insert(c->info().id).second) << c->info().id;
    registered.push_back(c->info().id);
    EXPECT_FALSE(c->info().parts.empty()) << c->info().id;
    EXPECT_FALSE(c->info().statement.empty()) << c->info().id;
    EXPECT_FALSE(c->info().latex.empty()) << c->info().id;
    for (const std::string& f : c->info().families)
      EXPECT_FALSE(c->family(f).empty()) << c->info().id << " " << f;
  }
  std::vector<std::string> missing;
  for (const MissingClaim& m : missing_claims()) {
    EXPECT_TRUE(ids.insert(m.id).second) << m.id;
    EXPECT_FALSE(m.reason.empty()) << m.id;
    missing.push_back(m.id);
  }
  // Every claim file registered its claims (none dropped by the static link); the registry is in ID order.
  EXPECT_TRUE(std::is_sorted(registered.begin(), registered.end()));
  std::vector<std::string> page = documented_ids(false), page_missing = documented_ids(true);
  std::sort(page.begin(), page.end());
  EXPECT_EQ(registered, page);
  EXPECT_EQ(missing, page_missing);
  EXPECT_EQ(find_claim(registered.front()), registry().front().get());
  EXPECT_EQ(find_claim("no.such_claim"), nullptr);
}

TEST(ProofsEngine, OptionsAreValidated) {
  EngineOptions o;
  o.precision = 10;
  EXPECT_THROW(o.validate(), InputError);
  o = EngineOptions{};
  o.budget_seconds = -1;
  EXPECT_THROW(o.validate(), InputError);
  o = EngineOptions{};
  o.samples = -3;
  EXPECT_THROW(o.validate(), InputError);
}

}  // namespace
}  // namespace regatta::proofs
