// Section 1 — L2 against dot-product attention (Kim, Papamakarios, Mnih 2021; docs/bounds.md §2, §3).
//
//  1a. Theorem 3.2 upper bounds UB∞ = 4Λ_N + 1 and UB₂ = √N·UB∞ (d = H = 1, unit weights; claims
//      kim.thm32_inf, kim.thm32_2) for N from 2 to 1000, certified by interval evaluation, against lower
//      bounds from lip::compute_bracket (adversarial search seeded with the tightness family of §3.6, the
//      witness re-evaluated in interval arithmetic), and the §3.6 family itself (lip::kim_tightness).
//  1b. Λ_N = φ⁻¹(N − 1) = W₀((N − 1)/e) (kim.phi_lambert) with the Hoorfar–Hassani bracket.
//  1c. ‖J‖ of dot-product attention along the Theorem 3.1 construction (kim.thm31_dp_unbounded,
//      lip::theorem31_growth): d = 1, x = (0, s, −s, s, −s), where J₁₁ = 1/5 + 4s²/5, and a random
//      8-dimensional two-head layer on the balanced layout along a Gaussian direction.
#include <cmath>
#include <sstream>

#include <regatta/core/precision.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>
#include <regatta/operators/lipschitz/bracket.hpp>
#include <regatta/operators/lipschitz/search.hpp>

#include "common.hpp"
#include "sections.hpp"

