#pragma once
// A standard vision transformer recognised inside a fused graph::Graph
// (docs/models.md#recognised-transformers): the walk from the graph's single input through the patch
// convolution, the class token, the position table, the pre- or post-norm blocks (the attention layers the
// fusion pass recorded in Graph::attention, LayerNorm, an MLP with GELU or ReLU), the final LayerNorm, the
// pooling and the linear head, matching every node of the graph and reading every weight from the graph's
// constants. The result is the operators::Model of the same real-number function, so that the certificates of
// the block pipeline (model_affine.hpp) apply to the graph.
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/graph/graph.hpp>
#include <regatta/operators/graph_robustness.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_robustness.hpp>

namespace regatta::operators {

/// A graph recognised as a transformer: `model` computes the graph's function of its single input.
struct RecognisedTransformer {
  Model model;
  /// Graph input coordinate j (row-major over the input tensor) is model input coordinate model_index[j];
  /// empty: the identity (an image input of shape [C, H, W] or [1, C, H, W], or [1, H, W] with one channel,
  /// is already in the model's (C, H, W) order). A permutation, so ℓ2 and ℓ∞ distances are the same in both
  /// coordinates.
  std::vector<Eigen::Index> model_index;
  /// The model input of a graph input (the graph input's element count; asserted).
  Vector<double> model_input(const std::vector<double>& graph_input) const;
  /// "pre-norm ViT: 2 blocks, width 32, 4 heads, MLP 64 (gelu_erf), cls pooling, patch 2 on 1x8x8".
  std::string summary() const;
};

/// The transformer the graph computes, or nullopt with a one-line reason in *why_not (when given). The match
/// is structural and exact: every node of the graph belongs to one matched part, every weight is a constant
/// of the graph read bit for bit, ε from the layer_norm nodes (one ε for the whole model), the attention
/// scale's real value (its constants and input-free factors enclosed in interval64) lies inside the
/// enclosure of 1/√head_dim the block pipeline uses. After the match, a guard: the double forward of the
/// graph and of the model at three seeded points agree to 1e-10 relative (a safety net, not the proof).
std::optional<RecognisedTransformer> recognise_transformer(const graph::Graph& graph, std::string* why_not);

/// The length n of the token axis of the graph's one output: n for [1, n, C] or [n, C] with n > 1 (logits
/// per token, as a language model's head over every position writes them), 0 for any other output.
std::int64_t output_token_count(const graph::Graph& graph);

/// Makes the graph's output the logits of token `position` alone (0 <= position < output_token_count;
/// std::invalid_argument otherwise): a Gather of that row along the token axis is appended and becomes the
/// one output ([1, C] or [C]). recognise_transformer reads a head over every token followed by the first or
/// last token's row as the model pooling that token (docs/models.md#per-token-logits-one-position).
void select_output_token(graph::Graph& graph, std::int64_t position);

/// graph_input_robustness's row for a recognised transformer on the ℓ2 ball without a valid-range box: the
/// row `regatta certify` computes for the model itself (input_robustness with affine forms: the double and
/// interval64 margins, the attack of model_robustness.hpp, affine_certified_radius below it), the naive
/// column 0. Once options.stop is set the row is abandoned (returned unfinished, meaningless).
InputRobustness transformer_input_robustness(const RecognisedTransformer& transformer,
                                             const std::vector<double>& x, int label,
                                             const GraphRobustnessOptions& options);

}  // namespace regatta::operators
