// load_model: the layout recognised from the tensor names, the timm VisionTransformer layout, and the
// tensor and config helpers every layout shares (model.hpp, tensors.hpp; GPT-2 and BERT in load_text.cpp).
#include <cmath>
#include <map>
#include <optional>
#include <regatta/core/error.hpp>
#include <regatta/core/io/json_file.hpp>
#include <regatta/core/io/safetensors.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_tensors.hpp>
#include <string>
#include <vector>

#include "tensors.hpp"

namespace regatta::operators {
namespace detail {

const io::Array& Tensors::get(const std::string& name, const Shape& shape, const std::string& why) const {
  const auto it = arrays_.find(name);
  if (it == arrays_.end()) throw InputError(file_, "missing tensor '" + name + "' (" + why + ")");
  const io::Array& a = it->second;
  if (a.shape != shape)
    throw InputError(a.source, "shape " + io::shape_repr(a.shape) + " does not match the expected " +
                                   io::shape_repr(shape) + " (" + why + ")");
  io::require_finite(a);
  return a;
}

const io::Array& Tensors::find(const std::string& name) const {
  const auto it = arrays_.find(name);
  if (it == arrays_.end()) throw InputError(file_, "missing tensor '" + name + "'");
  return it->second;
}

Matrix<double> Tensors::linear(const std::string& name, std::size_t out, std::size_t in,
                               const std::string& why) const {
  return get(name, {out, in}, why).matrix().transpose();
}

Matrix<double> Tensors::conv1d(const std::string& name, std::size_t in, std::size_t out,
                               const std::string& why) const {
  return get(name, {in, out}, why).matrix();
}

Vector<double> Tensors::vector(const std::string& name, std::size_t n, const std::string& why) const {
  const io::Array& a = get(name, {n}, why);
  return Eigen::Map<const Vector<double>>(a.data.data(), Eigen::Index(n));
}

std::map<std::string, io::Array> Tensors::under(const std::string& prefix) const {
  std::map<std::string, io::Array> out;
  for (const auto& [name, array] : arrays_)
    if (name.compare(0, prefix.size(), prefix) == 0) out.emplace(name, array);
  return out;
}

std::string Tensors::first_names(std::size_t count) const {
  std::string found;
  std::size_t listed = 0;
  for (const auto& [name, array] : arrays_) {
    if (listed++ == count) {
      found += ", ...";
      break;
    }
    found += (found.empty() ? "" : ", ") + name;
  }
  return found;
}

int config_int(const nlohmann::json& config, const std::string& key, const std::string& source) {
  const auto& v = config.at(key);
  if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > 1'000'000)
    throw InputError(source + ": \"" + key + "\"", "expected a positive integer, got " + v.dump());
  return int(v.get<long long>());
}

std::string config_string(const nlohmann::json& config, const std::string& key, const std::string& fallback,
                          const std::string& source) {
  if (!config.contains(key)) return fallback;
  const auto& v = config.at(key);
  if (!v.is_string()) throw InputError(source + ": \"" + key + "\"", "expected a string, got " + v.dump());
  return v.get<std::string>();
}

void check_agrees(const nlohmann::json& config, const std::string& key, int from_tensors,
                  const std::string& what, const std::string& source) {
  if (!config.contains(key)) return;
  const int stated = config_int(config, key, source);
  if (stated != from_tensors)
    throw InputError(source + ": \"" + key + "\"", "says " + std::to_string(stated) +
                                                       " but the tensors say " +
                                                       std::to_string(from_tensors) + " (" + what + ")");
}

std::string first_key(const nlohmann::json& config, const std::vector<std::string>& keys) {
  for (const std::string& k : keys)
    if (config.contains(k)) return k;
  return "";
}

int config_heads(const nlohmann::json& config, int width, const std::string& source) {
  const std::string key = first_key(config, {"heads", "n_head", "num_attention_heads"});
  if (key.empty()) throw InputError(source, "missing \"heads\" (the names cannot say it)");
  const int heads = config_int(config, key, source);
  if (width % heads != 0)
    throw InputError(source + ": \"" + key + "\"",
                     std::to_string(heads) + " does not divide the width " + std::to_string(width));
  return heads;
}

double config_eps(const nlohmann::json& config, double fallback, const std::string& source) {
  const std::string key = first_key(config, {"layernorm_eps", "layer_norm_epsilon", "layer_norm_eps"});
  if (key.empty()) return fallback;
  const double eps = config[key].is_number() ? config[key].get<double>() : -1.0;
  if (!(eps > 0) || !std::isfinite(eps))
    throw InputError(source + ": \"" + key + "\"", "expected a positive number");
  return eps;
}

Activation config_activation(const nlohmann::json& config, Activation fallback, const std::string& source) {
  const std::string key = first_key(config, {"mlp_activation", "activation_function", "hidden_act"});
  if (key.empty()) return fallback;
  const std::string act = config_string(config, key, "", source);
  if (act == "gelu_erf" || act == "gelu") return Activation::gelu_erf;
  if (act == "gelu_tanh" || act == "gelu_new" || act == "gelu_pytorch_tanh") return Activation::gelu_tanh;
  if (act == "relu") return Activation::relu;
  throw InputError(source + ": \"" + key + "\"",
                   "'" + act + "' is not gelu_erf (gelu), gelu_tanh (gelu_new, gelu_pytorch_tanh) or relu");
}

void check_layout(const nlohmann::json& config, const std::string& layout, const std::string& hf_type,
                  const std::string& source) {
  const std::string stated = config_string(config, "layout", layout, source);
  if (stated != layout)
    throw InputError(source + ": \"layout\"",
                     "says '" + stated + "' but the tensor names are in the " + layout + " layout");
  const std::string type = config_string(config, "model_type", hf_type, source);
  if (type != hf_type)
    throw InputError(source + ": \"model_type\"",
                     "says '" + type + "' but the tensor names are in the " + layout + " layout");
}

}  // namespace detail

