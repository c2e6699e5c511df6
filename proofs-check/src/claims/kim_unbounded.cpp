// Unbounded claims (docs/math/bounds.md#dot-product-unbounded, docs/math/bounds.md#kim-necessity):
// dot-product attention is not Lipschitz
// (kim.thm31_dp_unbounded), and every ingredient of the L2 theorem is needed — tying, the unmasked diagonal,
// the value map X A_h (kim.l2_necessity_*). The growth quantity is a Jacobian entry |J_ab| (a lower bound of
// every induced ℓp norm of J) or ‖J‖₂, certified from below by interval arithmetic.
#include <cmath>

#include <regatta/proofs/detail/attention_map.hpp>
#include "common.hpp"
#include "layout.hpp"

namespace regatta::proofs::claims {

namespace {

using detail::AttentionMap;
using detail::MaskKind;
using detail::ScoreKind;

template <class S>
S max_abs_entry(const Matrix<S>& J) {
  S best(0);
  for (Eigen::Index i = 0; i < J.rows(); ++i)
    for (Eigen::Index j = 0; j < J.cols(); ++j) best = num::smax<S>(best, num::sabs<S>(J(i, j)));
  return best;
}

/// Growth family points 2^0 … 2^(count−1) of a scalar parameter.
std::vector<double> doublings(int count, double start = 1.0) {
  std::vector<double> s;
  for (int j = 0; j < count; ++j) s.push_back(std::ldexp(start, j));
  return s;
}

// ---------------------------------------------------------------------------------------------------------
// kim.thm31_dp_unbounded — single dot-product head f = softmax(X A Xᵀ) X W^V.
// Point: k = {n, d, e}; x = (X (n×d), A (d×d), W^V (d×e)). Row 0 of X is the zero query (repair keeps it 0).
// ---------------------------------------------------------------------------------------------------------

class DotUnbounded final : public ClaimBase<DotUnbounded> {
 public:
  DotUnbounded() {
    info_.id = "kim.thm31_dp_unbounded";
    info_.default_samples = 32768;  // fixed count: about a second of search
    info_.statement =
        "Dot-product attention with A_h != 0 != W^V_h is not Lipschitz in any l_p: sup_X ||J(X)||_p = inf. "
        "At a "
        "zero query x_i = 0: J_ii = (W^V)^T [I/n + Sigma(X) A^T], J_ij = (W^V)^T / n (Sigma the population "
        "covariance of the rows); for d = 1, a = 1, x = (0, s, -s, s, -s): J_11 = 1/5 + 4 s^2 / 5.";
    info_.latex =
        "$\\sup_X\\|J(X)\\|_p=\\infty$; $x_i=0$: $J_{ii}=(W^V)^\\top[\\frac1nI+\\Sigma(X)A^\\top]$, "
        "$J_{ij}=\\frac1n(W^V)^\\top$; $J_{11}=\\frac15+\\frac45s^2$";
    info_.source = "published (statement); derived (families)";
    info_.hypotheses = {"single dot-product head, scores x_i^T A x_j, values X W^V", "A != 0, W^V != 0"};
    info_.expected = Expected::unbounded;
    info_.kind = StatementKind::unbounded;
    info_.parts = {growth("max |J_ab| (<= ||J||_p for every p)"),
                   equal("zero query: ||J_00 - (W^V)^T [I/n + Sigma(X) A^T]||_F / (1 + ||J_00||_F) = 0"),
                   equal("zero query: max_j ||J_0j - (W^V)^T / n||_F = 0")};
    info_.families = {"scalar", "e1e2", "single_spike"};
    info_.growth_family = "scalar";
    info_.growth_decades = 5;
    info_.notes =
        "Growth family: d = 1, a = 1, W^V = 1, x = (0, s, −s, s, −s), s = 1, 2, 4, …, 1024 (J_11 = 1/5 + "
        "4s²/5). The zero-query block identities are checked at every point (random points have a zero "
        "first row).";
  }
  const ClaimInfo& info() const override { return info_; }
  bool searchable() const override { return false; }
  /// Point: k = {n, d, e}; x = X (n×d, the first token the query), A (d×d), W^V (d×e).
  const Keys keys{"n", "d", "e"};
  static Layout layout(long n, long d, long e) {
    return Layout().add("X", n, d).add("A", d, d).add("WV", d, e);
  }
  Layout layout(const Point& p) const { return layout(keys.of(p, "n"), keys.of(p, "d"), keys.of(p, "e")); }
  Point sample(Rng& rng) const override {
    Point p;
    const long n = rng.integer(2, 6), d = rng.integer(1, 3), e = rng.integer(1, d);
    p.k = {n, d, e};
    const double c = std::pow(10.0, rng.uniform(-1, 1.5));
    const Layout l = layout(n, d, e);
    long i = 0;
    l.fill(p.x, "X", [&] { return i++ < d ? 0.0 : c * rng.normal(); });  // a zero query row
    l.fill(p.x, "A", [&] { return rng.corner(1.0); });
    l.fill(p.x, "WV", [&] { return rng.corner(1.0); });
    return p;
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "scalar") {
      for (double s : doublings(11)) out.push_back(Point{{0, s, -s, s, -s, 1, 1}, {5, 1, 1}});
    } else if (name == "e1e2") {
      // A = e1 e2ᵀ, W^V = e1 (A W^V = 0), rows (0,0), ±c(1,1) twice each: largest entry 0.2 + 0.8 c².
      for (double c : {1.0, 10.0, 100.0})
        out.push_back(Point{{0, 0, c, c, -c, -c, c, c, -c, -c, 0, 1, 0, 0, 1, 0}, {5, 2, 1}});
    } else if (name == "single_spike") {
      for (double c : {3.0, 30.0})
        out.push_back(Point{{0,   0,   0,   c * 0.6, c * -0.8, 0,   0,    0,   0,   0.5, -1.2, 0.7,
                             0.3, 0.9, 0.1, -0.4,    1.1,      0.2, -0.6, 0.8, 0.0, 1.0, 0.5,  -0.3},
                            {3, 3, 2}});
    }
    return out;
  }
  nlohmann::json describe(const Point& p) const override {
    nlohmann::json out = layout(p).describe(p);  // X, A, WV as rows
    out["family"] = p.family;
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const long n = keys.of(pt, "n"), d = keys.of(pt, "d"), e = keys.of(pt, "e");
    const Layout l = layout(pt);
    l.check(pt);
    const Matrix<S> X = l.matrix<S>(pt, "X"), A = l.matrix<S>(pt, "A"), WV = l.matrix<S>(pt, "WV");
    AttentionMap<S> map;
    map.kind = ScoreKind::dot;
    map.heads.push_back({A, Matrix<S>::Identity(d, d), WV, S(1)});
    const Matrix<S> J = map.jacobian(X);
    Evaluation<S> out{grows<S>(max_abs_entry(J)), off<S>(), off<S>()};
    bool zero_query = true;
    for (long a = 0; a < d; ++a) zero_query = zero_query && l.raw(pt, "X", std::size_t(a)) == 0.0;
    if (!zero_query) return out;
    // Σ(X) = (1/n) Σ_k (x_k − x̄)(x_k − x̄)ᵀ.
    const S nn = lift<S>(static_cast<double>(n));
    Vector<S> mean = Vector<S>::Zero(d);
    for (long k = 0; k < n; ++k)
      for (long a = 0; a < d; ++a) mean(a) += X(k, a);
    mean /= nn;
    Matrix<S> sigma = Matrix<S>::Zero(d, d);
    for (long k = 0; k < n; ++k)
      for (long a = 0; a < d; ++a)
        for (long b = 0; b < d; ++b) sigma(a, b) += (X(k, a) - mean(a)) * (X(k, b) - mean(b));
    sigma /= nn;
    Matrix<S> inner = num::mul<S>(sigma, A.transpose());
    for (long a = 0; a < d; ++a) inner(a, a) += S(1) / nn;
    const Matrix<S> J00 = num::mul<S>(WV.transpose(), inner);
    Matrix<S> block = J.block(0, 0, e, d);
    out[1] = eq<S>(relative_defect(J00, block), S(0));
    S off_diag(0);
    for (long j = 1; j < n; ++j) {
      const Matrix<S> Jj = J.block(0, j * d, e, d);
      off_diag = num::smax<S>(off_diag, num::frobenius<S>(Matrix<S>(Jj - WV.transpose() / nn)));
    }
    out[2] = eq<S>(off_diag, S(0));
    return out;
  }

