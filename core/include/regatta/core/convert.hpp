#pragma once
// Conversions between the scalar types.
//
//   scalar_cast<To>(from)    point -> point: rounded to nearest at the target precision.
//                            point -> interval: an interval enclosing the point value of `from` (exact when
//                            the source precision fits, otherwise the two neighbouring representable
//                            numbers). interval -> point: the midpoint, rounded to nearest (an estimate, not
//                            certified). interval -> interval: exact copy when the precision fits, otherwise
//                            widened outward.
#include <type_traits>

#include <regatta/core/scalar_traits.hpp>

namespace regatta {

namespace detail {
interval interval_from_mpfr(const mpfr& x);  // encloses x at the current working precision
interval interval_from_double(double x);     // encloses x (exact at >= 53 bits)
}  // namespace detail

template <class To, class From>
To scalar_cast(const From& x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
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
