// Graph::validate: the invariants of the representation (docs/graph.md, "Representation"), and the query
// for constants with an enclosure radius (docs/graph.md#enclosure-radii-of-constants).
#include <regatta/graph/graph.hpp>

#include <cmath>
#include <stdexcept>

#include <regatta/core/error.hpp>

#include "masks.hpp"
#include "shapes.hpp"

namespace regatta::graph {

void Graph::validate() const {
  const auto n = static_cast<int>(values.size());
  std::vector<bool> defined(values.size(), false);
  auto fail = [this](const std::string& what) { throw InputError(source, what); };
  auto define = [&](int id, const std::string& by) {
    if (id < 0 || id >= n) fail(by + " refers to value " + std::to_string(id) + ", out of range");
    if (defined[static_cast<std::size_t>(id)])
      fail("value " + regatta::quoted(values[static_cast<std::size_t>(id)].name) + " is defined twice");
    defined[static_cast<std::size_t>(id)] = true;
  };
  for (int id = 0; id < n; ++id) {
    const Value& v = values[static_cast<std::size_t>(id)];
    for (std::int64_t d : v.shape)
      if (d < 0) fail("value " + regatta::quoted(v.name) + " has a negative dimension");
    if (v.constant) {
      if (static_cast<std::int64_t>(v.data.size()) != element_count(v.shape))
        fail("constant " + regatta::quoted(v.name) + " does not hold " + shape_text(v.shape) + " values");
      for (double x : v.data)  // −inf is held to attention masks below
        if (std::isnan(x) || x == HUGE_VAL)
          fail("constant " + regatta::quoted(v.name) + " holds NaN or +Inf");
      if (!(v.radius >= 0) || !std::isfinite(v.radius))
        fail("constant " + regatta::quoted(v.name) + " has an enclosure radius that is not finite and >= 0");
      define(id, "constant");
    } else if (v.radius != 0) {
      fail("value " + regatta::quoted(v.name) + " is not a constant but has an enclosure radius");
    }
  }
  for (int id : inputs) define(id, "an input");
  for (const Node& node : nodes) {
    const std::string who = "node " + regatta::quoted(node.name) + " (" + node.source_op + ")";
    std::vector<Shape> shapes;
    for (int id : node.inputs) {
      if (id < 0 || id >= n || !defined[static_cast<std::size_t>(id)])
        fail(who + " reads a value that is not defined before it");
      shapes.push_back(values[static_cast<std::size_t>(id)].shape);
    }
    if (shapes.empty()) fail(who + " has no inputs");
    const auto needs_constant = [&](std::size_t i, const char* what) {
      if (node.inputs.size() <= i || !values[static_cast<std::size_t>(node.inputs[i])].constant)
        fail(who + ": the " + what + " must be a constant");
      if (values[static_cast<std::size_t>(node.inputs[i])].radius != 0)  // read as exact by every consumer
        fail(who + ": the " + what + " must be a constant without an enclosure radius");
    };
    if (node.op == Op::pow) needs_constant(1, "exponent");
    if (node.op == Op::where) needs_constant(0, "condition");
    define(node.output, who);
    const Shape& declared = values[static_cast<std::size_t>(node.output)].shape;
    try {
      if (detail::output_shape(node.op, node.attributes, shapes, declared) != declared)
        fail(who + ": output shape " + shape_text(declared) + " does not follow from its inputs");
    } catch (const std::invalid_argument& e) {
      fail(who + ": " + e.what());
    } catch (const std::bad_variant_access&) {
      fail(who + ": attributes of the wrong kind");
    }
  }
  for (int id : outputs)
    if (id < 0 || id >= n || !defined[static_cast<std::size_t>(id)]) fail("an output is not defined");
  if (outputs.empty()) fail("the graph has no outputs");
  detail::check_infinite_masks(*this);  // docs/graph.md#non-finite-constants
}

bool Graph::has_inexact_constants() const {
  for (const Value& v : values)
    if (v.constant && v.radius != 0) return true;
  return false;
}

}  // namespace regatta::graph
