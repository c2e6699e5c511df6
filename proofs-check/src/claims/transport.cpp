// Optimal-transport claims (docs/math/transport.md#one-dimensional, docs/math/transport.md#entropic,
// docs/math/transport.md#certified-bracket): ot.one_d_exact, ot.elementary_bounds,
// ot.certified_bracket, ot.entropic_bracket. Exact W_p comes from the network simplex with a certified
// bracket (measures/wasserstein.hpp); in interval evaluations a distance is the certified bracket itself, in
// double and mpfr the solver's value. Weights are dyadic (counts of 1/64) so that every scalar type holds
// them exactly.
#include <algorithm>
#include <cmath>

#include <regatta/measures/sinkhorn.hpp>
#include <regatta/measures/wasserstein.hpp>
#include "common.hpp"
#include "entropic.hpp"
#include "layout.hpp"

namespace regatta::proofs::claims {

namespace {

using measures::DiscreteMeasure;

constexpr int weight_units = 64;

/// Dyadic weights c_i / 64 from nonnegative raw values (|raw| used): c_i = floor(64 |r_i| / Σ|r|), the
/// remainder to the largest entry; all-zero raw values give the first atom all the mass.
Vector<double> dyadic_weights(const std::vector<double>& raw) {
  const std::size_t n = raw.size();
  double total = 0;
  for (double r : raw) total += std::abs(r);
  Vector<double> w = Vector<double>::Zero(static_cast<Eigen::Index>(n));
  long used = 0;
  std::size_t biggest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const long c = total > 0 ? static_cast<long>(std::floor(weight_units * std::abs(raw[i]) / total)) : 0;
    w(static_cast<Eigen::Index>(i)) = static_cast<double>(c);
    used += c;
    if (std::abs(raw[i]) > std::abs(raw[biggest])) biggest = i;
  }
  w(static_cast<Eigen::Index>(biggest)) += static_cast<double>(weight_units - used);
  return w / static_cast<double>(weight_units);
}

template <class S>
DiscreteMeasure<S> lift_measure(const Matrix<double>& atoms, const Vector<double>& w) {
  Vector<S> ws(w.size());
  for (Eigen::Index i = 0; i < w.size(); ++i) ws(i) = lift<S>(w(i));
  return DiscreteMeasure<S>(num::lift_matrix<S>(atoms), ws);
}

/// W_p^p: double and mpfr the network-simplex cost (an estimate), interval the certified bracket.
template <class S>
S transport_cost(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu, double p) {
  const measures::WassersteinResult exact = measures::wasserstein_exact(mu, nu, p);
  if constexpr (num::is_interval_v<S>) {
    const measures::CertifiedBracket b = measures::certify_wasserstein(mu, nu, p, exact.plan, true);
    return make_interval(mpfr(b.cost_lower), mpfr(b.cost_upper));
  } else {
    return S(exact.cost);
  }
}

/// W_p = (W_p^p)^(1/p), monotone, so the bracket maps endpoint-wise.
template <class S>
S transport_distance(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu, double p) {
  using std::pow;
  const S c = transport_cost<S>(mu, nu, p);
  if (p == 1) return c;
  return regatta::detail::pow_nonnegative<S>(num::smax<S>(c, S(0)), S(1) / lift<S>(p));
}

std::vector<double> slice(const std::vector<double>& x, std::size_t from, std::size_t count) {
  return std::vector<double>(x.begin() + static_cast<long>(from),
                             x.begin() + static_cast<long>(from + count));
}

// ---------------------------------------------------------------------------------------------------------
// ot.one_d_exact — point: k = {n, m, p}; x = (atoms a (n), atoms b (m), raw weights a (n), raw weights b (m))
// ---------------------------------------------------------------------------------------------------------

class OneDExact final : public ClaimBase<OneDExact> {
 public:
  OneDExact() {
    info_.id = "ot.one_d_exact";
    info_.statement =
        "In 1-D, W_p^p = int_0^1 |F_mu^-1 - F_nu^-1|^p equals the LP value; W_1 = int |F_mu - F_nu|. "
        "Reference: "
        "mu = (delta_0 + delta_2)/2, nu = delta_1/4 + 3 delta_3/4: W_1 = 1.5, W_2^2 = 3.";
    info_.latex = "$W_p^p=\\int_0^1|F_\\mu^{-1}-F_\\nu^{-1}|^p$ (= LP value); $W_1=\\int|F_\\mu-F_\\nu|$";
    info_.source = "derived";
    info_.hypotheses = {"d = 1, p >= 1, weights nonnegative summing to 1 (zero weights allowed)"};
    info_.expected = Expected::identity;
    info_.kind = StatementKind::identity;
    info_.parts = {equal("quantile W_1 = int |F_mu - F_nu| (CDF formula)"),
                   at_most("certified LP lower bound <= quantile W_p^p", double_bits),
                   at_most("quantile W_p^p <= certified LP upper bound", double_bits),
                   equal("reference: W_1 = 3/2"), equal("reference: W_2^2 = 3")};
    info_.families = {"reference", "ties"};
    info_.notes =
        "The quantile formula is measures::wasserstein_1d_cost (generic in the scalar); the CDF integral is "
        "evaluated here from sorted breakpoints; the LP value is bracketed by the network simplex and "
        "measures::certify_wasserstein (certified).";
    info_.evaluated_at =
        "The LP value enters through the bracket [L, U] of measures::certify_wasserstein at the "
        "network-simplex plan (directed rounding: exact bounds on W_p^p whatever the plan's accuracy), "
        "compared with the quantile formula evaluated in the scalar type; the other sides are closed forms.";
  }
  const ClaimInfo& info() const override { return info_; }
  bool searchable() const override { return false; }
  // Atoms x_a (n), x_b (m) on the line, then raw weights (normalised by dyadic_weights).
  const Keys keys{"n", "m", "p"};
  static Layout layout(long n, long m) {
    return Layout().add("x_a", n).add("x_b", m).add("w_a", n).add("w_b", m);
  }
  Layout layout(const Point& p) const { return layout(keys.of(p, "n"), keys.of(p, "m")); }
  Point sample(Rng& rng) const override {
    Point p;
    const long n = rng.integer(1, 7), m = rng.integer(1, 7);
    p.k = {n, m, rng.integer(1, 3)};
    const double scale = std::pow(10.0, rng.uniform(-2, 2));
    const Layout l = layout(n, m);
    const auto atom = [&] { return rng.coin(0.2) ? std::round(rng.normal()) : rng.corner(scale); };
    const auto weight = [&] { return rng.coin(0.15) ? 0.0 : rng.uniform(); };
    l.fill(p.x, "x_a", atom);
    l.fill(p.x, "x_b", atom);
    l.fill(p.x, "w_a", weight);
    l.fill(p.x, "w_b", weight);
    return p;
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "reference")
      for (long p : {1L, 2L}) out.push_back(Point{{0, 2, 1, 3, 1, 1, 1, 3}, {2, 2, p}});
    if (name == "ties") out.push_back(Point{{0, 0, 1, 1, 1, 0, 2, 1, 0, 1, 3, 1}, {3, 3, 2}});
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const long n = keys.of(pt, "n"), m = keys.of(pt, "m");
    const double p = static_cast<double>(keys.of(pt, "p"));
    const Layout l = layout(pt);
    l.check(pt);
    const auto nn = static_cast<std::size_t>(n), mm = static_cast<std::size_t>(m);
    const Matrix<double> xa = l.matrix<double>(pt, "x_a"), xb = l.matrix<double>(pt, "x_b");
    const Vector<double> wa = dyadic_weights(slice(pt.x, l.at("w_a"), nn));
    const Vector<double> wb = dyadic_weights(slice(pt.x, l.at("w_b"), mm));
    const DiscreteMeasure<double> mu_d(xa, wa), nu_d(xb, wb);
    const DiscreteMeasure<S> mu = lift_measure<S>(xa, wa), nu = lift_measure<S>(xb, wb);
    const S w1 = measures::wasserstein_1d_cost<S>(mu, nu, 1.0);
    const S wp = measures::wasserstein_1d_cost<S>(mu, nu, p);
    // CDF integral over the merged sorted breakpoints.
    std::vector<double> z(xa.data(), xa.data() + n);
    z.insert(z.end(), xb.data(), xb.data() + m);
    std::sort(z.begin(), z.end());
    z.erase(std::unique(z.begin(), z.end()), z.end());
    S cdf(0);
    for (std::size_t k = 0; k + 1 < z.size(); ++k) {
      double Fa = 0, Fb = 0;  // dyadic sums: exact in double
      for (long i = 0; i < n; ++i)
        if (xa(i, 0) <= z[k]) Fa += wa(i);
      for (long j = 0; j < m; ++j)
        if (xb(j, 0) <= z[k]) Fb += wb(j);
      cdf += lift<S>(std::abs(Fa - Fb)) * (lift<S>(z[k + 1]) - lift<S>(z[k]));
    }
    measures::WassersteinResult exact = measures::wasserstein_exact(mu_d, nu_d, p);
    const measures::CertifiedBracket b = measures::certify_wasserstein(mu_d, nu_d, p, exact.plan, true);
    const bool reference = n == 2 && m == 2 && pt.x == std::vector<double>{0, 2, 1, 3, 1, 1, 1, 3};
    return {eq<S>(w1, cdf), le<S>(lift<S>(b.cost_lower), wp), le<S>(wp, lift<S>(b.cost_upper)),
            reference ? eq<S>(w1, S(3) / S(2)) : off<S>(),
            reference ? eq<S>(measures::wasserstein_1d_cost<S>(mu, nu, 2.0), S(3)) : off<S>()};
  }

