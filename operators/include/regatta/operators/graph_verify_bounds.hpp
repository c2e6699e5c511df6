#pragma once
// The affine forms of a graph as the caller's bounds of graph::verify (docs/verify.md#phase-splitting): the
// bounds of a box (graph_affine_lower_bounds) and the phase splitting's bounder (GraphAffineBranching).
// WHAT IS CERTIFIED: what graph_affine.hpp and graph_affine_branch.hpp certify, over the set named below.
#include <atomic>
#include <optional>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/graph/graph.hpp>
#include <regatta/graph/verify.hpp>
#include <regatta/operators/graph_affine.hpp>

namespace regatta::operators {

/// The l∞ input set around the midpoint of [lo, hi] with per-coordinate half-widths rounded up (a box
/// containing [lo, hi]), intersected with [lo, hi] itself as the valid range: exactly the box.
InputSet box_input_set(const std::vector<double>& lo, const std::vector<double>& hi);

/// The functionals as the rows of a matrix over the graph's flattened output.
Matrix<double> functional_matrix(const graph::Graph& graph,
                                 const std::vector<graph::OutputFunctional>& functionals);

/// verify's bounds of a box: graph_affine_lower_bounds on box_input_set(lo, hi). The graph must outlive the
/// function; `stop` is the affine passes' stop flag (may be null).
graph::BoxLowerBounds affine_box_lower_bounds(const graph::Graph& graph, const std::atomic<bool>* stop);

/// verify's phase bounder: GraphAffineBranching over box_input_set(lo, hi) of the box verify passes, or,
/// when `set` is given, over *set whatever the box (the set must lie in verify's box, as an l2 ball lies in
/// its bounding box: VerifyOptions::box_encloses_set). `kinds`: the node kinds a branch may split
/// (GraphAffineBranching's split_kinds; ReLU phases by default).
graph::PhaseBounderFactory affine_phase_bounds(const graph::Graph& graph, const std::atomic<bool>* stop,
                                               std::optional<InputSet> set = std::nullopt,
                                               std::vector<graph::Op> kinds = {graph::Op::relu});

}  // namespace regatta::operators
