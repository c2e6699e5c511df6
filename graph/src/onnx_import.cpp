// The ONNX importer: file and protobuf checks, then the translation of the nodes into a Graph, folding
// what acts on constants (docs/graph.md, "ONNX import").
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include <google/protobuf/stubs/logging.h>
#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <regatta/core/error.hpp>
#include <regatta/core/io/file_bytes.hpp>
#include <regatta/graph/fuse.hpp>

#include "onnx_detail.hpp"
#include "onnx_nodes.hpp"
#include "shapes.hpp"

namespace regatta::graph {

using namespace onnx_detail;

namespace {

std::string first_line(std::string text) {
  const auto nl = text.find('\n');
  if (nl != std::string::npos) text.resize(nl);
  return text;
}

// Sorts the nodes topologically (Kahn); refuses cycles and inputs that nothing defines.
std::vector<int> topological_order(const onnx::GraphProto& g, const std::set<std::string>& defined_outside,
                                   const Where& file) {
  std::unordered_map<std::string, int> producer;
  for (int k = 0; k < g.node_size(); ++k)
    for (const auto& out : g.node(k).output())
      if (!out.empty()) {
        if (defined_outside.count(out) || !producer.emplace(out, k).second)
          file.fail("tensor " + regatta::quoted(out) + " is defined twice");
      }
  std::vector<int> pending(static_cast<std::size_t>(g.node_size()), 0);
  std::vector<std::vector<int>> users(static_cast<std::size_t>(g.node_size()));
  for (int k = 0; k < g.node_size(); ++k)
    for (const auto& in : g.node(k).input()) {
      if (in.empty() || defined_outside.count(in)) continue;
      const auto p = producer.find(in);
      if (p == producer.end())
        file.fail("node " + regatta::quoted(g.node(k).name()) + " (" + g.node(k).op_type() + ") reads " +
                  regatta::quoted(in) + ", which nothing defines");
      ++pending[static_cast<std::size_t>(k)];
      users[static_cast<std::size_t>(p->second)].push_back(k);
    }
  std::vector<int> order, ready;
  for (int k = g.node_size(); k-- > 0;)
    if (pending[static_cast<std::size_t>(k)] == 0) ready.push_back(k);
  while (!ready.empty()) {
    const int k = ready.back();
    ready.pop_back();
    order.push_back(k);
    for (int u : users[static_cast<std::size_t>(k)])
      if (--pending[static_cast<std::size_t>(u)] == 0) ready.push_back(u);
  }
  if (order.size() != static_cast<std::size_t>(g.node_size())) file.fail("the graph has a cycle");
  return order;
}

// Static shapes that ONNX shape inference found, by tensor name (symbolic or unknown dimensions left out).
std::map<std::string, Shape> inferred_shapes(const onnx::GraphProto& g) {
  std::map<std::string, Shape> shapes;
  auto add = [&](const onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return;
    Shape s;
    for (const auto& d : v.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value()) return;
      s.push_back(d.dim_value());
    }
    shapes[v.name()] = s;
  };
  for (const auto& v : g.value_info()) add(v);
  for (const auto& v : g.output()) add(v);
  return shapes;
}

// Binds a leading symbolic batch dimension to 1 (docs/graph.md, "ONNX import"): exporters write the batch
// axis of inputs as a parameter ("batch_size"); regatta evaluates one sample. Only the FIRST dimension of a
// runtime input may be symbolic; the same parameter is replaced by 1 wherever it appears (outputs,
// value_info) so that shape inference sees one consistent size. Any other symbolic dimension stays and is
// refused later.
void bind_batch_dimension(onnx::GraphProto& g) {
  std::set<std::string> initializers, batch_names;
  for (const auto& t : g.initializer()) initializers.insert(t.name());
  for (auto& in : *g.mutable_input()) {
    if (initializers.count(in.name()) || !in.type().has_tensor_type() || !in.type().tensor_type().has_shape())
      continue;
    auto* shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
    if (shape->dim_size() < 2) continue;  // a vector's only axis is data, not a batch
    auto* d = shape->mutable_dim(0);
    if (d->has_dim_value()) continue;
    if (d->has_dim_param() && !d->dim_param().empty()) batch_names.insert(d->dim_param());
    d->set_dim_value(1);
  }
  auto bind = [&](onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return;
    for (auto& d : *v.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim())
      if (d.has_dim_param() && batch_names.count(d.dim_param())) d.set_dim_value(1);
  };
  for (auto& v : *g.mutable_output()) bind(v);
  for (auto& v : *g.mutable_value_info()) bind(v);
}

}  // namespace