namespace {

using namespace detail;

/// The rows [begin, begin + count) of a torch Linear weight (out×in), as in×count.
Matrix<double> rows_transposed(const Matrix<double>& in_by_out, int begin, int count) {
  return in_by_out.middleCols(begin, count);
}

/// The timm VisionTransformer layout (recognised by model_from_tensors).
Model timm_model(const Tensors& t, const nlohmann::json& config, const std::string& cfg) {
  check_layout(config, "timm-vit", "vit", cfg);
  Model m;
  const io::Array& conv = t.find("patch_embed.proj.weight");
  if (conv.shape.size() != 4 || conv.shape[2] != conv.shape[3])
    throw InputError(conv.source, "shape " + io::shape_repr(conv.shape) +
                                      " is not a square 2-D convolution (width, channels, p, p)");
  m.width = int(conv.shape[0]);
  m.channels = int(conv.shape[1]);
  m.patch_size = int(conv.shape[2]);
  const std::size_t W = std::size_t(m.width);
  m.heads = config_heads(config, m.width, cfg);
  m.class_token = t.has("cls_token");
  const io::Array& pos = t.find("pos_embed");
  if (pos.shape.size() != 3 || pos.shape[0] != 1 || pos.shape[2] != W)
    throw InputError(pos.source, "shape " + io::shape_repr(pos.shape) +
                                     " does not match the expected (1, tokens, " + std::to_string(m.width) +
                                     ")");
  const int patches = int(pos.shape[1]) - (m.class_token ? 1 : 0);
  const int grid = int(std::lround(std::sqrt(double(std::max(patches, 0)))));
  if (patches < 1 || grid * grid != patches)
    throw InputError(pos.source, "holds " + std::to_string(pos.shape[1]) +
                                     " tokens, not a square grid of patches" +
                                     (m.class_token ? " plus the class token" : ""));
  m.image_size = grid * m.patch_size;
  check_agrees(config, "image_size", m.image_size, "pos_embed and the patch size", cfg);
  check_agrees(config, "patch_size", m.patch_size, "patch_embed.proj.weight", cfg);
  check_agrees(config, "channels", m.channels, "patch_embed.proj.weight", cfg);
  m.eps = config_eps(config, 1e-6, cfg);
  m.activation = config_activation(config, Activation::gelu_erf, cfg);
  const std::string norm = config_string(config, "norm", "pre", cfg);
  if (norm != "pre" && norm != "post")
    throw InputError(cfg + ": \"norm\"", "'" + norm + "' is not pre or post");
  m.prenorm = norm == "pre";
  const std::string pool = config_string(config, "pooling", m.class_token ? "cls" : "mean", cfg);
  if (pool == "cls" && m.class_token)
    m.pooling = Pooling::cls;
  else if (pool == "mean")
    m.pooling = Pooling::mean;
  else
    throw InputError(cfg + ": \"pooling\"", "'" + pool + "' is not cls (with a cls_token tensor) or mean");

  // Patch embedding: the conv weight (width, C, p, p) flattened per output channel is row c of W_Eᵀ.
  const std::size_t K = std::size_t(m.channels) * std::size_t(m.patch_size) * std::size_t(m.patch_size);
  m.patch.W.resize(Eigen::Index(K), m.width);
  io::require_finite(conv);
  for (std::size_t o = 0; o < W; ++o)
    for (std::size_t k = 0; k < K; ++k) m.patch.W(Eigen::Index(k), Eigen::Index(o)) = conv.data[o * K + k];
  m.patch.b = t.vector("patch_embed.proj.bias", W, "one bias per embedding channel");
  if (m.class_token) {
    const io::Array& c = t.get("cls_token", {1, 1, W}, "one class token of the embedding width");
    m.cls_token = Eigen::Map<const Vector<double>>(c.data.data(), m.width);
  }
  io::require_finite(pos);
  m.pos_embed = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      pos.data.data(), Eigen::Index(pos.shape[1]), m.width);

