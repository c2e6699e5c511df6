#pragma once
// Compensated summation for every scalar type.
//
// CompensatedSum<S> is Neumaier's variant of Kahan summation: it carries the rounding error of every addition
// in a second accumulator. For n terms in a point type with unit roundoff u = eps/2,
//     |value() - sum_k x_k| <= 2u |sum_k x_k| + 2 n^2 u^2 sum_k |x_k|        (Higham, ASNA 2nd ed., §4.3),
// i.e. the result is as accurate as if it were computed in twice the precision and then rounded, unless the
// sum cancels to below n^2 u of the absolute sum. The plain recursive sum only guarantees (n - 1) u sum|x_k|.
//
// For interval, additions are outward-rounded, so the plain sum is already a certified enclosure;
// CompensatedSum<interval> adds without compensation and value() encloses the exact sum.
//
// compensated_dot(a, b) is Ogita–Rump–Oishi Dot2 for float/double (the products' errors are captured exactly
// with fma), giving the same "twice the precision" bound; for mpfr the products are rounded once and summed
// with compensation; for interval the result encloses the exact dot product.
#include <span>

#include <regatta/core/scalar_traits.hpp>

namespace regatta {

template <class S>
class CompensatedSum {
 public:
  CompensatedSum() : sum_(0), compensation_(0) {}
  void add(const S& x);
  void merge(const CompensatedSum& other) {
    add(other.sum_);
    add(other.compensation_);
  }
  S value() const { return sum_ + compensation_; }

 private:
  S sum_;
  S compensation_;
};

template <class S>
void CompensatedSum<S>::add(const S& x) {
  if constexpr (scalar_traits<S>::is_interval) {
    sum_ += x;
  } else {
    using std::abs;
    const S t = sum_ + x;
    // Neumaier: the rounding error of sum_ + x, recovered exactly (Fast2Sum with the larger operand first).
    if (abs(sum_) >= abs(x))
      compensation_ += (sum_ - t) + x;
    else
      compensation_ += (x - t) + sum_;
    sum_ = t;
  }
}

/// Sum of x with CompensatedSum.
template <class S>
S compensated_sum(std::span<const S> x);

/// Dot product of a and b (equal lengths, asserted) with the guarantees stated above.
template <class S>
S compensated_dot(std::span<const S> a, std::span<const S> b);

#define REGATTA_DECLARE_CSUM(S)                             \
  extern template class CompensatedSum<S>;                  \
  extern template S compensated_sum<S>(std::span<const S>); \
  extern template S compensated_dot<S>(std::span<const S>, std::span<const S>);
REGATTA_FOR_EACH_SCALAR(REGATTA_DECLARE_CSUM)
#undef REGATTA_DECLARE_CSUM

}  // namespace regatta
