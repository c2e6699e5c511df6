#pragma once
// The reduction object of every exponential sum in regatta (KeOps-style): LogSumExp<Acc>.
//
// State: a running shift (a point value, the largest term seen) and the rescaled sum Σ exp(x_k − shift).
//   identity()        the empty reduction (log 0 = −inf)
//   push(x)           absorb one term exp(x)
//   merge(other)      absorb another partial reduction
//   finalize()        log Σ exp(x_k)
// push and merge return a Rescale {self, other}: the factors by which a caller's *vector* accumulators must
// be multiplied so that they stay expressed relative to the new shift:
//     acc ← self · acc + other · acc_other     (for push, acc_other is the term's own value v and
//                                                "other" is its weight exp(x − shift)).
// So softmax-weighted sums Σ_k exp(x_k) v_k / Σ_k exp(x_k) (attention outputs, moments) are streamed with the
// same object, blocked or one term at a time, on the CPU and on the GPU.
//
// This header depends on nothing but <cmath>: for float and double everything is usable in CUDA device code
// (REGATTA_HD). mpfr and interval specialise ReductionOps in log_sum_exp.hpp; the guarantees of finalize()
// for each scalar type are stated there.
#include <cmath>
#include <limits>

#if defined(__CUDACC__)
#define REGATTA_HD __host__ __device__
#else
#define REGATTA_HD
#endif

namespace regatta {

/// How the reduction inspects and shifts terms. The primary template serves IEEE types (float, double).
template <class Acc>
struct ReductionOps {
  REGATTA_HD static bool is_nan(const Acc& x) { return x != x; }
  /// Every element of x is −inf (the term contributes nothing).
  REGATTA_HD static bool is_neg_inf(const Acc& x) { return x == -std::numeric_limits<Acc>::infinity(); }
  /// x contains +inf.
  REGATTA_HD static bool is_pos_inf(const Acc& x) { return x == std::numeric_limits<Acc>::infinity(); }
  /// A point value ≥ every element of x (x itself for a point type).
  REGATTA_HD static Acc pivot(const Acc& x) { return x; }
  /// a > b for point values a, b.
  REGATTA_HD static bool greater(const Acc& a, const Acc& b) { return a > b; }
  REGATTA_HD static Acc exp(const Acc& x) {
    using std::exp;
    return exp(x);
  }
  REGATTA_HD static Acc log(const Acc& x) {
    using std::log;
    return log(x);
  }
  REGATTA_HD static Acc infinity() { return std::numeric_limits<Acc>::infinity(); }
  REGATTA_HD static Acc nan() { return std::numeric_limits<Acc>::quiet_NaN(); }
  /// The result when a +inf term was seen, given the log-sum-exp of the finite terms (or −inf).
  REGATTA_HD static Acc with_positive_infinity(const Acc&) { return infinity(); }
};

template <class Acc>
struct Rescale {
  Acc self;   ///< factor for the accumulators already held
  Acc other;  ///< factor for the incoming accumulators (or the weight of the pushed term)
};

template <class Acc>
struct LogSumExp {
  using Ops = ReductionOps<Acc>;
  Acc shift;       ///< running maximum (a point value); meaningful only when !empty
  Acc scaled_sum;  ///< Σ_k exp(x_k − shift); 0 when empty
  bool empty = true;
  bool positive_infinity = false;  ///< a +inf term was pushed
  bool nan = false;                ///< a NaN term was pushed

  REGATTA_HD static LogSumExp identity() { return LogSumExp{Acc(0), Acc(0), true, false, false}; }

  /// Absorbs exp(x). A −inf, +inf or NaN term returns {1, 0}: vector accumulators are left unchanged.
  REGATTA_HD Rescale<Acc> push(const Acc& x) {
    if (Ops::is_nan(x)) {
      nan = true;
      return {Acc(1), Acc(0)};
    }
    if (Ops::is_neg_inf(x)) return {Acc(1), Acc(0)};
    if (Ops::is_pos_inf(x)) {
      positive_infinity = true;
      return {Acc(1), Acc(0)};
    }
    const Acc pivot = Ops::pivot(x);
    if (empty) {
      shift = pivot;
      const Acc w = Ops::exp(x - shift);
      scaled_sum = w;
      empty = false;
      return {Acc(0), w};
    }
    if (Ops::greater(pivot, shift)) {
      const Acc self = Ops::exp(shift - pivot);
      const Acc w = Ops::exp(x - pivot);
      scaled_sum = scaled_sum * self + w;
      shift = pivot;
      return {self, w};
    }
    const Acc w = Ops::exp(x - shift);
    scaled_sum += w;
    return {Acc(1), w};
  }

  /// Absorbs another partial reduction; returns the factors for self's and other's accumulators.
  REGATTA_HD Rescale<Acc> merge(const LogSumExp& other) {
    positive_infinity = positive_infinity || other.positive_infinity;
    nan = nan || other.nan;
    if (other.empty) return {Acc(1), Acc(0)};
    if (empty) {
      shift = other.shift;
      scaled_sum = other.scaled_sum;
      empty = false;
      return {Acc(0), Acc(1)};
    }
    if (Ops::greater(other.shift, shift)) {
      const Acc self = Ops::exp(shift - other.shift);
      scaled_sum = scaled_sum * self + other.scaled_sum;
      shift = other.shift;
      return {self, Acc(1)};
    }
    const Acc factor = Ops::exp(other.shift - shift);
    scaled_sum += other.scaled_sum * factor;
    return {Acc(1), factor};
  }

  /// log Σ exp(x_k): −inf when empty or every term was −inf; +inf (an interval reaching +inf) after a +inf
  /// term; NaN after a NaN term.
  REGATTA_HD Acc finalize() const {
    if (nan) return Ops::nan();
    if (positive_infinity) return Ops::with_positive_infinity(empty ? -Ops::infinity() : finite_lse());
    if (empty) return -Ops::infinity();
    return finite_lse();
  }

  /// True when finalize() is a finite number: the softmax weights exp(x_k − shift)/scaled_sum are defined.
  REGATTA_HD bool has_mass() const { return !empty && !nan && !positive_infinity; }

 private:
  REGATTA_HD Acc finite_lse() const { return shift + Ops::log(scaled_sum); }
};

}  // namespace regatta
