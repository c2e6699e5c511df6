#pragma once
// One node of the forward (evaluate.cpp), for the rules that reuse it: the forward-mode rule of a node that
// is linear in each operand is the node itself applied to the tangents (jvp_rules.cpp).
#include <vector>

#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/graph.hpp>

namespace regatta::graph::detail {

/// The output data of `node` for the input tensors `in` (one per node input, in order; optional inputs may
/// be left off) and the output shape `out`. For Pow and Where the exponent and condition are read from the
/// graph's constants, not from `in`.
template <class S>
std::vector<S> evaluate_node(const Graph& graph, const Node& node, const std::vector<const Tensor<S>*>& in,
                             const Shape& out);

}  // namespace regatta::graph::detail
