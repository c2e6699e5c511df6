// The fusion pass (docs/graph.md#fusion): LayerNorm and GELU subgraphs rewritten into one node each, RMSNorm
// recognised, attention layers recorded (graph/src/fuse_attention.cpp), and the driver the importer calls.
#include <regatta/graph/fuse.hpp>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>

#include <regatta/graph/evaluate.hpp>

#include "fuse_detail.hpp"

namespace regatta::graph {

std::string to_string(AttentionMask mask) {
  switch (mask) {
    case AttentionMask::none:
      return "none";
    case AttentionMask::causal:
      return "causal";
    case AttentionMask::additive:
      return "additive";
  }
  return "?";
}

namespace fuse_detail {

Index::Index(const Graph& g)
    : g_(g),
      producer_(g.values.size(), -1),
      users_(g.values.size()),
      is_output_(g.values.size(), false),
      input_free_(g.values.size(), false) {
  for (std::size_t i = 0; i < g.values.size(); ++i) input_free_[i] = g.values[i].constant;
  for (int k = 0; k < static_cast<int>(g.nodes.size()); ++k) {
    const Node& n = g.nodes[static_cast<std::size_t>(k)];
    producer_[static_cast<std::size_t>(n.output)] = k;
    bool free = true;
    for (int id : n.inputs) {
      auto& u = users_[static_cast<std::size_t>(id)];
      if (std::find(u.begin(), u.end(), k) == u.end()) u.push_back(k);
      free = free && input_free_[static_cast<std::size_t>(id)];
    }
    input_free_[static_cast<std::size_t>(n.output)] = free;
  }
  for (int id : g.outputs) is_output_[static_cast<std::size_t>(id)] = true;
}

const Node* Index::producer(int v) const {
  const int k = producer_[static_cast<std::size_t>(v)];
  return k < 0 ? nullptr : &g_.nodes[static_cast<std::size_t>(k)];
}

bool Index::single_use(int v) const {
  return users_[static_cast<std::size_t>(v)].size() == 1 && !is_output_[static_cast<std::size_t>(v)];
}

std::optional<std::vector<double>> Index::constant_data(int v) const {
  const Value& value = g_.values[static_cast<std::size_t>(v)];
  if (value.constant) return value.data;
  if (!input_free(v)) return std::nullopt;
  if (const auto hit = cache_.find(v); hit != cache_.end()) return hit->second;
  // The cone of v (every node it depends on), evaluated on its own in binary64.
  std::vector<bool> in_cone(g_.values.size(), false);
  in_cone[static_cast<std::size_t>(v)] = true;
  std::vector<int> nodes;
  for (int k = producer_index(v); k >= 0; --k) {
    const Node& n = g_.nodes[static_cast<std::size_t>(k)];
    if (!in_cone[static_cast<std::size_t>(n.output)]) continue;
    nodes.push_back(k);
    for (int id : n.inputs) in_cone[static_cast<std::size_t>(id)] = true;
  }
  std::reverse(nodes.begin(), nodes.end());
  Graph sub;
  sub.source = g_.source;
  std::vector<int> renumber(g_.values.size(), -1);
  for (std::size_t i = 0; i < g_.values.size(); ++i)
    if (in_cone[i]) {
      renumber[i] = static_cast<int>(sub.values.size());
      sub.values.push_back(g_.values[i]);
    }
  for (int k : nodes) {
    Node n = g_.nodes[static_cast<std::size_t>(k)];
    for (int& id : n.inputs) id = renumber[static_cast<std::size_t>(id)];
    n.output = renumber[static_cast<std::size_t>(n.output)];
    sub.nodes.push_back(std::move(n));
  }
  sub.outputs = {renumber[static_cast<std::size_t>(v)]};
  auto all = evaluate_all<double>(sub, {});
  return cache_[v] = std::move(all[static_cast<std::size_t>(sub.outputs[0])].data);
}

std::optional<double> Index::scalar(int v) const {
  if (v < 0 || !input_free(v)) return std::nullopt;
  const auto data = constant_data(v);
  if (!data || data->empty()) return std::nullopt;
  for (double x : *data)
    if (x != data->front()) return std::nullopt;
  return data->front();
}

int other_operand(const Node& n, int v) {
  if (n.inputs.size() != 2) return -1;
  if (n.inputs[0] == v && n.inputs[1] != v) return n.inputs[1];
  if (n.inputs[1] == v && n.inputs[0] != v) return n.inputs[0];
  return -1;
}

}  // namespace fuse_detail

namespace {

using fuse_detail::Index;
using fuse_detail::other_operand;

/// One node replaced by a fused node; `ones` (when set) is a constant appended to the graph that input 1
/// of the fused node reads (a LayerNorm without γ).
struct Rewrite {
  int at = -1;
  Node node;
  std::optional<Value> ones;
};

const Shape& shape_of(const Graph& g, int v) { return g.values[static_cast<std::size_t>(v)].shape; }

/// The single node that reads v (v not a graph output), or nullptr.
const Node* only_user(const Index& ix, int v, Op op) {
  if (!ix.single_use(v)) return nullptr;
  const Node& n = ix.graph().nodes[static_cast<std::size_t>(ix.users(v)[0])];
  return n.op == op ? &n : nullptr;
}
int index_of(const Index& ix, const Node* n) { return ix.producer_index(n->output); }

/// The node squares v: Pow(v, 2) or Mul(v, v).
bool squares(const Index& ix, const Node& n, int v) {
  if (n.op == Op::pow) return n.inputs[0] == v && ix.scalar(n.inputs[1]) == 2.0;
  return n.op == Op::mul && n.inputs[0] == v && n.inputs[1] == v;
}

/// `c` is a constant that broadcasts into the normalised axes `tail` without enlarging them.
bool fits_tail(const Graph& g, int c, const Shape& tail) {
  const Value& v = g.values[static_cast<std::size_t>(c)];
  if (!v.constant) return false;
  const Shape& s = v.shape;
  for (std::size_t k = 0; k < s.size(); ++k) {
    const std::size_t from_end = s.size() - k;
    if (from_end > tail.size()) {
      if (s[k] != 1) return false;
    } else if (s[k] != 1 && s[k] != tail[tail.size() - from_end]) {
      return false;
    }
  }
  return true;
}

/// The node divides v by √(mean(v²) + ε) via Sqrt and Div, or multiplies v by its reciprocal (Sqrt and
/// Reciprocal or Div(1, ·), or Pow −½), starting at the node that
/// adds ε to `mean_square`; returns the dividing node and ε.
std::optional<std::pair<const Node*, double>> over_root(const Index& ix, int mean_square, int v) {
  const Node* add = only_user(ix, mean_square, Op::add);
  if (!add) return std::nullopt;
  const auto eps = ix.scalar(other_operand(*add, mean_square));
  if (!eps || !(*eps >= 0) ||
      element_count(shape_of(ix.graph(), add->output)) != element_count(shape_of(ix.graph(), mean_square)))
    return std::nullopt;
  // v times a reciprocal square root r of the sum: the Mul that reads r and v.
  const auto times_v = [&](int r) -> std::optional<std::pair<const Node*, double>> {
    if (const Node* mul = only_user(ix, r, Op::mul); mul && other_operand(*mul, r) == v)
      return std::pair{mul, *eps};
    return std::nullopt;
  };
  // (mean + ε)^(−1/2): torch's x ** -0.5.
  if (const Node* pow = only_user(ix, add->output, Op::pow); pow && pow->inputs[0] == add->output) {
    const auto e = ix.scalar(pow->inputs[1]);
    return e && *e == -0.5 ? times_v(pow->output) : std::nullopt;
  }
  const Node* root = only_user(ix, add->output, Op::sqrt);
  if (!root) return std::nullopt;
  if (const Node* div = only_user(ix, root->output, Op::div); div && div->inputs[1] == root->output) {
    if (div->inputs[0] == v) return std::pair{div, *eps};
    // 1 / √(mean + ε): how torch exports rsqrt (Hugging Face's LLaMA RMSNorm).
    const auto one = ix.scalar(div->inputs[0]);
    return one && *one == 1 ? times_v(div->output) : std::nullopt;
  }
  if (const Node* rec = only_user(ix, root->output, Op::reciprocal)) return times_v(rec->output);
  return std::nullopt;
}

/// The reduce_mean node averages over the trailing axes [axis, rank) keeping them: returns axis.
std::optional<std::int64_t> trailing_mean(const Graph& g, const Node& n) {
  if (n.op != Op::reduce_mean) return std::nullopt;
  const auto& a = std::get<ReduceMeanAttrs>(n.attributes);
  const auto rank = static_cast<std::int64_t>(shape_of(g, n.inputs[0]).size());
  if (!a.keepdims || a.axes.empty()) return std::nullopt;
  for (std::size_t k = 0; k < a.axes.size(); ++k)
    if (a.axes[k] != rank - static_cast<std::int64_t>(a.axes.size() - k)) return std::nullopt;
  return a.axes.front();
}

// ReduceMean → Sub → Pow 2 (x·x) → ReduceMean → Add ε → Sqrt → Div (Reciprocal·Mul) [→ Mul γ] [→ Add β],
// started at the first ReduceMean.
std::optional<Rewrite> layer_norm_at(const Graph& g, const Index& ix, const Node& m1) {
  const auto axis = trailing_mean(g, m1);
  if (!axis) return std::nullopt;
  const int x = m1.inputs[0];
  const Node* sub = only_user(ix, m1.output, Op::sub);
  if (!sub || sub->inputs[0] != x || sub->inputs[1] != m1.output) return std::nullopt;
  const int s = sub->output;
  const auto& users = ix.users(s);
  if (users.size() != 2 || std::find(g.outputs.begin(), g.outputs.end(), s) != g.outputs.end())
    return std::nullopt;
  const Node* sq = nullptr;
  for (int k : users)
    if (squares(ix, g.nodes[static_cast<std::size_t>(k)], s)) sq = &g.nodes[static_cast<std::size_t>(k)];
  if (!sq) return std::nullopt;
  const Node* m2 = only_user(ix, sq->output, Op::reduce_mean);
  if (!m2 || trailing_mean(g, *m2) != axis) return std::nullopt;
  const auto divide = over_root(ix, m2->output, s);
  if (!divide) return std::nullopt;
  const Node* last = divide->first;
  if (std::find(users.begin(), users.end(), index_of(ix, last)) == users.end()) return std::nullopt;
  const Shape tail(shape_of(g, x).begin() + *axis, shape_of(g, x).end());
  int gamma = -1, beta = -1;
  if (const Node* mul = only_user(ix, last->output, Op::mul)) {
    const int c = other_operand(*mul, last->output);
    if (c >= 0 && fits_tail(g, c, tail)) gamma = c, last = mul;
  }
  if (const Node* add = only_user(ix, last->output, Op::add)) {
    const int c = other_operand(*add, last->output);
    if (c >= 0 && fits_tail(g, c, tail)) beta = c, last = add;
  }
  Rewrite r;
  r.at = index_of(ix, last);
  r.node.op = Op::layer_norm;
  r.node.name = last->name;
  r.node.source_op = "LayerNorm (fused)";
  r.node.inputs = {x, gamma};
  if (beta >= 0) r.node.inputs.push_back(beta);
  r.node.output = last->output;
  r.node.attributes = LayerNormAttrs{*axis, divide->second};
  if (gamma < 0)
    r.ones = Value{last->name + "/fused_scale", tail, true,
                   std::vector<double>(static_cast<std::size_t>(element_count(tail)), 1.0)};
  return r;
}

/// x·p·½ in any association (x·p then ·½ or /2; p·½ then ·x; x·½ then ·p): the last node.
const Node* half_product(const Index& ix, int x, int p) {
  const Node* c1 = only_user(ix, p, Op::mul);
  if (!c1) return nullptr;
  const int o = other_operand(*c1, p);
  if (o < 0) return nullptr;
  if (o == x) {
    if (!ix.single_use(c1->output)) return nullptr;
    const Node& c2 = ix.graph().nodes[static_cast<std::size_t>(ix.users(c1->output)[0])];
    if (c2.op == Op::mul && ix.scalar(other_operand(c2, c1->output)) == 0.5) return &c2;
    if (c2.op == Op::div && c2.inputs[0] == c1->output && ix.scalar(c2.inputs[1]) == 2.0) return &c2;
    return nullptr;
  }
  if (ix.input_free(o) && ix.scalar(o) == 0.5) {
    const Node* c2 = only_user(ix, c1->output, Op::mul);
    return c2 && other_operand(*c2, c1->output) == x ? c2 : nullptr;
  }
  const Node* half = ix.producer(o);
  if (half && half->op == Op::mul && ix.single_use(o) && other_operand(*half, x) >= 0 &&
      ix.scalar(other_operand(*half, x)) == 0.5)
    return c1;
  return nullptr;
}

/// 1 + t for the node reading t: the Add, or nullptr.
const Node* one_plus(const Index& ix, int t) {
  const Node* add = only_user(ix, t, Op::add);
  return add && other_operand(*add, t) >= 0 && ix.scalar(other_operand(*add, t)) == 1.0 ? add : nullptr;
}

Rewrite gelu_rewrite(const Node& top, int x, bool tanh_form) {
  Rewrite r;
  r.node.op = Op::gelu;
  r.node.name = top.name;
  r.node.source_op = tanh_form ? "GELU tanh (fused)" : "GELU (fused)";
  r.node.inputs = {x};
  r.node.output = top.output;
  r.node.attributes = GeluAttrs{tanh_form};
  return r;
}

// x·½·(1 + erf(x/√2)), started at the Erf.
std::optional<Rewrite> erf_gelu_at(const Index& ix, const Node& e) {
  const int t = e.inputs[0];
  const Node* scaled = ix.producer(t);
  if (!scaled || !ix.single_use(t)) return std::nullopt;
  int x = -1;
  if (scaled->op == Op::div && ix.scalar(scaled->inputs[1]) == std::numbers::sqrt2) x = scaled->inputs[0];
  if (scaled->op == Op::mul)
    for (int k = 0; k < 2; ++k)
      if (ix.scalar(scaled->inputs[static_cast<std::size_t>(k)]) == std::numbers::sqrt2 / 2)
        x = scaled->inputs[static_cast<std::size_t>(1 - k)];
  if (x < 0 || ix.input_free(x)) return std::nullopt;
  const Node* p = one_plus(ix, e.output);
  const Node* top = p ? half_product(ix, x, p->output) : nullptr;
  if (!top) return std::nullopt;
  Rewrite r = gelu_rewrite(*top, x, false);
  r.at = index_of(ix, top);
  return r;
}

/// v = x³ (Pow(x, 3), x·(x·x) or (x·x)·x) with every intermediate used once: returns x.
int cube_root_operand(const Index& ix, int v) {
  const Node* n = ix.producer(v);
  if (!n || !ix.single_use(v)) return -1;
  if (n->op == Op::pow) return ix.scalar(n->inputs[1]) == 3.0 ? n->inputs[0] : -1;
  if (n->op != Op::mul) return -1;
  for (int k = 0; k < 2; ++k) {
    const int a = n->inputs[static_cast<std::size_t>(k)], b = n->inputs[static_cast<std::size_t>(1 - k)];
    const Node* sq = ix.producer(b);
    if (sq && sq->op == Op::mul && ix.single_use(b) && sq->inputs[0] == a && sq->inputs[1] == a) return a;
  }
  return -1;
}

// ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), started at the Tanh.
std::optional<Rewrite> tanh_gelu_at(const Index& ix, const Node& th) {
  const int u = th.inputs[0];
  const Node* mul = ix.producer(u);
  if (!mul || mul->op != Op::mul || !ix.single_use(u)) return std::nullopt;
  int w = -1;
  for (int k = 0; k < 2; ++k)
    if (ix.scalar(mul->inputs[static_cast<std::size_t>(k)]) == std::sqrt(2.0 / std::numbers::pi))
      w = mul->inputs[static_cast<std::size_t>(1 - k)];
  const Node* add = w >= 0 ? ix.producer(w) : nullptr;
  if (!add || add->op != Op::add || !ix.single_use(w)) return std::nullopt;
  int x = -1;
  for (int k = 0; k < 2 && x < 0; ++k) {
    const int a = add->inputs[static_cast<std::size_t>(k)], v = add->inputs[static_cast<std::size_t>(1 - k)];
    const Node* c = ix.producer(v);
    if (!c || c->op != Op::mul || !ix.single_use(v)) continue;
    for (int j = 0; j < 2; ++j)
      if (ix.scalar(c->inputs[static_cast<std::size_t>(j)]) == 0.044715 &&
          cube_root_operand(ix, c->inputs[static_cast<std::size_t>(1 - j)]) == a)
        x = a;
  }
  if (x < 0 || ix.input_free(x)) return std::nullopt;
  const Node* p = one_plus(ix, th.output);
  const Node* top = p ? half_product(ix, x, p->output) : nullptr;
  if (!top) return std::nullopt;
  Rewrite r = gelu_rewrite(*top, x, true);
  r.at = index_of(ix, top);
  return r;
}

/// Applies the rewrites and drops every node and value no output depends on (value ids renumbered).
void apply(Graph& g, std::vector<Rewrite> rewrites) {
  for (Rewrite& r : rewrites) {
    if (r.ones) {
      r.node.inputs[1] = static_cast<int>(g.values.size());
      g.values.push_back(std::move(*r.ones));
    }
    g.nodes[static_cast<std::size_t>(r.at)] = std::move(r.node);
  }
  std::vector<bool> live(g.values.size(), false);
  for (int id : g.outputs) live[static_cast<std::size_t>(id)] = true;
  for (int id : g.inputs) live[static_cast<std::size_t>(id)] = true;
  std::vector<bool> keep(g.nodes.size(), false);
  for (std::size_t k = g.nodes.size(); k-- > 0;)
    if (live[static_cast<std::size_t>(g.nodes[k].output)]) {
      keep[k] = true;
      for (int id : g.nodes[k].inputs) live[static_cast<std::size_t>(id)] = true;
    }
  std::vector<int> renumber(g.values.size(), -1);
  std::vector<Value> values;
  for (std::size_t i = 0; i < g.values.size(); ++i)
    if (live[i]) {
      renumber[i] = static_cast<int>(values.size());
      values.push_back(std::move(g.values[i]));
    }
  std::vector<Node> nodes;
  for (std::size_t k = 0; k < g.nodes.size(); ++k)
    if (keep[k]) {
      Node n = std::move(g.nodes[k]);
      for (int& id : n.inputs) id = renumber[static_cast<std::size_t>(id)];
      n.output = renumber[static_cast<std::size_t>(n.output)];
      nodes.push_back(std::move(n));
    }
  for (int& id : g.inputs) id = renumber[static_cast<std::size_t>(id)];
  for (int& id : g.outputs) id = renumber[static_cast<std::size_t>(id)];
  g.values = std::move(values);
  g.nodes = std::move(nodes);
}

// x / √(mean(x²) + ε) (over_root's forms), started at the mean of the squares.
std::optional<std::string> rms_norm_at(const Graph& g, const Index& ix, const Node& m) {
  if (!trailing_mean(g, m)) return std::nullopt;
  const Node* sq = ix.producer(m.inputs[0]);
  if (!sq || !ix.single_use(m.inputs[0])) return std::nullopt;
  const int x = sq->inputs[0];
  if (!squares(ix, *sq, x) || ix.input_free(x)) return std::nullopt;
  const auto divide = over_root(ix, m.output, x);
  if (!divide) return std::nullopt;
  return divide->first->name;
}

}  // namespace

std::vector<AttentionPattern> find_attention(const Graph& graph) {
  const Index ix(graph);
  return fuse_detail::find_attention(graph, ix);
}

void fuse(Graph& g) {
  FusionReport report;
  {
    const Index ix(g);
    std::vector<Rewrite> rewrites;
    for (const Node& n : g.nodes)
      if (n.op == Op::reduce_mean)
        if (auto r = layer_norm_at(g, ix, n)) rewrites.push_back(std::move(*r));
    for (const Rewrite& r : rewrites) report.layer_norms.push_back(r.node.name);
    if (!rewrites.empty()) apply(g, std::move(rewrites));
  }
  {
    const Index ix(g);
    std::vector<Rewrite> rewrites;
    for (const Node& n : g.nodes) {
      std::optional<Rewrite> r;
      if (n.op == Op::erf) r = erf_gelu_at(ix, n);
      if (n.op == Op::tanh) r = tanh_gelu_at(ix, n);
      if (r) rewrites.push_back(std::move(*r));
    }
    for (const Rewrite& r : rewrites) report.gelus.push_back(r.node.name);
    if (!rewrites.empty()) apply(g, std::move(rewrites));
  }
  const Index ix(g);
  for (const Node& n : g.nodes)
    if (n.op == Op::reduce_mean)
      if (auto name = rms_norm_at(g, ix, n)) report.rms_norms.push_back(*name);
  g.attention = fuse_detail::find_attention(g, ix, &report.not_attention);
  g.fusion = std::move(report);
  g.validate();
}

}  // namespace regatta::graph
