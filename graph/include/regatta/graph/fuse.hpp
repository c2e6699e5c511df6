#pragma once
// The fusion pass over an imported graph (docs/graph.md#fusion). The ONNX importer runs it after folding.
//
// Rewritten (each into one node of an existing kind, with the same real-number semantics):
//   * decomposed LayerNorm, as torch exports it below opset 17: ReduceMean → Sub → Pow 2 (or x·x) →
//     ReduceMean → Add ε → Sqrt → Div (or Reciprocal, Mul) [→ Mul γ] [→ Add β]  ⇒  layer_norm;
//   * decomposed GELU: x·½·(1 + erf(x/√2)) and ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), with the constants
//     the binary64 roundings of √2 (or 1/√2), √(2/π), 0.044715, ½  ⇒  gelu.
// Recognised and recorded, the nodes left as they are:
//   * RMSNorm, x / √(mean(x²) + ε) [· γ] (Graph::fusion.rms_norms);
//   * attention layers (Graph::attention): softmax over the key axis of scale·Q·Kᵀ [+ a constant mask],
//     times V, with Q, K, V constant per-token affine maps of tokens X (Y for keys and values) split into
//     heads by data movement, the heads merged back and an optional constant output projection.
#include <vector>

#include <regatta/graph/graph.hpp>

namespace regatta::graph {

/// Rewrites the LayerNorm and GELU subgraphs, removes the nodes they leave unused, then records the RMSNorms
/// and attention layers of the result in graph.fusion and graph.attention. The graph stays valid.
void fuse(Graph& graph);

/// The attention layers of a graph, as fuse() records them (nothing is rewritten).
std::vector<AttentionPattern> find_attention(const Graph& graph);

}  // namespace regatta::graph
