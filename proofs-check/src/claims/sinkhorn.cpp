// Sinkhorn attention claims (docs/math/attention.md#sinkhorn-attention): sinkhorn.softmax_first_step and
// sinkhorn.doubly_stochastic. The iteration is the materialised log-domain form, rows first:
//   f_i ← −LSE_j(S_ij + M_ij + g_j),  g_j ← −LSE_i(S_ij + M_ij + f_i),  log K_ij = S_ij + M_ij + f_i + g_j.
#include <cmath>

#include "common.hpp"
#include "layout.hpp"

namespace regatta::proofs::claims {

namespace {

/// Point: k = {n, causal}; x = S (n×n) [then claim-specific extras].
template <class S>
struct LogSinkhorn {
  Matrix<S> scores;
  bool causal;
  std::vector<S> f, g;

  bool visible(long i, long j) const { return !causal || j <= i; }
  long n() const { return scores.rows(); }

  void row_step() {
    for (long i = 0; i < n(); ++i) {
      std::vector<S> t;
      for (long j = 0; j < n(); ++j)
        if (visible(i, j)) t.push_back(scores(i, j) + g[j]);
      f[i] = -num::log_sum_exp(t);
    }
  }
  void column_step() {
    for (long j = 0; j < n(); ++j) {
      std::vector<S> t;
      for (long i = 0; i < n(); ++i)
        if (visible(i, j)) t.push_back(scores(i, j) + f[i]);
      g[j] = -num::log_sum_exp(t);
    }
  }
  Matrix<S> kernel() const {
    using std::exp;
    Matrix<S> K = Matrix<S>::Zero(n(), n());
    for (long i = 0; i < n(); ++i)
      for (long j = 0; j < n(); ++j)
        if (visible(i, j)) K(i, j) = exp(scores(i, j) + f[i] + g[j]);
    return K;
  }
  /// Σ_j |Σ_i K_ij − 1|.
  S column_error() const {
    const Matrix<S> K = kernel();
    S e(0);
    for (long j = 0; j < n(); ++j) {
      S c(0);
      for (long i = 0; i < n(); ++i) c += K(i, j);
      e += num::sabs<S>(c - S(1));
    }
    return e;
  }
};

template <class S>
LogSinkhorn<S> start(const Matrix<S>& scores, bool causal) {
  const auto n = static_cast<std::size_t>(scores.rows());
  return LogSinkhorn<S>{scores, causal, std::vector<S>(n, S(0)), std::vector<S>(n, S(0))};
}

/// Point: k = {n, causal}; x = the n×n scores S, then (claims with a perturbation) δ_raw in [−1, 1].
const Keys score_keys{"n", "causal"};
Layout score_layout(long n, bool with_delta) {
  Layout l;
  l.add("S", n, n);
  if (with_delta) l.add("delta_raw", 1);
  return l;
}

Point sample_scores(Rng& rng, bool with_delta) {
  Point p;
  const long n = rng.coin(0.2) ? 1 : rng.integer(2, 6);
  p.k = {n, 0};
  const double scale = rng.coin(0.25) ? 30.0 : 2.0;
  const Layout l = score_layout(n, with_delta);
  l.fill(p.x, "S", [&] { return rng.corner(scale / 10) + (rng.coin(0.1) ? scale : 0.0); });
  if (with_delta) l.fill(p.x, "delta_raw", [&] { return rng.uniform(-1, 1); });
  return p;
}

class SoftmaxFirstStep final : public ClaimBase<SoftmaxFirstStep> {
 public:
  SoftmaxFirstStep() {
    info_.id = "sinkhorn.softmax_first_step";
    info_.statement = "K^(1) = softmax_row(S + M) exactly, for any S and mask.";
    info_.latex = "$K^{(1)}=\\mathrm{softmax}_{\\rm row}(S+M)$";
    info_.source = "published (authors' code)";
    info_.hypotheses = {"any finite scores S; no mask or the causal mask"};
    info_.expected = Expected::identity;
    info_.kind = StatementKind::identity;
    info_.parts = {equal("max_ij |K^(1)_ij - softmax_row(S + M)_ij| = 0")};
    info_.families = {"large_logits"};
    info_.notes =
        "K^(1) from one row half-step of the log-domain iteration (g = 0) against the shifted softmax of "
        "each "
        "row.";
  }
  const ClaimInfo& info() const override { return info_; }
  bool searchable() const override { return false; }
  Point sample(Rng& rng) const override {
    Point p = sample_scores(rng, false);
    p.k[score_keys.index("causal")] = rng.coin(0.5) ? 1 : 0;
    return p;
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "large_logits")
      for (long causal : {0L, 1L}) out.push_back(Point{{800, -800, 3, 0, 750, 750, -1e3, 2, 0}, {3, causal}});
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const long n = score_keys.of(pt, "n");
    const Layout l = score_layout(n, false);
    l.check(pt);
    LogSinkhorn<S> it = start(l.matrix<S>(pt, "S"), score_keys.of(pt, "causal") != 0);
    it.row_step();
    const Matrix<S> K = it.kernel();
    S err(0);
    for (long i = 0; i < n; ++i) {
      std::vector<S> s(static_cast<std::size_t>(n));
      std::vector<bool> vis(static_cast<std::size_t>(n));
      for (long j = 0; j < n; ++j) {
        s[j] = it.scores(i, j);
        vis[j] = it.visible(i, j);
      }
      const std::vector<S> p = num::softmax(s, vis);
      for (long j = 0; j < n; ++j) err = num::smax<S>(err, num::sabs<S>(K(i, j) - p[j]));
    }
    return {eq<S>(err, S(0))};
  }

