#pragma once
// Typed-test helpers: the scalar type lists of core/scalar.hpp as gtest type lists, and test names after the
// scalar ("float", "mpfr", ...) instead of the full Boost type name.
#include <gtest/gtest.h>

#include <regatta/core/scalar.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <string>

namespace regatta::testing {

namespace detail {
template <class List>
struct gtest_types;
template <class... Ts>
struct gtest_types<scalars::list<Ts...>> {
  using type = ::testing::Types<Ts...>;
};
}  // namespace detail

/// ::testing::Types of one of the lists regatta::scalars::* (all, point, intervals, hardware, ...): a typed
/// battery over TypesOf<scalars::all> covers every scalar type, including the ones added later.
template <class List>
using TypesOf = typename detail::gtest_types<List>::type;

struct ScalarNames {
  template <class S>
  static std::string GetName(int) {
    return std::string(scalar_traits<S>::name());
  }
};

}  // namespace regatta::testing
