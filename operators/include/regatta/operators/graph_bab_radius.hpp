#pragma once
// The certified radius of a graph::Graph raised by branch and bound under a time budget
// (docs/models.md#branch-and-bound-in-certify): after the affine forms' search (graph_certified_radius) has
// certified r0, the bisection goes on between r0 and an upper end (the attack radius: no radius above a
// counterexample can be certified), each test at r a graph::verify run on "some other logit ≥ the label's
// logit" over the set of radius r, with the affine forms as its bounds (graph_verify_bounds.hpp).
//
// THE SET of radius r around x: the l∞ box [x − r, x + r] or the l2 ball of radius r, intersected with the
// valid input range [lower, upper] when given. verify works on a box: for l∞ the box itself, rounded
// outward; for l2 the ball's bounding box with VerifyOptions::box_encloses_set (phase splitting over the
// ball only, no attack, no input splitting).
//
// THE RADII TESTED: from [r0, upper] the search probes r = lo·(1 + step) (step = 4·tolerance, doubled after
// each proof) while that lies below the geometric midpoint of [lo, hi], and the geometric midpoint otherwise
// (a failed probe becomes hi): tests concentrate just above r0, where proofs are likely.
//
// The search on a test: ReLU phase splitting where the graph has a ReLU (GraphAffineBranching), then, for l∞,
// input splitting when a phase branch has no unstable ReLU left; input splitting for l∞ without a ReLU; none
// for l2 without a ReLU (the radius stays r0 and `note` says why).
//
// WHAT IS CERTIFIED: `radius` ≥ r0, and every radius the search accepted, `radius` among them, is one at
// which verify answered unsat: for every point of the set the label's logit (of the exact real-number
// function the graph computes) is larger than every other logit. A test that ends in a timeout or unknown
// counts as refuted (it only steers the search); `refuted` is the smallest radius at which verify certified
// a counterexample (MPFI re-check), +inf when none.
#include <atomic>
#include <limits>
#include <string>
#include <vector>

#include <regatta/graph/attack.hpp>
#include <regatta/graph/graph.hpp>

namespace regatta::operators {

struct GraphBabOptions {
  graph::Norm norm = graph::Norm::l2;
  std::vector<double> lower, upper;  ///< the valid input range per coordinate (both empty: none)
  double tolerance = 0.01;           ///< the bisection ends when upper end / radius ≤ 1 + tolerance
  /// Wall-clock seconds for the whole search (> 0). Each test gets the time left divided by the tests still
  /// needed should it fail; the search stops once it is spent (a pass in flight stops at its next node).
  double budget_seconds = 0;
  const std::atomic<bool>* stop = nullptr;  ///< Ctrl-C: once set, the search ends (the result is meaningless)
};

struct GraphBabRadius {
  double radius = 0;  ///< CERTIFIED (see above): r0 when no test passed
  double refuted = std::numeric_limits<double>::infinity();  ///< a certified counterexample's radius
  double seconds = 0;                                        ///< wall-clock time used
  long branches = 0;  ///< phase branches bounded plus input boxes split, over all the tests
  int tests = 0, proved = 0;
  std::string note;  ///< one line when the search could not run or help (empty otherwise)
};

/// `certified` is r0 (> 0 or 0), `upper` the upper end (> r0; finite), `label` the class at x (its certified
/// margin at x positive: the caller checked).
GraphBabRadius graph_bab_radius(const graph::Graph& graph, const std::vector<double>& x, int label,
                                double certified, double upper, const GraphBabOptions& options);

}  // namespace regatta::operators