 private:
  ClaimInfo info_;
};

/// Column error below which the iteration stops (the double run fixes the iteration count for every type).
constexpr double convergence_target = 1e-13;
constexpr int max_sinkhorn_iterations = 20000;
/// The claim's convergence check: L1 column error of K^(t) after those iterations.
constexpr double converged_error = 1e-11;

class DoublyStochastic final : public ClaimBase<DoublyStochastic> {
 public:
  DoublyStochastic() {
    info_.id = "sinkhorn.doubly_stochastic";
    info_.statement =
        "Without a mask, the row and column sums of K^(t) converge to 1, and K^(inf)/n minimises <Pi, -S> + "
        "sum Pi log Pi over couplings with both marginals 1/n.";
    info_.latex =
        "$K^{(t)}\\to K^{(\\infty)}$ doubly stochastic; "
        "$K^{(\\infty)}/n=\\arg\\min_{\\Pi}\\langle\\Pi,-S\\rangle+"
        "\\sum\\Pi\\log\\Pi$";
    info_.source = "published (Sinkhorn limit); derived";
    info_.hypotheses = {"finite scores S, no mask"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {
        at_most("L1 column error of K^(t) <= 1e-11 after the iterations the double run needs for 1e-13"),
        at_most("objective(K/n) <= objective(K/n + delta (E_00 - E_01 - E_10 + E_11)) (marginals kept)")};
    info_.families = {"large_logits"};
    info_.notes =
        "The iteration count is fixed by a double run (column error ≤ 1e-13, at most 20000 iterations) and "
        "then repeated in each scalar type. The minimality part perturbs Π = K/n inside the set of matrices "
        "with Π's own marginals; every matrix exp(S + f 1ᵀ + 1 gᵀ) minimises the objective for its own "
        "marginals, so the part is exact at any iteration. The causal limit K^(t) → I is not evaluated.";
    info_.evaluated_at =
        "The sides are evaluated at the iterate K^(t), t fixed by a double run; the t iterations are "
        "repeated in the scalar type, so for interval they enclose the exact-real iterate K^(t) of the "
        "point's scores (its column error and objectives, not those of the limit).";
  }
  const ClaimInfo& info() const override { return info_; }
  bool searchable() const override { return false; }
  Point sample(Rng& rng) const override { return sample_scores(rng, true); }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "large_logits") out.push_back(Point{{40, 0, 1, 0, 40, 2, 1, -3, 40, 0.5}, {3, 0}});
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    using std::log;
    const long n = score_keys.of(pt, "n");
    const Layout l = score_layout(n, true);
    l.check(pt);
    // Iteration count from the double run.
    int iterations = 0;
    {
      LogSinkhorn<double> d = start(l.matrix<double>(pt, "S"), false);
      for (; iterations < max_sinkhorn_iterations; ++iterations) {  // after `iterations` (row, column) pairs
        d.row_step();
        if (d.column_error() <= convergence_target) break;
        d.column_step();
      }
      if (iterations == max_sinkhorn_iterations) throw InputError("point", "Sinkhorn did not converge");
    }
    LogSinkhorn<S> it = start(l.matrix<S>(pt, "S"), false);
    const S delta_raw = l.vector<S>(pt, "delta_raw")(0);
    for (int t = 0; t < iterations; ++t) {
      it.row_step();
      it.column_step();
    }
    it.row_step();
    const S col = it.column_error();
    if (n < 2) return {le<S>(col, lift<S>(converged_error)), off<S>()};
    const S nn = lift<S>(static_cast<double>(n));
    const Matrix<S> Pi = it.kernel() / nn;
    auto objective = [&](const Matrix<S>& P) {
      S o(0);
      for (long i = 0; i < n; ++i)
        for (long j = 0; j < n; ++j) o += -P(i, j) * it.scores(i, j) + P(i, j) * log(P(i, j));
      return o;
    };
    S smallest = Pi(0, 0);
    for (long i = 0; i < 2; ++i)
      for (long j = 0; j < 2; ++j) smallest = num::smin<S>(smallest, Pi(i, j));
    const S delta = delta_raw * smallest / S(2);  // |δ| < min Π_ij/2 keeps every entry positive
    Matrix<S> Pert = Pi;
    Pert(0, 0) += delta;
    Pert(0, 1) -= delta;
    Pert(1, 0) -= delta;
    Pert(1, 1) += delta;
    return {le<S>(col, lift<S>(converged_error)), le<S>(objective(Pi), objective(Pert))};
  }

 private:
  ClaimInfo info_;
};

}  // namespace

REGATTA_REGISTER_CLAIM(SoftmaxFirstStep);
REGATTA_REGISTER_CLAIM(DoublyStochastic);

}  // namespace regatta::proofs::claims
