// The adjoint rule of every node kind, over double and interval64 (docs/graph.md, "Derivatives"). Each rule
// is the transpose of the node's Jacobian at the forward values, applied to the output's adjoint; operands
// broadcast in the forward have their adjoint summed over the broadcast axes (the broadcast map sends several
// output elements to one input element, and the sum runs over them).
#include "vjp_rules.hpp"

#include <cmath>
#include <stdexcept>

#include "derivative_functions.hpp"
#include "scalar_functions.hpp"
#include "shapes.hpp"

namespace regatta::graph::detail {

namespace {

using std::int64_t;
using std::size_t;
template <class S>
using Grad = std::vector<S>;

size_t at(int64_t i) { return static_cast<size_t>(i); }

// y[e] = x[map[e]]: the adjoint scatters back (several e may read one element: they add).
template <class S>
void scatter(const std::vector<int64_t>& map, const Grad<S>& gy, Grad<S>* gx) {
  if (!gx) return;
  for (size_t e = 0; e < map.size(); ++e) (*gx)[at(map[e])] += gy[e];
}

// y = f(x) elementwise, f′ from (x, y) (derivative_functions.hpp).
template <class S>
void unary(const Node& node, const Tensor<S>& x, const Tensor<S>& y, const Grad<S>& gy, Grad<S>* gx) {
  if (!gx) return;
  for (size_t e = 0; e < gy.size(); ++e)
    (*gx)[e] += gy[e] * elementwise_derivative(node, x.data[e], y.data[e]);
}

// y = f(a, b) with numpy broadcasting; da, db: the partial derivatives at (a, b).
template <class S, class Da, class Db>
void binary(const Tensor<S>& a, const Tensor<S>& b, const Shape& out, const Grad<S>& gy, Grad<S>* ga,
            Grad<S>* gb, Da&& da, Db&& db) {
  const auto ma = broadcast_map(a.shape, out), mb = broadcast_map(b.shape, out);
  for (size_t e = 0; e < gy.size(); ++e) {
    const S& va = a.data[at(ma[e])];
    const S& vb = b.data[at(mb[e])];
    if (ga) (*ga)[at(ma[e])] += gy[e] * da(va, vb);
    if (gb) (*gb)[at(mb[e])] += gy[e] * db(va, vb);
  }
}

template <class S>
void conv(const Tensor<S>& x, const Tensor<S>& w, const ConvAttrs& a, const Shape& out, const Grad<S>& gy,
          Grad<S>* gx, Grad<S>* gw, Grad<S>* gb) {
  const int64_t C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t M = w.shape[0], kh = w.shape[2], kw = w.shape[3], OH = out[2], OW = out[3];
  for (int64_t m = 0; m < M; ++m)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const S& g = gy[at((m * OH + oh) * OW + ow)];
        if (gb) (*gb)[at(m)] += g;
        if (is_zero(g)) continue;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t i = 0; i < kh; ++i) {
            const int64_t h = oh * a.strides[0] - a.pads[0] + i * a.dilations[0];
            if (h < 0 || h >= H) continue;
            for (int64_t j = 0; j < kw; ++j) {
              const int64_t v = ow * a.strides[1] - a.pads[1] + j * a.dilations[1];
              if (v < 0 || v >= W) continue;
              const size_t xi = at((c * H + h) * W + v), wi = at(((m * C + c) * kh + i) * kw + j);
              if (gx) (*gx)[xi] += g * w.data[wi];
              if (gw) (*gw)[wi] += g * x.data[xi];
            }
          }
      }
}

// Batched matmul with numpy broadcasting of the batch axes (1-D operands as in the forward): per batch
// element t, gA += gY·Bᵀ and gB += Aᵀ·gY, into the operand blocks t reads.
template <class S>
void matmul(const Tensor<S>& x, const Tensor<S>& y, const Grad<S>& gr, Grad<S>* gx, Grad<S>* gy) {
  Shape a = x.shape, b = y.shape;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  const Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  const Shape batch = broadcast_shapes(ba, bb);
  const auto ma = broadcast_map(ba, batch), mb = broadcast_map(bb, batch);
  for (size_t t = 0; t < ma.size(); ++t) {
    const S* pa = x.data.data() + ma[t] * m * k;
    const S* pb = y.data.data() + mb[t] * k * n;
    const S* pg = gr.data() + static_cast<int64_t>(t) * m * n;
    if (gx) {
      S* q = gx->data() + ma[t] * m * k;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t l = 0; l < k; ++l) {
          S acc(0.0);
          for (int64_t j = 0; j < n; ++j) acc += pg[i * n + j] * pb[l * n + j];
          q[i * k + l] += acc;
        }
    }
    if (gy) {
      S* q = gy->data() + mb[t] * k * n;
      for (int64_t l = 0; l < k; ++l)
        for (int64_t j = 0; j < n; ++j) {
          S acc(0.0);
          for (int64_t i = 0; i < m; ++i) acc += pa[i * k + l] * pg[i * n + j];
          q[l * n + j] += acc;
        }
    }
  }
}

