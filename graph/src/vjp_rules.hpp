#pragma once
// The adjoint rule of every node kind (docs/graph.md, "Derivatives"): given the forward values of a node's
// inputs and output and the adjoint of its output, add the adjoint of each input that needs one.
#include <vector>

#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/graph.hpp>

namespace regatta::graph::detail {

/// in: the node's input tensors (forward, binary64); out: its output tensor; g_out: ∂L/∂out (out's size);
/// g_in[i]: ∂L/∂in[i], accumulated into (sized like in[i]), or nullptr where no adjoint is wanted (constants,
/// values the graph input does not reach).
void node_vjp(const Graph& graph, const Node& node, const std::vector<const Tensor<double>*>& in,
              const Tensor<double>& out, const std::vector<double>& g_out,
              const std::vector<std::vector<double>*>& g_in);

}  // namespace regatta::graph::detail
