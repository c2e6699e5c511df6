#pragma once
// Stable log-sum-exp, softmax and logaddexp for every scalar type.
//
// The reduction object LogSumExp<Acc> is the one shared by every path that sums exponentials (the pairwise
// backend, Sinkhorn, soft c-transforms): a running shift (maximum) and a rescaled sum, with
//   identity()  the empty reduction (represents log 0 = -inf),
//   push(x)     absorb one term exp(x),
//   merge(o)    absorb another partial reduction (associative and commutative up to rounding),
//   finalize()  log of the sum of every absorbed exp(x).
// The accumulator type Acc may be wider than the storage type of the terms (e.g. float data, double Acc).
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
#include <regatta/core/scalar_traits.hpp>

namespace regatta {

namespace detail {
// a > b for point values of any scalar type (for intervals: compares the upper endpoints).
template <class S>
bool point_greater(const S& a, const S& b) {
  if constexpr (scalar_traits<S>::is_interval)
    return upper_bound(a) > upper_bound(b);
  else
    return a > b;
}
template <class S>
bool is_neg_inf_upper(const S& x) {  // every element of x is -inf
  if constexpr (scalar_traits<S>::is_interval) {
    const mpfr u = upper_bound(x);
    return !scalar_traits<mpfr>::is_finite(u) && u < 0;
  } else {
    return !scalar_traits<S>::is_nan(x) && !scalar_traits<S>::is_finite(x) && x < 0;
  }
}
template <class S>
bool is_pos_inf_upper(const S& x) {  // x contains +inf (as its upper endpoint)
  if constexpr (scalar_traits<S>::is_interval) {
    const mpfr u = upper_bound(x);
    return !scalar_traits<mpfr>::is_finite(u) && u > 0;
  } else {
    return !scalar_traits<S>::is_nan(x) && !scalar_traits<S>::is_finite(x) && x > 0;
  }
}
}  // namespace detail

template <class Acc>
struct LogSumExp {
  Acc shift;       ///< running maximum (a point value); meaningful only when !empty
  Acc scaled_sum;  ///< sum_k exp(x_k - shift); 0 when empty
  bool empty = true;
  bool positive_infinity = false;  ///< a +inf term was pushed

  static LogSumExp identity() { return LogSumExp{Acc(0), Acc(0), true, false}; }

  void push(const Acc& x) {
    if (scalar_traits<Acc>::is_nan(x)) {
      scaled_sum = scalar_traits<Acc>::quiet_nan();
      empty = false;
      shift = Acc(0);
      return;
    }
    if (detail::is_neg_inf_upper(x)) return;
    if (detail::is_pos_inf_upper(x)) {
      positive_infinity = true;
      return;
    }
    const Acc pivot = scalar_traits<Acc>::pivot(x);
    if (empty) {
      shift = pivot;
      scaled_sum = exp_of(x - shift);
      empty = false;
      return;
    }
    if (detail::point_greater(pivot, shift)) {
      scaled_sum = scaled_sum * exp_of(shift - pivot) + exp_of(x - pivot);
      shift = pivot;
    } else {
      scaled_sum += exp_of(x - shift);
    }
  }

  void merge(const LogSumExp& other) {
    positive_infinity = positive_infinity || other.positive_infinity;
    if (other.empty) return;
    if (empty) {
      shift = other.shift;
      scaled_sum = other.scaled_sum;
      empty = false;
      return;
    }
    if (detail::point_greater(other.shift, shift)) {
      scaled_sum = scaled_sum * exp_of(shift - other.shift) + other.scaled_sum;
      shift = other.shift;
    } else {
      scaled_sum += other.scaled_sum * exp_of(other.shift - shift);
    }
  }

  Acc finalize() const {
    if (!empty && scalar_traits<Acc>::is_nan(scaled_sum)) return scaled_sum;
    using std::log;
    if (positive_infinity) {
      if constexpr (scalar_traits<Acc>::is_interval) {
        // The finite terms alone give a valid lower end; the upper end is +inf.
        const Acc finite_part = empty ? -scalar_traits<Acc>::infinity() : Acc(shift + log(scaled_sum));
        return hull(finite_part, scalar_traits<Acc>::infinity());
      } else {
        return scalar_traits<Acc>::infinity();
      }
    }
    if (empty) return -scalar_traits<Acc>::infinity();
    return shift + log(scaled_sum);
  }

 private:
  static Acc exp_of(const Acc& t) {
    using std::exp;
    return exp(t);
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
