// Mean-field claims in the context (docs/math/bounds.md#mf-theorem-b and general potentials):
// mf.context_lipschitz, mf.context_general. Γ_μ(x) is evaluated from its definition in S (mean_field.hpp);
// W_1(μ, ν) is the network simplex value in double/mpfr and a certified enclosure in interval, exact when
// one atom moves (the mean gap and the pairing cost coincide).
#include <cmath>

#include "mean_field.hpp"

namespace regatta::proofs::claims {

namespace {

using mf::Head;
using mf::Measure;

/// d/dt Γ_{μ_t}(x) at t = 0 for μ_t = μ with atom k moved to y_k + tδ (dot scores, values V y):
/// V (p_k δ + p_k (xᵀAδ)(y_k − ȳ)) with p = K_μ(x, ·) and ȳ = Σ_j p_j y_j.
template <class S>
Vector<S> moved_atom_derivative(const Head<S>& h, const Vector<S>& x, const Measure<S>& mu, long k,
                                const Vector<S>& delta) {
  const std::vector<S> p = mf::kernel(h, x, mu);
  Vector<S> ybar = Vector<S>::Zero(mu.dim());
  for (long j = 0; j < mu.size(); ++j)
    if (mu.raw(j) > 0) ybar += p[j] * mf::row(mu.atoms, j);
  const S sigma = mf::potential(h, x, delta);  // xᵀAδ
  const Vector<S> inner = p[k] * delta + p[k] * sigma * Vector<S>(mf::row(mu.atoms, k) - ybar);
  return num::mul<S>(h.V, Matrix<S>(inner)).col(0);
}

/// Random A of a dot head: often with the eigenvalue −‖A‖ of the extremal families, with ‖A‖ about
/// `size`.
void push_score_matrix(Rng& rng, std::vector<double>& x, long d, double size) {
  const bool negative = rng.coin(0.35);
  for (long i = 0; i < d; ++i)
    for (long j = 0; j < d; ++j)
      x.push_back(negative ? (i == j ? -size : 0.0) + 0.1 * size * rng.normal()
                           : size * rng.normal() / std::sqrt(static_cast<double>(d)));
}

void push_value_matrix(Rng& rng, std::vector<double>& x, long d) {
  const bool identity = rng.coin(0.2);
  for (long i = 0; i < d; ++i)
    for (long j = 0; j < d; ++j) x.push_back(identity ? (i == j ? 1.0 : 0.0) : rng.normal());
}

/// The Theorem B family (docs/math/bounds.md#mean-field): d = 1, μ_ε = ε δ_{−Ru} + (1 − ε) δ_{Ru} (u = 1),
/// the small atom
/// moved by t; the query coordinates and A, V follow.
Point theorem_b_pair(double R, double eps, double t) {
  Point p;
  mf::push_moved_pair(p.x, (Matrix<double>(2, 1) << -R, R).finished(),
                      (Vector<double>(2) << eps, 1 - eps).finished(),
                      (Matrix<double>(2, 1) << t, 0).finished());
  return p;
}

// ---------------------------------------------------------------------------------------------------------
// mf.context_lipschitz — point: k = {m, d, mode, q, p}; x = (pair (mean_field.hpp), queries (q×d), A, V)
// ---------------------------------------------------------------------------------------------------------

class ContextLipschitz final : public ClaimBase<ContextLipschitz> {
 public:
  ContextLipschitz() {
    info_.id = "mf.context_lipschitz";
    info_.statement =
        "x in B_R', mu, nu in P(B_R): ||Gamma_mu(x) - Gamma_nu(x)|| <= ||V|| (1 + 2||A|| R R') e^(2||A|| R "
        "R') W_1(mu, nu); hence W_p(CA(eta, mu), CA(eta, nu)) <= same x W_1(mu, nu).";
    info_.latex =
        "$\\|\\Gamma_\\mu(x)-\\Gamma_\\nu(x)\\|\\le\\|V\\|(1+2\\|A\\|RR')e^{2\\|A\\|RR'}W_1(\\mu,\\nu)$; "
        "$W_p(\\mathrm{CA}(\\eta,\\mu),\\mathrm{CA}(\\eta,\\nu))\\le$ same $\\times W_1(\\mu,\\nu)$";
    info_.source = "derived";
    info_.hypotheses = {"single dot-product head, scores x^T A y, values V y",
                        "R = largest norm of an atom of positive weight of mu or nu; R' = ||x|| (max over "
                        "supp eta for CA)",
                        "p in {1, 2}; eta uniform on 1..3 queries"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {
        at_most("||Gamma_mu(x) - Gamma_nu(x)|| <= ||V|| (1 + 2||A|| R R') e^(2||A|| R R') W_1(mu, nu)",
                double_bits),
        at_most("W_p(CA(eta, mu), CA(eta, nu)) <= C_B W_1(mu, nu)", double_bits),
        at_most("t -> 0, one atom moved by t delta: ||d/dt Gamma_{mu_t}(x)|| <= C_B w_k ||delta||"),
        equal("Theorem B family: lim_{t->0} ratio = (w/eps)(1 + 2aRR'(1 - w)) ||Vu||, w = eps e^(2aRR') / "
              "(1 - eps + eps e^(2aRR'))")};
    info_.families = {"theorem_b"};
    info_.evaluated_at = mf::wasserstein_evaluated_at;
    info_.notes =
        "W_1(mu, nu): network simplex (estimate) in double/mpfr, certified enclosure in interval "
        "(certify_wasserstein, intersected with the exact mean-gap and pairing-cost bounds, which coincide "
        "when one atom moves: then W_1 = w_k ||delta|| exactly). Family theorem_b (asymptotically sharp): "
        "Au = -au, query R'u, mu_eps = (1 - eps) delta_{Ru} + eps delta_{-Ru}, small atom moved by t, at "
        "a = 1, R = R' = 2 (eps = e^-12, e^-20, e^-40) and R = R' = 4 (2aRR' = 32, past the double-friendly "
        "regime; eps = e^-40); weights enter the softmax as log-weights. The t -> 0 part is the limit of the "
        "first part (exact derivative of Gamma, no difference quotient), and the equal part checks it "
        "against "
        "the closed form of docs/math/bounds.md#mf-theorem-b-family: ratio/bound = 0.9663 at eps = e^-12, R "
        "= R' = 2, a = 1, tending to 1 "
        "as eps -> 0. The asymmetry C_B / (||V|| ||A|| R^2) = (1 + 2aRR')e^(2aRR')/(aR^2) (context against "
        "query constant) grows exponentially in RR'; it is a property of the formulas and is not a part. At "
        "a "
        "query x = 0 (R' = 0) or A = 0 the bound is attained exactly (C_B = ||V||, Gamma_mu = V m_mu) when "
        "one "
        "atom moves in d = 1: the search finds ratio 1 there, equality points that interval arithmetic "
        "cannot "
        "certify.";
  }
  const ClaimInfo& info() const override { return info_; }
  /// k = {m, d, mode, q, p}: m atoms in R^d per measure, the pair's mode (mean_field.hpp), q queries, W_p.
  const Keys keys{"m", "d", "mode", "q", "p"};
  static Layout layout(long m, long d, long q) {
    return Layout()
        .add("pair", static_cast<long>(mf::pair_size(m, d)))
        .add("queries", q, d)
        .add("A", d, d)
        .add("V", d, d);
  }
  Layout layout(const Point& p) const { return layout(keys.of(p, "m"), keys.of(p, "d"), keys.of(p, "q")); }
  Point sample(Rng& rng) const override {
    Point p;
    const long m = rng.integer(1, 6), d = rng.integer(1, 3), q = rng.integer(1, 3);
    const double R = std::pow(10.0, rng.uniform(-0.7, 0.5)), Rq = std::pow(10.0, rng.uniform(-0.7, 0.5));
    const Layout l = layout(m, d, q);
    const long mode = mf::sample_pair(rng, p.x, m, d, R);
    l.fill(p.x, "queries",
           [&] { return rng.coin(0.05) ? 0.0 : Rq * rng.normal() / std::sqrt(static_cast<double>(d)); });
    push_score_matrix(rng, p.x, d, std::pow(10.0, rng.uniform(-1, 0.6)) / (R * Rq));
    push_value_matrix(rng, p.x, d);
    p.k = {m, d, mode, q, rng.integer(1, 2)};
    return p;
  }
  void repair(Point& p) const override {
    const Layout l = layout(p);
    mf::repair_pair(p.x, l.at("pair"), keys.of(p, "m"), keys.of(p, "d"), 16);
    mf::clamp_tail(p.x, l.at("queries"), 16);
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name != "theorem_b") return out;
    struct Case {
      double R, eps, t;
    };
    for (const Case c :
         {Case{2, std::exp(-12.0), 1e-3}, Case{2, std::exp(-12.0), 1e-7}, Case{2, std::exp(-20.0), 1e-7},
          Case{2, std::exp(-40.0), 1e-7}, Case{4, std::exp(-40.0), 1e-7}}) {
      Point p = theorem_b_pair(c.R, c.eps, c.t);
      p.x.insert(p.x.end(), {c.R, -1.0, 1.0});  // query R'u with R' = R; A = −1; V = 1
      p.k = {2, 1, mf::moved, 1, 1};
      out.push_back(p);
    }
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    using std::abs;
    using std::exp;
    const long m = keys.of(pt, "m"), d = keys.of(pt, "d"), mode = keys.of(pt, "mode"), q = keys.of(pt, "q"),
               p = keys.of(pt, "p");
    if (q < 1 || (p != 1 && p != 2)) throw InputError("point", "wrong size");
    const Layout l = layout(pt);
    l.check(pt);
    const mf::PairData pair = mf::read_pair(pt.x, l.at("pair"), m, d, mode);
    if (mf::wasserstein_estimate(mf::lift_measure<double>(pair.Y, pair.a),
                                 mf::lift_measure<double>(pair.Z, pair.c), 1) == 0)
      return {off<S>(), off<S>(), off<S>(), off<S>()};  // μ = ν: both sides vanish
    const Measure<S> mu = mf::lift_measure<S>(pair.Y, pair.a), nu = mf::lift_measure<S>(pair.Z, pair.c);
    const Matrix<S> Q = l.matrix<S>(pt, "queries");
    const Head<S> h{mf::Score::dot, l.matrix<S>(pt, "A"), l.matrix<S>(pt, "V"), Vector<S>()};
    const S a = num::norm_2(h.A), v = num::norm_2(h.V);
    const S R = num::smax<S>(mf::radius(mu), mf::radius(nu));
    const S W1 = mf::wasserstein(mu, nu, 1);
    const Vector<S> x = mf::row(Q, 0);
    const S Rx = num::euclidean_norm<S>(x);
    const S lhs0 = num::euclidean_norm<S>(Vector<S>(mf::gamma(h, x, mu) - mf::gamma(h, x, nu)));
    const Side<S> pointwise = le<S>(lhs0, mf::context_constant(v, a, R, Rx) * W1);

    Vector<double> uniform = Vector<double>::Constant(q, 1.0 / static_cast<double>(q));
    const Measure<S> eta{Q, uniform};
    const S Rq = mf::radius(eta);
    const S Wout = mf::wasserstein(mf::cross(h, eta, mu), mf::cross(h, eta, nu), static_cast<int>(p));
    const Side<S> pushed = le<S>(Wout, mf::context_constant(v, a, R, Rq) * W1);

    Side<S> limit = off<S>(), family = off<S>();
    if (const std::optional<long> k = mf::single_moved_atom(pair, mode)) {
      const Vector<S> delta = mf::row(nu.atoms, *k) - mf::row(mu.atoms, *k);
      const S wk = mf::weights<S>(pair.a)[*k];
      const S dG = num::euclidean_norm<S>(moved_atom_derivative(h, x, mu, *k, delta));
      const S move = wk * num::euclidean_norm<S>(delta);
      limit = le<S>(dG, mf::context_constant(v, a, mf::radius(mu), Rx) * move);
      // The family's structure: d = 1, two atoms ±R, the small one moved, A = −a < 0, query on the side of
      // the large atom.
      const long o = 1 - *k;
      if (d == 1 && m == 2 && pair.Y(o, 0) != 0 && pair.Y(*k, 0) == -pair.Y(o, 0) && l.raw(pt, "A") < 0 &&
          l.raw(pt, "queries") * pair.Y(o, 0) > 0) {
        const S eps = wk, rr = abs(mu.atoms(o, 0)), aa = -h.A(0, 0), rq = abs(x(0));
        const S E = exp(S(2) * aa * rr * rq);
        const S w = eps * E / (S(1) - eps + eps * E);
        family = eq<S>(dG / move, w / eps * (S(1) + S(2) * aa * rr * rq * (S(1) - w)) * abs(h.V(0, 0)));
      }
    }
    return {pointwise, pushed, limit, family};
  }