// Y = α·op(A)·op(B) + β·C.
template <class S>
void gemm(const Tensor<S>& A, const Tensor<S>& B, const Tensor<S>* C, const GemmAttrs& g, const Shape& out,
          const Grad<S>& gy, Grad<S>* gA, Grad<S>* gB, Grad<S>* gC) {
  const int64_t m = out[0], n = out[1], k = g.trans_a ? A.shape[0] : A.shape[1];
  const auto ia = [&](int64_t i, int64_t l) { return at(g.trans_a ? l * m + i : i * k + l); };
  const auto ib = [&](int64_t l, int64_t j) { return at(g.trans_b ? j * k + l : l * n + j); };
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const S s = S(g.alpha) * gy[at(i * n + j)];
      if (is_zero(s)) continue;
      for (int64_t l = 0; l < k; ++l) {
        if (gA) (*gA)[ia(i, l)] += s * B.data[ib(l, j)];
        if (gB) (*gB)[ib(l, j)] += s * A.data[ia(i, l)];
      }
    }
  if (C && gC) {
    const auto mc = broadcast_map(C->shape, out);
    for (size_t e = 0; e < gy.size(); ++e) (*gC)[at(mc[e])] += S(g.beta) * gy[e];
  }
}

// y_l = e_l / Σ e over each block: ∂L/∂x_l = y_l·(g_l − Σ_k g_k·y_k).
template <class S>
void softmax(const Tensor<S>& y, const SoftmaxAttrs& a, const Grad<S>& gy, Grad<S>* gx) {
  if (!gx) return;
  const Blocks b = blocks(y.shape, a.first_axis, a.end_axis);
  for (int64_t o = 0; o < b.outer; ++o)
    for (int64_t i = 0; i < b.inner; ++i) {
      const auto e = [&](int64_t l) { return at((o * b.len + l) * b.inner + i); };
      S dot(0.0);
      for (int64_t l = 0; l < b.len; ++l) dot += gy[e(l)] * y.data[e(l)];
      for (int64_t l = 0; l < b.len; ++l) (*gx)[e(l)] += y.data[e(l)] * (gy[e(l)] - dot);
    }
}

// x̂ = (x − μ)·r with r = 1/√(σ² + ε) over each row, y = x̂·s + b. With h = g·s (the adjoint of x̂):
// ∂L/∂x = r·(h − mean(h) − x̂·mean(h·x̂)); ∂L/∂s += g·x̂ and ∂L/∂b += g (summed over the rows).
template <class S>
void layer_norm(const Tensor<S>& x, const Tensor<S>& scale, const Tensor<S>* bias, const LayerNormAttrs& a,
                const Grad<S>& gy, Grad<S>* gx, Grad<S>* gs, Grad<S>* gb) {
  const Blocks b = blocks(x.shape, a.axis, static_cast<int64_t>(x.shape.size()));
  const Shape tail(x.shape.begin() + a.axis, x.shape.end());
  const auto ms = broadcast_map(scale.shape, tail);
  std::vector<int64_t> mb;
  if (bias) mb = broadcast_map(bias->shape, tail);
  const S n(static_cast<double>(b.len)), eps(a.epsilon);
  std::vector<S> xh(at(b.len)), h(at(b.len));
  for (int64_t o = 0; o < b.outer; ++o) {
    const S* row = x.data.data() + o * b.len;
    const S* g = gy.data() + o * b.len;
    S mean(0.0);
    for (int64_t l = 0; l < b.len; ++l) mean += row[l];
    mean /= n;
    S var(0.0);
    for (int64_t l = 0; l < b.len; ++l) var += square_of(S(row[l] - mean));
    const S r = S(1.0) / sqrt_of(S(var / n + eps));
    S mh(0.0), mhx(0.0);
    for (int64_t l = 0; l < b.len; ++l) {
      xh[at(l)] = (row[l] - mean) * r;
      h[at(l)] = g[l] * scale.data[at(ms[at(l)])];
      mh += h[at(l)];
      mhx += h[at(l)] * xh[at(l)];
      if (gs) (*gs)[at(ms[at(l)])] += g[l] * xh[at(l)];
      if (bias && gb) (*gb)[at(mb[at(l)])] += g[l];
    }
    mh /= n;
    mhx /= n;
    if (gx)
      for (int64_t l = 0; l < b.len; ++l) (*gx)[at(o * b.len + l)] += r * (h[at(l)] - mh - xh[at(l)] * mhx);
  }
}

