#pragma once
// The forward-mode (tangent) rule of every node kind (docs/graph.md#forward-mode-and-jacobian-enclosures):
// given the forward values of a node's inputs and output and the tangents of its inputs, the tangent of its
// output.
#include <vector>

#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/graph.hpp>

namespace regatta::graph::detail {

/// in: the node's input tensors (forward); out: its output tensor; t_in[i]: the tangent of in[i] (shaped like
/// it), or nullptr where it is zero (constants, values the graph input does not reach). Returns the tangent
/// of out, flattened. S = double: J·v at a point; S = interval64 or interval (MPFI) with the forward over a
/// box: an enclosure of the tangent at every point of the box.
template <class S>
std::vector<S> node_jvp(const Graph& graph, const Node& node, const std::vector<const Tensor<S>*>& in,
                        const Tensor<S>& out, const std::vector<const Tensor<S>*>& t_in);

}  // namespace regatta::graph::detail
