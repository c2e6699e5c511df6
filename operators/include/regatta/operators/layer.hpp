#pragma once
// Multi-head attention layers on token matrices (docs/math/attention.md#layers; PyTorch mapping in
// docs/math/README.md#pytorch-conventions).
//
// Our convention acts on row vectors from the right: for tokens X (n×d), head h has queries
// Q_h = X·WQ[h] + 1·bQ[h]ᵀ, keys K_h = X·WK[h] + 1·bK[h]ᵀ (d×head_dim each), values X·WV[h] + 1·bV[h]ᵀ
// (d×value_dim) and output block WO_h = WO.middleRows(h·value_dim, value_dim), WO being (heads·value_dim)×d.
//
// Kinds:
//   dot  P_h = softmax_row(Q_h K_hᵀ/√d_h + M)                       (docs/math/attention.md#dot-score,
//   docs/math/attention.md#multi-head)
//   l2   P_h = softmax_row(−‖q_i − k_j‖²/√d_h + M), tied WK = WQ,    (Kim et al. 2021;
//        docs/math/attention.md#l2-score, docs/math/attention.md#l2-mha)
//        value map X·A_h·WV_h with A_h = WQ_h WQ_hᵀ/√d_h.
//
// Rotary position embeddings (RoPE; Su et al. 2021, in the non-interleaved form of Hugging Face's LLaMA
// `apply_rotary_pos_emb` / `rotate_half`): with the rotary setting present, every head's queries and keys
// (after their biases) are rotated before the scores. Token i (the 0-based row of X, or of the context Y for
// keys: positions are row indices, the convention of the causal mask) has angles φ_{i,a} = i·θ^(−2a/d_h),
// a = 0..d_h/2−1, and row i of Q (or K) becomes, for each a with b = a + d_h/2,
//     q'_a = q_a·cos φ_{i,a} − q_b·sin φ_{i,a},   q'_b = q_b·cos φ_{i,a} + q_a·sin φ_{i,a}
// (HF: q∘cos + rotate_half(q)∘sin, cos = cat(cos φ, cos φ), rotate_half([x1, x2]) = [−x2, x1]). Values are
// not rotated. A fixed linear map per position, so every derivative composes with it; dot-product only, d_h
// even. Not modelled: rope_scaling (LLaMA 3.1's frequency rescaling), partial rotary widths (GPT-NeoX
// rotary_pct), positions other than the row indices (offsets of a key-value cache).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <regatta/core/eigen.hpp>

namespace regatta::operators {

enum class AttentionKind { dot, l2 };

/// Rotary position embeddings on the full head width (see the file comment).
struct Rotary {
  double theta = 10000;  ///< the base θ > 0 (Hugging Face rope_theta; LLaMA 1/2: 10000)
};

struct AttentionLayer {
  int d = 0;          ///< token dimension (rows of WQ, WK, WV; columns of WO)
  int heads = 0;      ///< H ≥ 1
  int head_dim = 0;   ///< d_h: columns of WQ[h], WK[h]
  int value_dim = 0;  ///< d_v: columns of WV[h]
  AttentionKind kind = AttentionKind::dot;
  std::vector<Matrix<double>> WQ, WK, WV;  ///< heads entries; d×head_dim, d×head_dim, d×value_dim
  Matrix<double> WO;                       ///< (heads·value_dim)×d
  std::vector<Vector<double>> bQ, bK,
      bV;             ///< empty (no bias) or heads entries of length head_dim / value_dim
  Vector<double> bO;  ///< empty (no bias) or length d
  /// Pre-normalisation parameters (used only when a pre-norm is requested,
  /// docs/math/attention.md#normalisation): γ, β empty
  /// (meaning 1 and 0) or of length d; ε > 0 (PyTorch's default 1e-5).
  Vector<double> norm_gamma, norm_beta;
  double norm_eps = 1e-5;
  /// Rotary position embeddings of queries and keys; absent: none.
  std::optional<Rotary> rotary;

