#pragma once
// A diagnostic of the graph pass (not user output): where a functional's bound width comes from. Each
// column of the forms is a symbol one node created (the input symbols: the input set), so the combined
// coefficients' magnitudes grouped by the creating node say which node's relaxations dominate the width.
// Printed to stderr by GraphAffineBranching's root pass when the environment variable
// REGATTA_DEBUG_WIDTH_SHARES is set. Internal header of operators/src/model/affine/graph/.
#include <string>
#include <utility>
#include <vector>

#include "objective.hpp"

namespace regatta::operators::affine::gp {

/// Whether REGATTA_DEBUG_WIDTH_SHARES is set.
bool width_shares_wanted();
/// One line per node whose symbols carry at least 0.5 % of v's width (Σ|v_j|, the input columns with the
/// set's dual norm), then per node kind, then the columns beyond p.next (remainders re-expressed with
/// optimised slopes, slopes.hpp); `starts` lists (node index, first column it created) in order.
void print_width_shares(const graph::Graph& g, const std::vector<std::pair<std::size_t, Index>>& starts,
                        const Row& v, double slack, const Pass& p, const std::string& title);

}  // namespace regatta::operators::affine::gp
