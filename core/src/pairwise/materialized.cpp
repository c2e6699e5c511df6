// The materialised reference of regatta::pairwise: the n×m matrices of scores s_ij and log-kernel entries
// t_ij = s_ij + ω_j are built in full, then every row is reduced with logsumexp / softmax (log_sum_exp.hpp)
// and the outputs are plain sums Σ_j π_ij · (…). Deliberately a different computation from the streamed
// paths (no LogSumExp rescaling of accumulators, its own linear maps and scores), so that tests compare two
// independent implementations. Scores use the difference form ‖x − y‖²; interval arithmetic throughout for
// interval (every entry is then a certified enclosure).
#include <mpfi.h>
#include <mpfr.h>

#include <cmath>
#include <regatta/core/convert.hpp>
#include <regatta/core/detail/scalar_math.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/log_sum_exp.hpp>
#include <regatta/core/pairwise.hpp>
#include <regatta/core/precision.hpp>
#include <span>
#include <string>
#include <type_traits>

namespace regatta::pairwise {

namespace {

/// The double v as S (scalar_cast: exact for mpfr at >= 53 bits, an outward enclosure for interval at any
/// precision, rounded to nearest for float).
template <class S>
S exact(double v) {
  return scalar_cast<S>(v);
}

/// a carried at the working precision (a copy for IEEE types).
template <class S, class M>
M lifted(const M& a) {
  return regatta::detail::at_working_precision_all(a);
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
  if (problem.query_map != nullptr) x = regatta::detail::plain_product(x, lifted<S>(*problem.query_map));
  if (kmap != nullptr) y = regatta::detail::plain_product(y, lifted<S>(*kmap));
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
        for (Eigen::Index k = 0; k < x.cols(); ++k) s += regatta::detail::square<S>(x(i, k) - y(j, k));
        if (kernel.score == ScoreKind::neg_dist_pow && kernel.power != 2.0) {
          using std::sqrt;
          s = regatta::detail::pow_nonnegative<S>(S(sqrt(s)), power);
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
            r.feature_second_moment(i, c * f + l) +=
                p * (c == l ? regatta::detail::square<S>(b(j, c)) : S(b(j, c) * b(j, l)));
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
