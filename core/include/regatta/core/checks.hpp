#pragma once
// check_* helpers for user input (Stan Math style): each throws InputError naming the argument and the
// problem, and returns normally otherwise. `name` is what the user typed or the file the data came from.
#include <Eigen/Core>
#include <string>
#include <string_view>

#include <regatta/core/error.hpp>
#include <regatta/core/scalar_traits.hpp>

namespace regatta {

/// Tolerance for "weights sum to one": |sum - 1| <= normalisation_tolerance(n) = 64 * n * eps(double).
/// Rationale: a sum of n doubles each rounded once has error <= (n-1) eps * sum (Higham, Thm 4.1); files
/// written in float32 are normalised separately (their weights carry 2^-24 relative error each), so the
/// CLI converts float32 weights with check_normalized(..., float_tolerance).
double normalisation_tolerance(std::size_t n);

/// Tolerance for "weights sum to one" when the n weights were stored with unit roundoff `roundoff` (2^-24
/// for float32, 2^-11 for float16, 2^-8 for bfloat16): 4·n·roundoff (normalised in that precision, each
/// weight rounded once), but never more than 2^-7 — past about 1 % the weights are not normalised up to
/// rounding (4·n·2^-11 exceeds 1 at n = 512) — and never less than normalisation_tolerance(n).
double stored_weights_tolerance(std::size_t n, double roundoff);

void check_shape(std::string_view name, Eigen::Index rows, Eigen::Index cols, Eigen::Index expected_rows,
                 Eigen::Index expected_cols);
void check_rows(std::string_view name, Eigen::Index rows, Eigen::Index expected_rows);
void check_cols(std::string_view name, Eigen::Index cols, Eigen::Index expected_cols);
void check_nonempty(std::string_view name, Eigen::Index size);
/// Positive and finite (e.g. --epsilon, --radius).
void check_positive(std::string_view name, double value);
/// Throws unless lo <= value <= hi.
void check_in_range(std::string_view name, double value, double lo, double hi);

/// Every entry finite (no NaN, no +-Inf); the message gives the first offending (row, col).
template <class Derived>
void check_finite(std::string_view name, const Eigen::DenseBase<Derived>& m);
/// Every entry >= 0 (and finite).
template <class Derived>
void check_nonnegative(std::string_view name, const Eigen::DenseBase<Derived>& m);
/// Entries >= 0, finite, summing to 1 within `tolerance` (default normalisation_tolerance(size)).
template <class Derived>
void check_normalized(std::string_view name, const Eigen::DenseBase<Derived>& w, double tolerance = -1);

namespace detail {
[[noreturn]] void fail_entry(std::string_view name, Eigen::Index row, Eigen::Index col, Eigen::Index cols,
                             std::string_view problem);
[[noreturn]] void fail_sum(std::string_view name, double sum, double tolerance);
}  // namespace detail

template <class Derived>
void check_finite(std::string_view name, const Eigen::DenseBase<Derived>& m) {
  using S = typename Derived::Scalar;
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      if (!scalar_traits<S>::is_finite(m(i, j)))
        detail::fail_entry(name, i, j, m.cols(),
                           scalar_traits<S>::is_nan(m(i, j)) ? "is NaN" : "is infinite");
}

template <class Derived>
void check_nonnegative(std::string_view name, const Eigen::DenseBase<Derived>& m) {
  using S = typename Derived::Scalar;
  check_finite(name, m);
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      if (scalar_traits<S>::lower(m(i, j)) < 0) detail::fail_entry(name, i, j, m.cols(), "is negative");
}

template <class Derived>
void check_normalized(std::string_view name, const Eigen::DenseBase<Derived>& w, double tolerance) {
  using S = typename Derived::Scalar;
  check_nonempty(name, w.size());
  check_nonnegative(name, w);
  if (tolerance < 0) tolerance = normalisation_tolerance(static_cast<std::size_t>(w.size()));
  long double sum = 0;  // weights are nonnegative: the plain sum has relative error <= n eps
  for (Eigen::Index i = 0; i < w.rows(); ++i)
    for (Eigen::Index j = 0; j < w.cols(); ++j) sum += scalar_traits<S>::to_double(w(i, j));
  if (!(std::abs(static_cast<double>(sum) - 1.0) <= tolerance))
    detail::fail_sum(name, double(sum), tolerance);
}

}  // namespace regatta
