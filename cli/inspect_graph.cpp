// regatta inspect M.onnx: inputs, outputs, node kinds, what was folded, what the fusion pass rewrote and the
// attention layers it found, whether the graph is a recognised transformer, every node with its shapes
// (docs/graph.md, "Inspecting a model").
#include "inspect_graph.hpp"

#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <utility>

#include <regatta/core/error.hpp>
#include <regatta/graph/graph.hpp>
#include <regatta/operators/graph_rotary.hpp>
#include <regatta/operators/graph_transformer.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_graph.hpp>
#ifdef REGATTA_HAVE_ONNX
#include <regatta/graph/onnx_import.hpp>
#endif

namespace regatta::cli {

bool is_onnx_path(const std::string& path) {
  return path.size() >= 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
}

namespace {

/// The θ of a rotary attention layer's tables (operators::rotary_of), or the reason none is read.
std::pair<std::optional<double>, std::string> rotary_theta(const graph::AttentionPattern& p) {
  std::string why;
  const auto r = operators::rotary_of(p, &why);
  return {r ? std::optional<double>(r->theta) : std::nullopt, why};
}

/// The graph view: inputs, outputs, nodes by kind, folding, fusion, attention layers, every node. `origin`
/// says where the graph came from ("ONNX opset 17, after folding", "safetensors layout gpt2").
nlohmann::json describe(const graph::Graph& g, const std::string& path, const std::string& origin,
                        bool json) {
  using graph::shape_text;
  nlohmann::json out{{"file", path},
                     {"inputs", nlohmann::json::array()},
                     {"outputs", nlohmann::json::array()},
                     {"nodes", nlohmann::json::array()}};
  std::map<std::string, int> by_kind;
  std::int64_t constants = 0, weights = 0;
  for (const auto& v : g.values)
    if (v.constant) ++constants, weights += graph::element_count(v.shape);
  for (int id : g.inputs)
    out["inputs"].push_back({{"name", g.values[id].name}, {"shape", g.values[id].shape}});
  for (int id : g.outputs)
    out["outputs"].push_back({{"name", g.values[id].name}, {"shape", g.values[id].shape}});
  for (const auto& n : g.nodes) {
    ++by_kind[std::string(graph::op_name(n.op))];
    nlohmann::json ins = nlohmann::json::array();
    for (int id : n.inputs)
      ins.push_back(
          {{"name", g.values[id].name}, {"shape", g.values[id].shape}, {"constant", g.values[id].constant}});
    out["nodes"].push_back(
        {{"name", n.name},
         {"source_op", n.source_op},
         {"kind", graph::op_name(n.op)},
         {"inputs", ins},
         {"output", {{"name", g.values[n.output].name}, {"shape", g.values[n.output].shape}}}});
  }
  out["nodes_by_kind"] = by_kind;
  out["folded"] = nlohmann::json::object();
  for (const auto& [op, count] : g.folded) out["folded"][op] = count;
  out["constants"] = constants;
  out["constant_elements"] = weights;
  out["unsupported"] = nlohmann::json::array();  // an unsupported operator refuses the file (exit 2)
  // The fusion pass (docs/graph.md#fusion): rewrites, and the attention layers recorded.
  out["fusion"] = {{"layer_norm", g.fusion.layer_norms},
                   {"gelu", g.fusion.gelus},
                   {"rms_norm", g.fusion.rms_norms},
                   {"not_attention", g.fusion.not_attention}};
  out["attention"] = nlohmann::json::array();
  for (const auto& p : g.attention) {
    out["attention"].push_back(
        {{"name", p.name},
         {"input", g.values[static_cast<std::size_t>(p.input)].name},
         {"context", g.values[static_cast<std::size_t>(p.context)].name},
         {"output", g.values[static_cast<std::size_t>(p.output)].name},
         {"self", p.self()},
         {"tokens", p.tokens},
         {"context_tokens", p.context_tokens},
         {"width", p.width},
         {"out_width", p.out_width},
         {"heads", p.heads},
         {"head_dim", p.head_dim},
         {"value_dim", p.value_dim},
         {"scale", p.scale},
         {"mask", graph::to_string(p.mask)},
         {"mask_fill", std::isfinite(p.mask_fill) ? nlohmann::json(p.mask_fill) : nlohmann::json(nullptr)},
         {"q_bias", !p.bq.empty()},
         {"k_bias", !p.bk.empty()},
         {"v_bias", !p.bv.empty()},
         {"output_projection", p.output_projection},
         {"output_bias", !p.bo.empty()},
         {"nodes", p.nodes.size()}});
    if (p.q_rotary || p.k_rotary) {
      const auto [theta, why] = rotary_theta(p);
      out["attention"].back()["rotary"] = {
          {"q", p.q_rotary.has_value()},
          {"k", p.k_rotary.has_value()},
          {"theta", theta ? nlohmann::json(*theta) : nlohmann::json(nullptr)},
          {"why_not", why}};
    }
  }
  // A whole transformer recognised (docs/models.md#recognised-transformers), or why not.
  // Logits per token: read at the last token, as certify does by default (--position).
  std::string why_not;
  const std::int64_t tokens = operators::output_token_count(g);
  std::optional<graph::Graph> last;
  if (tokens > 0) operators::select_output_token(last.emplace(g), tokens - 1);
  const auto transformer = operators::recognise_transformer(last ? *last : g, &why_not);
  if (tokens > 0) out["position"] = tokens - 1;
  if (transformer) {
    const operators::Model& m = transformer->model;
    out["transformer"] = {{"recognised", true},
                          {"summary", transformer->summary()},
                          {"blocks", m.blocks.size()},
                          {"width", m.width},
                          {"heads", m.heads},
                          {"mlp_width", m.mlp_width},
                          {"norm", m.prenorm ? "pre" : "post"},
                          {"activation", operators::to_string(m.activation)},
                          {"pooling", operators::to_string(m.pooling)},
                          {"class_token", m.class_token},
                          {"final_norm", m.final_norm.present()},
                          {"patch_size", m.patch_size},
                          {"eps", m.eps}};
  } else {
    out["transformer"] = {{"recognised", false}, {"why_not", why_not}};
  }
  if (!json) {
    std::cout << path << "  " << origin << "  " << g.nodes.size() << " nodes, " << constants << " constants ("
              << weights << " values)\n";
    for (int id : g.inputs)
      std::cout << "  input   " << printable(g.values[id].name) << "  " << shape_text(g.values[id].shape)
                << "\n";
    for (int id : g.outputs)
      std::cout << "  output  " << printable(g.values[id].name) << "  " << shape_text(g.values[id].shape)
                << "\n";
    std::cout << "  nodes by kind:";
    for (const auto& [kind, count] : by_kind) std::cout << " " << kind << " " << count << ";";
    std::cout << "\n  folded into constants:";
    for (const auto& [op, count] : g.folded) std::cout << " " << op << " " << count << ";";
    std::cout << "\n";
    std::cout << "  fused: layer_norm " << g.fusion.layer_norms.size() << ", gelu " << g.fusion.gelus.size()
              << "; RMSNorm recognised (left as nodes) " << g.fusion.rms_norms.size() << "\n";
    std::cout << "  attention layers found: " << g.attention.size() << "\n";
    for (const auto& p : g.attention) {
      std::cout << "    " << printable(p.name) << "  " << (p.self() ? "self" : "cross") << ", tokens "
                << p.tokens;
      if (!p.self()) std::cout << " x " << p.context_tokens << " (context)";
      std::cout << ", width " << p.width << ", heads " << p.heads << ", head_dim " << p.head_dim
                << ", value_dim " << p.value_dim << ", mask " << graph::to_string(p.mask);
      if (p.mask != graph::AttentionMask::none && std::isfinite(p.mask_fill))
        std::cout << " (fill " << p.mask_fill << ")";
      std::cout << ", scale " << p.scale
                << (p.output_projection ? ", output projection" : ", no output projection")
                << (p.out_width != p.width ? " to width " + std::to_string(p.out_width) : "");
      if (p.q_rotary || p.k_rotary) {
        const auto [theta, why] = rotary_theta(p);
        std::cout << ", rotary on " << (p.q_rotary && p.k_rotary ? "Q and K" : p.q_rotary ? "Q" : "K");
        if (theta)
          std::cout << " (theta " << *theta << ", tables regenerated bit for bit)";
        else
          std::cout << " (" << printable(why) << ")";
      }
      std::cout << "\n";
    }
    for (const auto& s : g.fusion.not_attention)
      std::cout << "  softmax not recognised as attention: " << printable(s) << "\n";
    if (tokens > 0)
      std::cout << "  logits per token (" << tokens
                << " tokens): the transformer is read at the last token's "
                << "row, as certify's default --position last\n";
    const bool rotary =
        transformer && !transformer->model.blocks.empty() && transformer->model.blocks[0].attention.rotary;
    const bool onnx = origin.rfind("ONNX", 0) == 0;
    if (transformer)
      std::cout << "  transformer: recognised, " << transformer->summary()
                << (!rotary ? " (certify in l2 without --input-range runs the block pipeline on it)\n"
                    : onnx  ? " (rotary: certify's rows walk the graph, whose binary64 tables are the file's "
                              "function, not the Model's exact rotation)\n"
                            : " (certify in l2 runs the block pipeline on it; not over the graph, whose "
                              "rotary tables round the Model's rotation)\n");
    else
      std::cout << "  transformer: not recognised: " << printable(why_not) << "\n";
    std::cout << "  unsupported operators: none (a model with any is refused with their list, exit 2)\n";
    for (const auto& n : g.nodes) {
      std::cout << "  " << graph::op_name(n.op) << "  " << printable(n.name) << " (" << n.source_op << ")  ";
      for (std::size_t k = 0; k < n.inputs.size(); ++k)
        std::cout << (k ? ", " : "") << shape_text(g.values[n.inputs[k]].shape)
                  << (g.values[n.inputs[k]].constant ? "c" : "");
      std::cout << " -> " << shape_text(g.values[n.output].shape) << "\n";
    }
  }
  return out;
}

}  // namespace

nlohmann::json inspect_onnx(const std::string& path, bool json) {
#ifndef REGATTA_HAVE_ONNX
  (void)json;
  throw InputError(path, "this regatta was built without ONNX support (REGATTA_ONNX; Debian: libonnx-dev)");
#else
  const graph::Graph g = graph::import_onnx(path);
  nlohmann::json out = describe(g, path, "ONNX opset " + std::to_string(g.opset) + ", after folding", json);
  out["opset"] = g.opset;
  return out;
#endif
}

SafetensorsModel read_safetensors_model(const std::string& path, std::optional<int> tokens) {
  SafetensorsModel out;
  const std::filesystem::path config = std::filesystem::path(path).parent_path() / "config.json";
  if (!std::filesystem::exists(config)) {
    if (tokens) throw InputError("--tokens", "applies to a safetensors model with its config.json beside it");
    return out;
  }
  operators::Model model;
  try {
    model = operators::load_model(path);
  } catch (const InputError& e) {  // a weights file that is not a whole model: its arrays are listed
    if (tokens) throw;
    out.error = e.what();
    return out;
  }
  if (tokens && !model.text())
    throw InputError("--tokens", "applies to text models; " + path + " is a " + model.layout);
  if (tokens && (*tokens < 1 || *tokens > model.context))
    throw InputError("--tokens", "must be in [1, " + std::to_string(model.context) + "] for " + path);
  const int n = tokens.value_or(model.context);
  const Eigen::Index length = model.text() ? Eigen::Index(n) * model.width : model.input_size();
  out.graph = operators::model_graph(model, length, path);
  out.layout = model.layout;
  if (model.text()) out.tokens = n;
  return out;
}

nlohmann::json describe_safetensors_model(const std::string& path, const SafetensorsModel& model, bool json) {
  if (!model.graph) {
    if (model.error.empty()) return nullptr;
    if (!json) std::cout << path << "  not read as a model: " << printable(model.error) << "\n";
    return nlohmann::json{{"error", model.error}};
  }
  const std::string origin = "safetensors layout " + model.layout +
                             (model.tokens ? ", " + std::to_string(model.tokens) + " tokens" : std::string());
  nlohmann::json out = describe(*model.graph, path, origin, json);
  out["layout"] = model.layout;
  if (model.tokens) out["tokens"] = model.tokens;
  return out;
}

}  // namespace regatta::cli
