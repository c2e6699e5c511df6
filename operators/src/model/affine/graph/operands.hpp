#pragma once
// The affine-form pass over a graph::Graph (docs/models.md#the-graph-pass): what a node's transfer function
// reads (its operands: constant tensors or forms of computed values), and the transfer functions of the node
// families, one file each (walk.cpp is the driver). Internal header of operators/src/model/affine/graph/.
//
// Every transfer function keeps the soundness invariant of form.hpp: the output form encloses the exact
// real value of the node's output at every point of the input set, given forms that enclose its inputs.
// Shapes are static and every tensor is flattened row-major: entry e of a form is element e of the tensor.
#include <string>
#include <vector>

#include <regatta/graph/graph.hpp>

#include "../form.hpp"

namespace regatta::operators::affine::gp {

using graph::Shape;

/// One operand of a node: a constant tensor (binary64 values; each true value within `radius` of its
/// stored one, docs/graph.md#enclosure-radii-of-constants) or the form of a computed value.
struct Operand {
  const Shape* shape = nullptr;
  const std::vector<double>* data = nullptr;  ///< a constant's values
  const Form* form = nullptr;                 ///< a computed value's form
  double radius = 0;                          ///< a constant's enclosure radius (graph::Value::radius)
  /// The exact values sum to 1 over the last axis (a softmax over it): matmul's `stochastic`.
  bool stochastic = false;
  bool constant() const { return form == nullptr; }
  Index size() const { return Index(graph::element_count(*shape)); }
};

/// The output of a node: its form, and whether its rows over the last axis sum to exactly 1.
struct Result {
  Form form;
  bool stochastic = false;
};

/// A form whose entries are the constant values (no symbols; the slack is the enclosure radius, 0 when
/// the binary64 values are exact).
Form constant_form(const std::vector<double>& data, double radius = 0);
/// The operand's form (a constant's form when it is a constant).
Form form_of(const Operand& x);
/// The rows idx of F in that order; −1 gives a zero row (centre 0, no symbols, no slack).
Form gather_or_zero(const Form& F, const std::vector<Index>& idx);
/// Forms stacked vertically (the columns are the pass's, so they line up).
Form stack(const std::vector<const Form*>& forms);
/// For each element of `out`, the element of `in` it reads when `in` is broadcast to `out` (numpy rules).
std::vector<Index> broadcast_index(const Shape& in, const Shape& out);

// movement.cpp
/// Transpose, reshape, identity, slice, gather, expand, concat and where with a constant condition: the
/// operands stacked (constants as forms) and gathered by the node's index map, which the graph's own
/// double evaluation computes on tensors of indices. Exact on the symbols: nothing is added. When
/// `unchanged` is given and the node reads one form and leaves every entry where it is (reshape, identity,
/// squeeze), *unchanged is set to that form and the result is empty: the caller reuses the form.
Form movement(const graph::Graph& g, const graph::Node& node, const std::vector<Operand>& in,
              const Form** unchanged = nullptr);
/// A node whose operands are all constants, enclosed by the graph's interval64 evaluation: the midpoints
/// as centres, the half-widths as slack.
Form constant_node(const graph::Graph& g, const graph::Node& node, const std::vector<Operand>& in);

// linear.cpp
/// out_o = Σ_t w_t·F_{e_t} + b_o for each output o (terms[o] the pairs (e_t, w_t); b empty: 0): the one
/// sparse linear map, exact on the symbols, with the rounding of the new coefficients and of the centre in
/// the slack.
struct SparseRows {
  std::vector<std::vector<std::pair<Index, double>>> terms;
  std::vector<double> bias;
};
Form sparse_linear(const Form& F, const SparseRows& rows, const Pass& p);
/// Conv, matmul and gemm with one constant operand, batch_norm, reduce_mean, neg, and add, sub, mul, div
/// with one constant operand.
Form linear_node(const graph::Node& node, const std::vector<Operand>& in, const Shape& out, const Pass& p);

// elementwise.cpp
/// relu, gelu, erf, tanh, sigmoid, sqrt, reciprocal, pow with a constant exponent, and add, sub, mul, div
/// of two forms.
Form elementwise_node(const graph::Node& node, const std::vector<Operand>& in, const Shape& out,
                      const Pass& p);
/// Whether a node of this kind is a one-operand nonlinearity whose entries a branch may split
/// (docs/verify.md#general-splits): relu, gelu, erf, tanh, sigmoid, sqrt, reciprocal.
bool splittable(graph::Op op);
/// The transfer function of such a node on F as elementwise_node computes it, with the range of entry e
/// intersected with within[e] (null: none), so that the output encloses the node's values only where each
/// entry lies in its interval. `fresh` (when given) gets, per entry, the column of its remainder symbol
/// (−1: none) and `range` its range as the transfer function used it. Throws Vacuous like the pass, and
/// also when an intersection is empty.
Form split_transfer(const graph::Node& node, const Form& F, const Pass& p, const std::vector<I>* within,
                    std::vector<Index>* fresh = nullptr, std::vector<I>* range = nullptr);
/// The exponents pow supports (1, 2, 3, ½, −1, 0): empty when `exponent` is one, else the reason.
std::string pow_unsupported(const std::vector<double>& exponent);

// contraction.cpp
/// matmul of two forms (stochastic when the left one is a softmax over the contracted axis), softmax and
/// layer_norm.
Result contraction_node(const graph::Node& node, const std::vector<Operand>& in, const Shape& out,
                        const Pass& p);

}  // namespace regatta::operators::affine::gp
