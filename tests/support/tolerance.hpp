#pragma once
// Named, derived tolerances for tests (docs/math/README.md#checking): a comparison of two computations states
// how far
// apart rounding may put them, as c · n · eps<S>() — n the number of rounded operations on the longest
// dependency chain, c a safety factor whose reason is written where the tolerance is defined. Test files
// define their named tolerances from these helpers (or add shared ones here), never a bare 1e-N.
#include <regatta/core/scalar_traits.hpp>

namespace regatta::testing {

/// c · n · eps<S>() as a double: the first-order error bound of n rounded operations of S, times c.
template <class S>
double rounding_bound(double c, double n = 1) {
  return c * n * scalar_traits<S>::to_double(eps<S>());
}

}  // namespace regatta::testing
