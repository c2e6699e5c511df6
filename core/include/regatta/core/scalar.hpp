#pragma once
// The scalar types that every numerical routine of regatta is instantiated for, and the one list of them.
//
//   float, double   IEEE binary32 / binary64, round-to-nearest.
//   mpfr            Boost.Multiprecision over MPFR, precision chosen at run time (see precision.hpp),
//                   expression templates off so that `auto` and generic code behave like a built-in type.
//   interval        Boost.Multiprecision over MPFI: a closed interval [lo, hi] of MPFR numbers; every
//                   operation is rounded outward, so the result encloses the exact value of the operation
//                   applied to any points of the operands.
//   interval64      a closed interval with binary64 endpoints, rounded outward (interval64.hpp): the same
//                   guarantee as interval, at hardware speed and 53 bits.
#include <limits>

#include <boost/multiprecision/mpfi.hpp>
#include <boost/multiprecision/mpfr.hpp>

#include <regatta/core/interval64.hpp>

namespace regatta {

using mpfr = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<0>,
                                           boost::multiprecision::et_off>;
using interval = boost::multiprecision::number<boost::multiprecision::mpfi_float_backend<0>,
                                               boost::multiprecision::et_off>;

/// +∞ in binary64: the value of a bound that does not exist (an enclosure that is not finite).
inline constexpr double infinity = std::numeric_limits<double>::infinity();

}  // namespace regatta

// =========================================================================================================
// The one list of scalar types (docs/adding-a-scalar-type.md)
// =========================================================================================================
//
// One row per type: X(M, type, enclosure, hardware, exact64), with three 0/1 properties
//
//   enclosure  values are intervals that contain the exact result (scalar_traits<S>::is_interval)
//   hardware   binary32 / binary64 arithmetic at compile-time precision (SIMD kernels, CUDA, fixed-point
//              iterations that stop on a tolerance)
//   exact64    every binary64 number is a value of the type, exactly (layer weights and inputs are
//              binary64: the operators convert them without rounding)
//
// Every explicit instantiation in the library expands one of the REGATTA_FOR_EACH_* macros below, and its
// header declares the matching extern templates with the same macro; the typed test batteries use the
// matching type lists regatta::scalars::* at the end of this header. Each subset is a rule on the three
// properties, so a new type is one row here (plus its trait file), and joins every routine its
// properties admit.
#define REGATTA_SCALAR_TABLE(X, M)   \
  X(M, float, 0, 1, 0)               \
  X(M, double, 0, 1, 1)              \
  X(M, ::regatta::mpfr, 0, 0, 1)     \
  X(M, ::regatta::interval, 1, 0, 1) \
  X(M, ::regatta::interval64, 1, 1, 1)

// ---- the subsets, each M(T) for every T of the table satisfying its rule ----
/// Every type: the core routines (sums, log-sum-exp, pairwise reductions, Lambert W, certified spectral
/// bounds, measures).
#define REGATTA_FOR_EACH_SCALAR(M) REGATTA_SCALAR_TABLE(REGATTA_DETAIL_SCALAR_ALL, M)
/// Point types (not enclosures): iterations that compare values (power iteration, eigen solvers).
#define REGATTA_FOR_EACH_POINT_SCALAR(M) REGATTA_SCALAR_TABLE(REGATTA_DETAIL_SCALAR_POINT, M)
/// Enclosure types.
#define REGATTA_FOR_EACH_INTERVAL_SCALAR(M) REGATTA_SCALAR_TABLE(REGATTA_DETAIL_SCALAR_INTERVAL, M)
/// Hardware point types (float, double): SIMD and CUDA kernels, Sinkhorn iterations.
#define REGATTA_FOR_EACH_HARDWARE_SCALAR(M) REGATTA_SCALAR_TABLE(REGATTA_DETAIL_SCALAR_HARDWARE, M)
/// Types holding every binary64 exactly: the operators and their Lipschitz bounds.
#define REGATTA_FOR_EACH_EXACT64_SCALAR(M) REGATTA_SCALAR_TABLE(REGATTA_DETAIL_SCALAR_EXACT64, M)
/// Point types holding every binary64 exactly (double, mpfr): fixed-point solvers on the operators.
#define REGATTA_FOR_EACH_EXACT64_POINT_SCALAR(M) REGATTA_SCALAR_TABLE(REGATTA_DETAIL_SCALAR_EXACT64_POINT, M)
/// The certifying set: binary64 (the estimate) and every enclosure holding binary64 exactly (the
/// certificate) — routines that only these two roles use (local certificates of operators/lipschitz).
#define REGATTA_FOR_EACH_CERTIFYING_SCALAR(M) REGATTA_SCALAR_TABLE(REGATTA_DETAIL_SCALAR_CERTIFYING, M)

