// Claims kim.phi_lambert, kim.lemma_phi, kim.kernel_rowsum (docs/math/bounds.md#kim-lambda to
// docs/math/bounds.md#kim-kernel-rowsum): the constant
// Λ_n = W0((n − 1)/e) and the two lemmas behind Kim et al.'s L2 bound.
#include <cmath>

#include "common.hpp"
#include "layout.hpp"

namespace regatta::proofs::claims {

namespace {

// ---------------------------------------------------------------------------------------------------------
// kim.phi_lambert — point: k = {n}
// ---------------------------------------------------------------------------------------------------------

/// Λ_n to 30 digits, docs/math/bounds.md#kim-lambda (computed there at high precision); checked to 1e-29
/// absolute.
struct TableEntry {
  long n;
  const char* value;
};
constexpr TableEntry lambda_table[] = {{2, "0.278464542761073795109358739023"},
                                       {1000, "4.42050160394292749451233393195"},
                                       {1000000, "10.4672575057198279555505882554"}};
/// The decimal 1e-29 (interval: an enclosure of it, not the nearest double).
constexpr const char* table_tolerance = "1e-29";

class PhiLambert final : public ClaimBase<PhiLambert> {
 public:
  PhiLambert() {
    info_.id = "kim.phi_lambert";
    info_.default_samples = 32768;  // fixed count: about a second of search
    info_.statement =
        "Lambda_n = W0((n-1)/e) satisfies Lambda_n e^(Lambda_n + 1) = n - 1 and is strictly increasing; for "
        "n >= 9, with x = (n-1)/e, ln x - ln ln x <= Lambda_n <= ln x - (1/2) ln ln x; W0(n/e) = "
        "Lambda_{n+1}.";
    info_.latex =
        "$\\Lambda_n=W_0((n-1)/e)$: $\\Lambda_ne^{\\Lambda_n+1}=n-1$, strictly increasing; $n\\ge9$, "
        "$x=\\frac{n-1}e$: $\\ln x-\\ln\\ln x\\le\\Lambda_n\\le\\ln x-\\frac12\\ln\\ln x$; "
        "$W_0(n/e)=\\Lambda_{n+1}$";
    info_.source = "derived";
    info_.hypotheses = {"n >= 2 an integer"};
    info_.expected = Expected::identity;
    info_.kind = StatementKind::identity;
    info_.parts = {
        equal("Lambda_n e^(Lambda_n + 1) = n - 1"),
        at_most("Lambda_n < Lambda_{n+1}"),
        at_most("n >= 9: ln x - ln ln x <= Lambda_n"),
        at_most("n >= 9: Lambda_n <= ln x - ln ln x / 2"),
        equal("W0(n/e) = Lambda_{n+1}"),
        at_most("|Lambda_n - table value| <= 1e-29 (docs/math/bounds.md#kim-lambda, n = 2, 1000, 10^6)")};
    info_.families = {"small", "powers", "table"};
    info_.evaluated_at =
        "Lambda_n and W0 are certified enclosures (a sign change of w e^w - x proved at both ends in outward "
        "rounded interval arithmetic), not Newton iterates lifted as exact numbers; the table tolerance is "
        "the "
        "decimal 1e-29.";
    info_.notes =
        "Λ_n is regatta::lambert_phi_inverse (interval: a certified enclosure); the table values are the "
        "30-digit "
        "references of docs/math/bounds.md#kim-lambda.";
  }
  const ClaimInfo& info() const override { return info_; }
  bool searchable() const override { return false; }
  const Keys keys{"n"};  // the point has no continuous coordinates
  Point sample(Rng& rng) const override {
    Point p;
    long n = rng.coin(0.5) ? rng.integer(2, 300)
                           : static_cast<long>(std::llround(std::pow(10.0, rng.uniform(0.3, 11.0))));
    p.k = {std::max(n, 2L)};
    return p;
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "small")
      for (long n = 2; n <= 200; ++n) out.push_back(Point{{}, {n}});
    if (name == "powers")
      for (long n = 1000; n <= 100000000000L; n *= 10) out.push_back(Point{{}, {n}});
    if (name == "table")
      for (const TableEntry& t : lambda_table) out.push_back(Point{{}, {t.n}});
    return out;
  }
  nlohmann::json describe(const Point& p) const override {
    return {{"family", p.family}, {"n", keys.of(p, "n")}};
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    using std::exp;
    using std::log;
    const long n = keys.of(pt, "n");
    if (n < 2) throw InputError("n", "must be >= 2");
    const S lam = lambda_n<S>(n), lam_next = lambda_n<S>(n + 1);
    const S e = exp(S(1));
    Evaluation<S> out(6, off<S>());
    out[0] = eq<S>(lam * exp(lam + S(1)), lift<S>(static_cast<double>(n - 1)));
    out[1] = le<S>(lam, lam_next);
    if (n >= 9) {
      const S x = lift<S>(static_cast<double>(n - 1)) / e;
      const S lx = log(x), llx = log(lx);
      out[2] = le<S>(lx - llx, lam);
      out[3] = le<S>(lam, lx - llx / S(2));
    }
    out[4] = eq<S>(lambert_w0<S>(lift<S>(static_cast<double>(n)) / e), lam_next);
    for (const TableEntry& t : lambda_table)
      if (t.n == n)
        out[5] = le<S>(num::sabs<S>(lam - num::parse<S>(t.value)), num::parse<S>(table_tolerance));
    return out;
  }

