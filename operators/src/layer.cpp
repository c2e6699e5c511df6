// Attention layers: validation, random layers and loading PyTorch / Hugging Face weights.
#include <regatta/operators/layer.hpp>
#include <regatta/operators/layer_tensors.hpp>

#include <cmath>
#include <map>
#include <optional>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/io/safetensors.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/operators/normalization.hpp>

namespace regatta::operators {

namespace {

std::string indexed(const char* name, std::size_t h) {
  return std::string(name) + "[" + std::to_string(h) + "]";
}

void check_heads_list(const char* name, std::size_t size, int heads) {
  if (size != std::size_t(heads))
    throw InputError(name,
                     "has " + std::to_string(size) + " entries, expected heads = " + std::to_string(heads));
}

void check_bias(const char* name, const std::vector<Vector<double>>& b, int heads, int length) {
  if (b.empty()) return;
  check_heads_list(name, b.size(), heads);
  for (std::size_t h = 0; h < b.size(); ++h) {
    if (b[h].size() != length)
      throw InputError(indexed(name, h),
                       "has length " + std::to_string(b[h].size()) + ", expected " + std::to_string(length));
    check_finite(indexed(name, h), b[h]);
  }
}

}  // namespace

void AttentionLayer::validate() const {
  if (d <= 0) throw InputError("d", "must be positive, got " + std::to_string(d));
  if (heads <= 0) throw InputError("heads", "must be positive, got " + std::to_string(heads));
  if (head_dim <= 0) throw InputError("head_dim", "must be positive, got " + std::to_string(head_dim));
  if (value_dim <= 0) throw InputError("value_dim", "must be positive, got " + std::to_string(value_dim));
  const auto check_maps = [&](const char* name, const std::vector<Matrix<double>>& w, int cols) {
    check_heads_list(name, w.size(), heads);
    for (std::size_t h = 0; h < w.size(); ++h) {
      check_shape(indexed(name, h), w[h].rows(), w[h].cols(), d, cols);
      check_finite(indexed(name, h), w[h]);
    }
  };
  check_maps("WQ", WQ, head_dim);
  check_maps("WK", WK, head_dim);
  check_maps("WV", WV, value_dim);
  check_shape("WO", WO.rows(), WO.cols(), Eigen::Index(heads) * value_dim, d);
  check_finite("WO", WO);
  check_bias("bQ", bQ, heads, head_dim);
  check_bias("bK", bK, heads, head_dim);
  check_bias("bV", bV, heads, value_dim);
  if (bO.size() != 0) {
    if (bO.size() != d)
      throw InputError("bO",
                       "has length " + std::to_string(bO.size()) + ", expected d = " + std::to_string(d));
    check_finite("bO", bO);
  }
  for (const auto& [name, v] : {std::pair{"norm_gamma", &norm_gamma}, std::pair{"norm_beta", &norm_beta}}) {
    if (v->size() == 0) continue;
    if (v->size() != d)
      throw InputError(name,
                       "has length " + std::to_string(v->size()) + ", expected d = " + std::to_string(d));
    check_finite(name, *v);
  }
  if (!(norm_eps > 0) || !std::isfinite(norm_eps))
    throw InputError("norm_eps", "must be positive and finite (LayerNorm/RMSNorm are not Lipschitz at 0)");
  if (rotary) {
    if (!(rotary->theta > 0) || !std::isfinite(rotary->theta))
      throw InputError("rotary", "theta must be positive and finite, got " + std::to_string(rotary->theta));
    if (head_dim % 2 != 0)
      throw InputError("rotary", "rotates pairs of head coordinates: head_dim must be even, got " +
                                     std::to_string(head_dim));
    if (kind != AttentionKind::dot)
      throw InputError("rotary", "rotary position embeddings are defined for dot-product attention, not l2");
  }
}

bool AttentionLayer::tied() const {
  if (WQ.size() != WK.size() || bQ.size() != bK.size()) return false;
  for (std::size_t h = 0; h < WQ.size(); ++h)
    if (WQ[h] != WK[h]) return false;
  for (std::size_t h = 0; h < bQ.size(); ++h)
    if (bQ[h] != bK[h]) return false;
  return true;
}

std::string to_string(Prenorm norm) {
  switch (norm) {
    case Prenorm::none:
      return "none";
    case Prenorm::layernorm:
      return "layernorm";
    case Prenorm::rmsnorm:
      return "rmsnorm";
  }
  return "none";
}

Prenorm parse_prenorm(const std::string& text, const std::string& subject) {
  if (text == "none") return Prenorm::none;
  if (text == "layernorm") return Prenorm::layernorm;
  if (text == "rmsnorm") return Prenorm::rmsnorm;
  throw InputError(subject, "expected none, layernorm or rmsnorm, got '" + text + "'");
}

std::string to_string(AttentionKind kind) { return kind == AttentionKind::dot ? "dot" : "l2"; }

AttentionKind parse_attention_kind(const std::string& text, const std::string& subject) {
  if (text == "dot") return AttentionKind::dot;
  if (text == "l2") return AttentionKind::l2;
  throw InputError(subject, "must be dot or l2, got '" + text + "'");
}

AttentionLayer random_layer(const RandomLayerSpec& spec) {
  if (spec.d <= 0) throw InputError("d", "must be positive, got " + std::to_string(spec.d));
  if (spec.heads <= 0) throw InputError("heads", "must be positive, got " + std::to_string(spec.heads));
  if (spec.head_dim < 0) throw InputError("head_dim", "must be positive or 0 (d/heads)");
  if (spec.value_dim < 0) throw InputError("value_dim", "must be positive or 0 (head_dim)");
  if (!(std::isfinite(spec.scale) && spec.scale > 0))
    throw InputError("scale", "must be positive and finite, got " + std::to_string(spec.scale));
  if (spec.head_dim == 0 && spec.d % spec.heads != 0)
    throw InputError("heads", std::to_string(spec.heads) + " does not divide d = " + std::to_string(spec.d));
  AttentionLayer layer;
  layer.d = spec.d;
  layer.heads = spec.heads;
  layer.head_dim = spec.head_dim > 0 ? spec.head_dim : spec.d / spec.heads;
  layer.value_dim = spec.value_dim > 0 ? spec.value_dim : layer.head_dim;
  layer.kind = spec.kind;
  const double sd = spec.scale / std::sqrt(double(spec.d));
  std::uint64_t stream = spec.seed * 0x9E3779B97F4A7C15ull;  // one independent seed per drawn array
  const auto draw = [&](Eigen::Index rows, Eigen::Index cols) {
    const Vector<double> z = standard_normal(rows * cols, ++stream);
    return Matrix<double>(sd * Eigen::Map<const Matrix<double>>(z.data(), rows, cols));
  };
  const auto draw_vector = [&](Eigen::Index n) { return Vector<double>(sd * standard_normal(n, ++stream)); };
  for (int h = 0; h < layer.heads; ++h) {
    layer.WQ.push_back(draw(layer.d, layer.head_dim));
    layer.WK.push_back(spec.kind == AttentionKind::l2 ? layer.WQ.back() : draw(layer.d, layer.head_dim));
    layer.WV.push_back(draw(layer.d, layer.value_dim));
    if (spec.biases) {
      layer.bQ.push_back(draw_vector(layer.head_dim));
      layer.bK.push_back(spec.kind == AttentionKind::l2 ? layer.bQ.back() : draw_vector(layer.head_dim));
      layer.bV.push_back(draw_vector(layer.value_dim));
    }
  }
  layer.WO = draw(Eigen::Index(layer.heads) * layer.value_dim, layer.d);
  if (spec.biases) layer.bO = draw_vector(layer.d);
  return layer;
}

namespace {

/// The tensors of one file restricted to a prefix, with role lookup and error messages naming the file.
class TensorSet {
 public:
  TensorSet(std::map<std::string, io::Array> all, std::string file, std::string prefix)
      : file_(std::move(file)), prefix_(std::move(prefix)) {
    for (auto& [name, array] : all)
      if (name.compare(0, prefix_.size(), prefix_) == 0) arrays_.emplace(name, std::move(array));
    if (arrays_.empty()) throw InputError(file_, "no tensor name starts with prefix '" + prefix_ + "'");
  }

