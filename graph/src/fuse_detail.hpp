#pragma once
// Internal to the fusion pass (graph/src/fuse.cpp, graph/src/fuse_attention.cpp): who produces and who reads
// every value, and the binary64 value of an expression of constants.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <regatta/graph/graph.hpp>

namespace regatta::graph::fuse_detail {

class Index {
 public:
  explicit Index(const Graph& g);
  const Graph& graph() const { return g_; }
  /// The node that computes value v, or nullptr (a constant or an input).
  const Node* producer(int v) const;
  int producer_index(int v) const { return producer_[static_cast<std::size_t>(v)]; }
  /// Indices of the nodes that read v (once per node).
  const std::vector<int>& users(int v) const { return users_[static_cast<std::size_t>(v)]; }
  /// v is read by exactly one node and is not a graph output.
  bool single_use(int v) const;
  /// v does not depend on a graph input (a constant, or computed from constants only).
  bool input_free(int v) const { return v >= 0 && input_free_[static_cast<std::size_t>(v)]; }
  /// The binary64 values of an input-free value (its data for a constant; otherwise its cone evaluated by
  /// graph::evaluate_all<double>); nullopt when v depends on an input.
  std::optional<std::vector<double>> constant_data(int v) const;
  /// The common value of an input-free v whose entries are all equal; nullopt otherwise.
  std::optional<double> scalar(int v) const;

 private:
  const Graph& g_;
  std::vector<int> producer_;
  std::vector<std::vector<int>> users_;
  std::vector<bool> is_output_, input_free_;
  mutable std::map<int, std::vector<double>> cache_;
};

/// The node's operand other than `v` for a two-input node that reads v once; -1 otherwise.
int other_operand(const Node& n, int v);

/// Attention layers of a graph (graph/src/fuse_attention.cpp); every other softmax node is appended to
/// `not_attention` (when given) as "name: reason".
std::vector<AttentionPattern> find_attention(const Graph& g, const Index& index,
                                             std::vector<std::string>* not_attention = nullptr);

}  // namespace regatta::graph::fuse_detail
