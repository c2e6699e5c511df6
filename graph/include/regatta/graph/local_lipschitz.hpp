#pragma once
// The local Lipschitz constant of a whole Graph at an input: ‖J(x)‖₂, the largest singular value of the
// Jacobian of its single output with respect to its single input, both flattened
// (docs/graph.md#forward-mode-and-jacobian-enclosures).
#include <cstddef>
#include <vector>

#include <regatta/graph/graph.hpp>

namespace regatta::graph {

struct WholeLipschitz {
  /// ESTIMATE: σ_max(J(x)) by power iteration on JᵀJ, each step one forward-mode and one reverse-mode sweep
  /// in binary64 (no rounding error bounded; a lower estimate up to that rounding, since ‖J·v‖ ≤ ‖J‖₂ for a
  /// unit v).
  double estimate = 0;
  /// CERTIFIED: an upper bound on ‖J(x)‖₂ of the exact real-number function, from the Jacobian at the point
  /// enclosed in MPFI at 128 bits (jacobian_enclosure_at) and core's certified interval-matrix spectral bound
  /// (spectral_norm_bound). +inf when an entry of the enclosure is not finite.
  double certified = 0;
  int iterations = 0;              ///< power steps run
  std::size_t rows = 0, cols = 0;  ///< the Jacobian's size: output × input elements
};

/// Power iteration from a seeded random unit vector until the estimate changes by less than `tolerance`
/// (relative) or `max_iterations` steps, then the certified bound. Throws InputError naming graph.source
/// when the graph does not have one input and one output or x is not the input's size.
WholeLipschitz local_lipschitz(const Graph& graph, const std::vector<double>& x, int max_iterations = 200,
                               double tolerance = 1e-10);

}  // namespace regatta::graph