  int depth = 0;
  while (t.has("blocks." + std::to_string(depth) + ".attn.qkv.weight")) ++depth;
  check_agrees(config, "depth", depth, "blocks.N.attn.qkv.weight", cfg);
  const int hd = m.width / m.heads;
  for (int b = 0; b < depth; ++b) {
    const std::string p = "blocks." + std::to_string(b) + ".";
    TransformerBlock blk;
    blk.norm1.gamma = t.vector(p + "norm1.weight", W, "LayerNorm over the width");
    blk.norm1.beta = t.vector(p + "norm1.bias", W, "LayerNorm over the width");
    blk.norm2.gamma = t.vector(p + "norm2.weight", W, "LayerNorm over the width");
    blk.norm2.beta = t.vector(p + "norm2.bias", W, "LayerNorm over the width");
    const Matrix<double> qkv = t.linear(p + "attn.qkv.weight", 3 * W, W, "q|k|v rows of the width each");
    const Vector<double> qkv_b = t.vector(p + "attn.qkv.bias", 3 * W, "q|k|v biases");
    AttentionLayer& a = blk.attention;
    a.d = m.width;
    a.heads = m.heads;
    a.head_dim = a.value_dim = hd;
    for (int h = 0; h < m.heads; ++h) {
      a.WQ.push_back(rows_transposed(qkv, h * hd, hd));
      a.WK.push_back(rows_transposed(qkv, m.width + h * hd, hd));
      a.WV.push_back(rows_transposed(qkv, 2 * m.width + h * hd, hd));
      a.bQ.push_back(qkv_b.segment(h * hd, hd));
      a.bK.push_back(qkv_b.segment(m.width + h * hd, hd));
      a.bV.push_back(qkv_b.segment(2 * m.width + h * hd, hd));
    }
    a.WO = t.linear(p + "attn.proj.weight", W, W, "output projection");
    a.bO = t.vector(p + "attn.proj.bias", W, "output projection bias");
    a.norm_gamma = blk.norm1.gamma;
    a.norm_beta = blk.norm1.beta;
    a.norm_eps = m.eps;
    const io::Array& fc1 = t.find(p + "mlp.fc1.weight");
    if (fc1.shape.size() != 2 || fc1.shape[1] != W)
      throw InputError(fc1.source, "shape " + io::shape_repr(fc1.shape) +
                                       " does not match the expected (hidden, " + std::to_string(m.width) +
                                       ")");
    if (b == 0) m.mlp_width = int(fc1.shape[0]);
    const std::size_t M = std::size_t(m.mlp_width);
    blk.fc1.W = t.linear(p + "mlp.fc1.weight", M, W, "MLP input, the hidden width of block 0");
    blk.fc1.b = t.vector(p + "mlp.fc1.bias", M, "MLP hidden bias");
    blk.fc2.W = t.linear(p + "mlp.fc2.weight", W, M, "MLP output");
    blk.fc2.b = t.vector(p + "mlp.fc2.bias", W, "MLP output bias");
    m.blocks.push_back(std::move(blk));
  }
  const std::string fnorm = m.pooling == Pooling::mean && t.has("fc_norm.weight") ? "fc_norm" : "norm";
  m.final_norm.gamma = t.vector(fnorm + ".weight", W, "final LayerNorm");
  m.final_norm.beta = t.vector(fnorm + ".bias", W, "final LayerNorm");
  const io::Array& head = t.find("head.weight");
  if (head.shape.size() != 2 || head.shape[1] != W)
    throw InputError(head.source, "shape " + io::shape_repr(head.shape) +
                                      " does not match the expected (classes, " + std::to_string(m.width) +
                                      ")");
  m.classes = int(head.shape[0]);
  check_agrees(config, "classes", m.classes, "head.weight", cfg);
  m.head.W = t.linear("head.weight", head.shape[0], W, "classifier");
  m.head.b = t.vector("head.bias", head.shape[0], "classifier bias");
  m.validate();
  return m;
}

}  // namespace

