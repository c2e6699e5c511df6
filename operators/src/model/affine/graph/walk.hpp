#pragma once
// The walk of the graph affine pass as a resumable state (walk.cpp; docs/models.md#the-graph-pass): the forms
// alive after the nodes computed so far, so that a caller can keep the state reached at a node and resume
// from it with some nodes' transfer functions replaced (the phase branches of graph_affine_branch.hpp, whose
// forms before the first split node are the root's). Internal header of operators/src/model/affine/graph/.
#include <functional>
#include <memory>
#include <vector>

#include <regatta/operators/graph_affine.hpp>

#include "operands.hpp"

namespace regatta::operators::affine::gp {

/// Thrown between nodes once GraphAffineOptions::stop is set: nothing is certified.
struct Stopped {};

/// The forms alive before node `node` (shared: a kept state and the walks resumed from it read the same
/// forms, which no step modifies), with the use counts that free them and the pass's symbol numbering.
struct WalkState {
  std::vector<std::shared_ptr<const Form>> forms;
  std::vector<char> stochastic;
  std::vector<int> uses;
  std::size_t bytes = 0;
  std::size_t node = 0;  ///< the next node to compute (an index into graph.nodes)
  Index q = 0, next = 0;
  bool box = false;
};

inline std::size_t form_bytes(const Form& f) {
  return std::size_t(f.A.size() + 2 * f.size()) * sizeof(double);
}

/// A replacement transfer function for some nodes: true when it computed `out` for node `index` (whose
/// operands are `in`), false to leave the node to the pass.
using NodeOverride = std::function<bool(std::size_t index, const graph::Node&, const std::vector<Operand>& in,
                                        Pass&, Form& out)>;

/// The state before the first node: the input set's form (graph_affine.hpp), and p set up for it.
WalkState start_walk(const graph::Graph& g, const InputSet& set, Pass& p);
/// p's symbol numbering and geometry set to the state's (before resuming a kept state).
void resume(const WalkState& w, Pass& p);
/// Computes the nodes [w.node, until), each by `replace` when it takes it, else by its family's transfer
/// function; `before` (when given) sees the state before each node. Throws Stopped, Vacuous, InputError.
void advance(const graph::Graph& g, WalkState& w, Pass& p, const GraphAffineOptions& options,
             std::size_t until, const NodeOverride* replace = nullptr,
             const std::function<void(const WalkState&)>* before = nullptr);
/// The output's form once every node is computed.
Form final_form(const graph::Graph& g, const WalkState& w);

/// The functional C.row(k)·y + d(k) on the output's form Y, apart from its symbol coefficients (row k of
/// C·Y.A, which the caller bounds): its centre, and its slack Σ_e |C_ke|·s_e plus the rounding of that row
/// (γ_N times Σ_e |C_ke|·row_sums(e)) and the underflow of its N·K products, rounded outward.
struct FunctionalCentre {
  I centre, slack;
};
FunctionalCentre functional_centre(const Form& Y, const Vector<double>& row_sums, const Matrix<double>& C,
                                   const Vector<double>& d, Index k);

}  // namespace regatta::operators::affine::gp
