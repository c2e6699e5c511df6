// Forward evaluation of a Graph, written once over the scalar type (docs/graph.md, "Evaluation").
#include <regatta/graph/evaluate.hpp>

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include <regatta/core/error.hpp>
#include <regatta/core/scalar_traits.hpp>

#include "evaluate_node.hpp"
#include "scalar_functions.hpp"
#include "shapes.hpp"

namespace regatta::graph {

namespace {

using detail::broadcast_map;
using std::int64_t;
using std::size_t;

template <class S>
using Data = std::vector<S>;

/// A constant's element as S: the stored binary64 value for double (an estimate); for an enclosing S the
/// interval [v − r, v + r] of its enclosure radius, rounded outward
/// (docs/graph.md#enclosure-radii-of-constants).
template <class S>
S constant_entry(double v, double r) {
  if constexpr (!scalar_traits<S>::is_interval) {
    return S(v);
  } else if constexpr (std::is_same_v<S, interval64>) {
    return r == 0 ? interval64(v) : interval64(v) + interval64::hull(-r, r);
  } else {
    return r == 0 ? S(v) : S(v) + make_interval(mpfr(-r), mpfr(r));
  }
}

template <class S, class F>
Data<S> unary(const Data<S>& x, F&& f) {
  Data<S> y;
  y.reserve(x.size());
  for (const S& v : x) y.push_back(f(v));
  return y;
}

template <class S, class F>
Data<S> binary(const Tensor<S>& a, const Tensor<S>& b, const Shape& out, F&& f) {
  const auto ma = broadcast_map(a.shape, out), mb = broadcast_map(b.shape, out);
  Data<S> y;
  y.reserve(ma.size());
  for (size_t e = 0; e < ma.size(); ++e)
    y.push_back(f(a.data[static_cast<size_t>(ma[e])], b.data[static_cast<size_t>(mb[e])]));
  return y;
}

template <class S>
Data<S> gathered(const Data<S>& x, const std::vector<int64_t>& map) {
  Data<S> y;
  y.reserve(map.size());
  for (int64_t i : map) y.push_back(x[static_cast<size_t>(i)]);
  return y;
}

template <class S>
Data<S> conv(const Tensor<S>& x, const Tensor<S>& w, const Tensor<S>* b, const ConvAttrs& a,
             const Shape& out) {
  const int64_t C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t M = w.shape[0], kh = w.shape[2], kw = w.shape[3], OH = out[2], OW = out[3];
  Data<S> y(static_cast<size_t>(M * OH * OW), S(0.0));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        S acc = b ? b->data[static_cast<size_t>(m)] : S(0.0);
        for (int64_t c = 0; c < C; ++c)
          for (int64_t i = 0; i < kh; ++i) {
            const int64_t h = oh * a.strides[0] - a.pads[0] + i * a.dilations[0];
            if (h < 0 || h >= H) continue;
            for (int64_t j = 0; j < kw; ++j) {
              const int64_t v = ow * a.strides[1] - a.pads[1] + j * a.dilations[1];
              if (v < 0 || v >= W) continue;
              acc += x.data[static_cast<size_t>((c * H + h) * W + v)] *
                     w.data[static_cast<size_t>(((m * C + c) * kh + i) * kw + j)];
            }
          }
        y[static_cast<size_t>((m * OH + oh) * OW + ow)] = acc;
      }
  return y;
}

template <class S>
Data<S> matmul(const Tensor<S>& x, const Tensor<S>& y, const Shape& out) {
  Shape a = x.shape, b = y.shape;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  const Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  const Shape batch = detail::broadcast_shapes(ba, bb);
  const auto ma = broadcast_map(ba, batch), mb = broadcast_map(bb, batch);
  Data<S> r(static_cast<size_t>(element_count(out)), S(0.0));
  for (size_t t = 0; t < ma.size(); ++t) {
    const S* pa = x.data.data() + ma[t] * m * k;
    const S* pb = y.data.data() + mb[t] * k * n;
    S* pr = r.data() + static_cast<int64_t>(t) * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        S acc(0.0);
        for (int64_t l = 0; l < k; ++l) acc += pa[i * k + l] * pb[l * n + j];
        pr[i * n + j] = acc;
      }
  }
  return r;
}

