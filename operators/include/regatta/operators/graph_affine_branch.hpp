#pragma once
// Branch and bound on ReLU phases and on the input ranges of other nonlinearities, with the graph's affine
// forms (docs/verify.md#phase-splitting, docs/verify.md#general-splits): one object per (graph, input set,
// functionals) that computes the root pass once, keeps the walk's state before every node of a split kind,
// and bounds a branch (a list of constraints x ≥ t or x ≤ t on the input x of elements of such nodes) by
// resuming from the state before its first constrained node.
//
// IN A BRANCH each constrained element's relaxation is computed on its input range intersected with its
// constraints (for a relu at t = 0: the identity on x ≥ 0, zero on x ≤ 0): on the points of the set that
// meet the constraints the modified graph's relaxations hold, so its forms enclose the graph's values
// there. The constraints s_i·(x_i − t_i) ≥ 0 (s_i = ±1) then enter the bound of each functional f by
// Lagrangian relaxation: for multipliers β_i ≥ 0, min over the forms' symbols of [f − Σ β_i·s_i·(x_i − t_i)]
// is a lower bound of f over the branch, where x_i is the constrained element's input form (same symbols,
// its slack an independent bounded term). The multipliers are optimised by a few projected supergradient
// steps; any β ≥ 0 is sound, and the bound at the final β is evaluated with every rounding error accounted
// for (outward, as graph_affine_lower_bounds does). An element whose range misses its constraints makes the
// branch empty.
//
// WHAT IS CERTIFIED: PhaseBranchBounds::lower (graph/verify.hpp) over the points of the input set that meet
// the branch's constraints, every number rounded outward; −∞ when a range became unbounded or the stop flag
// was set.
#include <cstddef>
#include <memory>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/graph/graph.hpp>
#include <regatta/graph/verify.hpp>
#include <regatta/operators/graph_affine.hpp>

namespace regatta::operators {

class GraphAffineBranching final : public graph::PhaseBounder {
 public:
  /// Runs the root pass (the graph must outlive the object). Functional k is C.row(k)·y + d(k) of the
  /// flattened output y (d empty: 0). Throws InputError like graph_affine_lower_bounds.
  /// `split_kinds`: the kinds of node whose elements branches may constrain (a subset of
  /// splittable_kinds(), else std::invalid_argument; empty: all of them).
  GraphAffineBranching(const graph::Graph& graph, const InputSet& set, Matrix<double> C, Vector<double> d,
                       const GraphAffineOptions& options = {}, int multiplier_steps = 20,
                       std::vector<graph::Op> split_kinds = {});
  ~GraphAffineBranching() override;
  GraphAffineBranching(const GraphAffineBranching&) = delete;
  GraphAffineBranching& operator=(const GraphAffineBranching&) = delete;

  const graph::PhaseBranchBounds& root() const override;
  /// Every constraint must name a node of a split kind, an element of its output and a finite threshold
  /// (else std::invalid_argument).
  graph::PhaseBranchBounds bound(const std::vector<graph::Phase>& phases,
                                 const std::vector<std::vector<double>>& warm) override;
  /// relu, gelu, erf, tanh, sigmoid, sqrt, reciprocal: the kinds of node whose elements can be split.
  static std::vector<graph::Op> splittable_kinds();
  /// Whether the graph has a node of one of `kinds` (empty: splittable_kinds()) whose input is computed
  /// (phase splitting has something to split).
  static bool has_split_node(const graph::Graph& graph, const std::vector<graph::Op>& kinds);
  /// has_split_node(graph, {relu}).
  static bool has_relu(const graph::Graph& graph);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace regatta::operators
