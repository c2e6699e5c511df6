#pragma once
// Lambert W, principal branch W0, and the inverse of phi(x) = x e^{x+1} (claim kim.phi_lambert,
// docs/math/bounds.md#kim-lambda: Lambda_n = phi^{-1}(n - 1) = W0((n - 1)/e)).
//
// W0 is the inverse of w -> w e^w on [-1, inf): an increasing bijection [-1/e, inf) -> [-1, inf) with
// W0(-1/e) = -1, W0(0) = 0, W0(x) ~ ln x - ln ln x for large x. Its relative condition number is
// |x W0'(x) / W0(x)| = 1 / (1 + W0(x)), unbounded at the branch point -1/e.
//
// Instantiated for float, double, mpfr and interval (core/src/lambert_w.cpp).
//
// Guarantees, by scalar type:
//
//   float, double  evaluated in binary64 (float: from the exact double argument, rounded once). For
//                  x > -0.25: boost::math::lambert_w0 (rational approximations) polished by one Newton step
//                  with an fma residual, because Boost alone is off by up to 9 ulp on (-0.25, -0.1). For
//                  -1/e < x <= -0.25: Boost forms e x + 1 in plain double, which costs u / (1 + W0) (2e4 ulp
//                  at x = -1/e + 1e-10); regatta instead solves (v - 1) e^v + 1 = e x + 1 for v = 1 + W0,
//                  with e x + 1 from a two-double e and an fma and the left side by its series (see
//                  lambert_w.cpp). Measured against W0 of the exact argument (mpfr): double <= 2.1 ulp (20000
//                  random arguments, biased to the branch point), float <= 0.5 ulp; tests allow 4 ulp.
//   mpfr           Boost.Math is NOT accurate at run-time precision: for the variable-precision mpfr type it
//                  stops after ~50 decimal digits (measured at 80 and 310 requested digits, Boost 1.74).
//                  regatta therefore uses a binary64 start (Boost's double W0, the branch-point series W0 =
//                  -1 + p - p^2/3 + 11 p^3/72 with p = sqrt(2(e x + 1)), or ln x - ln ln x beyond the double
//                  range) refined by Halley iterations on f(w) = w e^w - x at the working precision plus 32
//                  guard bits plus log2(1/p) more near the branch point, where e x + 1 is formed at twice the
//                  precision. Result: within a few ulps of the exact W0 of the (exact) argument at the
//                  working precision, for every argument including those next to -1/e. Measured: <= 0.44 ulp
//                  at 64, 256 and 1024 bits on the reference table; <= 0.24 ulp between 512 and 1024 bits on
//                  400 random corner-biased arguments.
//   interval       result ⊇ { W0(x) : x in the input interval } (proved by a sign change of w e^w - x):
//                  W0 is increasing, so the lower end is a number lo with lo >= -1 and
//                  w e^w - x_lo <= 0 at w = lo, and the upper end a number hi with w e^w - x_hi >= 0 at w =
//                  hi, both signs evaluated in outward-rounded interval arithmetic; w e^w - x is increasing
//                  on
//                  [-1, inf), so the roots lie in [lo, hi]. Candidates are an mpfr W0 -/+ a few ulps, widened
//                  geometrically until the sign is proved. For a point input the width is about 4 ulps of the
//                  working precision (measured relative width <= 2^-(bits-2.5) at 64, 256, 1024 bits; tests
//                  allow 2^-(bits-8)); a lower end whose candidate falls below -1 is -1 (W0 >= -1 always).
//
// Special arguments: W0(0) = 0 exactly, W0(+inf) = +inf, NaN in -> NaN out (no exception).
// Domain (callers pass user-derived values, so a violation is an input error, not a NaN):
//   point types  let c = -1/e rounded toward -inf to the precision of the argument (the representable number
//                just below -1/e; for float and double it is also the nearest one). Arguments c <= x < -1/e
//                are the rounded branch point and return -1; x < c throws
//                InputError("lambert_w0 argument", "... must be >= -1/e ...").
//   interval     any element below -1/e throws InputError, whether the whole interval lies below -1/e or only
//                its lower end does (the enclosure of a point such as -1/e itself must therefore be formed
//                with its lower end >= -1/e, e.g. from an exact -1/e bound rounded upward). An interval
//                touching -1/e from above is fine.
#include <regatta/core/scalar.hpp>

namespace regatta {

/// W0(x), the principal branch of the Lambert W function: the w >= -1 with w e^w = x, for x >= -1/e.
/// Accuracy and enclosure guarantees per scalar type in the header comment above.
/// Throws InputError for x below -1/e (see "Domain"); NaN -> NaN.
template <class S>
S lambert_w0(const S& x);

/// phi^{-1}(y) = W0(y / e) for y >= 0, the root x >= 0 of x e^{x+1} = y, where phi(x) = x e^{x+1}
/// (an increasing bijection of [0, inf)). Lambda_n = lambert_phi_inverse(n - 1) is the constant of Kim et
/// al.'s L2-attention Lipschitz bound (claim kim.phi_lambert). y / e is evaluated in S, with e = exp(1) in S:
/// for interval the result encloses phi^{-1}(y) for every y in the input; for point types the extra rounding
/// of y / e adds at most 1/2 ulp relative (the condition number 1/(1 + W0) is <= 1 for y >= 0).
/// Throws InputError("lambert_phi_inverse argument", ...) for y < 0 (any element below 0 for interval).
template <class S>
S lambert_phi_inverse(const S& y);

#define REGATTA_LAMBERT_W_EXTERN(S)          \
  extern template S lambert_w0<S>(const S&); \
  extern template S lambert_phi_inverse<S>(const S&);
REGATTA_FOR_EACH_SCALAR(REGATTA_LAMBERT_W_EXTERN)
#undef REGATTA_LAMBERT_W_EXTERN

}  // namespace regatta
