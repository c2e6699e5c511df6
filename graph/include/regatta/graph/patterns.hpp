#pragma once
// What the fusion pass (docs/graph.md#fusion) found in a graph: the attention layers it recognised, recorded
// beside the plain nodes (which stay as they are), and how many LayerNorm / GELU subgraphs it rewrote.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace regatta::graph {

/// The mask added to the scores before the softmax.
enum class AttentionMask : std::uint8_t {
  none,      ///< no mask
  causal,    ///< query i sees keys j <= i (the others masked: mask entries of -1e4 or below)
  additive,  ///< any other constant additive mask (`mask` holds it)
};

/// A rotary position embedding on the queries or the keys of an attention layer (docs/graph.md#fusion):
/// row i of every head's Q_h (K_h) becomes q ⊙ cos_i + rotate_half(q) ⊙ sin_i, rotate_half([q₁, q₂]) =
/// [−q₂, q₁] over the head's coordinates (the convention of Hugging Face's LLaMA), after the bias. The tables
/// are the graph's constants as the layer applies them, the same for every head; the θ that generates them is
/// not read here (operators::rotary_theta recovers it and checks the tables bit for bit).
struct RotaryPattern {
  int cos = -1, sin = -1;         ///< value ids of the constant tables in the graph
  std::vector<double> cos_table;  ///< rows x head_dim (rows: tokens for Q, context tokens for K)
  std::vector<double> sin_table;  ///< rows x head_dim
};

/// One attention layer: out = Σ_h softmax_row(scale·Q_h K_hᵀ + M)·V_h·WO_h + 1·bOᵀ, with
/// Q_h = X·WQ[h] + 1·bQ[h]ᵀ, K_h = Y·WK[h] + 1·bK[h]ᵀ, V_h = Y·WV[h] + 1·bV[h]ᵀ (Y = X for self-attention),
/// Q_h and K_h then rotated when q_rotary / k_rotary are present, in the row-vector convention of
/// operators::AttentionLayer (docs/math/attention.md#layers). Matrices are row-major std::vectors of binary64
/// values read from the graph's constants.
struct AttentionPattern {
  std::string name;        ///< the softmax node's name (or "attention_K" when it has none)
  int input = -1;          ///< value id of the query tokens X (its data read as tokens x width)
  int context = -1;        ///< value id of the key/value tokens Y (== input for self-attention)
  int output = -1;         ///< value id of the layer's output (after WO and bO), tokens x out_width
  int tokens = 0;          ///< n: rows of X
  int context_tokens = 0;  ///< m: rows of Y
  int width = 0;           ///< d: columns of X and Y
  int out_width = 0;       ///< columns of the output (d for every standard layer)
  int heads = 0, head_dim = 0, value_dim = 0;
  double scale = 0;  ///< the factor on Q·Kᵀ: the product of the constant factors on its path (binary64)
  AttentionMask mask = AttentionMask::none;
  std::vector<double> mask_values;  ///< additive: tokens x context_tokens (-inf where masked); else empty
  /// The largest entry counted as masked (<= -1e4; -inf when none): the graph's exact function leaves those
  /// keys a weight below e^(mask_fill + spread of the row's scores), which a masked layer sets to 0.
  double mask_fill = 0;
  std::vector<std::vector<double>> wq, wk, wv;  ///< per head: width x head_dim (value_dim for wv)
  std::vector<std::vector<double>> bq, bk, bv;  ///< per head (head_dim / value_dim); empty: no bias
  std::vector<double> wo;  ///< (heads·value_dim) x out_width; the merge permutation when no projection
  std::vector<double> bo;  ///< out_width, or empty
  bool output_projection = false;  ///< a constant linear map follows the merged heads
  /// The rotary embeddings of Q_h and K_h (absent: none), applied before the scores.
  std::optional<RotaryPattern> q_rotary, k_rotary;
  std::vector<int> nodes;  ///< indices into Graph::nodes of the nodes the layer consists of
  bool self() const { return input == context; }
};

/// What the fusion pass rewrote and recognised (counts and node names, for inspection).
struct FusionReport {
  std::vector<std::string> layer_norms;  ///< decomposed LayerNorms rewritten into one layer_norm node
  std::vector<std::string> gelus;        ///< decomposed GELUs (erf or tanh form) rewritten into one gelu node
  std::vector<std::string> rms_norms;    ///< RMSNorm subgraphs recognised (left as plain nodes)
  /// Softmax nodes not recorded as attention, each as "name: reason" (e.g. a mask that varies by head).
  std::vector<std::string> not_attention;
};

std::string to_string(AttentionMask mask);

}  // namespace regatta::graph
