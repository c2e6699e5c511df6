// Node-by-node translation of an ONNX graph: folding of constant subgraphs and typed runtime nodes
// (docs/graph.md, "ONNX import" and "Node kinds").
#include "onnx_nodes.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <regatta/core/error.hpp>

#include "shapes.hpp"

namespace regatta::graph::onnx_detail {

namespace {

const char* const runtime_ops[] = {"Conv",
                                   "MatMul",
                                   "Gemm",
                                   "Add",
                                   "Sub",
                                   "Mul",
                                   "Div",
                                   "Neg",
                                   "Pow",
                                   "Sqrt",
                                   "Reciprocal",
                                   "Softmax",
                                   "LayerNormalization",
                                   "ReduceMean",
                                   "BatchNormalization",
                                   "Relu",
                                   "Gelu",
                                   "Erf",
                                   "Tanh",
                                   "Sigmoid",
                                   "Where",
                                   "Cast"};

bool one_of(const std::string& op, std::initializer_list<const char*> ops) {
  return std::any_of(ops.begin(), ops.end(), [&](const char* o) { return op == o; });
}

const Const absent_input{};  // dtype 0: an omitted optional input

}  // namespace

bool supported_operator(const onnx::NodeProto& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return false;
  const std::string& op = node.op_type();
  return is_movement(op) || fold_only(op) || op == "Split" ||
         std::any_of(std::begin(runtime_ops), std::end(runtime_ops), [&](const char* o) { return op == o; });
}

Builder::Builder(std::string source, std::int64_t opset, const OnnxLimits& limits,
                 std::map<std::string, Shape> inferred, std::set<std::string> used)
    : source_(std::move(source)),
      opset_(opset),
      limits_(limits),
      inferred_(std::move(inferred)),
      used_(std::move(used)) {
  g_.source = source_;
  g_.opset = opset;
}

void Builder::define(const std::string& name, Entry e, const Where& where) {
  total_elements_ += element_count(e.shape);
  if (total_elements_ > limits_.max_total_elements)
    where.fail("the model's tensors exceed the limit of " + std::to_string(limits_.max_total_elements) +
               " elements");
  const auto it = inferred_.find(name);
  if (it != inferred_.end() && it->second != e.shape)
    where.fail("tensor " + regatta::quoted(name) + ": ONNX shape inference gives " + shape_text(it->second) +
               ", the importer computes " + shape_text(e.shape));
  if (!entries_.emplace(name, std::move(e)).second)
    where.fail("tensor " + regatta::quoted(name) + " is defined twice");
}

void Builder::add_constant(const std::string& name, Const c) {
  Entry e;
  e.shape = c.shape;
  e.constant = std::move(c);
  define(name, std::move(e), Where{source_, "", ""});
}

void Builder::add_input(const onnx::ValueInfoProto& input) {
  const Where where{source_, "", ""};
  const auto& type = input.type();
  if (!type.has_tensor_type()) where.fail("input " + regatta::quoted(input.name()) + " is not a tensor");
  const int elem = type.tensor_type().elem_type();
  if (elem != onnx::TensorProto::FLOAT && elem != onnx::TensorProto::DOUBLE)
    where.fail("input " + regatta::quoted(input.name()) + " is not of element type FLOAT or DOUBLE");
  if (!type.tensor_type().has_shape()) where.fail("input " + regatta::quoted(input.name()) + " has no shape");
  Shape shape;
  for (const auto& d : type.tensor_type().shape().dim()) {
    if (!d.has_dim_value() || d.dim_value() <= 0)
      where.fail("input " + regatta::quoted(input.name()) + " has a symbolic or empty dimension" +
                 (d.has_dim_param() ? " " + regatta::quoted(d.dim_param()) : std::string()) +
                 " (export with static shapes)");
    shape.push_back(d.dim_value());
  }
  checked_count(shape, where, limits_);
  const int id = new_value(input.name(), shape, where);
  g_.inputs.push_back(id);
  define(input.name(), Entry{shape, std::nullopt, id}, where);
}

int Builder::new_value(const std::string& name, const Shape& shape, const Where&) {
  g_.values.push_back(Value{name, shape, false, {}});
  return static_cast<int>(g_.values.size()) - 1;
}

int Builder::materialise(const std::string& name, const Where& where) {
  Entry& e = entries_.at(name);
  if (e.value >= 0) return e.value;
  const Const& c = *e.constant;
  Value v{name, c.shape, true, c.f};
  if (!c.is_float())
    for (std::int64_t x : c.i) {
      if (x > (std::int64_t{1} << 53) || x < -(std::int64_t{1} << 53))
        where.fail("integer constant " + regatta::quoted(name) + " is not exact in binary64");
      v.data.push_back(static_cast<double>(x));
    }
  g_.values.push_back(std::move(v));
  e.value = static_cast<int>(g_.values.size()) - 1;
  return e.value;
}

void Builder::unused_outputs(const onnx::NodeProto& node, const Where& where) const {
  for (int k = 1; k < node.output_size(); ++k)
    if (!node.output(k).empty() && used_.count(node.output(k)))
      where.fail("output " + std::to_string(k) + " (" + regatta::quoted(node.output(k)) +
                 ") is used; only the first output is supported");
}

void Builder::add_node(const onnx::NodeProto& node) {
  const Where where{source_, node.name(), node.op_type()};
  const std::string& op = node.op_type();
  if (node.output_size() < 1 || node.output(0).empty()) where.fail("the node has no output");
  if (op != "Split") unused_outputs(node, where);
  if (op == "Constant") {
    only_attributes(node, {"value", "value_float", "value_floats", "value_int", "value_ints"}, where);
    if (node.attribute_size() != 1) where.fail("Constant needs exactly one value attribute");
    const auto& a = node.attribute(0);
    Const c;
    if (a.name() == "value")
      c = read_tensor(a.t(), where, limits_);
    else if (a.name() == "value_float")
      c = Const{{}, onnx::TensorProto::FLOAT, {a.f()}, {}};
    else if (a.name() == "value_floats")
      c = Const{{a.floats_size()}, onnx::TensorProto::FLOAT, {a.floats().begin(), a.floats().end()}, {}};
    else if (a.name() == "value_int")
      c = Const{{}, onnx::TensorProto::INT64, {}, {a.i()}};
    else
      c = Const{{a.ints_size()}, onnx::TensorProto::INT64, {}, {a.ints().begin(), a.ints().end()}};
    for (double v : c.f)  // −inf is held to attention masks by Graph::validate (masks.cpp)
      if (std::isnan(v) || v == std::numeric_limits<double>::infinity())
        where.fail("the constant holds NaN or +Inf (refused)");
    ++folded_[op];
    define(node.output(0), Entry{c.shape, c, -1}, where);
    return;
  }
  std::vector<const Entry*> in;
  for (const auto& name : node.input()) in.push_back(name.empty() ? nullptr : &entries_.at(name));
  if (in.empty() || !in[0]) where.fail("the first input is missing");
  if (op == "Shape") {
    only_attributes(node, {"start", "end"}, where);
    const auto rank = static_cast<std::int64_t>(in[0]->shape.size());
    auto clampit = [rank](std::int64_t a) { return std::clamp<std::int64_t>(a < 0 ? a + rank : a, 0, rank); };
    const std::int64_t start = clampit(int_attribute(node, "start", 0, where)),
                       end = clampit(int_attribute(node, "end", rank, where));
    Const c{{std::max<std::int64_t>(0, end - start)}, onnx::TensorProto::INT64, {}, {}};
    for (std::int64_t k = start; k < end; ++k) c.i.push_back(in[0]->shape[static_cast<std::size_t>(k)]);
    ++folded_[op];
    define(node.output(0), Entry{c.shape, c, -1}, where);
    return;
  }
  if (op == "Split") return split_node(node, in, where);
  const bool all_constant =
      std::all_of(in.begin(), in.end(), [](const Entry* e) { return !e || e->constant; });
  const bool integer = in[0]->constant && !in[0]->constant->is_float();
  const bool foldable = is_movement(op) || fold_only(op) || op == "Cast" || op == "Where" ||
                        (integer && one_of(op, {"Add", "Sub", "Mul", "Div", "Neg"}));
  if (all_constant && foldable) return fold_node(node, in, where);
  if (fold_only(op)) where.fail("needs constant inputs (an input is computed at run time)");
  runtime_node(node, in, where);
}

void Builder::split_node(const onnx::NodeProto& node, const std::vector<const Entry*>& in,
                         const Where& where) {
  // Split is one Slice per output along the axis (folded when the input is a constant).
  only_attributes(node, {"axis", "split"}, where);
  const Shape& x = in[0]->shape;
  const std::int64_t axis =
      normal_axis(int_attribute(node, "axis", 0, where), static_cast<std::int64_t>(x.size()), where);
  std::vector<std::int64_t> sizes = ints_attribute(node, "split", where);
  if (opset_ >= 13 && in.size() > 1 && in[1]) {
    if (!in[1]->constant) where.fail("the split sizes must be a constant");
    sizes = integers(*in[1]->constant, where);
  }
  const auto parts = static_cast<std::int64_t>(node.output_size());
  const std::int64_t dim = x[static_cast<std::size_t>(axis)];
  if (sizes.empty()) {
    if (dim % parts != 0) where.fail("Split into unequal parts without sizes");
    sizes.assign(static_cast<std::size_t>(parts), dim / parts);
  }
  std::int64_t total = 0;
  for (std::int64_t s : sizes) {
    if (s < 0) where.fail("negative split size");
    total += s;
  }
  if (static_cast<std::int64_t>(sizes.size()) != parts || total != dim)
    where.fail("split sizes do not add up to the axis length");
  std::int64_t offset = 0;
  for (int k = 0; k < node.output_size(); ++k) {
    const std::int64_t size = sizes[static_cast<std::size_t>(k)];
    SliceAttrs a{std::vector<std::int64_t>(x.size(), 0), std::vector<std::int64_t>(x.size(), 1)};
    a.starts[static_cast<std::size_t>(axis)] = size > 0 ? offset : 0;
    Shape out = x;
    out[static_cast<std::size_t>(axis)] = size;
    offset += size;
    const std::string& name = node.output(k);
    if (name.empty()) continue;
    if (in[0]->constant) {
      const Const* c = &*in[0]->constant;
      Const r = apply(Movement{Op::slice, a, out}, {c});
      define(name, Entry{out, std::move(r), -1}, where);
      continue;
    }
    Node n{Op::slice, node.name(), "Split", {in[0]->value}, -1, a};
    n.output = new_value(name, out, where);
    g_.nodes.push_back(std::move(n));
    define(name, Entry{out, std::nullopt, g_.nodes.back().output}, where);
  }
  if (in[0]->constant) ++folded_["Split"];
}

void Builder::fold_node(const onnx::NodeProto& node, const std::vector<const Entry*>& in,
                        const Where& where) {
  std::vector<const Const*> consts;
  for (const Entry* e : in) consts.push_back(e ? &*e->constant : &absent_input);
  Const c = fold(node, consts, opset_, where, limits_);
  ++folded_[node.op_type()];
  define(node.output(0), Entry{c.shape, std::move(c), -1}, where);
}

void Builder::runtime_node(const onnx::NodeProto& node, const std::vector<const Entry*>& in,
                           const Where& where) {
  const std::string& op = node.op_type();
  Node n{Op::identity, node.name(), op, {}, -1, {}};
  std::vector<std::size_t> data;  // the inputs that become node inputs, in order
  Shape target;                   // for reshape and expand
  std::vector<Shape> shapes;
  std::vector<const Const*> consts;
  for (const Entry* e : in) {
    shapes.push_back(e ? e->shape : Shape{});
    consts.push_back(!e ? &absent_input : e->constant ? &*e->constant : nullptr);
  }
  auto all_inputs = [&] {
    for (std::size_t k = 0; k < in.size(); ++k)
      if (in[k]) data.push_back(k);
  };
  if (is_movement(op)) {
    const Movement m = movement(node, shapes, consts, opset_, where);
    n.op = m.op;
    n.attributes = m.attributes;
    target = m.out;
    if (m.op == Op::concat)
      all_inputs();
    else
      data.push_back(0);
  } else if (op == "Cast") {
    only_attributes(node, {"to"}, where);
    const auto to = int_attribute(node, "to", 0, where);
    if (to != onnx::TensorProto::FLOAT && to != onnx::TensorProto::DOUBLE)
      where.fail("Cast of a runtime tensor to a type other than FLOAT or DOUBLE");
    data.push_back(0);  // evaluated exactly in the scalar type (docs/graph.md)
  } else if (op == "Conv") {
    only_attributes(node, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}, where);
    if (const auto* a = attribute(node, "auto_pad"); a && a->s() != "NOTSET" && a->s() != "VALID")
      where.fail("auto_pad " + regatta::quoted(a->s()) + " is not supported (NOTSET, VALID)");
    if (int_attribute(node, "group", 1, where) != 1) where.fail("grouped convolution is not supported");
    ConvAttrs a;
    auto two = [&](const char* name, std::array<std::int64_t, 2>& dst) {
      const auto v = ints_attribute(node, name, where);
      if (v.empty()) return;
      if (v.size() != 2)
        where.fail(std::string("attribute '") + name + "' must have 2 entries (2-D convolution)");
      dst = {v[0], v[1]};
    };
    two("strides", a.strides);
    two("dilations", a.dilations);
    if (const auto p = ints_attribute(node, "pads", where); !p.empty()) {
      if (p.size() != 4) where.fail("attribute 'pads' must have 4 entries");
      a.pads = {p[0], p[1], p[2], p[3]};
    }
    if (const auto k = ints_attribute(node, "kernel_shape", where);
        !k.empty() && (in[1]->shape.size() != 4 || k != Shape{in[1]->shape[2], in[1]->shape[3]}))
      where.fail("kernel_shape does not match the weights");
    n.op = Op::conv;
    n.attributes = a;
    all_inputs();
  } else if (op == "Gemm") {
    only_attributes(node, {"alpha", "beta", "transA", "transB"}, where);
    n.op = Op::gemm;
    n.attributes =
        GemmAttrs{float_attribute(node, "alpha", 1, where), float_attribute(node, "beta", 1, where),
                  int_attribute(node, "transA", 0, where) != 0, int_attribute(node, "transB", 0, where) != 0};
    all_inputs();
  } else if (op == "Softmax") {
    only_attributes(node, {"axis"}, where);
    const auto rank = static_cast<std::int64_t>(shapes[0].size());
    const std::int64_t axis =
        normal_axis(int_attribute(node, "axis", opset_ < 13 ? 1 : -1, where), rank, where);
    n.op = Op::softmax;
    n.attributes = SoftmaxAttrs{axis, opset_ < 13 ? rank : axis + 1};
    data.push_back(0);
  } else if (op == "LayerNormalization") {
    only_attributes(node, {"axis", "epsilon", "stash_type"}, where);
    const auto rank = static_cast<std::int64_t>(shapes[0].size());
    n.op = Op::layer_norm;
    n.attributes = LayerNormAttrs{normal_axis(int_attribute(node, "axis", -1, where), rank, where),
                                  float_attribute(node, "epsilon", 1e-5, where)};
    all_inputs();
  } else if (op == "ReduceMean") {
    only_attributes(node, {"axes", "keepdims"}, where);
    const auto rank = static_cast<std::int64_t>(shapes[0].size());
    ReduceMeanAttrs a;
    for (std::int64_t ax : ints_attribute(node, "axes", where))
      a.axes.push_back(normal_axis(ax, rank, where));
    if (a.axes.empty())
      for (std::int64_t k = 0; k < rank; ++k) a.axes.push_back(k);
    std::sort(a.axes.begin(), a.axes.end());
    if (std::adjacent_find(a.axes.begin(), a.axes.end()) != a.axes.end())
      where.fail("ReduceMean axes repeat");
    a.keepdims = int_attribute(node, "keepdims", 1, where) != 0;
    n.op = Op::reduce_mean;
    n.attributes = a;
    data.push_back(0);
  } else if (op == "BatchNormalization") {
    only_attributes(node, {"epsilon", "momentum", "spatial", "training_mode"}, where);
    if (int_attribute(node, "spatial", 1, where) != 1)
      where.fail("BatchNormalization with spatial = 0 is not supported");
    if (int_attribute(node, "training_mode", 0, where) != 0)
      where.fail("BatchNormalization in training mode is not supported");
    n.op = Op::batch_norm;
    n.attributes = BatchNormAttrs{float_attribute(node, "epsilon", 1e-5, where)};
    all_inputs();
  } else if (op == "Gelu") {
    only_attributes(node, {"approximate"}, where);
    const auto* a = attribute(node, "approximate");
    if (a && a->s() != "none" && a->s() != "tanh")
      where.fail("Gelu approximate " + regatta::quoted(a->s()) + " is not supported");
    n.op = Op::gelu;
    n.attributes = GeluAttrs{a && a->s() == "tanh"};
    data.push_back(0);
  } else {
    only_attributes(node, {}, where);
    static const std::pair<const char*, Op> simple[] = {
        {"MatMul", Op::matmul}, {"Add", Op::add},
        {"Sub", Op::sub},       {"Mul", Op::mul},
        {"Div", Op::div},       {"Pow", Op::pow},
        {"Where", Op::where},   {"Neg", Op::neg},
        {"Sqrt", Op::sqrt},     {"Reciprocal", Op::reciprocal},
        {"Relu", Op::relu},     {"Erf", Op::erf},
        {"Tanh", Op::tanh},     {"Sigmoid", Op::sigmoid}};
    const auto it =
        std::find_if(std::begin(simple), std::end(simple), [&](const auto& s) { return op == s.first; });
    if (it == std::end(simple)) where.fail("operator not supported");
    n.op = it->second;
    if (n.op == Op::pow && !in[1]->constant) where.fail("the exponent must be a constant");
    if (n.op == Op::where && !in[0]->constant) where.fail("the condition must be a constant");
    all_inputs();
  }
  std::vector<Shape> data_shapes;
  for (std::size_t k : data) {
    n.inputs.push_back(in[k]->constant ? materialise(node.input(static_cast<int>(k)), where) : in[k]->value);
    data_shapes.push_back(in[k]->shape);
  }
  Shape out;
  try {
    out = detail::output_shape(n.op, n.attributes, data_shapes, target);
  } catch (const std::invalid_argument& e) {
    where.fail(e.what());
  }
  checked_count(out, where, limits_);
  n.output = new_value(node.output(0), out, where);
  g_.nodes.push_back(std::move(n));
  define(node.output(0), Entry{out, std::nullopt, g_.nodes.back().output}, where);
}

