#pragma once
// Internal: geometry of the blocked CPU path (core/src/pairwise/cpu_blocked.cpp) — block sizes, thread
// count, and which key blocks a mask hides. Header-only so the tests can check the mask arithmetic.
#include <algorithm>

#include <regatta/core/pairwise.hpp>

namespace regatta::pairwise::detail {

/// Resolved tuning of one reduce_blocked call.
struct BlockPlan {
  Eigen::Index query_block = 0;  ///< rows of queries per task (one task = one query block, all keys)
  Eigen::Index key_block = 0;    ///< keys per score block
  int threads = 1;
};

/// Default block sizes, tuned on a 2-core Zen 4 (1 MiB L2 per core) with d = 64: a 128 × 512 score block is
/// 256 KiB in float and 512 KiB in double, so it and the key/value blocks it meets stay in L2.
inline constexpr Eigen::Index default_query_block = 128;
inline constexpr Eigen::Index default_key_block = 512;

/// Resolves Options (0 = automatic). The automatic query block shrinks for small n so that every thread
/// gets at least a few blocks; explicit sizes are only clamped to [1, n] and [1, m].
inline BlockPlan plan_blocks(Eigen::Index n, Eigen::Index m, const Options& options, int default_threads) {
  BlockPlan plan;
  plan.threads = std::max(1, options.threads > 0 ? options.threads : default_threads);
  if (options.query_block > 0) {
    plan.query_block = options.query_block;
  } else {
    const Eigen::Index per_task = (n + 4 * plan.threads - 1) / (4 * plan.threads);
    plan.query_block = std::clamp<Eigen::Index>(per_task, 16, default_query_block);
  }
  plan.key_block = options.key_block > 0 ? options.key_block : default_key_block;
  plan.query_block = std::clamp<Eigen::Index>(plan.query_block, 1, std::max<Eigen::Index>(n, 1));
  plan.key_block = std::clamp<Eigen::Index>(plan.key_block, 1, std::max<Eigen::Index>(m, 1));
  return plan;
}

/// How a mask treats the key block [j0, j1) for the query rows [i0, i1) (half-open ranges).
enum class BlockVisibility { hidden, partial, visible };

inline BlockVisibility block_visibility(MaskKind mask, Eigen::Index i0, Eigen::Index i1, Eigen::Index j0,
                                        Eigen::Index j1) {
  switch (mask) {
    case MaskKind::none:
      return BlockVisibility::visible;
    case MaskKind::causal:  // j visible iff j ≤ i
      if (j0 > i1 - 1) return BlockVisibility::hidden;
      return j1 - 1 <= i0 ? BlockVisibility::visible : BlockVisibility::partial;
    case MaskKind::anticausal:  // j visible iff j ≥ i
      if (j1 - 1 < i0) return BlockVisibility::hidden;
      return j0 >= i1 - 1 ? BlockVisibility::visible : BlockVisibility::partial;
  }
  return BlockVisibility::visible;
}

}  // namespace regatta::pairwise::detail
