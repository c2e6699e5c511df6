// The rotary position embedding on one side of the scores (docs/graph.md#fusion): z ⊙ C + T(z) ⊙ S, C and S
// constant tables, T data movement with negations (Slice, Concat, Neg, Reshape, Transpose) of z alone. Which
// entry of z and which sign T puts at every entry is found by running T on 1, 2, 3, ... (exact: the nodes
// copy and negate values); whether that is rotate_half over the heads' coordinates is checked by the caller,
// who knows the heads (fuse_attention.cpp).
#include <algorithm>
#include <cmath>
#include <map>

#include <regatta/graph/evaluate.hpp>

#include "fuse_detail.hpp"

namespace regatta::graph::fuse_detail {

std::vector<double> broadcast(const std::vector<double>& data, const Shape& from, const Shape& to) {
  std::vector<double> out(static_cast<std::size_t>(element_count(to)));
  for (std::size_t e = 0; e < out.size(); ++e) {
    std::int64_t rest = static_cast<std::int64_t>(e), src = 0, stride = 1;
    for (std::size_t k = to.size(); k-- > 0;) {
      const std::int64_t i = rest % to[k];
      rest /= to[k];
      const std::size_t off = to.size() - k;
      if (off <= from.size()) {
        const std::int64_t dim = from[from.size() - off];
        src += (dim == 1 ? 0 : i) * stride;
        stride *= dim;
      }
    }
    out[e] = data[static_cast<std::size_t>(src)];
  }
  return out;
}

namespace {

bool turns(Op op) {
  return op == Op::slice || op == Op::concat || op == Op::neg || op == Op::reshape || op == Op::transpose ||
         op == Op::identity || op == Op::gather;
}

/// The runtime operand and the constant of a Mul by a constant of at most v's shape; nullopt otherwise.
std::optional<std::pair<int, int>> by_table(const Index& ix, int v) {
  const Node* n = ix.producer(v);
  if (!n || n->op != Op::mul || !ix.single_use(v)) return std::nullopt;
  for (int k = 0; k < 2; ++k) {
    const int a = n->inputs[static_cast<std::size_t>(k)], c = n->inputs[static_cast<std::size_t>(1 - k)];
    const Shape &as = ix.graph().values[static_cast<std::size_t>(a)].shape,
                &cs = ix.graph().values[static_cast<std::size_t>(c)].shape;
    bool fits = !ix.input_free(a) && ix.input_free(c) &&
                as == ix.graph().values[static_cast<std::size_t>(v)].shape && cs.size() <= as.size();
    for (std::size_t k = 1; fits && k <= cs.size(); ++k)
      fits = cs[cs.size() - k] == 1 || cs[cs.size() - k] == as[as.size() - k];
    if (fits) return std::pair{a, c};
  }
  return std::nullopt;
}

/// The nodes computing `to` from `z` alone by data movement and negation (each intermediate value read by
/// one node), in graph order; nullopt when `to` needs anything else.
std::optional<std::vector<int>> turn_nodes(const Index& ix, int to, int z) {
  std::vector<int> nodes, stack{to};
  std::map<int, bool> seen;
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    if (v == z || seen[v]) continue;
    seen[v] = true;
    const Node* n = ix.producer(v);
    if (!n || !turns(n->op) || (v != to && !ix.single_use(v))) return std::nullopt;
    nodes.push_back(ix.producer_index(v));
    for (int in : n->inputs) stack.push_back(in);
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

}  // namespace

std::optional<RotaryMatch> rotary_at(const Index& ix, int v, std::string& why) {
  const Graph& g = ix.graph();
  const Node* add = ix.producer(v);
  if (!add || add->op != Op::add || add->inputs.size() != 2) return std::nullopt;
  const auto a = by_table(ix, add->inputs[0]), b = by_table(ix, add->inputs[1]);
  if (!a || !b) return std::nullopt;
  // One product reads z itself, the other z moved and negated.
  for (int first = 0; first < 2; ++first) {
    const auto& direct = first == 0 ? *a : *b;
    const auto& turned = first == 0 ? *b : *a;
    const int z = direct.first;
    const auto nodes = turn_nodes(ix, turned.first, z);
    if (!nodes || nodes->empty()) continue;
    const Shape& shape = g.values[static_cast<std::size_t>(v)].shape;
    // T on the entries 1, 2, 3, ... of z: entry p of T(z) is sign(w)·z[|w| − 1].
    Graph sub;
    sub.source = g.source;
    sub.values.push_back(Value{"z", shape, false, {}});
    sub.inputs = {0};
    std::map<int, int> id{{z, 0}};
    for (int k : *nodes) {
      Node n = g.nodes[static_cast<std::size_t>(k)];
      for (int& in : n.inputs) in = id.at(in);
      id[n.output] = static_cast<int>(sub.values.size());
      sub.values.push_back(Value{"", g.values[static_cast<std::size_t>(n.output)].shape, false, {}});
      n.output = id[n.output];
      sub.nodes.push_back(std::move(n));
    }
    sub.outputs = {id.at(turned.first)};
    Tensor<double> start{shape, std::vector<double>(static_cast<std::size_t>(element_count(shape)))};
    for (std::size_t e = 0; e < start.data.size(); ++e) start.data[e] = static_cast<double>(e + 1);
    const auto moved = evaluate<double>(sub, {start})[0].data;
    RotaryMatch r;
    r.z = z;
    r.cos = direct.second;
    r.sin = turned.second;
    r.c = broadcast(*ix.constant_data(r.cos), g.values[static_cast<std::size_t>(r.cos)].shape, shape);
    r.s = broadcast(*ix.constant_data(r.sin), g.values[static_cast<std::size_t>(r.sin)].shape, shape);
    for (double w : moved) {
      r.partner.push_back(static_cast<std::int64_t>(std::fabs(w)) - 1);
      r.sign.push_back(w < 0 ? -1 : 1);
    }
    r.nodes = *nodes;
    r.nodes.push_back(ix.producer_index(v));
    r.nodes.push_back(ix.producer_index(add->inputs[0]));
    r.nodes.push_back(ix.producer_index(add->inputs[1]));
    return r;
  }
  why = "an Add of two products by constant tables that is not z*C + T(z)*S with T data movement of z";
  return std::nullopt;
}

std::optional<RotaryPattern> rotary_pattern(const RotaryMatch& r, std::int64_t out,
                                            const std::vector<std::int64_t>& column, std::int64_t heads,
                                            std::int64_t a, std::int64_t b, bool tokens_last,
                                            const std::vector<std::int64_t>& pos,
                                            const std::vector<std::int64_t>& zpos) {
  const std::int64_t tokens = tokens_last ? b : a, dim = tokens_last ? a : b, half = dim / 2;
  if (dim % 2 != 0) return std::nullopt;
  RotaryPattern p;
  p.cos = r.cos;
  p.sin = r.sin;
  p.cos_table.assign(static_cast<std::size_t>(tokens * dim), std::nan(""));
  p.sin_table = p.cos_table;
  // The projection entry that the entry of z at `at` reads (the inner chain's positions, already composed
  // into pos for the side's entries: invert through zpos).
  std::vector<std::int64_t> proj_of(r.partner.size(), -1);
  for (std::size_t e = 0; e < pos.size(); ++e) proj_of[static_cast<std::size_t>(zpos[e])] = pos[e];
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < a; ++i)
      for (std::int64_t j = 0; j < b; ++j) {
        const auto e = static_cast<std::size_t>((h * a + i) * b + j);
        const std::int64_t token = tokens_last ? j : i, coord = tokens_last ? i : j;
        const std::int64_t other = coord < half ? coord + half : coord - half;
        const auto z = static_cast<std::size_t>(zpos[e]);
        const std::int64_t from = proj_of[static_cast<std::size_t>(r.partner[z])];
        if (from < 0 || from / out != token ||
            from % out != column[static_cast<std::size_t>(h * dim + other)] ||
            r.sign[z] != (coord < half ? -1 : 1))
          return std::nullopt;
        auto& c = p.cos_table[static_cast<std::size_t>(token * dim + coord)];
        auto& sn = p.sin_table[static_cast<std::size_t>(token * dim + coord)];
        if (h == 0) {
          c = r.c[z];
          sn = r.s[z];
        } else if (!(c == r.c[z] && sn == r.s[z])) {
          return std::nullopt;
        }
      }
  return p;
}

}  // namespace regatta::graph::fuse_detail
