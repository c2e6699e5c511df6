#pragma once
// The shared part of the pairwise::reduce tests (reduce_test.cpp, reduce_invariants_test.cpp,
// reduce_errors_test.cpp): the corner-biased random cases, their exact conversion to every scalar type, the
// derived tolerance (its derivation is the header comment of reduce_test.cpp) and the 256-bit references.
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

namespace regatta::pairwise::reduce_test {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

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

inline Matrix<double> gaussian(std::mt19937_64& rng, Eigen::Index rows, Eigen::Index cols, double sd = 1) {
  std::normal_distribution<double> g(0, sd);
  Matrix<double> a(rows, cols);
  for (Eigen::Index i = 0; i < a.size(); ++i) a.data()[i] = g(rng);
  return a;
}

inline Matrix<double> projected_queries(const Case& c) {
  return c.has_qmap ? Matrix<double>(c.x * c.qmap) : c.x;
}
inline Matrix<double> projected_keys(const Case& c) {
  const Matrix<double>* k = c.applied_key_map();
  return k ? Matrix<double>(c.y * *k) : c.y;
}

inline bool visible(const Case& c, Eigen::Index i, Eigen::Index j) {
  if (c.kernel.mask == MaskKind::causal && j > i) return false;
  if (c.kernel.mask == MaskKind::anticausal && j < i) return false;
  return !(c.has_w && c.w(j) == -kInf);
}

/// Makes every row see a key: a finite log-weight on key 0 (causal), key m−1 (anticausal) or some key.
inline void ensure_visible(Case& c, std::mt19937_64& rng) {
  if (!c.has_w) return;
  const Eigen::Index m = c.y.rows();
  if (c.kernel.mask == MaskKind::causal && c.w(0) == -kInf) c.w(0) = 0.25;
  if (c.kernel.mask == MaskKind::anticausal && c.w(m - 1) == -kInf) c.w(m - 1) = -0.5;
  if ((c.w.array() == -kInf).all()) c.w(std::uniform_int_distribution<Eigen::Index>(0, m - 1)(rng)) = 1;
}

inline double max_abs_dot(const Case& c) {
  const Matrix<double> xp = projected_queries(c), yp = projected_keys(c);
  return (xp * yp.transpose()).cwiseAbs().maxCoeff();
}

inline double max_sq_dist(const Case& c) {
  const Matrix<double> xp = projected_queries(c), yp = projected_keys(c);
  double mx = 0;
  for (Eigen::Index i = 0; i < xp.rows(); ++i)
    for (Eigen::Index j = 0; j < yp.rows(); ++j) mx = std::max(mx, (xp.row(i) - yp.row(j)).squaredNorm());
  return mx;
}

inline Case random_case(std::mt19937_64& rng, int index) {
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
inline Case rounded_to_float(Case c) {
  auto round = [](double v) { return double(float(v)); };
  for (Matrix<double>* a : {&c.x, &c.y, &c.v, &c.b, &c.qmap, &c.kmap}) *a = a->unaryExpr(round);
  c.w = c.w.unaryExpr(round);
  c.kernel.scale = round(c.kernel.scale);
  c.kernel.power = round(c.kernel.power);
  c.name += " [float data]";
  return c;
}

/// The case with its linear maps applied in double (input of detail::reduce_generic).
inline Case projected(Case c) {
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

inline double gamma_k(double k, double u) { return k * u / (1 - k * u); }

inline Tolerance tolerance(const Case& c, const Vector<double>& lse, Form form, double u) {
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

inline double tolerance_of(const Tolerance& t, const std::string& name, Eigen::Index i, Eigen::Index k) {
  if (name == "lse") return t.lse(i);
  if (name == "out") return t.out(i, k);
  if (name == "feature_mean") return t.feature_mean(i, k);
  if (name == "cross_moment") return t.cross_moment(i, k);
  if (name == "feature_second_moment") return t.feature_second_moment(i, k);
  return t.expected_score(i);
}

inline Vector<double> to_double(const Vector<mpfr>& a) {
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
inline const std::vector<Fixture>& fixtures() {
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

using AllScalars = testing::TypesOf<scalars::all>;

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

}  // namespace regatta::pairwise::reduce_test
