#pragma once
// Internal to the fusion pass (graph/src/fuse.cpp, graph/src/fuse_attention.cpp, graph/src/fuse_rotary.cpp):
// who produces and who reads every value, and the binary64 value of an expression of constants.
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

/// `data` of shape `from` broadcast (numpy rules) to `to` (graph/src/fuse_rotary.cpp).
std::vector<double> broadcast(const std::vector<double>& data, const Shape& from, const Shape& to);

/// A rotary embedding v = z ⊙ C + T(z) ⊙ S (graph/src/fuse_rotary.cpp), by entry p of v (row-major).
struct RotaryMatch {
  int z = -1;                         ///< the rotated value (v's shape)
  int cos = -1, sin = -1;             ///< the constant tables C and S
  std::vector<double> c, s;           ///< C and S broadcast to v's shape
  std::vector<std::int64_t> partner;  ///< the entry of z that T puts at p
  std::vector<int> sign;              ///< and its sign, −1 or +1
  std::vector<int> nodes;             ///< the nodes from z to v (not those computing the tables)
};

/// The rotary embedding whose Add computes v; nullopt when v is not computed so (`why` set when v is an Add
/// of two products by constants that is not one).
std::optional<RotaryMatch> rotary_at(const Index& ix, int v, std::string& why);

/// The rotary embedding r on one side of the scores (Q or Kᵀ, of shape [heads..., a, b], tokens on the last
/// axis when tokens_last) as a RotaryPattern, when it is q ⊙ cos + rotate_half(q) ⊙ sin on every head
/// (rotate_half(q)_c = −q_{c+dim/2} for c < dim/2, q_{c−dim/2} otherwise) with tables that depend on the
/// token and the coordinate alone; nullopt otherwise. `out`: the projection's width; `column`: the projection
/// column of head h, coordinate c; `pos`: the projection entry of every entry of the side; `zpos`: the
/// rotary embedding's entry of it.
std::optional<RotaryPattern> rotary_pattern(const RotaryMatch& r, std::int64_t out,
                                            const std::vector<std::int64_t>& column, std::int64_t heads,
                                            std::int64_t a, std::int64_t b, bool tokens_last,
                                            const std::vector<std::int64_t>& pos,
                                            const std::vector<std::int64_t>& zpos);

/// Attention layers of a graph (graph/src/fuse_attention.cpp); every other softmax node is appended to
/// `not_attention` (when given) as "name: reason".
std::vector<AttentionPattern> find_attention(const Graph& g, const Index& index,
                                             std::vector<std::string>* not_attention = nullptr);

}  // namespace regatta::graph::fuse_detail