  /// The tensor playing `role` (name == prefix + role or ending in "." + role), or nullptr; two matches
  /// throw (ambiguous: use a longer prefix).
  const io::Array* find(const std::string& role) const {
    const io::Array* found = nullptr;
    std::string found_name;
    for (const auto& [name, array] : arrays_) {
      const bool match =
          name == prefix_ + role ||
          (name.size() > role.size() && name.compare(name.size() - role.size(), role.size(), role) == 0 &&
           name[name.size() - role.size() - 1] == '.');
      if (!match) continue;
      if (found)
        throw InputError(file_ + ":" + role, "ambiguous: matches '" + found_name + "' and '" + name +
                                                 "' (select one with a prefix)");
      found = &array;
      found_name = name;
    }
    return found;
  }

  const io::Array& require(const std::string& role) const {
    const io::Array* a = find(role);
    if (!a) throw InputError(file_ + ":" + prefix_ + role, "missing tensor");
    return *a;
  }

  const std::string& file() const { return file_; }

 private:
  std::map<std::string, io::Array> arrays_;
  std::string file_;
  std::string prefix_;
};

Matrix<double> matrix_of(const io::Array& a, Eigen::Index rows, Eigen::Index cols) {
  if (a.shape.size() != 2 || Eigen::Index(a.shape[0]) != rows || Eigen::Index(a.shape[1]) != cols)
    throw InputError(a.source, "has shape " + io::shape_repr(a.shape) + ", expected (" +
                                   std::to_string(rows) + ", " + std::to_string(cols) + ")");
  io::require_finite(a);
  return a.matrix();
}

Vector<double> vector_of(const io::Array& a, Eigen::Index n) {
  if (a.shape.size() != 1 || Eigen::Index(a.shape[0]) != n)
    throw InputError(a.source,
                     "has shape " + io::shape_repr(a.shape) + ", expected (" + std::to_string(n) + ",)");
  io::require_finite(a);
  return a.vector();
}

Eigen::Index rows_of_2d(const io::Array& a) {
  if (a.shape.size() != 2 || a.shape[0] == 0 || a.shape[1] == 0)
    throw InputError(a.source, "has shape " + io::shape_repr(a.shape) + ", expected a nonempty matrix");
  return Eigen::Index(a.shape[0]);
}

/// The names of the four maps under one convention; empty bias names where the convention has none apart.
struct Naming {
  std::string q, k, v, o, qb, kb, vb, ob;
};

/// The output projection tensor, or nullptr for W^O = I (OutputProjection::identity, which needs the
/// concatenated head width to equal d and the file to have no projection under `role`).
const io::Array* output_projection(const TensorSet& set, const std::string& role, OutputProjection output,
                                   Eigen::Index width, Eigen::Index d) {
  if (output == OutputProjection::from_file) return &set.require(role);
  if (const io::Array* out = set.find(role))
    throw InputError(out->source, "is an output projection, but the layer was asked to have none (W^O = I)");
  if (width != d)
    throw InputError("output projection", "W^O = I needs the concatenated head width " +
                                              std::to_string(width) +
                                              " to equal the token dimension d = " + std::to_string(d));
  return nullptr;
}

}  // namespace

AttentionLayer load_layer(const std::filesystem::path& path, int heads, AttentionKind kind,
                          const std::string& prefix, OutputProjection output, const RotaryStatement& rope) {
  const std::string file = path.string();
  if (heads <= 0) throw InputError("heads", "must be positive, got " + std::to_string(heads));
  const std::string ext = path.extension().string();
  std::map<std::string, io::Array> all;
  if (ext == ".npz")
    all = io::read_npz(path);
  else if (ext == ".safetensors")
    all = io::read_safetensors(path);
  else
    throw InputError(file, "unknown layer file type '" + ext + "' (expected .npz or .safetensors)");
  return layer_from_tensors(std::move(all), file, heads, kind, prefix, output, rope);
}

AttentionLayer layer_from_tensors(std::map<std::string, io::Array> tensors, const std::string& file,
                                  int heads, AttentionKind kind, const std::string& prefix,
                                  OutputProjection output, const RotaryStatement& rope) {
  if (heads <= 0) throw InputError("heads", "must be positive, got " + std::to_string(heads));
  const TensorSet set(std::move(tensors), file, prefix);

  Matrix<double> Wq, Wk, Wv, Wo;  // PyTorch orientation: out×in
  std::optional<Vector<double>> bq, bk, bv, bo;

  // Fused q|k|v projections: PyTorch nn.MultiheadAttention, timm ViT (attn.qkv, same out×in layout) and
  // GPT-2 (Conv1D: weights stored in×out, so c_attn is d×3E and c_proj is E×d, both transposed here).
  struct Fused {
    const char *weight, *bias, *out, *out_bias;
    bool conv1d;
  };
  const Fused fused_layouts[] = {
      {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias", false},
      {"attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias", false},
      {"attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias", true}};
  const Fused* fused = nullptr;
  const io::Array* in_proj = nullptr;
  for (const Fused& f : fused_layouts)
    if ((in_proj = set.find(f.weight))) {
      fused = &f;
      break;
    }
  if (fused) {
    const bool t = fused->conv1d;
    if (in_proj->shape.size() != 2)
      throw InputError(in_proj->source,
                       "has shape " + io::shape_repr(in_proj->shape) + ", expected a matrix");
    const Eigen::Index rows = Eigen::Index(in_proj->shape[t ? 1 : 0]);
    if (rows % 3 != 0 || rows == 0)
      throw InputError(in_proj->source,
                       "has shape " + io::shape_repr(in_proj->shape) + ", expected " +
                           (t ? "(embed_dim, 3·embed_dim) (Conv1D)" : "(3·embed_dim, embed_dim)"));
    const Eigen::Index e = rows / 3, d = Eigen::Index(in_proj->shape[t ? 0 : 1]);
    const Matrix<double> W =
        t ? Matrix<double>(matrix_of(*in_proj, d, 3 * e).transpose()) : matrix_of(*in_proj, 3 * e, d);
    Wq = W.topRows(e);
    Wk = W.middleRows(e, e);
    Wv = W.bottomRows(e);
    if (const io::Array* b = set.find(fused->bias)) {
      const Vector<double> bias = vector_of(*b, 3 * e);
      bq = bias.head(e);
      bk = bias.segment(e, e);
      bv = bias.tail(e);
    }
    if (const io::Array* out = output_projection(set, fused->out, output, e, d))
      Wo = t ? Matrix<double>(matrix_of(*out, e, d).transpose()) : matrix_of(*out, d, e);
    else
      Wo = Matrix<double>::Identity(d, e);
    if (const io::Array* b = set.find(fused->out_bias)) bo = vector_of(*b, d);
  } else {
    Naming naming;
    if (set.find("q_proj_weight"))
      naming = {"q_proj_weight", "k_proj_weight", "v_proj_weight", "out_proj.weight", "", "", "",
                "out_proj.bias"};
    else if (set.find("query.weight"))
      naming = {"query.weight", "key.weight", "value.weight", "output.dense.weight",
                "query.bias",   "key.bias",   "value.bias",   "output.dense.bias"};
    else if (set.find("q_proj.weight")) {
      naming = {"q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight",
                "q_proj.bias",   "k_proj.bias",   "v_proj.bias",   "o_proj.bias"};
      // LLaMA-family attention rotates queries and keys with a θ the weights do not hold: analysing the
      // layer without RoPE would present another map as this one.
      if (!rope.stated)
        throw InputError(file,
                         "LLaMA layers carry rotary position embeddings whose theta the weights do not "
                         "hold: state it with --rope THETA (LLaMA 1/2: 10000) or --rope none");
    } else
      throw InputError(
          file + ":" + prefix + "in_proj_weight",
          "missing tensor (no in_proj_weight, attn.qkv.weight, attn.c_attn.weight, q_proj_weight, "
          "query.weight or q_proj.weight)");
    const io::Array& q = set.require(naming.q);
    const Eigen::Index e = rows_of_2d(q), d = Eigen::Index(q.shape[1]);
    Wq = matrix_of(q, e, d);
    const io::Array& k = set.require(naming.k);
    const io::Array& v = set.require(naming.v);
    const Eigen::Index ek = rows_of_2d(k), ev_stored = rows_of_2d(v);
    // Grouped-query attention (LLaMA, Mistral): k_proj and v_proj hold kv_heads < heads heads, and query
    // head h reads key/value head h / (heads / kv_heads). Repeating each key/value head over its group gives
    // the same map as an ordinary multi-head layer (Hugging Face's repeat_kv), which is what is stored.
    Eigen::Index group = 1;
    if (ek != e) {
      const bool divides =
          e % heads == 0 && ek > 0 && ek % (e / heads) == 0 && heads % (ek / (e / heads)) == 0;
      if (!divides || ev_stored % (ek / (e / heads)) != 0)
        throw InputError(k.source, "has " + std::to_string(ek) + " rows and " + naming.q + " has " +
                                       std::to_string(e) + ": not grouped-query attention with " +
                                       std::to_string(heads) + " query heads (expected a multiple of " +
                                       std::to_string(e % heads == 0 ? e / heads : e) +
                                       " rows dividing the query width)");
      group = heads / (ek / (e / heads));
    }
    const auto repeat_groups = [group](const Matrix<double>& W, Eigen::Index head_rows) {
      if (group == 1) return W;
      Matrix<double> out(W.rows() * group, W.cols());
      for (Eigen::Index g = 0; g < W.rows() / head_rows; ++g)
        for (Eigen::Index r = 0; r < group; ++r)
          out.middleRows((g * group + r) * head_rows, head_rows) = W.middleRows(g * head_rows, head_rows);
      return out;
    };
    const Eigen::Index kv_heads = heads / group;
    Wk = repeat_groups(matrix_of(k, ek, d), ek / kv_heads);
    Wv = repeat_groups(matrix_of(v, ev_stored, d), ev_stored / kv_heads);
    const Eigen::Index ev = Wv.rows();
    if (const io::Array* out = output_projection(set, naming.o, output, ev, d))
      Wo = matrix_of(*out, d, ev);
    else
      Wo = Matrix<double>::Identity(d, ev);
    const auto repeat_bias = [&](const Vector<double>& b, Eigen::Index rows) {
      return Vector<double>(repeat_groups(Matrix<double>(b), rows / kv_heads));
    };
    if (!naming.qb.empty()) {
      if (const io::Array* b = set.find(naming.qb)) bq = vector_of(*b, e);
      if (const io::Array* b = set.find(naming.kb)) bk = repeat_bias(vector_of(*b, ek), ek);
      if (const io::Array* b = set.find(naming.vb)) bv = repeat_bias(vector_of(*b, ev_stored), ev_stored);
    } else if (const io::Array* b = set.find("in_proj_bias")) {
      const Vector<double> bias = vector_of(*b, 2 * e + ev);
      bq = bias.head(e);
      bk = bias.segment(e, e);
      bv = bias.tail(ev);
    }
    if (const io::Array* b = set.find(naming.ob)) bo = vector_of(*b, d);
  }

  const Eigen::Index e = Wq.rows(), ev = Wv.rows(), d = Wq.cols();
  if (e % heads != 0 || ev % heads != 0)
    throw InputError(file, "heads = " + std::to_string(heads) + " does not divide the projection width " +
                               std::to_string(e % heads != 0 ? e : ev));
  // Biases come all or none per map in our layer; a missing one among present ones is zero.
  const bool any_qkv_bias = bq || bk || bv;
  if (any_qkv_bias) {
    if (!bq) bq = Vector<double>::Zero(e);
    if (!bk) bk = Vector<double>::Zero(e);
    if (!bv) bv = Vector<double>::Zero(ev);
  }

  AttentionLayer layer;
  layer.d = int(d);
  layer.heads = heads;
  layer.head_dim = int(e / heads);
  layer.value_dim = int(ev / heads);
  layer.kind = kind;
  const Eigen::Index dh = layer.head_dim, dv = layer.value_dim;
  for (int h = 0; h < heads; ++h) {
    layer.WQ.push_back(Wq.middleRows(h * dh, dh).transpose());
    layer.WK.push_back(Wk.middleRows(h * dh, dh).transpose());
    layer.WV.push_back(Wv.middleRows(h * dv, dv).transpose());
    if (any_qkv_bias) {
      layer.bQ.push_back(bq->segment(h * dh, dh));
      layer.bK.push_back(bk->segment(h * dh, dh));
      layer.bV.push_back(bv->segment(h * dv, dv));
    }
  }
  layer.WO = Wo.transpose();
  if (bo) layer.bO = *bo;
  // The learned pre-normalisation weights, when the file has them under the prefix (PyTorch / timm
  // `norm.*`, timm `norm1.*`, GPT-2 `ln_1.*`, LLaMA `input_layernorm.*` / `attention_norm.*`); used only
  // with a pre-norm, never replaced by γ = 1, β = 0 silently (describe() in the CLI says which).
  for (const char* stem : {"norm", "norm1", "ln_1", "input_layernorm", "attention_norm"}) {
    const io::Array* g = set.find(std::string(stem) + ".weight");
    if (!g) continue;
    if (layer.norm_gamma.size() != 0)
      throw InputError(g->source, "a second pre-norm weight (select one with a prefix)");
    layer.norm_gamma = vector_of(*g, d);
    if (const io::Array* b = set.find(std::string(stem) + ".bias")) layer.norm_beta = vector_of(*b, d);
  }
  layer.rotary = rope.rotary;
  layer.validate();
  return layer;
}

}  // namespace regatta::operators
