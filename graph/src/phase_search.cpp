// Best-first branch and bound on ReLU phases and on the input ranges of other nonlinearities
// (phase_search.hpp, docs/verify.md#phase-splitting): a branch is a list of constraints x ≥ t or x ≤ t on
// elements' inputs; its two children add one more, both sides of one threshold, so the children's regions
// cover the parent's and every leaf proved means the whole box is.
#include "phase_search.hpp"

#include <algorithm>
#include <limits>
#include <queue>

namespace regatta::graph::detail {

namespace {

struct Branch {
  std::vector<Phase> phases;
  PhaseBranchBounds bounds;
  PhaseJudgement judgement;
};
struct Worse {
  bool operator()(const Branch& a, const Branch& b) const { return a.judgement.score < b.judgement.score; }
};

std::size_t bytes_of(const Branch& b) {
  std::size_t s = sizeof(Branch) + b.phases.size() * sizeof(Phase) + b.bounds.lower.size() * 8 +
                  b.bounds.branch_on.size() * 16 + b.bounds.branch_at.size() * 8;
  for (const auto& m : b.bounds.multipliers) s += m.size() * 8 + sizeof(m);
  return s;
}

/// The split of a branch: the element (and threshold) the deciding functional prefers, else any
/// functional's choice.
bool choose(const Branch& b, std::pair<std::size_t, std::size_t>& split, double& at) {
  constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
  const auto& on = b.bounds.branch_on;
  const auto take = [&](std::size_t k) {
    split = on[k];
    at = k < b.bounds.branch_at.size() ? b.bounds.branch_at[k] : 0.0;
    return true;
  };
  if (b.judgement.functional < on.size() && on[b.judgement.functional].first != none)
    return take(b.judgement.functional);
  for (std::size_t k = 0; k < on.size(); ++k)
    if (on[k].first != none) return take(k);
  return false;
}

}  // namespace

PhaseSearchResult phase_search(PhaseBounder& bounder,
                               const std::function<PhaseJudgement(const std::vector<double>&)>& judge,
                               const std::function<bool()>& out_of_time, std::size_t max_bytes) {
  PhaseSearchResult r;
  std::priority_queue<Branch, std::vector<Branch>, Worse> open;
  std::size_t bytes = 0;
  Branch root{{}, bounder.root(), {}};
  root.judgement = judge(root.bounds.lower);
  if (root.judgement.proved) {
    r.end = PhaseSearchResult::End::proved;
    return r;
  }
  bytes += bytes_of(root);
  open.push(std::move(root));
  while (!open.empty()) {
    if (out_of_time()) {
      r.end = PhaseSearchResult::End::out_of_time;
      return r;
    }
    Branch b = open.top();
    open.pop();
    bytes -= bytes_of(b);
    std::pair<std::size_t, std::size_t> split;
    double at = 0;
    if (!choose(b, split, at)) {
      r.end = PhaseSearchResult::End::stuck;
      return r;
    }
    for (bool active : {true, false}) {
      Branch child{b.phases, {}, {}};
      child.phases.push_back({split.first, split.second, active, at});
      child.bounds = bounder.bound(child.phases, b.bounds.multipliers);
      ++r.branches;
      ++r.branches_by_node[split.first];
      r.max_depth = std::max(r.max_depth, child.phases.size());
      child.judgement = child.bounds.empty ? PhaseJudgement{true, -std::numeric_limits<double>::infinity(), 0}
                                           : judge(child.bounds.lower);
      if (child.judgement.proved) {
        ++r.proved;
        continue;
      }
      if (out_of_time()) {  // a child cut short by the stop flag certifies nothing: not pushed, not proved
        r.end = PhaseSearchResult::End::out_of_time;
        return r;
      }
      bytes += bytes_of(child);
      open.push(std::move(child));
    }
    r.max_frontier = std::max(r.max_frontier, open.size());
    if (bytes > max_bytes) {
      r.end = PhaseSearchResult::End::memory;
      return r;
    }
  }
  r.end = PhaseSearchResult::End::proved;
  return r;
}

}  // namespace regatta::graph::detail
