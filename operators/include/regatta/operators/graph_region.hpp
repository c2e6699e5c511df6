#pragma once
// The certified radius of a graph::Graph by region enclosures of its gradient
// (docs/models.md#region-enclosures-of-a-graph): the graph counterpart of the safetensors path's `certify
// --method region`, for any graph the derivative rules cover (every node kind).
//
// THE BOUND. For the input set S of radius r around x (graph_affine.hpp's InputSet: the ℓ2 ball or the ℓ∞
// box, intersected with the valid input range when given) and each class c ≠ label, the margin
// m_c = y_label − y_c satisfies, by the mean-value inequality along the segment from x to x′ ∈ S,
//   m_c(x′) ≥ m_c(x) − r·‖G_c‖_dual,
// where G_c ⊇ {∇m_c(ξ) : ξ ∈ B} is the interval64 reverse sweep (graph::vjps) over the box B ⊇ S (for ℓ2 the
// cube of half-width r, for ℓ∞ the box itself, each intersected with the input range), ‖G_c‖_dual the
// largest dual norm over G_c (ℓ2 for the ball; Σ_j scale_j·|G_cj| for the box), rounded up, and m_c(x) the
// lower end of the interval64 forward at x. The margin bound is min_c of the right side, rounded down.
#include <atomic>
#include <string>

#include <regatta/graph/graph.hpp>
#include <regatta/operators/graph_affine.hpp>
#include <regatta/operators/model_robustness.hpp>

namespace regatta::operators {

/// Empty when graph_region_* applies (one runtime input, one output of 2 or more entries), otherwise one
/// line saying why.
std::string graph_region_unsupported(const graph::Graph& graph);

/// CERTIFIED lower bound of min over the set and c ≠ label of y_label − y_c, by the bound above
/// (set.radius the radius r). −∞ when an enclosure became unbounded or NaN. Throws std::logic_error for a
/// label that is not an output index.
double graph_region_margin(const graph::Graph& graph, const InputSet& set, int label);

/// The largest radius r in (0, upper] found with graph_region_margin > 0 on `set` scaled to radius r
/// (set.radius is ignored), by search_certified_radius (the search of graph_certified_radius); radius 0
/// when the label is not the certified prediction at the centre or nothing passed. CERTIFIED: the
/// returned radius itself passed. `stop` (may be null) ends the search early.
CertifiedRadius graph_region_radius(const graph::Graph& graph, const InputSet& set, int label, double upper,
                                    double tolerance = 0.01, const std::atomic<bool>* stop = nullptr);

}  // namespace regatta::operators
