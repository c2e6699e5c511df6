#pragma once
// One binary64 forward and reverse sweep of a Graph with one input and one output (docs/graph.md,
// "Derivatives"): the outputs, and the gradient of Σ_k w_k·y_k with w chosen from the outputs (the attack's
// objectives are piecewise linear in them, so the active piece is known only after the forward).
#include <functional>
#include <vector>

#include <regatta/graph/graph.hpp>

namespace regatta::graph::detail {

struct ValueAndGradient {
  std::vector<double> output;    ///< the graph's output at the point, flattened (double forward)
  std::vector<double> gradient;  ///< ∂(Σ w_k y_k)/∂input, flattened; empty when `weights` returned false
};

/// `weights(output, w)` fills w (sized like the output, zeroed) and returns whether a gradient is wanted.
/// Throws InputError naming graph.source when the graph does not have one input and one output or `input`
/// is not the input's size.
ValueAndGradient value_and_gradient(
    const Graph& graph, const std::vector<double>& input,
    const std::function<bool(const std::vector<double>& output, std::vector<double>& w)>& weights);

}  // namespace regatta::graph::detail
