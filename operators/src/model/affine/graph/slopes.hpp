#pragma once
// Optimised ReLU slopes on the final bound (α-CROWN-like; docs/verify.md#optimised-relu-slopes). The pass
// relaxes an unstable ReLU element z ∈ [l, u] as relu(z) = λ·z + M + b·η with DeepZ's λ = u/(u − l), and η
// (its own column, read by no other element and never reassigned) takes the value (relu(z) − λ·z − M)/b.
// A functional of the output form reads a·η for some a. For any other λ′ ∈ [0, 1], relu(z) ∈ λ′·z + [0, m′]
// with m′ = max(−λ′·l, (1 − λ′)·u), so at every point
//     a·η = (a/b)·[(λ′ − λ)·z + (M′ − M) + b′·η′],   M′ = b′ = m′/2, |η′| ≤ 1,
// an identity in which z is the element's input form (same symbols as the output's, its slack bounded): the
// functional re-expressed with η′ in a new column is a valid form of the same value. substitute() does this
// in outward-rounded arithmetic, so the λ′ are only chosen numbers (choose_slopes, a few projected
// subgradient steps on the binary64 bound): soundness never depends on their optimality.
// Internal header of operators/src/model/affine/graph/.
#include <utility>
#include <vector>

#include "objective.hpp"

namespace regatta::operators::affine::gp {

/// A ReLU node's unstable elements as the pass relaxed them (the ones with a remainder column): per
/// element u, its remainder column, its input range [l, u], the pass's λ, M (a point) and b, its input
/// form's centre c, slack s, an upper bound of its row sum Σ|A| and its row of A (rows of G, columns as
/// the pass's up to the node).
struct ReluRelaxation {
  std::size_t node = 0;
  std::vector<Index> column;
  std::vector<double> lower, upper, lambda, M, b, c, s, row_sum;
  Matrix<double> G;
};

/// The relaxation the pass computes for relu on the form Z (elementwise.cpp's split_transfer, with the same
/// `within`), given `fresh` (per entry its remainder column, −1: none) as that call returned it.
ReluRelaxation relu_relaxation(std::size_t node, const Form& Z, const std::vector<Index>& fresh,
                               const Pass& p, const std::vector<I>* within);

/// Slopes λ′ (one per element of r) chosen by `steps` projected sign-subgradient steps on the binary64
/// lower bound of the functional whose combined coefficients are v (the objective's row after any
/// Lagrangian terms); elements whose weight v/b is not positive keep the pass's λ (the chord is optimal
/// there).
std::vector<double> choose_slopes(const Objective& o, const Row& v, const ReluRelaxation& r, const Pass& p,
                                  int steps);

/// CERTIFIED: the objective re-expressed with the slopes λ′ (the header's identity): each element whose
/// slope changed loses its remainder column and gets a new one, appended from column
/// max(o.a.size(), r.G.cols(), first) on; `moved` (when given) gets (new column, replaced column) pairs.
/// Rounding in the slack.
Objective substitute(const Objective& o, const ReluRelaxation& r, const std::vector<double>& slopes,
                     const Pass& p, std::vector<std::pair<Index, Index>>* moved = nullptr, Index first = 0);

/// The objective re-expressed node after node, the last first (`nodes` in graph order), each with slopes
/// chosen on the functional as re-expressed so far combined with the Lagrangian terms of `rows` at `beta`;
/// each constrained element's input form in `rows` that reads a re-expressed remainder is re-expressed the
/// same way (the same new columns, so the Lagrangian terms keep their dependence on those symbols). The
/// new columns start at or beyond `first` (moved as in substitute). CERTIFIED as substitute, for the
/// functional and for each row.
Objective optimise_slopes(Objective o, const std::vector<const ReluRelaxation*>& nodes,
                          std::vector<SplitRow>& rows, const std::vector<double>& beta, const Pass& p,
                          int steps, Index first, std::vector<std::pair<Index, Index>>* moved = nullptr);

}  // namespace regatta::operators::affine::gp
