#include <cassert>
#include <cmath>
#include <regatta/core/compensated_sum.hpp>
#include <type_traits>

namespace regatta {

template <class S>
S compensated_sum(std::span<const S> x) {
  CompensatedSum<S> acc;
  for (const S& v : x) acc.add(v);
  return acc.value();
}

template <class S>
S compensated_dot(std::span<const S> a, std::span<const S> b) {
  assert(a.size() == b.size());
  CompensatedSum<S> acc;
  for (std::size_t k = 0; k < a.size(); ++k) {
    if constexpr (std::is_floating_point_v<S>) {
      const S p = a[k] * b[k];
      const S product_error = std::fma(a[k], b[k], -p);  // exact: a b = p + product_error
      acc.add(p);
      acc.add(product_error);
    } else {
      acc.add(a[k] * b[k]);
    }
  }
  return acc.value();
}

#define REGATTA_INSTANTIATE_CSUM(S)                  \
  template class CompensatedSum<S>;                  \
  template S compensated_sum<S>(std::span<const S>); \
  template S compensated_dot<S>(std::span<const S>, std::span<const S>);
REGATTA_FOR_EACH_SCALAR(REGATTA_INSTANTIATE_CSUM)
#undef REGATTA_INSTANTIATE_CSUM

}  // namespace regatta
