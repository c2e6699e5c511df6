#pragma once
// Sound verdicts on a VNNLIB property of a Graph (docs/verify.md): interval bound propagation (the interval64
// forward of evaluate.hpp) on the input box, optionally tightened by a caller's certified linear bounds (the
// affine forms of operators/graph_affine.hpp, which this library sits below), a PGD and corner attack for
// counterexamples, and branch and bound by input splitting until the time limit.
//
//  * unsat  only when, for every box of a partition of the (outward-rounded) input box, the certified bound
//           (interval or the caller's) of every disjunct of the output condition shows it infeasible;
//  * sat    only with a concrete input in the box whose outputs, evaluated in MPFI interval arithmetic at
//           exactly that input, certainly satisfy one disjunct;
//  * unknown when the search stopped before the time limit without either (frontier limit reached, boxes
//           that cannot be split further);
//  * timeout when the time limit came first.
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <regatta/graph/graph.hpp>
#include <regatta/graph/vnnlib.hpp>

namespace regatta::graph {

enum class Verdict { unsat, sat, unknown, timeout };
/// "unsat", "sat", "unknown", "timeout" (VNN-COMP's words).
std::string verdict_name(Verdict v);

/// A linear functional of the graph's flattened output y: Σ coefficient·y_index over `terms`.
struct OutputFunctional {
  std::vector<std::pair<std::size_t, double>> terms;
};

/// CERTIFIED lower bounds, over the box [lo, hi] of the graph's input (flattened), of each functional: the
/// caller's bounding of a box (verify takes, atom by atom, the better of it and IBP). A bound may be −∞
/// (nothing certified); the result has one entry per functional.
using BoxLowerBounds =
    std::function<std::vector<double>(const std::vector<double>& lo, const std::vector<double>& hi,
                                      const std::vector<OutputFunctional>& functionals)>;

/// One constraint of a branch of the phase splitting: the input x of element `element` (flat) of
/// graph.nodes[node], a one-operand nonlinearity, lies in x ≥ threshold (active) or x ≤ threshold
/// (inactive). For a relu with threshold 0 these are its phases (relu = identity, or 0); for gelu, erf,
/// tanh, sigmoid, sqrt and reciprocal the node's relaxation of that element uses its range cut at the
/// threshold (docs/verify.md#general-splits). Constraints on one element nest.
struct Phase {
  std::size_t node = 0, element = 0;
  bool active = true;
  double threshold = 0;
};

/// CERTIFIED bounds of a branch of the phase splitting (docs/verify.md#phase-splitting).
struct PhaseBranchBounds {
  /// Per functional, a lower bound over the points of the box whose ReLUs have the branch's phases; +∞ for
  /// every functional when no point has them (the branch is empty); −∞: nothing certified.
  std::vector<double> lower;
  bool empty = false;
  /// Per functional, the multipliers of the phase constraints that gave `lower` (warm start for a child).
  std::vector<std::vector<double>> multipliers;
  /// Per functional, the element whose relaxation widens that bound most (node, element): an unstable ReLU
  /// or a curved element of another splittable kind; node = SIZE_MAX: none left.
  std::vector<std::pair<std::size_t, std::size_t>> branch_on;
  /// Per functional, the threshold to split branch_on's element at (empty: 0 for every functional).
  std::vector<double> branch_at;
};

/// The caller's bounding of phase branches on one box (the affine forms of graph_affine_branch.hpp):
/// `root` is the branch with no phase fixed.
class PhaseBounder {
 public:
  virtual ~PhaseBounder() = default;
  virtual const PhaseBranchBounds& root() const = 0;
  /// `warm`: the parent's multipliers (one per phase but the last), or empty.
  virtual PhaseBranchBounds bound(const std::vector<Phase>& phases,
                                  const std::vector<std::vector<double>>& warm) = 0;
};
/// Builds the bounder of the box [lo, hi] for the functionals; null when phase splitting does not apply.
using PhaseBounderFactory =
    std::function<std::unique_ptr<PhaseBounder>(const std::vector<double>& lo, const std::vector<double>& hi,
                                                const std::vector<OutputFunctional>& functionals)>;

struct VerifyOptions {
  double timeout_seconds = 60;
  std::uint64_t seed = 1;
  double attack_share = 0.25;  // of the time spent on the attack before the splitting
  std::size_t max_frontier_bytes = std::size_t{1} << 30;  // the open boxes of the branch and bound
  std::size_t split_candidates = 4;                       // dimensions tried per split when there are many
  const std::atomic<bool>* stop = nullptr;                // checked between evaluations (Ctrl-C)
  /// Certified bounds besides IBP (empty: IBP only). Used on the whole box and on the two halves of every
  /// split chosen (the choice of the split itself is scored by IBP, which is far cheaper).
  BoxLowerBounds box_lower_bounds;
  bool split =
      true;  ///< false: no branch and bound; a box the bounds of the whole box do not refute is unknown
  /// When given (and split): branch and bound on ReLU phases instead of input splitting; the root's bounds
  /// come from it instead of box_lower_bounds. Null bounder: input splitting. A phase branch with no
  /// unstable ReLU left that is not refuted ends the phase search; input splitting of the whole box then
  /// runs on the time left (docs/verify.md#phase-splitting).
  PhaseBounderFactory phase_bounds;
  /// true: the property's box only encloses the set the caller's bounds are over (an l2 ball's bounding
  /// box, docs/models.md#branch-and-bound-in-certify). unsat then still proves the condition false on that
  /// set (every bound used holds on the box or on the set), but a point of the box need not lie in the set:
  /// no attack runs, and no input splitting either (phase splitting only; unknown without phase_bounds).
  bool box_encloses_set = false;
};

struct VerifyResult {
  Verdict verdict = Verdict::unknown;
  std::string reason;          // one line: how the verdict was reached
  std::vector<double> input;   // sat: the counterexample (in the box)
  std::vector<double> output;  // sat: the model's outputs at it (double forward, for the report)
  double root_bound = 0;       // the IBP margin of the whole box (< 0 proves it alone)
  double root_affine_bound =
      std::numeric_limits<double>::quiet_NaN();  // the same with box_lower_bounds (NaN: none)
  std::string
      proved_by;  // unsat: "ibp", "affine" or "ibp+affine" (atoms of both) on the whole box, or "splitting"
  std::size_t affine_evaluations = 0,
              boxes_proved_by_affine = 0;  // calls of box_lower_bounds; split boxes it refuted
  std::size_t boxes_proved = 0, boxes_split = 0, ibp_evaluations = 0, point_evaluations = 0;
  std::size_t max_frontier = 0;
  double proved_volume_fraction = 0;  // of the box, by the boxes proved (in log-free units: sum of 2^-depth)
  double seconds = 0;
  std::string splitting;  // "phase", "input" or "" (none ran)
  std::size_t phase_branches = 0, phase_branches_proved = 0, phase_max_depth = 0;  // phase splitting
  std::map<std::string, std::size_t> phase_branches_by_kind;  // the branches created, by the split node's op
};

/// The graph must have one input and one output tensor whose element counts are the property's (checked:
/// InputError naming the property's file otherwise).
VerifyResult verify(const Graph& graph, const Property& property, const VerifyOptions& options = {});

/// Whether the outputs of the graph at `input`, evaluated in MPFI intervals, certainly satisfy a disjunct of
/// the property (the sat re-check). Exposed for tests.
bool certainly_satisfies(const Graph& graph, const Property& property, const std::vector<double>& input);

}  // namespace regatta::graph