template <class S>
void reduce_mean(const Tensor<S>& x, const ReduceMeanAttrs& a, const Shape& out, const Grad<S>& gy,
                 Grad<S>* gx) {
  if (!gx) return;
  Shape kept = x.shape;
  for (int64_t k : a.axes) kept[at(k)] = 1;
  const auto st = strides_of(kept);
  const S count(static_cast<double>(static_cast<int64_t>(x.data.size()) / element_count(out)));
  std::vector<int64_t> idx(x.shape.size(), 0);
  for (size_t e = 0; e < x.data.size(); ++e) {
    int64_t o = 0;
    for (size_t k = 0; k < idx.size(); ++k)
      if (kept[k] != 1) o += idx[k] * st[k];
    (*gx)[e] += gy[at(o)] / count;
    for (size_t k = idx.size(); k-- > 0;) {
      if (++idx[k] < x.shape[k]) break;
      idx[k] = 0;
    }
  }
}

// y = (x − mean)·s/√(var + ε) + B per channel (axis 1).
template <class S>
void batch_norm(const std::vector<const Tensor<S>*>& in, const BatchNormAttrs& a, const Grad<S>& gy,
                const std::vector<Grad<S>*>& g) {
  const Tensor<S>& x = *in[0];
  const Blocks b = blocks(x.shape, 1, 2);
  for (int64_t c = 0; c < b.len; ++c) {
    const size_t ci = at(c);
    const S &s = in[1]->data[ci], &mean = in[3]->data[ci];
    const S d = in[4]->data[ci] + S(a.epsilon);
    const S root = sqrt_of(d), factor = s / root;
    for (int64_t o = 0; o < b.outer; ++o)
      for (int64_t i = 0; i < b.inner; ++i) {
        const size_t e = at((o * b.len + c) * b.inner + i);
        const S &ge = gy[e], centred = x.data[e] - mean;
        if (g[0]) (*g[0])[e] += ge * factor;
        if (g[1]) (*g[1])[ci] += ge * centred / root;
        if (g[2]) (*g[2])[ci] += ge;
        if (g[3]) (*g[3])[ci] -= ge * factor;
        if (g[4]) (*g[4])[ci] -= ge * centred * factor / (S(2.0) * d);
      }
  }
}

template <class S>
void concat(const std::vector<const Tensor<S>*>& in, int64_t axis, const Grad<S>& gy,
            const std::vector<Grad<S>*>& g) {
  const Blocks b = blocks(in[0]->shape, axis, axis + 1);
  size_t pos = 0;
  for (int64_t o = 0; o < b.outer; ++o)
    for (size_t t = 0; t < in.size(); ++t) {
      const int64_t chunk = in[t]->shape[at(axis)] * b.inner;
      if (g[t])
        for (int64_t k = 0; k < chunk; ++k) (*g[t])[at(o * chunk + k)] += gy[pos + at(k)];
      pos += at(chunk);
    }
}

}  // namespace

