// The certified radius of a graph raised by branch and bound under a time budget (graph_bab_radius.hpp,
// docs/models.md#branch-and-bound-in-certify): the bisection between r0 and the upper end, each test a
// graph::verify run whose unsat is the certificate of its radius.
#include <regatta/operators/graph_bab_radius.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include <regatta/core/deadline.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/graph/verify.hpp>
#include <regatta/operators/graph_affine.hpp>
#include <regatta/operators/graph_affine_branch.hpp>
#include <regatta/operators/graph_verify_bounds.hpp>

namespace regatta::operators {
namespace {

using Clock = std::chrono::steady_clock;

// "Some logit c ≠ label is ≥ the label's" (a counterexample) over the box [x − r, x + r] ∩ [lower, upper]:
// outer box rounded outward (it encloses the real box), inner box rounded inward (inside it).
graph::Property set_property(const std::vector<double>& x, double r, int label, std::size_t classes,
                             const GraphBabOptions& o) {
  graph::Property p;
  p.source = "certify --budget-per-input";
  p.input_count = x.size();
  p.output_count = classes;
  for (std::size_t k = 0; k < x.size(); ++k) {
    const interval64 lo = interval64(x[k]) - interval64(r), hi = interval64(x[k]) + interval64(r);
    const double range_lo = o.lower.empty() ? -std::numeric_limits<double>::infinity() : o.lower[k];
    const double range_hi = o.upper.empty() ? std::numeric_limits<double>::infinity() : o.upper[k];
    p.outer_lower.push_back(std::max(lo.lower(), range_lo));
    p.outer_upper.push_back(std::min(hi.upper(), range_hi));
    p.inner_lower.push_back(std::max(lo.upper(), range_lo));
    p.inner_upper.push_back(std::min(hi.lower(), range_hi));
  }
  for (std::size_t c = 0; c < classes; ++c)
    if (c != static_cast<std::size_t>(label)) {
      graph::Atom a;
      a.greater.output = static_cast<int>(c);
      a.smaller.output = label;
      p.disjuncts.push_back({a});
    }
  return p;
}

// The tests the geometric bisection from [lo, hi] still needs to reach hi/lo ≤ 1 + tolerance.
double tests_left(double lo, double hi, double tolerance) {
  if (!(lo > 0)) return 8;  // halving from 0: no count is known; a guess that leaves time for later tests
  const double ratios = std::log(hi / lo) / std::log1p(tolerance);
  return std::max(1.0, std::ceil(std::log2(std::max(ratios, 1.0))));
}

}  // namespace

GraphBabRadius graph_bab_radius(const graph::Graph& g, const std::vector<double>& x, int label,
                                double certified, double upper, const GraphBabOptions& o) {
  const auto start = Clock::now();
  GraphBabRadius result;
  result.radius = certified;
  const bool l2 = o.norm == graph::Norm::l2;
  const bool relu = GraphAffineBranching::has_relu(g);
  if (l2 && !relu) {
    result.note =
        "the graph has no ReLU: phase splitting, the only branch and bound on an l2 ball, has "
        "nothing to split (the budget cannot help)";
    return result;
  }
  const std::size_t classes =
      static_cast<std::size_t>(graph::element_count(g.values[static_cast<std::size_t>(g.outputs[0])].shape));
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  const auto stopped = [&] { return o.stop != nullptr && o.stop->load(std::memory_order_relaxed); };
  double lo = certified, hi = upper;
  // Radii far above r0 are rarely proved, and a test that fails costs its whole share: the search probes
  // upward from lo by a factor 1 + step (step doubling after each proof) while that is below the geometric
  // midpoint, and bisects geometrically once a probe has failed.
  double step = 4 * o.tolerance;
  while (result.tests < 64 && !stopped()) {
    if (lo > 0 ? !(hi > lo * (1 + o.tolerance)) : !(hi > 0)) break;
    const double left = o.budget_seconds - elapsed();
    if (left < 0.02) break;
    double r = lo > 0 ? std::sqrt(lo) * std::sqrt(hi) : hi / 2;
    const bool probe = lo > 0 && lo * (1 + step) < r;
    if (probe) r = lo * (1 + step);
    if (!(r > lo && r < hi)) break;
    // The tests still needed if this one fails (the probe itself, then the bisection below it).
    const double share = left / (tests_left(lo, probe ? r : hi, o.tolerance) + (probe ? 1 : 0));
    const graph::Property p = set_property(x, r, label, classes, o);
    Deadline deadline(share, o.stop);
    graph::VerifyOptions v;
    v.timeout_seconds = share;
    v.stop = &deadline.passed;
    v.attack_share = 0.05;  // the caller's attack already bounds the search from above
    v.box_encloses_set = l2;
    if (!l2) v.box_lower_bounds = affine_box_lower_bounds(g, &deadline.passed);
    if (relu) {
      std::optional<InputSet> ball;
      if (l2) {
        ball.emplace();
        ball->norm = InputNorm::l2;
        ball->centre = Eigen::Map<const Vector<double>>(x.data(), Eigen::Index(x.size()));
        ball->radius = r;
        if (!o.lower.empty()) {
          ball->lower = Eigen::Map<const Vector<double>>(o.lower.data(), Eigen::Index(o.lower.size()));
          ball->upper = Eigen::Map<const Vector<double>>(o.upper.data(), Eigen::Index(o.upper.size()));
        }
      }
      v.phase_bounds = affine_phase_bounds(g, &deadline.passed, std::move(ball));
    }
    const graph::VerifyResult outcome = graph::verify(g, p, v);
    ++result.tests;
    result.branches += static_cast<long>(outcome.phase_branches + outcome.boxes_split);
    if (outcome.verdict == graph::Verdict::unsat) {
      lo = r;
      ++result.proved;
      if (probe) step *= 2;
    } else {
      hi = r;
      if (outcome.verdict == graph::Verdict::sat) result.refuted = std::min(result.refuted, r);
    }
  }
  result.radius = std::max(certified, lo);
  result.seconds = elapsed();
  return result;
}

}  // namespace regatta::operators
