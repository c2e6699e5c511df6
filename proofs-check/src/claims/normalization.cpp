// Claims softmax.half, layernorm.lip2, layernorm.lipinf_sqrt_d, layernorm.lipinf_const_input, rmsnorm.lip2
// (docs/math/bounds.md#softmax-half to docs/math/bounds.md#rmsnorm). The Jacobians of LayerNorm and RMSNorm
// are the library's own
// (operators/normalization.hpp, JVP columns); the spectrum of the LayerNorm bracket is checked against
// the formula of docs/math/bounds.md#layernorm.
#include <cmath>

#include <regatta/operators/normalization.hpp>
#include "common.hpp"
#include "layout.hpp"

namespace regatta::proofs::claims {

namespace {

using operators::Prenorm;

// ---------------------------------------------------------------------------------------------------------
// softmax.half
// ---------------------------------------------------------------------------------------------------------

/// Point: k = {m}; x = (z (m), z' (m)).
class SoftmaxHalf final : public ClaimBase<SoftmaxHalf> {
 public:
  SoftmaxHalf() {
    info_.id = "softmax.half";
    info_.default_samples = 32768;  // fixed count: about a second of search
    info_.statement =
        "For p = softmax(z): ||diag(p) - p p^T||_2 <= ||diag(p) - p p^T||_inf <= 1/2, and softmax is "
        "1/2-Lipschitz in l2 and in l_inf.";
    info_.latex =
        "$\\|\\mathrm{diag}(p)-pp^\\top\\|_2\\le\\|\\mathrm{diag}(p)-pp^\\top\\|_\\infty\\le\\frac12$; "
        "$\\|\\mathrm{softmax}(z')-\\mathrm{softmax}(z)\\|_{2}\\le\\frac12\\|z'-z\\|_{2}$ (likewise "
        "$\\infty$)";
    info_.source = "derived";
    info_.hypotheses = {"z, z' in R^m, m >= 1"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {at_most("||J(p)||_2 <= ||J(p)||_inf"), at_most("||J(p)||_inf <= 1/2"),
                   at_most("||softmax(z') - softmax(z)||_2 <= ||z' - z||_2 / 2"),
                   at_most("||softmax(z') - softmax(z)||_inf <= ||z' - z||_inf / 2")};
    info_.families = {"half_half", "near_ties"};
    info_.evaluated_at = "||J(p)||_2: " + spectral_norm_evaluation;
    info_.notes =
        "J(p) is formed entrywise; the Lipschitz parts compare two logit vectors. At p = (1/2, 1/2) "
        "‖J‖∞ = 1/2 exactly (certified by intervals, which compute p = 1/2 exactly), while ‖J‖₂ = ‖J‖∞ "
        "there is an equality that the interval spectral-norm enclosure cannot certify.";
  }
  const ClaimInfo& info() const override { return info_; }

  /// Point: k = {m}; x = two logit vectors z, z2 (m each).
  const Keys keys{"m"};
  Layout layout(const Point& p) const {
    const long m = keys.of(p, "m");
    return Layout().add("z", m).add("z2", m);
  }

  Point sample(Rng& rng) const override {
    Point p;
    const long m = rng.coin(0.3) ? rng.integer(1, 3) : rng.integer(2, 12);
    p.k = {m};
    const double scale = rng.coin(0.2) ? 50.0 : 3.0;
    std::vector<double> z(static_cast<std::size_t>(m));
    for (double& v : z) v = rng.corner(scale);
    if (m >= 2 && rng.coin(0.3)) z[1] = z[0];  // a tie
    p.x = z;
    for (long j = 0; j < m; ++j)
      p.x.push_back(rng.coin(0.5) ? z[j] + rng.normal() * std::pow(10.0, -rng.integer(0, 8))
                                  : rng.corner(scale));
    return p;
  }

  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "half_half") {
      for (long m : {2L, 3L, 6L}) {
        Point p;
        p.k = {m};
        std::vector<double> z(static_cast<std::size_t>(m), -800.0);
        z[0] = z[1] = 0.0;
        p.x = z;
        std::vector<double> z2 = z;
        z2[0] += 1e-3;
        z2[1] -= 1e-3;
        p.x.insert(p.x.end(), z2.begin(), z2.end());
        out.push_back(p);
      }
    } else if (name == "near_ties") {
      for (double s : {10.0, 300.0})
        for (double t : {1e-1, 1e-4, 1e-8}) {
          Point p;
          p.k = {2};
          p.x = {s, s, s + t, s - t};
          out.push_back(p);
        }
    }
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const long m = keys.of(pt, "m");
    const Layout l = layout(pt);
    l.check(pt);
    const Vector<S> zv = l.vector<S>(pt, "z"), z2v = l.vector<S>(pt, "z2");
    const std::vector<S> z(zv.data(), zv.data() + m), z2(z2v.data(), z2v.data() + m);
    const std::vector<S> p = num::softmax(z), p2 = num::softmax(z2);
    Matrix<S> J(m, m);
    for (long a = 0; a < m; ++a)
      for (long b = 0; b < m; ++b) J(a, b) = (a == b ? p[a] : S(0)) - p[a] * p[b];
    const S j2 = num::norm_2(J), jinf = num::norm_inf(J);
    Vector<S> dp(m), dz(m);
    for (long a = 0; a < m; ++a) {
      dp(a) = p2[a] - p[a];
      dz(a) = z2[a] - z[a];
    }
    S dp_inf(0), dz_inf(0);
    for (long a = 0; a < m; ++a) {
      dp_inf = num::smax<S>(dp_inf, num::sabs<S>(dp(a)));
      dz_inf = num::smax<S>(dz_inf, num::sabs<S>(dz(a)));
    }
    const S half = S(1) / S(2);
    return {le<S>(j2, jinf), le<S>(jinf, half),
            le<S>(num::euclidean_norm<S>(dp), half * num::euclidean_norm<S>(dz)),
            le<S>(dp_inf, half * dz_inf)};
  }