Graph import_onnx_bytes(std::span<const std::byte> bytes, const std::string& source,
                        const OnnxLimits& limits) {
  const Where file{source, "", ""};
  if (bytes.size() > limits.max_file_bytes)
    file.fail("the model has " + std::to_string(bytes.size()) + " bytes, over the limit of " +
              std::to_string(limits.max_file_bytes));
  onnx::ModelProto model;
  {
    google::protobuf::LogSilencer quiet;  // protobuf would print its own diagnostics on stderr
    if (bytes.empty() || !model.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
      file.fail("not a valid ONNX model (the protobuf does not parse)");
  }
  const onnx::GraphProto& g0 = model.graph();
  if (static_cast<std::size_t>(g0.node_size()) > limits.max_nodes)
    file.fail("the graph has " + std::to_string(g0.node_size()) + " nodes, over the limit of " +
              std::to_string(limits.max_nodes));
  std::int64_t opset = -1;
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  if (opset < min_onnx_opset || opset > max_onnx_opset)
    file.fail("opset " + std::to_string(opset) + " of the default domain is not supported (supported: " +
              std::to_string(min_onnx_opset) + " to " + std::to_string(max_onnx_opset) + ")");
  for (const auto& t : g0.initializer())
    if (t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0)
      file.fail("initializer " + regatta::quoted(t.name()) +
                " uses external data (not supported: save the model as one file)");
  // Every operator outside the supported set, in one message.
  std::vector<std::string> unsupported;
  for (const auto& n : g0.node())
    if (!supported_operator(n)) {
      const std::string what = (n.domain().empty() ? "" : n.domain() + ".") + n.op_type() + " (node " +
                               regatta::quoted(n.name()) + ")";
      if (std::find(unsupported.begin(), unsupported.end(), what) == unsupported.end())
        unsupported.push_back(what);
    }
  if (!unsupported.empty()) {
    std::string list;
    for (std::size_t k = 0; k < unsupported.size() && k < 8; ++k) list += (k ? ", " : "") + unsupported[k];
    if (unsupported.size() > 8) list += " and " + std::to_string(unsupported.size() - 8) + " more";
    file.fail("unsupported operator" + std::string(unsupported.size() > 1 ? "s " : " ") + list);
  }
  {
    // Dangling inputs and cycles first, in the importer's words (the checker reports them as sort errors).
    std::set<std::string> outside;
    for (const auto& t : g0.initializer()) outside.insert(t.name());
    for (const auto& in : g0.input()) outside.insert(in.name());
    topological_order(g0, outside, file);
  }
  bind_batch_dimension(*model.mutable_graph());
  try {
    onnx::checker::check_model(model);
    onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(true, 1, false));
  } catch (const std::exception& e) {
    file.fail("ONNX checker: " + first_line(e.what()));
  }
  const onnx::GraphProto& g = model.graph();

  std::set<std::string> used;
  for (const auto& n : g.node())
    for (const auto& in : n.input()) used.insert(in);
  for (const auto& out : g.output()) used.insert(out.name());
  Builder b(source, opset, limits, inferred_shapes(g), used);
  std::set<std::string> outside;
  for (const auto& t : g.initializer()) {
    outside.insert(t.name());
    b.add_constant(t.name(), read_tensor(t, file, limits));
  }
  for (const auto& in : g.input()) {
    if (outside.count(in.name())) continue;  // an initializer listed as an input (IR < 4): a constant
    outside.insert(in.name());
    b.add_input(in);
  }
  for (int k : topological_order(g, outside, file)) b.add_node(g.node(k));
  for (const auto& out : g.output()) b.add_output(out.name());
  Graph graph = b.finish();
  graph.validate();
  fuse(graph);  // LayerNorm/GELU rewritten, attention recorded (docs/graph.md#fusion); validates again
  return graph;
}

Graph import_onnx(const std::filesystem::path& path, const OnnxLimits& limits) {
  const std::vector<std::byte> bytes = io::read_file_bytes(path, limits.max_file_bytes);
  return import_onnx_bytes(bytes, path.string(), limits);
}

}  // namespace regatta::graph