 private:
  ClaimInfo info_;
};

// ---------------------------------------------------------------------------------------------------------
// ot.elementary_bounds — point: k = {n, d, axis}; n a power of two (uniform weights 1/n are dyadic);
// x = (X (n×d), Y (n×d), raw weights a' (n))
// ---------------------------------------------------------------------------------------------------------

class ElementaryBounds final : public ClaimBase<ElementaryBounds> {
 public:
  ElementaryBounds() {
    info_.id = "ot.elementary_bounds";
    info_.statement =
        "W_1 <= W_p <= W_q (p <= q); for equal-size uniform measures W_2(mu_X, mu_Y) <= ||X - Y||_F / "
        "sqrt(n) "
        "and W_1 <= (1/n) sum_i ||x_i - y_i||; ||m_mu - m_nu|| <= W_1; W_p(theta#mu, theta#nu) <= W_p(mu, "
        "nu) "
        "for unit theta; W_1 <= D ||mu - nu||_TV.";
    info_.latex =
        "$W_1\\le W_p\\le W_q$; $W_2(\\mu_X,\\mu_Y)\\le\\|X-Y\\|_F/\\sqrt n$; "
        "$W_1\\le\\frac1n\\sum_i\\|x_i-y_i\\|$; "
        "$\\|m_\\mu-m_\\nu\\|\\le W_1$; $W_p(\\theta_\\#\\mu,\\theta_\\#\\nu)\\le W_p(\\mu,\\nu)$; "
        "$W_1\\le D\\|\\mu-\\nu\\|_{TV}$";
    info_.source = "derived";
    info_.hypotheses = {"discrete measures in R^d; slices along a coordinate axis (unit, exact projections)",
                        "TV part: two measures on the same atoms X, D = diameter of X"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {at_most("W_1 <= W_2", double_bits),
                   at_most("W_2 <= W_3", double_bits),
                   at_most("W_2(mu_X, mu_Y) <= ||X - Y||_F / sqrt(n)", double_bits),
                   at_most("W_1(mu_X, mu_Y) <= (1/n) sum_i ||x_i - y_i||", double_bits),
                   at_most("||m_mu - m_nu|| <= W_1", double_bits),
                   at_most("W_2(e_k#mu, e_k#nu) <= W_2(mu, nu)", double_bits),
                   at_most("W_1(mu_X, mu'_X) <= D ||mu_X - mu'_X||_TV", double_bits)};
    info_.families = {"matched", "duplicates"};
    info_.notes =
        "Distances: network simplex; interval evaluations use the certified brackets, so every checked point "
        "is "
        "a certified inequality when the enclosures separate.";
    info_.evaluated_at =
        "Every W_p is the network-simplex plan's cost in double and mpfr (an estimate, accurate to about 53 "
        "bits); in interval it is the certified bracket of measures::certify_wasserstein at that plan, so "
        "the "
        "solver's error enters as the bracket's width.";
  }
  const ClaimInfo& info() const override { return info_; }
  // X, Y: n atoms each (uniform weights); w2: raw weights of a second measure on X.
  const Keys keys{"n", "d", "axis"};
  static Layout layout(long n, long d) { return Layout().add("X", n, d).add("Y", n, d).add("w2", n); }
  Layout layout(const Point& p) const { return layout(keys.of(p, "n"), keys.of(p, "d")); }
  Point sample(Rng& rng) const override {
    Point p;
    const long n = 1L << rng.integer(0, 3), d = rng.integer(1, 3);
    p.k = {n, d, rng.integer(0, d - 1)};
    const double scale = std::pow(10.0, rng.uniform(-2, 2));
    const Layout l = layout(n, d);
    l.fill(p.x, "X", [&] { return rng.corner(scale); });
    l.fill(p.x, "Y", [&] { return rng.corner(scale); });
    if (rng.coin(0.3))  // Y a small perturbation of X (the identity coupling is then nearly optimal)
      for (std::size_t i = 0; i < static_cast<std::size_t>(n * d); ++i)
        p.x[l.at("Y") + i] = p.x[l.at("X") + i] + 1e-3 * scale * rng.normal();
    l.fill(p.x, "w2", [&] { return rng.coin(0.2) ? 0.0 : rng.uniform(); });
    return p;
  }
  /// Atoms stay in a box (|coordinate| ≤ 1e3) and raw weights nonnegative.
  void repair(Point& p) const override {
    const std::size_t base = layout(p).at("w2");
    for (std::size_t i = 0; i < p.x.size(); ++i)
      p.x[i] = i < base ? std::clamp(p.x[i], -1e3, 1e3) : std::abs(p.x[i]);
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "matched")
      out.push_back(Point{{0, 0, 1, 0, 0, 1, 1, 1, 0.1, 0, 1.1, 0, 0, 1.1, 1.1, 1.1, 1, 1, 1, 1}, {4, 2, 0}});
    if (name == "duplicates") out.push_back(Point{{1, 1, 3, 3, 1, 1, 1, 1, 1, 0}, {2, 2, 1}});
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    using std::sqrt;
    const long n = keys.of(pt, "n"), d = keys.of(pt, "d"), axis = keys.of(pt, "axis");
    const Layout l = layout(pt);
    l.check(pt);
    if ((n & (n - 1)) != 0 || axis < 0 || axis >= d) throw InputError("point", "wrong size");
    const Matrix<double> X = l.matrix<double>(pt, "X"), Y = l.matrix<double>(pt, "Y");
    const Vector<double> u = Vector<double>::Constant(n, 1.0 / static_cast<double>(n));
    const Vector<double> w2 = dyadic_weights(slice(pt.x, l.at("w2"), static_cast<std::size_t>(n)));
    const DiscreteMeasure<double> mu(X, u), nu(Y, u), mu2(X, w2);
    const S W1 = transport_distance<S>(mu, nu, 1), W2 = transport_distance<S>(mu, nu, 2),
            W3 = transport_distance<S>(mu, nu, 3);
    const Matrix<S> Xs = num::lift_matrix<S>(X), Ys = num::lift_matrix<S>(Y);
    const S nn = lift<S>(static_cast<double>(n));
    S sum(0);
    for (long i = 0; i < n; ++i)
      sum += num::euclidean_norm<S>(Vector<S>((Xs.row(i) - Ys.row(i)).transpose()));
    const Vector<S> mean_diff = ((Xs - Ys).colwise().sum() / nn).transpose();
    // Slice along the axis: exact projections.
    const Matrix<double> px = X.col(axis), py = Y.col(axis);
    const S slice2 = transport_distance<S>(DiscreteMeasure<double>(px, u), DiscreteMeasure<double>(py, u), 2);
    // TV part on the atoms of X.
    S diameter(0), tv(0);
    for (long i = 0; i < n; ++i) {
      for (long j = 0; j < n; ++j)
        diameter =
            num::smax<S>(diameter, num::euclidean_norm<S>(Vector<S>((Xs.row(i) - Xs.row(j)).transpose())));
      tv += num::sabs<S>(lift<S>(u(i)) - lift<S>(w2(i)));
    }
    tv /= S(2);
    return {le<S>(W1, W2),
            le<S>(W2, W3),
            le<S>(W2, num::frobenius<S>(Matrix<S>(Xs - Ys)) / sqrt(nn)),
            le<S>(W1, sum / nn),
            le<S>(num::euclidean_norm<S>(mean_diff), W1),
            le<S>(slice2, W2),
            le<S>(transport_distance<S>(mu, mu2, 1), diameter * tv)};
  }