 private:
  ClaimInfo info_;
};

// ---------------------------------------------------------------------------------------------------------
// LayerNorm / RMSNorm shared point layout: k = {d}; x = (x (d), γ (d), ε).
// ---------------------------------------------------------------------------------------------------------

constexpr double min_eps = 1e-6;

/// A normalisation point: k = {d}; x = the token x (1×d), γ (d), ε.
const Keys norm_keys{"d"};
Layout norm_layout(const Point& p) {
  const long d = norm_keys.of(p, "d");
  return Layout().add("x", 1, d).add("gamma", d).add("eps", 1);
}

Point norm_point(const std::vector<double>& x, const std::vector<double>& gamma, double eps) {
  Point p;
  p.k = {static_cast<long>(x.size())};
  p.x = x;
  p.x.insert(p.x.end(), gamma.begin(), gamma.end());
  p.x.push_back(eps);
  return p;
}

Point sample_norm_point(Rng& rng, long d_max) {
  const long d = rng.coin(0.3) ? rng.integer(1, 4) : rng.integer(2, d_max);
  std::vector<double> x(static_cast<std::size_t>(d)), g(static_cast<std::size_t>(d));
  const double base = rng.corner(2.0);
  const bool constant_x = rng.coin(0.15), constant_g = rng.coin(0.5);
  const double spread = std::pow(10.0, rng.uniform(-6, 1.5));
  for (auto& v : x) v = constant_x ? base : base + spread * rng.normal();
  const double g0 = rng.corner(1.0);
  for (auto& v : g) v = constant_g ? g0 : rng.corner(1.0);
  const double eps = std::pow(10.0, rng.uniform(-5, 1));
  return norm_point(x, g, eps);
}

void repair_norm_point(Point& p) {
  double& eps = p.x.at(norm_layout(p).at("eps"));
  eps = std::max(std::abs(eps), min_eps);
}

nlohmann::json describe_norm_point(const Point& p) {
  const Layout l = norm_layout(p);
  const auto d = static_cast<std::size_t>(norm_keys.of(p, "d"));
  const auto block = [&](const char* name) {
    const auto from = p.x.begin() + static_cast<std::ptrdiff_t>(l.at(name));
    return std::vector<double>(from, from + static_cast<std::ptrdiff_t>(d));
  };
  return nlohmann::json{
      {"family", p.family}, {"d", d}, {"x", block("x")}, {"gamma", block("gamma")}, {"eps", l.raw(p, "eps")}};
}

template <class S>
struct NormPoint {
  long d;
  Matrix<S> x;  // 1×d
  Vector<S> gamma;
  S eps;
  S gamma_max;  // max |γ_k|
  bool constant_x, constant_gamma;
};

template <class S>
NormPoint<S> read_norm_point(const Point& pt) {
  const long d = norm_keys.of(pt, "d");
  const Layout l = norm_layout(pt);
  l.check(pt);
  NormPoint<S> np{d,   l.matrix<S>(pt, "x"), l.vector<S>(pt, "gamma"), l.vector<S>(pt, "eps")(0), S(0), true,
                  true};
  for (long a = 0; a < d; ++a) {
    np.gamma_max = num::smax<S>(np.gamma_max, num::sabs<S>(np.gamma(a)));
    np.constant_x = np.constant_x && l.raw(pt, "x", std::size_t(a)) == l.raw(pt, "x");
    np.constant_gamma = np.constant_gamma && l.raw(pt, "gamma", std::size_t(a)) == l.raw(pt, "gamma");
  }
  return np;
}

/// d×d Jacobian of the row map x ↦ N(x) from the library's JVP (column b = DN(x)[e_b]).
template <class S>
Matrix<S> norm_jacobian(Prenorm norm, const NormPoint<S>& np) {
  Matrix<S> J(np.d, np.d);
  for (long b = 0; b < np.d; ++b) {
    Matrix<S> e = Matrix<S>::Zero(1, np.d);
    e(0, b) = S(1);
    const Matrix<S> col = operators::normalize_rows_jvp(norm, np.x, np.gamma, np.eps, e);
    for (long a = 0; a < np.d; ++a) J(a, b) = col(0, a);
  }
  return J;
}

std::vector<Point> norm_families(const std::string& name) {
  std::vector<Point> out;
  if (name == "constant") {
    for (long d : {2L, 3L, 8L, 16L})
      out.push_back(norm_point(std::vector<double>(static_cast<std::size_t>(d), 0.7),
                               std::vector<double>(static_cast<std::size_t>(d), 1.5), 0.01));
  } else if (name == "tiny_variance") {
    for (long d : {3L, 8L}) {
      std::vector<double> x(static_cast<std::size_t>(d), 2.0);
      for (long a = 0; a < d; ++a) x[a] += 1e-4 * ((a % 3) - 1.0);
      out.push_back(norm_point(x, std::vector<double>(static_cast<std::size_t>(d), 1.0), 1e-4));
    }
  } else if (name == "zero") {
    for (long d : {1L, 4L, 16L}) {
      std::vector<double> g(static_cast<std::size_t>(d));
      for (long a = 0; a < d; ++a) g[a] = 0.5 + 0.25 * a;
      out.push_back(norm_point(std::vector<double>(static_cast<std::size_t>(d), 0.0), g, 0.25));
    }
  } else if (name == "d64_structured") {
    // docs/math/bounds.md#layernorm: x = (4.824, -1.731 (x20), 0 (x43)), γ = 1, ε = 1; and the same shape at
    // d = 128.
    for (long d : {64L, 128L}) {
      std::vector<double> x(static_cast<std::size_t>(d), 0.0);
      x[0] = d == 64 ? 4.824 : 6.0;
      for (long a = 1; a <= (d == 64 ? 20 : 40); ++a) x[a] = d == 64 ? -1.731 : -1.6;
      out.push_back(norm_point(x, std::vector<double>(static_cast<std::size_t>(d), 1.0), 1.0));
    }
  }
  return out;
}

/// What the normalisation claims share: points of the form read by read_norm_point, with widths up to
/// `max_d` in random samples.
template <class Derived>
class NormClaim : public ClaimBase<Derived> {
 public:
  explicit NormClaim(long max_d) : max_d_(max_d) {}
  const ClaimInfo& info() const override { return info_; }
  Point sample(Rng& rng) const override { return sample_norm_point(rng, max_d_); }
  std::vector<Point> family(const std::string& name) const override { return norm_families(name); }
  void repair(Point& p) const override { repair_norm_point(p); }
  nlohmann::json describe(const Point& p) const override { return describe_norm_point(p); }

