#pragma once
// The robustness of one labelled input of a graph::Graph in ℓ2 or ℓ∞
// (docs/models.md#certifying-an-onnx-graph): what `regatta certify --model M.onnx` reports per input and
// Python's GraphModel.robustness returns.
#include <atomic>
#include <vector>

#include <regatta/graph/attack.hpp>
#include <regatta/graph/graph.hpp>
#include <regatta/operators/model_robustness.hpp>

namespace regatta::operators {

struct GraphRobustnessOptions {
  graph::Norm norm = graph::Norm::l2;
  std::vector<double> lower, upper;  ///< the valid input range per coordinate (both empty: none)
  double cap = 100;                  ///< the largest radius searched
  double tolerance = 0.01;           ///< of the certified radius's search (graph_certified_radius)
  /// Checked by the attack and the affine passes: once set, they stop; the row is then meaningless and the
  /// caller discards it (Python raises KeyboardInterrupt).
  const std::atomic<bool>* stop = nullptr;
  /// affine: graph_certified_radius (affine forms); region: graph_region_radius (graph_region.hpp).
  RadiusMethod method = RadiusMethod::affine;
  /// > 0: after the certified radius, branch and bound raises it for at most this many seconds
  /// (graph_bab_radius between it and the attack radius, or cap; affine method only). 0: none.
  double budget_per_input = 0;
};

/// ESTIMATE: the smallest radius at which PGD (graph::pgd_attack) finds a point the double forward
/// misclassifies, an upper bound on the true radius: from the first-order guess margin/‖∇(y_label −
/// y_runner-up)‖_dual, doubling until found, then geometric bisection to 2 %. 0 when margin ≤ 0 (the centre
/// is misclassified), inf when nothing is found up to options.cap.
double graph_attack_radius(const graph::Graph& graph, const std::vector<double>& x, int label, double margin,
                           const GraphRobustnessOptions& options);

/// One row of `regatta certify` for a graph: prediction and margin (ESTIMATES, double forward), the margin's
/// CERTIFIED lower end (interval64 forward), the attack radius (ESTIMATE) and, when the prediction is the
/// label and the certified margin is positive, the CERTIFIED radius (graph_certified_radius, or
/// graph_region_radius for options.method = region, below the attack radius, or below options.cap when the
/// attack found nothing). `refuted` is NaN for affine forms (graph_certified_radius does not report it).
/// With options.budget_per_input, also the bab columns (has_bab; bab = certified with a note when the
/// certified margin at x is not positive).
InputRobustness graph_input_robustness(const graph::Graph& graph, const std::vector<double>& x, int label,
                                       const GraphRobustnessOptions& options);

}  // namespace regatta::operators