template <class S>
Data<S> gemm(const Tensor<S>& A, const Tensor<S>& B, const Tensor<S>* C, const GemmAttrs& g,
             const Shape& out) {
  const int64_t m = out[0], n = out[1], k = g.trans_a ? A.shape[0] : A.shape[1];
  const auto at = [&](int64_t i, int64_t l) {
    return A.data[static_cast<size_t>(g.trans_a ? l * m + i : i * k + l)];
  };
  const auto bt = [&](int64_t l, int64_t j) {
    return B.data[static_cast<size_t>(g.trans_b ? j * k + l : l * n + j)];
  };
  std::vector<int64_t> mc;
  if (C) mc = broadcast_map(C->shape, out);
  Data<S> r(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      S acc(0.0);
      for (int64_t l = 0; l < k; ++l) acc += at(i, l) * bt(l, j);
      if (g.alpha != 1) acc = S(g.alpha) * acc;
      if (C)
        acc += g.beta == 1 ? C->data[static_cast<size_t>(mc[static_cast<size_t>(i * n + j)])]
                           : S(g.beta) * C->data[static_cast<size_t>(mc[static_cast<size_t>(i * n + j)])];
      r[static_cast<size_t>(i * n + j)] = acc;
    }
  return r;
}

using detail::Blocks;
using detail::blocks;

template <class S>
Data<S> softmax(const Tensor<S>& x, const SoftmaxAttrs& a) {
  const Blocks b = blocks(x.shape, a.first_axis, a.end_axis);
  Data<S> y(x.data.size());
  Data<S> e(static_cast<size_t>(b.len));
  for (int64_t o = 0; o < b.outer; ++o)
    for (int64_t i = 0; i < b.inner; ++i) {
      const auto at = [&](int64_t l) { return static_cast<size_t>((o * b.len + l) * b.inner + i); };
      if constexpr (scalar_traits<S>::is_interval) {
        // Over intervals each weight is 1 / (1 + Σ_{j≠l} exp(x_j − x_l))
        // (docs/graph.md#evaluation-graphincluderegattagraphevaluatehpp): x_l enters once, so for a box of
        // scores the enclosure is the exact range of the weight, inside [0, 1]; the quotient e_l / Σ e_j of
        // the shifted exponentials (below, for points) counts x_l twice, exceeds 1 on wide boxes and
        // overflows to an infinite range where the differences are large.
        // A masked entry (−∞, docs/graph.md#non-finite-constants) has weight exactly 0 and adds exp(−∞) = 0
        // to the others' sums; skipping it avoids −∞ − (−∞) between two masked entries.
        const auto masked = [&](int64_t l) {
          return scalar_traits<S>::to_double(scalar_traits<S>::pivot(x.data[at(l)])) ==
                 -std::numeric_limits<double>::infinity();
        };
        for (int64_t l = 0; l < b.len; ++l) {
          if (masked(l)) {
            y[at(l)] = S(0.0);
            continue;
          }
          S den(1.0);
          for (int64_t j = 0; j < b.len; ++j)
            if (j != l && !masked(j)) den += detail::exp_of(S(x.data[at(j)] - x.data[at(l)]));
          y[at(l)] = S(1.0) / den;
        }
        continue;
      }
      // The shift is a point above every entry (scalar_traits::pivot): any shift gives the same exact value.
      S shift = scalar_traits<S>::pivot(x.data[at(0)]);
      for (int64_t l = 1; l < b.len; ++l) {
        const S p = scalar_traits<S>::pivot(x.data[at(l)]);
        if (p > shift) shift = p;
      }
      S sum(0.0);
      for (int64_t l = 0; l < b.len; ++l) {
        e[static_cast<size_t>(l)] = detail::exp_of(S(x.data[at(l)] - shift));
        sum += e[static_cast<size_t>(l)];
      }
      for (int64_t l = 0; l < b.len; ++l) y[at(l)] = e[static_cast<size_t>(l)] / sum;
    }
  return y;
}