 private:
  ClaimInfo info_;
};

// ---------------------------------------------------------------------------------------------------------
// Scalar (d = 1) L2 variants: point k = {n}, x = (x (n), w_q, w_k, w_v).
// ---------------------------------------------------------------------------------------------------------

enum class Necessity { untied, masked_diagonal };

class L2NecessityScalar final : public ClaimBase<L2NecessityScalar> {
 public:
  explicit L2NecessityScalar(Necessity which) : which_(which) {
    if (which == Necessity::untied) {
      info_.id = "kim.l2_necessity_untied";
      info_.default_samples = 32768;  // fixed count: about a second of search
      info_.statement =
          "Untied L2 attention (W^K != W^Q) is not Lipschitz. Family: d = 1, q = 1, k = 2, values P X, query "
          "x_0 "
          "large, keys at (q/k) x_0 +- s: J_00 ~ 2 q k s^2.";
      info_.latex = "untied L2: $\\sup_X\\|J(X)\\|=\\infty$; $J_{ii}\\approx2qks^2$";
      info_.hypotheses = {"L2 scores -(q x_i - k x_j)^2 with q != k", "values P X"};
      info_.families = {"keys_offset"};
      info_.growth_family = "keys_offset";
      info_.notes =
          "Growth family: x = (L, L/2 + s, L/2 − s) with L = max(50, 10 s) so that the query never attends "
          "to "
          "itself, s = 1, 2, …, 512 (observed reference: J_00 = 100 at s = 5, 1600 at s = 20).";
      info_.parts = {growth("max |J_ab|")};
    } else {
      info_.id = "kim.l2_necessity_masked_diag";
      info_.default_samples = 32768;  // fixed count: about a second of search
      info_.statement =
          "Tied L2 attention with the diagonal masked is not Lipschitz. Family: x = (0, s, -s), row 1 "
          "attends "
          "only to tokens 2 and 3: J_11 = 2 s^2.";
      info_.latex = "masked diagonal: $\\sup_X\\|J(X)\\|=\\infty$; $J_{11}=2s^2$";
      info_.hypotheses = {"tied L2 scores -(x_i - x_j)^2, the diagonal masked", "values P X A (A = 1)"};
      info_.families = {"symmetric"};
      info_.growth_family = "symmetric";
      info_.notes = "Growth family x = (0, s, −s), s = 1, 2, …, 1024; the identity J_11 = 2s² is exact.";
      info_.parts = {growth("max |J_ab|"), equal("x = (0, s, -s): J_00 = 2 s^2")};
    }
    info_.source = "derived";
    info_.expected = Expected::unbounded;
    info_.kind = StatementKind::unbounded;
    info_.growth_decades = 5;
  }
  const ClaimInfo& info() const override { return info_; }
  bool searchable() const override { return false; }
  /// Point: k = {n}; x = the tokens x (n, d = 1), then the scalar weights w_q, w_k, w_v.
  const Keys keys{"n"};
  Layout layout(const Point& p) const {
    return Layout().add("x", keys.of(p, "n")).add("w_q", 1).add("w_k", 1).add("w_v", 1);
  }
  Point sample(Rng& rng) const override {
    Point p;
    const long n = rng.integer(2, 5);
    p.k = {n};
    for (long i = 0; i < n; ++i) p.x.push_back(rng.corner(3.0));
    if (which_ == Necessity::untied) {
      p.x.push_back(rng.uniform(0.5, 2));
      p.x.push_back(rng.uniform(0.5, 2));
    } else {
      const double w = rng.uniform(0.5, 2);
      p.x.push_back(w);
      p.x.push_back(w);
    }
    p.x.push_back(rng.uniform(0.5, 2));
    return p;
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "keys_offset" && which_ == Necessity::untied)
      for (double s : doublings(10)) {
        const double L = std::max(50.0, 10 * s);
        out.push_back(Point{{L, L / 2 + s, L / 2 - s, 1, 2, 1}, {3}});
      }
    if (name == "symmetric" && which_ == Necessity::masked_diagonal)
      for (double s : doublings(11)) out.push_back(Point{{0, s, -s, 1, 1, 1}, {3}});
    return out;
  }
  nlohmann::json describe(const Point& p) const override {
    const Layout l = layout(p);
    const auto x = p.x.begin() + static_cast<std::ptrdiff_t>(l.at("x"));
    return {{"family", p.family},
            {"x", std::vector<double>(x, x + keys.of(p, "n"))},
            {"w_q", l.raw(p, "w_q")},
            {"w_k", l.raw(p, "w_k")},
            {"w_v", l.raw(p, "w_v")}};
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const long n = keys.of(pt, "n");
    if (n < 2) throw InputError("point", "wrong size");
    const Layout l = layout(pt);
    l.check(pt);
    const Matrix<S> X = l.matrix<S>(pt, "x");
    const S wq = l.vector<S>(pt, "w_q")(0), wk = l.vector<S>(pt, "w_k")(0), wv = l.vector<S>(pt, "w_v")(0);
    AttentionMap<S> map;
    map.kind = ScoreKind::l2;
    map.mask = which_ == Necessity::masked_diagonal ? MaskKind::no_diagonal : MaskKind::none;
    // Untied: values P X W^V; tied with masked diagonal: values P X A W^V with A = w_q².
    const S value = which_ == Necessity::untied ? wv : wq * wq * wv;
    map.heads.push_back({Matrix<S>::Constant(1, 1, wq), Matrix<S>::Constant(1, 1, wk),
                         Matrix<S>::Constant(1, 1, value), S(1)});
    const Matrix<S> J = map.jacobian(X);
    if (which_ == Necessity::untied) return {grows<S>(max_abs_entry(J))};
    const auto x = [&](std::size_t i) { return l.raw(pt, "x", i); };
    const bool symmetric =
        n == 3 && x(0) == 0 && x(2) == -x(1) && l.raw(pt, "w_q") == 1 && l.raw(pt, "w_v") == 1;
    return {grows<S>(max_abs_entry(J)), symmetric ? eq<S>(J(0, 0), S(2) * X(1, 0) * X(1, 0)) : off<S>()};
  }

