#pragma once
// Whole transformers as one map input ↦ logits, generic over the scalar type (double: the estimate;
// interval64: an enclosure of the exact forward pass of the binary64 weights on a binary64 or interval
// input). Four layouts (load_model): timm ViT (images), GPT-2, BERT and LLaMA (text).
//
//   input    images (InputStage::patches): X₀ = [cls; patches(x)·W_E + 1·b_Eᵀ] + P (the patch convolution,
//            kernel = stride = p, is the linear map W_E on each flattened patch (c, ky, kx); without a class
//            token X₀ has no first row); x is the flattened (C, H, W) image.
//            text (InputStage::tokens): x is the flattened n×d token-embedding matrix E (row i = the row of
//            the token embedding table for token i; embed_tokens looks it up), 1 ≤ n ≤ context, and
//            X₀ = N_E(E + P[0:n] + 1·tᵀ) with t the token-type-0 embedding (BERT; else 0), P the learned
//            position embedding (GPT-2, BERT; LLaMA has none: its positions enter through the rotary
//            embeddings of queries and keys) and N_E the embedding LayerNorm (BERT; else the identity). The
//            robustness question is posed in this embedding space: perturbations of E, positions and token
//            type added after.
//   blocks   pre-norm:  X ← X + MHA(LN₁(X)),  X ← X + MLP(LN₂(X))
//            post-norm: X ← LN₁(X + MHA(X)),  X ← LN₂(X + MLP(X))
//            MHA: multi-head dot-product softmax attention (causal for GPT-2 and LLaMA) with the biases of
//            the q, k, v and output projections and the layer's rotary embeddings (AttentionLayer; LLaMA:
//            grouped-query heads repeated over their groups, queries and keys rotated by their row index);
//            MLP(Y) = σ(Y·W₁ + 1b₁ᵀ)·W₂ + 1b₂ᵀ with σ the exact (erf) GELU, the tanh GELU or ReLU, or gated
//            (SwiGLU, LLaMA): MLP(Y) = (σ(Y·W_g + 1b_gᵀ) ⊙ (Y·W₁ + 1b₁ᵀ))·W₂ + 1b₂ᵀ with σ = SiLU,
//            SiLU(x) = x/(1 + e⁻ˣ), W_g = gate_proj, W₁ = up_proj, W₂ = down_proj
//   pooling  one row of the final tokens: cls: row 0; last: row n−1; mean: the mean of the patch tokens
//            (images) or of all tokens (text); then the final LayerNorm when the model has one (LN_f(X)₀ for
//            cls and last, LN_f of the mean for mean: LayerNorm is row-wise, so for cls and last it does not
//            matter whether it acts before or after pooling)
//   pooler   (BERT) pooled ← tanh(pooled·W_P + b_P), when the model has one
//   head     z = pooled·W_H + b_H (b_H = 0 for heads without bias: GPT-2's score and tied LM head)
// Every norm is row-wise with the learned γ and one ε (normalization.hpp): LayerNorm with β, or RMSNorm
// (LLaMA) y = γ ⊙ x/√(‖x‖²/d + ε), of the kind Model::norm. Vectors are rows, weights act
// from the right (torch's out×in Linear weights transposed; GPT-2's Conv1D weights are already in×out), as
// in layer.hpp.
#include <filesystem>
#include <string>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/normalization.hpp>

