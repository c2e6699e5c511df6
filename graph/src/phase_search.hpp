#pragma once
// Best-first branch and bound on ReLU phases (docs/verify.md#phase-splitting), the search half of verify's
// phase splitting: the bounds of each branch come from a PhaseBounder (verify.hpp), the verdict of a branch
// from the caller's judge (which atoms its bounds refute). Internal header of graph/src/.
#include <cstddef>
#include <functional>
#include <map>
#include <vector>

#include <regatta/graph/verify.hpp>

namespace regatta::graph::detail {

/// What the bounds of a branch show: proved (every disjunct refuted), the score the search lowers (the
/// worst disjunct's best upper bound), and the functional whose bound decided the score (its branch_on is
/// the preferred split).
struct PhaseJudgement {
  bool proved = false;
  double score = 0;
  std::size_t functional = 0;
};

struct PhaseSearchResult {
  enum class End { proved, out_of_time, memory, stuck } end = End::out_of_time;
  std::size_t branches = 0, proved = 0, max_depth = 0, max_frontier = 0;
  std::map<std::size_t, std::size_t> branches_by_node;  ///< the branches created, by the split node
};

/// Splits, worst branch first, from the root's bounds until every branch is proved (End::proved), time is
/// out, the open branches would need more than max_bytes (memory), or a branch has no element left to split
/// (stuck).
PhaseSearchResult phase_search(PhaseBounder& bounder,
                               const std::function<PhaseJudgement(const std::vector<double>&)>& judge,
                               const std::function<bool()>& out_of_time, std::size_t max_bytes);

}  // namespace regatta::graph::detail