 private:
  ClaimInfo info_;
};

// ---------------------------------------------------------------------------------------------------------
// Point clouds z_1..z_n in R^k for the two lemmas: k = {n, kdim}, x = z (n×kdim, row-major).
// ---------------------------------------------------------------------------------------------------------

const Keys cloud_keys{"n", "kdim"};
Layout cloud_layout(long n, long k) { return Layout().add("z", n, k); }
Layout cloud_layout(const Point& p) { return cloud_layout(cloud_keys.of(p, "n"), cloud_keys.of(p, "kdim")); }

Point sample_cloud(Rng& rng) {
  Point p;
  const long n = rng.coin(0.3) ? rng.integer(2, 3) : rng.integer(2, 12);
  const long k = rng.integer(1, 3);
  p.k = {n, k};
  const double scale = std::pow(10.0, rng.uniform(-1.5, 1.0));
  const Layout l = cloud_layout(n, k);
  l.fill(p.x, "z", [&] { return rng.corner(scale); });
  if (rng.coin(0.3))  // repeated atoms: z_2 = z_1
    for (std::size_t a = 0; a < static_cast<std::size_t>(k); ++a)
      p.x[l.at("z") + static_cast<std::size_t>(k) + a] = p.x[l.at("z") + a];
  return p;
}

/// z_0 = 0, the other points at distance √t along ±u (balanced) or all at +√t u.
Point equality_cloud(long n, long k, bool balanced) {
  const double t = 1.0 + lambert_phi_inverse<double>(static_cast<double>(n - 1));
  const double r = std::sqrt(t);
  Point p;
  p.k = {n, k};
  const double u = 1.0 / std::sqrt(static_cast<double>(k));
  long entry = 0;  // row-major over z (n×k): row 0 is z_0 = 0
  cloud_layout(n, k).fill(p.x, "z", [&] {
    const long i = entry++ / k;
    const double sign = balanced ? (i % 2 == 1 ? 1.0 : -1.0) : 1.0;
    return i == 0 ? 0.0 : sign * r * (k == 1 ? 1.0 : u);
  });
  return p;
}

nlohmann::json describe_cloud(const Point& p) {
  nlohmann::json out = cloud_layout(p).describe(p);  // z as rows
  out["family"] = p.family;
  out["n"] = cloud_keys.of(p, "n");
  out["k"] = cloud_keys.of(p, "kdim");
  return out;
}

template <class S>
struct Row {
  std::vector<S> P;  // softmax_j(−‖z_i − z_j‖²)
  std::vector<S> t;  // ‖z_j − z_i‖²
};

template <class S>
Row<S> kernel_row(const Matrix<S>& z, long i) {
  const long n = z.rows();
  Row<S> r;
  r.t.assign(static_cast<std::size_t>(n), S(0));
  std::vector<S> s(static_cast<std::size_t>(n));
  for (long j = 0; j < n; ++j) {
    S t(0);
    for (long a = 0; a < z.cols(); ++a) t += num::sq<S>(z(j, a) - z(i, a));
    r.t[j] = t;
    s[j] = -t;
  }
  r.P = num::softmax(s);
  return r;
}

class LemmaPhi final : public ClaimBase<LemmaPhi> {
 public:
  LemmaPhi() {
    info_.id = "kim.lemma_phi";
    info_.default_samples = 32768;  // fixed count: about a second of search
    info_.statement =
        "For z_1..z_n in R^k and P_ij proportional to exp(-||z_i - z_j||^2): sum_j P_ij ||z_j - z_i||^2 <= "
        "Lambda_n, with equality iff the n-1 other points lie at squared distance 1 + Lambda_n from z_i.";
    info_.latex = "$\\sum_jP_{ij}\\|z_j-z_i\\|^2\\le\\Lambda_n$, $P_{ij}\\propto e^{-\\|z_i-z_j\\|^2}$";
    info_.source = "derived";
    info_.hypotheses = {"n >= 2", "any k >= 1"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {at_most("max_i sum_j P_ij ||z_j - z_i||^2 <= Lambda_n")};
    info_.families = {"equality"};
    info_.evaluated_at =
        "The left side is a closed form; Lambda_n is a certified enclosure (a sign change of w e^w - x at "
        "both "
        "ends). The equality family's points are placed with a double Lambda_n (inputs, exact as given).";
    info_.notes = "Every row i is evaluated; the family places the other points at squared distance 1 + Λ_n.";
  }
  const ClaimInfo& info() const override { return info_; }
  Point sample(Rng& rng) const override { return sample_cloud(rng); }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "equality")
      for (long n : {2L, 3L, 5L, 10L, 50L})
        for (long k : {1L, 2L}) out.push_back(equality_cloud(n, k, k == 2));
    return out;
  }
  nlohmann::json describe(const Point& p) const override { return describe_cloud(p); }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const long n = cloud_keys.of(pt, "n");
    if (n < 2) throw InputError("n", "must be >= 2");
    const Layout l = cloud_layout(pt);
    l.check(pt);
    const Matrix<S> z = l.matrix<S>(pt, "z");
    S best(0);
    for (long i = 0; i < n; ++i) {
      const Row<S> row = kernel_row(z, i);
      S sum(0);
      for (long j = 0; j < n; ++j) sum += row.P[j] * row.t[j];
      best = num::smax<S>(best, sum);
    }
    return {le<S>(best, lambda_n<S>(n))};
  }

 private:
  ClaimInfo info_;
};

