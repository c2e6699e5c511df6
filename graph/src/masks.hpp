#pragma once
// The rule for infinite constants in a Graph (docs/graph.md#non-finite-constants).
#include <regatta/graph/graph.hpp>

namespace regatta::graph::detail {

/// NaN and +inf in no constant; a constant with −inf entries read only as an attention mask: by Add or a
/// value operand of Where (through data movement), whose −inf entries reach only Softmax nodes, no softmax
/// row all −inf. Throws InputError naming the graph's source and the node.
void check_infinite_masks(const Graph& g);

}  // namespace regatta::graph::detail
