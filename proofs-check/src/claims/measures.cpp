// Measure-level attention claims (docs/math/attention.md#measures, docs/math/bounds.md#mean-field):
// mf.empirical_exact,
// mf.causal_lift, mf.max_entropy, mf.query_lipschitz. The measure form Γ_μ(x) = V Σ_j softmax_j(xᵀA y_j +
// log w_j) y_j is evaluated here from its definition, generic over the scalar type, and compared with the
// token form of detail::AttentionMap.
#include <cmath>

#include <regatta/proofs/detail/attention_map.hpp>
#include "common.hpp"
#include "layout.hpp"

namespace regatta::proofs::claims {

namespace {

using detail::AttentionMap;
using detail::MaskKind;
using detail::ScoreKind;

/// Γ_μ(x) = V Σ_j p_j y_j, p = softmax_j(xᵀ A y_j + log w_j) over the atoms with visible[j] (all when
/// empty) and positive weight (a zero weight is an atom without mass: its log-weight is −∞).
template <class S>
Vector<S> gamma(const Vector<S>& x, const Matrix<S>& Y, const std::vector<S>& w, const Matrix<S>& A,
                const Matrix<S>& V, const std::vector<bool>& visible = {}) {
  using std::log;
  const long m = Y.rows(), d = Y.cols();
  std::vector<S> s(static_cast<std::size_t>(m), S(0));
  std::vector<bool> shown(static_cast<std::size_t>(m), true);
  const Vector<S> Ax = num::mul<S>(A.transpose(), Matrix<S>(x)).col(0);  // Aᵀx, so xᵀAy = (Aᵀx)ᵀy
  for (long j = 0; j < m; ++j) {
    shown[j] = (visible.empty() || visible[j]) && !num::is_zero(w[j]);
    if (!shown[j]) continue;
    S v(0);
    for (long a = 0; a < d; ++a) v += Ax(a) * Y(j, a);
    s[j] = v + log(w[j]);
  }
  const std::vector<S> p = num::softmax(s, shown);
  Vector<S> mean = Vector<S>::Zero(d);
  for (long j = 0; j < m; ++j)
    if (shown[j])
      for (long a = 0; a < d; ++a) mean(a) += p[j] * Y(j, a);
  return num::mul<S>(V, Matrix<S>(mean)).col(0);
}

/// A block of a point as a list of scalars (exact lifts to S).
template <class S>
std::vector<S> entries(const Layout& l, const Point& p, std::string_view name) {
  const Vector<S> v = l.vector<S>(p, name);
  return std::vector<S>(v.data(), v.data() + v.size());
}

// ---------------------------------------------------------------------------------------------------------
// mf.empirical_exact — point: k = {n, m, d, H}; x = (X (n×d), Y (m×d), (A_h, V_h) per head (d×d each),
// z (d): an extra atom given weight 0)
// ---------------------------------------------------------------------------------------------------------

class EmpiricalExact final : public ClaimBase<EmpiricalExact> {
 public:
  EmpiricalExact() {
    info_.id = "mf.empirical_exact";
    info_.statement =
        "Gamma_{mu_X}(x_i) = f_i(X) (multi-head, repeated tokens counted with multiplicity); weighted "
        "measures "
        "add log w_j to the logits; merging equal atoms or adding zero-weight atoms changes nothing; "
        "CA(mu_X, mu_Y) = mu_{CA(X, Y)}.";
    info_.latex =
        "$\\Gamma_{\\mu_X}(x_i)=f_i(X)$, $F(\\mu_X)=\\mu_{f(X)}$; merging equal atoms and zero-weight atoms "
        "change nothing; $\\mathrm{CA}(\\mu_X,\\mu_Y)=\\mu_{\\mathrm{CA}(X,Y)}$";
    info_.source = "derived";
    info_.hypotheses = {"dot-product scores x^T A_h y, values V_h y, no biases"};
    info_.expected = Expected::identity;
    info_.kind = StatementKind::identity;
    info_.parts = {equal("max_i ||Gamma_{mu_X}(x_i) - f_i(X)|| / (1 + ||f_i||) = 0 (weights 1/n)"),
                   equal("max_i ||Gamma_{merged mu_X}(x_i) - Gamma_{mu_X}(x_i)|| (equal atoms merged) = 0"),
                   equal("max_i ||Gamma_{mu_X + 0 delta_z}(x_i) - Gamma_{mu_X}(x_i)|| = 0"),
                   equal("max_i ||Gamma_{mu_Y}(x_i) - CA(X, Y)_i|| / (1 + ||CA_i||) = 0")};
    info_.families = {"repeated_tokens", "extreme_scores"};
    info_.notes =
        "The token form is detail::AttentionMap (row-wise softmax of X A_h Xᵀ); the measure form sums over "
        "atoms with log-weights. Duplicate rows of X are merged by exact comparison of their doubles.";
  }
  const ClaimInfo& info() const override { return info_; }
  bool searchable() const override { return false; }
  const Keys keys{"n", "m", "d", "H"};
  static Layout layout(long n, long m, long d, long H) {
    Layout l;
    l.add("X", n, d).add("Y", m, d);
    for (long h = 0; h < H; ++h) l.add(indexed("A", h), d, d).add(indexed("V", h), d, d);
    return l.add("z", d);
  }
  Layout layout(const Point& p) const {
    return layout(keys.of(p, "n"), keys.of(p, "m"), keys.of(p, "d"), keys.of(p, "H"));
  }
  Point sample(Rng& rng) const override {
    Point p;
    const long n = rng.integer(1, 6), m = rng.integer(1, 5), d = rng.integer(1, 3), H = rng.integer(1, 2);
    p.k = {n, m, d, H};
    const Layout l = layout(n, m, d, H);
    const double xs = std::pow(10.0, rng.uniform(-1, 1));
    l.fill(p.x, "X", [&] { return rng.corner(xs); });
    if (n >= 2 && rng.coin(0.5))  // x_2 = x_1
      for (std::size_t a = 0; a < static_cast<std::size_t>(d); ++a)
        p.x[l.at("X") + static_cast<std::size_t>(d) + a] = p.x[l.at("X") + a];
    l.fill(p.x, "Y", [&] { return rng.corner(xs); });
    const auto normal = [&] { return rng.normal(); };
    for (long h = 0; h < H; ++h) {
      l.fill(p.x, indexed("A", h), normal);
      l.fill(p.x, indexed("V", h), normal);
    }
    l.fill(p.x, "z", normal);
    return p;
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "repeated_tokens") {
      Point p;
      p.k = {4, 2, 2, 1};
      p.x = {1,   0,   1,    0, 1,   0, -0.5, 2,    // X: three equal rows
             0.3, 0.3, -1,   2,                     // Y
             1,   0.5, -0.5, 2, 0.7, 0, 0.2,  1.3,  // A, V
             5,   5};                               // z
      out.push_back(p);
    } else if (name == "extreme_scores") {
      Point p;
      p.k = {3, 3, 1, 2};
      p.x = {30, -30, 0.5, 40, -40, 1, 2, 1, -3, 0.5, 100};
      out.push_back(p);
    }
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const long n = keys.of(pt, "n"), m = keys.of(pt, "m"), d = keys.of(pt, "d"), H = keys.of(pt, "H");
    const Layout l = layout(pt);
    l.check(pt);
    const Matrix<S> X = l.matrix<S>(pt, "X"), Y = l.matrix<S>(pt, "Y");
    const Matrix<double> X_raw = l.matrix<double>(pt, "X");  // the point's doubles, for exact comparison
    std::vector<Matrix<S>> A, V;
    for (long h = 0; h < H; ++h) {
      A.push_back(l.matrix<S>(pt, indexed("A", h)));
      V.push_back(l.matrix<S>(pt, indexed("V", h)));
    }
    const Vector<S> z = l.vector<S>(pt, "z");
    // Token forms: self- and cross-attention with values y ↦ V_h y, i.e. row maps Wval_h = V_hᵀ.
    AttentionMap<S> map;
    map.kind = ScoreKind::dot;
    for (long h = 0; h < H; ++h)
      map.heads.push_back({A[h], Matrix<S>::Identity(d, d), V[h].transpose(), S(1)});
    const Matrix<S> f = map.forward(X);
    // Cross-attention on tokens: the same map with keys and values from Y (rows of X first, then Y, the
    // queries of X attending only to the rows of Y).
    const std::vector<S> uniform_n(static_cast<std::size_t>(n), S(1) / lift<S>(static_cast<double>(n)));
    const std::vector<S> uniform_m(static_cast<std::size_t>(m), S(1) / lift<S>(static_cast<double>(m)));
    // Merged measure: unique rows of X with summed weights (exact comparison of the point's doubles).
    std::vector<long> first_of(static_cast<std::size_t>(n));
    Matrix<S> U(0, d);
    std::vector<S> uw;
    for (long i = 0; i < n; ++i) {
      long found = -1;
      for (long k = 0; k < i && found < 0; ++k) {
        bool same = true;
        for (long a = 0; a < d; ++a) same = same && X_raw(i, a) == X_raw(k, a);
        if (same) found = first_of[k];
      }
      if (found < 0) {
        U.conservativeResize(U.rows() + 1, d);
        U.row(U.rows() - 1) = X.row(i);
        uw.push_back(S(0));
        found = U.rows() - 1;
      }
      first_of[i] = found;
      uw[found] += S(1) / lift<S>(static_cast<double>(n));
    }
    Matrix<S> Xz(n + 1, d);
    Xz.topRows(n) = X;
    Xz.row(n) = z.transpose();
    std::vector<S> wz = uniform_n;
    wz.push_back(S(0));
    S e_self(0), e_merge(0), e_zero(0), e_cross(0);
    for (long i = 0; i < n; ++i) {
      const Vector<S> xi = X.row(i).transpose();
      Vector<S> g = Vector<S>::Zero(d), gm = Vector<S>::Zero(d), gz = Vector<S>::Zero(d),
                gc = Vector<S>::Zero(d), fc = Vector<S>::Zero(d);
      for (long h = 0; h < H; ++h) {
        g += gamma(xi, X, uniform_n, A[h], V[h]);
        gm += gamma(xi, U, uw, A[h], V[h]);
        gz += gamma(xi, Xz, wz, A[h], V[h]);
        gc += gamma(xi, Y, uniform_m, A[h], V[h]);
        // Token cross-attention of query i: softmax over the rows of Y of x_iᵀA_h y_j, values V_h y_j.
        std::vector<S> s(static_cast<std::size_t>(m));
        for (long j = 0; j < m; ++j) {
          S v(0);
          for (long a = 0; a < d; ++a)
            for (long b = 0; b < d; ++b) v += X(i, a) * A[h](a, b) * Y(j, b);
          s[j] = v;
        }
        const std::vector<S> p = num::softmax(s);
        for (long j = 0; j < m; ++j)
          for (long a = 0; a < d; ++a)
            for (long b = 0; b < d; ++b) fc(a) += p[j] * V[h](a, b) * Y(j, b);
      }
      const Vector<S> fi = f.row(i).transpose();
      e_self = num::smax<S>(e_self, relative_defect(g, fi));
      e_merge = num::smax<S>(e_merge, relative_defect(gm, g));
      e_zero = num::smax<S>(e_zero, relative_defect(gz, g));
      e_cross = num::smax<S>(e_cross, relative_defect(gc, fc));
    }
    return {eq<S>(e_self, S(0)), eq<S>(e_merge, S(0)), eq<S>(e_zero, S(0)), eq<S>(e_cross, S(0))};
  }

