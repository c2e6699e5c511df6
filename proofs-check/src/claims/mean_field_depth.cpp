// Mean-field claims on stacks (docs/math/bounds.md#mean-field-consequences): mf.depth (L layers, radii
// propagated) and
// mf.infinite_depth (a weight-tied contraction collapsing every input to δ_{z*}). Push-forwards are evaluated
// in S (mean_field.hpp), distances as in mean_field_self.cpp; W_1 to a Dirac mass is exact (Σ_i w_i ‖y_i −
// z‖).
#include <cmath>

#include <Eigen/SVD>

#include "mean_field.hpp"

namespace regatta::proofs::claims {

namespace {

using mf::Head;
using mf::Measure;

double frobenius(const std::vector<double>& x, std::size_t offset, long d) {
  double s = 0;
  for (long i = 0; i < d * d; ++i)
    s += x[offset + static_cast<std::size_t>(i)] * x[offset + static_cast<std::size_t>(i)];
  return std::sqrt(s);
}

void scale(std::vector<double>& x, std::size_t offset, long count, double factor) {
  for (long i = 0; i < count; ++i) x[offset + static_cast<std::size_t>(i)] *= factor;
}

// ---------------------------------------------------------------------------------------------------------
// mf.depth — point: k = {L, m, d, mode, residual}; x = (pair (mean_field.hpp), then A_ℓ, V_ℓ (d×d each) for
// ℓ = 1..L)
// ---------------------------------------------------------------------------------------------------------

class Depth final : public ClaimBase<Depth> {
 public:
  Depth() {
    info_.id = "mf.depth";
    info_.statement =
        "L layers with radii propagated as in docs/math/bounds.md#mean-field-consequences: W_1(F_L...F_1 mu, "
        "F_L...F_1 mu~) <= prod_l "
        "L_{R_l} W_1(mu, mu~); R_{l+1} = ||V_l|| R_l (no residual) or (1 + ||V_l||) R_l (residual, layer "
        "constant 1 + L_{R_l}).";
    info_.latex =
        "$W_1(F_L\\cdots F_1\\mu,F_L\\cdots F_1\\tilde\\mu)\\le\\prod_\\ell "
        "L_{R_\\ell}W_1(\\mu,\\tilde\\mu)$, "
        "$R_{\\ell+1}=\\|V_\\ell\\|R_\\ell$";
    info_.source = "derived";
    info_.hypotheses = {
        "L single-head dot-product layers (A_l, V_l), no biases; with residual every layer is "
        "id + Gamma",
        "R_1 = largest norm of an atom of positive weight of mu or mu~"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {
        at_most("W_1(F_L...F_1 mu, F_L...F_1 mu~) <= prod_l L_{R_l} W_1(mu, mu~)", double_bits),
        at_most("every atom after layer l lies in B_{R_{l+1}}  (as (max ||z|| - R_{l+1}) + 1 <= 1)")};
    info_.families = {"theorem_b", "tied"};
    info_.evaluated_at = mf::wasserstein_evaluated_at;
    info_.notes =
        "The bound is very loose: the reported max ratio is W_1(out) / (prod L_{R_l} W_1(in)), its slack the "
        "reciprocal. Families: the Theorem B pair (A = -1, R = 2, eps = e^-12, small atom moved by 10^-6) "
        "through two layers (A = -1, V = 1; then A = -1/4, V = 1/2), and a weight-tied stack of 2 and 3 "
        "layers with and without residual (the configuration of lip::evaluate's mf_depth, used as a "
        "cross-check in the tests). Both parts are attained in the limit A_l -> 0 with scalar V_l (one atom "
        "moved in d = 1), and the radius part exactly for a single atom in d = 1, so the search reports "
        "ratios up to 1 and such equality points are not certifiable by interval arithmetic.";
  }
  const ClaimInfo& info() const override { return info_; }
  /// k = {L, m, d, mode, residual}: L layers, m atoms in R^d per measure, the pair's mode (mean_field.hpp).
  const Keys keys{"L", "m", "d", "mode", "residual"};
  /// x = (pair, then A_l and V_l (d×d each) for l = 0 … L − 1).
  Layout layout(const Point& p) const {
    const long L = keys.of(p, "L"), m = keys.of(p, "m"), d = keys.of(p, "d");
    Layout l;
    l.add("pair", static_cast<long>(mf::pair_size(m, d)));
    for (long k = 0; k < L; ++k) l.add("A" + std::to_string(k), d, d).add("V" + std::to_string(k), d, d);
    return l;
  }
  Point sample(Rng& rng) const override {
    Point p;
    const long L = rng.integer(2, 3), m = rng.integer(1, 6), d = rng.integer(1, 3);
    const long residual = rng.coin(0.3) ? 1 : 0;
    double R = std::pow(10.0, rng.uniform(-0.7, 0.4));
    const long mode = mf::sample_pair(rng, p.x, m, d, R);
    for (long l = 0; l < L; ++l) {
      const double a = std::pow(10.0, rng.uniform(-1.5, 0.3)) / (R * R);
      const double v = std::pow(10.0, rng.uniform(-0.5, 0.2));
      const bool negative = rng.coin(0.35);
      for (long i = 0; i < d; ++i)
        for (long j = 0; j < d; ++j)
          p.x.push_back(negative ? (i == j ? -a : 0.0) + 0.1 * a * rng.normal()
                                 : a * rng.normal() / std::sqrt(static_cast<double>(d)));
      for (long i = 0; i < d * d; ++i) p.x.push_back(v * rng.normal() / std::sqrt(static_cast<double>(d)));
      R *= residual ? 1 + v : v;
    }
    p.k = {L, m, d, mode, residual};
    return p;
  }
  void repair(Point& p) const override {
    const Layout l = layout(p);
    mf::repair_pair(p.x, l.at("pair"), keys.of(p, "m"), keys.of(p, "d"), 16);
    mf::clamp_tail(p.x, l.at("A0"), 16);
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    const double eps = std::exp(-12.0);
    auto pair = [&](Point& p) {
      mf::push_moved_pair(p.x, (Matrix<double>(2, 1) << -2, 2).finished(),
                          (Vector<double>(2) << eps, 1 - eps).finished(),
                          (Matrix<double>(2, 1) << 1e-6, 0).finished());
    };
    if (name == "theorem_b") {
      Point p;
      pair(p);
      p.x.insert(p.x.end(), {-1.0, 1.0, -0.25, 0.5});
      p.k = {2, 2, 1, mf::moved, 0};
      out.push_back(p);
    } else if (name == "tied") {
      for (long L : {2L, 3L})
        for (long residual : {0L, 1L}) {
          Point p;
          pair(p);
          for (long l = 0; l < L; ++l) p.x.insert(p.x.end(), {-0.125, 0.75});
          p.k = {L, 2, 1, mf::moved, residual};
          out.push_back(p);
        }
    }
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const long L = keys.of(pt, "L"), m = keys.of(pt, "m"), d = keys.of(pt, "d"), mode = keys.of(pt, "mode");
    const bool residual = keys.of(pt, "residual") != 0;
    if (L < 1) throw InputError("point", "wrong size");
    const Layout lay = layout(pt);
    lay.check(pt);
    const mf::PairData pair = mf::read_pair(pt.x, lay.at("pair"), m, d, mode);
    if (mf::wasserstein_estimate(mf::lift_measure<double>(pair.Y, pair.a),
                                 mf::lift_measure<double>(pair.Z, pair.c), 1) == 0)
      return {off<S>(), off<S>()};
    Measure<S> mu = mf::lift_measure<S>(pair.Y, pair.a), nu = mf::lift_measure<S>(pair.Z, pair.c);
    const S W_in = mf::wasserstein(mu, nu, 1);
    S R = num::smax<S>(mf::radius(mu), mf::radius(nu)), product(1), excess(-1);
    bool first = true;
    for (long l = 0; l < L; ++l) {
      const Head<S> h{mf::Score::dot, lay.matrix<S>(pt, "A" + std::to_string(l)),
                      lay.matrix<S>(pt, "V" + std::to_string(l)), Vector<S>()};
      const S v = num::norm_2(h.V), L_R = mf::self_constant(v, num::norm_2(h.A), R);
      product *= residual ? S(1) + L_R : L_R;
      R = residual ? S((S(1) + v) * R) : S(v * R);
      mu = mf::attend(h, mu, residual);
      nu = mf::attend(h, nu, residual);
      const S e = num::smax<S>(mf::radius(mu), mf::radius(nu)) - R;
      excess = first ? e : num::smax<S>(excess, e);
      first = false;
    }
    return {le<S>(mf::wasserstein(mu, nu, 1), product * W_in), le_shifted<S>(excess, S(0))};
  }

 private:
  ClaimInfo info_;
};

// ---------------------------------------------------------------------------------------------------------
// mf.infinite_depth — point: k = {m, d, T}; x = (pair read in mode independent: μ_0 = Σ a_j δ_{y_j}, μ_0' =
// Σ c_j δ_{D_j}; A (d×d), V (d×d), b (d))
// ---------------------------------------------------------------------------------------------------------

/// The solution of M z = b by Gaussian elimination with partial pivoting (pivots chosen on the double
/// values; for interval the result encloses the exact solution when no pivot interval contains 0).
template <class S>
Vector<S> solve(Matrix<S> M, Vector<S> b) {
  using std::abs;
  const long d = M.rows();
  for (long c = 0; c < d; ++c) {
    long pivot = c;
    for (long r = c + 1; r < d; ++r)
      if (std::abs(scalar_traits<S>::to_double(M(r, c))) > std::abs(scalar_traits<S>::to_double(M(pivot, c))))
        pivot = r;
    M.row(c).swap(M.row(pivot));
    std::swap(b(c), b(pivot));
    if (num::is_zero(M(c, c))) throw InputError("point", "I - V is singular");
    for (long r = c + 1; r < d; ++r) {
      const S f = M(r, c) / M(c, c);
      for (long k = c; k < d; ++k) M(r, k) -= f * M(c, k);
      b(r) -= f * b(c);
    }
  }
  Vector<S> z(d);
  for (long r = d - 1; r >= 0; --r) {
    S s = b(r);
    for (long k = r + 1; k < d; ++k) s -= M(r, k) * z(k);
    z(r) = s / M(r, r);
  }
  return z;
}

/// F in coordinates centred at the fixed point z* = V z* + b: atoms e_j = y_j − z* map to Γ_μ(y_i) − z* =
/// V Σ_j p_j e_j with p = softmax_j((z* + e_i)ᵀA e_j + log a_j) (the terms of xᵀAy that do not depend on j
/// cancel). Differences of atoms keep their relative precision however close F^t μ comes to δ_z*, where
/// absolute coordinates would lose them to the rounding of z*.
template <class S>
Measure<S> attend_centred(const Head<S>& h, const Vector<S>& z, const Measure<S>& e) {
  const Head<S> centred{mf::Score::dot, h.A, h.V, Vector<S>()};
  Measure<S> out{Matrix<S>(e.size(), e.dim()), e.raw};
  for (long i = 0; i < e.size(); ++i) {
    const Vector<S> query = z + mf::row(e.atoms, i);
    out.atoms.row(i) = mf::gamma(centred, query, e).transpose();
  }
  return out;
}

/// The largest α ≥ 0 with v(1 + 3α)e^{2α} ≤ target (0 when v ≥ target).
double largest_score(double v, double target) {
  if (v >= target) return 0;
  double lo = 0, hi = 10;
  for (int i = 0; i < 100; ++i) {
    const double mid = (lo + hi) / 2;
    (v * (1 + 3 * mid) * std::exp(2 * mid) <= target ? lo : hi) = mid;
  }
  return lo;
}

class InfiniteDepth final : public ClaimBase<InfiniteDepth> {
 public:
  InfiniteDepth() {
    info_.id = "mf.infinite_depth";
    info_.statement =
        "Weight-tied, no residual, ||V|| <= 1, L_R < 1: W_1(F^t mu_0, delta_{z*}) <= L_R^t / (1 - L_R) W_1(F "
        "mu_0, mu_0) with z* = (I - V)^-1 b; limits from different mu_0 coincide.";
    info_.latex =
        "$W_1(F^t\\mu_0,\\delta_{z^\\star})\\le\\frac{L_R^t}{1-L_R}W_1(F\\mu_0,\\mu_0)$, "
        "$z^\\star=(I-V)^{-1}b$";
    info_.source = "derived";
    info_.hypotheses = {
        "one dot-product head applied t times, values V y + b, no residual",
        "R = max(largest atom norm of mu_0 and mu_0', ||b|| / (1 - ||V||)), so that ||V|| R + "
        "||b|| <= R (F maps P(B_R) into itself); L_R = ||V|| (1 + 3||A|| R^2) e^(2||A|| R^2) < "
        "1 (points outside are skipped)"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {
        at_most("W_1(F^t mu_0, delta_z*) <= L_R^t / (1 - L_R) W_1(F mu_0, mu_0)", double_bits),
        at_most("W_1(F^t mu_0, F^t mu_0') <= L_R^t W_1(mu_0, mu_0')  (limits coincide)", double_bits),
        equal("F(delta_z*) = delta_z*: ||Gamma_{delta_z*}(z*) - z*|| = 0")};
    info_.families = {"contractive"};
    info_.evaluated_at = std::string(mf::wasserstein_evaluated_at) +
                         " The fixed point z* is solved in the scalar type (interval: Gaussian elimination "
                         "enclosing the exact solution), and the iterates F^t are computed in it.";
    info_.notes =
        "W_1 to the Dirac mass delta_z* is the exact sum of w_i ||y_i - z*||; z* is solved in S (Gaussian "
        "elimination) and checked to be the fixed point of F. The hypotheses are decided in each scalar "
        "type (interval: the upper ends of ||V|| and L_R below 1). Family: d = 1, A = 1/10, V = 1/2, b = "
        "1/4 (L_R = 0.79) and d = 2, A = -I/20, V = 0.6 rotation, b = (0.1, -0.2), for t = 1, 5, 12.";
  }
  const ClaimInfo& info() const override { return info_; }
  /// k = {m, d, T}: m atoms in R^d per measure, T iterations of F.
  inline static const Keys keys{"m", "d", "T"};
  /// x = (pair, A (d×d), V (d×d), b (d)).
  static Layout layout(const Point& p) {
    const long m = keys.of(p, "m"), d = keys.of(p, "d");
    return Layout()
        .add("pair", static_cast<long>(mf::pair_size(m, d)))
        .add("A", d, d)
        .add("V", d, d)
        .add("b", d);
  }
  Point sample(Rng& rng) const override {
    Point p;
    const long m = rng.integer(1, 6), d = rng.integer(1, 3), T = rng.integer(1, 12);
    const double R0 = std::pow(10.0, rng.uniform(-0.5, 0.3));
    mf::sample_pair(rng, p.x, m, d, R0, mf::independent);
    for (long i = 0; i < 2 * d * d + d; ++i) p.x.push_back(rng.normal());
    p.k = {m, d, T};
    fit(p, rng.uniform(0.05, 0.85), rng.uniform(), rng.uniform());
    return p;
  }
  /// Rescales V to Frobenius norm ≤ v_max, b into the ball allowed by R, and A so that the Frobenius
  /// estimate of L_R stays below 0.9 (Frobenius norms bound the spectral ones, so the hypotheses hold).
  void repair(Point& p) const override {
    const Layout l = layout(p);
    mf::repair_pair(p.x, l.at("pair"), keys.of(p, "m"), keys.of(p, "d"), 8);
    mf::clamp_tail(p.x, l.at("A"), 8);
    fit(p, 0.9, 1.0, 1.0);
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name != "contractive") return out;
    for (long T : {1L, 5L, 12L}) {
      Point p;
      // The second atom moved by 0.3 (the pair's D block).
      mf::push_moved_pair(p.x, (Matrix<double>(2, 1) << -1, 1).finished(),
                          (Vector<double>(2) << 0.5, 0.5).finished(),
                          (Matrix<double>(2, 1) << 0, 0.3).finished());
      p.x.insert(p.x.end(), {0.1, 0.5, 0.25});
      p.k = {2, 1, T};
      out.push_back(p);
      Point q;
      const double c = 0.6 * 0.8, s = 0.6 * 0.6;  // 0.6 × rotation by (0.8, 0.6)
      mf::push_moved_pair(q.x, (Matrix<double>(3, 2) << 0.6, 0.8, -1, 0, 0, -0.5).finished(),
                          (Vector<double>(3) << 0.25, 0.25, 0.5).finished(),
                          (Matrix<double>(3, 2) << 0.1, 0.1, 0.5, -0.5, -0.2, 0.3).finished());
      q.x.insert(q.x.end(), {-0.05, 0, 0, -0.05, c, -s, s, c, 0.1, -0.2});
      q.k = {3, 2, T};
      out.push_back(q);
    }
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const long m = keys.of(pt, "m"), d = keys.of(pt, "d"), T = keys.of(pt, "T");
    const Layout l = layout(pt);
    if (T < 1 || T > 1000 || pt.x.size() != l.size()) throw InputError("point", "wrong size");
    const mf::PairData pair = mf::read_pair(pt.x, l.at("pair"), m, d, mf::independent);
    const Head<S> h{mf::Score::dot, l.matrix<S>(pt, "A"), l.matrix<S>(pt, "V"), l.vector<S>(pt, "b")};
    const S v = num::norm_2(h.V);
    if (!mf::certainly_below(v, 1.0)) throw InputError("point", "||V|| >= 1");
    const Measure<S> mu0 = mf::lift_measure<S>(pair.Y, pair.a), nu0 = mf::lift_measure<S>(pair.Z, pair.c);
    const S R = num::smax<S>(num::smax<S>(mf::radius(mu0), mf::radius(nu0)),
                             num::euclidean_norm<S>(h.b) / (S(1) - v));
    const S L = mf::self_constant(v, num::norm_2(h.A), R);
    if (!mf::certainly_below(L, 1.0)) throw InputError("point", "L_R >= 1");
    const Vector<S> z = solve<S>(Matrix<S>(Matrix<S>::Identity(d, d) - h.V), h.b);

    // Iterates in coordinates centred at z* (W is translation invariant).
    auto centre = [&](const Measure<S>& m0) {
      Measure<S> e = m0;
      for (long i = 0; i < e.size(); ++i) e.atoms.row(i) -= z.transpose();
      return e;
    };
    const Measure<S> e_mu0 = centre(mu0), F_mu0 = attend_centred(h, z, e_mu0);
    Measure<S> mu = F_mu0, nu = attend_centred(h, z, centre(nu0));
    S LT = L;
    for (long t = 1; t < T; ++t) {
      mu = attend_centred(h, z, mu);
      nu = attend_centred(h, z, nu);
      LT *= L;
    }
    S to_dirac(0);
    const std::vector<S> w = mf::weights<S>(pair.a);
    for (long i = 0; i < m; ++i)
      if (pair.a(i) > 0) to_dirac += w[i] * num::euclidean_norm<S>(mf::row(mu.atoms, i));

    // Decisions from the double data: a fixed μ_0 (= δ_z*) or μ_0 = μ_0' make both sides vanish.
    const Measure<double> mu0_d = mf::lift_measure<double>(pair.Y, pair.a);
    const Head<double> h_d{mf::Score::dot, l.matrix<double>(pt, "A"), l.matrix<double>(pt, "V"),
                           l.vector<double>(pt, "b")};
    const bool moves = mf::wasserstein_estimate(mf::attend(h_d, mu0_d), mu0_d, 1) > 0;
    const bool differ = mf::wasserstein_estimate(mu0_d, mf::lift_measure<double>(pair.Z, pair.c), 1) > 0;

    const Measure<S> dirac{Matrix<S>(z.transpose()), Vector<double>::Ones(1)};
    const S fixed = num::euclidean_norm<S>(Vector<S>(mf::gamma(h, z, dirac) - z));
    return {moves ? le<S>(to_dirac, LT / (S(1) - L) * mf::wasserstein(F_mu0, e_mu0, 1)) : off<S>(),
            differ ? le<S>(mf::wasserstein(mu, nu, 1), LT * mf::wasserstein(mu0, nu0, 1)) : off<S>(),
            eq<S>(fixed, S(0))};
  }