void Builder::add_output(const std::string& name) {
  const Where where{source_, "", ""};
  const auto it = entries_.find(name);
  if (it == entries_.end()) where.fail("output " + regatta::quoted(name) + " is not defined");
  if (it->second.constant)
    where.fail("output " + regatta::quoted(name) + " is a constant (it does not depend on the inputs)");
  g_.outputs.push_back(it->second.value);
}

Graph Builder::finish() {
  const Where where{source_, "", ""};
  // Live values: those the outputs depend on.
  std::vector<bool> live(g_.values.size(), false);
  for (int id : g_.outputs) live[static_cast<std::size_t>(id)] = true;
  std::vector<bool> keep(g_.nodes.size(), false);
  for (std::size_t k = g_.nodes.size(); k-- > 0;)
    if (live[static_cast<std::size_t>(g_.nodes[k].output)]) {
      keep[k] = true;
      for (int id : g_.nodes[k].inputs) live[static_cast<std::size_t>(id)] = true;
    }
  for (int id : g_.inputs)
    if (!live[static_cast<std::size_t>(id)])
      where.fail("input " + regatta::quoted(g_.values[static_cast<std::size_t>(id)].name) +
                 " is not used by any output");
  // Compaction: live values renumbered in order.
  std::vector<int> renumber(g_.values.size(), -1);
  Graph out;
  out.source = g_.source;
  out.opset = g_.opset;
  for (std::size_t i = 0; i < g_.values.size(); ++i)
    if (live[i]) {
      renumber[i] = static_cast<int>(out.values.size());
      out.values.push_back(std::move(g_.values[i]));
    }
  for (std::size_t k = 0; k < g_.nodes.size(); ++k)
    if (keep[k]) {
      Node n = std::move(g_.nodes[k]);
      for (int& id : n.inputs) id = renumber[static_cast<std::size_t>(id)];
      n.output = renumber[static_cast<std::size_t>(n.output)];
      out.nodes.push_back(std::move(n));
    }
  for (int id : g_.inputs) out.inputs.push_back(renumber[static_cast<std::size_t>(id)]);
  for (int id : g_.outputs) out.outputs.push_back(renumber[static_cast<std::size_t>(id)]);
  for (const auto& [op, count] : folded_) out.folded.emplace_back(op, count);
  return out;
}

}  // namespace regatta::graph::onnx_detail
