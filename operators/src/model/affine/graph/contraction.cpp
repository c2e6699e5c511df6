// Nodes that contract or normalise along an axis, on affine forms (operands.hpp,
// docs/models.md#the-graph-pass): the matrix product of two forms (products.hpp's matmul: the part linear in
// the symbols, plus the sum of the deviation products of each output as a fresh symbol; `stochastic` when
// the left operand is a softmax over the contracted axis, whose rows sum to exactly 1), softmax (as the
// attention blocks compute it: each row shifted by its largest centre, exp, the reciprocal of the row sum,
// their product) and layer_norm (norms.hpp's LayerNorm of the rows). Certified: each output form encloses the
// exact real node output at every point of the input set.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "../nonlinear.hpp"
#include "../norms.hpp"
#include "../products.hpp"
#include "operands.hpp"

namespace regatta::operators::affine::gp {

namespace {

/// L·R for two forms (numpy matmul: batch axes broadcast, a 1-D operand gains an axis): one matmul per batch
/// element, the results stacked.
Form matmul_forms(const Operand& L, const Operand& R, const Shape& out, const Pass& p) {
  Shape a = *L.shape, b = *R.shape;
  const bool va = a.size() == 1, vb = b.size() == 1;
  if (va) a.insert(a.begin(), 1);
  if (vb) b.push_back(1);
  const Index m = Index(a[a.size() - 2]), k = Index(a.back()), n = Index(b.back());
  const Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  const Shape batch(out.begin(), out.end() - (va ? 0 : 1) - (vb ? 0 : 1));
  const std::vector<Index> ma = broadcast_index(ba, batch), mb = broadcast_index(bb, batch);
  std::vector<Form> parts;
  for (std::size_t t = 0; t < ma.size(); ++t) {
    p.tick();
    const Index fa = ma[t] * m * k, fb = mb[t] * k * n;
    parts.push_back(matmul(
        *L.form, *R.form, m, k, n, [fa, k](Index i, Index l) { return fa + i * k + l; },
        [fb, n](Index l, Index j) { return fb + l * n + j; }, [](Index, Index) { return true; }, p,
        L.stochastic));
  }
  if (parts.size() == 1) return std::move(parts.front());
  std::vector<const Form*> all;
  for (const Form& f : parts) all.push_back(&f);
  return stack(all);
}

/// outer × len × inner: the softmax block [first, end) of `shape`.
struct Block {
  Index outer = 1, len = 1, inner = 1;
};
Block block_of(const Shape& shape, std::int64_t first, std::int64_t end) {
  Block b;
  for (std::int64_t k = 0; k < std::int64_t(shape.size()); ++k)
    (k < first ? b.outer : k < end ? b.len : b.inner) *= Index(shape[std::size_t(k)]);
  return b;
}

/// softmax_l = e_l / Σ_m e_m with e_l = exp(x_l − t), t the largest centre of the row (softmax does not
/// change under a shift): exp, the reciprocal of the row sum, and their product, each with its remainder as
/// fresh symbols. Entries of constant −inf (an attention mask, docs/graph.md#non-finite-constants) have
/// e_l = 0 exactly: they are left out of the rows and their weights are exactly 0, with no symbols.
Form softmax(const graph::Node& node, const Operand& x, const Pass& p) {
  const auto& a = std::get<graph::SoftmaxAttrs>(node.attributes);
  const Block b = block_of(*x.shape, a.first_axis, a.end_axis);
  const Form& all = *x.form;
  std::vector<Index> kept, position(std::size_t(all.size()), -1);
  for (Index e = 0; e < all.size(); ++e) {
    if (all.c(e) == -std::numeric_limits<double>::infinity()) {
      if (all.s(e) != 0 || (all.A.cols() > 0 && all.A.row(e).cwiseAbs().maxCoeff() != 0)) throw Vacuous{};
      continue;
    }
    position[std::size_t(e)] = Index(kept.size());
    kept.push_back(e);
  }
  const bool masks = kept.size() != std::size_t(all.size());
  const Form Xk = masks ? gather_or_zero(all, kept) : Form{};
  const Form& X = masks ? Xk : all;
  std::vector<std::vector<Index>> rows(std::size_t(b.outer * b.inner));
  std::vector<Index> row_of(std::size_t(X.size()));
  for (Index o = 0; o < b.outer; ++o)
    for (Index i = 0; i < b.inner; ++i)
      for (Index l = 0; l < b.len; ++l) {
        const Index e = position[std::size_t((o * b.len + l) * b.inner + i)], r = o * b.inner + i;
        if (e < 0) continue;
        rows[std::size_t(r)].push_back(e);
        row_of[std::size_t(e)] = r;
      }
  for (const auto& row : rows)
    if (row.empty()) throw Vacuous{};  // a row of −inf only: 0/0 (Graph::validate refuses it statically)
  std::vector<I> shift(std::size_t(X.size()));
  for (const auto& row : rows) {
    double top = -std::numeric_limits<double>::infinity();
    for (Index e : row) top = std::max(top, X.c(e));
    for (Index e : row) shift[std::size_t(e)] = I(-top);
  }
  const Form E = nonlinear(affine_entries(X, I(1.0), shift, p), Function::exp, p);
  const Form R = nonlinear(sum_groups(E, rows, p), Function::reciprocal, p);
  if (!masks) return product(E, R, p, row_of);
  return gather_or_zero(product(E, R, p, row_of), position);  // masked weights: exactly 0
}

/// LayerNormalization over the axes [axis, rank): norms.hpp's layer_norm of the rows, with the constant
/// scale and bias broadcast to the normalised shape.
Form layer_norm_node(const graph::Node& node, const std::vector<Operand>& in, const Pass& p) {
  const auto& a = std::get<graph::LayerNormAttrs>(node.attributes);
  const Shape& s = *in[0].shape;
  const std::int64_t axis = a.axis < 0 ? a.axis + std::int64_t(s.size()) : a.axis;
  const Shape tail(s.begin() + axis, s.end());
  const Index d = Index(graph::element_count(tail)), n = in[0].size() / d;
  auto vector_of = [&](const Operand& v) {
    const std::vector<Index> map = broadcast_index(*v.shape, tail);
    Vector<double> out(d);
    for (Index f = 0; f < d; ++f) out(f) = (*v.data)[std::size_t(map[std::size_t(f)])];
    return out;
  };
  const Vector<double> gamma = vector_of(in[1]), beta = in.size() > 2 ? vector_of(in[2]) : Vector<double>();
  Form y = layer_norm(*in[0].form, n, d, gamma, beta, a.epsilon, p);
  // Scale and bias with enclosure radii (docs/graph.md#enclosure-radii-of-constants): the normalised entries
  // have Σ_f z_f² = d·σ²/(σ² + ε) ≤ d, so |z_f| ≤ √d, and each output is off by at most r_γ·√d + r_β.
  const double rg = in[1].radius, rb = in.size() > 2 ? in[2].radius : 0.0;
  if (rg != 0 || rb != 0) {
    const I extra = I(rg) * sqrt(I(double(d))) + I(rb);
    for (Index e = 0; e < y.size(); ++e) y.s(e) = hi(I(y.s(e)) + extra);
    y.forget();
  }
  return y;
}

}  // namespace

Result contraction_node(const graph::Node& node, const std::vector<Operand>& in, const Shape& out,
                        const Pass& p) {
  using graph::Op;
  switch (node.op) {
    case Op::matmul:
      return Result{matmul_forms(in[0], in[1], out, p), false};
    case Op::softmax: {
      const auto& a = std::get<graph::SoftmaxAttrs>(node.attributes);
      const std::int64_t rank = std::int64_t(in[0].shape->size());
      // rows over the last axis sum to exactly 1 when the softmax block is the last axis alone
      return Result{softmax(node, in[0], p), a.first_axis == rank - 1 && a.end_axis == rank};
    }
    case Op::layer_norm:
      return Result{layer_norm_node(node, in, p), false};
    default:
      throw std::logic_error("contraction_node: not a contraction node");
  }
}

}  // namespace regatta::operators::affine::gp
