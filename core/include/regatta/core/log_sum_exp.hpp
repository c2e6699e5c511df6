#pragma once
// Stable log-sum-exp, softmax and logaddexp for every scalar type.
//
// The reduction object LogSumExp<Acc> (online_softmax.hpp) is the one shared by every path that sums
// exponentials (the pairwise backend on CPU and GPU, Sinkhorn, soft c-transforms): a running shift (maximum)
// and a rescaled sum, with identity / push / merge / finalize, and rescale factors for vector accumulators.
// The accumulator type Acc may be wider than the storage type of the terms (e.g. float data, double Acc).
// This header adds the mpfr and interval specialisations of its ReductionOps and the array functions.
//
// Guarantees.
//  * No overflow: every exponential evaluated is exp(x - shift) with x <= shift, so it lies in [0, 1], and
//  the
//    rescaled sum lies in [1, n]. Logits of +-700 in double and +-1e300 in mpfr are handled (tested).
//  * Point types (float, double, mpfr), n finite terms: |finalize() - log sum_k exp(x_k)| <= (|result| + 2n +
//  2) eps
//    to first order in eps (the rescaled sum lies in [1, n] with relative error <= (n + 1) eps; each
//    exp(x_k - shift) carries an argument error eps |x_k - shift| that its size e^{-|x_k - shift|} damps to
//    at most eps / e; the final addition adds eps |result|). Tests compare against MPFR at 256 bits.
//  * interval: the shift is always a *point* (the upper endpoint of the largest term seen); since
//    log sum exp(x_k) = s + log sum exp(x_k - s) holds exactly for every real s, finalize() is a certified
//    enclosure of log(sum_k exp(t_k)) for every choice of t_k in the interval x_k.
//  * Terms equal to -inf contribute nothing (exp(-inf) = 0). If every term is -inf, or nothing was pushed,
//  the
//    result is -inf: log of an empty sum. softmax() of such a row returns the zero vector (no key carries
//    mass), which callers detect through its log-sum-exp being -inf.
//  * A +inf term makes the result +inf (for interval: an interval whose upper end is +inf); a NaN term makes
//  it NaN (inputs are validated upstream with
//    check_finite where finiteness is required).
#include <span>
#include <type_traits>

#include <regatta/core/eigen.hpp>
#include <regatta/core/online_softmax.hpp>
#include <regatta/core/scalar_traits.hpp>

namespace regatta {

/// ReductionOps for the multiprecision types (see online_softmax.hpp for the contract).
template <>
struct ReductionOps<mpfr> {
  static bool is_nan(const mpfr& x) { return scalar_traits<mpfr>::is_nan(x); }
  static bool is_neg_inf(const mpfr& x) { return !scalar_traits<mpfr>::is_finite(x) && !is_nan(x) && x < 0; }
  static bool is_pos_inf(const mpfr& x) { return !scalar_traits<mpfr>::is_finite(x) && !is_nan(x) && x > 0; }
  static const mpfr& pivot(const mpfr& x) { return x; }
  static bool greater(const mpfr& a, const mpfr& b) { return a > b; }
  static mpfr exp(const mpfr& x) { return boost::multiprecision::exp(x); }
  static mpfr log(const mpfr& x) { return boost::multiprecision::log(x); }
  static mpfr infinity() { return scalar_traits<mpfr>::infinity(); }
  static mpfr nan() { return scalar_traits<mpfr>::quiet_nan(); }
  static mpfr with_positive_infinity(const mpfr&) { return infinity(); }
};

/// Intervals: the shift is the upper endpoint of a term as a point interval; any real shift gives the exact
/// identity log sum exp(x_k) = s + log sum exp(x_k - s), so every result is an enclosure.
template <>
struct ReductionOps<interval> {
  static bool is_nan(const interval& x) { return scalar_traits<interval>::is_nan(x); }
  static bool is_neg_inf(const interval& x) {  // every element is -inf
    const mpfr u = upper_bound(x);
    return !scalar_traits<mpfr>::is_finite(u) && u < 0;
  }
  static bool is_pos_inf(const interval& x) {  // the interval reaches +inf
    const mpfr u = upper_bound(x);
    return !scalar_traits<mpfr>::is_finite(u) && u > 0;
  }
  static interval pivot(const interval& x) { return scalar_traits<interval>::upper(x); }
  static bool greater(const interval& a, const interval& b) { return upper_bound(a) > upper_bound(b); }
  static interval exp(const interval& x) { return boost::multiprecision::exp(x); }
  static interval log(const interval& x) { return boost::multiprecision::log(x); }
  static interval infinity() { return scalar_traits<interval>::infinity(); }
  static interval nan() { return scalar_traits<interval>::quiet_nan(); }
  /// The finite terms alone give a valid lower end; the upper end is +inf.
  static interval with_positive_infinity(const interval& finite_part) {
    return hull(finite_part, infinity());
  }
};

/// interval64: the same rules as interval, on binary64 endpoints.
template <>
struct ReductionOps<interval64> {
  static bool is_nan(const interval64& x) { return x.is_nan(); }
  static bool is_neg_inf(const interval64& x) {
    return x.upper() == -std::numeric_limits<double>::infinity();
  }
  static bool is_pos_inf(const interval64& x) { return x.upper() == std::numeric_limits<double>::infinity(); }
  static interval64 pivot(const interval64& x) { return interval64(x.upper()); }
  static bool greater(const interval64& a, const interval64& b) { return a.upper() > b.upper(); }
  static interval64 exp(const interval64& x) { return ::regatta::fast::exp(x); }
  static interval64 log(const interval64& x) { return ::regatta::fast::log(x); }
  static interval64 infinity() { return interval64(std::numeric_limits<double>::infinity()); }
  static interval64 nan() { return interval64::nan(); }
  static interval64 with_positive_infinity(const interval64& finite_part) {
    return hull(finite_part, infinity());
  }
};

/// log(sum_k exp(x_k)) for a contiguous range; see LogSumExp for the guarantees.
template <class S>
S logsumexp(std::span<const S> x);

/// log(exp(a) + exp(b)), stable for any magnitudes; -inf when both are -inf; certified for interval.
template <class S>
S logaddexp(const S& a, const S& b);

/// softmax(x)_k = exp(x_k - lse(x)) computed as exp(x_k - shift) / scaled_sum (each entry in [0, 1]).
/// All -inf (or empty) input: returns zeros. interval: each entry encloses the exact softmax entry for
/// every choice of logits in the input intervals (entries are certified individually, not jointly).
template <class S>
Vector<S> softmax(const Vector<S>& x);

/// x_k - lse(x); all -inf input gives all -inf.
template <class S>
Vector<S> log_softmax(const Vector<S>& x);

/// Row-wise versions: lse of every row, and the row-stochastic matrix softmax_row(X).
template <class S>
Vector<S> logsumexp_rows(const Matrix<S>& x);
template <class S>
Matrix<S> softmax_rows(const Matrix<S>& x);

#define REGATTA_DECLARE_LSE(S)                                   \
  extern template struct LogSumExp<S>;                           \
  extern template S logsumexp<S>(std::span<const S>);            \
  extern template S logaddexp<S>(const S&, const S&);            \
  extern template Vector<S> softmax<S>(const Vector<S>&);        \
  extern template Vector<S> log_softmax<S>(const Vector<S>&);    \
  extern template Vector<S> logsumexp_rows<S>(const Matrix<S>&); \
  extern template Matrix<S> softmax_rows<S>(const Matrix<S>&);
REGATTA_FOR_EACH_SCALAR(REGATTA_DECLARE_LSE)
#undef REGATTA_DECLARE_LSE

}  // namespace regatta