namespace regatta::cli::report {

namespace {

using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;

struct BoundValue {
  double estimate = 0, certified_upper = 0;
};

BoundValue bound_at(lip::Bound bound, const AttentionLayer& layer, const AttentionOptions& options,
                    std::int64_t n) {
  lip::BoundSetting setting;
  setting.n = n;
  BoundValue b;
  b.estimate = lip::evaluate<double>(bound, layer, options, setting);
  PrecisionGuard guard(128);
  b.certified_upper = upper_double(lip::evaluate<interval>(bound, layer, options, setting));
  return b;
}

/// The search settings of the report: small budgets under --quick, larger ones otherwise; fewer steps for
/// long sequences (each probe costs O(n²)).
lip::SearchOptions search_settings(const Context& ctx, std::int64_t n, std::uint64_t seed) {
  lip::SearchOptions search;
  search.seed = seed;
  search.random_starts = ctx.size(1, 2);
  search.ascent_steps = n > 200 ? ctx.size(4, 8) : ctx.size(12, 30);
  search.max_evaluations = n > 200 ? ctx.size(150, 300) : ctx.size(400, 1500);
  return search;
}

/// The certified bracket of lip::compute_bracket (adversarial search, then interval re-evaluation).
lip::Bracket bracket(const AttentionLayer& layer, const AttentionOptions& options, std::int64_t n,
                     lip::Norm norm, const Context& ctx, std::uint64_t seed,
                     std::optional<double> radius = {}) {
  lip::BracketOptions b;
  b.norm = norm;
  b.n = n;
  b.radius = radius;
  b.certify = true;
  b.precision_bits = 128;
  b.search = search_settings(ctx, n, seed);
  return lip::compute_bracket(layer, options, b);
}

double certified_lower(const lip::Bracket& b) {
  return b.lower_certified ? *b.lower_certified : std::nan("");
}

void tightness(const Context& ctx, Section& s) {
  const AttentionLayer layer = lip::kim_unit_layer();
  const AttentionOptions options;
  const std::vector<std::int64_t> dense = integer_log_grid(2, 1000, 48);
  const std::vector<std::int64_t> searched =
      ctx.quick()
          ? std::vector<std::int64_t>{2, 3, 5, 10, 20, 50, 100}
          : std::vector<std::int64_t>{2, 3, 4, 5, 8, 10, 16, 25, 32, 50, 64, 100, 128, 200, 256, 500, 1000};
  s.configuration.push_back(
      "1a: tied L2 attention, d = H = d_h = 1, W^Q = W^K = W^V = W^O = 1, no mask; upper bounds "
      "at " +
      std::to_string(dense.size()) + " values of N in [2, 1000]; adversarial search at N = " +
      [&] {
        std::string t;
        for (auto n : searched) t += (t.empty() ? "" : ", ") + std::to_string(n);
        return t;
      }() +
      " with seed " + std::to_string(ctx.seed(1, 1)) + " (+N)");

  Figure fig("kim_tightness", "Theorem 3.2 (L2 attention, d = H = 1): upper bounds vs certified lower bounds",
             "sequence length N", "Lipschitz constant (dimensionless)");
  fig.logx = fig.logy = true;
  Series ub_inf{"UB∞ = 4Λ_N + 1 (kim.thm32_inf)", Kind::certified_upper, {}, {}, true, false, 1};
  Series ub_two{"UB₂ = √N (4Λ_N + 1) (kim.thm32_2)", Kind::certified_upper, {}, {}, true, false, 0};
  for (auto n : dense) {
    ub_inf.x.push_back(double(n));
    ub_inf.y.push_back(bound_at(lip::Bound::kim_inf, layer, options, n).certified_upper);
    ub_two.x.push_back(double(n));
    ub_two.y.push_back(bound_at(lip::Bound::kim_two, layer, options, n).certified_upper);
  }

  Table t("kim_tightness", "Theorem 3.2 bounds against adversarial lower bounds (d = H = 1, unit weights)");
  t.column("n", "N", Kind::input)
      .column("ub_inf", "UB∞", Kind::certified_upper,
              "4Λ_N + d_h^(−1/2), interval evaluation (kim.thm32_inf)")
      .column("family_inf", "family max_t ‖J‖∞", Kind::estimate, "tightness family of bounds.md §3.6, double")
      .column("lower_inf_search", "max ‖J‖∞ found", Kind::estimate, "adversarial search, double")
      .column("lower_inf", "‖J(X*)‖∞ row sum", Kind::certified_lower, "interval re-evaluation at the witness")
      .column("ratio_inf", "lower/UB∞", Kind::certified_lower, "certified lower ÷ certified upper")
      .column("ub_two", "UB₂", Kind::certified_upper,
              "√(N/d_h)(4Λ_N + 1)…, interval evaluation (kim.thm32_2)")
      .column("lower_two_search", "max ‖J‖₂ found", Kind::estimate, "adversarial search, double")
      .column("lower_two", "‖J(X*)v‖/‖v‖", Kind::certified_lower, "interval re-evaluation at the witness")
      .column("ratio_two", "lower/UB₂", Kind::certified_lower, "certified lower ÷ certified upper")
      .column("origin_inf", "∞ witness from", Kind::text)
      .column("origin_two", "2 witness from", Kind::text);
  Series lo_inf{"max ‖J(X)‖∞ over searched X", Kind::certified_lower, {}, {}, true, true, 1};
  Series lo_two{"max ‖J(X)‖₂ over searched X", Kind::certified_lower, {}, {}, true, true, 0};
  auto bar = ctx.progress("1a Kim tightness: search at " + std::to_string(searched.size()) + " sizes",
                          long(searched.size()));
  double last_ratio_inf = 0, last_ratio_two = 0;
  std::int64_t last_n = 0;
  for (auto n : searched) {
    const BoundValue bi = bound_at(lip::Bound::kim_inf, layer, options, n);
    const BoundValue b2 = bound_at(lip::Bound::kim_two, layer, options, n);
    const lip::Bracket li =
        bracket(layer, options, n, lip::Norm::inf, ctx, ctx.seed(1, 1) + std::uint64_t(n));
    const lip::Bracket l2 =
        bracket(layer, options, n, lip::Norm::two, ctx, ctx.seed(1, 1) + std::uint64_t(n));
    const lip::TightnessPoint family = lip::kim_tightness(n);
    const double ri = certified_lower(li) / bi.certified_upper, r2 = certified_lower(l2) / b2.certified_upper;
    t.add_row({n, bi.certified_upper, family.lower, li.lower_estimate, certified_lower(li), ri,
               b2.certified_upper, l2.lower_estimate, certified_lower(l2), r2, li.witness.origin,
               l2.witness.origin});
    lo_inf.x.push_back(double(n));
    lo_inf.y.push_back(certified_lower(li));
    lo_two.x.push_back(double(n));
    lo_two.y.push_back(certified_lower(l2));
    last_ratio_inf = ri;
    last_ratio_two = r2;
    last_n = n;
    bar->advance();
  }
  bar->finish();
  t.caption =
      "Ratios are certified lower bounds on Lip/UB for this layer (a certified lower bound on Lip divided by "
      "a certified upper bound on the formula). Lower bounds come from lip::compute_bracket (adversarial "
      "search seeded "
      "with the tightness family of bounds.md §3.6 and random starts, then projected ascent); the witness "
      "X* is re-evaluated in MPFI at 128 bits. The family column is the §3.6 family maximised over t in "
      "double (lip::kim_tightness).";
  fig.add(ub_two).add(lo_two).add(ub_inf).add(lo_inf);
  fig.caption =
      "Solid lines without markers: the Theorem 3.2 upper bounds (certified, interval arithmetic). Solid "
      "lines with filled markers: certified lower bounds on the true Lipschitz constant, from the best "
      "input found by the adversarial search. The true constant lies between the two curves of the same "
      "norm. The ∞-bound is tight up to a factor tending to 1 (bounds.md §3.6); the 2-bound carries a √N "
      "factor that the lower bounds do not show.";
  s.findings.push_back("1a: at N = " + std::to_string(last_n) + " the best ∞-norm witness reaches " +
                       said(last_ratio_inf, Kind::certified_lower, 4) +
                       " of UB∞ and the best 2-norm witness " +
                       said(last_ratio_two, Kind::certified_lower, 4) + " of UB₂.");
  s.add(std::move(fig), std::move(t));
}

void lambda_curve(const Context& ctx, Section& s) {
  (void)ctx;
  const std::vector<std::int64_t> grid = integer_log_grid(2, 1000, 60);
  Table t("kim_lambda", "Λ_N = φ⁻¹(N − 1) = W₀((N − 1)/e)");
  t.column("n", "N", Kind::input)
      .column("lambda_lower", "Λ_N", Kind::certified_lower, "interval Lambert W (kim.phi_lambert)")
      .column("lambda_upper", "Λ_N", Kind::certified_upper, "interval Lambert W (kim.phi_lambert)")
      .column("lambda", "Λ_N", Kind::estimate, "double Lambert W")
      .column("hh_lower", "ln x − ln ln x", Kind::estimate,
              "Hoorfar–Hassani lower bracket, x = (N−1)/e, N ≥ 9")
      .column("hh_upper", "ln x − ½ ln ln x", Kind::estimate, "Hoorfar–Hassani upper bracket, N ≥ 9");
  Series lam{"Λ_N = W₀((N − 1)/e)", Kind::certified_upper, {}, {}, true, false};
  Series hl{"ln x − ln ln x, x = (N − 1)/e (valid N ≥ 9)", Kind::estimate, {}, {}, true, false};
  Series hu{"ln x − ½ ln ln x (valid N ≥ 9)", Kind::estimate, {}, {}, true, false};
  for (auto n : grid) {
    PrecisionGuard guard(128);
    const interval L = lip::kim_lambda<interval>(n);
    const double x = double(n - 1) / std::exp(1.0);
    const bool bracket = n >= 9;
    const double lo = bracket ? std::log(x) - std::log(std::log(x)) : std::nan("");
    const double hi = bracket ? std::log(x) - 0.5 * std::log(std::log(x)) : std::nan("");
    t.add_row({n, lower_double(L), upper_double(L), lip::kim_lambda<double>(n), lo, hi});
    lam.x.push_back(double(n));
    lam.y.push_back(upper_double(L));
    if (bracket) {
      hl.x.push_back(double(n));
      hl.y.push_back(lo);
      hu.x.push_back(double(n));
      hu.y.push_back(hi);
    }
  }
  t.caption =
      "Reference values (bounds.md §3.1, 30 digits): Λ_2 = 0.278464542761…, Λ_1000 = 4.420501603942….";
  Figure fig("kim_lambda", "The constant Λ_N = φ⁻¹(N − 1) of the L2 bounds", "sequence length N",
             "Λ_N (dimensionless)");
  fig.logx = true;
  fig.add(lam).add(hl).add(hu);
  fig.caption =
      "Λ_N grows like log N − log log N. The solid curve is the certified interval value (its two ends "
      "coincide at plot resolution); the dashed curves are the Hoorfar–Hassani bracket evaluated in "
      "double, valid for N ≥ 9.";
  s.add(std::move(fig), std::move(t));
  s.configuration.push_back("1b: Λ_N at 60 values of N in [2, 1000], MPFI at 128 bits");
}

std::vector<double> values(const std::vector<lip::GrowthPoint>& g, bool certified) {
  std::vector<double> v;
  for (const auto& p : g)
    v.push_back(certified ? (p.certified_lower ? *p.certified_lower : std::nan("")) : p.value);
  return v;
}

void dot_growth(const Context& ctx, Section& s) {
  const std::vector<double> scales = log_grid(0.1, 1000.0, ctx.size(9, 17));
  const AttentionLayer one = scalar_layer(AttentionKind::dot, 1, 1, 1, 1);
  operators::RandomLayerSpec spec;
  spec.d = 8;
  spec.heads = 2;
  spec.seed = ctx.seed(1, 3);
  const AttentionLayer random = operators::random_layer(spec);
  const AttentionOptions options;
  const unsigned bits = 128;
  s.configuration.push_back(
      "1c: dot-product attention, lip::theorem31_growth (balanced layout: token 0 at the origin, ±s·u "
      "elsewhere), "
      "values in MPFR and certified in MPFI at " +
      std::to_string(bits) +
      " bits: (i) d = H = 1, W^Q = W^K = W^V = "
      "W^O = 1, n = 5, u = 1, i.e. X = (0, s, −s, s, −s); (ii) random layer d = 8, H = 2, scale 1, seed " +
      std::to_string(spec.seed) + ", n = 9, Gaussian u (seed " + std::to_string(ctx.seed(1, 4)) + ")");
  auto bar = ctx.progress("1c Theorem 3.1 growth", 3);
  const auto g_inf = lip::theorem31_growth(one, options, 5, scales, lip::Norm::inf, bits, ctx.seed(1, 4));
  bar->advance();
  const auto g_two = lip::theorem31_growth(one, options, 5, scales, lip::Norm::two, bits, ctx.seed(1, 4));
  bar->advance();
  const auto g_rand = lip::theorem31_growth(random, options, 9, scales, lip::Norm::two, bits, ctx.seed(1, 4));
  bar->finish();
  Table t("kim_dot_growth", "Dot-product attention along the Theorem 3.1 construction");
  t.column("s", "scale s", Kind::input)
      .column("closed_form", "1/5 + 4s²/5", Kind::estimate,
              "J₁₁ of (i) in closed form (bounds.md §2), double")
      .column("inf_one", "(i) ‖J‖∞ row sum", Kind::certified_lower, "interval, largest row of token 0")
      .column("two_one", "(i) ‖J v‖/‖v‖", Kind::certified_lower, "interval at the power-iteration vector")
      .column("two_random_est", "(ii) ‖J v‖/‖v‖", Kind::estimate, "MPFR at the power-iteration vector")
      .column("two_random", "(ii) ‖J v‖/‖v‖", Kind::certified_lower,
              "interval at the power-iteration vector");
  const std::vector<double> vi = values(g_inf, true), v2 = values(g_two, true), vr = values(g_rand, true),
                            vr_est = values(g_rand, false);
  Series closed{"(i) closed form J₁₁ = 1/5 + 4s²/5", Kind::estimate, {}, {}, true, false};
  Series inf_one{"(i) d = 1: ‖J‖∞", Kind::certified_lower, scales, vi, true, true};
  Series two_one{"(i) d = 1: ‖J‖₂", Kind::certified_lower, scales, v2, true, true};
  Series two_rand{"(ii) random d = 8, H = 2: ‖J‖₂", Kind::certified_lower, scales, vr, true, true};
  for (std::size_t k = 0; k < scales.size(); ++k) {
    const double sc = scales[k], cf = 0.2 + 0.8 * sc * sc;
    t.add_row({sc, cf, vi[k], v2[k], vr_est[k], vr[k]});
    closed.x.push_back(sc);
    closed.y.push_back(cf);
  }
  t.caption =
      "Every certified value is a lower bound on the Lipschitz constant of the layer: dot-product attention "
      "is "
      "not Lipschitz (kim.thm31_dp_unbounded); the lower bounds grow like s², without limit.";
  Figure fig("kim_dot_growth",
             "Dot-product attention is not Lipschitz: ‖J‖ along the Theorem 3.1 construction",
             "scale s of the tokens", "‖J(X)‖ (dimensionless)");
  fig.logx = fig.logy = true;
  fig.add(closed).add(inf_one).add(two_one).add(two_rand);
  fig.caption =
      "Certified lower bounds on ‖J(X)‖ (hence on the Lipschitz constant) at inputs of growing scale: a "
      "straight line of slope 2 on these log–log axes is quadratic growth, so no finite Lipschitz constant "
      "exists. The dashed curve is the closed form of the diagonal entry J₁₁ for (i).";
  s.findings.push_back("1c: at s = " + format_number(scales.back(), Kind::input) + ", ‖J‖∞ ≥ " +
                       said(vi.back(), Kind::certified_lower) + " for (i) and ‖J‖₂ ≥ " +
                       said(vr.back(), Kind::certified_lower) + " for the random layer (ii).");
  s.add(std::move(fig), std::move(t));
}

/// Section 1 for the user's layer: Theorem 3.2 brackets (tied L2), or the growth of ‖J‖ along the Theorem 3.1
/// construction (dot).
void user_layer(const Context& ctx, Section& s) {
  const ResolvedLayer& user = *ctx.user();
  const AttentionLayer& layer = user.layer;
  const AttentionOptions& options = user.options;
  if (layer.kind == AttentionKind::l2) {
    const std::vector<std::int64_t> ns =
        ctx.quick() ? std::vector<std::int64_t>{2, 4, 8} : std::vector<std::int64_t>{2, 4, 8, 16, 32, 64};
    s.configuration.push_back("1u: user layer (" + describe(user) +
                              "), certified brackets (lip::compute_bracket) at "
                              "N = 2 … " +
                              std::to_string(ns.back()) + ", search seed " + std::to_string(ctx.seed(1, 7)) +
                              " (+N)");
    Table t("user_kim_bounds", "User layer: Theorem 3.2 brackets");
    t.column("n", "N", Kind::input)
        .column("ub_inf", "upper ∞", Kind::certified_upper, "smallest applicable sequence-level bound")
        .column("lower_inf", "lower ∞", Kind::certified_lower, "searched witness, interval")
        .column("ub_two", "upper 2", Kind::certified_upper)
        .column("lower_two", "lower 2", Kind::certified_lower)
        .column("note", "note", Kind::text);
    Figure fig("user_kim_bounds", "User layer: Lipschitz brackets against N", "sequence length N",
               "Lipschitz constant (dimensionless)");
    fig.logx = fig.logy = true;
    Series ui{"upper bound ∞", Kind::certified_upper, {}, {}, true, true},
        u2{"upper bound 2", Kind::certified_upper, {}, {}, true, true};
    Series li{"‖J‖∞ at searched X", Kind::certified_lower, {}, {}, true, true},
        l2{"‖J‖₂ at searched X", Kind::certified_lower, {}, {}, true, true};
    auto bar = ctx.progress("1u user layer: brackets", long(ns.size()));
    for (auto n : ns) {
      const lip::Bracket bi =
          bracket(layer, options, n, lip::Norm::inf, ctx, ctx.seed(1, 7) + std::uint64_t(n));
      const lip::Bracket b2 =
          bracket(layer, options, n, lip::Norm::two, ctx, ctx.seed(1, 7) + std::uint64_t(n));
      // Only the refusal of the bound in each bracket's own norm concerns this table.
      std::string note;
      auto add = [&note](const std::string& t) {
        if (!t.empty()) note += (note.empty() ? "" : "; ") + t;
      };
      for (const auto& [b, id] : {std::pair{&bi, "kim.thm32_inf"}, std::pair{&b2, "kim.thm32_2:"}}) {
        if (!b->upper_certified)
          for (const auto& r : b->refused)
            if (r.rfind(id, 0) == 0) add(r);
        add(b->note);
      }
      const double ubi = bi.upper_certified ? *bi.upper_certified : std::nan("");
      const double ub2 = b2.upper_certified ? *b2.upper_certified : std::nan("");
      t.add_row({n, ubi, certified_lower(bi), ub2, certified_lower(b2), note});
      for (auto [series, v] : {std::pair{&ui, ubi}, std::pair{&u2, ub2}, std::pair{&li, certified_lower(bi)},
                               std::pair{&l2, certified_lower(b2)}}) {
        series->x.push_back(double(n));
        series->y.push_back(v);
      }
      bar->advance();
    }
    bar->finish();
    fig.add(ui).add(li).add(u2).add(l2);
    fig.caption =
        "The user's layer between the smallest applicable upper bound (Theorem 3.2, where its hypotheses "
        "hold) "
        "and certified lower bounds from adversarial search, both certified.";
    s.add(std::move(fig), std::move(t));
    return;
  }
  // Dot-product: no upper bound exists; show the growth along the balanced construction.
  const Eigen::Index n = 9;
  const std::vector<double> scales = log_grid(0.1, 100.0, ctx.size(7, 13));
  s.configuration.push_back("1u: user layer (" + describe(user) +
                            "), n = 9, lip::theorem31_growth, MPFI at 128 "
                            "bits, seed " +
                            std::to_string(ctx.seed(1, 8)));
  auto bar = ctx.progress("1u user layer: Theorem 3.1 growth", 1);
  const auto g = lip::theorem31_growth(layer, options, n, scales, lip::Norm::two, 128, ctx.seed(1, 8));
  bar->finish();
  const std::vector<double> cert = values(g, true), est = values(g, false);
  Table t("user_kim_dot_growth", "User layer (dot-product): ‖J‖₂ along the Theorem 3.1 construction");
  t.column("scale", "scale c", Kind::input)
      .column("two_est", "‖J v‖/‖v‖", Kind::estimate)
      .column("two", "‖J v‖/‖v‖", Kind::certified_lower);
  for (std::size_t k = 0; k < scales.size(); ++k) t.add_row({scales[k], est[k], cert[k]});
  Figure fig("user_kim_dot_growth", "User layer (dot-product): ‖J‖₂ along the Theorem 3.1 construction",
             "scale c of the tokens", "‖J(X)‖₂ (dimensionless)");
  fig.logx = fig.logy = true;
  fig.add(Series{"‖J(X_c)‖₂", Kind::certified_lower, scales, cert, true, true});
  fig.caption =
      "Certified lower bounds on ‖J‖₂ of the user's layer at inputs of growing scale; growth without limit "
      "means the layer is not Lipschitz on all of R^(n×d) (bounded domains: section 2).";
  s.add(std::move(fig), std::move(t));
}

}  // namespace

Section section_kim(const Context& ctx) {
  Section s;
  s.title = "L2 vs dot-product attention (Kim et al. 2021)";
  s.text.push_back(
      "Kim, Papamakarios and Mnih (ICML 2021) prove that dot-product self-attention is not Lipschitz "
      "(Theorem 3.1) "
      "and that L2 self-attention with tied query/key maps is, with constants growing like log N in ∞-norm "
      "and "
      "√N log N in 2-norm (Theorem 3.2). regatta uses the derived forms of bounds.md §3.5 (the commonly "
      "quoted "
      "2-norm form is refuted: claim kim.thm32_2_quoted, section 5).");
  tightness(ctx, s);
  lambda_curve(ctx, s);
  dot_growth(ctx, s);
  if (ctx.user()) user_layer(ctx, s);
  return s;
}

}  // namespace regatta::cli::report
