// The adjoint rule of every node kind, in binary64 (docs/graph.md, "Derivatives"). Each rule is the transpose
// of the node's Jacobian at the forward values, applied to the output's adjoint; operands broadcast in the
// forward have their adjoint summed over the broadcast axes (the broadcast map sends several output elements
// to one input element, and the sum runs over them).
#include "vjp_rules.hpp"

#include <cmath>
#include <numbers>
#include <stdexcept>

#include "scalar_functions.hpp"
#include "shapes.hpp"

namespace regatta::graph::detail {

namespace {

using std::int64_t;
using std::size_t;
using Grad = std::vector<double>;

size_t at(int64_t i) { return static_cast<size_t>(i); }

// Splits `shape` at [first, end): outer × len × inner (as the forward does).
struct Blocks {
  int64_t outer = 1, len = 1, inner = 1;
};
Blocks blocks(const Shape& shape, int64_t first, int64_t end) {
  Blocks b;
  for (int64_t k = 0; k < static_cast<int64_t>(shape.size()); ++k)
    (k < first ? b.outer : k < end ? b.len : b.inner) *= shape[at(k)];
  return b;
}

// y[e] = x[map[e]]: the adjoint scatters back (several e may read one element: they add).
void scatter(const std::vector<int64_t>& map, const Grad& gy, Grad* gx) {
  if (!gx) return;
  for (size_t e = 0; e < map.size(); ++e) (*gx)[at(map[e])] += gy[e];
}

// y = f(x) elementwise with f'(x) given from (x, y).
template <class D>
void unary(const Tensor<double>& x, const Tensor<double>& y, const Grad& gy, Grad* gx, D&& derivative) {
  if (!gx) return;
  for (size_t e = 0; e < gy.size(); ++e) (*gx)[e] += gy[e] * derivative(x.data[e], y.data[e]);
}

// y = f(a, b) with numpy broadcasting; da, db: the partial derivatives at (a, b).
template <class Da, class Db>
void binary(const Tensor<double>& a, const Tensor<double>& b, const Shape& out, const Grad& gy, Grad* ga,
            Grad* gb, Da&& da, Db&& db) {
  const auto ma = broadcast_map(a.shape, out), mb = broadcast_map(b.shape, out);
  for (size_t e = 0; e < gy.size(); ++e) {
    const double va = a.data[at(ma[e])], vb = b.data[at(mb[e])];
    if (ga) (*ga)[at(ma[e])] += gy[e] * da(va, vb);
    if (gb) (*gb)[at(mb[e])] += gy[e] * db(va, vb);
  }
}

void conv(const Tensor<double>& x, const Tensor<double>& w, const ConvAttrs& a, const Shape& out,
          const Grad& gy, Grad* gx, Grad* gw, Grad* gb) {
  const int64_t C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t M = w.shape[0], kh = w.shape[2], kw = w.shape[3], OH = out[2], OW = out[3];
  for (int64_t m = 0; m < M; ++m)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const double g = gy[at((m * OH + oh) * OW + ow)];
        if (gb) (*gb)[at(m)] += g;
        if (g == 0) continue;
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
void matmul(const Tensor<double>& x, const Tensor<double>& y, const Grad& gr, Grad* gx, Grad* gy) {
  Shape a = x.shape, b = y.shape;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  const int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  const Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  const Shape batch = broadcast_shapes(ba, bb);
  const auto ma = broadcast_map(ba, batch), mb = broadcast_map(bb, batch);
  for (size_t t = 0; t < ma.size(); ++t) {
    const double* pa = x.data.data() + ma[t] * m * k;
    const double* pb = y.data.data() + mb[t] * k * n;
    const double* pg = gr.data() + static_cast<int64_t>(t) * m * n;
    if (gx) {
      double* q = gx->data() + ma[t] * m * k;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t l = 0; l < k; ++l) {
          double acc = 0;
          for (int64_t j = 0; j < n; ++j) acc += pg[i * n + j] * pb[l * n + j];
          q[i * k + l] += acc;
        }
    }
    if (gy) {
      double* q = gy->data() + mb[t] * k * n;
      for (int64_t l = 0; l < k; ++l)
        for (int64_t j = 0; j < n; ++j) {
          double acc = 0;
          for (int64_t i = 0; i < m; ++i) acc += pa[i * k + l] * pg[i * n + j];
          q[l * n + j] += acc;
        }
    }
  }
}

// Y = α·op(A)·op(B) + β·C.
void gemm(const Tensor<double>& A, const Tensor<double>& B, const Tensor<double>* C, const GemmAttrs& g,
          const Shape& out, const Grad& gy, Grad* gA, Grad* gB, Grad* gC) {
  const int64_t m = out[0], n = out[1], k = g.trans_a ? A.shape[0] : A.shape[1];
  const auto ia = [&](int64_t i, int64_t l) { return at(g.trans_a ? l * m + i : i * k + l); };
  const auto ib = [&](int64_t l, int64_t j) { return at(g.trans_b ? j * k + l : l * n + j); };
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const double s = g.alpha * gy[at(i * n + j)];
      if (s == 0) continue;
      for (int64_t l = 0; l < k; ++l) {
        if (gA) (*gA)[ia(i, l)] += s * B.data[ib(l, j)];
        if (gB) (*gB)[ib(l, j)] += s * A.data[ia(i, l)];
      }
    }
  if (C && gC) {
    const auto mc = broadcast_map(C->shape, out);
    for (size_t e = 0; e < gy.size(); ++e) (*gC)[at(mc[e])] += g.beta * gy[e];
  }
}

// y_l = e_l / Σ e over each block: ∂L/∂x_l = y_l·(g_l − Σ_k g_k·y_k).
void softmax(const Tensor<double>& y, const SoftmaxAttrs& a, const Grad& gy, Grad* gx) {
  if (!gx) return;
  const Blocks b = blocks(y.shape, a.first_axis, a.end_axis);
  for (int64_t o = 0; o < b.outer; ++o)
    for (int64_t i = 0; i < b.inner; ++i) {
      const auto e = [&](int64_t l) { return at((o * b.len + l) * b.inner + i); };
      double dot = 0;
      for (int64_t l = 0; l < b.len; ++l) dot += gy[e(l)] * y.data[e(l)];
      for (int64_t l = 0; l < b.len; ++l) (*gx)[e(l)] += y.data[e(l)] * (gy[e(l)] - dot);
    }
}

// x̂ = (x − μ)·r with r = 1/√(σ² + ε) over each row, y = x̂·s + b. With h = g·s (the adjoint of x̂):
// ∂L/∂x = r·(h − mean(h) − x̂·mean(h·x̂)); ∂L/∂s += g·x̂ and ∂L/∂b += g (summed over the rows).
void layer_norm(const Tensor<double>& x, const Tensor<double>& scale, const Tensor<double>* bias,
                const LayerNormAttrs& a, const Grad& gy, Grad* gx, Grad* gs, Grad* gb) {
  const Blocks b = blocks(x.shape, a.axis, static_cast<int64_t>(x.shape.size()));
  const Shape tail(x.shape.begin() + a.axis, x.shape.end());
  const auto ms = broadcast_map(scale.shape, tail);
  std::vector<int64_t> mb;
  if (bias) mb = broadcast_map(bias->shape, tail);
  const auto n = static_cast<double>(b.len);
  std::vector<double> xh(at(b.len)), h(at(b.len));
  for (int64_t o = 0; o < b.outer; ++o) {
    const double* row = x.data.data() + o * b.len;
    const double* g = gy.data() + o * b.len;
    double mean = 0;
    for (int64_t l = 0; l < b.len; ++l) mean += row[l];
    mean /= n;
    double var = 0;
    for (int64_t l = 0; l < b.len; ++l) var += (row[l] - mean) * (row[l] - mean);
    const double r = 1.0 / std::sqrt(var / n + a.epsilon);
    double mh = 0, mhx = 0;
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

void reduce_mean(const Tensor<double>& x, const ReduceMeanAttrs& a, const Shape& out, const Grad& gy,
                 Grad* gx) {
  if (!gx) return;
  Shape kept = x.shape;
  for (int64_t k : a.axes) kept[at(k)] = 1;
  const auto st = strides_of(kept);
  const double count = static_cast<double>(static_cast<int64_t>(x.data.size()) / element_count(out));
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
void batch_norm(const std::vector<const Tensor<double>*>& in, const BatchNormAttrs& a, const Grad& gy,
                const std::vector<Grad*>& g) {
  const Tensor<double>& x = *in[0];
  const Blocks b = blocks(x.shape, 1, 2);
  for (int64_t c = 0; c < b.len; ++c) {
    const size_t ci = at(c);
    const double s = in[1]->data[ci], mean = in[3]->data[ci], d = in[4]->data[ci] + a.epsilon;
    const double root = std::sqrt(d), factor = s / root;
    for (int64_t o = 0; o < b.outer; ++o)
      for (int64_t i = 0; i < b.inner; ++i) {
        const size_t e = at((o * b.len + c) * b.inner + i);
        const double ge = gy[e], centred = x.data[e] - mean;
        if (g[0]) (*g[0])[e] += ge * factor;
        if (g[1]) (*g[1])[ci] += ge * centred / root;
        if (g[2]) (*g[2])[ci] += ge;
        if (g[3]) (*g[3])[ci] -= ge * factor;
        if (g[4]) (*g[4])[ci] -= ge * centred * factor / (2 * d);
      }
  }
}

void concat(const std::vector<const Tensor<double>*>& in, int64_t axis, const Grad& gy,
            const std::vector<Grad*>& g) {
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

// d/dx of x·Φ(x) = Φ(x) + x·φ(x); of 0.5·x·(1 + tanh u), u = √(2/π)(x + 0.044715x³):
// 0.5·(1 + tanh u) + 0.5·x·(1 − tanh² u)·√(2/π)(1 + 3·0.044715x²).
double gelu_derivative(double x, bool tanh_approximation) {
  if (tanh_approximation) {
    const double c = std::sqrt(2.0 / std::numbers::pi);
    const double t = std::tanh(c * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * c * (1 + 3 * 0.044715 * x * x);
  }
  const double cdf = 0.5 * (1 + std::erf(x / std::numbers::sqrt2));
  const double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
  return cdf + x * pdf;
}

}  // namespace

void node_vjp(const Graph& graph, const Node& node, const std::vector<const Tensor<double>*>& in,
              const Tensor<double>& out, const std::vector<double>& gy, const std::vector<Grad*>& g) {
  const Tensor<double>& x = *in[0];
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
          x, *in[1], shape, gy, g[0], g[1], [](double, double) { return 1.0; },
          [](double, double) { return 1.0; });
    case Op::sub:
      return binary(
          x, *in[1], shape, gy, g[0], g[1], [](double, double) { return 1.0; },
          [](double, double) { return -1.0; });
    case Op::mul:
      return binary(
          x, *in[1], shape, gy, g[0], g[1], [](double, double b) { return b; },
          [](double a, double) { return a; });
    case Op::div:
      return binary(
          x, *in[1], shape, gy, g[0], g[1], [](double, double b) { return 1.0 / b; },
          [](double a, double b) { return -a / (b * b); });
    case Op::pow: {  // the exponent is a constant (validate): no adjoint for it
      const Value& e = graph.values[at(node.inputs[1])];
      const Tensor<double> et{e.shape, e.data};
      return binary(
          x, et, shape, gy, g[0], nullptr,
          [](double a, double p) { return p == 0   ? 0.0
                                          : p == 1 ? 1.0
                                                   : p * std::pow(a, p - 1); },
          [](double, double) { return 0.0; });
    }
    case Op::where: {  // the condition is a constant of 0/1 (validate)
      const Value& c = graph.values[at(node.inputs[0])];
      const auto mc = broadcast_map(c.shape, shape), ma = broadcast_map(in[1]->shape, shape),
                 mb = broadcast_map(in[2]->shape, shape);
      for (size_t k = 0; k < gy.size(); ++k) {
        Grad* target = c.data[at(mc[k])] != 0 ? g[1] : g[2];
        if (target) (*target)[at(c.data[at(mc[k])] != 0 ? ma[k] : mb[k])] += gy[k];
      }
      return;
    }
    case Op::neg:
      return unary(x, out, gy, g[0], [](double, double) { return -1.0; });
    case Op::sqrt:
      return unary(x, out, gy, g[0], [](double, double y) { return 0.5 / y; });
    case Op::reciprocal:
      return unary(x, out, gy, g[0], [](double, double y) { return -y * y; });
    case Op::relu:  // 0 at the kink (a subgradient)
      return unary(x, out, gy, g[0], [](double v, double) { return v > 0 ? 1.0 : 0.0; });
    case Op::erf:
      return unary(x, out, gy, g[0],
                   [](double v, double) { return 2 / std::sqrt(std::numbers::pi) * std::exp(-v * v); });
    case Op::tanh:
      return unary(x, out, gy, g[0], [](double, double y) { return 1 - y * y; });
    case Op::sigmoid:
      return unary(x, out, gy, g[0], [](double, double y) { return y * (1 - y); });
    case Op::gelu: {
      const bool t = std::get<GeluAttrs>(node.attributes).tanh_approximation;
      return unary(x, out, gy, g[0], [t](double v, double) { return gelu_derivative(v, t); });
    }
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

}  // namespace regatta::graph::detail
