#pragma once
// Branch and bound on ReLU phases with the graph's affine forms (docs/verify.md#phase-splitting): one object
// per (graph, input set, functionals) that computes the root pass once, keeps the walk's state before every
// ReLU node, and bounds a branch (a list of ReLU elements with a fixed phase) by resuming from the state
// before its first split node.
//
// IN A BRANCH each split element's relaxation is replaced by the identity (active: x ≥ 0) or zero (inactive:
// x ≤ 0): on the points of the set where the split pre-activations have those signs the modified graph
// computes exactly the graph's values, so its forms enclose them there. The constraints s_i·x_i ≥ 0 (s_i =
// ±1) then enter the bound of each functional f by Lagrangian relaxation: for multipliers β_i ≥ 0, min over
// the forms' symbols of [f − Σ β_i·s_i·x_i] is a lower bound of f over the branch, where x_i is the split
// element's pre-activation form (same symbols, its slack an independent bounded term). The multipliers are
// optimised by a few projected supergradient steps; any β ≥ 0 is sound, and the bound at the final β is
// evaluated with every rounding error accounted for (outward, as graph_affine_lower_bounds does). A split
// element whose own range contradicts its phase makes the branch empty.
//
// WHAT IS CERTIFIED: PhaseBranchBounds::lower (graph/verify.hpp) over the points of the input set whose
// ReLUs have the branch's phases, every number rounded outward; −∞ when a range became unbounded or the
// stop flag was set.
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
  GraphAffineBranching(const graph::Graph& graph, const InputSet& set, Matrix<double> C, Vector<double> d,
                       const GraphAffineOptions& options = {}, int multiplier_steps = 20);
  ~GraphAffineBranching() override;
  GraphAffineBranching(const GraphAffineBranching&) = delete;
  GraphAffineBranching& operator=(const GraphAffineBranching&) = delete;

  const graph::PhaseBranchBounds& root() const override;
  /// Every phase must name a relu node of the graph and an element of its output (else
  /// std::invalid_argument).
  graph::PhaseBranchBounds bound(const std::vector<graph::Phase>& phases,
                                 const std::vector<std::vector<double>>& warm) override;
  /// Whether the graph has a relu node whose input is computed (phase splitting has something to split).
  static bool has_relu(const graph::Graph& graph);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace regatta::operators
