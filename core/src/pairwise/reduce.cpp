// regatta::pairwise::reduce — input validation, the optional linear maps, and the dispatch to the blocked
// CPU path (float, double) or the generic one-term-at-a-time path (mpfr, interval).
#include <algorithm>
#include <cmath>
#include <regatta/core/checks.hpp>
#include <regatta/core/decimal.hpp>
#include <regatta/core/detail/pairwise_paths.hpp>
#include <regatta/core/detail/product.hpp>
#include <regatta/core/detail/scalar_math.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/log_sum_exp.hpp>  // ReductionOps of the multiprecision types
#include <regatta/core/pairwise.hpp>
#include <sstream>
#include <string>
#include <type_traits>

namespace regatta::pairwise {

std::string to_string(ScoreKind kind) {
  switch (kind) {
    case ScoreKind::dot:
      return "dot";
    case ScoreKind::neg_sq_dist:
      return "neg_sq_dist";
    case ScoreKind::neg_dist_pow:
      return "neg_dist_pow";
  }
  return "unknown";
}

std::string to_string(MaskKind kind) {
  switch (kind) {
    case MaskKind::none:
      return "none";
    case MaskKind::causal:
      return "causal";
    case MaskKind::anticausal:
      return "anticausal";
  }
  return "unknown";
}

namespace {

// Every message names the argument as "pairwise <argument>" and states the problem on one line.
[[noreturn]] void fail(const std::string& argument, const std::string& problem) {
  throw InputError("pairwise " + argument, problem);
}

template <class S>
void require_rows(const std::string& argument, const Matrix<S>& a, Eigen::Index rows, const char* why) {
  if (a.rows() != rows)
    fail(argument,
         "expected " + std::to_string(rows) + " rows (" + why + "), got " + std::to_string(a.rows()));
}

/// A log-weight must be finite or exactly −inf (for an interval: both endpoints −inf).
template <class S>
bool is_minus_infinity(const S& w) {
  return ReductionOps<S>::is_neg_inf(w);
}

}  // namespace

template <class S>
void validate(const Problem<S>& problem, const Kernel& kernel, const Request& request) {
  // ---- presence and shapes ----
  if (problem.queries == nullptr) fail("queries", "is required but null");
  if (problem.keys == nullptr) fail("keys", "is required but null");
  const Matrix<S>& x = *problem.queries;
  const Matrix<S>& y = *problem.keys;
  const Eigen::Index m = y.rows();
  if (m == 0) fail("keys", "has no rows: every query needs at least one key");

  const bool distance = is_distance(kernel.score);
  if (distance && problem.key_map != nullptr && problem.key_map != problem.query_map)
    fail("key_map", "must be null or the same matrix as query_map for the " + to_string(kernel.score) +
                        " score (one map is applied to queries and keys)");
  // The maps actually applied to queries and keys.
  const Matrix<S>* qmap = problem.query_map;
  const Matrix<S>* kmap = distance ? problem.query_map : problem.key_map;
  if (qmap != nullptr) require_rows("query_map", *qmap, x.cols(), "one per query coordinate");
  if (kmap != nullptr)
    require_rows(kmap == problem.key_map ? "key_map" : "query_map", *kmap, y.cols(),
                 "one per key coordinate");
  const Eigen::Index qwidth = qmap ? qmap->cols() : x.cols();
  const Eigen::Index kwidth = kmap ? kmap->cols() : y.cols();
  if (qwidth != kwidth) {
    const std::string argument = problem.key_map ? "key_map" : (qmap ? "query_map" : "keys");
    fail(argument, "queries and keys must have the same width after the linear maps: queries " +
                       std::to_string(qwidth) + ", keys " + std::to_string(kwidth));
  }
  if (problem.log_weights != nullptr && problem.log_weights->size() != m)
    fail("log_weights", "expected " + std::to_string(m) + " entries (one per key), got " +
                            std::to_string(problem.log_weights->size()));
  if (problem.values != nullptr) require_rows("values", *problem.values, m, "one per key");
  if (problem.features != nullptr) require_rows("features", *problem.features, m, "one per key");

  // ---- requested outputs need their inputs ----
  if (request.out && problem.values == nullptr) fail("values", "is null but request.out needs it");
  if (request.cross_moment && problem.values == nullptr)
    fail("values", "is null but request.cross_moment needs it");
  if (request.feature_mean && problem.features == nullptr)
    fail("features", "is null but request.feature_mean needs it");
  if (request.cross_moment && problem.features == nullptr)
    fail("features", "is null but request.cross_moment needs it");
  if (request.feature_second_moment && problem.features == nullptr)
    fail("features", "is null but request.feature_second_moment needs it");

  // ---- kernel parameters ----
  if (distance) {
    if (!(kernel.scale > 0) || !std::isfinite(kernel.scale))
      fail("kernel.scale", "must be positive and finite for the " + to_string(kernel.score) + " score, got " +
                               nearest_decimal(kernel.scale, 17));
  } else if (!std::isfinite(kernel.scale)) {
    fail("kernel.scale", "must be finite, got " + nearest_decimal(kernel.scale, 17));
  }
  if (kernel.score == ScoreKind::neg_dist_pow && (!(kernel.power >= 1) || !std::isfinite(kernel.power)))
    fail("kernel.power", "must be finite and >= 1, got " + nearest_decimal(kernel.power, 17));
  if (kernel.mask != MaskKind::none && kernel.mask != MaskKind::causal && kernel.mask != MaskKind::anticausal)
    fail("kernel.mask", "unknown mask kind");
  if (kernel.score != ScoreKind::dot && !distance) fail("kernel.score", "unknown score kind");

  // ---- finiteness ----
  check_finite("pairwise queries", x);
  check_finite("pairwise keys", y);
  if (problem.values != nullptr) check_finite("pairwise values", *problem.values);
  if (problem.features != nullptr) check_finite("pairwise features", *problem.features);
  if (problem.query_map != nullptr) check_finite("pairwise query_map", *problem.query_map);
  if (problem.key_map != nullptr && problem.key_map != problem.query_map)
    check_finite("pairwise key_map", *problem.key_map);
  // Log-weights: finite or −inf (a zero weight); NaN and +inf are errors. first_visible / last_visible are
  // the first and last keys with a finite log-weight.
  Eigen::Index first_visible = 0, last_visible = m - 1;
  if (problem.log_weights != nullptr) {
    const Vector<S>& w = *problem.log_weights;
    first_visible = -1;
    last_visible = -1;
    for (Eigen::Index j = 0; j < m; ++j) {
      if (scalar_traits<S>::is_finite(w(j))) {
        if (first_visible < 0) first_visible = j;
        last_visible = j;
      } else if (!is_minus_infinity(w(j))) {
        const char* what = scalar_traits<S>::is_nan(w(j))      ? "NaN"
                           : ReductionOps<S>::is_pos_inf(w(j)) ? "+inf"
                                                               : "unbounded without being -inf";
        fail("log_weights",
             "entry " + std::to_string(j) + " is " + what + " (log-weights must be finite or -inf)");
      }
    }
    if (first_visible < 0) fail("log_weights", "every entry is -inf: no query has a visible key");
  }

  // ---- every query row must see a key ----
  const Eigen::Index n = x.rows();
  if (n == 0) return;
  switch (kernel.mask) {
    case MaskKind::none:
      break;
    case MaskKind::causal:  // row i sees keys 0..min(i, m-1); the row with the fewest keys is row 0
      if (first_visible > 0) {
        const Eigen::Index last_blind = std::min(first_visible, n) - 1;
        fail("log_weights", "query rows 0.." + std::to_string(last_blind) +
                                " have no visible key under the causal mask: log-weights 0.." +
                                std::to_string(last_blind) + " are -inf");
      }
      break;
    case MaskKind::anticausal:  // row i sees keys i..m-1; rows i >= m see none
      if (n > m)
        fail("kernel.mask", "anticausal mask hides every key from query rows " + std::to_string(m) + ".." +
                                std::to_string(n - 1) + " (" + std::to_string(n) + " queries, " +
                                std::to_string(m) + " keys)");
      if (last_visible < n - 1)
        fail("log_weights", "query row " + std::to_string(n - 1) +
                                " has no visible key under the anticausal mask: log-weights " +
                                std::to_string(last_visible + 1) + ".." + std::to_string(m - 1) +
                                " are -inf");
      break;
  }
}

namespace {

/// a·b (the library's one product, core/detail/product.hpp).
template <class S>
Matrix<S> multiply(const Matrix<S>& a, const Matrix<S>& b) {
  return regatta::detail::product<S>(a, b);
}

}  // namespace

template <class S>
Result<S> reduce(const Problem<S>& problem, const Kernel& kernel, const Request& request,
                 const Options& options) {
  validate(problem, kernel, request);

  const Matrix<S>* qmap = problem.query_map;
  const Matrix<S>* kmap = is_distance(kernel.score) ? problem.query_map : problem.key_map;
  Matrix<S> mapped_queries, mapped_keys;
  Problem<S> projected = problem;
  projected.query_map = nullptr;
  projected.key_map = nullptr;
  if (qmap != nullptr) {
    mapped_queries = multiply(*problem.queries, *qmap);
    projected.queries = &mapped_queries;
  }
  if (kmap != nullptr) {
    mapped_keys = multiply(*problem.keys, *kmap);
    projected.keys = &mapped_keys;
  }

  if (problem.queries->rows() == 0) {  // nothing to reduce: empty outputs of the right widths
    Result<S> r;
    const Eigen::Index e = problem.values ? problem.values->cols() : 0;
    const Eigen::Index f = problem.features ? problem.features->cols() : 0;
    r.lse.resize(0);
    if (request.out) r.out.resize(0, e);
    if (request.feature_mean) r.feature_mean.resize(0, f);
    if (request.cross_moment) r.cross_moment.resize(0, e * f);
    if (request.feature_second_moment) r.feature_second_moment.resize(0, f * f);
    if (request.expected_score) r.expected_score.resize(0);
    return r;
  }

  if constexpr (std::is_floating_point_v<S>) {
    return detail::reduce_blocked<S>(projected, kernel, request, options);
  } else {
    (void)options;
    return detail::reduce_generic<S>(projected, kernel, request);
  }
}

#define REGATTA_PAIRWISE_INSTANTIATE(S)                                                           \
  template Result<S> reduce<S>(const Problem<S>&, const Kernel&, const Request&, const Options&); \
  template void validate<S>(const Problem<S>&, const Kernel&, const Request&);
REGATTA_FOR_EACH_SCALAR(REGATTA_PAIRWISE_INSTANTIATE)
#undef REGATTA_PAIRWISE_INSTANTIATE

}  // namespace regatta::pairwise