 private:
  ClaimInfo info_;
};

// ---------------------------------------------------------------------------------------------------------
// mf.causal_lift — point: k = {n, d}; x = (X (n×d), A (d×d), V (d×d))
// ---------------------------------------------------------------------------------------------------------

class CausalLift final : public ClaimBase<CausalLift> {
 public:
  CausalLift() {
    info_.id = "mf.causal_lift";
    info_.statement =
        "For the lifted measure mu_X = (1/n) sum_i delta_(x_i, i/n): Gamma_{mu_X}(x_i, i/n) (keys with time "
        "t <= "
        "s) equals causal attention of token i.";
    info_.latex = "$\\Gamma_{\\mu_X}(x_i,i/n)=$ causal attention of token $i$";
    info_.source = "derived";
    info_.hypotheses = {"dot-product scores x^T A y, values V y, causal mask keeping the diagonal"};
    info_.expected = Expected::identity;
    info_.kind = StatementKind::identity;
    info_.parts = {equal("max_i ||Gamma_{mu_X}(x_i, i/n) - causal f_i(X)|| / (1 + ||f_i||) = 0")};
    info_.families = {"repeated_tokens"};
    info_.notes =
        "Visibility in the measure form is decided by comparing the times j/n ≤ i/n of the lifted atoms (in "
        "the "
        "scalar type), in the token form by the index mask j ≤ i. The companion statement W_{c,2}² = ‖X − "
        "Y‖²_F/n "
        "is the definition of the time-preserving distance for sequences of equal length and is not "
        "evaluated.";
  }
  const ClaimInfo& info() const override { return info_; }
  bool searchable() const override { return false; }
  const Keys keys{"n", "d"};
  static Layout layout(long n, long d) { return Layout().add("X", n, d).add("A", d, d).add("V", d, d); }
  Layout layout(const Point& p) const { return layout(keys.of(p, "n"), keys.of(p, "d")); }
  Point sample(Rng& rng) const override {
    Point p;
    const long n = rng.integer(1, 7), d = rng.integer(1, 3);
    p.k = {n, d};
    const Layout l = layout(n, d);
    l.fill(p.x, "X", [&] { return rng.corner(1.0); });
    l.fill(p.x, "A", [&] { return rng.normal(); });
    l.fill(p.x, "V", [&] { return rng.normal(); });
    return p;
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "repeated_tokens") {
      // Three equal tokens among five, one far out; A = 0.5, V = 1 (d = 1). Built through the layout: the
      // literal this replaces carried three stray coordinates, so the point was refused as the wrong size.
      Point p;
      p.k = {5, 1};
      const Layout l = layout(5, 1);
      l.fill(p.x, "X", std::vector<double>{1, 1, 1, -2, 30});
      l.fill(p.x, "A", std::vector<double>{0.5});
      l.fill(p.x, "V", std::vector<double>{1});
      out.push_back(p);
    }
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const long n = keys.of(pt, "n"), d = keys.of(pt, "d");
    const Layout l = layout(pt);
    l.check(pt);
    const Matrix<S> X = l.matrix<S>(pt, "X"), A = l.matrix<S>(pt, "A"), V = l.matrix<S>(pt, "V");
    AttentionMap<S> map;
    map.kind = ScoreKind::dot;
    map.mask = MaskKind::causal;
    map.heads.push_back({A, Matrix<S>::Identity(d, d), V.transpose(), S(1)});
    const Matrix<S> f = map.forward(X);
    const std::vector<S> w(static_cast<std::size_t>(n), S(1) / lift<S>(static_cast<double>(n)));
    const S nn = lift<S>(static_cast<double>(n));
    S err(0);
    for (long i = 0; i < n; ++i) {
      std::vector<bool> visible(static_cast<std::size_t>(n));
      const S s = lift<S>(static_cast<double>(i + 1)) / nn;
      for (long j = 0; j < n; ++j) {
        const S t = lift<S>(static_cast<double>(j + 1)) / nn;
        visible[j] = scalar_traits<S>::to_double(t) <= scalar_traits<S>::to_double(s);
      }
      const Vector<S> g = gamma(Vector<S>(X.row(i).transpose()), X, w, A, V, visible);
      err = num::smax<S>(err, relative_defect(g, Vector<S>(f.row(i).transpose())));
    }
    return {eq<S>(err, S(0))};
  }

