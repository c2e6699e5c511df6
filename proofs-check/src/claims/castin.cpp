// Castin et al. (2024) claims on bounded domains (docs/math/bounds.md#castin-bounded-domain): castin.sqrt_n,
// castin.local,
// castin.large_radius. Single dot-product head f_i(X) = Σ_j P_ij V x_j with scores x_iᵀ A x_j; Jacobians are
// the dense JVP Jacobians of detail::AttentionMap, ‖·‖₂ certified enclosures in interval arithmetic.
#include <cmath>

#include <regatta/proofs/detail/attention_map.hpp>
#include "common.hpp"
#include "layout.hpp"

namespace regatta::proofs::claims {

namespace {

using detail::AttentionMap;
using detail::MaskKind;
using detail::ScoreKind;

/// Point: k = {n, d, causal}; x = (X (n×d), A (d×d), V (d×d)).
const Keys head_keys{"n", "d", "causal"};
Layout head_layout(long n, long d) { return Layout().add("X", n, d).add("A", d, d).add("V", d, d); }
Layout head_layout(const Point& p) { return head_layout(head_keys.of(p, "n"), head_keys.of(p, "d")); }

template <class S>
struct Head {
  long n, d;
  Matrix<S> X, A, V;
  AttentionMap<S> map;
};

template <class S>
Head<S> read_head(const Point& pt) {
  const long n = head_keys.of(pt, "n"), d = head_keys.of(pt, "d");
  if (n < 1 || d < 1) throw InputError("point", "wrong size");
  const Layout l = head_layout(n, d);
  l.check(pt);
  Head<S> h{n, d, l.matrix<S>(pt, "X"), l.matrix<S>(pt, "A"), l.matrix<S>(pt, "V"), {}};
  h.map.kind = ScoreKind::dot;
  h.map.mask = head_keys.of(pt, "causal") != 0 ? MaskKind::causal : MaskKind::none;
  h.map.heads.push_back({h.A, Matrix<S>::Identity(d, d), Matrix<S>(h.V.transpose()), S(1)});
  return h;
}

Point sample_head(Rng& rng, bool allow_causal) {
  Point p;
  const long n = rng.coin(0.3) ? rng.integer(1, 3) : rng.integer(2, 12), d = rng.integer(1, 3);
  p.k = {n, d, allow_causal && rng.coin(0.4) ? 1L : 0L};
  const double xs = std::pow(10.0, rng.uniform(-1, 0.8));
  const Layout l = head_layout(n, d);
  l.fill(p.x, "X", [&] { return rng.corner(xs); });
  const auto weight = [&] { return rng.normal() * (rng.coin(0.2) ? 3.0 : 1.0); };
  l.fill(p.x, "A", weight);
  l.fill(p.x, "V", weight);
  return p;
}

/// docs/math/bounds.md#castin-adversarial: d = 1, V = 1; A = −1, R = 2: x = (−R, R, …, R); A = +1, R = 4: x =
/// (R, R/2, …, R/2).
std::vector<Point> adversarial_family(bool causal_too) {
  std::vector<Point> out;
  for (long n : {8L, 32L})
    for (int sign : {-1, 1})
      for (int causal = 0; causal <= (causal_too ? 1 : 0); ++causal) {
        const double R = sign < 0 ? 2.0 : 4.0;
        Point p;
        p.k = {n, 1, causal};
        const Layout l = head_layout(n, 1);
        long i = 0;
        l.fill(p.x, "X", [&] { return i++ == 0 ? (sign < 0 ? -R : R) : (sign < 0 ? R : R / 2); });
        l.fill(p.x, "A", [&] { return static_cast<double>(sign); });
        l.fill(p.x, "V", [] { return 1.0; });
        out.push_back(p);
      }
  return out;
}

nlohmann::json describe_head(const Point& p) {
  nlohmann::json out = head_layout(p).describe(p);  // X, A, V as rows
  out["family"] = p.family;
  out["causal"] = head_keys.of(p, "causal") != 0;
  return out;
}

enum class Which { sqrt_n, local };

class CastinBound final : public ClaimBase<CastinBound> {
 public:
  explicit CastinBound(Which which) : which_(which) {
    info_.source = "derived";
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.families = {"adversarial"};
    info_.evaluated_at = spectral_norm_evaluation;
    if (which == Which::sqrt_n) {
      info_.id = "castin.sqrt_n";
      info_.default_samples = 16384;  // fixed count: about a second of search
      info_.statement =
          "For X in B_R^n: ||Df(X)||_2 <= sqrt(3) ||V|| (||A||^2 R^4 (4n + 1) + n)^(1/2), also with a causal "
          "mask.";
      info_.latex = "$\\|Df(X)\\|_2\\le\\sqrt3\\|V\\|(\\|A\\|^2R^4(4n+1)+n)^{1/2}$, $X\\in B_R^n$";
      info_.source = "derived (constant coincides with the quoted theorem)";
      info_.hypotheses = {"single dot-product head, scores x^T A y, values V y", "R = max_i ||x_i||",
                          "causal mask allowed"};
      info_.parts = {at_most("||Df(X)||_2 <= sqrt(3) ||V|| (||A||^2 R^4 (4n+1) + n)^(1/2)")};
      info_.notes =
          "Family: the adversarial construction of docs/math/bounds.md#castin-adversarial (n = 8, 32; with "
          "and without causal mask).";
    } else {
      info_.id = "castin.local";
      info_.default_samples = 16384;  // fixed count: about a second of search
      info_.statement =
          "||Df(X)||_2 <= sqrt(3) ||V|| (c_max (1 + r^2 rho'^2) + r^2 rho^2)^(1/2) with r = max ||x_i - "
          "x_j||, rho = "
          "max ||A x_i||, rho' = max ||A^T x_i||, c_max = max_j sum_i P_ij.";
      info_.latex = "$\\|Df(X)\\|_2\\le\\sqrt3\\|V\\|(c_{\\max}(1+r^2\\rho'^2)+r^2\\rho^2)^{1/2}$";
      info_.source = "derived; code form published, unproven";
      info_.hypotheses = {"single dot-product head, scores x^T A y, values V y", "causal mask allowed"};
      info_.parts = {at_most("||Df(X)||_2 <= sqrt(3) ||V|| (c_max (1 + r^2 rho'^2) + r^2 rho^2)^(1/2)")};
      info_.notes =
          "The derived form only; the authors' code form Σ_h ‖V_h‖(ρ_h² r²(n+1) + n)^{1/2} is unproven and "
          "not "
          "part of this verdict.";
    }
  }
  const ClaimInfo& info() const override { return info_; }
  Point sample(Rng& rng) const override { return sample_head(rng, true); }
  std::vector<Point> family(const std::string& name) const override {
    return name == "adversarial" ? adversarial_family(true) : std::vector<Point>{};
  }
  nlohmann::json describe(const Point& p) const override { return describe_head(p); }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    using std::sqrt;
    const Head<S> h = read_head<S>(pt);
    const S lhs = num::norm_2(h.map.jacobian(h.X));
    const S v = num::norm_2(h.V);
    const S nn = lift<S>(static_cast<double>(h.n));
    if (which_ == Which::sqrt_n) {
      S R2(0);
      for (long i = 0; i < h.n; ++i) {
        S r2(0);
        for (long a = 0; a < h.d; ++a) r2 += num::sq<S>(h.X(i, a));
        R2 = num::smax<S>(R2, r2);
      }
      const S a = num::norm_2(h.A);
      return {le<S>(lhs, sqrt(S(3)) * v * sqrt(a * a * R2 * R2 * (S(4) * nn + S(1)) + nn))};
    }
    S r2(0), rho2(0), rhop2(0);
    const Matrix<S> AX = num::mul<S>(h.X, Matrix<S>(h.A.transpose()));  // row i: (A x_i)ᵀ
    const Matrix<S> AtX = num::mul<S>(h.X, h.A);                        // row i: (Aᵀ x_i)ᵀ
    for (long i = 0; i < h.n; ++i) {
      S a(0), b(0);
      for (long c = 0; c < h.d; ++c) {
        a += num::sq<S>(AX(i, c));
        b += num::sq<S>(AtX(i, c));
      }
      rho2 = num::smax<S>(rho2, a);
      rhop2 = num::smax<S>(rhop2, b);
      for (long j = 0; j < h.n; ++j) {
        S dist(0);
        for (long c = 0; c < h.d; ++c) dist += num::sq<S>(h.X(i, c) - h.X(j, c));
        r2 = num::smax<S>(r2, dist);
      }
    }
    const Matrix<S> P = h.map.kernels(h.X).front();
    S cmax(0);
    for (long j = 0; j < h.n; ++j) {
      S col(0);
      for (long i = 0; i < h.n; ++i) col += P(i, j);
      cmax = num::smax<S>(cmax, col);
    }
    return {le<S>(lhs, sqrt(S(3)) * v * sqrt(cmax * (S(1) + r2 * rhop2) + r2 * rho2))};
  }

