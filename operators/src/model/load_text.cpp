// The text-model layouts of load_model (model.hpp): GPT-2 (Conv1D weights, fused c_attn, pre-norm, causal,
// last-token head), BERT (separate q, k, v, post-norm, embedding LayerNorm, CLS pooler) and LLaMA (RMSNorm
// pre-norm, grouped-query attention with rotary embeddings, SwiGLU, causal, last-token head). The attention
// projections go through the layer adapter (layer_from_tensors, which knows both namings) after the shapes
// have been checked against the model's width here, so that a mismatch names the tensor and both shapes.
#include <cmath>
#include <regatta/core/error.hpp>
#include <regatta/operators/layer_tensors.hpp>
#include <regatta/operators/model.hpp>
#include <string>

#include "tensors.hpp"

namespace regatta::operators::detail {
namespace {

/// A 2-D tensor's shape (rows, cols), each nonzero, with `cols` fixed when cols_expected > 0.
Shape matrix_shape(const io::Array& a, std::size_t cols_expected, const std::string& expected) {
  if (a.shape.size() != 2 || a.shape[0] == 0 || a.shape[1] == 0 ||
      (cols_expected > 0 && a.shape[1] != cols_expected))
    throw InputError(a.source,
                     "shape " + io::shape_repr(a.shape) + " does not match the expected " + expected);
  return a.shape;
}

/// The LayerNorm `stem`.{weight,bias} of the model's width.
NormParameters norm(const Tensors& t, const std::string& stem, std::size_t width) {
  return {t.vector(stem + ".weight", width, "LayerNorm over the width"),
          t.vector(stem + ".bias", width, "LayerNorm over the width")};
}

/// The attention projections of one block through the layer adapter, on the tensors under `prefix`.
AttentionLayer attention(const Tensors& t, const std::string& prefix, int heads, double eps) {
  AttentionLayer a = layer_from_tensors(t.under(prefix), t.file(), heads, AttentionKind::dot, prefix);
  a.norm_eps = eps;
  return a;
}

/// The classifier head (classes×width, optional bias) read from a torch Linear weight `name`.
Affine linear_head(const Tensors& t, const std::string& name, const std::string& bias, std::size_t width,
                   const std::string& why) {
  const io::Array& w = t.find(name);
  const Shape s = matrix_shape(w, width, "(classes, " + std::to_string(width) + ")");
  Affine head;
  head.W = t.linear(name, s[0], width, why);
  head.b = t.has(bias) ? t.vector(bias, s[0], why + " bias") : Vector<double>::Zero(Eigen::Index(s[0]));
  return head;
}

/// A positive finite number at `key`, or `fallback` when absent.
double config_positive(const nlohmann::json& config, const std::string& key, double fallback,
                       const std::string& source) {
  if (!config.contains(key)) return fallback;
  const auto& v = config.at(key);
  const double x = v.is_number() ? v.get<double>() : -1.0;
  if (!(x > 0) || !std::isfinite(x))
    throw InputError(source + ": \"" + key + "\"", "expected a positive number, got " + v.dump());
  return x;
}

/// The Linear weight `name` (out×in) as in×out, with its bias when the file has one (else zeros).
Affine linear_with_optional_bias(const Tensors& t, const std::string& name, std::size_t out, std::size_t in,
                                 const std::string& why) {
  Affine a;
  a.W = t.linear(name + ".weight", out, in, why);
  a.b = t.has(name + ".bias") ? t.vector(name + ".bias", out, why + " bias")
                              : Vector<double>::Zero(Eigen::Index(out));
  return a;
}

/// MLP hidden width from the first block's input weight, and the number of blocks named `stem`N`tail`.
int count_blocks(const Tensors& t, const std::string& stem, const std::string& tail) {
  int depth = 0;
  while (t.has(stem + std::to_string(depth) + tail)) ++depth;
  return depth;
}

}  // namespace

Model gpt2_model(const Tensors& t, const std::string& p, const nlohmann::json& config,
                 const std::string& cfg) {
  check_layout(config, "gpt2", "gpt2", cfg);
  Model m;
  m.layout = "gpt2";
  m.input = InputStage::tokens;
  m.prenorm = true;
  m.causal = true;
  m.class_token = false;
  m.pooling = Pooling::last;
  const Shape wte = matrix_shape(t.find(p + "wte.weight"), 0, "(vocab, width)");
  m.vocab = int(wte[0]);
  m.width = int(wte[1]);
  const std::size_t W = wte[1];
  const Shape wpe = matrix_shape(t.find(p + "wpe.weight"), W, "(positions, " + std::to_string(W) + ")");
  m.context = int(wpe[0]);
  m.heads = config_heads(config, m.width, cfg);
  m.eps = config_eps(config, 1e-5, cfg);
  m.activation = config_activation(config, Activation::gelu_tanh, cfg);
  check_agrees(config, "n_embd", m.width, "wte.weight", cfg);
  check_agrees(config, "vocab_size", m.vocab, "wte.weight", cfg);
  check_agrees(config, "n_positions", m.context, "wpe.weight", cfg);
  m.token_embed = t.get(p + "wte.weight", wte, "token embedding").matrix();
  m.pos_embed = t.get(p + "wpe.weight", wpe, "position embedding").matrix();

  const int depth = count_blocks(t, p + "h.", ".attn.c_attn.weight");
  check_agrees(config, "depth", depth, "h.N.attn.c_attn.weight", cfg);
  check_agrees(config, "n_layer", depth, "h.N.attn.c_attn.weight", cfg);
  for (int b = 0; b < depth; ++b) {
    const std::string q = p + "h." + std::to_string(b) + ".";
    TransformerBlock blk;
    blk.norm1 = norm(t, q + "ln_1", W);
    blk.norm2 = norm(t, q + "ln_2", W);
    t.get(q + "attn.c_attn.weight", {W, 3 * W}, "Conv1D width x q|k|v");
    t.get(q + "attn.c_attn.bias", {3 * W}, "q|k|v biases");
    t.get(q + "attn.c_proj.weight", {W, W}, "Conv1D output projection");
    t.get(q + "attn.c_proj.bias", {W}, "output projection bias");
    blk.attention = attention(t, q, m.heads, m.eps);  // ln_1 is its pre-norm
    const io::Array& fc = t.find(q + "mlp.c_fc.weight");
    matrix_shape(fc, 0, "(" + std::to_string(W) + ", hidden)");
    if (b == 0) m.mlp_width = int(fc.shape[1]);
    const std::size_t M = std::size_t(m.mlp_width);
    blk.fc1.W = t.conv1d(q + "mlp.c_fc.weight", W, M, "Conv1D MLP input, the hidden width of block 0");
    blk.fc1.b = t.vector(q + "mlp.c_fc.bias", M, "MLP hidden bias");
    blk.fc2.W = t.conv1d(q + "mlp.c_proj.weight", M, W, "Conv1D MLP output");
    blk.fc2.b = t.vector(q + "mlp.c_proj.bias", W, "MLP output bias");
    m.blocks.push_back(std::move(blk));
  }
  m.final_norm = norm(t, p + "ln_f", W);
  // The head on the last token: a sequence classifier (score, no bias) or the language-model head, tied to
  // the token embedding unless the file has its own lm_head.
  if (t.has("score.weight")) {
    m.head = linear_head(t, "score.weight", "score.bias", W, "sequence classifier on the last token");
  } else if (t.has("lm_head.weight")) {
    m.head = linear_head(t, "lm_head.weight", "lm_head.bias", W, "language-model head");
  } else {
    m.head.W = m.token_embed.transpose();
    m.head.b = Vector<double>::Zero(m.vocab);
  }
  m.classes = int(m.head.W.cols());
  check_agrees(config, "classes", m.classes, "score.weight, or the vocabulary of the LM head", cfg);
  m.validate();
  return m;
}

Model bert_model(const Tensors& t, const std::string& p, const nlohmann::json& config,
                 const std::string& cfg) {
  check_layout(config, "bert", "bert", cfg);
  Model m;
  m.layout = "bert";
  m.input = InputStage::tokens;
  m.prenorm = false;
  m.causal = false;
  m.class_token = false;
  m.pooling = Pooling::cls;
  const std::string e = p + "embeddings.";
  const Shape words = matrix_shape(t.find(e + "word_embeddings.weight"), 0, "(vocab, width)");
  m.vocab = int(words[0]);
  m.width = int(words[1]);
  const std::size_t W = words[1];
  const Shape positions =
      matrix_shape(t.find(e + "position_embeddings.weight"), W, "(positions, " + std::to_string(W) + ")");
  m.context = int(positions[0]);
  m.heads = config_heads(config, m.width, cfg);
  m.eps = config_eps(config, 1e-12, cfg);
  m.activation = config_activation(config, Activation::gelu_erf, cfg);
  check_agrees(config, "hidden_size", m.width, "embeddings.word_embeddings.weight", cfg);
  check_agrees(config, "vocab_size", m.vocab, "embeddings.word_embeddings.weight", cfg);
  check_agrees(config, "max_position_embeddings", m.context, "embeddings.position_embeddings.weight", cfg);
  m.token_embed = t.get(e + "word_embeddings.weight", words, "token embedding").matrix();
  m.pos_embed = t.get(e + "position_embeddings.weight", positions, "position embedding").matrix();
  if (t.has(e + "token_type_embeddings.weight")) {
    const Shape types =
        matrix_shape(t.find(e + "token_type_embeddings.weight"), W, "(types, " + std::to_string(W) + ")");
    m.token_type = t.get(e + "token_type_embeddings.weight", types, "token type embedding").matrix().row(0);
  }
  m.embed_norm = norm(t, e + "LayerNorm", W);

  const int depth = count_blocks(t, p + "encoder.layer.", ".attention.self.query.weight");
  check_agrees(config, "depth", depth, "encoder.layer.N.attention.self.query.weight", cfg);
  check_agrees(config, "num_hidden_layers", depth, "encoder.layer.N.attention.self.query.weight", cfg);
  for (int b = 0; b < depth; ++b) {
    const std::string q = p + "encoder.layer." + std::to_string(b) + ".";
    TransformerBlock blk;
    for (const char* role : {"query", "key", "value"}) {
      t.get(q + "attention.self." + role + ".weight", {W, W}, std::string(role) + " projection");
      t.get(q + "attention.self." + role + ".bias", {W}, std::string(role) + " bias");
    }
    t.get(q + "attention.output.dense.weight", {W, W}, "output projection");
    t.get(q + "attention.output.dense.bias", {W}, "output projection bias");
    blk.attention = attention(t, q + "attention.", m.heads, m.eps);
    blk.norm1 = norm(t, q + "attention.output.LayerNorm", W);
    blk.norm2 = norm(t, q + "output.LayerNorm", W);
    const io::Array& fc = t.find(q + "intermediate.dense.weight");
    matrix_shape(fc, W, "(hidden, " + std::to_string(W) + ")");
    if (b == 0) m.mlp_width = int(fc.shape[0]);
    const std::size_t M = std::size_t(m.mlp_width);
    blk.fc1.W = t.linear(q + "intermediate.dense.weight", M, W, "MLP input, the hidden width of block 0");
    blk.fc1.b = t.vector(q + "intermediate.dense.bias", M, "MLP hidden bias");
    blk.fc2.W = t.linear(q + "output.dense.weight", W, M, "MLP output");
    blk.fc2.b = t.vector(q + "output.dense.bias", W, "MLP output bias");
    m.blocks.push_back(std::move(blk));
  }
  if (t.has(p + "pooler.dense.weight")) {
    m.pooler.W = t.linear(p + "pooler.dense.weight", W, W, "pooler on the CLS token");
    m.pooler.b = t.vector(p + "pooler.dense.bias", W, "pooler bias");
  }
  if (!t.has("classifier.weight"))
    throw InputError(t.file(),
                     "missing tensor 'classifier.weight' (the classification head on the pooled "
                     "CLS token; a bare BertModel has none)");
  m.head = linear_head(t, "classifier.weight", "classifier.bias", W, "classifier");
  m.classes = int(m.head.W.cols());
  check_agrees(config, "classes", m.classes, "classifier.weight", cfg);
  m.validate();
  return m;
}

Model llama_model(const Tensors& t, const std::string& p, const nlohmann::json& config,
                  const std::string& cfg) {
  check_layout(config, "llama", "llama", cfg);
  Model m;
  m.layout = "llama";
  m.input = InputStage::tokens;
  m.prenorm = true;
  m.norm = Prenorm::rmsnorm;
  m.causal = true;
  m.class_token = false;
  m.pooling = Pooling::last;
  m.activation = Activation::silu;
  const Shape embed = matrix_shape(t.find(p + "embed_tokens.weight"), 0, "(vocab, width)");
  m.vocab = int(embed[0]);
  m.width = int(embed[1]);
  const std::size_t W = embed[1];
  m.heads = config_heads(config, m.width, cfg);
  const std::size_t hd = W / std::size_t(m.heads);
  check_agrees(config, "hidden_size", m.width, "embed_tokens.weight", cfg);
  check_agrees(config, "vocab_size", m.vocab, "embed_tokens.weight", cfg);
  check_agrees(config, "head_dim", int(hd),
               "hidden_size / num_attention_heads (other head widths are not modelled)", cfg);
  m.context = config.contains("max_position_embeddings") ? config_int(config, "max_position_embeddings", cfg)
                                                         : 2048;  // LlamaConfig's default
  m.eps = config_positive(config, "rms_norm_eps", 1e-6, cfg);
  const std::string act = config_string(config, "hidden_act", "silu", cfg);
  if (act != "silu")
    throw InputError(cfg + ": \"hidden_act\"", "'" + act + "' is not silu (the SwiGLU MLP of LLaMA)");
  if (config.contains("rope_scaling") && !config.at("rope_scaling").is_null())
    throw InputError(cfg + ": \"rope_scaling\"",
                     "rescaled rotary frequencies are not modelled (only plain RoPE with rope_theta)");
  const Rotary rotary{config_positive(config, "rope_theta", 10000.0, cfg)};  // LlamaConfig's default
  // Grouped-query attention: k_proj and v_proj hold num_key_value_heads heads of the query head width.
  const io::Array& k0 = t.find(p + "layers.0.self_attn.k_proj.weight");
  const Shape k_shape =
      matrix_shape(k0, W, "(kv_heads x " + std::to_string(hd) + ", " + std::to_string(W) + ")");
  const int kv_heads = config.contains("num_key_value_heads")
                           ? config_int(config, "num_key_value_heads", cfg)
                           : m.heads;  // LlamaConfig: num_key_value_heads defaults to num_attention_heads
  if (m.heads % kv_heads != 0)
    throw InputError(cfg + ": \"num_key_value_heads\"",
                     std::to_string(kv_heads) + " does not divide the heads " + std::to_string(m.heads));
  const std::size_t KV = std::size_t(kv_heads) * hd;
  if (k_shape[0] != KV)
    t.get(p + "layers.0.self_attn.k_proj.weight", {KV, W}, "num_key_value_heads x head_dim");
  m.token_embed = t.get(p + "embed_tokens.weight", embed, "token embedding").matrix();

  const int depth = count_blocks(t, p + "layers.", ".self_attn.q_proj.weight");
  check_agrees(config, "num_hidden_layers", depth, "layers.N.self_attn.q_proj.weight", cfg);
  for (int b = 0; b < depth; ++b) {
    const std::string q = p + "layers." + std::to_string(b) + ".";
    TransformerBlock blk;
    blk.norm1.gamma = t.vector(q + "input_layernorm.weight", W, "RMSNorm over the width");
    blk.norm2.gamma = t.vector(q + "post_attention_layernorm.weight", W, "RMSNorm over the width");
    t.get(q + "self_attn.q_proj.weight", {W, W}, "query projection, heads x head_dim");
    t.get(q + "self_attn.k_proj.weight", {KV, W}, "key projection, num_key_value_heads x head_dim");
    t.get(q + "self_attn.v_proj.weight", {KV, W}, "value projection, num_key_value_heads x head_dim");
    t.get(q + "self_attn.o_proj.weight", {W, W}, "output projection");
    // The layer adapter expands the key/value groups (repeat_kv) and reads input_layernorm as the pre-norm.
    blk.attention =
        layer_from_tensors(t.under(q), t.file(), m.heads, AttentionKind::dot, q, OutputProjection::from_file,
                           RotaryStatement::with_theta(rotary.theta));
    blk.attention.norm_eps = m.eps;
    const io::Array& up = t.find(q + "mlp.up_proj.weight");
    matrix_shape(up, W, "(intermediate, " + std::to_string(W) + ")");
    if (b == 0) m.mlp_width = int(up.shape[0]);
    const std::size_t M = std::size_t(m.mlp_width);
    blk.gate =
        linear_with_optional_bias(t, q + "mlp.gate_proj", M, W, "SwiGLU gate, the hidden width of block 0");
    blk.fc1 = linear_with_optional_bias(t, q + "mlp.up_proj", M, W, "SwiGLU up, the hidden width of block 0");
    blk.fc2 = linear_with_optional_bias(t, q + "mlp.down_proj", W, M, "SwiGLU down");
    m.blocks.push_back(std::move(blk));
  }
  m.final_norm.gamma = t.vector(p + "norm.weight", W, "final RMSNorm");
  // The head on the last token: a sequence classifier (score, no bias), the language-model head, or the
  // token embedding when the config ties them.
  if (t.has("score.weight")) {
    m.head = linear_head(t, "score.weight", "score.bias", W, "sequence classifier on the last token");
  } else if (t.has("lm_head.weight")) {
    m.head = linear_head(t, "lm_head.weight", "lm_head.bias", W, "language-model head");
  } else if (config.contains("tie_word_embeddings") && config.at("tie_word_embeddings") == true) {
    m.head.W = m.token_embed.transpose();
    m.head.b = Vector<double>::Zero(m.vocab);
  } else {
    throw InputError(t.file(),
                     "missing tensor 'lm_head.weight' or 'score.weight' (the head on the last token; the "
                     "embedding is tied only when the config says \"tie_word_embeddings\": true)");
  }
  m.classes = int(m.head.W.cols());
  check_agrees(config, "classes", m.classes, "score.weight, or the vocabulary of the LM head", cfg);
  m.validate();
  return m;
}

}  // namespace regatta::operators::detail