 private:
  ClaimInfo info_;
};

// ---------------------------------------------------------------------------------------------------------
// mf.max_entropy — point: k = {m}; x = (s (m), log-weights (m), perturbation (m), size of the perturbation)
// ---------------------------------------------------------------------------------------------------------

class MaxEntropy final : public ClaimBase<MaxEntropy> {
 public:
  MaxEntropy() {
    info_.id = "mf.max_entropy";
    info_.statement =
        "log Z = max over the simplex of sum_j p_j s_j - KL(p || w), attained only at p = softmax(s + log "
        "w); "
        "for every pi: sum_j pi_j s_j - KL(pi || w) = log Z - KL(pi || K).";
    info_.latex =
        "$\\log Z_\\mu(x)=\\max_{p\\in\\Delta}\\{\\sum_jp_jk(x,y_j)-\\mathrm{KL}(p\\|w)\\}$; "
        "$\\int k\\,d\\pi-\\mathrm{KL}(\\pi\\|\\mu)=\\log Z-\\mathrm{KL}(\\pi\\|K_\\mu)$";
    info_.source = "derived";
    info_.hypotheses = {"finite scores s_j, weights w_j > 0 summing to 1"};
    info_.expected = Expected::identity;
    info_.kind = StatementKind::identity;
    info_.parts = {equal("objective at p = K equals log Z"),
                   equal("objective at pi equals log Z - KL(pi || K)"),
                   at_most("objective at a perturbed pi <= log Z  (as (objective - log Z) + 1 <= 1)")};
    info_.families = {"near_kernel"};
    info_.notes =
        "w = softmax(log-weights) (an exact probability vector in every scalar type: interval encloses it), "
        "π = K perturbed multiplicatively and renormalised.";
  }
  const ClaimInfo& info() const override { return info_; }
  // Scores s, log-weights, the perturbation's direction and its size.
  const Keys keys{"m"};
  static Layout layout(long m) { return Layout().add("s", m).add("log_w", m).add("noise", m).add("size", 1); }
  Layout layout(const Point& p) const { return layout(keys.of(p, "m")); }
  Point sample(Rng& rng) const override {
    Point p;
    const long m = rng.integer(1, 8);
    p.k = {m};
    const Layout l = layout(m);
    const double scale = rng.coin(0.2) ? 30.0 : 2.0;
    l.fill(p.x, "s", [&] { return rng.corner(scale); });
    l.fill(p.x, "log_w", [&] { return rng.corner(3.0); });
    l.fill(p.x, "noise", [&] { return rng.normal(); });
    l.fill(p.x, "size", [&] { return std::pow(10.0, rng.uniform(-8, 0.5)); });
    return p;
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "near_kernel")
      for (double t : {1e-6, 1e-3}) out.push_back(Point{{0.5, -1, 2, 0, 0.3, -2, 1, -1, 0.5, t}, {3}});
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    using std::exp;
    using std::log;
    const long m = keys.of(pt, "m");
    const Layout l = layout(pt);
    l.check(pt);
    const std::vector<S> s = entries<S>(l, pt, "s"), lw = entries<S>(l, pt, "log_w"),
                         noise = entries<S>(l, pt, "noise");
    const S size = lift<S>(l.raw(pt, "size"));
    const std::vector<S> w = num::softmax(lw);
    std::vector<S> t(static_cast<std::size_t>(m));
    for (long j = 0; j < m; ++j) t[j] = s[j] + log(w[j]);
    const S logZ = num::log_sum_exp(t);
    const std::vector<S> K = num::softmax(t);
    std::vector<S> pi(static_cast<std::size_t>(m));
    S total(0);
    for (long j = 0; j < m; ++j) {
      pi[j] = K[j] * exp(size * noise[j]);
      total += pi[j];
    }
    for (auto& v : pi) v /= total;
    auto objective = [&](const std::vector<S>& p) {
      S o(0);
      for (long j = 0; j < m; ++j) o += p[j] * s[j] - p[j] * log(p[j] / w[j]);
      return o;
    };
    S kl(0);
    for (long j = 0; j < m; ++j) kl += pi[j] * log(pi[j] / K[j]);
    const S obj_pi = objective(pi);
    return {eq<S>(objective(K), logZ), eq<S>(obj_pi, logZ - kl), le_shifted<S>(obj_pi, logZ)};
  }

 private:
  ClaimInfo info_;
};