 private:
  ClaimInfo info_;
};

// ---------------------------------------------------------------------------------------------------------
// mf.context_general — point: k = {m, d, mode, score}; x = (pair, query (d), A (d×d), V (d×d)); score 0: dot
// xᵀAy, 1: L2 / Gaussian −‖A(x − y)‖²
// ---------------------------------------------------------------------------------------------------------

class ContextGeneral final : public ClaimBase<ContextGeneral> {
 public:
  ContextGeneral() {
    info_.id = "mf.context_general";
    info_.statement =
        "||Gamma_mu(x) - Gamma_nu(x)|| <= e^Delta (L_v + D_v L_k) W_1(mu, nu) and <= 2 e^Delta D_v ||mu - "
        "nu||_TV (y -> k(x, y) L_k-Lipschitz with oscillation <= Delta on the supports, v L_v-Lipschitz with "
        "diam v(supp) <= D_v).";
    info_.latex =
        "$\\|\\Gamma_\\mu(x)-\\Gamma_\\nu(x)\\|\\le e^\\Delta(L_v+D_vL_k)W_1(\\mu,\\nu)$ and "
        "$\\le2e^\\Delta D_v\\|\\mu-\\nu\\|_{TV}$";
    info_.source = "derived";
    info_.hypotheses = {
        "single head; potentials k(x, y) = x^T A y (dot) or -||A(x - y)||^2 (L2 / Gaussian); values v(y) = V "
        "y",
        "U = the atoms of positive weight of mu and nu; Delta = max_U k(x, .) - min_U k(x, .); L_k = max "
        "over "
        "distinct u, u' in U of |k(x, u) - k(x, u')| / ||u - u'||; D_v = max_{U x U} ||V(u - u')||; L_v = "
        "||V||_2",
        "||mu - nu||_TV = (1/2) sum over distinct atoms of |mu({z}) - nu({z})|"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {
        at_most("||Gamma_mu(x) - Gamma_nu(x)|| <= e^Delta (L_v + D_v L_k) W_1(mu, nu)", double_bits),
        at_most("||Gamma_mu(x) - Gamma_nu(x)|| <= 2 e^Delta D_v ||mu - nu||_TV")};
    info_.families = {"theorem_b", "gaussian"};
    info_.evaluated_at = mf::wasserstein_evaluated_at;
    info_.notes =
        "The constants are the smallest ones the hypotheses allow on the finite union U of the supports "
        "(Kantorovich-Rubinstein on U needs Lipschitz constants on U only), so the check is as strict as the "
        "statement. Families: the Theorem B family (dot, A = -1, R = R' = 2, eps = e^-12, e^-20) and a "
        "Gaussian potential -(x - y)^2/4 on the same two-atom measures with the query at -R' (the small atom "
        "favoured), moved both ways, and in d = 2. W_1 as in mf.context_lipschitz.";
  }
  const ClaimInfo& info() const override { return info_; }
  /// k = {m, d, mode, score}: score 0 dot xᵀAy, 1 L2 / Gaussian −‖A(x − y)‖².
  const Keys keys{"m", "d", "mode", "score"};
  static Layout layout(long m, long d) {
    return Layout()
        .add("pair", static_cast<long>(mf::pair_size(m, d)))
        .add("query", d)
        .add("A", d, d)
        .add("V", d, d);
  }
  Layout layout(const Point& p) const { return layout(keys.of(p, "m"), keys.of(p, "d")); }
  Point sample(Rng& rng) const override {
    Point p;
    const long m = rng.integer(1, 6), d = rng.integer(1, 3), score = rng.integer(0, 1);
    const double R = std::pow(10.0, rng.uniform(-0.7, 0.5)), Rq = std::pow(10.0, rng.uniform(-0.7, 0.5));
    const long mode = mf::sample_pair(rng, p.x, m, d, R);
    layout(m, d).fill(p.x, "query", [&] { return Rq * rng.normal() / std::sqrt(static_cast<double>(d)); });
    const double size = std::pow(10.0, rng.uniform(-1, 0.6));
    if (score == 0) {
      push_score_matrix(rng, p.x, d, size / (R * Rq));
    } else {
      for (long i = 0; i < d * d; ++i)
        p.x.push_back(std::sqrt(size) / (R + Rq) * rng.normal() / std::sqrt(static_cast<double>(d)));
    }
    push_value_matrix(rng, p.x, d);
    p.k = {m, d, mode, score};
    return p;
  }
  void repair(Point& p) const override {
    const Layout l = layout(p);
    mf::repair_pair(p.x, l.at("pair"), keys.of(p, "m"), keys.of(p, "d"), 16);
    mf::clamp_tail(p.x, l.at("query"), 16);
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "theorem_b") {
      for (double eps : {std::exp(-12.0), std::exp(-20.0)}) {
        Point p = theorem_b_pair(2, eps, 1e-6);
        p.x.insert(p.x.end(), {2.0, -1.0, 1.0});
        p.k = {2, 1, mf::moved, 0};
        out.push_back(p);
      }
    } else if (name == "gaussian") {
      for (double t : {1e-6, -1e-6}) {
        Point p = theorem_b_pair(2, std::exp(-12.0), t);
        p.x.insert(p.x.end(), {-2.0, 0.5, 1.0});  // query −R'; A = 1/2: k = −(x − y)²/4
        p.k = {2, 1, mf::moved, 1};
        out.push_back(p);
      }
      Point p;  // d = 2: the same along u = (0.6, 0.8), A = I/2, V = I
      const double ux = 0.6, uy = 0.8, eps = std::exp(-12.0);
      mf::push_moved_pair(p.x, (Matrix<double>(2, 2) << -2 * ux, -2 * uy, 2 * ux, 2 * uy).finished(),
                          (Vector<double>(2) << eps, 1 - eps).finished(),
                          (Matrix<double>(2, 2) << 1e-6 * ux, 1e-6 * uy, 0, 0).finished());
      p.x.insert(p.x.end(), {-2 * ux, -2 * uy, 0.5, 0, 0, 0.5, 1, 0, 0, 1});
      p.k = {2, 2, mf::moved, 1};
      out.push_back(p);
    }
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    using std::abs;
    using std::exp;
    const long m = keys.of(pt, "m"), d = keys.of(pt, "d"), mode = keys.of(pt, "mode"),
               score = keys.of(pt, "score");
    if (score != 0 && score != 1) throw InputError("point", "wrong size");
    const Layout l = layout(pt);
    l.check(pt);
    const mf::PairData pair = mf::read_pair(pt.x, l.at("pair"), m, d, mode);
    if (mf::wasserstein_estimate(mf::lift_measure<double>(pair.Y, pair.a),
                                 mf::lift_measure<double>(pair.Z, pair.c), 1) == 0)
      return {off<S>(), off<S>()};
    const Measure<S> mu = mf::lift_measure<S>(pair.Y, pair.a), nu = mf::lift_measure<S>(pair.Z, pair.c);
    const Vector<S> x = l.vector<S>(pt, "query");
    const Head<S> h{score == 0 ? mf::Score::dot : mf::Score::l2, l.matrix<S>(pt, "A"), l.matrix<S>(pt, "V"),
                    Vector<S>()};
    const S lhs = num::euclidean_norm<S>(Vector<S>(mf::gamma(h, x, mu) - mf::gamma(h, x, nu)));

    // The union U of the supports (atoms as doubles, distinct), with the masses of μ and ν on each.
    std::vector<Vector<double>> atoms;
    std::vector<std::vector<long>> from_mu, from_nu;  // indices of the atoms of μ and ν at each point of U
    auto add = [&](const Vector<double>& y, long j, bool of_mu) {
      std::size_t at = 0;
      while (at < atoms.size() && atoms[at] != y) ++at;
      if (at == atoms.size()) {
        atoms.push_back(y);
        from_mu.emplace_back();
        from_nu.emplace_back();
      }
      (of_mu ? from_mu : from_nu)[at].push_back(j);
    };
    for (long j = 0; j < m; ++j) {
      if (pair.a(j) > 0) add(pair.Y.row(j).transpose(), j, true);
      if (pair.c(j) > 0) add(pair.Z.row(j).transpose(), j, false);
    }
    const std::vector<S> wa = mf::weights<S>(pair.a), wc = mf::weights<S>(pair.c);
    std::vector<Vector<S>> U;
    std::vector<S> k;
    for (const Vector<double>& y : atoms) {
      U.push_back(num::lift_matrix<S>(Matrix<double>(y)).col(0));
      k.push_back(mf::potential(h, x, U.back()));
    }
    S kmax = k[0], kmin = k[0], Lk(0), Dv(0), tv(0);
    for (std::size_t i = 0; i < U.size(); ++i) {
      kmax = num::smax<S>(kmax, k[i]);
      kmin = num::smin<S>(kmin, k[i]);
      for (std::size_t j = 0; j < i; ++j) {
        const Vector<S> diff = U[i] - U[j];
        Lk = num::smax<S>(Lk, abs(k[i] - k[j]) / num::euclidean_norm<S>(diff));
        Dv = num::smax<S>(Dv, num::euclidean_norm<S>(num::mul<S>(h.V, Matrix<S>(diff))));
      }
      S difference(0);
      for (long j : from_mu[i]) difference += wa[j];
      for (long j : from_nu[i]) difference -= wc[j];
      tv += abs(difference);
    }
    tv /= S(2);
    const S factor = exp(kmax - kmin);
    const S W1 = mf::wasserstein(mu, nu, 1);
    return {le<S>(lhs, factor * (num::norm_2(h.V) + Dv * Lk) * W1), le<S>(lhs, S(2) * factor * Dv * tv)};
  }

 private:
  ClaimInfo info_;
};

}  // namespace

REGATTA_REGISTER_CLAIM(ContextLipschitz);
REGATTA_REGISTER_CLAIM(ContextGeneral);

}  // namespace regatta::proofs::claims