template <class S>
void node_vjp(const Graph& graph, const Node& node, const std::vector<const Tensor<S>*>& in,
              const Tensor<S>& out, const std::vector<S>& gy, const std::vector<Grad<S>*>& g) {
  const Tensor<S>& x = *in[0];
  const Shape& shape = out.shape;
  const auto opt = [&](size_t i) { return in.size() > i ? in[i] : nullptr; };
  const auto gopt = [&](size_t i) { return g.size() > i ? g[i] : nullptr; };
  switch (node.op) {
    case Op::conv:
      return conv(x, *in[1], std::get<ConvAttrs>(node.attributes), shape, gy, g[0], g[1], gopt(2));
    case Op::matmul:
      return matmul(x, *in[1], gy, g[0], g[1]);
    case Op::gemm:
      return gemm(x, *in[1], opt(2), std::get<GemmAttrs>(node.attributes), shape, gy, g[0], g[1], gopt(2));
    case Op::add:
      return binary(
          x, *in[1], shape, gy, g[0], g[1], [](const S&, const S&) { return S(1.0); },
          [](const S&, const S&) { return S(1.0); });
    case Op::sub:
      return binary(
          x, *in[1], shape, gy, g[0], g[1], [](const S&, const S&) { return S(1.0); },
          [](const S&, const S&) { return S(-1.0); });
    case Op::mul:
      return binary(
          x, *in[1], shape, gy, g[0], g[1], [](const S&, const S& b) { return b; },
          [](const S& a, const S&) { return a; });
    case Op::div:
      return binary(
          x, *in[1], shape, gy, g[0], g[1], [](const S&, const S& b) { return S(S(1.0) / b); },
          [](const S& a, const S& b) { return S(-a / square_of(b)); });
    case Op::pow: {  // the exponent is a constant (validate): no adjoint for it
      if (!g[0]) return;
      const Value& e = graph.values[at(node.inputs[1])];
      const auto mx = broadcast_map(x.shape, shape), me = broadcast_map(e.shape, shape);
      for (size_t k = 0; k < gy.size(); ++k)
        (*g[0])[at(mx[k])] += gy[k] * pow_derivative(x.data[at(mx[k])], e.data[at(me[k])]);
      return;
    }
    case Op::where: {  // the condition is a constant of 0/1 (validate)
      const Value& c = graph.values[at(node.inputs[0])];
      const auto mc = broadcast_map(c.shape, shape), ma = broadcast_map(in[1]->shape, shape),
                 mb = broadcast_map(in[2]->shape, shape);
      for (size_t k = 0; k < gy.size(); ++k) {
        Grad<S>* target = c.data[at(mc[k])] != 0 ? g[1] : g[2];
        if (target) (*target)[at(c.data[at(mc[k])] != 0 ? ma[k] : mb[k])] += gy[k];
      }
      return;
    }
    case Op::neg:
    case Op::sqrt:
    case Op::reciprocal:
    case Op::relu:  // double: 0 at the kink (a subgradient); intervals: [0, 1] there
    case Op::erf:
    case Op::tanh:
    case Op::sigmoid:
    case Op::gelu:
      return unary(node, x, out, gy, g[0]);
    case Op::identity:
    case Op::reshape:
      if (g[0])
        for (size_t e = 0; e < gy.size(); ++e) (*g[0])[e] += gy[e];
      return;
    case Op::transpose:
      return scatter(transpose_map(x.shape, std::get<TransposeAttrs>(node.attributes).perm), gy, g[0]);
    case Op::slice:
      return scatter(slice_map(x.shape, shape, std::get<SliceAttrs>(node.attributes)), gy, g[0]);
    case Op::gather:
      return scatter(gather_map(x.shape, std::get<GatherAttrs>(node.attributes)), gy, g[0]);
    case Op::expand:
      return scatter(broadcast_map(x.shape, shape), gy, g[0]);
    case Op::concat:
      return concat(in, std::get<ConcatAttrs>(node.attributes).axis, gy, g);
    case Op::softmax:
      return softmax(out, std::get<SoftmaxAttrs>(node.attributes), gy, g[0]);
    case Op::layer_norm:
      return layer_norm(x, *in[1], opt(2), std::get<LayerNormAttrs>(node.attributes), gy, g[0], g[1],
                        gopt(2));
    case Op::reduce_mean:
      return reduce_mean(x, std::get<ReduceMeanAttrs>(node.attributes), shape, gy, g[0]);
    case Op::batch_norm:
      return batch_norm(in, std::get<BatchNormAttrs>(node.attributes), gy, g);
  }
  throw std::logic_error("vjp: unknown node kind");
}

#define REGATTA_GRAPH_NODE_VJP(S)                                                            \
  template void node_vjp<S>(const Graph&, const Node&, const std::vector<const Tensor<S>*>&, \
                            const Tensor<S>&, const std::vector<S>&, const std::vector<std::vector<S>*>&);
REGATTA_GRAPH_NODE_VJP(double)
REGATTA_GRAPH_NODE_VJP(::regatta::interval64)
REGATTA_GRAPH_NODE_VJP(::regatta::interval)
#undef REGATTA_GRAPH_NODE_VJP

}  // namespace regatta::graph::detail
