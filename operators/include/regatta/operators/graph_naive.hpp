#pragma once
// The naive certificate of a graph that is not a recognised transformer
// (docs/models.md#certifying-a-model-file): a CERTIFIED upper bound on the global ℓ2 Lipschitz constant of
// the map from the graph's input to its logits, composed node by node over the graph (products along a path,
// sums where two paths meet), so that the ℓ2 ball of radius margin_lower / (√2·L) around an input keeps its
// label.
#include <optional>
#include <string>
#include <vector>

#include <regatta/graph/graph.hpp>
#include <regatta/operators/model_robustness.hpp>

namespace regatta::operators {

/// One factor {"logits", L, how}: L ≥ the global ℓ2 (Frobenius on tensors) Lipschitz constant of the graph's
/// output as a function of its one input, every operation rounded up. Per value: the input 1, constants 0;
/// per node: MatMul/Gemm/Conv with one constant operand its certified ‖W‖₂ (Conv: of the M × C·kh·kw kernel
/// matrix, times √(the patches an input entry can fall in)); Add/Sub the sum of the operands' bounds; Mul/Div
/// by a constant max|c| or 1/min|c|; Neg, ReLU, Tanh, Softmax, data movement and ReduceMean 1; Sigmoid 1/4;
/// exact GELU 1.13 (sup|GELU′| = Φ(√2) + √2·φ(√2) < 1.129); LayerNorm max|γ|/√ε; BatchNorm
/// max|γ|/√(var + ε); Concat √(Σ L_i²); a runtime operand broadcast to k times its size √k; Gather √(the most
/// times an index repeats). Any other node (a product of two runtime values, as attention scores are; Pow,
/// Sqrt, Erf, ...) has no global bound: std::nullopt, with the node named in why_not.
std::optional<std::vector<LipschitzFactor>> graph_lipschitz_factors(const graph::Graph& graph,
                                                                    std::string& why_not);

}  // namespace regatta::operators