namespace regatta::operators {

/// σ of the MLP (gelu_erf, gelu_tanh, relu; silu for the gate of a SwiGLU MLP) or of BERT's pooler (tanh).
enum class Activation { gelu_erf, gelu_tanh, relu, tanh, silu };
enum class Pooling { cls, mean, last };
/// What the input x is: a flattened image (patch embedding) or a flattened token-embedding matrix.
enum class InputStage { patches, tokens };

std::string to_string(Activation activation);
std::string to_string(Pooling pooling);
std::string to_string(InputStage input);

/// y = x·W + b for a row x (W: in×out; b empty means 0).
struct Affine {
  Matrix<double> W;
  Vector<double> b;
};

/// Norm parameters (γ, β of length width; ε is the model's; RMSNorm: β empty). Empty γ: no norm there.
struct NormParameters {
  Vector<double> gamma, beta;
  bool present() const { return gamma.size() != 0; }
};

struct TransformerBlock {
  AttentionLayer attention;  ///< its norm_gamma/beta/eps are norm1 (used as the pre-norm when prenorm)
  NormParameters norm1, norm2;
  Affine fc1, fc2;  ///< width×mlp_width, mlp_width×width (SwiGLU: up_proj, down_proj)
  Affine gate;      ///< SwiGLU's gate_proj (width×mlp_width) or empty W: the MLP is not gated
  bool gated() const { return gate.W.size() != 0; }
};

struct Model {
  std::string layout = "timm-vit";  ///< timm-vit | gpt2 | bert | llama (the naming it was read from)
  InputStage input = InputStage::patches;
  int image_size = 0, patch_size = 0, channels = 0;  ///< images: square images, square patches
  int vocab = 0, context = 0;  ///< text: rows of the token embedding table and of pos_embed
  int width = 0, heads = 0, mlp_width = 0, classes = 0;
  bool prenorm = true;
  bool causal = false;                ///< causal attention mask (GPT-2, LLaMA)
  Prenorm norm = Prenorm::layernorm;  ///< the kind of every norm of the model: layernorm or rmsnorm (LLaMA)
  bool class_token = true;
  double eps = 1e-6;  ///< the norms' ε (every norm of the model)
  Activation activation = Activation::gelu_erf;
  Pooling pooling = Pooling::cls;
  Affine patch;                ///< images: (channels·p²)×width
  Vector<double> cls_token;    ///< images: width (when class_token)
  Matrix<double> token_embed;  ///< text: vocab×width, the table embed_tokens reads
  Vector<double> token_type;   ///< text: width (BERT's token type 0) or empty
  NormParameters embed_norm;   ///< text: the embedding LayerNorm (BERT) or absent
  Matrix<double> pos_embed;    ///< images: tokens()×width; text: context×width, or empty: none (LLaMA)
  std::vector<TransformerBlock> blocks;
  NormParameters final_norm;  ///< absent for BERT (its blocks end in a LayerNorm); LLaMA's model.norm
  Affine pooler;              ///< width×width, followed by tanh (BERT), or empty W: none
  Affine head;                ///< width×classes

