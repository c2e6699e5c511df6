#pragma once
// The four scalar types that every numerical routine of regatta is instantiated for.
//
//   float, double   IEEE binary32 / binary64, round-to-nearest.
//   mpfr            Boost.Multiprecision over MPFR, precision chosen at run time (see precision.hpp),
//                   expression templates off so that `auto` and generic code behave like a built-in type.
//   interval        Boost.Multiprecision over MPFI: a closed interval [lo, hi] of MPFR numbers; every
//                   operation is rounded outward, so the result encloses the exact value of the operation
//                   applied to any points of the operands.
#include <boost/multiprecision/mpfi.hpp>
#include <boost/multiprecision/mpfr.hpp>

namespace regatta {

using mpfr = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<0>,
                                           boost::multiprecision::et_off>;
using interval = boost::multiprecision::number<boost::multiprecision::mpfi_float_backend<0>,
                                               boost::multiprecision::et_off>;

}  // namespace regatta

// Explicit instantiation helper: REGATTA_FOR_EACH_SCALAR(M) expands M(float) M(double) M(mpfr) M(interval).
#define REGATTA_FOR_EACH_SCALAR(M) \
  M(float)                         \
  M(double)                        \
  M(::regatta::mpfr)               \
  M(::regatta::interval)
