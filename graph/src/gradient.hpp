#pragma once
// The reverse sweep shared by vjp, the interval gradients and the Jacobians, and one binary64 forward and
// reverse sweep of a Graph with one input and one output (docs/graph.md,
// "Derivatives"): the outputs, and the gradient of Σ_k w_k·y_k with w chosen from the outputs (the attack's
// objectives are piecewise linear in them, so the active piece is known only after the forward).
#include <functional>
#include <vector>

#include <regatta/graph/evaluate.hpp>
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

/// Throws InputError naming graph.source unless the graph has one input and one output and the input has
/// `input_size` elements.
void require_one_input_output(const Graph& graph, std::size_t input_size);

/// Per value id: whether the graph's input reaches it (the others are constants of the derivative).
std::vector<char> active_values(const Graph& graph);

/// The adjoint of the graph's input for the output adjoint w, from every value of a forward `values`
/// (evaluate_all): one reverse sweep of node_vjp (vjp_rules.hpp), S = double or interval64.
template <class S>
std::vector<S> reverse_sweep(const Graph& graph, const std::vector<Tensor<S>>& values,
                             const std::vector<char>& active, std::vector<S> w);

}  // namespace regatta::graph::detail
