// --model M.onnx --node NAME for local and attend (see local_model.hpp).
#include "local_model.hpp"

#include <cmath>
#include <limits>
#include <sstream>
#include <tuple>
#include <utility>

#include <regatta/core/error.hpp>
#include <regatta/core/io/array.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/graph.hpp>
#include <regatta/operators/graph_rotary.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_graph.hpp>
#ifdef REGATTA_HAVE_ONNX
#include <regatta/graph/onnx_import.hpp>
#endif
#include "array_source.hpp"

namespace regatta::cli {

void add_model_options(CLI::App* cmd, LayerArgs& args) {
  cmd->add_option("--model", args.model,
                  "A model, .onnx or .safetensors (a timm ViT, GPT-2, BERT or LLaMA with its config.json): "
                  "analyse one of its attention layers (--node) at the model input --input");
  cmd->add_option("--node", args.node,
                  "With --model: the attention layer's name (regatta inspect M lists them), or all");
}

namespace {

Matrix<double> matrix(const std::vector<double>& data, std::int64_t rows, std::int64_t cols) {
  Matrix<double> m(rows, cols);
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) m(i, j) = data[static_cast<std::size_t>(i * cols + j)];
  return m;
}

void refuse_layer_options(const LayerArgs& a) {
  const std::pair<bool, const char*> given[] = {
      {!a.layer.empty(), "--layer"},    {!a.random.empty(), "--random"},
      {a.heads != 0, "--heads"},        {!a.prefix.empty(), "--prefix"},
      {a.kind != "dot", "--kind"},      {a.causal, "--causal"},
      {a.residual, "--residual"},       {a.prenorm != "none", "--prenorm"},
      {a.sinkhorn != 1, "--sinkhorn"},  {a.norm_eps.has_value(), "--norm-eps"},
      {a.no_out_proj, "--no-out-proj"}, {a.allow_untied_l2, "--allow-untied-l2"},
      {!a.rope.empty(), "--rope"}};
  for (const auto& [on, name] : given)
    if (on)
      throw InputError(name,
                       "does not apply with --model (the layer, its heads and its mask are the model's)");
}

std::string names_of(const graph::Graph& g) {
  std::string list;
  for (const auto& p : g.attention) list += (list.empty() ? "" : ", ") + regatta::quoted(p.name);
  return list;
}

/// The model input from the file: the input's shape, or that shape without a leading 1.
graph::Tensor<double> model_input(const graph::Graph& g, const std::string& spec, const std::string& model) {
  if (g.inputs.size() != 1)
    throw InputError(model, "has " + std::to_string(g.inputs.size()) +
                                " runtime inputs; --model takes a model with one input");
  const graph::Value& in = g.values[static_cast<std::size_t>(g.inputs[0])];
  const io::Array a = load_array(spec);
  io::require_finite(a);
  const graph::Shape given(a.shape.begin(), a.shape.end());
  const bool fits = given == in.shape || (!in.shape.empty() && in.shape[0] == 1 &&
                                          given == graph::Shape(in.shape.begin() + 1, in.shape.end()));
  if (!fits)
    throw InputError(a.source, "has shape " + graph::shape_text(given) + ", the input " +
                                   regatta::quoted(in.name) + " of " + model + " takes " +
                                   graph::shape_text(in.shape));
  return graph::Tensor<double>{in.shape, a.data};
}

ModelLayer rebuild(const graph::AttentionPattern& p, const std::vector<graph::Tensor<double>>& values,
                   const std::string& model) {
  ModelLayer m;
  m.node = p.name;
  m.scale = p.scale;
  operators::AttentionLayer& l = m.resolved.layer;
  l.d = p.width;
  l.heads = p.heads;
  l.head_dim = p.head_dim;
  l.value_dim = p.value_dim;
  // operators' scores are Q·Kᵀ/√d_h: a graph factor that is 1/√d_h up to its binary64 rounding is that
  // factor; any other is folded into W_Q and b_Q (one rounding per entry, said in the layer's description).
  const double fold = p.scale * std::sqrt(double(p.head_dim));
  m.folded = std::fabs(fold - 1) > 4 * std::numeric_limits<double>::epsilon();
  const double f = m.folded ? fold : 1.0;
  for (int h = 0; h < p.heads; ++h) {
    const auto hs = static_cast<std::size_t>(h);
    l.WQ.push_back(matrix(p.wq[hs], p.width, p.head_dim) * f);
    l.WK.push_back(matrix(p.wk[hs], p.width, p.head_dim));
    l.WV.push_back(matrix(p.wv[hs], p.width, p.value_dim));
    if (!p.bq.empty()) l.bQ.push_back(Eigen::Map<const Vector<double>>(p.bq[hs].data(), p.head_dim) * f);
    if (!p.bk.empty()) l.bK.push_back(Eigen::Map<const Vector<double>>(p.bk[hs].data(), p.head_dim));
    if (!p.bv.empty()) l.bV.push_back(Eigen::Map<const Vector<double>>(p.bv[hs].data(), p.value_dim));
  }
  l.WO = matrix(p.wo, std::int64_t(p.heads) * p.value_dim, p.out_width);
  if (!p.bo.empty()) l.bO = Eigen::Map<const Vector<double>>(p.bo.data(), p.out_width);
  if (p.q_rotary || p.k_rotary) l.rotary = operators::rotary_of(p, nullptr);  // checked by model_layers
  l.validate();
  m.resolved.options.causal = p.mask == graph::AttentionMask::causal;
  std::ostringstream source;
  source << model << " node '" << p.name << "'";
  if (!p.output_projection) source << " (no output projection: W^O merges the heads)";
  if (m.folded) source << " (score factor " << p.scale << " folded into W_Q, b_Q)";
  if (l.rotary) source << " (rotary theta " << l.rotary->theta << ")";
  m.resolved.source = source.str();
  m.X = matrix(values[static_cast<std::size_t>(p.input)].data, p.tokens, p.width);
  if (!p.self())
    m.context = matrix(values[static_cast<std::size_t>(p.context)].data, p.context_tokens, p.width);
  m.graph_output = matrix(values[static_cast<std::size_t>(p.output)].data, p.tokens, p.out_width);
  return m;
}

bool is_safetensors(const std::string& path) {
  return path.size() >= 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0;
}

/// A safetensors model (model.hpp; its config.json beside it) as a graph (model_graph.hpp) and its input:
/// any array with the model's flat input length (images: C·H·W values; text: n x width embedding rows).
std::pair<graph::Graph, graph::Tensor<double>> safetensors_graph(const std::string& path,
                                                                 const std::string& spec) {
  const operators::Model model = operators::load_model(path);
  const io::Array a = load_array(spec);
  io::require_finite(a);
  const auto length = static_cast<Eigen::Index>(a.data.size());
  if (!model.accepts(length))
    throw InputError(a.source, "has " + std::to_string(length) + " values, the " + model.layout + " model " +
                                   path + " takes " +
                                   (model.text() ? "n x " + std::to_string(model.width) + " with 1 <= n <= " +
                                                       std::to_string(model.context) + " (token embeddings)"
                                                 : std::to_string(model.input_size()) + " (C x H x W)"));
  graph::Graph g = operators::model_graph(model, length, path);
  graph::Shape shape = g.values[static_cast<std::size_t>(g.inputs[0])].shape;
  return {std::move(g), graph::Tensor<double>{std::move(shape), a.data}};
}

}  // namespace