class KernelRowsum final : public ClaimBase<KernelRowsum> {
 public:
  KernelRowsum() {
    info_.id = "kim.kernel_rowsum";
    info_.default_samples = 32768;  // fixed count: about a second of search
    info_.statement =
        "sum_j ||K_ij||_2 <= 4 Lambda_n, with K_ii = 2 Cov_i(z), K_ij = 2 P_ij (z_j - nu_i)(z_i - z_j)^T "
        "(docs/math/jacobian.md#l2-tied-derivatives); equality for odd n at z_i = 0 with (n-1)/2 points at "
        "+-sqrt(1 + Lambda_n) u.";
    info_.latex =
        "$\\sum_j\\|K_{ij}\\|_2\\le4\\Lambda_n$, $K_{ii}=2\\sum_kP_{ik}(z_k-\\nu_i)(z_k-\\nu_i)^\\top$, "
        "$K_{ij}=2P_{ij}(z_j-\\nu_i)(z_i-z_j)^\\top$";
    info_.source = "derived";
    info_.hypotheses = {"n >= 2", "any k >= 1"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {at_most("max_i sum_j ||K_ij||_2 <= 4 Lambda_n")};
    info_.families = {"balanced"};
    info_.evaluated_at = "||K_ii||_2: " + spectral_norm_evaluation +
                         " Lambda_n is a certified enclosure (a sign change of w e^w - x at both ends).";
    info_.notes =
        "‖K_ij‖₂ (j ≠ i) is rank one: 2P_ij‖z_j − ν_i‖‖z_i − z_j‖; ‖K_ii‖₂ is a spectral norm (interval: "
        "certified enclosure, tight on the rank-one equality family).";
  }
  const ClaimInfo& info() const override { return info_; }
  Point sample(Rng& rng) const override { return sample_cloud(rng); }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "balanced")
      for (long n : {3L, 5L, 9L, 21L})
        for (long k : {1L, 2L}) out.push_back(equality_cloud(n, k, true));
    return out;
  }
  nlohmann::json describe(const Point& p) const override { return describe_cloud(p); }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const long n = cloud_keys.of(pt, "n"), k = cloud_keys.of(pt, "kdim");
    if (n < 2) throw InputError("n", "must be >= 2");
    const Layout l = cloud_layout(pt);
    l.check(pt);
    const Matrix<S> z = l.matrix<S>(pt, "z");
    S best(0);
    for (long i = 0; i < n; ++i) {
      const Row<S> row = kernel_row(z, i);
      Vector<S> nu = Vector<S>::Zero(k);
      for (long j = 0; j < n; ++j)
        for (long a = 0; a < k; ++a) nu(a) += row.P[j] * z(j, a);
      Matrix<S> cov = Matrix<S>::Zero(k, k);
      S sum(0);
      for (long j = 0; j < n; ++j) {
        Vector<S> c(k), w(k);
        for (long a = 0; a < k; ++a) {
          c(a) = z(j, a) - nu(a);
          w(a) = z(i, a) - z(j, a);
        }
        for (long a = 0; a < k; ++a)
          for (long b = 0; b < k; ++b) cov(a, b) += row.P[j] * c(a) * c(b);
        if (j != i) sum += S(2) * row.P[j] * num::euclidean_norm<S>(c) * num::euclidean_norm<S>(w);
      }
      sum += S(2) * num::norm_2<S>(cov);
      best = num::smax<S>(best, sum);
    }
    return {le<S>(best, S(4) * lambda_n<S>(n))};
  }

 private:
  ClaimInfo info_;
};

}  // namespace

REGATTA_REGISTER_CLAIM(PhiLambert);
REGATTA_REGISTER_CLAIM(LemmaPhi);
REGATTA_REGISTER_CLAIM(KernelRowsum);

}  // namespace regatta::proofs::claims