 private:
  Necessity which_;
  ClaimInfo info_;
};

// ---------------------------------------------------------------------------------------------------------
// kim.l2_necessity_rank_value — d = 2, W^Q = e1, values P X (no A). Point: k = {}, x = {C}.
// ---------------------------------------------------------------------------------------------------------

class L2NecessityRankValue final : public ClaimBase<L2NecessityRankValue> {
 public:
  L2NecessityRankValue() {
    info_.id = "kim.l2_necessity_rank_value";
    info_.default_samples = 32768;  // fixed count: about a second of search
    info_.statement =
        "Tied L2 scores with values P X W^V (no A_h) and rank W^Q < d are not Lipschitz. Family: d = 2, W^Q "
        "= "
        "e1, W^V = I, rows (0,0), (1,C), (-1,-C): ||J||_2 ~ 1.23 C.";
    info_.latex =
        "values $PXW^V$, $\\mathrm{rank}\\,W^Q<d$: $\\sup_X\\|J(X)\\|_2=\\infty$, "
        "$\\|J\\|_2\\approx1.23\\,C$";
    info_.source = "derived";
    info_.hypotheses = {"tied L2 scores with W^Q = e1 (rank 1 < d = 2)", "values P X (W^V = I)"};
    info_.expected = Expected::unbounded;
    info_.kind = StatementKind::unbounded;
    info_.parts = {growth("||J||_2")};
    info_.families = {"offset_rows"};
    info_.growth_family = "offset_rows";
    info_.growth_decades = 3;
    info_.evaluated_at =
        "||J||_2: the certified lower end of its enclosure, ||J v||/||v|| in interval arithmetic at the "
        "double "
        "power vector v (lifted exactly; valid for every v), is what must pass the thresholds.";
    info_.notes =
        "Growth family C = 1, 2, …, 4096; ‖J‖₂ certified from below by a witness vector (observed "
        "reference: 1.98, 12.4, 122.6 at C = 1, 10, 100).";
  }
  const ClaimInfo& info() const override { return info_; }
  bool searchable() const override { return false; }
  Point sample(Rng& rng) const override { return Point{{std::pow(10.0, rng.uniform(-1, 2))}, {}}; }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "offset_rows")
      for (double c : doublings(13)) out.push_back(Point{{c}, {}});
    return out;
  }
  /// One continuous coordinate, the offset C of the rows.
  static Layout layout() { return Layout().add("C", 1); }
  nlohmann::json describe(const Point& p) const override {
    return {{"family", p.family}, {"C", layout().raw(p, "C")}};
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const Layout l = layout();
    l.check(pt);
    const S c = lift<S>(l.raw(pt, "C"));
    Matrix<S> X(3, 2);
    X << S(0), S(0), S(1), c, S(-1), S(-c);
    Matrix<S> wq = Matrix<S>::Zero(2, 1);
    wq(0, 0) = S(1);
    AttentionMap<S> map;
    map.kind = ScoreKind::l2;
    map.heads.push_back({wq, wq, Matrix<S>::Identity(2, 2), S(1)});
    return {grows<S>(num::norm_2(map.jacobian(X)))};
  }

 private:
  ClaimInfo info_;
};

}  // namespace

REGATTA_REGISTER_CLAIM(DotUnbounded);
REGATTA_REGISTER_CLAIM(L2NecessityScalar, Necessity::untied);
REGATTA_REGISTER_CLAIM(L2NecessityScalar, Necessity::masked_diagonal);
REGATTA_REGISTER_CLAIM(L2NecessityRankValue);

}  // namespace regatta::proofs::claims
