// The materialised reference of regatta::pairwise: the n×m matrices of scores s_ij and log-kernel entries
// t_ij = s_ij + ω_j are built in full, then every row is reduced with logsumexp / softmax (log_sum_exp.hpp)
// and the outputs are plain sums Σ_j π_ij · (…). Deliberately a different computation from the streamed
// paths (no LogSumExp rescaling of accumulators, its own linear maps and scores), so that tests compare two
// independent implementations. Scores use the difference form ‖x − y‖²; interval arithmetic throughout for
// interval (every entry is then a certified enclosure).
#include <mpfi.h>
#include <mpfr.h>

#include <cmath>
#include <regatta/core/error.hpp>
#include <regatta/core/log_sum_exp.hpp>
#include <regatta/core/pairwise.hpp>
#include <regatta/core/precision.hpp>
#include <span>
#include <string>
#include <type_traits>

namespace regatta::pairwise {

namespace {

bool is_distance(ScoreKind kind) { return kind == ScoreKind::neg_sq_dist || kind == ScoreKind::neg_dist_pow; }

/// The double v as S (an outward-rounded enclosure for interval at any precision).
template <class S>
S exact(double v) {
  if constexpr (std::is_same_v<S, interval>) {
    interval r;
    mpfi_set_d(r.backend().data(), v);
    return r;
  } else if constexpr (std::is_same_v<S, mpfr>) {
    mpfr r;
    mpfr_set_d(r.backend().data(), v, MPFR_RNDN);
    return r;
  } else {
    return static_cast<S>(v);
  }
}

/// a carried at the working precision (a copy for IEEE types).
template <class S, class M>
M lifted(const M& a) {
  if constexpr (std::is_floating_point_v<S>) {
    return a;
  } else {
    M r(a.rows(), a.cols());
    for (Eigen::Index i = 0; i < a.rows(); ++i)
      for (Eigen::Index j = 0; j < a.cols(); ++j) r(i, j) = at_working_precision(a(i, j));
    return r;
  }
}

template <class S>
Matrix<S> times(const Matrix<S>& a, const Matrix<S>& b) {  // a plain triple loop, not Eigen's GEMM
  Matrix<S> r(a.rows(), b.cols());
  for (Eigen::Index i = 0; i < a.rows(); ++i)
    for (Eigen::Index c = 0; c < b.cols(); ++c) {
      S acc(0);
      for (Eigen::Index k = 0; k < a.cols(); ++k) acc += a(i, k) * b(k, c);
      r(i, c) = acc;
    }
  return r;
}

template <class S>
S sqr(const S& x) {
  if constexpr (std::is_same_v<S, interval>) {  // tight square ⊆ [0, ∞)
    interval r;
    mpfi_sqr(r.backend().data(), x.backend().data());
    return r;
  } else {
    return x * x;
  }
}

/// dist^p, dist >= 0, p >= 1; for interval the corners of [a, b] × [p_lo, p_hi] rounded outward
/// (x^p is increasing in x >= 0 and monotone in p).
template <class S>
S pow_nonnegative(const S& dist, const S& p) {
  if constexpr (std::is_same_v<S, interval>) {
    const mpfr a = lower_bound(dist), b = upper_bound(dist), p_lo = lower_bound(p), p_hi = upper_bound(p);
    mpfr l1, l2, h1, h2;
    mpfr_pow(l1.backend().data(), a.backend().data(), p_lo.backend().data(), MPFR_RNDD);
    mpfr_pow(l2.backend().data(), a.backend().data(), p_hi.backend().data(), MPFR_RNDD);
    mpfr_pow(h1.backend().data(), b.backend().data(), p_lo.backend().data(), MPFR_RNDU);
    mpfr_pow(h2.backend().data(), b.backend().data(), p_hi.backend().data(), MPFR_RNDU);
    return make_interval(l1 < l2 ? l1 : l2, h1 > h2 ? h1 : h2);
  } else {
    using std::pow;
    return pow(dist, p);
  }
}

template <class S>
struct Materialized {
  Matrix<S> scores;  ///< s_ij (0 where masked or ω_j = −inf: never used there)
  Matrix<S> t;       ///< s_ij + ω_j, −inf where hidden
};

/// Validated problem → scores and log-kernel; throws InputError when n·m is too large (before allocating).
template <class S>
Materialized<S> materialize(const Problem<S>& problem, const Kernel& kernel) {
  const Eigen::Index n = problem.queries->rows(), m = problem.keys->rows();
  if (m > 0 && n > max_materialized_entries / m)
    throw InputError("pairwise queries", "the materialised kernel would have " + std::to_string(n) + " x " +
                                             std::to_string(m) +
                                             " entries, more than max_materialized_entries = " +
                                             std::to_string(max_materialized_entries) + "; use reduce()");
  Matrix<S> x = lifted<S>(*problem.queries), y = lifted<S>(*problem.keys);
  const Matrix<S>* kmap = is_distance(kernel.score) ? problem.query_map : problem.key_map;
  if (problem.query_map != nullptr) x = times(x, lifted<S>(*problem.query_map));
  if (kmap != nullptr) y = times(y, lifted<S>(*kmap));
  Vector<S> w;
  if (problem.log_weights != nullptr) w = lifted<S>(*problem.log_weights);

  const S scale = exact<S>(kernel.scale), power = exact<S>(kernel.power);
  const S minus_infinity = -scalar_traits<S>::infinity();
  Materialized<S> r{Matrix<S>(n, m), Matrix<S>(n, m)};
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < m; ++j) {
      const bool masked =
          (kernel.mask == MaskKind::causal && j > i) || (kernel.mask == MaskKind::anticausal && j < i);
      if (masked || (w.size() > 0 && ReductionOps<S>::is_neg_inf(w(j)))) {
        r.scores(i, j) = S(0);
        r.t(i, j) = minus_infinity;
        continue;
      }
      S s(0);
      if (kernel.score == ScoreKind::dot) {
        for (Eigen::Index k = 0; k < x.cols(); ++k) s += x(i, k) * y(j, k);
        s = scale * s;
      } else {
        for (Eigen::Index k = 0; k < x.cols(); ++k) s += sqr<S>(x(i, k) - y(j, k));
        if (kernel.score == ScoreKind::neg_dist_pow && kernel.power != 2.0) {
          using std::sqrt;
          s = pow_nonnegative<S>(S(sqrt(s)), power);
        }
        s = -(scale * s);
      }
      r.scores(i, j) = s;
      r.t(i, j) = w.size() > 0 ? S(s + w(j)) : s;
    }
  return r;
}

Request nothing_requested() {
  Request r;
  r.out = false;
  return r;
}

}  // namespace

