#pragma once
// Learned-looking pre-norm weights for the random layers of the operator tests: γ = 1 + 0.3·N(0, 1) and
// β = 0.2·N(0, 1) per coordinate, from the library's portable generator (seeds seed + 7 and seed + 8), so
// that a pre-norm test never runs with the identity weights by accident.
#include <cstdint>

#include <regatta/core/random_matrix.hpp>
#include <regatta/operators/layer.hpp>

namespace regatta::testing {

inline void draw_norm_weights(operators::AttentionLayer& layer, std::uint64_t seed) {
  layer.norm_gamma = Vector<double>::Constant(layer.d, 1.0) + 0.3 * standard_normal(layer.d, seed + 7);
  layer.norm_beta = 0.2 * standard_normal(layer.d, seed + 8);
}

}  // namespace regatta::testing
