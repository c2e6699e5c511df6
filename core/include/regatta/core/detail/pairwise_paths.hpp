#pragma once
// Internal: the two implementations behind regatta::pairwise::reduce. Both receive a *validated* problem
// whose linear maps have already been applied (query_map and key_map are null).
#include <regatta/core/pairwise.hpp>

namespace regatta::pairwise::detail {

/// Blocked CPU path for float and double (core/src/pairwise/cpu_blocked.cpp).
template <class S>
Result<S> reduce_blocked(const Problem<S>& projected, const Kernel& kernel, const Request& request,
                         const Options& options);

/// Generic one-term-at-a-time path for every scalar type (core/src/pairwise/generic.cpp); the only path
/// for mpfr and interval, and a second implementation for float and double in tests.
template <class S>
Result<S> reduce_generic(const Problem<S>& projected, const Kernel& kernel, const Request& request);

}  // namespace regatta::pairwise::detail