 private:
  ClaimInfo info_;
};

// ---------------------------------------------------------------------------------------------------------
// ot.certified_bracket — point: k = {n, m, d, p}; x = (X (n×d), Y (m×d), raw weights a (n), b (m), δ)
// ---------------------------------------------------------------------------------------------------------

/// Relative width reached on problems the exact solver solves (docs/math/transport.md#cert-report: ≤ 1e-10),
/// as decimal text: the width U − L and the target 10^-10 U are evaluated in the scalar type (interval:
/// enclosed), not in double.
constexpr const char* bracket_width_target_text = "1e-10";

class CertifiedBracketClaim final : public ClaimBase<CertifiedBracketClaim> {
 public:
  CertifiedBracketClaim() {
    info_.id = "ot.certified_bracket";
    info_.statement =
        "lower (c-transformed dual, rounded down) <= W_p^p <= upper (feasible coupling, rounded up), for "
        "exact "
        "and perturbed plans and potentials; relative width <= 1e-10 on problems the exact solver solves.";
    info_.latex = "$L\\le W_p^p\\le U$ for any plan and potentials; $(U-L)/U\\le10^{-10}$ for the exact plan";
    info_.source = "derived";
    info_.hypotheses = {
        "discrete measures, p >= 1; unequal sizes and weights, ties, zero weights, duplicates"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {at_most("L <= U (exact plan)", double_bits),
                   at_most("relative width (U - L)/U <= 1e-10 (optimal plan)", double_bits),
                   at_most("L(perturbed potentials) <= U(exact plan)", double_bits),
                   at_most("L(exact potentials) <= U(perturbed plan)", double_bits)};
    info_.families = {"duplicates"};
    info_.notes =
        "Brackets from measures::certify_wasserstein (directed rounding); perturbed plans and potentials are "
        "the exact ones with relative noise δ from a generator seeded by the point size. The certified "
        "numbers are doubles, so every scalar type compares the same values.";
    info_.evaluated_at =
        "The sides are the certified bounds L and U of measures::certify_wasserstein at the network-simplex "
        "plan and potentials and at perturbed copies: exact doubles compared as they are (the statement is "
        "about these numbers); the width U - L and the target 1e-10 U are evaluated in the scalar type.";
  }
  const ClaimInfo& info() const override { return info_; }
  // X (n×d), Y (m×d), raw weights, and δ: the relative noise of the perturbed plans and potentials.
  const Keys keys{"n", "m", "d", "p"};
  static Layout layout(long n, long m, long d) {
    return Layout().add("X", n, d).add("Y", m, d).add("w_a", n).add("w_b", m).add("delta", 1);
  }
  Layout layout(const Point& p) const { return layout(keys.of(p, "n"), keys.of(p, "m"), keys.of(p, "d")); }
  Point sample(Rng& rng) const override {
    Point p;
    const long n = rng.integer(1, 9), m = rng.integer(1, 9), d = rng.integer(1, 3);
    p.k = {n, m, d, rng.integer(1, 2)};
    const double scale = std::pow(10.0, rng.uniform(-2, 2));
    const Layout l = layout(n, m, d);
    const auto atom = [&] { return rng.coin(0.2) ? std::round(rng.normal()) : rng.corner(scale); };
    const auto weight = [&] { return rng.coin(0.15) ? 0.0 : rng.uniform(); };
    l.fill(p.x, "X", atom);
    l.fill(p.x, "Y", atom);
    l.fill(p.x, "w_a", weight);
    l.fill(p.x, "w_b", weight);
    l.fill(p.x, "delta", [&] { return std::pow(10.0, rng.uniform(-8, -1)); });
    return p;
  }
  /// The brackets are certified by construction: a climb has nothing to maximise, random points suffice.
  bool searchable() const override { return false; }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "duplicates") out.push_back(Point{{0, 0, 0, 1, 1, 1, 1, 0, 1, 1, 1e-3}, {3, 2, 1, 1}});
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const long n = keys.of(pt, "n"), m = keys.of(pt, "m");
    const double p = static_cast<double>(keys.of(pt, "p"));
    const Layout l = layout(pt);
    l.check(pt);
    const Matrix<double> X = l.matrix<double>(pt, "X"), Y = l.matrix<double>(pt, "Y");
    const DiscreteMeasure<double> mu(X,
                                     dyadic_weights(slice(pt.x, l.at("w_a"), static_cast<std::size_t>(n)))),
        nu(Y, dyadic_weights(slice(pt.x, l.at("w_b"), static_cast<std::size_t>(m))));
    const double delta = l.raw(pt, "delta");
    const measures::WassersteinResult exact = measures::wasserstein_exact(mu, nu, p);
    const measures::CertifiedBracket b = measures::certify_wasserstein(mu, nu, p, exact.plan, true);
    Rng rng(static_cast<std::uint64_t>(n * 1000 + m));
    measures::TransportPlan pert_plan = exact.plan, pert_pot = exact.plan;
    for (auto& e : pert_plan.entries) e.mass *= 1.0 + delta * rng.normal();
    for (auto& e : pert_plan.entries) e.mass = std::abs(e.mass);
    for (Eigen::Index i = 0; i < pert_pot.u.size(); ++i)
      pert_pot.u(i) += delta * (1.0 + std::abs(pert_pot.u(i))) * rng.normal();
    const measures::CertifiedBracket bp = measures::certify_wasserstein(mu, nu, p, pert_plan, true);
    const measures::CertifiedBracket bu = measures::certify_wasserstein(mu, nu, p, pert_pot, false);
    const bool optimal = exact.status == measures::TransportStatus::optimal;
    return {le<S>(lift<S>(b.cost_lower), lift<S>(b.cost_upper)),
            optimal ? le<S>(lift<S>(b.cost_upper) - lift<S>(b.cost_lower),
                            num::parse<S>(bracket_width_target_text) * lift<S>(b.cost_upper))
                    : off<S>(),
            le<S>(lift<S>(bu.cost_lower), lift<S>(b.cost_upper)),
            le<S>(lift<S>(b.cost_lower), lift<S>(bp.cost_upper))};
  }

 private:
  ClaimInfo info_;
};