 private:
  Which which_;
  ClaimInfo info_;
};

/// The smallest gap between the largest and the second largest score of a row (scores x_iᵀ A x_j in double),
/// or 0 when a row has a tie.
double min_score_gap(const Point& pt) {
  const long n = head_keys.of(pt, "n");
  const Layout l = head_layout(pt);
  const Matrix<double> X = l.matrix<double>(pt, "X"), A = l.matrix<double>(pt, "A");
  const Matrix<double> Sc = X * A * X.transpose();
  double gap = INFINITY;
  for (long i = 0; i < n; ++i) {
    double first = -INFINITY, second = -INFINITY;
    for (long j = 0; j < n; ++j) {
      const double v = Sc(i, j);
      if (v > first) {
        second = first;
        first = v;
      } else if (v > second) {
        second = v;
      }
    }
    gap = std::min(gap, n == 1 ? INFINITY : first - second);
  }
  return gap;
}

/// Rows whose score gap is below this are outside the claim's hypothesis for practical purposes (the limit is
/// reached only at radii where e^(−gap R²) underflows every precision in use).
constexpr double min_gap = 1e-2;

class LargeRadius final : public ClaimBase<LargeRadius> {
 public:
  LargeRadius() {
    info_.id = "castin.large_radius";
    info_.default_samples = 32768;  // fixed count: about a second of search
    info_.statement =
        "If each score row of X has a unique maximiser, ||Df(R X)||_2 -> ||P_inf(X)||_2 ||V||_2 as R -> inf "
        "(P_inf the hardmax matrix).";
    info_.latex = "$\\|Df(RX)\\|_2\\to\\|P_\\infty(X)\\|_2\\|V\\|_2$ as $R\\to\\infty$";
    info_.source = "derived";
    info_.hypotheses = {"single dot-product head, no mask",
                        "every score row has a unique maximiser (gap >= 0.01)"};
    info_.expected = Expected::identity;
    info_.kind = StatementKind::identity;
    Part limit = equal("||Df(R_p X)||_2 = ||P_inf||_2 ||V||_2 at R_p^2 = 0.75 p ln 2 / gap + 1");
    limit.exact = false;
    limit.precision_exponent = 0.75;
    limit.slack_bits = 40;
    info_.parts = {limit};
    info_.families = {"gapped"};
    info_.evaluated_at =
        "Spectral norms as enclosures (lower end ||M v||/||v|| at a double power vector v, upper end an "
        "interval "
        "Cholesky certificate); the hardmax P_inf comes from the double scores, exact for score gaps >= "
        "0.01. "
        "Not certified: the identity holds only in the limit (checked through the precision).";
    info_.notes =
        "A limit checked through the precision: at p bits the radius is chosen so that e^(−gap R²) = "
        "2^(−0.75p), "
        "so the distance to the limit (softmax-derivative terms of order R² e^(−gap R²)) is about 2^(−0.75p) "
        "and must shrink accordingly from p to 2p bits. No interval certificate (the identity is exact only "
        "in "
        "the limit).";
  }
  const ClaimInfo& info() const override { return info_; }
  bool searchable() const override { return false; }
  Point sample(Rng& rng) const override {
    Point p = sample_head(rng, false);
    long& n = p.k[head_keys.index("n")];
    n = std::max(2L, n % 7);
    p.x.resize(head_layout(p).size());
    for (double& v : p.x) v = rng.normal();
    return p;
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "gapped")
      out.push_back(
          Point{{1.0, -0.5, 0.3, 0.9, 0.7, 1.2, -0.4, 1.1, 2.0, 0.5, 0.5, 1.0, 0.0, 0.0, 1.0}, {3, 2, 0}});
    return out;
  }
  nlohmann::json describe(const Point& p) const override { return describe_head(p); }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    using std::sqrt;
    const double gap = min_score_gap(pt);
    if (!(gap >= min_gap)) throw InputError("point", "a score row has no clear unique maximiser");
    const Head<S> h = read_head<S>(pt);
    const double r2 = 0.75 * scalar_traits<S>::digits() * std::log(2.0) / gap + 1.0;
    const S R = sqrt(lift<S>(r2));
    const Matrix<S> J = h.map.jacobian(Matrix<S>(h.X * R));
    // Hardmax matrix from the double scores.
    const long n = h.n, d = h.d;
    const Matrix<double> X = Eigen::Map<const Matrix<double>>(pt.x.data(), n, d);
    const Matrix<double> A = Eigen::Map<const Matrix<double>>(pt.x.data() + n * d, d, d);
    const Matrix<double> Sc = X * A * X.transpose();
    Matrix<S> Pinf = Matrix<S>::Zero(n, n);
    for (long i = 0; i < n; ++i) {
      Eigen::Index j;
      Sc.row(i).maxCoeff(&j);
      Pinf(i, j) = S(1);
    }
    return {eq<S>(num::norm_2(J), num::norm_2(Pinf) * num::norm_2(h.V))};
  }

 private:
  ClaimInfo info_;
};

}  // namespace

REGATTA_REGISTER_CLAIM(CastinBound, Which::sqrt_n);
REGATTA_REGISTER_CLAIM(CastinBound, Which::local);
REGATTA_REGISTER_CLAIM(LargeRadius);

}  // namespace regatta::proofs::claims
