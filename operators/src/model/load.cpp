// load_model: the timm VisionTransformer layout from safetensors plus a JSON config (model.hpp).
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

namespace regatta::operators {
namespace {

using Shape = std::vector<std::size_t>;

class Tensors {
 public:
  Tensors(std::map<std::string, io::Array> arrays, std::string file)
      : arrays_(std::move(arrays)), file_(std::move(file)) {}

  bool has(const std::string& name) const { return arrays_.count(name) != 0; }

  /// The tensor `name` with exactly `shape`, converted and finite.
  const io::Array& get(const std::string& name, const Shape& shape, const std::string& why) const {
    const auto it = arrays_.find(name);
    if (it == arrays_.end()) throw InputError(file_, "missing tensor '" + name + "' (" + why + ")");
    const io::Array& a = it->second;
    if (a.shape != shape)
      throw InputError(a.source, "shape " + io::shape_repr(a.shape) + " does not match the expected " +
                                     io::shape_repr(shape) + " (" + why + ")");
    io::require_finite(a);
    return a;
  }
  const io::Array& find(const std::string& name) const {
    const auto it = arrays_.find(name);
    if (it == arrays_.end()) throw InputError(file_, "missing tensor '" + name + "'");
    return it->second;
  }
  /// torch Linear weight (out×in) as the in×out right-acting matrix.
  Matrix<double> linear(const std::string& name, std::size_t out, std::size_t in,
                        const std::string& why) const {
    const io::Array& a = get(name, {out, in}, why);
    return a.matrix().transpose();
  }
  Vector<double> vector(const std::string& name, std::size_t n, const std::string& why) const {
    const io::Array& a = get(name, {n}, why);
    return Eigen::Map<const Vector<double>>(a.data.data(), Eigen::Index(n));
  }
  const std::string& file() const { return file_; }
  const std::map<std::string, io::Array>& arrays() const { return arrays_; }

 private:
  std::map<std::string, io::Array> arrays_;
  std::string file_;
};

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

/// A config entry that the tensors also determine must agree with them.
void check_agrees(const nlohmann::json& config, const std::string& key, int from_tensors,
                  const std::string& what, const std::string& source) {
  if (!config.contains(key)) return;
  const int stated = config_int(config, key, source);
  if (stated != from_tensors)
    throw InputError(source + ": \"" + key + "\"", "says " + std::to_string(stated) +
                                                       " but the tensors say " +
                                                       std::to_string(from_tensors) + " (" + what + ")");
}

/// The rows [begin, begin + count) of a torch Linear weight (out×in), as in×count.
Matrix<double> rows_transposed(const Matrix<double>& in_by_out, int begin, int count) {
  return in_by_out.middleCols(begin, count);
}

}  // namespace

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

Model model_from_tensors(std::map<std::string, io::Array> tensors, const std::string& file,
                         const std::function<nlohmann::json()>& read_config, const std::string& cfg) {
  const Tensors t(std::move(tensors), file);
  if (!t.has("patch_embed.proj.weight") || !t.has("blocks.0.attn.qkv.weight")) {
    std::string found;
    std::size_t listed = 0;
    for (const auto& [name, array] : t.arrays()) {
      if (listed++ == 6) {
        found += ", ...";
        break;
      }
      found += (found.empty() ? "" : ", ") + name;
    }
    throw InputError(file,
                     "not a timm ViT layout (expected patch_embed.proj.weight and "
                     "blocks.0.attn.qkv.weight); found: " +
                         found);
  }
  const nlohmann::json config = read_config();
  if (!config.is_object()) throw InputError(cfg, "expected a JSON object");
  if (config_string(config, "layout", "timm-vit", cfg) != "timm-vit")
    throw InputError(cfg + ": \"layout\"", "only \"timm-vit\" is supported");

  Model m;
  const io::Array& conv = t.find("patch_embed.proj.weight");
  if (conv.shape.size() != 4 || conv.shape[2] != conv.shape[3])
    throw InputError(conv.source, "shape " + io::shape_repr(conv.shape) +
                                      " is not a square 2-D convolution (width, channels, p, p)");
  m.width = int(conv.shape[0]);
  m.channels = int(conv.shape[1]);
  m.patch_size = int(conv.shape[2]);
  const std::size_t W = std::size_t(m.width);
  if (!config.contains("heads")) throw InputError(cfg, "missing \"heads\" (the names cannot say it)");
  m.heads = config_int(config, "heads", cfg);
  if (m.width % m.heads != 0)
    throw InputError(cfg + ": \"heads\"",
                     std::to_string(m.heads) + " does not divide the width " + std::to_string(m.width));
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
  const double eps = config.contains("layernorm_eps") && config["layernorm_eps"].is_number()
                         ? config["layernorm_eps"].get<double>()
                         : (config.contains("layernorm_eps") ? -1.0 : 1e-6);
  if (!(eps > 0) || !std::isfinite(eps))
    throw InputError(cfg + ": \"layernorm_eps\"", "expected a positive number");
  m.eps = eps;
  const std::string act = config_string(config, "mlp_activation", "gelu_erf", cfg);
  if (act == "gelu_erf" || act == "gelu")
    m.activation = Activation::gelu_erf;
  else if (act == "gelu_tanh")
    m.activation = Activation::gelu_tanh;
  else if (act == "relu")
    m.activation = Activation::relu;
  else
    throw InputError(cfg + ": \"mlp_activation\"", "'" + act + "' is not gelu_erf, gelu_tanh or relu");
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

}  // namespace regatta::operators
