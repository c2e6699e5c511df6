#pragma once
// Reverse-mode derivatives of a Graph and a projected-gradient attack on its outputs (docs/graph.md).
//
// Everything here is an ESTIMATE computed in binary64: a gradient steers the search, and a point the attack
// returns is a candidate. A caller that reports a counterexample as certain re-evaluates it in interval
// arithmetic first (verify.hpp's certainly_satisfies; the margin's interval64 forward for certify).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <regatta/graph/graph.hpp>

namespace regatta::graph {

/// The perturbation sets of an attack: the ℓ2 ball or the ℓ∞ box of a radius around a centre.
enum class Norm { l2, linf };

/// The gradient, with respect to the graph's single input (flattened row-major), of Σ_k w_k·y_k at `input`,
/// y the graph's single output (flattened): a vector-Jacobian product in binary64. Throws InputError naming
/// the graph's source when a size does not match.
std::vector<double> vjp(const Graph& graph, const std::vector<double>& input, const std::vector<double>& w);

struct AttackOptions {
  int steps = 100;   ///< projected steps per start
  int restarts = 1;  ///< further starts from random points of the set
  std::uint64_t seed = 1;
  const std::atomic<bool>* stop = nullptr;  ///< checked between steps
  bool stop_when_found = true;              ///< end at the first point whose margin is < 0
};

/// The perturbation set of an attack: {x : ‖x − centre‖ ≤ radius (scaled per coordinate by `scale` for ℓ∞)}
/// ∩ [lower, upper] (each empty: unbounded; `scale` empty: 1). The ℓ∞ ends centre ± radius·scale are
/// computed in binary64 (rounded to nearest), so a point may lie a rounding error outside the real set; it is
/// always inside [lower, upper] exactly.
struct AttackSet {
  Norm norm = Norm::l2;
  std::vector<double> centre;
  double radius = 0;
  std::vector<double> scale, lower, upper;
};

struct AttackResult {
  bool found = false;           ///< the double forward at `point` misclassifies (margin < 0): an ESTIMATE
  std::vector<double> point;    ///< the best point found (in the set)
  double margin = 0;            ///< y_label − max_{c≠label} y_c at `point`, double forward: an ESTIMATE
  std::size_t evaluations = 0;  ///< forward passes spent (each step adds a reverse sweep)
};

/// Projected gradient descent on the margin y_label − max_{c≠label} y_c over the set (docs/graph.md,
/// "Attack"): the first start at the centre, `restarts` more at seeded uniform random points of the set;
/// `steps` steps each, ℓ∞ sign steps scaled per coordinate or ℓ2 normalised-gradient steps, of length
/// 5·radius/steps decaying to 0 along a half cosine, each followed by the projection onto the set (exact
/// Euclidean projection onto ball ∩ box for ℓ2). The result is the lowest margin of every point evaluated.
/// Throws InputError naming the graph's source for a graph without one input and one output, a set not
/// sized like the input or empty, or a label out of range. Deterministic for a given seed.
AttackResult pgd_attack(const Graph& graph, const AttackSet& set, int label,
                        const AttackOptions& options = {});

}  // namespace regatta::graph