  bool text() const { return input == InputStage::tokens; }
  int grid() const { return image_size / patch_size; }  ///< patches per side
  int patch_count() const { return grid() * grid(); }
  /// Images: the token count. Text: context (the longest input; an input of n tokens has n).
  int tokens() const { return text() ? context : patch_count() + (class_token ? 1 : 0); }
  /// Images: channels·image_size², the length of a flattened (C, H, W) row-major image. Text:
  /// context·width, the longest input (an input of n tokens has n·width entries).
  int input_size() const { return text() ? context * width : channels * image_size * image_size; }
  /// Whether x has a valid length: input_size() for images, n·width with 1 ≤ n ≤ context for text.
  bool accepts(Eigen::Index input_length) const;
  /// The flat input index of entry k = (c·p + ky)·p + kx of patch `patch` (row-major over the grid).
  int pixel_of(int patch, int k) const;
  /// Text: the flattened n×width matrix of the rows of token_embed for `ids` (each in [0, vocab), 1 ≤ n ≤
  /// context; asserted: callers check ids against the model first).
  Vector<double> embed_tokens(const std::vector<int>& ids) const;
  /// The options of every attention sub-block: residual, causal, and the pre-norm of kind `norm` when
  /// prenorm.
  AttentionOptions attention_options() const;
  /// Throws InputError naming the member for every inconsistent size or non-finite entry.
  void validate() const;
};

/// Reads a model from one safetensors file; the layout is recognised from the tensor names:
///   timm ViT: patch_embed.proj.{weight,bias}, cls_token, pos_embed, blocks.N.{norm1, attn.qkv, attn.proj,
///     norm2, mlp.fc1, mlp.fc2}.{weight,bias}, norm or fc_norm, head.
///   GPT-2 (optionally under "transformer."): wte, wpe, h.N.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc,
///     mlp.c_proj} (Conv1D: weights in×out, fused q|k|v), ln_f; pre-norm, causal; the head is score.weight
///     (classes×width, no bias; GPT2ForSequenceClassification) on the last token, or without it the LM head
///     lm_head.weight, else wte tied (classes = vocab: next-token prediction).
///   BERT (optionally under "bert."): embeddings.{word_embeddings, position_embeddings,
///     token_type_embeddings (row 0), LayerNorm}, encoder.layer.N.{attention.self.{query,key,value},
///     attention.output.dense, attention.output.LayerNorm, intermediate.dense, output.dense,
///     output.LayerNorm}, pooler.dense (+ tanh; optional), classifier (required); post-norm, CLS pooling.
///   LLaMA (Hugging Face LlamaForCausalLM / LlamaForSequenceClassification, optionally under "model."):
///     embed_tokens, layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm,
///     mlp.{gate,up,down}_proj}.weight (biases read when present), norm.weight; RMSNorm pre-norm, SwiGLU,
///     grouped-query attention (k_proj, v_proj of num_key_value_heads heads), rotary embeddings with
///     θ = "rope_theta" (default 10000), causal, the head on the last token: score.weight (classes×width,
///     no bias) or lm_head.weight, or the embedding tied when "tie_word_embeddings" is true; no position
///     table (context = "max_position_embeddings", default 2048).
/// The JSON config says what names cannot: "heads" (required; also read as Hugging Face's "n_head" or
/// "num_attention_heads"), "layernorm_eps" ("layer_norm_epsilon", "layer_norm_eps"; default 1e-6 for ViT,
/// 1e-5 for GPT-2, 1e-12 for BERT), "mlp_activation" ("activation_function", "hidden_act": gelu_erf =
/// gelu, gelu_tanh = gelu_new = gelu_pytorch_tanh, relu; default gelu_erf, for GPT-2 gelu_tanh), for ViT
/// "norm" (pre | post; default pre) and "pooling" (cls | mean; default cls with a class token), and
/// optionally "layout" (timm-vit | gpt2 | bert; "model_type" likewise) and sizes checked against the tensors
/// ("image_size", "patch_size", "channels", "classes", "depth"). `config` empty means config.json next to
/// the model. LLaMA's config keys are Hugging Face's LlamaConfig: "num_attention_heads",
/// "num_key_value_heads" (default: the heads), "rms_norm_eps" (default 1e-6), "rope_theta", "hidden_act"
/// (silu; the only one accepted), "tie_word_embeddings"; "rope_scaling" other than null and "head_dim" other
/// than width/heads are refused (not modelled). A file in no known layout throws InputError saying what was
/// found and what was expected (Meta's original LLaMA naming, tok_embeddings and layers.N.attention.wq: that
/// it is not read, convert to the Hugging Face naming). A tensor of the wrong shape throws InputError naming
/// the tensor, its shape and the shape expected; missing tensors and files, non-finite weights and a bad
/// config also throw InputError (one line).
Model load_model(const std::filesystem::path& path, const std::filesystem::path& config = {});

/// The affine input stage (tokens × width) of a flattened input x with model.accepts(x.size()) (asserted):
/// images X₀; text E + P[0:n] + 1·tᵀ, before the embedding LayerNorm (forward applies it).
template <class S>
Matrix<S> embed(const Model& model, const Vector<S>& x);
/// The pooled row (1×width) of the final tokens X, before the final norm: row 0 (cls), row n−1 (last) or
/// the mean of the patch tokens (images) / all tokens (text). Linear in X, so it maps tangents as well. A
/// one-row X is returned unchanged (already reduced to the pooled token).
template <class S>
Matrix<S> pool(const Model& model, const Matrix<S>& X);
/// The logits (classes) of a flattened input. double: a binary64 evaluation (an estimate); interval64: an
/// enclosure of the exact value.
template <class S>
Vector<S> forward(const Model& model, const Vector<S>& x);

/// σ applied entrywise, and its derivative σ′ entrywise (ReLU′(0) taken as [0, 1] for enclosures, 0 for
/// double). For interval64, enclosures: erf and exp endpoints from MPFR with directed rounding; GELU′ is
/// evaluated at the endpoints on its monotone pieces (−∞, −√2], [−√2, √2], [√2, ∞) and by the naive interval
/// formula on a piece boundary; tanh′ = 1 − tanh², for intervals from the enclosure of |tanh| (tanh is odd
/// and increasing) and intersected with [0, 1]. SiLU(x) = x·s(x), s = 1/(1 + e⁻ˣ): for intervals from its
/// monotone pieces (decreasing on (−∞, x*], increasing on [x*, ∞), x* ∈ (−1.2785, −1.2784) the root of
/// 1 + x(1 − s(x)), where SiLU(x*) = x* + 1 > −0.2785); SiLU′ = s·(1 + x(1 − s)) by the naive interval
/// formula.
template <class S>
Matrix<S> activate(Activation activation, const Matrix<S>& H);
template <class S>
Matrix<S> activation_derivative(Activation activation, const Matrix<S>& H);
/// activate(σ, H) into `value` and activation_derivative(σ, H) into `derivative` in one sweep, the same
/// numbers as the two calls (binary64; for gelu_erf Φ(x) is computed once per entry and read by both).
void activate_with_derivative(Activation activation, const Matrix<double>& H, Matrix<double>& value,
                              Matrix<double>& derivative);

}  // namespace regatta::operators
