// Data-movement operators of the ONNX importer: shapes and attributes resolved against constant operands
// (docs/graph.md, "Folding"). The same resolution serves folded constants and runtime nodes.
#include <algorithm>
#include <limits>

#include "onnx_detail.hpp"
#include "shapes.hpp"

namespace regatta::graph::onnx_detail {

namespace {

const Const& constant_operand(const std::vector<const Const*>& consts, std::size_t k, const char* what,
                              const Where& where) {
  if (consts.size() <= k || !consts[k])
    where.fail(std::string("the ") + what + " must be a constant (it is computed at run time)");
  return *consts[k];
}
bool present(const std::vector<Shape>& shapes, const std::vector<const Const*>& consts, std::size_t k) {
  return shapes.size() > k && (consts[k] == nullptr || consts[k]->dtype != 0);
}

Shape reshape_target(const Shape& in, const std::vector<std::int64_t>& spec, bool allowzero,
                     const Where& where) {
  Shape out;
  std::int64_t known = 1, infer = -1;
  for (std::size_t k = 0; k < spec.size(); ++k) {
    std::int64_t d = spec[k];
    if (d == 0 && !allowzero) {
      if (k >= in.size()) where.fail("Reshape copies a dimension the input does not have");
      d = in[k];
    }
    if (d == -1) {
      if (infer >= 0) where.fail("Reshape has two -1 dimensions");
      infer = static_cast<std::int64_t>(k);
      out.push_back(1);
      continue;
    }
    if (d < 0) where.fail("Reshape to a negative dimension");
    out.push_back(d);
    known *= d;
  }
  const std::int64_t n = element_count(in);
  if (infer >= 0) {
    if (known == 0 || n % known != 0)
      where.fail("Reshape cannot infer the -1 dimension of " + shape_text(spec));
    out[static_cast<std::size_t>(infer)] = n / known;
  }
  if (element_count(out) != n)
    where.fail("Reshape of " + shape_text(in) + " to " + shape_text(out) + " changes the number of elements");
  return out;
}

// Slice bounds of one axis, clamped as the ONNX specification says.
void slice_axis(std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step,
                std::int64_t& first, std::int64_t& count, const Where& where) {
  if (step == 0) where.fail("Slice step 0");
  if (start < 0) start = start < -dim ? 0 : start + dim;
  if (end < 0) end = end < -dim ? -1 : end + dim;
  if (step > 0) {
    start = std::clamp<std::int64_t>(start, 0, dim);
    end = std::clamp<std::int64_t>(end, 0, dim);
    count = end > start ? (end - start + step - 1) / step : 0;
  } else {
    start = std::clamp<std::int64_t>(start, 0, dim - 1);
    end = std::clamp<std::int64_t>(end, -1, dim - 1);
    count = start > end ? (start - end + (-step) - 1) / (-step) : 0;
  }
  first = count > 0 ? start : 0;
}

}  // namespace

bool is_movement(const std::string& op) {
  static const char* ops[] = {"Identity",  "Dropout", "Reshape", "Flatten", "Squeeze", "Unsqueeze",
                              "Transpose", "Slice",   "Gather",  "Expand",  "Concat"};
  return std::any_of(std::begin(ops), std::end(ops), [&](const char* o) { return op == o; });
}

Movement movement(const onnx::NodeProto& node, const std::vector<Shape>& shapes,
                  const std::vector<const Const*>& consts, std::int64_t opset, const Where& where) {
  const std::string& op = node.op_type();
  const Shape& x = shapes.at(0);
  const auto rank = static_cast<std::int64_t>(x.size());
  if (op == "Identity") {
    only_attributes(node, {}, where);
    return {Op::identity, {}, x};
  }
  if (op == "Dropout") {
    only_attributes(node, {"ratio", "seed", "is_test"}, where);
    if (present(shapes, consts, 2)) {
      const auto mode = integers(constant_operand(consts, 2, "training_mode", where), where);
      if (mode.size() != 1 || mode[0] != 0) where.fail("Dropout in training mode is not supported");
    }
    return {Op::identity, {}, x};
  }
  if (op == "Reshape") {
    only_attributes(node, {"allowzero"}, where);
    const bool allowzero = int_attribute(node, "allowzero", 0, where) != 0;
    return {
        Op::reshape,
        {},
        reshape_target(x, integers(constant_operand(consts, 1, "shape", where), where), allowzero, where)};
  }
  if (op == "Flatten") {
    only_attributes(node, {"axis"}, where);
    std::int64_t axis = int_attribute(node, "axis", 1, where);
    if (axis < -rank || axis > rank) where.fail("Flatten axis out of range");
    if (axis < 0) axis += rank;
    Shape out{1, 1};
    for (std::int64_t k = 0; k < rank; ++k) out[k < axis ? 0 : 1] *= x[static_cast<std::size_t>(k)];
    return {Op::reshape, {}, out};
  }
  if (op == "Squeeze" || op == "Unsqueeze") {
    std::vector<std::int64_t> axes;
    if (opset < 13) {
      only_attributes(node, {"axes"}, where);
      axes = ints_attribute(node, "axes", where);
    } else {
      only_attributes(node, {}, where);
      if (present(shapes, consts, 1)) axes = integers(constant_operand(consts, 1, "axes", where), where);
    }
    if (op == "Squeeze") {
      std::vector<bool> drop(x.size(), axes.empty());
      for (std::int64_t a : axes) {
        const auto k = static_cast<std::size_t>(normal_axis(a, rank, where));
        if (x[k] != 1) where.fail("Squeeze of an axis of length " + std::to_string(x[k]));
        drop[k] = true;
      }
      Shape out;
      for (std::size_t k = 0; k < x.size(); ++k)
        if (!(drop[k] && x[k] == 1)) out.push_back(x[k]);
      return {Op::reshape, {}, out};
    }
    if (axes.empty()) where.fail("Unsqueeze without axes");
    const auto out_rank = rank + static_cast<std::int64_t>(axes.size());
    std::vector<bool> inserted(static_cast<std::size_t>(out_rank), false);
    for (std::int64_t a : axes) {
      const auto k = static_cast<std::size_t>(normal_axis(a, out_rank, where));
      if (inserted[k]) where.fail("Unsqueeze axes repeat");
      inserted[k] = true;
    }
    Shape out;
    std::size_t next = 0;
    for (std::size_t k = 0; k < inserted.size(); ++k) out.push_back(inserted[k] ? 1 : x[next++]);
    return {Op::reshape, {}, out};
  }
  if (op == "Transpose") {
    only_attributes(node, {"perm"}, where);
    TransposeAttrs a{ints_attribute(node, "perm", where)};
    if (a.perm.empty())
      for (std::int64_t k = rank; k-- > 0;) a.perm.push_back(k);
    std::vector<Shape> in{x};
    try {
      return {Op::transpose, a, detail::output_shape(Op::transpose, a, in, {})};
    } catch (const std::invalid_argument& e) {
      where.fail(e.what());
    }
  }
  if (op == "Slice") {
    std::vector<std::int64_t> starts, ends, axes, steps;
    if (opset < 10) {
      only_attributes(node, {"starts", "ends", "axes"}, where);
      starts = ints_attribute(node, "starts", where);
      ends = ints_attribute(node, "ends", where);
      axes = ints_attribute(node, "axes", where);
    } else {
      only_attributes(node, {}, where);
      starts = integers(constant_operand(consts, 1, "starts", where), where);
      ends = integers(constant_operand(consts, 2, "ends", where), where);
      if (present(shapes, consts, 3)) axes = integers(constant_operand(consts, 3, "axes", where), where);
      if (present(shapes, consts, 4)) steps = integers(constant_operand(consts, 4, "steps", where), where);
    }
    if (axes.empty())
      for (std::size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<std::int64_t>(k));
    if (steps.empty()) steps.assign(starts.size(), 1);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
      where.fail("Slice starts, ends, axes and steps differ in length");
    SliceAttrs a{std::vector<std::int64_t>(x.size(), 0), std::vector<std::int64_t>(x.size(), 1)};
    Shape out = x;
    std::vector<bool> seen(x.size(), false);
    for (std::size_t j = 0; j < starts.size(); ++j) {
      const auto k = static_cast<std::size_t>(normal_axis(axes[j], rank, where));
      if (seen[k]) where.fail("Slice axes repeat");
      seen[k] = true;
      a.steps[k] = steps[j];
      slice_axis(x[k], starts[j], ends[j], steps[j], a.starts[k], out[k], where);
    }
    return {Op::slice, a, out};
  }
  if (op == "Gather") {
    only_attributes(node, {"axis"}, where);
    GatherAttrs a;
    a.axis = normal_axis(int_attribute(node, "axis", 0, where), rank, where);
    const Const& idx = constant_operand(consts, 1, "indices", where);
    a.indices = integers(idx, where);
    a.indices_shape = idx.shape;
    const std::int64_t dim = x[static_cast<std::size_t>(a.axis)];
    for (std::int64_t& i : a.indices) {
      if (i < -dim || i >= dim)
        where.fail("Gather index " + std::to_string(i) + " out of range for length " + std::to_string(dim));
      if (i < 0) i += dim;
    }
    std::vector<Shape> in{x};
    return {Op::gather, a, detail::output_shape(Op::gather, a, in, {})};
  }
  if (op == "Expand") {
    only_attributes(node, {}, where);
    const auto spec = integers(constant_operand(consts, 1, "shape", where), where);
    try {
      return {Op::expand, {}, detail::broadcast_shapes(x, Shape(spec.begin(), spec.end()))};
    } catch (const std::invalid_argument& e) {
      where.fail(e.what());
    }
  }
  if (op == "Concat") {
    only_attributes(node, {"axis"}, where);
    ConcatAttrs a{normal_axis(int_attribute(node, "axis", 0, where), rank, where)};
    try {
      return {Op::concat, a, detail::output_shape(Op::concat, a, shapes, {})};
    } catch (const std::invalid_argument& e) {
      where.fail(e.what());
    }
  }
  where.fail("not a data-movement operator");
}

namespace {
template <class T>
std::vector<T> move_data(const Movement& m, const std::vector<const Const*>& in,
                         std::vector<T> Const::*field) {
  const Const& x = *in[0];
  const std::vector<T>& d = x.*field;
  std::vector<std::int64_t> map;
  switch (m.op) {
    case Op::identity:
    case Op::reshape:
      return d;
    case Op::transpose:
      map = detail::transpose_map(x.shape, std::get<TransposeAttrs>(m.attributes).perm);
      break;
    case Op::slice:
      map = detail::slice_map(x.shape, m.out, std::get<SliceAttrs>(m.attributes));
      break;
    case Op::gather:
      map = detail::gather_map(x.shape, std::get<GatherAttrs>(m.attributes));
      break;
    case Op::expand:
      map = detail::broadcast_map(x.shape, m.out);
      break;
    case Op::concat: {
      const std::int64_t axis = std::get<ConcatAttrs>(m.attributes).axis;
      std::int64_t outer = 1, inner = 1;
      for (std::int64_t k = 0; k < static_cast<std::int64_t>(x.shape.size()); ++k)
        if (k < axis)
          outer *= x.shape[static_cast<std::size_t>(k)];
        else if (k > axis)
          inner *= x.shape[static_cast<std::size_t>(k)];
      std::vector<T> out;
      for (std::int64_t o = 0; o < outer; ++o)
        for (const Const* c : in) {
          const std::int64_t chunk = c->shape[static_cast<std::size_t>(axis)] * inner;
          out.insert(out.end(), (c->*field).begin() + o * chunk, (c->*field).begin() + (o + 1) * chunk);
        }
      return out;
    }
    default:
      return d;
  }
  std::vector<T> out;
  out.reserve(map.size());
  for (std::int64_t i : map) out.push_back(d[static_cast<std::size_t>(i)]);
  return out;
}
}  // namespace

Const apply(const Movement& m, const std::vector<const Const*>& inputs) {
  Const c;
  c.shape = m.out;
  c.dtype = inputs[0]->dtype;
  std::vector<const Const*> data{inputs[0]};
  if (m.op == Op::concat) data = inputs;
  if (c.is_float())
    c.f = move_data(m, data, &Const::f);
  else
    c.i = move_data(m, data, &Const::i);
  return c;
}

}  // namespace regatta::graph::onnx_detail
