// Folding of ONNX nodes whose inputs are all constants (docs/graph.md, "Folding"): shape arithmetic,
// comparisons, casts and the data-movement operators, evaluated exactly on the constants.
#include <algorithm>
#include <cmath>
#include <functional>

#include "onnx_detail.hpp"
#include "shapes.hpp"

namespace regatta::graph::onnx_detail {

namespace {

using T = onnx::TensorProto;

bool is_float_type(int t) { return t == T::FLOAT || t == T::DOUBLE; }

// Elementwise with numpy broadcasting over the integer or the floating-point field of the operands.
Const broadcast_apply(const std::vector<const Const*>& in, int out_dtype, const Where& where,
                      const std::function<double(const std::vector<double>&)>& ff,
                      const std::function<std::int64_t(const std::vector<std::int64_t>&)>& fi,
                      bool float_args) {
  Shape out = in[0]->shape;
  try {
    for (std::size_t k = 1; k < in.size(); ++k) out = detail::broadcast_shapes(out, in[k]->shape);
  } catch (const std::invalid_argument& e) {
    where.fail(e.what());
  }
  std::vector<std::vector<std::int64_t>> maps;
  for (const Const* c : in) maps.push_back(detail::broadcast_map(c->shape, out));
  Const r;
  r.shape = out;
  r.dtype = out_dtype;
  const auto n = static_cast<std::size_t>(element_count(out));
  std::vector<double> af(in.size());
  std::vector<std::int64_t> ai(in.size());
  for (std::size_t e = 0; e < n; ++e) {
    for (std::size_t k = 0; k < in.size(); ++k) {
      const auto j = static_cast<std::size_t>(maps[k][e]);
      if (in[k]->is_float())
        af[k] = in[k]->f[j], ai[k] = 0;
      else
        ai[k] = in[k]->i[j], af[k] = static_cast<double>(in[k]->i[j]);
    }
    if (is_float_type(out_dtype))
      r.f.push_back(ff(af));
    else
      r.i.push_back(float_args ? static_cast<std::int64_t>(ff(af)) : fi(ai));
  }
  return r;
}

std::int64_t checked(__int128 v, const Where& where) {
  if (v > INT64_MAX || v < INT64_MIN) where.fail("integer overflow in folded shape arithmetic");
  return static_cast<std::int64_t>(v);
}

}  // namespace

bool fold_only(const std::string& op) {
  static const char* ops[] = {"Shape", "Constant", "ConstantOfShape", "Equal", "Less", "Greater",
                              "Not",   "Range"};
  return std::any_of(std::begin(ops), std::end(ops), [&](const char* o) { return op == o; });
}

Const fold(const onnx::NodeProto& node, const std::vector<const Const*>& in, std::int64_t opset,
           const Where& where, const OnnxLimits& limits) {
  const std::string& op = node.op_type();
  if (is_movement(op)) {
    std::vector<Shape> shapes;
    for (const Const* c : in) shapes.push_back(c->shape);
    const Movement m = movement(node, shapes, in, opset, where);
    checked_count(m.out, where, limits);
    return apply(m, in);
  }
  if (op == "Cast") {
    only_attributes(node, {"to"}, where);
    const auto to = static_cast<int>(int_attribute(node, "to", 0, where));
    Const r;
    r.shape = in[0]->shape;
    r.dtype = to;
    if (to == T::FLOAT || to == T::DOUBLE) {
      if (in[0]->is_float())
        r.f = in[0]->f;
      else
        for (std::int64_t v : in[0]->i) r.f.push_back(static_cast<double>(v));
      if (to == T::FLOAT)  // the rounding to binary32 the cast specifies
        for (double& v : r.f) v = static_cast<float>(v);
      for (double v : r.f)
        if (!std::isfinite(v)) where.fail("Cast produces a non-finite constant");
    } else if (to == T::INT64 || to == T::INT32 || to == T::BOOL) {
      if (in[0]->is_float()) {
        for (double v : in[0]->f) {
          if (std::fabs(v) >= 0x1p62) where.fail("Cast of a constant out of the integer range");
          r.i.push_back(to == T::BOOL ? v != 0 : static_cast<std::int64_t>(std::trunc(v)));
        }
      } else {
        for (std::int64_t v : in[0]->i)
          r.i.push_back(to == T::BOOL ? v != 0 : to == T::INT32 ? static_cast<std::int32_t>(v) : v);
      }
    } else {
      where.fail("Cast to element type " + std::to_string(to) + " is not supported");
    }
    return r;
  }
  if (op == "ConstantOfShape") {
    only_attributes(node, {"value"}, where);
    Const r;
    r.shape = integers(*in[0], where);
    checked_count(r.shape, where, limits);
    Const value;
    value.dtype = T::FLOAT;
    value.f = {0.0};
    if (const auto* a = attribute(node, "value")) {
      if (a->type() != onnx::AttributeProto::TENSOR) where.fail("attribute 'value' is not a tensor");
      value = read_tensor(a->t(), where, limits);
      if (value.size() != 1) where.fail("ConstantOfShape value is not one element");
    }
    r.dtype = value.dtype;
    const auto n = static_cast<std::size_t>(element_count(r.shape));
    if (r.is_float())
      r.f.assign(n, value.f[0]);
    else
      r.i.assign(n, value.i[0]);
    return r;
  }
  if (op == "Range") {
    only_attributes(node, {}, where);
    if (in[0]->is_float()) where.fail("Range of floating-point constants is not supported");
    const std::int64_t start = integers(*in[0], where).at(0), limit = integers(*in[1], where).at(0),
                       delta = integers(*in[2], where).at(0);
    if (delta == 0) where.fail("Range with delta 0");
    const std::int64_t n = std::max<std::int64_t>(0, (limit - start + delta + (delta > 0 ? -1 : 1)) / delta);
    Const r;
    r.dtype = in[0]->dtype;
    r.shape = {n};
    checked_count(r.shape, where, limits);
    for (std::int64_t k = 0; k < n; ++k) r.i.push_back(start + k * delta);
    return r;
  }
  only_attributes(node, {}, where);
  const bool floats = in[0]->is_float();
  if (op == "Equal" || op == "Less" || op == "Greater") {
    const int cmp = op == "Equal" ? 0 : op == "Less" ? -1 : 1;
    auto test = [cmp](auto a, auto b) { return cmp == 0 ? a == b : cmp < 0 ? a < b : a > b; };
    return broadcast_apply(
        in, T::BOOL, where, [&](const std::vector<double>& v) { return test(v[0], v[1]) ? 1.0 : 0.0; },
        [&](const std::vector<std::int64_t>& v) -> std::int64_t { return test(v[0], v[1]); }, floats);
  }
  if (op == "Not")
    return broadcast_apply(
        in, T::BOOL, where, nullptr, [](const std::vector<std::int64_t>& v) -> std::int64_t { return !v[0]; },
        false);
  if (op == "Where") {
    Const r = broadcast_apply(
        in, in[1]->dtype, where, [](const std::vector<double>& v) { return v[0] != 0 ? v[1] : v[2]; },
        [](const std::vector<std::int64_t>& v) { return v[0] != 0 ? v[1] : v[2]; }, false);
    return r;
  }
  if (!floats && (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Neg")) {
    return broadcast_apply(
        in, in[0]->dtype, where, nullptr,
        [&](const std::vector<std::int64_t>& v) -> std::int64_t {
          const __int128 a = v[0], b = v.size() > 1 ? v[1] : 0;
          if (op == "Add") return checked(a + b, where);
          if (op == "Sub") return checked(a - b, where);
          if (op == "Mul") return checked(a * b, where);
          if (op == "Neg") return checked(-a, where);
          if (b == 0) where.fail("integer division by zero in folded shape arithmetic");
          return checked(a / b, where);  // truncation, as integer Div of ONNX (C semantics)
        },
        false);
  }
  where.fail("cannot fold this operator");
}

}  // namespace regatta::graph::onnx_detail
