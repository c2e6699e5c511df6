// TensorProto and attribute readers of the ONNX importer (docs/graph.md, "ONNX import").
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include <regatta/core/error.hpp>

#include "onnx_detail.hpp"

namespace regatta::graph::onnx_detail {

static_assert(std::endian::native == std::endian::little, "ONNX raw_data is little-endian");

void Where::fail(const std::string& problem) const {
  std::string subject = source;
  if (!op.empty()) subject += ": node " + regatta::quoted(node) + " (" + op + ")";
  throw InputError(subject, problem);
}

std::int64_t checked_count(const Shape& shape, const Where& where, const OnnxLimits& limits) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) where.fail("negative dimension in " + shape_text(shape));
    if (d != 0 && n > limits.max_tensor_elements / d)
      where.fail("tensor of shape " + shape_text(shape) + " exceeds the limit of " +
                 std::to_string(limits.max_tensor_elements) + " elements");
    n *= d;
  }
  if (n > limits.max_tensor_elements)
    where.fail("tensor of shape " + shape_text(shape) + " exceeds the limit of " +
               std::to_string(limits.max_tensor_elements) + " elements");
  return n;
}

namespace {
template <class T>
std::vector<T> raw_values(const std::string& raw, std::int64_t n, const std::string& name,
                          const Where& where) {
  if (raw.size() != static_cast<std::size_t>(n) * sizeof(T))
    where.fail("tensor " + regatta::quoted(name) + " holds " + std::to_string(raw.size()) +
               " bytes of raw data, its shape needs " +
               std::to_string(static_cast<std::size_t>(n) * sizeof(T)));
  std::vector<T> v(static_cast<std::size_t>(n));
  if (n > 0) std::memcpy(v.data(), raw.data(), raw.size());
  return v;
}
template <class Field>
void need_count(const Field& field, std::int64_t n, const std::string& name, const Where& where) {
  if (field.size() != n)
    where.fail("tensor " + regatta::quoted(name) + " holds " + std::to_string(field.size()) +
               " values, its shape needs " + std::to_string(n));
}
}  // namespace

Const read_tensor(const onnx::TensorProto& t, const Where& where, const OnnxLimits& limits) {
  const std::string& name = t.name();
  if (t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0)
    where.fail("tensor " + regatta::quoted(name) +
               " uses external data (not supported: save the model as one file)");
  if (t.has_segment()) where.fail("tensor " + regatta::quoted(name) + " is segmented (not supported)");
  Const c;
  c.dtype = t.data_type();
  c.shape.assign(t.dims().begin(), t.dims().end());
  const std::int64_t n = checked_count(c.shape, where, limits);
  const bool raw = t.has_raw_data();
  switch (c.dtype) {
    case onnx::TensorProto::FLOAT:
      if (raw) {
        for (float v : raw_values<float>(t.raw_data(), n, name, where)) c.f.push_back(v);
      } else {
        need_count(t.float_data(), n, name, where);
        c.f.assign(t.float_data().begin(), t.float_data().end());
      }
      break;
    case onnx::TensorProto::DOUBLE:
      if (raw)
        c.f = raw_values<double>(t.raw_data(), n, name, where);
      else {
        need_count(t.double_data(), n, name, where);
        c.f.assign(t.double_data().begin(), t.double_data().end());
      }
      break;
    case onnx::TensorProto::INT64:
      if (raw)
        c.i = raw_values<std::int64_t>(t.raw_data(), n, name, where);
      else {
        need_count(t.int64_data(), n, name, where);
        c.i.assign(t.int64_data().begin(), t.int64_data().end());
      }
      break;
    case onnx::TensorProto::INT32:
      if (raw) {
        for (std::int32_t v : raw_values<std::int32_t>(t.raw_data(), n, name, where)) c.i.push_back(v);
      } else {
        need_count(t.int32_data(), n, name, where);
        c.i.assign(t.int32_data().begin(), t.int32_data().end());
      }
      break;
    case onnx::TensorProto::BOOL:
      if (raw) {
        for (std::uint8_t v : raw_values<std::uint8_t>(t.raw_data(), n, name, where)) c.i.push_back(v != 0);
      } else {
        need_count(t.int32_data(), n, name, where);
        for (std::int32_t v : t.int32_data()) c.i.push_back(v != 0);
      }
      break;
    default:
      where.fail("tensor " + regatta::quoted(name) + " has element type " +
                 onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(c.dtype)) +
                 " (supported: FLOAT, DOUBLE, INT64, INT32, BOOL)");
  }
  // −inf passes here and is held to attention masks by Graph::validate (masks.cpp).
  for (double v : c.f)
    if (std::isnan(v) || v == std::numeric_limits<double>::infinity())
      where.fail("tensor " + regatta::quoted(name) + " holds NaN or +Inf (refused)");
  return c;
}

const onnx::AttributeProto* attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

std::int64_t int_attribute(const onnx::NodeProto& node, const std::string& name, std::int64_t fallback,
                           const Where& where) {
  const auto* a = attribute(node, name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::INT)
    where.fail("attribute " + regatta::quoted(name) + " is not an integer");
  return a->i();
}

double float_attribute(const onnx::NodeProto& node, const std::string& name, double fallback,
                       const Where& where) {
  const auto* a = attribute(node, name);
  if (!a) return fallback;
  if (a->type() != onnx::AttributeProto::FLOAT)
    where.fail("attribute " + regatta::quoted(name) + " is not a float");
  if (!std::isfinite(a->f())) where.fail("attribute " + regatta::quoted(name) + " is not finite");
  return a->f();  // binary32 → binary64, exact
}

std::vector<std::int64_t> ints_attribute(const onnx::NodeProto& node, const std::string& name,
                                         const Where& where) {
  const auto* a = attribute(node, name);
  if (!a) return {};
  if (a->type() != onnx::AttributeProto::INTS)
    where.fail("attribute " + regatta::quoted(name) + " is not a list of integers");
  return {a->ints().begin(), a->ints().end()};
}

void only_attributes(const onnx::NodeProto& node, std::initializer_list<const char*> known,
                     const Where& where) {
  for (const auto& a : node.attribute()) {
    bool ok = false;
    for (const char* k : known) ok = ok || a.name() == k;
    if (!ok) where.fail("attribute " + regatta::quoted(a.name()) + " is not supported");
  }
}

std::int64_t normal_axis(std::int64_t axis, std::int64_t rank, const Where& where) {
  if (axis < -rank || axis >= rank)
    where.fail("axis " + std::to_string(axis) + " out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<std::int64_t> integers(const Const& c, const Where& where) {
  if (!c.is_float()) return c.i;
  std::vector<std::int64_t> v;
  for (double x : c.f) {
    if (x != std::floor(x) || std::fabs(x) > 0x1p62)
      where.fail("expected integers, found " + std::to_string(x));
    v.push_back(static_cast<std::int64_t>(x));
  }
  return v;
}

}  // namespace regatta::graph::onnx_detail
