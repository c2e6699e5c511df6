#pragma once
// Forward evaluation of a Graph over a scalar type S (docs/graph.md, "Evaluation").
//
// One generic walk for every scalar: double gives the floating-point forward, interval64 and interval
// (MPFI) give enclosures of the exact real-number forward of the graph (every operation is rounded outward;
// the elementary functions erf, tanh, exp, sqrt are enclosed). Constants enter exactly (they are binary64
// values, and every S instantiated here holds binary64 exactly), except that an interval S takes a constant
// with an enclosure radius r as [v − r, v + r] (docs/graph.md#enclosure-radii-of-constants); double takes v
// (an estimate). Batch size is whatever the graph's input shapes say (the importer fixes them statically).
#include <vector>

#include <regatta/core/scalar.hpp>
#include <regatta/graph/graph.hpp>

namespace regatta::graph {

template <class S>
struct Tensor {
  Shape shape;
  std::vector<S> data;  // row-major
};

/// The graph's outputs for the given inputs (one per graph input, in order, each with the input's shape).
/// Throws InputError naming the input when a shape does not match.
template <class S>
std::vector<Tensor<S>> evaluate(const Graph& graph, const std::vector<Tensor<S>>& inputs);

/// Every value of the graph (constants included), indexed by value id: for inspection and tests of
/// intermediate tensors.
template <class S>
std::vector<Tensor<S>> evaluate_all(const Graph& graph, const std::vector<Tensor<S>>& inputs);

#define REGATTA_GRAPH_EVALUATE(S)                                                                  \
  extern template std::vector<Tensor<S>> evaluate<S>(const Graph&, const std::vector<Tensor<S>>&); \
  extern template std::vector<Tensor<S>> evaluate_all<S>(const Graph&, const std::vector<Tensor<S>>&);
REGATTA_GRAPH_EVALUATE(double)
REGATTA_GRAPH_EVALUATE(::regatta::interval64)
REGATTA_GRAPH_EVALUATE(::regatta::interval)
#undef REGATTA_GRAPH_EVALUATE

}  // namespace regatta::graph
