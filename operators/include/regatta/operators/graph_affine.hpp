#pragma once
// Certified bounds of a whole graph::Graph over a perturbation set by affine forms (zonotopes), the same
// forms and transfer functions as model_affine.hpp, walked node by node over the one graph representation
// (docs/graph.md).
//
// THE INPUT SET, in the coordinates of the graph's single input tensor (flattened row-major):
//   l2:   {centre + radius·ε : ‖ε‖₂ ≤ 1}
//   linf: {x : |x_j − centre_j| ≤ radius·scale_j for every j}   (scale empty: every scale_j = 1)
// optionally intersected with the box [lower, upper] (the valid input range, pixels in [0, 1] after the
// normalisation the model or the user states). For linf the intersection is again a box and is used exactly;
// for l2 the ball is kept whole (a superset of the intersection: still sound, not tighter).
//
// WHAT IS CERTIFIED. Every number below is a bound of the exact real-number function the graph computes
// (binary64 constants taken as exact reals), valid at every point of the input set: lower ends are rounded
// down, upper ends up. −∞ (or an unbounded interval) when a range became unbounded or a denominator's range
// reached 0 on the way: nothing is certified then.
#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/graph/attack.hpp>
#include <regatta/graph/graph.hpp>

namespace regatta::operators {

/// ℓ2 ball or ℓ∞ box (the attack's sets are the same kinds).
using InputNorm = graph::Norm;

struct InputSet {
  InputNorm norm = InputNorm::l2;
  Vector<double> centre;
  double radius = 0;
  Vector<double> scale;         ///< linf only: per-coordinate multipliers of the radius (empty: all 1)
  Vector<double> lower, upper;  ///< the valid input range (both empty: none)
};

/// How the pass computes, not what it certifies.
struct GraphAffineOptions {
  const std::atomic<bool>* stop =
      nullptr;  ///< checked between nodes: once set, the pass stops and certifies nothing (−∞)
  std::size_t max_bytes = std::size_t{4} << 30;  ///< the forms alive at once; beyond: InputError
  /// Projected subgradient steps, per ReLU node and functional, that choose the slopes of the unstable
  /// elements for the final bound (docs/verify.md#optimised-relu-slopes; 0: the pass's fixed slopes only).
  /// Any slopes are sound.
  int slope_steps = 20;
};

/// Empty when graph_affine_* applies to the graph (one runtime input, one output, every node kind
/// supported), otherwise one line naming the first node that is not supported and why.
std::string graph_affine_unsupported(const graph::Graph& graph);

/// CERTIFIED lower bounds, over the input set, of each functional C.row(k)·y + d(k) of the graph's output y
/// (flattened row-major). The functionals are applied to the output's forms before bounding, so the
/// dependence of the entries on common symbols cancels; each functional's ReLU remainders are re-expressed
/// with slopes chosen for it (options.slope_steps; docs/verify.md#optimised-relu-slopes), the better bound
/// kept.
std::vector<double> graph_affine_lower_bounds(const graph::Graph& graph, const InputSet& set,
                                              const Matrix<double>& C, const Vector<double>& d,
                                              const GraphAffineOptions& options = {});

/// CERTIFIED enclosures of every output entry over the input set.
std::vector<interval64> graph_affine_output_ranges(const graph::Graph& graph, const InputSet& set,
                                                   const GraphAffineOptions& options = {});

/// CERTIFIED lower bound of min over the input set and c ≠ label of y_label − y_c (y the flattened output:
/// the logits). Positive: every point of the set is classified `label`.
double graph_affine_margin(const graph::Graph& graph, const InputSet& set, int label,
                           const GraphAffineOptions& options = {});

/// The largest radius r in (0, upper] found with graph_affine_margin > 0 on `set` scaled to radius r
/// (set.radius is ignored), within a factor 1 + tolerance of the smallest failing radius tried. 0 when the
/// label is not the certified prediction at the centre or nothing passed. CERTIFIED: the returned radius
/// itself passed.
double graph_certified_radius(const graph::Graph& graph, const InputSet& set, int label, double upper,
                              double tolerance = 0.01, const GraphAffineOptions& options = {});

}  // namespace regatta::operators