// ---- implementation: boolean selection by token pasting ----
#define REGATTA_DETAIL_CAT(a, b) REGATTA_DETAIL_CAT_(a, b)
#define REGATTA_DETAIL_CAT_(a, b) a##b
#define REGATTA_DETAIL_NOT(a) REGATTA_DETAIL_CAT(REGATTA_DETAIL_NOT_, a)
#define REGATTA_DETAIL_NOT_0 1
#define REGATTA_DETAIL_NOT_1 0
#define REGATTA_DETAIL_AND(a, b) REGATTA_DETAIL_CAT(REGATTA_DETAIL_AND_, REGATTA_DETAIL_CAT(a, b))
#define REGATTA_DETAIL_AND_00 0
#define REGATTA_DETAIL_AND_01 0
#define REGATTA_DETAIL_AND_10 0
#define REGATTA_DETAIL_AND_11 1
#define REGATTA_DETAIL_OR(a, b) REGATTA_DETAIL_CAT(REGATTA_DETAIL_OR_, REGATTA_DETAIL_CAT(a, b))
#define REGATTA_DETAIL_OR_00 0
#define REGATTA_DETAIL_OR_01 1
#define REGATTA_DETAIL_OR_10 1
#define REGATTA_DETAIL_OR_11 1
#define REGATTA_DETAIL_WHEN(c) REGATTA_DETAIL_CAT(REGATTA_DETAIL_WHEN_, c)
#define REGATTA_DETAIL_WHEN_0(M, T)
#define REGATTA_DETAIL_WHEN_1(M, T) M(T)

#define REGATTA_DETAIL_SCALAR_ALL(M, T, enc, hw, x64) M(T)
#define REGATTA_DETAIL_SCALAR_POINT(M, T, enc, hw, x64) REGATTA_DETAIL_WHEN(REGATTA_DETAIL_NOT(enc))(M, T)
#define REGATTA_DETAIL_SCALAR_INTERVAL(M, T, enc, hw, x64) REGATTA_DETAIL_WHEN(enc)(M, T)
#define REGATTA_DETAIL_SCALAR_HARDWARE(M, T, enc, hw, x64) \
  REGATTA_DETAIL_WHEN(REGATTA_DETAIL_AND(REGATTA_DETAIL_NOT(enc), hw))(M, T)
#define REGATTA_DETAIL_SCALAR_EXACT64(M, T, enc, hw, x64) REGATTA_DETAIL_WHEN(x64)(M, T)
#define REGATTA_DETAIL_SCALAR_EXACT64_POINT(M, T, enc, hw, x64) \
  REGATTA_DETAIL_WHEN(REGATTA_DETAIL_AND(x64, REGATTA_DETAIL_NOT(enc)))(M, T)
#define REGATTA_DETAIL_SCALAR_CERTIFYING(M, T, enc, hw, x64) \
  REGATTA_DETAIL_WHEN(REGATTA_DETAIL_AND(x64, REGATTA_DETAIL_OR(enc, hw)))(M, T)

// ---- the same subsets as C++ type lists, for typed tests and compile-time checks ----
namespace regatta::scalars {

template <class... Ts>
struct list {};

namespace detail {
template <class First, class... Ts>
struct drop_first {
  using type = list<Ts...>;
};
}  // namespace detail

#define REGATTA_DETAIL_LEADING_COMMA(T) , T
using all = detail::drop_first<void REGATTA_FOR_EACH_SCALAR(REGATTA_DETAIL_LEADING_COMMA)>::type;
using point = detail::drop_first<void REGATTA_FOR_EACH_POINT_SCALAR(REGATTA_DETAIL_LEADING_COMMA)>::type;
using intervals =
    detail::drop_first<void REGATTA_FOR_EACH_INTERVAL_SCALAR(REGATTA_DETAIL_LEADING_COMMA)>::type;
using hardware =
    detail::drop_first<void REGATTA_FOR_EACH_HARDWARE_SCALAR(REGATTA_DETAIL_LEADING_COMMA)>::type;
using exact64 = detail::drop_first<void REGATTA_FOR_EACH_EXACT64_SCALAR(REGATTA_DETAIL_LEADING_COMMA)>::type;
using exact64_point =
    detail::drop_first<void REGATTA_FOR_EACH_EXACT64_POINT_SCALAR(REGATTA_DETAIL_LEADING_COMMA)>::type;
using certifying =
    detail::drop_first<void REGATTA_FOR_EACH_CERTIFYING_SCALAR(REGATTA_DETAIL_LEADING_COMMA)>::type;
#undef REGATTA_DETAIL_LEADING_COMMA

}  // namespace regatta::scalars
