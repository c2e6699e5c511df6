// regatta::pairwise::reduce computed several ways on corner-biased random problems:
//   blocked (reduce<double>, reduce<float>), generic (detail::reduce_generic<double>) and materialised
//   (reduce_materialized<double>) against reduce<mpfr> at 256 bits on the same, exactly converted, inputs;
//   reduce<interval> at 128 bits must enclose reduce<mpfr> at 512 bits, entry by entry;
//   invariants (rows of π sum to 1, convex hull, key permutation, translation of neg_sq_dist, causal row 0);
//   every InputError of validate(); log_kernel_matrix on a small case and its size limit.
//
// Derived tolerance (first order in u = eps<S>() = 2^(1−p), twice the unit roundoff, which also absorbs exp /
// pow / sqrt being accurate to one ulp rather than half). γ_k = k·u / (1 − k·u). Per row i, with J_i the
// visible keys (mask, finite ω_j), m_i = |J_i|, and the projected inputs x' = x·Q, y' = y·K of magnitudes
// ax = |x|·|Q|, ay = |y|·|K| (ax = |x| without a map; d_in the map's input width, 0 without maps; d' the
// projected width; k = d_in + d' + 2):
//   score error E^s_ij:
//     dot           γ_{k+1} · |scale| · Σ ax·ay                    (+1: scale multiplies X before the GEMM)
//     ‖x'−y'‖² = q  difference form, no map: γ_{d'+3} · q           (each difference and square rounded once)
//                   otherwise (maps, or the blocked expansion ‖x‖² − 2⟨x,y⟩ + ‖y‖², each term and the
//                   perturbation of x', y' by the map bounded by Σ(ax + ay)²):   E^q = 3·γ_{k+3} · Σ(ax +
//                   ay)²
//     neg_sq_dist   scale · E^q + u·|s|
//     neg_dist_pow  D = √q, ΔD = min(E^q / 2D, √E^q) + u·D,  scale · (p·(D + ΔD)^{p−1}·ΔD + 2u·D^p) + u·|s|
//   log-kernel error E_ij = E^s_ij + u·(|s_ij| + |ω_j|)           (the addition t = s + ω)
//   A_i = max_{j∈J_i} E_ij,  L_i = (|lse_i| + 2m_i + 2)·u           (LogSumExp's own bound, log_sum_exp.hpp)
//   lse:          |Δ| ≤ 2·(A_i + L_i)           (Δlse = Σ_j π_ij δ_ij ≤ max δ, plus the reduction)
//   out_i,c:      |Δ| ≤ 2·(2A_i + 2L_i + (m_i+2)u) · max_{j∈J_i} |v_jc|
//                 (π_ij(1 + δ_ij − Σπδ): a change ≤ 2A of every weight relative to the others; the lse-sized
//                 shift error 2L the same way; a sum of m_i non-negative weighted terms and one division)
//   feature_mean: the same with b;  cross / second moments: with |v_c b_k|, |b_c b_k| and one more u
//   expected_score: |Δ| ≤ 2·((2A_i + 2L_i + (m_i+3)u) · G_i + A_i), G_i = max_j |s_ij| (for the blocked
//                 neg_sq_dist, whose row constant scale‖x'‖² is added at the end, G_i = max_j
//                 scale·Σ(ax+ay)²)
// The factor 2 covers the neglected second-order terms (A_i ≤ 0.1 in every case here) and the evaluation of
// the bound itself in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <regatta/core/convert.hpp>
#include <regatta/core/detail/pairwise_paths.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/log_sum_exp.hpp>
#include <regatta/core/pairwise.hpp>
#include <regatta/core/precision.hpp>
#include <string>
#include <vector>

#include "support/scalar_names.hpp"

namespace regatta::pairwise {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

enum class KeyMap { none, same, separate };

/// A problem in double, converted exactly to every scalar type by Converted<S>.
struct Case {
  std::string name;
  Matrix<double> x, y, v, b, qmap, kmap;
  Vector<double> w;
  bool has_w = false, has_v = false, has_b = false, has_qmap = false;
  KeyMap key_map = KeyMap::none;
  bool null_queries = false, null_keys = false;
  Kernel kernel;
  Request request;

