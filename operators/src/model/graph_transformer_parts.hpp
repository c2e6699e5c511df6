#pragma once
// The parts of a transformer recognised in a graph (docs/models.md#recognised-transformers), matched one at a
// time by graph_transformer.cpp's walk: each part consumes the nodes it explains, checks that its runtime
// operands are the values the walk expects, and reads its weights from the graph's constants bit for bit.
// Any mismatch throws Refusal with a one-line reason.
#include <string>
#include <vector>

#include <regatta/graph/graph.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/model.hpp>

namespace regatta::operators::recognise {

struct Refusal {
  std::string reason;
};

/// "node 'name' (Kind)" for messages.
std::string describe(const graph::Node& node);

class Matcher {
 public:
  explicit Matcher(const graph::Graph& graph);

  const graph::Graph& graph() const { return g_; }
  const graph::Value& value(int v) const { return g_.values[std::size_t(v)]; }
  const graph::Shape& shape(int v) const { return value(v).shape; }
  /// The nodes reading value v (identity nodes are followed by skip_identity instead).
  const std::vector<int>& users(int v) const { return users_[std::size_t(v)]; }
  /// The node defining v, or nullptr for graph inputs and constants.
  const graph::Node* producer(int v) const;

  /// Marks a node as explained; throws when a part already consumed it.
  void consume(int node);
  /// The first node no part consumed, or -1.
  int unconsumed() const;

  /// v after a chain of single-use identity nodes (each consumed).
  int skip_identity(int v);
  /// The one node reading v (after identity nodes); throws naming `what` unless there is exactly one and it
  /// is of kind `op`.
  int only_user(int& v, graph::Op op, const std::string& what);
  /// The one node of kind `op` among the readers of v (after identity nodes; other readers are left to the
  /// parts that expect them); throws naming `what` when there is none or more than one.
  int user_of_kind(int& v, graph::Op op, const std::string& what);
  /// Which of the node's first two inputs is not `v` (throws unless the node reads v exactly once there).
  int other_operand(const graph::Node& node, int v, const std::string& what) const;

  /// The data of a constant of `count` elements (throws naming `what` for a runtime value or another size).
  const std::vector<double>& constant(int v, std::int64_t count, const std::string& what) const;

  /// x·W + b for the rows of v: MatMul with a constant [in, out] (then an Add of a constant [out] bias, if
  /// there is one), or Gemm (alpha = beta = 1, A = v not transposed, B constant, C the bias): v's one
  /// reader, or the one MatMul/Gemm among its readers. Advances v to the result; `in` the width of v's rows.
  Affine linear(int& v, int in, const std::string& what);

  /// The LayerNorm reading v (user_of_kind), over v's last axis (advancing v to its output): γ, β (β absent:
  /// zeros), and its ε.
  NormParameters layer_norm(int& v, int width, double& eps, const std::string& what);

  /// The self-attention layer the fusion pass recorded on input v (Graph::attention), consumed: every node
  /// it lists and the input-free nodes of its scale. The layer's graph nodes read only v, each other's
  /// outputs and constants; its scale's real value must lie inside the enclosure 1/√head_dim of the block
  /// pipeline (model/affine/attention.cpp). The layer may read v through same-order data movement (the
  /// fusion pass looks through it) and its output may be carried back to tokens × width the same way
  /// (torchvision's sequence-first attention): both are consumed. Advances v to the layer's output. No mask,
  /// or for `text` also the causal one (then `causal` is set; it is cleared otherwise).
  AttentionLayer attention(int& v, int width, int& heads, bool text, bool& causal, const std::string& what);

 private:
  /// The interval64 enclosure [lo, hi] of the real value of an input-free scalar, consuming the nodes that
  /// compute it (a constant; Pow(constant, ±1/2); Sqrt(constant); any of them under identity nodes or
  /// reshapes, such as the Cast torch writes after the Pow).
  std::pair<double, double> scalar_enclosure(int v, const std::string& what);
  bool input_free(int v) const;
  /// Whether the node keeps its input's data in the same row-major order (reshape, identity, a transpose that
  /// moves only axes of length 1).
  bool same_order(const graph::Node& node) const;
  /// Whether u is v carried through same-order nodes only; if so consumes them (each once: the query, key
  /// and value projections may read one such path).
  bool same_order_path(int u, int v);

  const graph::Graph& g_;
  std::vector<std::vector<int>> users_;
  std::vector<int> producer_;
  std::vector<bool> consumed_;
};

/// LLaMA's parts (graph_transformer_llama.cpp). Whether an RMSNorm x / √(mean(x²) + ε) · γ reads v, and its
/// output (-1: none).
bool reads_rms_norm(const Matcher& m, int v);
int rms_norm_output(const Matcher& m, int v);
/// The RMSNorm reading v (consumed; v advanced to its output): γ (β empty) and ε (one ε for the model).
NormParameters rms_norm(Matcher& m, int& v, int width, double& eps, const std::string& what);
/// Whether v is read by two MatMuls (a gated MLP's gate and up projections).
bool reads_gated_mlp(const Matcher& m, int v);
/// The SwiGLU MLP silu(v·W_gate + b) ⊙ (v·W_up + b) · W_down + b from v (advanced to its output) into
/// block.gate, fc1 (up) and fc2 (down); `hidden` the MLP width (-1: set it; else it must agree).
void gated_mlp(Matcher& m, int& v, int width, TransformerBlock& block, int& hidden);

}  // namespace regatta::operators::recognise