template <class S>
Data<S> layer_norm(const Tensor<S>& x, const Tensor<S>& scale, const Tensor<S>* bias,
                   const LayerNormAttrs& a) {
  const Blocks b = blocks(x.shape, a.axis, static_cast<int64_t>(x.shape.size()));
  const Shape tail(x.shape.begin() + a.axis, x.shape.end());
  const auto ms = broadcast_map(scale.shape, tail);
  std::vector<int64_t> mb;
  if (bias) mb = broadcast_map(bias->shape, tail);
  Data<S> y(x.data.size());
  const S n(static_cast<double>(b.len)), eps(a.epsilon);
  for (int64_t o = 0; o < b.outer; ++o) {
    const S* row = x.data.data() + o * b.len;
    S mean(0.0);
    for (int64_t l = 0; l < b.len; ++l) mean += row[l];
    mean = mean / n;
    S var(0.0);
    for (int64_t l = 0; l < b.len; ++l) var += detail::square_of(S(row[l] - mean));  // ≥ 0 for intervals
    const S inv = S(1.0) / detail::sqrt_of(S(var / n + eps));
    for (int64_t l = 0; l < b.len; ++l) {
      S v = (row[l] - mean) * inv * scale.data[static_cast<size_t>(ms[static_cast<size_t>(l)])];
      if (bias) v += bias->data[static_cast<size_t>(mb[static_cast<size_t>(l)])];
      y[static_cast<size_t>(o * b.len + l)] = v;
    }
  }
  return y;
}

template <class S>
Data<S> reduce_mean(const Tensor<S>& x, const ReduceMeanAttrs& a, const Shape& out) {
  // Output index of every input element: the reduced axes dropped (or kept as 1).
  Shape kept = x.shape;
  for (int64_t k : a.axes) kept[static_cast<size_t>(k)] = 1;
  const auto st = detail::strides_of(kept);
  Data<S> y(static_cast<size_t>(element_count(out)), S(0.0));
  std::vector<int64_t> idx(x.shape.size(), 0);
  for (size_t e = 0; e < x.data.size(); ++e) {
    int64_t o = 0;
    for (size_t k = 0; k < idx.size(); ++k)
      if (kept[k] != 1) o += idx[k] * st[k];
    y[static_cast<size_t>(o)] += x.data[e];
    for (size_t k = idx.size(); k-- > 0;) {
      if (++idx[k] < x.shape[k]) break;
      idx[k] = 0;
    }
  }
  const S count(static_cast<double>(static_cast<int64_t>(x.data.size()) / element_count(out)));
  for (S& v : y) v = v / count;
  return y;
}

template <class S>
Data<S> batch_norm(const std::vector<const Tensor<S>*>& in, const BatchNormAttrs& a) {
  const Tensor<S>& x = *in[0];
  const Blocks b = blocks(x.shape, 1, 2);
  Data<S> y(x.data.size());
  for (int64_t c = 0; c < b.len; ++c) {
    const auto ci = static_cast<size_t>(c);
    const S factor = in[1]->data[ci] / detail::sqrt_of(S(in[4]->data[ci] + S(a.epsilon)));
    for (int64_t o = 0; o < b.outer; ++o)
      for (int64_t i = 0; i < b.inner; ++i) {
        const auto e = static_cast<size_t>((o * b.len + c) * b.inner + i);
        y[e] = (x.data[e] - in[3]->data[ci]) * factor + in[2]->data[ci];
      }
  }
  return y;
}

