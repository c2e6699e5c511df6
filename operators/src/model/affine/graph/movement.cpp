// Data movement on affine forms (operands.hpp, docs/models.md#the-graph-pass): transpose, reshape, identity,
// slice, gather, expand, concat and where with a constant condition only move entries, so each output entry
// is an input entry's form unchanged (exactly the same function of the symbols): certified with nothing
// added. The index maps are not rewritten here: the graph's own double evaluation (graph::evaluate) runs the
// node once on tensors whose elements are their own indices (exact in binary64 below 2⁵³), so the pass
// moves entries exactly as the evaluation moves values.
#include <cmath>
#include <stdexcept>

#include <regatta/graph/evaluate.hpp>

#include "operands.hpp"

namespace regatta::operators::affine::gp {

Form constant_form(const std::vector<double>& data, double radius) {
  const Index N = Index(data.size());
  Form out{Vector<double>(N), Matrix<double>(N, 0), Vector<double>::Constant(N, radius)};
  for (Index e = 0; e < N; ++e) out.c(e) = data[std::size_t(e)];
  return out;
}

Form form_of(const Operand& x) { return x.constant() ? constant_form(*x.data, x.radius) : *x.form; }

Form gather_or_zero(const Form& F, const std::vector<Index>& idx) {
  const Index N = Index(idx.size()), K = F.A.cols();
  Form out{Vector<double>(N), Matrix<double>(N, K), Vector<double>(N)};
  for (Index t = 0; t < N; ++t) {
    const Index e = idx[std::size_t(t)];
    if (e < 0) {
      out.c(t) = 0;
      out.A.row(t).setZero();
      out.s(t) = 0;
    } else {
      out.c(t) = F.c(e);
      out.A.row(t) = F.A.row(e);
      out.s(t) = F.s(e);
    }
  }
  return out;
}

Form stack(const std::vector<const Form*>& forms) {
  Index N = 0, K = 0;
  for (const Form* f : forms) {
    N += f->size();
    K = std::max(K, f->A.cols());
  }
  Form out{Vector<double>(N), Matrix<double>::Zero(N, K), Vector<double>(N)};
  Index row = 0;
  for (const Form* f : forms) {
    out.c.segment(row, f->size()) = f->c;
    out.s.segment(row, f->size()) = f->s;
    out.A.block(row, 0, f->size(), f->A.cols()) = f->A;
    row += f->size();
  }
  return out;
}

std::vector<Index> broadcast_index(const Shape& in, const Shape& out) {
  const std::size_t R = out.size(), r = in.size();
  if (r > R) throw std::logic_error("broadcast_index: the operand has more axes than the output");
  std::vector<Index> stride(R, 0);  // the input's stride along each output axis (0 where broadcast)
  Index step = 1;
  for (std::size_t k = r; k-- > 0;) {
    const std::size_t axis = R - r + k;
    if (in[k] != 1) stride[axis] = step;
    step *= Index(in[k]);
  }
  const Index N = Index(graph::element_count(out));
  std::vector<Index> map(static_cast<std::size_t>(N));
  std::vector<std::int64_t> idx(R, 0);
  Index at = 0;
  for (Index e = 0; e < N; ++e) {
    map[std::size_t(e)] = at;
    for (std::size_t k = R; k-- > 0;) {
      at += stride[k];
      if (++idx[k] < out[k]) break;
      at -= stride[k] * Index(out[k]);
      idx[k] = 0;
    }
  }
  return map;
}

namespace {

/// A graph of the one node, reading fresh runtime inputs in place of the node's operands (or constants
/// where `keep` says so: the condition of where), for the graph's own evaluation.
graph::Graph single_node(const graph::Graph& g, const graph::Node& node, const std::vector<bool>& keep) {
  graph::Graph h;
  h.source = g.source;
  h.opset = g.opset;
  graph::Node copy = node;
  copy.inputs.clear();
  for (std::size_t k = 0; k < node.inputs.size(); ++k) {
    graph::Value v = g.values[std::size_t(node.inputs[k])];
    if (!keep[k]) {
      v.constant = false;
      v.data.clear();
      v.radius = 0;
      h.inputs.push_back(int(h.values.size()));
    }
    copy.inputs.push_back(int(h.values.size()));
    h.values.push_back(std::move(v));
  }
  graph::Value out = g.values[std::size_t(node.output)];
  out.constant = false;
  out.data.clear();
  copy.output = int(h.values.size());
  h.outputs.push_back(copy.output);
  h.values.push_back(std::move(out));
  h.nodes.push_back(std::move(copy));
  return h;
}

}  // namespace

Form movement(const graph::Graph& g, const graph::Node& node, const std::vector<Operand>& in,
              const Form** unchanged) {
  // The operands that carry data (every one but where's condition), stacked in order.
  std::vector<bool> keep(in.size(), false);
  if (node.op == graph::Op::where) keep[0] = true;
  const graph::Graph h = single_node(g, node, keep);
  std::vector<graph::Tensor<double>> inputs;
  std::vector<Form> owned;
  std::vector<const Form*> parts;
  owned.reserve(in.size());
  double offset = 0;
  for (std::size_t k = 0; k < in.size(); ++k) {
    if (keep[k]) continue;
    graph::Tensor<double> t{*in[k].shape, std::vector<double>(std::size_t(in[k].size()))};
    for (std::size_t e = 0; e < t.data.size(); ++e) t.data[e] = offset + double(e);
    offset += double(t.data.size());
    inputs.push_back(std::move(t));
    if (in[k].constant()) {
      owned.push_back(constant_form(*in[k].data, in[k].radius));
      parts.push_back(&owned.back());
    } else {
      parts.push_back(in[k].form);
    }
  }
  if (!(offset < 9007199254740992.0)) throw std::logic_error("movement: more than 2^53 entries");
  const std::vector<double> map = graph::evaluate<double>(h, inputs).front().data;
  std::vector<Index> idx(map.size());
  bool moved = parts.size() != 1 || Index(map.size()) != parts.front()->size();
  for (std::size_t e = 0; e < map.size(); ++e) {
    idx[e] = Index(map[e]);
    moved = moved || idx[e] != Index(e);
  }
  if (!moved && unchanged && owned.empty()) {  // every entry stays where it is: the operand's own form
    *unchanged = parts.front();
    return Form();
  }
  if (parts.size() == 1) return gather_or_zero(*parts.front(), idx);
  return gather_or_zero(stack(parts), idx);
}

Form constant_node(const graph::Graph& g, const graph::Node& node, const std::vector<Operand>& in) {
  const graph::Graph h = single_node(g, node, std::vector<bool>(in.size(), true));
  const std::vector<interval64> y =
      graph::evaluate<interval64>(h, std::vector<graph::Tensor<interval64>>{}).front().data;
  const Index N = Index(y.size());
  Form out{Vector<double>(N), Matrix<double>(N, 0), Vector<double>(N)};
  for (Index e = 0; e < N; ++e) {
    const I v = y[std::size_t(e)];
    out.c(e) = mid(v);
    out.s(e) = halfwidth(v, out.c(e));
  }
  return out;
}

}  // namespace regatta::operators::affine::gp
