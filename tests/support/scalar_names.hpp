#pragma once
// Names typed tests after the scalar ("float", "mpfr", ...) instead of the full Boost type name.
#include <regatta/core/scalar_traits.hpp>
#include <string>

namespace regatta::testing {

struct ScalarNames {
  template <class S>
  static std::string GetName(int) {
    return std::string(scalar_traits<S>::name());
  }
};

}  // namespace regatta::testing
