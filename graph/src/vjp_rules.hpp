#pragma once
// The adjoint rule of every node kind (docs/graph.md, "Derivatives"): given the forward values of a node's
// inputs and output and the adjoint of its output, add the adjoint of each input that needs one; over double
// and interval64.
#include <vector>

#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/graph.hpp>

namespace regatta::graph::detail {

/// in: the node's input tensors (forward); out: its output tensor; g_out: ∂L/∂out (out's size); g_in[i]:
/// ∂L/∂in[i], accumulated into (sized like in[i]), or nullptr where no adjoint is wanted (constants, values
/// the graph input does not reach). S = double: the binary64 adjoint at a point; S = interval64 with the
/// forward over a box: an enclosure of the adjoint at every point of the box (intervals in, intervals out).
template <class S>
void node_vjp(const Graph& graph, const Node& node, const std::vector<const Tensor<S>*>& in,
              const Tensor<S>& out, const std::vector<S>& g_out, const std::vector<std::vector<S>*>& g_in);

}  // namespace regatta::graph::detail