template <class S>
Data<S> concat(const std::vector<const Tensor<S>*>& in, int64_t axis) {
  Data<S> y;
  const Blocks b = blocks(in[0]->shape, axis, axis + 1);
  for (int64_t o = 0; o < b.outer; ++o)
    for (const Tensor<S>* t : in) {
      const int64_t chunk = t->shape[static_cast<size_t>(axis)] * b.inner;
      y.insert(y.end(), t->data.begin() + o * chunk, t->data.begin() + (o + 1) * chunk);
    }
  return y;
}

template <class S>
Data<S> run(const Graph& g, const Node& node, const std::vector<const Tensor<S>*>& in, const Shape& out) {
  const Tensor<S>& x = *in[0];
  const auto opt = [&](size_t i) { return in.size() > i ? in[i] : nullptr; };
  switch (node.op) {
    case Op::conv:
      return conv(x, *in[1], opt(2), std::get<ConvAttrs>(node.attributes), out);
    case Op::matmul:
      return matmul(x, *in[1], out);
    case Op::gemm:
      return gemm(x, *in[1], opt(2), std::get<GemmAttrs>(node.attributes), out);
    case Op::add:
      return binary(x, *in[1], out, [](const S& a, const S& b) { return S(a + b); });
    case Op::sub:
      return binary(x, *in[1], out, [](const S& a, const S& b) { return S(a - b); });
    case Op::mul:
      return binary(x, *in[1], out, [](const S& a, const S& b) { return S(a * b); });
    case Op::div:
      return binary(x, *in[1], out, [](const S& a, const S& b) { return S(a / b); });
    case Op::pow: {
      const Value& e = g.values[static_cast<size_t>(node.inputs[1])];  // a constant (validate)
      const auto me = broadcast_map(e.shape, out), mx = broadcast_map(x.shape, out);
      Data<S> y;
      y.reserve(me.size());
      for (size_t k = 0; k < me.size(); ++k)
        y.push_back(detail::pow_of(x.data[static_cast<size_t>(mx[k])], e.data[static_cast<size_t>(me[k])]));
      return y;
    }
    case Op::where: {
      const Value& c = g.values[static_cast<size_t>(node.inputs[0])];  // a constant of 0/1 (validate)
      const auto mc = broadcast_map(c.shape, out), ma = broadcast_map(in[1]->shape, out),
                 mb = broadcast_map(in[2]->shape, out);
      Data<S> y;
      y.reserve(mc.size());
      for (size_t k = 0; k < mc.size(); ++k)
        y.push_back(c.data[static_cast<size_t>(mc[k])] != 0 ? in[1]->data[static_cast<size_t>(ma[k])]
                                                            : in[2]->data[static_cast<size_t>(mb[k])]);
      return y;
    }
    case Op::neg:
      return unary(x.data, [](const S& v) { return S(-v); });
    case Op::sqrt:
      return unary(x.data, [](const S& v) { return detail::sqrt_of(v); });
    case Op::reciprocal:
      return unary(x.data, [](const S& v) { return S(S(1.0) / v); });
    case Op::relu:
      return unary(x.data, [](const S& v) { return detail::relu_of(v); });
    case Op::erf:
      return unary(x.data, [](const S& v) { return detail::erf_of(v); });
    case Op::tanh:
      return unary(x.data, [](const S& v) { return detail::tanh_of(v); });
    case Op::sigmoid:
      return unary(x.data, [](const S& v) { return detail::sigmoid_of(v); });
    case Op::gelu: {
      const bool t = std::get<GeluAttrs>(node.attributes).tanh_approximation;
      return unary(x.data, [t](const S& v) { return detail::gelu_of(v, t); });
    }
    case Op::identity:
    case Op::reshape:
      return x.data;
    case Op::transpose:
      return gathered(x.data, detail::transpose_map(x.shape, std::get<TransposeAttrs>(node.attributes).perm));
    case Op::slice:
      return gathered(x.data, detail::slice_map(x.shape, out, std::get<SliceAttrs>(node.attributes)));
    case Op::gather:
      return gathered(x.data, detail::gather_map(x.shape, std::get<GatherAttrs>(node.attributes)));
    case Op::expand:
      return gathered(x.data, broadcast_map(x.shape, out));
    case Op::concat:
      return concat(in, std::get<ConcatAttrs>(node.attributes).axis);
    case Op::softmax:
      return softmax(x, std::get<SoftmaxAttrs>(node.attributes));
    case Op::layer_norm:
      return layer_norm(x, *in[1], opt(2), std::get<LayerNormAttrs>(node.attributes));
    case Op::reduce_mean:
      return reduce_mean(x, std::get<ReduceMeanAttrs>(node.attributes), out);
    case Op::batch_norm:
      return batch_norm(in, std::get<BatchNormAttrs>(node.attributes));
  }
  throw std::logic_error("evaluate: unknown node kind");
}

}  // namespace