  bool distance() const { return kernel.score != ScoreKind::dot; }
  /// The map applied to the keys (null when none).
  const Matrix<double>* applied_key_map() const {
    if (distance()) return has_qmap ? &qmap : nullptr;
    if (key_map == KeyMap::separate) return &kmap;
    if (key_map == KeyMap::same) return &qmap;
    return nullptr;
  }
};

template <class S>
Vector<S> vector_cast(const Vector<double>& a) {
  Vector<S> r(a.size());
  for (Eigen::Index i = 0; i < a.size(); ++i) r(i) = scalar_cast<S>(a(i));
  return r;
}

/// The case's data as S (exact for mpfr / interval at >= 53 bits) and a Problem pointing into it.
template <class S>
struct Converted {
  Matrix<S> x, y, v, b, qmap, kmap;
  Vector<S> w;
  Problem<S> problem;
  explicit Converted(const Case& c)
      : x(matrix_cast<S>(c.x)),
        y(matrix_cast<S>(c.y)),
        v(matrix_cast<S>(c.v)),
        b(matrix_cast<S>(c.b)),
        qmap(matrix_cast<S>(c.qmap)),
        kmap(matrix_cast<S>(c.kmap)),
        w(vector_cast<S>(c.w)) {
    problem.queries = c.null_queries ? nullptr : &x;
    problem.keys = c.null_keys ? nullptr : &y;
    problem.log_weights = c.has_w ? &w : nullptr;
    problem.values = c.has_v ? &v : nullptr;
    problem.features = c.has_b ? &b : nullptr;
    problem.query_map = c.has_qmap ? &qmap : nullptr;
    problem.key_map = c.key_map == KeyMap::separate ? &kmap : c.key_map == KeyMap::same ? &qmap : nullptr;
  }
  Converted(const Converted&) = delete;
  Converted& operator=(const Converted&) = delete;
};

// ---------------------------------------------------------------------------------------------------------
// Corner-biased random problems
// ---------------------------------------------------------------------------------------------------------

template <class T>
T pick(std::mt19937_64& rng, std::initializer_list<T> options) {
  std::uniform_int_distribution<std::size_t> u(0, options.size() - 1);
  return *(options.begin() + u(rng));
}

Matrix<double> gaussian(std::mt19937_64& rng, Eigen::Index rows, Eigen::Index cols, double sd = 1) {
  std::normal_distribution<double> g(0, sd);
  Matrix<double> a(rows, cols);
  for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = g(rng);
  return a;
}

Matrix<double> projected_queries(const Case& c) { return c.has_qmap ? Matrix<double>(c.x * c.qmap) : c.x; }
Matrix<double> projected_keys(const Case& c) {
  const Matrix<double>* k = c.applied_key_map();
  return k ? Matrix<double>(c.y * *k) : c.y;
}

bool visible(const Case& c, Eigen::Index i, Eigen::Index j) {
  if (c.kernel.mask == MaskKind::causal && j > i) return false;
  if (c.kernel.mask == MaskKind::anticausal && j < i) return false;
  return !(c.has_w && c.w(j) == -kInf);
}

/// Makes every row see a key: a finite log-weight on key 0 (causal), key m−1 (anticausal) or some key.
void ensure_visible(Case& c, std::mt19937_64& rng) {
  if (!c.has_w) return;
  const Eigen::Index m = c.y.rows();
  if (c.kernel.mask == MaskKind::causal && c.w(0) == -kInf) c.w(0) = 0.25;
  if (c.kernel.mask == MaskKind::anticausal && c.w(m - 1) == -kInf) c.w(m - 1) = -0.5;
  if ((c.w.array() == -kInf).all()) c.w(std::uniform_int_distribution<Eigen::Index>(0, m - 1)(rng)) = 1;
}

double max_abs_dot(const Case& c) {
  const Matrix<double> xp = projected_queries(c), yp = projected_keys(c);
  return (xp * yp.transpose()).cwiseAbs().maxCoeff();
}

double max_sq_dist(const Case& c) {
  const Matrix<double> xp = projected_queries(c), yp = projected_keys(c);
  double mx = 0;
  for (Eigen::Index i = 0; i < xp.rows(); ++i)
    for (Eigen::Index j = 0; j < yp.rows(); ++j) mx = std::max(mx, (xp.row(i) - yp.row(j)).squaredNorm());
  return mx;
}

Case random_case(std::mt19937_64& rng, int index) {
  const int family = index % 10;
  Case c;
  Eigen::Index n = pick<Eigen::Index>(rng, {1, 2, 3, 5, 8, 13, 24});
  Eigen::Index m = pick<Eigen::Index>(rng, {1, 2, 3, 5, 8, 13, 24});
  Eigen::Index d = pick<Eigen::Index>(rng, {1, 2, 3, 7});
  const Eigen::Index e = pick<Eigen::Index>(rng, {1, 2, 3}), f = pick<Eigen::Index>(rng, {1, 2});
  c.kernel.mask = pick(rng, {MaskKind::none, MaskKind::causal, MaskKind::anticausal});
  c.kernel.score = pick(rng, {ScoreKind::dot, ScoreKind::neg_sq_dist, ScoreKind::neg_dist_pow});
  c.kernel.power = pick(rng, {1.0, 1.5, 2.0, 3.0});
  std::string family_name;
  switch (family) {
    case 0:
      family_name = "moderate";
      break;
    case 1:
      family_name = "dot-logits-1e4";
      c.kernel.score = ScoreKind::dot;
      break;
    case 2:
      family_name = "self-l2";
      c.kernel.score = ScoreKind::neg_sq_dist;
      c.kernel.mask = pick(rng, {MaskKind::none, MaskKind::causal});
      m = n;
      break;
    case 3:
      family_name = "dist-pow-ties";
      c.kernel.score = ScoreKind::neg_dist_pow;
      break;
    case 4:
      family_name = "weights-inf-huge";
      break;
    case 5:
      family_name = "causal-n>m";
      c.kernel.mask = MaskKind::causal;
      m = std::max<Eigen::Index>(1, std::min<Eigen::Index>(m, 8));
      n = m + pick<Eigen::Index>(rng, {1, 3, 10});
      break;
    case 6:
      family_name = "one-hot";
      c.kernel.mask = pick(rng, {MaskKind::none, MaskKind::causal});
      break;
    case 7:
      family_name = "tiny";
      switch (index / 10 % 4) {
        case 0:
          n = m = d = 1;
          break;
        case 1:
          n = 1;
          break;
        case 2:
          m = 1;
          break;
        default:
          d = 1;
      }
      break;
    case 8:
      family_name = "dot-maps";
      c.kernel.score = ScoreKind::dot;
      break;
    case 9:
      family_name = "l2-logits-1e4";
      c.kernel.score = ScoreKind::neg_sq_dist;
      break;
  }
  if (c.kernel.mask == MaskKind::anticausal && n > m) std::swap(n, m);

  c.x = gaussian(rng, n, d);
  c.y = family == 2 ? c.x : gaussian(rng, m, d);
  c.v = gaussian(rng, m, e, 3);
  c.b = gaussian(rng, m, f);
  c.has_v = c.has_b = true;
  c.request.out = c.request.feature_mean = c.request.cross_moment = c.request.feature_second_moment =
      c.request.expected_score = true;
  c.kernel.scale = c.distance() ? 0.5 : 1.0 / std::sqrt(double(d));
  if (c.kernel.score == ScoreKind::dot && std::bernoulli_distribution(0.3)(rng))
    c.kernel.scale = -c.kernel.scale;

  if (family == 3 && m > 1) {  // tied keys, and a key on a query (distance 0: ‖0‖^p = 0)
    c.y.row(m - 1) = c.y.row(0);
    c.y.row(0) = c.x.row(0);
  }
  if (family == 8) {  // separate maps, keys of another input width
    const Eigen::Index dp = pick<Eigen::Index>(rng, {1, 2, 4});
    const Eigen::Index dk = pick<Eigen::Index>(rng, {1, 3});
    c.y = gaussian(rng, m, dk);
    c.qmap = gaussian(rng, d, dp);
    c.kmap = gaussian(rng, dk, dp);
    c.has_qmap = true;
    c.key_map = KeyMap::separate;
  } else if ((family == 2 || family == 0) && std::bernoulli_distribution(0.5)(rng)) {  // one shared map
    c.qmap = gaussian(rng, d, pick<Eigen::Index>(rng, {1, 2, 3}));
    c.has_qmap = true;
    // Distance scores apply query_map to both (key_map null or the same); dot needs key_map = query_map.
    c.key_map = c.distance() ? pick(rng, {KeyMap::none, KeyMap::same}) : KeyMap::same;
  }

  std::normal_distribution<double> g(0, 1);
  switch (family) {
    case 4:  // −inf weights and huge finite ones
      c.has_w = true;
      c.w.resize(m);
      for (Eigen::Index j = 0; j < m; ++j) {
        const double r = std::uniform_real_distribution<double>(0, 1)(rng);
        c.w(j) = r < 0.3 ? -kInf : r < 0.45 ? 1e4 * g(rng) : 3 * g(rng);
      }
      break;
    case 5:
      c.has_w = true;
      c.w.resize(m);
      for (Eigen::Index j = 0; j < m; ++j) c.w(j) = std::bernoulli_distribution(0.3)(rng) ? -kInf : g(rng);
      break;
    case 6: {  // one key dominates every row by 1e4 (key 0 under the causal mask)
      c.has_w = true;
      c.w = Vector<double>::Zero(m);
      const Eigen::Index star =
          c.kernel.mask == MaskKind::causal ? 0 : std::uniform_int_distribution<Eigen::Index>(0, m - 1)(rng);
      c.w(star) = 1e4;
      break;
    }
    default:
      if (std::bernoulli_distribution(0.5)(rng)) {
        c.has_w = true;
        c.w = gaussian(rng, m, 1, 2);
        for (Eigen::Index j = 0; j < m; ++j)
          if (std::bernoulli_distribution(0.2)(rng)) c.w(j) = -kInf;
      }
  }
  ensure_visible(c, rng);
  // Logits of magnitude 1e4: dot scores in [−1e4, 1e4], or distances down to −1e4.
  if (family == 1) c.kernel.scale = std::copysign(1e4 / max_abs_dot(c), c.kernel.scale);
  if (family == 9 && max_sq_dist(c) > 0) c.kernel.scale = 1e4 / max_sq_dist(c);
  c.name = family_name + "#" + std::to_string(index) + " (n=" + std::to_string(n) +
           " m=" + std::to_string(m) + " d=" + std::to_string(d) + " " + to_string(c.kernel.score) +
           (c.kernel.score == ScoreKind::neg_dist_pow ? " p=" + std::to_string(c.kernel.power) : "") +
           " mask=" + to_string(c.kernel.mask) + (c.has_w ? " weights" : "") + (c.has_qmap ? " maps" : "") +
           ")";
  return c;
}

/// The case with every number rounded to float (so float, double and mpfr see the same inputs).
Case rounded_to_float(Case c) {
  auto round = [](double v) { return double(float(v)); };
  for (Matrix<double>* a : {&c.x, &c.y, &c.v, &c.b, &c.qmap, &c.kmap}) *a = a->unaryExpr(round);
  c.w = c.w.unaryExpr(round);
  c.kernel.scale = round(c.kernel.scale);
  c.kernel.power = round(c.kernel.power);
  c.name += " [float data]";
  return c;
}

/// The case with its linear maps applied in double (input of detail::reduce_generic).
Case projected(Case c) {
  const Matrix<double> xp = projected_queries(c), yp = projected_keys(c);
  c.x = xp;
  c.y = yp;
  c.has_qmap = false;
  c.key_map = KeyMap::none;
  return c;
}

// ---------------------------------------------------------------------------------------------------------
// The derived tolerance (see the header comment)
// ---------------------------------------------------------------------------------------------------------

enum class Form { difference, expanded };

struct Tolerance {
  Vector<double> lse, expected_score;
  Matrix<double> out, feature_mean, cross_moment, feature_second_moment;
  double max_log_kernel_error = 0;  ///< max_i A_i: the first-order analysis assumes it is small (≤ 0.1)
};

double gamma_k(double k, double u) { return k * u / (1 - k * u); }

Tolerance tolerance(const Case& c, const Vector<double>& lse, Form form, double u) {
  const Matrix<double> xp = projected_queries(c), yp = projected_keys(c);
  const Matrix<double>* kmap = c.applied_key_map();
  const Matrix<double> ax = c.has_qmap ? Matrix<double>(c.x.cwiseAbs() * c.qmap.cwiseAbs()) : c.x.cwiseAbs();
  const Matrix<double> ay = kmap ? Matrix<double>(c.y.cwiseAbs() * kmap->cwiseAbs()) : c.y.cwiseAbs();
  const double d_in = std::max(c.has_qmap ? double(c.x.cols()) : 0.0, kmap ? double(c.y.cols()) : 0.0);
  const double dp = double(xp.cols());
  const double k = d_in + dp + 2;
  const bool mapped = c.has_qmap || kmap != nullptr;
  const double scale = c.kernel.scale, p = c.kernel.power;
  const Eigen::Index n = c.x.rows(), m = c.y.rows(), e = c.v.cols(), f = c.b.cols();

  Tolerance t;
  t.lse.resize(n);
  t.expected_score.resize(n);
  t.out.resize(n, e);
  t.feature_mean.resize(n, f);
  t.cross_moment.resize(n, e * f);
  t.feature_second_moment.resize(n, f * f);
  for (Eigen::Index i = 0; i < n; ++i) {
    double a = 0, g = 0;
    Eigen::Index mi = 0;
    Vector<double> mv = Vector<double>::Zero(e), mb = Vector<double>::Zero(f);
    for (Eigen::Index j = 0; j < m; ++j) {
      if (!visible(c, i, j)) continue;
      ++mi;
      const double sum_abs = (ax.row(i).array() * ay.row(j).array()).sum();
      const double spread = (ax.row(i) + ay.row(j)).squaredNorm();
      const double q = (xp.row(i) - yp.row(j)).squaredNorm();
      double s = 0, es = 0;
      if (c.kernel.score == ScoreKind::dot) {
        s = scale * xp.row(i).dot(yp.row(j));
        es = gamma_k(k + 1, u) * std::abs(scale) * sum_abs;
      } else {
        const double eq =
            (form == Form::difference && !mapped) ? gamma_k(dp + 3, u) * q : 3 * gamma_k(k + 3, u) * spread;
        if (c.kernel.score == ScoreKind::neg_sq_dist) {
          s = -scale * q;
          es = scale * eq + u * std::abs(s);
        } else {
          const double dist = std::sqrt(q);
          s = -scale * std::pow(dist, p);
          const double dd = std::min(dist > 0 ? eq / (2 * dist) : kInf, std::sqrt(eq)) + u * dist;
          es = scale * (p * std::pow(dist + dd, p - 1) * dd + 2 * u * std::pow(dist, p)) + u * std::abs(s);
        }
      }
      const double err = es + u * (std::abs(s) + (c.has_w ? std::abs(c.w(j)) : 0.0));
      a = std::max(a, err);
      t.max_log_kernel_error = std::max(t.max_log_kernel_error, err);
      g = std::max(g, (form == Form::expanded && c.kernel.score == ScoreKind::neg_sq_dist) ? scale * spread
                                                                                           : std::abs(s));
      mv = mv.cwiseMax(c.v.row(j).cwiseAbs().transpose());
      mb = mb.cwiseMax(c.b.row(j).cwiseAbs().transpose());
    }
    const double l = (std::abs(lse(i)) + 2.0 * double(mi) + 2) * u;
    const double base = 2 * a + 2 * l + (double(mi) + 2) * u;
    t.lse(i) = 2 * (a + l);
    t.expected_score(i) = 2 * ((base + u) * g + a);
    for (Eigen::Index r = 0; r < e; ++r) t.out(i, r) = 2 * base * mv(r);
    for (Eigen::Index r = 0; r < f; ++r) t.feature_mean(i, r) = 2 * base * mb(r);
    for (Eigen::Index r = 0; r < e; ++r)
      for (Eigen::Index s = 0; s < f; ++s) t.cross_moment(i, r * f + s) = 2 * (base + u) * mv(r) * mb(s);
    for (Eigen::Index r = 0; r < f; ++r)
      for (Eigen::Index s = 0; s < f; ++s)
        t.feature_second_moment(i, r * f + s) = 2 * (base + u) * mb(r) * mb(s);
  }
  return t;
}

// ---------------------------------------------------------------------------------------------------------
// Comparisons
// ---------------------------------------------------------------------------------------------------------

/// Visits (name, got, reference, tolerance) of lse and every requested output entry.
template <class A, class B, class F>
void for_each_entry(const Request& rq, const Result<A>& a, const Result<B>& b, F&& visit) {
  auto matrices = [&](const char* name, const Matrix<A>& x, const Matrix<B>& y) {
    ASSERT_EQ(x.rows(), y.rows()) << name;
    ASSERT_EQ(x.cols(), y.cols()) << name;
    for (Eigen::Index i = 0; i < x.rows(); ++i)
      for (Eigen::Index k = 0; k < x.cols(); ++k) visit(name, i, k, x(i, k), y(i, k));
  };
  auto vectors = [&](const char* name, const Vector<A>& x, const Vector<B>& y) {
    ASSERT_EQ(x.size(), y.size()) << name;
    for (Eigen::Index i = 0; i < x.size(); ++i) visit(name, i, Eigen::Index(0), x(i), y(i));
  };
  vectors("lse", a.lse, b.lse);
  if (rq.out) matrices("out", a.out, b.out);
  if (rq.feature_mean) matrices("feature_mean", a.feature_mean, b.feature_mean);
  if (rq.cross_moment) matrices("cross_moment", a.cross_moment, b.cross_moment);
  if (rq.feature_second_moment)
    matrices("feature_second_moment", a.feature_second_moment, b.feature_second_moment);
  if (rq.expected_score) vectors("expected_score", a.expected_score, b.expected_score);
}

double tolerance_of(const Tolerance& t, const std::string& name, Eigen::Index i, Eigen::Index k) {
  if (name == "lse") return t.lse(i);
  if (name == "out") return t.out(i, k);
  if (name == "feature_mean") return t.feature_mean(i, k);
  if (name == "cross_moment") return t.cross_moment(i, k);
  if (name == "feature_second_moment") return t.feature_second_moment(i, k);
  return t.expected_score(i);
}

Vector<double> to_double(const Vector<mpfr>& a) {
  Vector<double> r(a.size());
  for (Eigen::Index i = 0; i < a.size(); ++i) r(i) = scalar_traits<mpfr>::to_double(a(i));
  return r;
}

/// |got − ref| ≤ tolerance for every entry; the difference is taken in mpfr (the working precision must be
/// the reference's). Returns the largest error / tolerance ratio.
template <class S>
double expect_close(const std::string& path, const Case& c, const Result<S>& got, const Result<mpfr>& ref,
                    Form form) {
  const Tolerance tol = tolerance(c, to_double(ref.lse), form, scalar_traits<S>::to_double(eps<S>()));
  EXPECT_LE(tol.max_log_kernel_error, 0.1) << path << " " << c.name << ": outside the first-order regime";
  int failures = 0;
  double worst = 0;
  for_each_entry(c.request, got, ref,
                 [&](const std::string& name, Eigen::Index i, Eigen::Index k, const S& x, const mpfr& r) {
                   const double err = scalar_traits<mpfr>::to_double(abs(mpfr(x) - r));
                   const double bound = tolerance_of(tol, name, i, k);
                   worst = std::max(worst, err / std::max(bound, std::numeric_limits<double>::min()));
                   if (!(err <= bound) && failures++ < 4)
                     ADD_FAILURE() << path << " " << c.name << ": " << name << "(" << i << ", " << k
                                   << ") = " << scalar_traits<S>::to_double(x) << ", mpfr-256 "
                                   << scalar_traits<mpfr>::to_double(r) << ", |error| " << err
                                   << " > derived tolerance " << bound;
                 });
  return worst;
}

struct Fixture {
  Case c, c_float;
  Result<mpfr> ref, ref_float;  // at 256 bits
};

/// The random cases and their 256-bit references, computed once for the whole binary.
const std::vector<Fixture>& fixtures() {
  static const std::vector<Fixture> all = [] {
    std::vector<Fixture> r;
    std::mt19937_64 rng(20240611);
    PrecisionGuard guard(256);
    for (int index = 0; index < 200; ++index) {
      Fixture fx;
      fx.c = random_case(rng, index);
      fx.c_float = rounded_to_float(fx.c);
      Converted<mpfr> p(fx.c), pf(fx.c_float);
      fx.ref = reduce<mpfr>(p.problem, fx.c.kernel, fx.c.request);
      fx.ref_float = reduce<mpfr>(pf.problem, fx.c_float.kernel, fx.c_float.request);
      r.push_back(std::move(fx));
    }
    return r;
  }();
  return all;
}

TEST(PairwiseAgainstMpfr, BlockedDouble) {
  double worst = 0;
  for (const Fixture& fx : fixtures()) {
    Converted<double> p(fx.c);
    const Result<double> got = reduce<double>(p.problem, fx.c.kernel, fx.c.request);
    PrecisionGuard guard(256);
    worst = std::max(worst, expect_close("reduce<double> (blocked)", fx.c, got, fx.ref, Form::expanded));
  }
  RecordProperty("worst_error_over_tolerance", std::to_string(worst));
}

TEST(PairwiseAgainstMpfr, BlockedFloat) {
  double worst = 0;
  for (const Fixture& fx : fixtures()) {
    Converted<float> p(fx.c_float);
    const Result<float> got = reduce<float>(p.problem, fx.c_float.kernel, fx.c_float.request);
    PrecisionGuard guard(256);
    worst = std::max(worst,
                     expect_close("reduce<float> (blocked)", fx.c_float, got, fx.ref_float, Form::expanded));
  }
  RecordProperty("worst_error_over_tolerance", std::to_string(worst));
}

TEST(PairwiseAgainstMpfr, GenericDouble) {
  double worst = 0;
  for (const Fixture& fx : fixtures()) {
    // reduce_generic takes a validated problem with the maps applied: project in double first (the rounding
    // of the projection is part of the derived tolerance through d_in).
    const Case pc = projected(fx.c);
    Converted<double> p(pc);
    validate(p.problem, pc.kernel, pc.request);
    const Result<double> got = detail::reduce_generic<double>(p.problem, pc.kernel, pc.request);
    PrecisionGuard guard(256);
    worst = std::max(worst, expect_close("reduce_generic<double>", fx.c, got, fx.ref, Form::difference));
  }
  RecordProperty("worst_error_over_tolerance", std::to_string(worst));
}

TEST(PairwiseAgainstMpfr, MaterializedDouble) {
  double worst = 0;
  for (const Fixture& fx : fixtures()) {
    Converted<double> p(fx.c);
    const Result<double> got = reduce_materialized<double>(p.problem, fx.c.kernel, fx.c.request);
    PrecisionGuard guard(256);
    worst = std::max(worst, expect_close("reduce_materialized<double>", fx.c, got, fx.ref, Form::difference));
  }
  RecordProperty("worst_error_over_tolerance", std::to_string(worst));
}

TEST(PairwiseAgainstMpfr, MaterializedMpfrAgreesWithStreamed) {
  // Two independent 256-bit computations (streamed / materialised) agree to the mpfr tolerance.
  for (const Fixture& fx : fixtures()) {
    PrecisionGuard guard(256);
    Converted<mpfr> p(fx.c);
    const Result<mpfr> got = reduce_materialized<mpfr>(p.problem, fx.c.kernel, fx.c.request);
    expect_close("reduce_materialized<mpfr>", fx.c, got, fx.ref, Form::difference);
  }
}

TEST(PairwiseInterval, EnclosesMpfr512) {
  for (const Fixture& fx : fixtures()) {
    Result<mpfr> ref;
    {
      PrecisionGuard guard(512);
      Converted<mpfr> p(fx.c);
      ref = reduce<mpfr>(p.problem, fx.c.kernel, fx.c.request);
    }
    Result<interval> iv;
    {
      PrecisionGuard guard(128);
      Converted<interval> p(fx.c);
      iv = reduce<interval>(p.problem, fx.c.kernel, fx.c.request);
    }
    int failures = 0;
    for_each_entry(
        fx.c.request, iv, ref,
        [&](const std::string& name, Eigen::Index i, Eigen::Index k, const interval& x, const mpfr& r) {
          if (!contains(x, r) && failures++ < 4)
            ADD_FAILURE() << fx.c.name << ": interval " << name << "(" << i << ", " << k << ") = ["
                          << lower_bound(x) << ", " << upper_bound(x) << "] misses mpfr-512 " << r;
          // Not vacuous: far narrower than double rounding (128-bit operations on inputs of at most
          // 24 keys and logits of 1e4 lose at most ~30 of the 128 bits).
          const double width = scalar_traits<interval>::to_double(scalar_traits<interval>::width(x));
          const double magnitude = 1 + std::abs(scalar_traits<mpfr>::to_double(r));
          if (!(width <= std::ldexp(magnitude, -60)) && failures++ < 4)
            ADD_FAILURE() << fx.c.name << ": interval " << name << "(" << i << ", " << k
                          << ") is too wide: " << width;
        });
  }
}

// ---------------------------------------------------------------------------------------------------------
// Invariants
// ---------------------------------------------------------------------------------------------------------

template <class S>
class PairwiseInvariants : public ::testing::Test {};

/// v as the endpoint type of the interval type S (mpfr for interval, double for interval64), for contains().
template <class S>
auto endpoint_value(double v) {
  if constexpr (std::is_same_v<S, interval>)
    return mpfr(v);
  else
    return v;
}
using AllScalars = testing::TypesOf<scalars::all>;
TYPED_TEST_SUITE(PairwiseInvariants, AllScalars, testing::ScalarNames);

/// Runs f under 256 bits for the multiprecision types.
template <class S, class F>
void at_precision(F&& f) {
  if constexpr (scalar_traits<S>::is_multiprecision) {
    PrecisionGuard guard(256);
    f();
  } else {
    f();
  }
}

TYPED_TEST(PairwiseInvariants, RowsOfPiSumToOne) {
  using S = TypeParam;
  for (const Fixture& fx : fixtures()) {
    Case c = fx.c_float;  // float-representable, so every type sees the same problem
    c.v = Matrix<double>::Ones(c.y.rows(), 1);
    c.request = Request{};
    at_precision<S>([&] {
      Converted<S> p(c);
      const Result<S> r = reduce<S>(p.problem, c.kernel, c.request);
      const double u = scalar_traits<S>::to_double(eps<S>());
      // Σ_j w_j·1 / Σ_j w_j: both sums of m non-negative terms (m u each) and one division.
      const double tol = (2.0 * double(c.y.rows()) + 4) * u;
      for (Eigen::Index i = 0; i < r.out.rows(); ++i) {
        if constexpr (scalar_traits<S>::is_interval) {
          EXPECT_TRUE(contains(r.out(i, 0), endpoint_value<S>(1.0))) << c.name << " row " << i;
        } else {
          EXPECT_LE(std::abs(scalar_traits<S>::to_double(r.out(i, 0)) - 1), tol) << c.name << " row " << i;
        }
      }
    });
  }
}

TYPED_TEST(PairwiseInvariants, OutputsInConvexHullOfVisibleValues) {
  using S = TypeParam;
  for (const Fixture& fx : fixtures()) {
    const Case& c = fx.c_float;
    at_precision<S>([&] {
      Converted<S> p(c);
      const Result<S> r = reduce<S>(p.problem, c.kernel, c.request);
      const double u = scalar_traits<S>::to_double(eps<S>());
      for (Eigen::Index i = 0; i < r.out.rows(); ++i)
        for (Eigen::Index k = 0; k < r.out.cols(); ++k) {
          double lo = kInf, hi = -kInf, mx = 0;
          for (Eigen::Index j = 0; j < c.y.rows(); ++j)
            if (visible(c, i, j)) {
              lo = std::min(lo, c.v(j, k));
              hi = std::max(hi, c.v(j, k));
              mx = std::max(mx, std::abs(c.v(j, k)));
            }
          const double slack = (double(c.y.rows()) + 2) * u * mx;  // weighted mean of m terms, one division
          const double got_lo = scalar_traits<S>::to_double(scalar_traits<S>::lower(r.out(i, k)));
          const double got_hi = scalar_traits<S>::to_double(scalar_traits<S>::upper(r.out(i, k)));
          if constexpr (scalar_traits<S>::is_interval) {  // the enclosure meets the hull
            EXPECT_TRUE(got_hi >= lo - slack && got_lo <= hi + slack)
                << c.name << " (" << i << ", " << k << ")";
          } else {
            EXPECT_GE(got_lo, lo - slack) << c.name << " (" << i << ", " << k << ")";
            EXPECT_LE(got_hi, hi + slack) << c.name << " (" << i << ", " << k << ")";
          }
        }
    });
  }
}

// Exactly v_0 for the point types (one visible term: weight exp(0) = 1); an enclosure of v_0 for interval.
TYPED_TEST(PairwiseInvariants, CausalRowZeroIsFirstValueExactly) {
  using S = TypeParam;
  for (const Fixture& fx : fixtures()) {
    Case c = fx.c_float;
    c.kernel.mask = MaskKind::causal;
    if (c.has_w && c.w(0) == -kInf) c.w(0) = 1.5;  // ω_0 finite
    at_precision<S>([&] {
      Converted<S> p(c);
      const Result<S> r = reduce<S>(p.problem, c.kernel, c.request);
      for (Eigen::Index k = 0; k < c.v.cols(); ++k) {
        if constexpr (scalar_traits<S>::is_interval) {  // w·v_0 / w with an interval weight w: an enclosure
          EXPECT_TRUE(contains(r.out(0, k), endpoint_value<S>(c.v(0, k))))
              << c.name << " out(0, " << k << ")";
          continue;
        }
        EXPECT_TRUE(lower_bound(scalar_cast<interval>(r.out(0, k))) == mpfr(c.v(0, k)) &&
                    upper_bound(scalar_cast<interval>(r.out(0, k))) == mpfr(c.v(0, k)))
            << c.name << " out(0, " << k << ") = " << scalar_traits<S>::to_double(r.out(0, k)) << " != v_0 "
            << c.v(0, k);
      }
    });
  }
}

/// Applies a permutation of the keys to keys, values, features and log-weights.
Case permute_keys(Case c, const std::vector<Eigen::Index>& perm) {
  auto rows = [&](Matrix<double>& a) {
    const Matrix<double> old = a;
    for (std::size_t j = 0; j < perm.size(); ++j) a.row(Eigen::Index(j)) = old.row(perm[j]);
  };
  rows(c.y);
  rows(c.v);
  rows(c.b);
  if (c.has_w) {
    const Vector<double> old = c.w;
    for (std::size_t j = 0; j < perm.size(); ++j) c.w(Eigen::Index(j)) = old(perm[j]);
  }
  return c;
}

TEST(PairwiseSymmetries, KeyPermutationLeavesOutputsUnchanged) {
  std::mt19937_64 rng(7);
  for (const Fixture& fx : fixtures()) {
    if (fx.c.kernel.mask != MaskKind::none) continue;  // masks are tied to key positions
    std::vector<Eigen::Index> perm(std::size_t(fx.c.y.rows()));
    std::iota(perm.begin(), perm.end(), Eigen::Index(0));
    std::shuffle(perm.begin(), perm.end(), rng);
    const Case pc = permute_keys(fx.c, perm);
    Converted<double> a(fx.c), b(pc);
    const Result<double> ra = reduce<double>(a.problem, fx.c.kernel, fx.c.request);
    const Result<double> rb = reduce<double>(b.problem, pc.kernel, pc.request);
    // Each is within the derived tolerance of the exact value, which the permutation does not change.
    const Tolerance tol = tolerance(fx.c, to_double(fx.ref.lse), Form::expanded, eps<double>());
    for_each_entry(fx.c.request, ra, rb,
                   [&](const std::string& name, Eigen::Index i, Eigen::Index k, double x, double y) {
                     EXPECT_LE(std::abs(x - y), 2 * tolerance_of(tol, name, i, k))
                         << fx.c.name << " " << name << "(" << i << ", " << k << ")";
                   });
    // In mpfr at 256 bits too (to its own, much smaller, tolerance).
    PrecisionGuard guard(256);
    Converted<mpfr> mb(pc);
    expect_close("reduce<mpfr> permuted keys", fx.c, reduce<mpfr>(mb.problem, pc.kernel, pc.request), fx.ref,
                 Form::difference);
  }
}

TEST(PairwiseSymmetries, NegSqDistIsTranslationInvariant) {
  // Coordinates are multiples of 2^-20 below 8 and the translation is an integer vector below 1000, so the
  // translated inputs are exact in double: only the paths' own rounding differs.
  std::mt19937_64 rng(11);
  for (int index = 0; index < 12; ++index) {
    Case c = random_case(rng, 10 * (index % 3) + 2);  // the self-l2 family ...
    if (index % 2 == 1) c = random_case(rng, 9);      // ... and the huge-logit one
    c.kernel.score = ScoreKind::neg_sq_dist;
    c.has_qmap = false;
    c.key_map = KeyMap::none;
    auto grid = [](double v) {
      return std::ldexp(std::round(std::ldexp(std::clamp(v, -7.0, 7.0), 20)), -20);
    };
    c.x = c.x.unaryExpr(grid);
    c.y = c.y.unaryExpr(grid);
    Case t = c;
    std::uniform_int_distribution<int> shift(-999, 999);
    for (Eigen::Index k = 0; k < c.x.cols(); ++k) {
      const double bk = shift(rng);
      t.x.col(k).array() += bk;
      t.y.col(k).array() += bk;
    }
    {  // mpfr, difference form: (x + b) − (y + b) = x − y exactly, so the results are identical.
      PrecisionGuard guard(256);
      Converted<mpfr> a(c), b(t);
      const Result<mpfr> ra = reduce<mpfr>(a.problem, c.kernel, c.request);
      const Result<mpfr> rb = reduce<mpfr>(b.problem, t.kernel, t.request);
      for_each_entry(
          c.request, ra, rb,
          [&](const std::string& name, Eigen::Index i, Eigen::Index k, const mpfr& x, const mpfr& y) {
            EXPECT_TRUE(x == y) << c.name << " mpfr " << name << "(" << i << ", " << k << ")";
          });
      // Blocked double: both within the derived tolerance (of their own inputs) of the same exact value.
      Converted<double> da(c), db(t);
      const Result<double> xa = reduce<double>(da.problem, c.kernel, c.request);
      const Result<double> xb = reduce<double>(db.problem, t.kernel, t.request);
      const Tolerance ta = tolerance(c, to_double(ra.lse), Form::expanded, eps<double>());
      const Tolerance tb = tolerance(t, to_double(rb.lse), Form::expanded, eps<double>());
      for_each_entry(c.request, xa, xb,
                     [&](const std::string& name, Eigen::Index i, Eigen::Index k, double x, double y) {
                       EXPECT_LE(std::abs(x - y), tolerance_of(ta, name, i, k) + tolerance_of(tb, name, i, k))
                           << c.name << " double " << name << "(" << i << ", " << k << ")";
                     });
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Input errors
// ---------------------------------------------------------------------------------------------------------

Case valid_case() {
  std::mt19937_64 rng(3);
  Case c;
  c.x = gaussian(rng, 4, 3);
  c.y = gaussian(rng, 5, 3);
  c.v = gaussian(rng, 5, 2);
  c.b = gaussian(rng, 5, 2);
  c.w = gaussian(rng, 5, 1);
  c.qmap = gaussian(rng, 3, 2);
  c.kmap = gaussian(rng, 3, 2);
  c.has_w = c.has_v = c.has_b = true;
  c.request.out = c.request.feature_mean = c.request.cross_moment = c.request.feature_second_moment =
      c.request.expected_score = true;
  return c;
}

struct ErrorCase {
  std::string what;
  std::string argument;  ///< must appear in the subject
  std::function<void(Case&)> mutate;
};

std::vector<ErrorCase> error_cases() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto dist = [](Case& c) { c.kernel.score = ScoreKind::neg_sq_dist; };
  return {
      {"null queries", "queries", [](Case& c) { c.null_queries = true; }},
      {"null keys", "keys", [](Case& c) { c.null_keys = true; }},
      {"no keys", "keys",
       [](Case& c) {
         c.y.resize(0, 3);
         c.v.resize(0, 2);
         c.b.resize(0, 2);
         c.w.resize(0);
       }},
      {"key width", "keys", [](Case& c) { c.y.conservativeResize(Eigen::NoChange, 2); }},
      {"log_weights size", "log_weights", [](Case& c) { c.w.conservativeResize(4); }},
      {"values rows", "values", [](Case& c) { c.v.conservativeResize(4, Eigen::NoChange); }},
      {"features rows", "features", [](Case& c) { c.b.conservativeResize(6, Eigen::NoChange); }},
      {"query_map rows", "query_map",
       [](Case& c) {
         c.has_qmap = true;
         c.qmap.conservativeResize(2, Eigen::NoChange);
         c.key_map = KeyMap::separate;
       }},
      {"key_map rows", "key_map",
       [](Case& c) {
         c.has_qmap = true;
         c.key_map = KeyMap::separate;
         c.kmap.conservativeResize(4, Eigen::NoChange);
       }},
      {"map widths", "key_map",
       [](Case& c) {
         c.has_qmap = true;
         c.key_map = KeyMap::separate;
         c.kmap.conservativeResize(Eigen::NoChange, 1);
       }},
      {"query_map alone changes the width", "query_map", [](Case& c) { c.has_qmap = true; }},
      {"NaN query", "queries", [=](Case& c) { c.x(2, 1) = nan; }},
      {"infinite key", "keys", [](Case& c) { c.y(0, 0) = -kInf; }},
      {"NaN value", "values", [=](Case& c) { c.v(4, 1) = nan; }},
      {"infinite feature", "features", [](Case& c) { c.b(1, 0) = kInf; }},
      {"NaN query_map", "query_map",
       [=](Case& c) {
         c.has_qmap = true;
         c.key_map = KeyMap::separate;
         c.qmap(1, 1) = nan;
       }},
      {"infinite key_map", "key_map",
       [](Case& c) {
         c.has_qmap = true;
         c.key_map = KeyMap::separate;
         c.kmap(0, 1) = kInf;
       }},
      {"NaN log-weight", "log_weights", [=](Case& c) { c.w(3) = nan; }},
      {"+inf log-weight", "log_weights", [](Case& c) { c.w(1) = kInf; }},
      {"all log-weights -inf", "log_weights", [](Case& c) { c.w.setConstant(-kInf); }},
      {"infinite scale (dot)", "scale", [](Case& c) { c.kernel.scale = kInf; }},
      {"NaN scale (dot)", "scale", [=](Case& c) { c.kernel.scale = nan; }},
      {"zero scale (neg_sq_dist)", "scale",
       [=](Case& c) {
         dist(c);
         c.kernel.scale = 0;
       }},
      {"negative scale (neg_dist_pow)", "scale",
       [](Case& c) {
         c.kernel.score = ScoreKind::neg_dist_pow;
         c.kernel.scale = -1;
       }},
      {"power below 1", "power",
       [](Case& c) {
         c.kernel.score = ScoreKind::neg_dist_pow;
         c.kernel.power = 0.5;
       }},
      {"infinite power", "power",
       [](Case& c) {
         c.kernel.score = ScoreKind::neg_dist_pow;
         c.kernel.power = kInf;
       }},
      {"NaN power", "power",
       [=](Case& c) {
         c.kernel.score = ScoreKind::neg_dist_pow;
         c.kernel.power = nan;
       }},
      {"out without values", "values", [](Case& c) { c.has_v = false; }},
      {"cross_moment without values", "values",
       [](Case& c) {
         c.has_v = false;
         c.request.out = false;
       }},
      {"feature_mean without features", "features",
       [](Case& c) {
         c.has_b = false;
         c.request.cross_moment = c.request.feature_second_moment = false;
       }},
      {"cross_moment without features", "features",
       [](Case& c) {
         c.has_b = false;
         c.request.feature_mean = c.request.feature_second_moment = false;
       }},
      {"feature_second_moment without features", "features",
       [](Case& c) {
         c.has_b = false;
         c.request.feature_mean = c.request.cross_moment = false;
       }},
      {"separate key_map for a distance score", "key_map",
       [=](Case& c) {
         dist(c);
         c.has_qmap = true;
         c.key_map = KeyMap::separate;
       }},
      {"causal: row 0 sees only -inf", "log_weights",
       [](Case& c) {
         c.kernel.mask = MaskKind::causal;
         c.w(0) = c.w(1) = -kInf;
       }},
      {"anticausal: more queries than keys", "mask",
       [](Case& c) {
         c.kernel.mask = MaskKind::anticausal;
         c.x = Matrix<double>::Constant(6, 3, 0.5);
       }},
      {"anticausal: last row sees only -inf", "log_weights",
       [](Case& c) {
         c.kernel.mask = MaskKind::anticausal;
         c.w(3) = c.w(4) = -kInf;
       }},
  };
}

template <class S>
class PairwiseErrors : public ::testing::Test {};
TYPED_TEST_SUITE(PairwiseErrors, AllScalars, testing::ScalarNames);

TYPED_TEST(PairwiseErrors, EveryBadInputThrowsOneLineNamingTheArgument) {
  using S = TypeParam;
  for (const ErrorCase& ec : error_cases()) {
    Case c = valid_case();
    ec.mutate(c);
    at_precision<S>([&] {
      Converted<S> p(c);
      auto check = [&](const char* entry, auto&& call) {
        try {
          call();
          ADD_FAILURE() << entry << ": no InputError for " << ec.what;
        } catch (const InputError& e) {
          const std::string msg = e.what();
          EXPECT_EQ(msg.find('\n'), std::string::npos) << ec.what << ": " << msg;
          EXPECT_EQ(e.subject().rfind("pairwise ", 0), 0u) << ec.what << ": " << msg;
          EXPECT_NE(e.subject().find(ec.argument), std::string::npos)
              << ec.what << ": subject should name " << ec.argument << ": " << msg;
          EXPECT_FALSE(e.problem().empty()) << ec.what;
        }
      };
      check("validate", [&] { validate<S>(p.problem, c.kernel, c.request); });
      check("reduce", [&] { (void)reduce<S>(p.problem, c.kernel, c.request); });
      check("reduce_materialized", [&] { (void)reduce_materialized<S>(p.problem, c.kernel, c.request); });
    });
  }
}

TYPED_TEST(PairwiseErrors, AcceptedCornerInputs) {
  using S = TypeParam;
  std::vector<std::pair<std::string, std::function<void(Case&)>>> ok = {
      {"-inf log-weights", [](Case& c) { c.w(0) = c.w(3) = -kInf; }},
      {"negative and zero dot scale", [](Case& c) { c.kernel.scale = -2; }},
      {"zero dot scale", [](Case& c) { c.kernel.scale = 0; }},
      {"causal with more queries than keys",
       [](Case& c) {
         c.kernel.mask = MaskKind::causal;
         c.x = Matrix<double>::Constant(9, 3, 0.5);
         c.w(1) = c.w(2) = -kInf;
       }},
      {"anticausal, square",
       [](Case& c) {
         c.kernel.mask = MaskKind::anticausal;
         c.x = Matrix<double>::Constant(5, 3, 0.5);
         c.w(0) = -kInf;
       }},
      {"key_map same as query_map for a distance score",
       [](Case& c) {
         c.kernel.score = ScoreKind::neg_dist_pow;
         c.kernel.power = 1.25;
         c.has_qmap = true;
         c.key_map = KeyMap::same;
       }},
      {"dot with separate maps",
       [](Case& c) {
         c.has_qmap = true;
         c.key_map = KeyMap::separate;
       }},
      {"no queries",
       [](Case& c) {
         c.kernel.mask = MaskKind::anticausal;
         c.x.resize(0, 3);
       }},
      {"nothing but lse",
       [](Case& c) {
         c.has_v = c.has_b = c.has_w = false;
         c.request = Request{};
         c.request.out = false;
       }},
  };
  for (auto& entry : ok) {  // not a structured binding: clang 14 cannot capture one in the lambda below
    const auto& what = entry.first;
    Case c = valid_case();
    entry.second(c);
    at_precision<S>([&] {
      Converted<S> p(c);
      EXPECT_NO_THROW(validate<S>(p.problem, c.kernel, c.request)) << what;
      Result<S> r;
      EXPECT_NO_THROW(r = reduce<S>(p.problem, c.kernel, c.request)) << what;
      EXPECT_NO_THROW((void)reduce_materialized<S>(p.problem, c.kernel, c.request)) << what;
      EXPECT_EQ(r.lse.size(), c.x.rows()) << what;
      for (Eigen::Index i = 0; i < r.lse.size(); ++i)
        EXPECT_TRUE(scalar_traits<S>::is_finite(r.lse(i))) << what << " row " << i;
    });
  }
}

// ---------------------------------------------------------------------------------------------------------
// log_kernel_matrix
// ---------------------------------------------------------------------------------------------------------

TEST(PairwiseLogKernel, MatchesDirectScores) {
  for (ScoreKind score : {ScoreKind::dot, ScoreKind::neg_sq_dist, ScoreKind::neg_dist_pow}) {
    Case c = valid_case();
    c.kernel.score = score;
    c.kernel.scale = 0.75;
    c.kernel.power = 1.5;
    c.kernel.mask = MaskKind::causal;
    c.w(2) = -kInf;
    Converted<double> p(c);
    const Matrix<double> t = log_kernel_matrix<double>(p.problem, c.kernel);
    ASSERT_EQ(t.rows(), c.x.rows());
    ASSERT_EQ(t.cols(), c.y.rows());
    const Tolerance tol = tolerance(c, Vector<double>::Zero(c.x.rows()), Form::difference, eps<double>());
    PrecisionGuard guard(256);
    for (Eigen::Index i = 0; i < t.rows(); ++i)
      for (Eigen::Index j = 0; j < t.cols(); ++j) {
        if (!visible(c, i, j)) {
          EXPECT_EQ(t(i, j), -kInf) << i << ", " << j;
          continue;
        }
        mpfr s(0);
        for (Eigen::Index k = 0; k < c.x.cols(); ++k) {
          const mpfr xk(c.x(i, k)), yk(c.y(j, k));
          s += score == ScoreKind::dot ? mpfr(xk * yk) : mpfr((xk - yk) * (xk - yk));
        }
        if (score == ScoreKind::neg_dist_pow) s = pow(sqrt(s), mpfr(c.kernel.power));
        const mpfr exact =
            (score == ScoreKind::dot ? mpfr(c.kernel.scale) : mpfr(-c.kernel.scale)) * s + c.w(j);
        // lse tolerance at lse = 0 is 2·(A + (2m+2)u) ≥ 2·E_ij: a bound on the error of every visible t_ij.
        EXPECT_LE(scalar_traits<mpfr>::to_double(abs(mpfr(t(i, j)) - exact)), tol.lse(i))
            << to_string(score) << " t(" << i << ", " << j << ")";
      }
  }
}

TEST(PairwiseLogKernel, RefusesHugeSizesWithoutAllocating) {
  // 2^15 × 2^15 = 2^30 entries > max_materialized_entries = 2^28 (8 GiB of doubles), and 2^20 × 2^20 whose
  // product would overflow a naive 32-bit count: both refused with InputError before any allocation (an
  // attempt to allocate 2^40 doubles would surface as std::bad_alloc, not InputError).
  for (Eigen::Index n : {Eigen::Index(1) << 15, Eigen::Index(1) << 20}) {
    Matrix<double> x = Matrix<double>::Zero(n, 1), y = Matrix<double>::Zero(n, 1),
                   v = Matrix<double>::Zero(n, 1);
    Problem<double> p;
    p.queries = &x;
    p.keys = &y;
    p.values = &v;
    EXPECT_THROW((void)log_kernel_matrix<double>(p, Kernel{}), InputError);
    EXPECT_THROW((void)reduce_materialized<double>(p, Kernel{}), InputError);
    try {
      (void)log_kernel_matrix<double>(p, Kernel{});
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("max_materialized_entries"), std::string::npos) << e.what();
    }
  }
}

TEST(PairwiseNames, ToString) {
  EXPECT_EQ(to_string(ScoreKind::dot), "dot");
  EXPECT_EQ(to_string(ScoreKind::neg_sq_dist), "neg_sq_dist");
  EXPECT_EQ(to_string(ScoreKind::neg_dist_pow), "neg_dist_pow");
  EXPECT_EQ(to_string(MaskKind::none), "none");
  EXPECT_EQ(to_string(MaskKind::causal), "causal");
  EXPECT_EQ(to_string(MaskKind::anticausal), "anticausal");
}

}  // namespace
}  // namespace regatta::pairwise
