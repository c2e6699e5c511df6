#pragma once
// Projected gradient descent of a piecewise-smooth function of a Graph's outputs over an attack set
// (docs/graph.md, "Attack"): the engine behind pgd_attack (the classification margin) and verify's attack
// (a VNNLIB property's objective). Binary64 throughout: the points it returns are candidates.
#include <functional>
#include <vector>

#include <regatta/graph/attack.hpp>

namespace regatta::graph::detail {

struct Objective {
  /// The value to minimise at the outputs y, and in w (sized like y, zeroed) its gradient with respect to y
  /// on the piece active at y. NaN counts as +∞.
  std::function<double(const std::vector<double>& y, std::vector<double>& w)> value;
  /// Called at every evaluated point x of the set with its outputs and value; true ends the search.
  std::function<bool(const std::vector<double>& x, const std::vector<double>& y, double value)> visit;
};

struct Minimum {
  std::vector<double> point, output;  ///< the best point evaluated and its outputs
  double value = 0;                   ///< the objective there (+∞ when every value was NaN)
  std::size_t evaluations = 0;        ///< forward passes (each step also runs a reverse sweep)
  bool ended = false;                 ///< visit asked to end
};

/// Checks the set against the input size n (sizes, finite radius ≥ 0, a non-empty intersection with the
/// box); throws InputError naming `subject` otherwise.
void check_attack_set(const AttackSet& set, std::size_t n, const std::string& subject);

/// The point of the set nearest to x in the set's norm's Euclidean sense: per-coordinate clamping for ℓ∞;
/// for ℓ2 the exact Euclidean projection onto ball ∩ box (clamp((1 − μ)x + μ·centre), μ by bisection).
std::vector<double> project(const AttackSet& set, std::vector<double> x);

/// Starts at the centre (projected), then `options.restarts` times at a seeded random point of the set;
/// each start takes `options.steps` steps: ℓ∞ sign steps (scaled per coordinate), ℓ2 normalised gradient
/// steps, of length 5·radius/steps decaying to 0 along a half cosine (about 2.5·radius in all), each
/// followed by the projection.
Minimum pgd_minimise(const Graph& graph, const AttackSet& set, const Objective& objective,
                     const AttackOptions& options);

}  // namespace regatta::graph::detail