Model model_from_tensors(std::map<std::string, io::Array> tensors, const std::string& file,
                         const std::function<nlohmann::json()>& read_config, const std::string& cfg) {
  const Tensors t(std::move(tensors), file);
  enum class Layout { timm, gpt2, bert, llama } layout;
  std::string prefix;
  const auto has_under = [&t](const std::string& p, const std::string& a, const std::string& b) {
    return t.has(p + a) && t.has(p + b);
  };
  if (has_under("", "patch_embed.proj.weight", "blocks.0.attn.qkv.weight")) {
    layout = Layout::timm;
  } else if (has_under("", "wte.weight", "h.0.attn.c_attn.weight") ||
             has_under("transformer.", "wte.weight", "h.0.attn.c_attn.weight")) {
    layout = Layout::gpt2;
    prefix = t.has("wte.weight") ? "" : "transformer.";
  } else if (has_under("", "embeddings.word_embeddings.weight",
                       "encoder.layer.0.attention.self.query.weight") ||
             has_under("bert.", "embeddings.word_embeddings.weight",
                       "encoder.layer.0.attention.self.query.weight")) {
    layout = Layout::bert;
    prefix = t.has("embeddings.word_embeddings.weight") ? "" : "bert.";
  } else if (has_under("", "embed_tokens.weight", "layers.0.self_attn.q_proj.weight") ||
             has_under("model.", "embed_tokens.weight", "layers.0.self_attn.q_proj.weight")) {
    layout = Layout::llama;
    prefix = t.has("embed_tokens.weight") ? "" : "model.";
  } else if (t.has("tok_embeddings.weight") || t.has("layers.0.attention.wq.weight")) {
    throw InputError(file,
                     "a LLaMA model in Meta's original naming (tok_embeddings, layers.N.attention.wq): "
                     "not read; convert it to the Hugging Face naming ([model.]embed_tokens.weight, "
                     "layers.N.self_attn.q_proj.weight, ...)");
  } else {
    throw InputError(file,
                     "not a timm ViT layout, nor GPT-2, BERT or LLaMA (expected patch_embed.proj.weight "
                     "and blocks.0.attn.qkv.weight; [transformer.]wte.weight and h.0.attn.c_attn.weight; "
                     "[bert.]embeddings.word_embeddings.weight and "
                     "encoder.layer.0.attention.self.query.weight; or [model.]embed_tokens.weight and "
                     "layers.0.self_attn.q_proj.weight); found: " +
                         t.first_names());
  }
  const nlohmann::json config = read_config();
  if (!config.is_object()) throw InputError(cfg, "expected a JSON object");
  switch (layout) {
    case Layout::timm:
      return timm_model(t, config, cfg);
    case Layout::gpt2:
      return gpt2_model(t, prefix, config, cfg);
    case Layout::bert:
      return bert_model(t, prefix, config, cfg);
    case Layout::llama:
      return llama_model(t, prefix, config, cfg);
  }
  return timm_model(t, config, cfg);
}

Model load_model(const std::filesystem::path& path, const std::filesystem::path& config_path) {
  auto tensors = io::read_safetensors(path);
  const std::filesystem::path cfg_path =
      config_path.empty() ? path.parent_path() / "config.json" : config_path;
  const auto read_config = [&cfg_path] {
    if (!std::filesystem::exists(cfg_path))
      throw InputError(cfg_path.string(),
                       "missing model config (the number of heads cannot be read from tensor "
                       "names; pass --config or put config.json next to the model)");
    return io::read_json(cfg_path);
  };
  return model_from_tensors(std::move(tensors), path.string(), read_config, cfg_path.string());
}

}  // namespace regatta::operators