template <class S>
Matrix<S> log_kernel_matrix(const Problem<S>& problem, const Kernel& kernel) {
  validate(problem, kernel, nothing_requested());
  return materialize(problem, kernel).t;
}

template <class S>
Result<S> reduce_materialized(const Problem<S>& problem, const Kernel& kernel, const Request& request) {
  validate(problem, kernel, request);
  const Materialized<S> k = materialize(problem, kernel);
  const Eigen::Index n = k.t.rows(), m = k.t.cols();
  const Matrix<S> v = problem.values ? lifted<S>(*problem.values) : Matrix<S>();
  const Matrix<S> b = problem.features ? lifted<S>(*problem.features) : Matrix<S>();
  const Eigen::Index e = v.cols(), f = b.cols();

  Result<S> r;
  r.lse = logsumexp_rows<S>(k.t);
  const Matrix<S> pi = softmax_rows<S>(k.t);
  if (request.out) r.out = Matrix<S>::Zero(n, e);
  if (request.feature_mean) r.feature_mean = Matrix<S>::Zero(n, f);
  if (request.cross_moment) r.cross_moment = Matrix<S>::Zero(n, e * f);
  if (request.feature_second_moment) r.feature_second_moment = Matrix<S>::Zero(n, f * f);
  if (request.expected_score) r.expected_score = Vector<S>::Zero(n);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < m; ++j) {
      const S& p = pi(i, j);
      if (request.out)
        for (Eigen::Index c = 0; c < e; ++c) r.out(i, c) += p * v(j, c);
      if (request.feature_mean)
        for (Eigen::Index c = 0; c < f; ++c) r.feature_mean(i, c) += p * b(j, c);
      if (request.cross_moment)
        for (Eigen::Index c = 0; c < e; ++c)
          for (Eigen::Index l = 0; l < f; ++l) r.cross_moment(i, c * f + l) += p * (v(j, c) * b(j, l));
      if (request.feature_second_moment)
        for (Eigen::Index c = 0; c < f; ++c)
          for (Eigen::Index l = 0; l < f; ++l)
            r.feature_second_moment(i, c * f + l) += p * (c == l ? sqr<S>(b(j, c)) : S(b(j, c) * b(j, l)));
      if (request.expected_score) r.expected_score(i) += p * k.scores(i, j);
    }
  return r;
}

#define REGATTA_PAIRWISE_MATERIALIZED(S)                                     \
  template Matrix<S> log_kernel_matrix<S>(const Problem<S>&, const Kernel&); \
  template Result<S> reduce_materialized<S>(const Problem<S>&, const Kernel&, const Request&);
REGATTA_FOR_EACH_SCALAR(REGATTA_PAIRWISE_MATERIALIZED)
#undef REGATTA_PAIRWISE_MATERIALIZED

}  // namespace regatta::pairwise