 protected:
  ClaimInfo info_;

 private:
  long max_d_;
};

class LayerNormLip2 final : public NormClaim<LayerNormLip2> {
 public:
  LayerNormLip2() : NormClaim(16) {
    info_.id = "layernorm.lip2";
    info_.default_samples = 32768;  // fixed count: about a second of search
    info_.statement =
        "||J_LN(x)||_2 <= max|gamma| / sqrt(eps_LN), with equality at constant x for constant gamma, d >= 2; "
        "the bracket B = I - 11^T/d - uu^T/d has spectrum {1 (d-2 times), 0, eps_LN/s^2}.";
    info_.latex =
        "$\\|J_{\\rm LN}(x)\\|_2\\le\\max|\\gamma|/\\sqrt{\\epsilon_{\\rm LN}}$; "
        "$\\mathrm{spec}(B)=\\{1^{(d-2)},0,\\epsilon_{\\rm LN}/s^2\\}$";
    info_.source = "derived";
    info_.hypotheses = {"eps_LN > 0", "biased variance, gamma arbitrary, d >= 1"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {at_most("||J_LN(x)||_2 <= max|gamma| / sqrt(eps)"),
                   equal("J_LN (library JVP) = diag(gamma) B / s (formula), Frobenius defect"),
                   equal("B 1 = 0"),
                   equal("B u = (eps/s^2) u"),
                   equal("tr B = d - 2 + eps/s^2"),
                   equal("tr B^2 = d - 2 + (eps/s^2)^2")};
    info_.families = {"constant", "tiny_variance"};
    info_.evaluated_at = "||J_LN||_2: " + spectral_norm_evaluation;
    info_.notes =
        "The Jacobian is assembled from operators::normalize_rows_jvp and compared with diag(γ)B/s. The "
        "four spectral identities (B1 = 0, Bu = (ε/s²)u, the traces of B and B²) pin the spectrum: on the "
        "complement of 1 and u the d − 2 remaining eigenvalues have sum and sum of squares d − 2, so all are "
        "1 (Cauchy–Schwarz).";
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    using std::sqrt;
    const NormPoint<S> np = read_norm_point<S>(pt);
    const long d = np.d;
    const Matrix<S> J = norm_jacobian(Prenorm::layernorm, np);
    const S dd = lift<S>(static_cast<double>(d));
    S mean(0);
    for (long a = 0; a < d; ++a) mean += np.x(0, a);
    mean /= dd;
    S var(0);
    for (long a = 0; a < d; ++a) var += num::sq<S>(np.x(0, a) - mean);
    var /= dd;
    const S s2 = var + np.eps, s = sqrt(s2);
    Vector<S> u(d);
    for (long a = 0; a < d; ++a) u(a) = (np.x(0, a) - mean) / s;
    Matrix<S> B(d, d);
    for (long a = 0; a < d; ++a)
      for (long b = 0; b < d; ++b) B(a, b) = (a == b ? S(1) : S(0)) - S(1) / dd - u(a) * u(b) / dd;
    Matrix<S> defect(d, d);
    for (long a = 0; a < d; ++a)
      for (long b = 0; b < d; ++b) defect(a, b) = J(a, b) - np.gamma(a) * B(a, b) / s;
    const S lam = np.eps / s2;
    Vector<S> b1(d), bu(d);
    S trace(0), trace2(0);
    for (long a = 0; a < d; ++a) {
      S row1(0), rowu(0);
      for (long b = 0; b < d; ++b) {
        row1 += B(a, b);
        rowu += B(a, b) * u(b);
        trace2 += B(a, b) * B(b, a);
      }
      b1(a) = row1;
      bu(a) = rowu - lam * u(a);
      trace += B(a, a);
    }
    const S dm2 = lift<S>(static_cast<double>(d - 2));
    const bool spectral = d >= 2;
    return {le<S>(num::norm_2(J), np.gamma_max / sqrt(np.eps)),
            eq<S>(num::frobenius(defect), S(0)),
            eq<S>(num::euclidean_norm<S>(b1), S(0)),
            spectral ? eq<S>(num::euclidean_norm<S>(bu), S(0)) : off<S>(),
            spectral ? eq<S>(trace, dm2 + lam) : off<S>(),
            spectral ? eq<S>(trace2, dm2 + lam * lam) : off<S>()};
  }
};

class LayerNormLipInfSqrtD final : public NormClaim<LayerNormLipInfSqrtD> {
 public:
  LayerNormLipInfSqrtD() : NormClaim(32) {
    info_.id = "layernorm.lipinf_sqrt_d";
    info_.default_samples = 32768;  // fixed count: about a second of search
    info_.statement =
        "2(d-1)/d |gamma|/sqrt(eps_LN) <= sup_x ||J_LN(x)||_inf <= sqrt(d) max|gamma|/sqrt(eps_LN) (lower "
        "end "
        "attained at constant x for constant gamma); the quoted (d^2-2)/d max|gamma|/sqrt(eps_LN) is never "
        "exceeded.";
    info_.latex =
        "$\\frac{2(d-1)}d\\frac{|\\gamma|}{\\sqrt{\\epsilon_{\\rm LN}}}\\le\\sup_x\\|J_{\\rm "
        "LN}(x)\\|_\\infty"
        "\\le\\sqrt d\\frac{\\max|\\gamma|}{\\sqrt{\\epsilon_{\\rm LN}}}$; "
        "$\\|J_{\\rm LN}\\|_\\infty\\le\\frac{d^2-2}d\\max|\\gamma|/\\sqrt{\\epsilon_{\\rm LN}}$";
    info_.source = "derived";
    info_.hypotheses = {"eps_LN > 0", "the quoted bound for d >= 2"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {at_most("||J_LN(x)||_inf <= sqrt(d) max|gamma| / sqrt(eps)"),
                   at_most("||J_LN(x)||_inf <= (d^2 - 2)/d max|gamma| / sqrt(eps)  (quoted, d >= 2)"),
                   equal("constant x, constant gamma: ||J_LN||_inf = 2(d-1)/d |gamma| / sqrt(eps)")};
    info_.families = {"constant", "tiny_variance", "d64_structured"};
    info_.notes = "Jacobian from operators::normalize_rows_jvp; ‖·‖∞ is exact in interval arithmetic.";
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    using std::sqrt;
    const NormPoint<S> np = read_norm_point<S>(pt);
    const long d = np.d;
    const S jinf = num::norm_inf(norm_jacobian(Prenorm::layernorm, np));
    const S unit = np.gamma_max / sqrt(np.eps);
    const S dd = lift<S>(static_cast<double>(d));
    const bool at_constant = np.constant_x && np.constant_gamma && d >= 2;
    return {le<S>(jinf, sqrt(dd) * unit), d >= 2 ? le<S>(jinf, (dd * dd - S(2)) / dd * unit) : off<S>(),
            at_constant ? eq<S>(jinf, S(2) * (dd - S(1)) / dd * unit) : off<S>()};
  }
};

class LayerNormLipInfConstInput final : public NormClaim<LayerNormLipInfConstInput> {
 public:
  LayerNormLipInfConstInput() : NormClaim(16) {
    info_.id = "layernorm.lipinf_const_input";
    info_.default_samples = 8192;  // fixed count: about a second of search
    info_.statement =
        "Conjecture (false in general): Lip_inf(LN) = 2(d-1)/d max|gamma|/sqrt(eps_LN), i.e. no input has "
        "||J_LN(x)||_inf above the value at constant inputs.";
    info_.latex =
        "$\\mathrm{Lip}_\\infty(\\mathrm{LN})=\\frac{2(d-1)}d\\max|\\gamma|/\\sqrt{\\epsilon_{\\rm LN}}$ "
        "(false in general)";
    info_.source = "observed (conjecture from searches at d <= 16)";
    info_.hypotheses = {"eps_LN > 0", "d >= 2"};
    info_.expected = Expected::refuted;
    info_.kind = StatementKind::inequality;
    info_.parts = {at_most("||J_LN(x)||_inf <= 2(d-1)/d max|gamma| / sqrt(eps)")};
    info_.families = {"constant", "d64_structured"};
    info_.notes =
        "The d = 64 input of docs/math/bounds.md#layernorm (x = (4.824, −1.731 ×20, 0 ×43), γ = 1, ε = 1) "
        "has first-row "
        "absolute sum 2.0315587 > 1.96875; the adversarial climb starts from it.";
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    using std::sqrt;
    const NormPoint<S> np = read_norm_point<S>(pt);
    if (np.d < 2) return {off<S>()};
    const S jinf = num::norm_inf(norm_jacobian(Prenorm::layernorm, np));
    const S dd = lift<S>(static_cast<double>(np.d));
    return {le<S>(jinf, S(2) * (dd - S(1)) / dd * np.gamma_max / sqrt(np.eps))};
  }
};

class RmsNormLip2 final : public NormClaim<RmsNormLip2> {
 public:
  RmsNormLip2() : NormClaim(16) {
    info_.id = "rmsnorm.lip2";
    info_.default_samples = 32768;  // fixed count: about a second of search
    info_.statement =
        "Lip_2(RMS) = max|gamma|/sqrt(eps_LN), attained at x = 0; ||RMS(x)|| < sqrt(d) ||gamma||_inf; and "
        "max|gamma|/sqrt(eps_LN) <= Lip_inf <= sqrt(d) max|gamma|/sqrt(eps_LN).";
    info_.latex =
        "$\\mathrm{Lip}_2(\\mathrm{RMS})=\\max|\\gamma|/\\sqrt{\\epsilon_{\\rm LN}}$ (at $x=0$); "
        "$\\|\\mathrm{RMS}(x)\\|<\\sqrt d\\|\\gamma\\|_\\infty$; "
        "$\\max|\\gamma|/\\sqrt{\\epsilon_{\\rm LN}}\\le\\mathrm{Lip}_\\infty\\le\\sqrt d\\max|\\gamma|/"
        "\\sqrt{\\epsilon_{\\rm LN}}$";
    info_.source = "derived";
    info_.hypotheses = {"eps_LN > 0"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {at_most("||J_RMS(x)||_2 <= max|gamma| / sqrt(eps)"),
                   at_most("||RMS(x)|| <= sqrt(d) ||gamma||_inf"),
                   at_most("||J_RMS(x)||_inf <= sqrt(d) max|gamma| / sqrt(eps)"),
                   equal("x = 0: ||J_RMS(0)||_2 = max|gamma| / sqrt(eps)"),
                   equal("x = 0: ||J_RMS(0)||_inf = max|gamma| / sqrt(eps)")};
    info_.families = {"zero", "constant"};
    info_.evaluated_at = "||J_RMS||_2: " + spectral_norm_evaluation;
    info_.notes = "RMSNorm and its Jacobian from operators::normalize_rows / normalize_rows_jvp.";
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    using std::sqrt;
    const NormPoint<S> np = read_norm_point<S>(pt);
    const Matrix<S> J = norm_jacobian(Prenorm::rmsnorm, np);
    const Matrix<S> y = operators::normalize_rows(Prenorm::rmsnorm, np.x, np.gamma, Vector<S>(), np.eps);
    const S unit = np.gamma_max / sqrt(np.eps);
    const S sd = sqrt(lift<S>(static_cast<double>(np.d)));
    bool zero = true;
    for (long a = 0; a < np.d; ++a) zero = zero && pt.x[a] == 0.0;
    const S j2 = num::norm_2(J), jinf = num::norm_inf(J);
    return {le<S>(j2, unit), le<S>(num::euclidean_norm<S>(y), sd * np.gamma_max), le<S>(jinf, sd * unit),
            zero ? eq<S>(j2, unit) : off<S>(), zero ? eq<S>(jinf, unit) : off<S>()};
  }
};

}  // namespace

REGATTA_REGISTER_CLAIM(SoftmaxHalf);
REGATTA_REGISTER_CLAIM(LayerNormLip2);
REGATTA_REGISTER_CLAIM(LayerNormLipInfSqrtD);
REGATTA_REGISTER_CLAIM(LayerNormLipInfConstInput);
REGATTA_REGISTER_CLAIM(RmsNormLip2);

}  // namespace regatta::proofs::claims