template <class S>
std::vector<S> detail::evaluate_node(const Graph& g, const Node& node,
                                     const std::vector<const Tensor<S>*>& in, const Shape& out) {
  return run(g, node, in, out);
}

template <class S>
std::vector<Tensor<S>> evaluate_all(const Graph& g, const std::vector<Tensor<S>>& inputs) {
  if (inputs.size() != g.inputs.size())
    throw InputError(g.source, "the graph takes " + std::to_string(g.inputs.size()) + " inputs, got " +
                                   std::to_string(inputs.size()));
  std::vector<Tensor<S>> v(g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].constant) {
      v[i].shape = g.values[i].shape;
      v[i].data.reserve(g.values[i].data.size());
      for (double x : g.values[i].data) v[i].data.push_back(constant_entry<S>(x, g.values[i].radius));
    }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& in = g.values[static_cast<size_t>(g.inputs[i])];
    if (inputs[i].shape != in.shape || static_cast<int64_t>(inputs[i].data.size()) != element_count(in.shape))
      throw InputError(in.name, "input of shape " + shape_text(inputs[i].shape) + " (" +
                                    std::to_string(inputs[i].data.size()) + " values), the graph takes " +
                                    shape_text(in.shape));
    v[static_cast<size_t>(g.inputs[i])] = inputs[i];
  }
  for (const Node& node : g.nodes) {
    std::vector<const Tensor<S>*> in;
    for (int id : node.inputs) in.push_back(&v[static_cast<size_t>(id)]);
    const Shape& out = g.values[static_cast<size_t>(node.output)].shape;
    v[static_cast<size_t>(node.output)] = Tensor<S>{out, run(g, node, in, out)};
  }
  return v;
}

template <class S>
std::vector<Tensor<S>> evaluate(const Graph& g, const std::vector<Tensor<S>>& inputs) {
  std::vector<Tensor<S>> all = evaluate_all(g, inputs);
  std::vector<Tensor<S>> out;
  for (int id : g.outputs) out.push_back(all[static_cast<size_t>(id)]);
  return out;
}

#define REGATTA_GRAPH_EVALUATE(S)                                                               \
  template std::vector<Tensor<S>> evaluate<S>(const Graph&, const std::vector<Tensor<S>>&);     \
  template std::vector<Tensor<S>> evaluate_all<S>(const Graph&, const std::vector<Tensor<S>>&); \
  template std::vector<S> detail::evaluate_node<S>(const Graph&, const Node&,                   \
                                                   const std::vector<const Tensor<S>*>&, const Shape&);
REGATTA_GRAPH_EVALUATE(double)
REGATTA_GRAPH_EVALUATE(::regatta::interval64)
REGATTA_GRAPH_EVALUATE(::regatta::interval)

}  // namespace regatta::graph
