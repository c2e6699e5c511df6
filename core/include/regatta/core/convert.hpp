#pragma once
// Conversions between the scalar types.
//
//   scalar_cast<To>(from)    point -> point: rounded to nearest at the target precision.
//                            point -> interval: an interval enclosing the point value of `from` (exact when
//                            the source precision fits, otherwise the two neighbouring representable
//                            numbers). interval -> point: the midpoint, rounded to nearest (an estimate, not
//                            certified). interval -> interval: exact copy when the precision fits, otherwise
//                            widened outward.
//   interval64               from a point: the binary64 neighbours enclosing it (exact from float and
//                            double); from interval: its endpoints rounded outward to binary64; to
//                            interval: exact at >= 53 bits, otherwise rounded outward; to a point type:
//                            the midpoint, rounded to nearest (an estimate).
#include <type_traits>

#include <regatta/core/scalar_traits.hpp>

namespace regatta {

namespace detail {
interval interval_from_mpfr(const mpfr& x);  // encloses x at the current working precision
interval interval_from_double(double x);     // encloses x (exact at >= 53 bits)
// core/src/interval64.cpp
interval64 interval64_from_mpfr(const mpfr& x);          // the binary64 neighbours of x
interval64 interval64_from_interval(const interval& x);  // endpoints rounded outward
interval interval_from_interval64(const interval64& x);  // exact at >= 53 bits, else outward
}  // namespace detail

template <class To, class From>
To scalar_cast(const From& x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_same_v<To, interval64>) {
    if constexpr (std::is_floating_point_v<From>)
      return interval64(static_cast<double>(x));
    else if constexpr (std::is_same_v<From, mpfr>)
      return detail::interval64_from_mpfr(x);
    else
      return detail::interval64_from_interval(x);
  } else if constexpr (std::is_same_v<From, interval64>) {
    if constexpr (std::is_same_v<To, interval>)
      return detail::interval_from_interval64(x);
    else
      return To(static_cast<double>(x));  // the midpoint, rounded to nearest
  } else if constexpr (std::is_floating_point_v<From>) {
    if constexpr (std::is_same_v<To, interval>) {
      return detail::interval_from_double(static_cast<double>(x));  // never rounds through a narrow mpfr
    } else {
      return To(x);
    }
  } else if constexpr (std::is_same_v<From, mpfr>) {
    if constexpr (std::is_same_v<To, interval>) {
      return detail::interval_from_mpfr(x);
    } else {
      return static_cast<To>(x);  // rounds to nearest
    }
  } else {  // From is interval
    static_assert(std::is_same_v<From, interval>);
    if constexpr (std::is_floating_point_v<To>) {
      return static_cast<To>(scalar_traits<interval>::to_double(x));
    } else {
      return To(mpfr((lower_bound(x) + upper_bound(x)) / 2));
    }
  }
}

}  // namespace regatta
