// Mean-field self-attention claims (docs/math/bounds.md#mf-theorem-c and
// docs/math/bounds.md#mean-field-consequences): mf.self_lipschitz,
// mf.misspecification. F(μ) = (Γ_μ)_#μ is evaluated in S (mean_field.hpp); a Wasserstein distance is the
// network simplex value in double/mpfr (an estimate) and a certified enclosure in interval, so "holds" is
// certified by (upper bound of the output distance) ≤ L_R × (lower bound of the input distance).
#include <cmath>

#include "mean_field.hpp"

namespace regatta::proofs::claims {

namespace {

using mf::Head;
using mf::Measure;

/// A random dot head in R^d for measures of radius about R: A with ‖A‖R² about 10^(−1.3..0.6), often
/// with the eigenvalue −‖A‖ of the extremal families; V Gaussian or the identity.
void push_head(Rng& rng, std::vector<double>& x, long d, double R) {
  const double size = std::pow(10.0, rng.uniform(-1.3, 0.6)) / (R * R);
  const bool negative = rng.coin(0.35), identity = rng.coin(0.2);
  for (long i = 0; i < d; ++i)
    for (long j = 0; j < d; ++j)
      x.push_back(negative ? (i == j ? -size : 0.0) + 0.1 * size * rng.normal()
                           : size * rng.normal() / std::sqrt(static_cast<double>(d)));
  for (long i = 0; i < d; ++i)
    for (long j = 0; j < d; ++j) x.push_back(identity ? (i == j ? 1.0 : 0.0) : rng.normal());
}

/// The dot head of blocks "A" and "V" of a point.
template <class S>
Head<S> read_head(const Layout& l, const Point& p) {
  return Head<S>{mf::Score::dot, l.matrix<S>(p, "A"), l.matrix<S>(p, "V"), Vector<S>()};
}

/// Two atoms ±R u (or R u and R u / 2 with `positive`) of weights ε and 1 − ε, the first moved by t u.
Point two_atom_pair(const Vector<double>& u, double R, double eps, double t, bool positive) {
  const long d = u.size();
  Matrix<double> Y(2, d), D = Matrix<double>::Zero(2, d);
  Y.row(0) = R * u.transpose();
  Y.row(1) = (positive ? R / 2 : -R) * u.transpose();
  if (!positive) Y.row(0).swap(Y.row(1));  // the small atom at −R u
  D.row(0) = t * u.transpose();
  Point p;
  mf::push_moved_pair(p.x, Y, (Vector<double>(2) << eps, 1 - eps).finished(), D);
  return p;
}

// ---------------------------------------------------------------------------------------------------------
// mf.self_lipschitz — point: k = {m, d, mode}; x = (pair (mean_field.hpp), A (d×d), V (d×d))
// ---------------------------------------------------------------------------------------------------------

class SelfLipschitz final : public ClaimBase<SelfLipschitz> {
 public:
  SelfLipschitz() {
    info_.id = "mf.self_lipschitz";
    info_.statement =
        "mu, nu in P(B_R), p in {1, 2} (any p >= 1): W_p(F mu, F nu) <= ||V|| (1 + 3||A|| R^2) e^(2||A|| "
        "R^2) W_p(mu, nu).";
    info_.latex =
        "$W_p(F\\mu,F\\nu)\\le\\|V\\|(1+3\\|A\\|R^2)e^{2\\|A\\|R^2}W_p(\\mu,\\nu)$, $p\\in\\{1,2\\}$";
    info_.source = "derived (constant coincides with the quoted mean-field bound)";
    info_.hypotheses = {"single dot-product head, scores x^T A y, values V y, no residual",
                        "R = largest norm of an atom of positive weight of mu or nu"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {at_most("W_1(F mu, F nu) <= L_R W_1(mu, nu)", double_bits),
                   at_most("W_2(F mu, F nu) <= L_R W_2(mu, nu)", double_bits)};
    info_.families = {"theorem_b", "positive_spectrum"};
    info_.evaluated_at = mf::wasserstein_evaluated_at;
    info_.notes =
        "Distances: network simplex (estimate) in double/mpfr; in interval a certified enclosure "
        "(certify_wasserstein on the rounded atoms, widened by the rounding, intersected with the exact "
        "mean-gap and pairing-cost bounds), so a certified point is (upper bound of W_p(F mu, F nu)) <= L_R "
        "(lower bound of W_p(mu, nu)). Families: the Theorem B family as self-attention input (A = -1, R = "
        "2, eps = e^-12, e^-16, e^-24, small atom moved by 10^-6, in d = 1 and along u = (0.6, 0.8)), whose "
        "W_1 ratio tends to (1 + 2aR^2)/(1 + 3aR^2) L_R = (9/13) L_R; positive spectrum A = I (majority at "
        "R u / 2, small atom at R u), which reaches only about (1 + R^2/4)e^(R^2/4). As A -> 0 the constant "
        "tends to ||V|| and one atom moved in d = 1 attains it, so the search reports ratios close to 1.";
  }
  const ClaimInfo& info() const override { return info_; }
  /// k = {m, d, mode}: m atoms in R^d per measure, the pair's mode (mean_field.hpp).
  const Keys keys{"m", "d", "mode"};
  Layout layout(const Point& p) const {
    const long m = keys.of(p, "m"), d = keys.of(p, "d");
    return Layout().add("pair", static_cast<long>(mf::pair_size(m, d))).add("A", d, d).add("V", d, d);
  }
  Point sample(Rng& rng) const override {
    Point p;
    const long m = rng.integer(1, 6), d = rng.integer(1, 3);
    const double R = std::pow(10.0, rng.uniform(-0.7, 0.5));
    const long mode = mf::sample_pair(rng, p.x, m, d, R);
    push_head(rng, p.x, d, R);
    p.k = {m, d, mode};
    return p;
  }
  void repair(Point& p) const override {
    const Layout l = layout(p);
    mf::repair_pair(p.x, l.at("pair"), keys.of(p, "m"), keys.of(p, "d"), 16);
    mf::clamp_tail(p.x, l.at("A"), 16);
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    const Vector<double> e1 = Vector<double>::Constant(1, 1.0);
    const Vector<double> u2 = (Vector<double>(2) << 0.6, 0.8).finished();
    if (name == "theorem_b") {
      for (double eps : {std::exp(-12.0), std::exp(-16.0), std::exp(-24.0)}) {
        Point p = two_atom_pair(e1, 2, eps, 1e-6, false);
        p.x.insert(p.x.end(), {-1.0, 1.0});
        p.k = {2, 1, mf::moved};
        out.push_back(p);
      }
      Point p = two_atom_pair(u2, 2, std::exp(-16.0), 1e-6, false);
      p.x.insert(p.x.end(), {-1, 0, 0, -1, 1, 0, 0, 1});
      p.k = {2, 2, mf::moved};
      out.push_back(p);
    } else if (name == "positive_spectrum") {
      for (double eps : {std::exp(-2.0), std::exp(-6.0)}) {
        Point p = two_atom_pair(e1, 2, eps, 1e-6, true);
        p.x.insert(p.x.end(), {1.0, 1.0});
        p.k = {2, 1, mf::moved};
        out.push_back(p);
      }
    }
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const long m = keys.of(pt, "m"), d = keys.of(pt, "d"), mode = keys.of(pt, "mode");
    const Layout l = layout(pt);
    l.check(pt);
    const mf::PairData pair = mf::read_pair(pt.x, l.at("pair"), m, d, mode);
    if (mf::wasserstein_estimate(mf::lift_measure<double>(pair.Y, pair.a),
                                 mf::lift_measure<double>(pair.Z, pair.c), 1) == 0)
      return {off<S>(), off<S>()};  // μ = ν
    const Measure<S> mu = mf::lift_measure<S>(pair.Y, pair.a), nu = mf::lift_measure<S>(pair.Z, pair.c);
    const Head<S> h = read_head<S>(l, pt);
    const S R = num::smax<S>(mf::radius(mu), mf::radius(nu));
    const S L = mf::self_constant(num::norm_2(h.V), num::norm_2(h.A), R);
    const Measure<S> Fmu = mf::attend(h, mu), Fnu = mf::attend(h, nu);
    Evaluation<S> out;
    for (int p : {1, 2}) out.push_back(le<S>(mf::wasserstein(Fmu, Fnu, p), L * mf::wasserstein(mu, nu, p)));
    return out;
  }

 private:
  ClaimInfo info_;
};

// ---------------------------------------------------------------------------------------------------------
// mf.misspecification — point: k = {case, n, d, j}; x = (pair (n atoms), query (d), A (d×d), V (d×d)).
// case 0 token noise (the pair in mode moved), 1 dropping the last j of n tokens (μ uniform on the pair's
// atoms Y), 2 reweighting (mode reweighted), 3 quantisation on the grid of step h = 2^−j (μ = Σ a_i δ_{y_i})
// ---------------------------------------------------------------------------------------------------------

enum Case : long { noise = 0, drop = 1, reweight = 2, quantise = 3 };

class Misspecification final : public ClaimBase<Misspecification> {
 public:
  Misspecification() {
    info_.id = "mf.misspecification";
    info_.statement =
        "W_1(F mu, F mu~) <= L_R W_1(mu, mu~), and its corollaries: token noise <= eps gives <= L_R eps; "
        "dropping k of n tokens gives <= L_R 2 R k / n; reweighting gives <= L_R 2 R ||w - w~||_TV; "
        "quantisation with cell radius r_h gives sup_{x in B_R'} ||Gamma_mu(x) - Gamma_{mu_h}(x)|| <= C_B "
        "r_h with C_B = ||V|| (1 + 2||A|| R R') e^(2||A|| R R'); sampling: E W_1(F mu_N, F mu) <= L_R E "
        "W_1(mu_N, mu).";
    info_.latex =
        "$W_1(F\\mu,F\\tilde\\mu)\\le L_RW_1(\\mu,\\tilde\\mu)$; noise $\\le L_R\\epsilon$; dropping $\\le "
        "L_R\\cdot2Rk/n$; reweighting $\\le L_R\\cdot2R\\|w-\\tilde w\\|_{TV}$; "
        "$\\sup_{x\\in B_{R'}}\\|\\Gamma_\\mu-\\Gamma_{\\mu_h}\\|\\le C_Br_h$";
    info_.source = "derived";
    info_.hypotheses = {
        "single dot-product head, scores x^T A y, values V y, no residual",
        "R = largest norm of an atom of positive weight of either measure; R' = ||x||",
        "quantisation: mu_h moves each atom to the centre of its cell of the grid of step h = "
        "2^-j, cell radius r_h = h sqrt(d) / 2"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {at_most("W_1(F mu, F mu~) <= L_R W_1(mu, mu~)", double_bits),
                   at_most("token noise ||x_i - x~_i|| <= eps: W_1(F mu, F mu~) <= L_R eps", double_bits),
                   at_most("dropping k of n tokens: W_1(F mu, F mu~) <= L_R 2 R k / n", double_bits),
                   at_most("reweighting: W_1(F mu, F mu~) <= L_R 2 R ||w - w~||_TV", double_bits),
                   at_most("quantisation: ||Gamma_mu(x) - Gamma_{mu_h}(x)|| <= C_B r_h, x in B_R'")};
    info_.families = {"theorem_b_noise", "drop_outlier", "quantise"};
    info_.evaluated_at = mf::wasserstein_evaluated_at;
    info_.notes =
        "The sampling corollary is statistical (an expected W_1 over random samples and a fitted N^(-1/d) "
        "slope with its confidence) and is left out of this deterministic check; every other corollary is a "
        "part, active on the points of its case. Distances as in mf.self_lipschitz (certified enclosures in "
        "interval). The quantisation part is checked at the sampled query x with R' = ||x||.";
  }
  const ClaimInfo& info() const override { return info_; }
  /// k = {case, n, d, j}: the corollary (noise, reweight, drop, quantise), n atoms in R^d, j tokens dropped
  /// or the quantisation step 2^−j.
  const Keys keys{"case", "n", "d", "j"};
  Layout layout(const Point& p) const {
    const long n = keys.of(p, "n"), d = keys.of(p, "d");
    return Layout()
        .add("pair", static_cast<long>(mf::pair_size(n, d)))
        .add("query", d)
        .add("A", d, d)
        .add("V", d, d);
  }
  Point sample(Rng& rng) const override {
    Point p;
    const long c = rng.integer(0, 3), n = rng.integer(2, 8), d = rng.integer(1, 3);
    const double R = std::pow(10.0, rng.uniform(-0.7, 0.5));
    const long pair_mode = c == noise ? mf::moved : (c == reweight ? mf::reweighted : mf::independent);
    mf::sample_pair(rng, p.x, n, d, R, pair_mode);
    for (long i = 0; i < d; ++i) p.x.push_back(R * rng.normal() / std::sqrt(static_cast<double>(d)));
    push_head(rng, p.x, d, R);
    const long j = c == drop ? rng.integer(1, n - 1) : (c == quantise ? rng.integer(0, 6) : 0);
    p.k = {c, n, d, j};
    return p;
  }
  void repair(Point& p) const override {
    const Layout l = layout(p);
    mf::repair_pair(p.x, l.at("pair"), keys.of(p, "n"), keys.of(p, "d"), 16);
    mf::clamp_tail(p.x, l.at("query"), 16);
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    const Vector<double> e1 = Vector<double>::Constant(1, 1.0);
    if (name == "theorem_b_noise") {
      Point p = two_atom_pair(e1, 2, std::exp(-12.0), 1e-6, false);
      p.x.insert(p.x.end(), {2.0, -1.0, 1.0});
      p.k = {noise, 2, 1, 0};
      out.push_back(p);
    } else if (name == "drop_outlier") {
      Point p;  // three tokens at R, the outlier −R last (dropped); A = −1/4, V = 1
      const Matrix<double> Y = (Matrix<double>(4, 1) << 2, 2, 2, -2).finished();
      mf::push_moved_pair(p.x, Y, Vector<double>::Constant(4, 0.25), Matrix<double>::Zero(4, 1));
      p.x.insert(p.x.end(), {2.0, -0.25, 1.0});
      p.k = {drop, 4, 1, 1};
      out.push_back(p);
    } else if (name == "quantise") {
      for (long j : {2L, 5L}) {
        Point p;
        const Matrix<double> Y = (Matrix<double>(3, 2) << 0.3, -1.1, 1.7, 0.2, -0.6, 0.9).finished();
        mf::push_moved_pair(p.x, Y, (Vector<double>(3) << 0.5, 0.25, 0.25).finished(),
                            Matrix<double>::Zero(3, 2));
        p.x.insert(p.x.end(), {1.0, 1.0, -0.5, 0.1, 0.0, -0.5, 1, 0.5, 0, 1});
        p.k = {quantise, 3, 2, j};
        out.push_back(p);
      }
    }
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    using std::abs;
    using std::sqrt;
    const long c = keys.of(pt, "case"), n = keys.of(pt, "n"), d = keys.of(pt, "d"), j = keys.of(pt, "j");
    const Layout l = layout(pt);
    if (c < 0 || c > 3 || pt.x.size() != l.size() || (c == drop && (j < 1 || j >= n)) ||
        (c == quantise && (j < 0 || j > 30)))
      throw InputError("point", "wrong size");
    const long pair_mode = c == noise ? mf::moved : (c == reweight ? mf::reweighted : mf::independent);
    const mf::PairData pair = mf::read_pair(pt.x, l.at("pair"), n, d, pair_mode);
    // The two measures as doubles.
    Matrix<double> Y = pair.Y, Z = pair.Z;
    Vector<double> a = pair.a, c_raw = pair.c;
    const double h = std::ldexp(1.0, -static_cast<int>(j));
    if (c == drop) {
      a = Vector<double>::Constant(n, 1.0 / static_cast<double>(n));
      Z = Y.topRows(n - j);
      c_raw = Vector<double>::Constant(n - j, 1.0 / static_cast<double>(n - j));
    } else if (c == quantise) {
      c_raw = a;
      for (long i = 0; i < n; ++i)
        for (long k = 0; k < d; ++k) Z(i, k) = (std::floor(Y(i, k) / h) + 0.5) * h;  // exact: h = 2^−j
    }
    if (mf::wasserstein_estimate(mf::lift_measure<double>(Y, a), mf::lift_measure<double>(Z, c_raw), 1) == 0)
      return {off<S>(), off<S>(), off<S>(), off<S>(), off<S>()};
    const Measure<S> mu = mf::lift_measure<S>(Y, a), mut = mf::lift_measure<S>(Z, c_raw);
    const Vector<S> x = l.vector<S>(pt, "query");
    const Head<S> h_ = read_head<S>(l, pt);
    const S A = num::norm_2(h_.A), V = num::norm_2(h_.V);
    const S R = num::smax<S>(mf::radius(mu), mf::radius(mut));
    const S L = mf::self_constant(V, A, R);
    const S Wout = mf::wasserstein(mf::attend(h_, mu), mf::attend(h_, mut), 1);
    Evaluation<S> out(5, off<S>());
    out[0] = le<S>(Wout, L * mf::wasserstein(mu, mut, 1));
    if (c == noise) {
      S eps(0);
      for (long i = 0; i < n; ++i)
        if (a(i) > 0)
          eps = num::smax<S>(eps,
                             num::euclidean_norm<S>(Vector<S>(mf::row(mut.atoms, i) - mf::row(mu.atoms, i))));
      out[1] = le<S>(Wout, L * eps);
    } else if (c == drop) {
      out[2] = le<S>(Wout, L * S(2) * R * lift<S>(static_cast<double>(j)) / lift<S>(static_cast<double>(n)));
    } else if (c == reweight) {
      const std::vector<S> w = mf::weights<S>(a), wt = mf::weights<S>(c_raw);
      S tv(0);
      for (long i = 0; i < n; ++i) tv += abs(w[i] - wt[i]);
      out[3] = le<S>(Wout, L * R * tv);  // 2R · TV with TV = ½ Σ|w − w̃|
    } else {
      const S Rx = num::euclidean_norm<S>(x);
      const S rh = lift<S>(h) * sqrt(lift<S>(static_cast<double>(d))) / S(2);
      const S gap = num::euclidean_norm<S>(Vector<S>(mf::gamma(h_, x, mu) - mf::gamma(h_, x, mut)));
      out[4] = le<S>(gap, mf::context_constant(V, A, R, Rx) * rh);
    }
    return out;
  }

 private:
  ClaimInfo info_;
};

}  // namespace

REGATTA_REGISTER_CLAIM(SelfLipschitz);
REGATTA_REGISTER_CLAIM(Misspecification);

}  // namespace regatta::proofs::claims