// ---------------------------------------------------------------------------------------------------------
// mf.query_lipschitz — point: k = {m, d}; x = (x (d), x' (d), Y (m×d), log-weights (m), A (d×d), V (d×d))
// ---------------------------------------------------------------------------------------------------------

class QueryLipschitz final : public ClaimBase<QueryLipschitz> {
 public:
  QueryLipschitz() {
    info_.id = "mf.query_lipschitz";
    info_.statement =
        "For mu in P(B_R) and any x, x': ||Gamma_mu(x) - Gamma_mu(x')|| <= ||V|| ||A|| R^2 ||x - x'||; D_x "
        "Gamma_mu = V Cov_{K_mu(x, .)}(Y) A^T.";
    info_.latex =
        "$\\|\\Gamma_\\mu(x)-\\Gamma_\\mu(x')\\|\\le\\|V\\|\\|A\\|R^2\\|x-x'\\|$; "
        "$D_x\\Gamma_\\mu=V\\,\\mathrm{Cov}\\,A^\\top$";
    info_.source = "derived";
    info_.hypotheses = {"context mu supported in B_R (R = the largest atom norm)",
                        "single head, queries unbounded"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    Part fd =
        equal("||D_x Gamma (central differences, h = 2^(-p/3)) - V Cov A^T||_F / (1 + ||V Cov A^T||_F) = 0");
    fd.precision_exponent = 2.0 / 3.0;
    fd.exact = false;
    fd.slack_bits = 48;  // the third derivative of Γ (up to ~1e14 for the sampled scores) multiplies h²
    info_.parts = {at_most("||Gamma(x) - Gamma(x')|| <= ||V|| ||A|| R^2 ||x - x'||"), fd};
    info_.families = {"two_atoms"};
    info_.notes =
        "Family (tight): d = 1, μ = ½(δ_R + δ_−R), x = 0, x′ small: the derivative is exactly |V| a R². The "
        "derivative identity is compared with central differences whose step shrinks with the precision, so "
        "its error scales like 2^(−2p/3) and it carries no interval certificate.";
  }
  const ClaimInfo& info() const override { return info_; }
  // Queries x, x'; the context's atoms Y and log-weights; A and V.
  const Keys keys{"m", "d"};
  static Layout layout(long m, long d) {
    return Layout()
        .add("x", d)
        .add("x_prime", d)
        .add("Y", m, d)
        .add("log_w", m)
        .add("A", d, d)
        .add("V", d, d);
  }
  Layout layout(const Point& p) const { return layout(keys.of(p, "m"), keys.of(p, "d")); }
  Point sample(Rng& rng) const override {
    Point p;
    const long m = rng.integer(1, 5), d = rng.integer(1, 3);
    p.k = {m, d};
    const Layout l = layout(m, d);
    l.fill(p.x, "x", [&] { return rng.corner(2.0); });
    std::size_t a = 0;  // x'_a: half the time a small move of x_a
    l.fill(p.x, "x_prime", [&] {
      const double xa = p.x[l.at("x") + a++];
      return rng.coin(0.5) ? xa + std::pow(10.0, -rng.integer(1, 7)) * rng.normal() : rng.corner(2.0);
    });
    l.fill(p.x, "Y", [&] { return rng.corner(1.5); });
    l.fill(p.x, "log_w", [&] { return rng.corner(2.0); });
    l.fill(p.x, "A", [&] { return rng.normal(); });
    l.fill(p.x, "V", [&] { return rng.normal(); });
    return p;
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "two_atoms")
      for (double dx : {1e-2, 1e-5}) out.push_back(Point{{0, dx, 1.5, -1.5, 0, 0, 1, 1}, {2, 1}});
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const long m = keys.of(pt, "m"), d = keys.of(pt, "d");
    const Layout l = layout(pt);
    l.check(pt);
    const Vector<S> x = l.vector<S>(pt, "x"), x2 = l.vector<S>(pt, "x_prime");
    const Matrix<S> Y = l.matrix<S>(pt, "Y");
    const std::vector<S> w = num::softmax(entries<S>(l, pt, "log_w"));
    const Matrix<S> A = l.matrix<S>(pt, "A"), V = l.matrix<S>(pt, "V");
    S R(0);
    for (long j = 0; j < m; ++j) R = num::smax<S>(R, num::euclidean_norm<S>(Y.row(j)));
    const S lhs = num::euclidean_norm<S>(Vector<S>(gamma(x, Y, w, A, V) - gamma(x2, Y, w, A, V)));
    const S rhs = num::norm_2(V) * num::norm_2(A) * R * R * num::euclidean_norm<S>(Vector<S>(x - x2));
    // D_xΓ = V Cov Aᵀ against central differences with h = 2^(−p/3).
    using std::log;
    std::vector<S> s(static_cast<std::size_t>(m));
    const Vector<S> Ax = num::mul<S>(A.transpose(), Matrix<S>(x)).col(0);
    for (long j = 0; j < m; ++j) {
      S v(0);
      for (long a = 0; a < d; ++a) v += Ax(a) * Y(j, a);
      s[j] = v + log(w[j]);
    }
    const std::vector<S> p = num::softmax(s);
    Vector<S> mean = Vector<S>::Zero(d);
    for (long j = 0; j < m; ++j)
      for (long a = 0; a < d; ++a) mean(a) += p[j] * Y(j, a);
    Matrix<S> cov = Matrix<S>::Zero(d, d);
    for (long j = 0; j < m; ++j)
      for (long a = 0; a < d; ++a)
        for (long b = 0; b < d; ++b) cov(a, b) += p[j] * (Y(j, a) - mean(a)) * (Y(j, b) - mean(b));
    const Matrix<S> analytic = num::mul<S>(num::mul<S>(V, cov), Matrix<S>(A.transpose()));
    S h(1);
    for (int k = 0; k < scalar_traits<S>::digits() / 3; ++k) h /= S(2);
    Matrix<S> fd(d, d);
    for (long b = 0; b < d; ++b) {
      Vector<S> xp = x, xm = x;
      xp(b) += h;
      xm(b) -= h;
      const Vector<S> col = (gamma(xp, Y, w, A, V) - gamma(xm, Y, w, A, V)) / (S(2) * h);
      for (long a = 0; a < d; ++a) fd(a, b) = col(a);
    }
    return {le<S>(lhs, rhs), eq<S>(relative_defect(fd, analytic), S(0))};
  }

 private:
  ClaimInfo info_;
};

}  // namespace

REGATTA_REGISTER_CLAIM(EmpiricalExact);
REGATTA_REGISTER_CLAIM(CausalLift);
REGATTA_REGISTER_CLAIM(MaxEntropy);
REGATTA_REGISTER_CLAIM(QueryLipschitz);

}  // namespace regatta::proofs::claims
