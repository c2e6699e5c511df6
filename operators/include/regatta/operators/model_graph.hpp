#pragma once
// The safetensors layouts as front-ends of the graph (docs/graph.md#front-ends-safetensors-layouts): the
// forward function of an operators::Model (model.hpp) written as a graph::Graph of typed nodes, so that every
// graph analysis (inspect, local/attend on a named attention layer, attack, the affine pass, verify) runs on
// a timm ViT, GPT-2, BERT or LLaMA model read from safetensors as on an ONNX import.
#include <string>

#include <regatta/core/eigen.hpp>
#include <regatta/graph/graph.hpp>
#include <regatta/operators/model.hpp>

namespace regatta::operators {

/// The graph of forward(model, ·) on a flat input of `input_length` values, after the fusion pass
/// (graph::fuse: Graph::attention holds one layer per block, except LLaMA's, whose rotary embeddings are
/// outside the pattern the pass recognises). The graph has one input and one output:
///   images  input "pixels" [1, C, H, W] (the flattened (C, H, W) image), input_length = C·H·W;
///   text    input "embeddings" [n, width] (the n token-embedding rows forward takes), input_length = n·width
///           with 1 ≤ n ≤ context;
///   output  "logits" [1, classes].
/// Graph::source is `source` followed by the layout in parentheses ("model.safetensors (gpt2)"). Its real-
/// number function is the Model's, except: the causal mask is the additive constant −1e9 (a masked key keeps
/// a weight below e^(−1e9 + the row's score spread), where the Model's is exactly 0), and the rotary tables
/// (LLaMA) are constants holding the binary64 cos and sin of the binary64 angles (the Model's interval
/// forward encloses the exact ones). Throws InputError ("input") for a length the model does not accept, and
/// as model.validate().
graph::Graph model_graph(const Model& model, Eigen::Index input_length, const std::string& source = "model");

}  // namespace regatta::operators