 private:
  /// Scales V to Frobenius norm ≤ v_max (a fraction fv of it when sampling), b to norm fb (1 − ‖V‖_F) R0 at
  /// most, and A so that ‖V‖_F (1 + 3‖A‖_F R²) e^{2‖A‖_F R²} ≤ fa · 0.9 (R as in evaluate, with ‖V‖_F).
  static void fit(Point& p, double fv, double fb, double fa) {
    const long m = keys.of(p, "m"), d = keys.of(p, "d");
    const Layout l = layout(p);
    const std::size_t at_A = l.at("A"), at_V = l.at("V"), at_b = l.at("b");
    const double vf = frobenius(p.x, at_V, d);
    if (vf > fv) scale(p.x, at_V, d * d, fv / vf);
    const double v = std::min(vf, fv);
    const mf::PairData pair = [&] {
      try {
        return mf::read_pair(p.x, l.at("pair"), m, d, mf::independent);
      } catch (const InputError&) {
        return mf::PairData{};
      }
    }();
    double R0 = 0;
    for (long j = 0; j < pair.Y.rows(); ++j) {
      if (pair.a(j) > 0) R0 = std::max(R0, pair.Y.row(j).norm());
      if (pair.c(j) > 0) R0 = std::max(R0, pair.Z.row(j).norm());
    }
    double bn = 0;
    for (long i = 0; i < d; ++i)
      bn += p.x[at_b + static_cast<std::size_t>(i)] * p.x[at_b + static_cast<std::size_t>(i)];
    bn = std::sqrt(bn);
    const double b_max = fb * (1 - v) * std::max(R0, 1e-3);
    if (bn > b_max) scale(p.x, at_b, d, b_max / bn);
    const double R = std::max(R0, std::min(bn, b_max) / (1 - v));
    const double af = frobenius(p.x, at_A, d), a_max = largest_score(v, 0.9) / std::max(R * R, 1e-12);
    if (af > fa * a_max) scale(p.x, at_A, d * d, af > 0 ? fa * a_max / af : 0.0);
  }

  ClaimInfo info_;
};

}  // namespace

REGATTA_REGISTER_CLAIM(Depth);
REGATTA_REGISTER_CLAIM(InfiniteDepth);

}  // namespace regatta::proofs::claims