std::vector<ModelLayer> model_layers(const LayerArgs& args, const std::string& input, bool allow_all,
                                     bool allow_cross) {
  refuse_layer_options(args);
  graph::Graph g;
  graph::Tensor<double> model_in;
  if (is_safetensors(args.model)) {
    std::tie(g, model_in) = safetensors_graph(args.model, input);
  } else {
#ifndef REGATTA_HAVE_ONNX
    throw InputError("--model",
                     "this regatta was built without ONNX support (REGATTA_ONNX; Debian: "
                     "libonnx-dev); a .safetensors model is read without it");
#else
    g = graph::import_onnx(args.model);
#endif
  }
  if (g.attention.empty()) {
    std::string why;
    for (const auto& s : g.fusion.not_attention) why += (why.empty() ? " (softmax nodes: " : "; ") + s;
    throw InputError(args.model,
                     "no attention layer found" + (why.empty() ? std::string(" (no softmax)") : why + ")"));
  }
  if (args.node.empty())
    throw InputError("--node",
                     "required with --model; the attention layers of " + args.model + ": " + names_of(g));
  std::vector<const graph::AttentionPattern*> chosen;
  if (args.node == "all" && allow_all) {
    for (const auto& p : g.attention) chosen.push_back(&p);
  } else {
    for (const auto& p : g.attention)
      if (p.name == args.node) chosen.push_back(&p);
    if (chosen.empty())
      throw InputError("--node", "no attention layer " + regatta::quoted(args.node) + " in " + args.model +
                                     " (found: " + names_of(g) + (allow_all ? "; or all" : "") + ")");
  }
  for (const graph::AttentionPattern* p : chosen) {
    if (p->mask == graph::AttentionMask::additive)
      throw InputError("--node", "the layer " + regatta::quoted(p->name) +
                                     " has an additive mask that is neither none nor causal (not modelled)");
    std::string why;
    if ((p->q_rotary || p->k_rotary) && !operators::rotary_of(*p, &why))
      throw InputError("--node", "the layer " + regatta::quoted(p->name) + " has a rotary embedding " +
                                     "operators' layers do not read: " + why);
    if (!p->self() && !allow_cross)
      throw InputError("--node", "the layer " + regatta::quoted(p->name) +
                                     " is cross-attention; this command analyses self-attention");
    if (p->out_width != p->width)
      throw InputError("--node", "the layer " + regatta::quoted(p->name) + " maps width " +
                                     std::to_string(p->width) + " to " + std::to_string(p->out_width) +
                                     " (operators' layers keep the width)");
  }
  if (model_in.data.empty()) model_in = model_input(g, input, args.model);
  const auto values = graph::evaluate_all(g, std::vector<graph::Tensor<double>>{model_in});
  std::vector<ModelLayer> out;
  for (const graph::AttentionPattern* p : chosen) out.push_back(rebuild(*p, values, args.model));
  return out;
}

}  // namespace regatta::cli