// ---------------------------------------------------------------------------------------------------------
// ot.entropic_bracket — point: k = {n, m, d}; x = (X (n×d), Y (m×d), raw weights a (n), b (m), log10 ε/scale)
// ---------------------------------------------------------------------------------------------------------

/// Sinkhorn stopping tolerance on the L1 marginal error: the brackets' widths are first order in it.
constexpr double entropic_tolerance = 1e-14;
constexpr std::int64_t entropic_iterations = 20000;

class EntropicBracket final : public ClaimBase<EntropicBracket> {
 public:
  EntropicBracket() {
    info_.id = "ot.entropic_bracket";
    info_.statement =
        "With OT_eps regularised by KL(. || a x b): OT_0 <= <P_eps, C> <= OT_eps <= OT_0 + eps min(H(a), "
        "H(b)); the Sinkhorn divergence S_eps >= 0 for the cost ||x - y||^2.";
    info_.latex =
        "$\\mathrm{OT}_0\\le\\langle P_\\varepsilon,C\\rangle\\le\\mathrm{OT}_\\varepsilon\\le\\mathrm{OT}_0+"
        "\\varepsilon\\min(H(a),H(b))$; $S_\\varepsilon\\ge0$";
    info_.source = "derived; published (divergence positivity, Feydy et al. 2019)";
    info_.hypotheses = {"cost ||x - y||^2 (p = 2)", "P_eps the exact entropic plan, OT_eps the exact value"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {at_most("OT_0 <= <P_eps, C>", double_bits), at_most("<P_eps, C> <= OT_eps", double_bits),
                   at_most("OT_eps <= OT_0 + eps min(H(a), H(b))", double_bits),
                   at_most("-S_eps <= 0  (as -S_eps + 1 <= 1)", double_bits)};
    info_.families = {"equal_measures", "epsilon_range"};
    info_.notes =
        "Potentials from measures::sinkhorn in double (tolerance 1e-14 on the L1 marginal error) for (mu, "
        "nu), (mu, mu) and (nu, nu); OT_0 is bracketed by the network simplex and "
        "measures::certify_wasserstein. Weak duality D_eps(f, g) <= OT_eps <= primal(Q) for the Sinkhorn "
        "plan rounded onto the couplings (Altschuler, Weed & Rigollet 2017) brackets OT_eps, and primal(Q) "
        "- OT_eps = eps KL(Q || P_eps) with Pinsker bounds |<Q, C> - <P_eps, C>| by (max C / 2) sqrt(2 gap / "
        "eps); S_eps is combined from three such brackets.";
    info_.evaluated_at =
        "The sides are evaluated at the potentials of a double Sinkhorn run and at its plan rounded onto the "
        "couplings, in the scalar type from the exact doubles; the interval sides enclose the exact OT_eps, "
        "<P_eps, C> and S_eps through weak duality and Pinsker (widths first order in the marginal error), "
        "and OT_0 is the certified bracket of the network simplex. Double and mpfr report the estimates "
        "D_eps(f, g) and <Q, C>.";
  }
  const ClaimInfo& info() const override { return info_; }
  bool searchable() const override { return false; }
  // X (n×d), Y (m×d), raw weights, and log10 of ε relative to the largest cost.
  const Keys keys{"n", "m", "d"};
  static Layout layout(long n, long m, long d) {
    return Layout().add("X", n, d).add("Y", m, d).add("w_a", n).add("w_b", m).add("log10_epsilon", 1);
  }
  Layout layout(const Point& p) const { return layout(keys.of(p, "n"), keys.of(p, "m"), keys.of(p, "d")); }
  Point sample(Rng& rng) const override {
    Point p;
    const long n = rng.integer(1, 6), m = rng.integer(1, 6), d = rng.integer(1, 2);
    p.k = {n, m, d};
    const Layout l = layout(n, m, d);
    const auto atom = [&] { return rng.uniform(-1, 1); };
    const auto weight = [&] { return rng.uniform(0.1, 1); };
    l.fill(p.x, "X", atom);
    l.fill(p.x, "Y", atom);
    l.fill(p.x, "w_a", weight);
    l.fill(p.x, "w_b", weight);
    l.fill(p.x, "log10_epsilon", [&] { return rng.uniform(-3, 1); });
    return p;
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "equal_measures")
      out.push_back(Point{{0, 1, 0.5, 0, 1, 0.5, 1, 1, 2, 1, 1, 2, -1}, {3, 3, 1}});
    if (name == "epsilon_range")
      for (double le : {-3.0, -1.0, 1.0}) out.push_back(Point{{0, 1, 0.3, 0.8, 1, 1, 1, 1, le}, {2, 2, 1}});
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const long n = keys.of(pt, "n"), m = keys.of(pt, "m");
    const Layout l = layout(pt);
    l.check(pt);
    const Matrix<double> X = l.matrix<double>(pt, "X"), Y = l.matrix<double>(pt, "Y");
    const Vector<double> a = dyadic_weights(slice(pt.x, l.at("w_a"), static_cast<std::size_t>(n)));
    const Vector<double> b = dyadic_weights(slice(pt.x, l.at("w_b"), static_cast<std::size_t>(m)));
    const DiscreteMeasure<double> mu(X, a), nu(Y, b);
    // ε: a double defined from the point (every scalar type uses this same number).
    double max_cost = 0;
    for (long i = 0; i < n; ++i)
      for (long j = 0; j < m; ++j) max_cost = std::max(max_cost, (X.row(i) - Y.row(j)).squaredNorm());
    const double eps = std::max(max_cost, 1e-3) * std::pow(10.0, l.raw(pt, "log10_epsilon"));
    measures::SinkhornOptions options;
    options.epsilon = eps;
    options.tolerance = entropic_tolerance;
    options.max_iterations = entropic_iterations;
    // Any potentials give valid brackets; convergence only makes them narrow.
    auto solve = [&](const Matrix<double>& A, const Vector<double>& wa, const Matrix<double>& B,
                     const Vector<double>& wb) {
      const measures::SinkhornResult<double> s = measures::sinkhorn<double>(
          DiscreteMeasure<double>(A, wa), DiscreteMeasure<double>(B, wb), 2.0, options);
      if (!s.f.allFinite() || !s.g.allFinite()) throw InputError("point", "Sinkhorn potentials not finite");
      return entropic::bracket<S>(A, wa, B, wb, eps, s.f, s.g);
    };
    const entropic::Bracket<S> ab = solve(X, a, Y, b), aa = solve(X, a, X, a), bb = solve(Y, b, Y, b);
    const measures::WassersteinResult exact = measures::wasserstein_exact(mu, nu, 2.0);
    S ot0;
    if constexpr (num::is_interval_v<S>) {
      const measures::CertifiedBracket br = measures::certify_wasserstein(mu, nu, 2.0, exact.plan, true);
      ot0 = make_interval(mpfr(br.cost_lower), mpfr(br.cost_upper));
    } else {
      ot0 = lift<S>(exact.cost);
    }
    const S h = num::smin<S>(entropic::entropy<S>(a), entropic::entropy<S>(b));
    const S divergence = ab.value - aa.value / S(2) - bb.value / S(2);
    return {le<S>(ot0, ab.plan_cost), le<S>(ab.plan_cost, ab.value), le<S>(ab.value, ot0 + lift<S>(eps) * h),
            le_shifted<S>(-divergence, S(0))};
  }

 private:
  ClaimInfo info_;
};

}  // namespace

REGATTA_REGISTER_CLAIM(OneDExact);
REGATTA_REGISTER_CLAIM(ElementaryBounds);
REGATTA_REGISTER_CLAIM(CertifiedBracketClaim);
REGATTA_REGISTER_CLAIM(EntropicBracket);

}  // namespace regatta::proofs::claims