  /// Throws InputError naming the member for every inconsistent size, a non-positive dimension or a
  /// non-finite entry; "rotary" for a θ that is not positive and finite, an odd head_dim, or an l2 layer
  /// (rotary embeddings are defined for dot-product scores).
  void validate() const;
  /// WK[h] == WQ[h] for every head and the query and key biases agree (both absent or equal).
  bool tied() const;
};

struct RandomLayerSpec {
  int d = 16;
  int heads = 2;
  int head_dim = 0;    ///< 0: d / heads (then heads must divide d)
  int value_dim = 0;   ///< 0: head_dim
  double scale = 1.0;  ///< entries are N(0, (scale/√d)²)
  std::uint64_t seed = 0;
  AttentionKind kind = AttentionKind::dot;  ///< l2 draws WK = WQ (tied) and bK = bQ
  bool biases = false;                      ///< draw bQ, bK, bV, bO with the same law
};

/// A seeded random layer; throws InputError for non-positive sizes, heads not dividing d when head_dim = 0,
/// or a non-positive / non-finite scale.
AttentionLayer random_layer(const RandomLayerSpec& spec);

/// Reads a layer from .npz or .safetensors in PyTorch or Hugging Face naming; only tensors whose names start
/// with `prefix` are considered, and a name matches a role when it equals prefix + role or ends in "." +
/// role.
///   PyTorch nn.MultiheadAttention: in_proj_weight (3E×d) [+ in_proj_bias], or q_proj_weight, k_proj_weight,
///     v_proj_weight; out_proj.weight (d×E) [+ out_proj.bias]
///   Hugging Face BERT: query|key|value.weight [+ .bias], output.dense.weight [+ .bias]
///   Hugging Face LLaMA: q_proj|k_proj|v_proj|o_proj.weight [+ .bias]; grouped-query attention (k_proj,
///     v_proj with kv_heads < heads heads) is expanded by repeating each key/value head over its group (the
///     same map). LLaMA attention rotates queries and keys (RoPE) with a θ the weights do not hold: the
///     caller must state it (`rope`), and a LLaMA-layout file loaded with nothing stated throws InputError
///     naming the file.
///   timm ViT: attn.qkv.weight (3E×d, rows q|k|v) [+ bias], attn.proj.weight [+ bias]
///   GPT-2: attn.c_attn.weight (Conv1D, d×3E) [+ bias], attn.c_proj.weight (E×d) [+ bias]
/// Linear weights are out×in, so WQ[h] = (W_q[h·d_h:(h+1)·d_h, :])ᵀ, WO = out_proj.weightᵀ.
/// Pre-norm weights, when present under the prefix, fill norm_gamma / norm_beta: norm.weight|bias
/// (PyTorch), norm1.* (timm), ln_1.* (GPT-2), input_layernorm.* / attention_norm.* (LLaMA); two of them
/// throw (ambiguous). norm_eps stays at its default (the file does not say it).
/// Every missing, ambiguous, ill-shaped or non-finite tensor, heads not dividing the projection width, and
/// an unknown extension throw InputError naming the file and the tensor.
/// Where W^O comes from: the file (the layouts above), or nowhere: W^O = I, the attention map alone (the
/// setting of Castin et al.), which needs heads·value_dim = d and a file without an output projection.
/// `rope` sets AttentionLayer::rotary for every layout (the weights never say it).
enum class OutputProjection { from_file, identity };

/// What the caller states about rotary position embeddings when loading.
struct RotaryStatement {
  bool stated = false;           ///< false: nothing stated (a LLaMA-layout file then throws)
  std::optional<Rotary> rotary;  ///< when stated: the setting, or nullopt for a layer without RoPE
  static RotaryStatement none() { return {true, std::nullopt}; }
  static RotaryStatement with_theta(double theta) { return {true, Rotary{theta}}; }
};

AttentionLayer load_layer(const std::filesystem::path& path, int heads,
                          AttentionKind kind = AttentionKind::dot, const std::string& prefix = "",
                          OutputProjection output = OutputProjection::from_file,
                          const RotaryStatement& rope = {});

std::string to_string(AttentionKind kind);
/// "dot" or "l2"; anything else throws InputError naming `subject`.
AttentionKind parse_attention_kind(const std::string& text, const std::string& subject = "--kind");

}  // namespace regatta::operators
