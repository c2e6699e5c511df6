// Shape rules and index maps of the node kinds (docs/graph.md, "Node kinds").
#include "shapes.hpp"

#include <algorithm>
#include <stdexcept>

namespace regatta::graph {

std::int64_t element_count(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

std::string shape_text(const Shape& shape) {
  std::string s = "[";
  for (std::size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + "]";
}

std::string_view op_name(Op op) {
  switch (op) {
    case Op::conv:
      return "conv";
    case Op::matmul:
      return "matmul";
    case Op::gemm:
      return "gemm";
    case Op::add:
      return "add";
    case Op::sub:
      return "sub";
    case Op::mul:
      return "mul";
    case Op::div:
      return "div";
    case Op::pow:
      return "pow";
    case Op::where:
      return "where";
    case Op::neg:
      return "neg";
    case Op::sqrt:
      return "sqrt";
    case Op::reciprocal:
      return "reciprocal";
    case Op::relu:
      return "relu";
    case Op::gelu:
      return "gelu";
    case Op::erf:
      return "erf";
    case Op::tanh:
      return "tanh";
    case Op::sigmoid:
      return "sigmoid";
    case Op::identity:
      return "identity";
    case Op::transpose:
      return "transpose";
    case Op::reshape:
      return "reshape";
    case Op::slice:
      return "slice";
    case Op::gather:
      return "gather";
    case Op::expand:
      return "expand";
    case Op::concat:
      return "concat";
    case Op::softmax:
      return "softmax";
    case Op::layer_norm:
      return "layer_norm";
    case Op::reduce_mean:
      return "reduce_mean";
    case Op::batch_norm:
      return "batch_norm";
  }
  return "?";
}

namespace detail {

namespace {
[[noreturn]] void fail(const std::string& why) { throw std::invalid_argument(why); }
void need(bool ok, const std::string& why) {
  if (!ok) fail(why);
}
}  // namespace

std::vector<std::int64_t> strides_of(const Shape& shape) {
  std::vector<std::int64_t> s(shape.size(), 1);
  for (std::size_t k = shape.size(); k-- > 1;) s[k - 1] = s[k] * shape[k];
  return s;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const std::size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (std::size_t k = 0; k < r; ++k) {
    const std::int64_t da = k + a.size() >= r ? a[k + a.size() - r] : 1;
    const std::int64_t db = k + b.size() >= r ? b[k + b.size() - r] : 1;
    need(da == db || da == 1 || db == 1,
         "shapes " + shape_text(a) + " and " + shape_text(b) + " do not broadcast");
    out[k] = da == 1 ? db : da;
  }
  return out;
}

namespace {
// Calls f(out_index, multi_index) for every element of `shape` in row-major order.
template <class F>
void for_each_index(const Shape& shape, F&& f) {
  const std::int64_t n = element_count(shape);
  std::vector<std::int64_t> idx(shape.size(), 0);
  for (std::int64_t e = 0; e < n; ++e) {
    f(e, idx);
    for (std::size_t k = shape.size(); k-- > 0;) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
}
}  // namespace

std::vector<std::int64_t> broadcast_map(const Shape& in, const Shape& out) {
  const auto st = strides_of(in);
  const std::size_t off = out.size() - in.size();
  std::vector<std::int64_t> map(static_cast<std::size_t>(element_count(out)));
  for_each_index(out, [&](std::int64_t e, const std::vector<std::int64_t>& idx) {
    std::int64_t src = 0;
    for (std::size_t k = 0; k < in.size(); ++k)
      if (in[k] != 1) src += idx[k + off] * st[k];
    map[static_cast<std::size_t>(e)] = src;
  });
  return map;
}

std::vector<std::int64_t> transpose_map(const Shape& in, const std::vector<std::int64_t>& perm) {
  const auto st = strides_of(in);
  Shape out(in.size());
  for (std::size_t k = 0; k < in.size(); ++k) out[k] = in[static_cast<std::size_t>(perm[k])];
  std::vector<std::int64_t> map(static_cast<std::size_t>(element_count(out)));
  for_each_index(out, [&](std::int64_t e, const std::vector<std::int64_t>& idx) {
    std::int64_t src = 0;
    for (std::size_t k = 0; k < out.size(); ++k) src += idx[k] * st[static_cast<std::size_t>(perm[k])];
    map[static_cast<std::size_t>(e)] = src;
  });
  return map;
}

std::vector<std::int64_t> slice_map(const Shape& in, const Shape& out, const SliceAttrs& a) {
  const auto st = strides_of(in);
  std::vector<std::int64_t> map(static_cast<std::size_t>(element_count(out)));
  for_each_index(out, [&](std::int64_t e, const std::vector<std::int64_t>& idx) {
    std::int64_t src = 0;
    for (std::size_t k = 0; k < out.size(); ++k) src += (a.starts[k] + idx[k] * a.steps[k]) * st[k];
    map[static_cast<std::size_t>(e)] = src;
  });
  return map;
}

std::vector<std::int64_t> gather_map(const Shape& in, const GatherAttrs& a) {
  const auto axis = static_cast<std::size_t>(a.axis);
  std::int64_t outer = 1, inner = 1;
  for (std::size_t k = 0; k < axis; ++k) outer *= in[k];
  for (std::size_t k = axis + 1; k < in.size(); ++k) inner *= in[k];
  const std::int64_t m = static_cast<std::int64_t>(a.indices.size());
  std::vector<std::int64_t> map;
  map.reserve(static_cast<std::size_t>(outer * m * inner));
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t j = 0; j < m; ++j)
      for (std::int64_t i = 0; i < inner; ++i)
        map.push_back((o * in[axis] + a.indices[static_cast<std::size_t>(j)]) * inner + i);
  return map;
}

std::pair<int, int> arity(Op op) {
  switch (op) {
    case Op::conv:
      return {2, 3};
    case Op::gemm:
      return {2, 3};
    case Op::matmul:
    case Op::add:
    case Op::sub:
    case Op::mul:
    case Op::div:
    case Op::pow:
      return {2, 2};
    case Op::where:
      return {3, 3};
    case Op::layer_norm:
      return {2, 3};
    case Op::batch_norm:
      return {5, 5};
    case Op::concat:
      return {1, 1 << 20};
    default:
      return {1, 1};
  }
}

Shape output_shape(Op op, const Attributes& attributes, const std::vector<Shape>& in, const Shape& target) {
  const auto [lo, hi] = arity(op);
  need(static_cast<int>(in.size()) >= lo && static_cast<int>(in.size()) <= hi, "wrong number of inputs");
  const Shape& x = in[0];
  const auto rank = static_cast<std::int64_t>(x.size());
  auto axis_ok = [&](std::int64_t a, std::int64_t r) { need(a >= 0 && a < r, "axis out of range"); };
  switch (op) {
    case Op::conv: {
      const auto& a = std::get<ConvAttrs>(attributes);
      const Shape& w = in[1];
      need(x.size() == 4 && w.size() == 4 && x[0] == 1,
           "Conv takes a [1, C, H, W] input and [M, C, kh, kw] weights");
      need(w[1] == x[1], "Conv weights do not match the input channels (groups must be 1)");
      need(in.size() == 2 || in[2] == Shape{w[0]}, "Conv bias length is not the number of output channels");
      Shape out{1, w[0], 0, 0};
      for (int k = 0; k < 2; ++k) {
        need(a.strides[k] >= 1 && a.dilations[k] >= 1 && a.pads[k] >= 0 && a.pads[k + 2] >= 0,
             "bad Conv attributes");
        const std::int64_t span = a.dilations[k] * (w[2 + k] - 1) + 1;
        const std::int64_t padded = x[2 + k] + a.pads[k] + a.pads[k + 2];
        need(padded >= span, "Conv kernel larger than the padded input");
        out[2 + k] = (padded - span) / a.strides[k] + 1;
      }
      return out;
    }
    case Op::matmul: {
      const Shape& y = in[1];
      need(!x.empty() && !y.empty(), "MatMul of a scalar");
      Shape a = x, b = y;
      if (a.size() == 1) a.insert(a.begin(), 1);
      if (b.size() == 1) b.push_back(1);
      need(a.back() == b[b.size() - 2],
           "MatMul inner dimensions differ: " + shape_text(x) + " × " + shape_text(y));
      Shape batch = broadcast_shapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
      if (x.size() > 1) batch.push_back(a[a.size() - 2]);
      if (y.size() > 1) batch.push_back(b.back());
      return batch;
    }
    case Op::gemm: {
      const auto& a = std::get<GemmAttrs>(attributes);
      need(x.size() == 2 && in[1].size() == 2, "Gemm takes matrices");
      const std::int64_t m = a.trans_a ? x[1] : x[0], k = a.trans_a ? x[0] : x[1];
      const std::int64_t k2 = a.trans_b ? in[1][1] : in[1][0], n = a.trans_b ? in[1][0] : in[1][1];
      need(k == k2, "Gemm inner dimensions differ");
      if (in.size() == 3) need(broadcast_shapes(in[2], {m, n}) == Shape{m, n}, "Gemm C does not broadcast");
      return {m, n};
    }
    case Op::add:
    case Op::sub:
    case Op::mul:
    case Op::div:
    case Op::pow:
      return broadcast_shapes(x, in[1]);
    case Op::where:
      return broadcast_shapes(broadcast_shapes(x, in[1]), in[2]);
    case Op::transpose: {
      const auto& p = std::get<TransposeAttrs>(attributes).perm;
      need(static_cast<std::int64_t>(p.size()) == rank, "Transpose perm length is not the rank");
      std::vector<bool> seen(x.size(), false);
      Shape out;
      for (std::int64_t d : p) {
        axis_ok(d, rank);
        need(!seen[static_cast<std::size_t>(d)], "Transpose perm repeats an axis");
        seen[static_cast<std::size_t>(d)] = true;
        out.push_back(x[static_cast<std::size_t>(d)]);
      }
      return out;
    }
    case Op::reshape:
      need(element_count(target) == element_count(x), "Reshape changes the number of elements");
      return target;
    case Op::expand:
      need(broadcast_shapes(x, target) == target,
           "Expand target " + shape_text(target) + " is not a broadcast of " + shape_text(x));
      return target;
    case Op::slice: {
      const auto& a = std::get<SliceAttrs>(attributes);
      need(a.starts.size() == x.size() && a.steps.size() == x.size() && target.size() == x.size(),
           "Slice rank");
      for (std::size_t k = 0; k < x.size(); ++k) {
        need(a.steps[k] != 0 && target[k] >= 0, "Slice step 0");
        if (target[k] == 0) continue;
        const std::int64_t last = a.starts[k] + (target[k] - 1) * a.steps[k];
        need(a.starts[k] >= 0 && a.starts[k] < x[k] && last >= 0 && last < x[k], "Slice out of range");
      }
      return target;
    }
    case Op::gather: {
      const auto& a = std::get<GatherAttrs>(attributes);
      axis_ok(a.axis, rank);
      need(element_count(a.indices_shape) == static_cast<std::int64_t>(a.indices.size()),
           "Gather indices shape");
      for (std::int64_t i : a.indices)
        need(i >= 0 && i < x[static_cast<std::size_t>(a.axis)], "Gather index out of range");
      Shape out(x.begin(), x.begin() + a.axis);
      out.insert(out.end(), a.indices_shape.begin(), a.indices_shape.end());
      out.insert(out.end(), x.begin() + a.axis + 1, x.end());
      return out;
    }
    case Op::concat: {
      const auto axis = std::get<ConcatAttrs>(attributes).axis;
      axis_ok(axis, rank);
      Shape out = x;
      for (std::size_t i = 1; i < in.size(); ++i) {
        need(in[i].size() == x.size(), "Concat of different ranks");
        for (std::size_t k = 0; k < x.size(); ++k)
          if (static_cast<std::int64_t>(k) != axis)
            need(in[i][k] == x[k], "Concat shapes differ off the axis");
        out[static_cast<std::size_t>(axis)] += in[i][static_cast<std::size_t>(axis)];
      }
      return out;
    }
    case Op::softmax: {
      const auto& a = std::get<SoftmaxAttrs>(attributes);
      need(a.first_axis >= 0 && a.first_axis < a.end_axis && a.end_axis <= rank, "Softmax axis out of range");
      return x;
    }
    case Op::layer_norm: {
      const auto& a = std::get<LayerNormAttrs>(attributes);
      axis_ok(a.axis, rank);
      const Shape tail(x.begin() + a.axis, x.end());
      for (std::size_t i = 1; i < in.size(); ++i)
        need(broadcast_shapes(in[i], tail) == tail,
             "LayerNormalization scale/bias do not fit the normalised axes");
      need(a.epsilon >= 0, "negative epsilon");
      return x;
    }
    case Op::batch_norm: {
      need(x.size() >= 2, "BatchNormalization input of rank < 2");
      for (std::size_t i = 1; i < 5; ++i)
        need(in[i] == Shape{x[1]}, "BatchNormalization parameter is not per channel");
      need(std::get<BatchNormAttrs>(attributes).epsilon >= 0, "negative epsilon");
      return x;
    }
    case Op::reduce_mean: {
      const auto& a = std::get<ReduceMeanAttrs>(attributes);
      Shape out;
      for (std::int64_t k = 0; k < rank; ++k) {
        const bool reduced = std::binary_search(a.axes.begin(), a.axes.end(), k);
        if (!reduced)
          out.push_back(x[static_cast<std::size_t>(k)]);
        else if (a.keepdims)
          out.push_back(1);
      }
      for (std::int64_t k : a.axes) axis_ok(k, rank);
      return out;
    }
    default:
      return x;
  }
}

Blocks blocks(const Shape& shape, std::int64_t first, std::int64_t end) {
  Blocks b;
  for (std::int64_t k = 0; k < static_cast<std::int64_t>(shape.size()); ++k)
    (k < first ? b.outer : k < end ? b.len : b.inner) *= shape[static_cast<std::size_t>(k)];
  return b;
}

}  // namespace detail
}  // namespace regatta::graph
