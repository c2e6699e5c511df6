#pragma once
// The attention layers of a model as layers for `regatta local` and `regatta attend` (--model M.onnx or
// M.safetensors --node NAME --input X.npy; docs/cli.md#attention-layers-of-an-onnx-model): the graph (the
// ONNX import, or the graph of a safetensors layout, docs/graph.md#front-ends-safetensors-layouts) evaluated
// at the model's input, the tokens at the named layer's input, and the layer rebuilt from the weights the
// fusion pass recorded.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <regatta/core/eigen.hpp>
#include "layer_options.hpp"

namespace regatta::cli {

/// One attention layer of a model, ready for the operators: layer and options (the mask gives --causal),
/// the tokens X at its input (n x d), the context Y for cross-attention (0 rows for self-attention) and
/// the graph's own value at the layer's output (n x d) for the callers' consistency check.
struct ModelLayer {
  ResolvedLayer resolved;
  std::string node;
  Matrix<double> X, context, graph_output;
  double scale = 0;     ///< the factor on Q·Kᵀ in the graph
  bool folded = false;  ///< the factor is not 1/√d_h in binary64: it was folded into W_Q and b_Q
};

/// Registers --model and --node (the source beside --layer and --random).
void add_model_options(CLI::App* cmd, LayerArgs& args);

/// The layers named by --node (every attention layer for "all" when `allow_all`) of --model evaluated at
/// the model input `input` (.npy/.npz/.safetensors; for an ONNX model the model's input shape, or that shape
/// without its leading 1; for a safetensors model any shape with the model's flat input length: C·H·W pixels,
/// or n x width token embeddings). InputError, one line, for: --model with --layer/--random or with an option
/// that would change the layer (--heads, --prefix, --kind, --causal, --residual, --prenorm, --sinkhorn,
/// --norm-eps,
/// --no-out-proj, --rope), a model with no attention layer, --node missing or unknown (the names found are
/// listed), an input of the wrong shape, an additive (non-causal) mask, cross-attention where
/// `allow_cross` is false, and an ONNX model when regatta was built without ONNX.
std::vector<ModelLayer> model_layers(const LayerArgs& args, const std::string& input, bool allow_all,
                                     bool allow_cross);

}  // namespace regatta::cli
