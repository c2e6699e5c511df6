// The tangent rule of every node kind, over double, interval64 and interval (MPFI)
// (docs/graph.md#forward-mode-and-jacobian-enclosures). A node linear in its operands (data movement, Add,
// Sub, Where, ReduceMean, Concat) maps the tangents by itself; a node linear in each operand (Conv, MatMul,
// Gemm, Mul) gives f(ȧ, b) + f(a, ḃ), both terms by the node's own forward (evaluate_node.hpp); the others
// apply their derivative at the forward values. Each rule is an expression of enclosures for interval
// scalars, so it encloses the exact tangent at every point the forward values enclose.
#include "jvp_rules.hpp"

#include <stdexcept>

#include "derivative_functions.hpp"
#include "evaluate_node.hpp"
#include "scalar_functions.hpp"
#include "shapes.hpp"

namespace regatta::graph::detail {

namespace {

using std::int64_t;
using std::size_t;

size_t at(int64_t i) { return static_cast<size_t>(i); }

template <class S>
Tensor<S> zeros_like(const Tensor<S>& t) {
  return Tensor<S>{t.shape, std::vector<S>(t.data.size(), S(0.0))};
}

template <class S>
void add_into(std::vector<S>& a, const std::vector<S>& b) {
  for (size_t e = 0; e < a.size(); ++e) a[e] += b[e];
}

// A node linear in all its operands: the node applied to the tangents (zero for constants).
template <class S>
std::vector<S> linear(const Graph& g, const Node& node, const std::vector<const Tensor<S>*>& in,
                      const std::vector<const Tensor<S>*>& t, const Shape& out) {
  std::vector<Tensor<S>> zeros;
  zeros.reserve(in.size());
  std::vector<const Tensor<S>*> args;
  for (size_t i = 0; i < in.size(); ++i)
    if (t[i]) {
      args.push_back(t[i]);
    } else {
      zeros.push_back(zeros_like(*in[i]));
      args.push_back(&zeros.back());
    }
  if (node.op == Op::where) args[0] = in[0];  // the condition (read from the graph's constants anyway)
  return evaluate_node(g, node, args, out);
}

// A node linear in each of its first two operands and in the optional third (Conv's bias, Gemm's C):
// f(ȧ, b, ċ) + f(a, ḃ).
template <class S>
std::vector<S> bilinear(const Graph& g, const Node& node, const std::vector<const Tensor<S>*>& in,
                        const std::vector<const Tensor<S>*>& t, const Shape& out) {
  std::vector<S> r(at(element_count(out)), S(0.0));
  const bool third = in.size() > 2 && t[2];
  if (t[0] || third) {
    const Tensor<S> zero = t[0] ? Tensor<S>{} : zeros_like(*in[0]);
    std::vector<const Tensor<S>*> args{t[0] ? t[0] : &zero, in[1]};
    if (third) args.push_back(t[2]);
    r = evaluate_node(g, node, args, out);
  }
  if (t[1]) add_into(r, evaluate_node(g, node, std::vector<const Tensor<S>*>{in[0], t[1]}, out));
  return r;
}

// y = a / b: ẏ = (ȧ − y·ḃ)/b.
template <class S>
std::vector<S> divide(const Tensor<S>& a, const Tensor<S>& b, const Tensor<S>& y, const Tensor<S>* ta,
                      const Tensor<S>* tb) {
  const auto ma = broadcast_map(a.shape, y.shape), mb = broadcast_map(b.shape, y.shape);
  std::vector<S> r(y.data.size());
  for (size_t e = 0; e < r.size(); ++e) {
    S v = ta ? ta->data[at(ma[e])] : S(0.0);
    if (tb) v = v - y.data[e] * tb->data[at(mb[e])];
    r[e] = v / b.data[at(mb[e])];
  }
  return r;
}

// y_l = e_l / Σ e over each block: ẏ_l = y_l·(ẋ_l − Σ_k y_k·ẋ_k).
template <class S>
std::vector<S> softmax(const Tensor<S>& y, const SoftmaxAttrs& a, const Tensor<S>& t) {
  const Blocks b = blocks(y.shape, a.first_axis, a.end_axis);
  std::vector<S> r(y.data.size());
  for (int64_t o = 0; o < b.outer; ++o)
    for (int64_t i = 0; i < b.inner; ++i) {
      const auto e = [&](int64_t l) { return at((o * b.len + l) * b.inner + i); };
      S dot(0.0);
      for (int64_t l = 0; l < b.len; ++l) dot += y.data[e(l)] * t.data[e(l)];
      for (int64_t l = 0; l < b.len; ++l) r[e(l)] = y.data[e(l)] * (t.data[e(l)] - dot);
    }
  return r;
}

// x̂ = (x − μ)·r with r = 1/√(σ² + ε) over each row, y = x̂·s + b:
// dx̂ = r·(ẋ − mean(ẋ) − x̂·mean(x̂·ẋ)), ẏ = dx̂·s + x̂·ṡ + ḃ.
template <class S>
std::vector<S> layer_norm(const std::vector<const Tensor<S>*>& in, const LayerNormAttrs& a,
                          const std::vector<const Tensor<S>*>& t) {
  const Tensor<S>& x = *in[0];
  const Tensor<S>& scale = *in[1];
  const Blocks b = blocks(x.shape, a.axis, static_cast<int64_t>(x.shape.size()));
  const Shape tail(x.shape.begin() + a.axis, x.shape.end());
  const auto ms = broadcast_map(scale.shape, tail);
  std::vector<int64_t> mb;
  if (in.size() > 2) mb = broadcast_map(in[2]->shape, tail);
  const S n(static_cast<double>(b.len)), eps(a.epsilon);
  std::vector<S> r(x.data.size()), xh(at(b.len));
  for (int64_t o = 0; o < b.outer; ++o) {
    const S* row = x.data.data() + o * b.len;
    S mean(0.0), var(0.0), mt(0.0), mxt(0.0);
    for (int64_t l = 0; l < b.len; ++l) mean += row[l];
    mean = mean / n;
    for (int64_t l = 0; l < b.len; ++l) var += square_of(S(row[l] - mean));
    const S inv = S(1.0) / sqrt_of(S(var / n + eps));
    for (int64_t l = 0; l < b.len; ++l) xh[at(l)] = (row[l] - mean) * inv;
    if (t[0]) {
      const S* tr = t[0]->data.data() + o * b.len;
      for (int64_t l = 0; l < b.len; ++l) {
        mt += tr[l];
        mxt += xh[at(l)] * tr[l];
      }
      mt = mt / n;
      mxt = mxt / n;
    }
    for (int64_t l = 0; l < b.len; ++l) {
      S v(0.0);
      if (t[0]) v = inv * (t[0]->data[at(o * b.len + l)] - mt - xh[at(l)] * mxt) * scale.data[at(ms[at(l)])];
      if (t[1]) v += xh[at(l)] * t[1]->data[at(ms[at(l)])];
      if (t.size() > 2 && t[2]) v += t[2]->data[at(mb[at(l)])];
      r[at(o * b.len + l)] = v;
    }
  }
  return r;
}

// y = (x − mean)·s/√(var + ε) + B per channel (axis 1).
template <class S>
std::vector<S> batch_norm(const std::vector<const Tensor<S>*>& in, const BatchNormAttrs& a,
                          const std::vector<const Tensor<S>*>& t) {
  const Tensor<S>& x = *in[0];
  const Blocks b = blocks(x.shape, 1, 2);
  std::vector<S> r(x.data.size(), S(0.0));
  for (int64_t c = 0; c < b.len; ++c) {
    const size_t ci = at(c);
    const S d = in[4]->data[ci] + S(a.epsilon);
    const S root = sqrt_of(d), factor = in[1]->data[ci] / root;
    for (int64_t o = 0; o < b.outer; ++o)
      for (int64_t i = 0; i < b.inner; ++i) {
        const size_t e = at((o * b.len + c) * b.inner + i);
        const S centred = x.data[e] - in[3]->data[ci];
        S v(0.0);
        if (t[0]) v += t[0]->data[e] * factor;
        if (t[1]) v += t[1]->data[ci] * centred / root;
        if (t[2]) v += t[2]->data[ci];
        if (t[3]) v -= t[3]->data[ci] * factor;
        if (t[4]) v -= t[4]->data[ci] * centred * factor / (S(2.0) * d);
        r[e] = v;
      }
  }
  return r;
}

}  // namespace

template <class S>
std::vector<S> node_jvp(const Graph& graph, const Node& node, const std::vector<const Tensor<S>*>& in,
                        const Tensor<S>& out, const std::vector<const Tensor<S>*>& t) {
  const Tensor<S>& x = *in[0];
  const Shape& shape = out.shape;
  switch (node.op) {
    case Op::conv:
    case Op::matmul:
    case Op::gemm:
    case Op::mul:
      return bilinear(graph, node, in, t, shape);
    case Op::div:
      return divide(x, *in[1], out, t[0], t[1]);
    case Op::pow: {  // the exponent is a constant (validate)
      const Value& e = graph.values[at(node.inputs[1])];
      const auto mx = broadcast_map(x.shape, shape), me = broadcast_map(e.shape, shape);
      std::vector<S> r(out.data.size(), S(0.0));
      if (t[0])
        for (size_t k = 0; k < r.size(); ++k)
          r[k] = pow_derivative(x.data[at(mx[k])], e.data[at(me[k])]) * t[0]->data[at(mx[k])];
      return r;
    }
    case Op::neg:
    case Op::sqrt:
    case Op::reciprocal:
    case Op::relu:  // double: 0 at the kink (a subgradient); intervals: [0, 1] there
    case Op::erf:
    case Op::tanh:
    case Op::sigmoid:
    case Op::gelu: {
      std::vector<S> r(out.data.size(), S(0.0));
      if (t[0])
        for (size_t e = 0; e < r.size(); ++e)
          r[e] = elementwise_derivative(node, x.data[e], out.data[e]) * t[0]->data[e];
      return r;
    }
    case Op::add:
    case Op::sub:
    case Op::where:
    case Op::identity:
    case Op::reshape:
    case Op::transpose:
    case Op::slice:
    case Op::gather:
    case Op::expand:
    case Op::concat:
    case Op::reduce_mean:
      return linear(graph, node, in, t, shape);
    case Op::softmax:
      return t[0] ? softmax(out, std::get<SoftmaxAttrs>(node.attributes), *t[0])
                  : std::vector<S>(out.data.size(), S(0.0));
    case Op::layer_norm:
      return layer_norm(in, std::get<LayerNormAttrs>(node.attributes), t);
    case Op::batch_norm:
      return batch_norm(in, std::get<BatchNormAttrs>(node.attributes), t);
  }
  throw std::logic_error("jvp: unknown node kind");
}

#define REGATTA_GRAPH_NODE_JVP(S)                                                                      \
  template std::vector<S> node_jvp<S>(const Graph&, const Node&, const std::vector<const Tensor<S>*>&, \
                                      const Tensor<S>&, const std::vector<const Tensor<S>*>&);
REGATTA_GRAPH_NODE_JVP(double)
REGATTA_GRAPH_NODE_JVP(::regatta::interval64)
REGATTA_GRAPH_NODE_JVP(::regatta::interval)
#undef REGATTA_GRAPH_NODE_JVP

}  // namespace regatta::graph::detail
