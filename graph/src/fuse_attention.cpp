// Attention layers recognised in a graph (docs/graph.md#fusion): from each softmax over the last axis, back
// to the scores MatMul and its two operands, back from each through data movement and scalar factors to a
// constant per-token affine map (MatMul/Gemm [+ bias]) of a token matrix; forward to the values MatMul, the
// merge of the heads and an optional constant output projection. Which head and coordinate every entry of
// Q, Kᵀ and V comes from is found by running the data movement itself on the flat indices 0, 1, 2, ... of
// the projection's output (exact: the movement nodes copy values), so any Split/Slice/Reshape/Transpose
// arrangement of the heads is read the same way.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <set>

#include <regatta/graph/evaluate.hpp>

#include "fuse_detail.hpp"

namespace regatta::graph::fuse_detail {

namespace {

/// Mask entries at or below this value count as masked: the softmax weight they leave in the graph's exact
/// function is below e^(-1e4 + s), s the spread of the scores of the row (the pattern records the largest
/// such entry, mask_fill, so that the caller can state the difference).
constexpr double masked_below = -1e4;

struct Failure {
  std::string reason;
};

const Shape& shape_of(const Graph& g, int v) { return g.values[static_cast<std::size_t>(v)].shape; }
std::int64_t count_of(const Graph& g, int v) { return element_count(shape_of(g, v)); }

bool moves_data(Op op) {
  return op == Op::reshape || op == Op::transpose || op == Op::slice || op == Op::gather ||
         op == Op::expand || op == Op::identity;
}

/// A path of data movement and scalar factors from `from` to a later value.
struct Chain {
  int from = -1;
  std::vector<int> nodes;  // forward order
  double factor = 1;
};

/// The runtime operand of a Mul/Div by an input-free scalar that keeps its shape, and the factor.
std::optional<std::pair<int, double>> scaled_operand(const Index& ix, const Node& n) {
  const Graph& g = ix.graph();
  if (n.op == Op::mul)
    for (int k = 0; k < 2; ++k) {
      const int a = n.inputs[static_cast<std::size_t>(k)], c = n.inputs[static_cast<std::size_t>(1 - k)];
      const auto s = ix.scalar(c);
      if (s && !ix.input_free(a) && shape_of(g, a) == shape_of(g, n.output)) return std::pair{a, *s};
    }
  if (n.op == Op::div) {
    const auto s = ix.scalar(n.inputs[1]);
    if (s && *s != 0 && !ix.input_free(n.inputs[0]) && shape_of(g, n.inputs[0]) == shape_of(g, n.output))
      return std::pair{n.inputs[0], 1 / *s};
  }
  return std::nullopt;
}

Chain back_chain(const Index& ix, int v) {
  Chain c;
  while (const Node* n = ix.producer(v)) {
    if (moves_data(n->op)) {
      c.nodes.push_back(ix.producer_index(v));
      v = n->inputs[0];
    } else if (const auto s = scaled_operand(ix, *n)) {
      c.nodes.push_back(ix.producer_index(v));
      c.factor *= s->second;
      v = s->first;
    } else {
      break;
    }
  }
  std::reverse(c.nodes.begin(), c.nodes.end());
  c.from = v;
  return c;
}

/// Where every entry of the chain's last value comes from: the chain's data movement (scalar factors
/// skipped) run on the flat indices of its start.
std::vector<std::int64_t> positions(const Graph& g, const Chain& c) {
  Graph sub;
  sub.source = g.source;
  sub.values.push_back(Value{"start", shape_of(g, c.from), false, {}});
  sub.inputs = {0};
  for (int k : c.nodes) {
    Node n = g.nodes[static_cast<std::size_t>(k)];
    if (!moves_data(n.op)) {
      n.op = Op::identity;
      n.attributes = std::monostate{};
    }
    n.inputs = {static_cast<int>(sub.values.size()) - 1};
    n.output = static_cast<int>(sub.values.size());
    sub.values.push_back(Value{"", shape_of(g, g.nodes[static_cast<std::size_t>(k)].output), false, {}});
    sub.nodes.push_back(std::move(n));
  }
  sub.outputs = {static_cast<int>(sub.values.size()) - 1};
  Tensor<double> start{shape_of(g, c.from),
                       std::vector<double>(static_cast<std::size_t>(count_of(g, c.from)))};
  std::iota(start.data.begin(), start.data.end(), 0.0);
  const auto out = evaluate<double>(sub, {start});
  return std::vector<std::int64_t>(out[0].data.begin(), out[0].data.end());
}

/// A constant per-token affine map P = X·W + 1·bᵀ (W: in x out, row-major).
struct Projection {
  int x = -1;  // the token matrix, after the data-order-preserving reshapes/transposes before it
  std::int64_t rows = 0, in = 0, out = 0;
  std::vector<double> w, b;
  std::vector<int> nodes;
};

/// A constant `c` holding one value per column of an `out`-wide matrix (shape [1, ..., 1, out]).
std::optional<std::vector<double>> per_column(const Index& ix, int c, std::int64_t out) {
  if (!ix.input_free(c)) return std::nullopt;
  const Shape& s = shape_of(ix.graph(), c);
  if (s.empty() || s.back() != out || element_count(s) != out) return std::nullopt;
  return ix.constant_data(c);
}

/// Back from a projection's input through nodes that keep its data in the same order with the same width.
int token_source(const Index& ix, int v) {
  const Graph& g = ix.graph();
  const std::int64_t width = shape_of(g, v).back();
  while (const Node* n = ix.producer(v)) {
    const int from = n->inputs[0];
    if (shape_of(g, from).empty() || shape_of(g, from).back() != width) break;
    bool same_order = n->op == Op::reshape || n->op == Op::identity;
    if (n->op == Op::transpose) {
      const auto& perm = std::get<TransposeAttrs>(n->attributes).perm;
      std::int64_t last = -1;
      same_order = true;
      for (std::int64_t axis : perm)
        if (shape_of(g, from)[static_cast<std::size_t>(axis)] != 1) {
          same_order = same_order && axis > last;
          last = axis;
        }
    }
    if (!same_order) break;
    v = from;
  }
  return v;
}

std::optional<Projection> projection(const Index& ix, int p) {
  const Graph& g = ix.graph();
  Projection r;
  const Node* n = ix.producer(p);
  if (!n || shape_of(g, p).size() < 2) return std::nullopt;
  r.out = shape_of(g, p).back();
  if (r.out <= 0 || count_of(g, p) == 0) return std::nullopt;  // an empty tensor has no tokens to read
  if (n->op == Op::add)
    for (int k = 0; k < 2 && r.b.empty(); ++k) {
      const int a = n->inputs[static_cast<std::size_t>(k)], c = n->inputs[static_cast<std::size_t>(1 - k)];
      if (ix.input_free(a) || shape_of(g, a) != shape_of(g, p)) continue;
      if (const auto b = per_column(ix, c, r.out)) {
        r.b = *b;
        r.nodes.push_back(ix.producer_index(p));
        n = ix.producer(a);
      }
    }
  if (!n) return std::nullopt;
  int a = -1;
  std::vector<double> w;
  std::int64_t in = 0;
  if (n->op == Op::matmul && !ix.input_free(n->inputs[0]) && ix.input_free(n->inputs[1]) &&
      shape_of(g, n->inputs[1]).size() == 2 && shape_of(g, n->inputs[0]).size() >= 2) {
    a = n->inputs[0];
    in = shape_of(g, n->inputs[1])[0];
    w = *ix.constant_data(n->inputs[1]);
  } else if (n->op == Op::gemm && !ix.input_free(n->inputs[0]) && ix.input_free(n->inputs[1])) {
    const auto& at = std::get<GemmAttrs>(n->attributes);
    if (at.trans_a || at.alpha != 1 || at.beta != 1) return std::nullopt;
    a = n->inputs[0];
    const Shape& bs = shape_of(g, n->inputs[1]);
    const std::vector<double> b = *ix.constant_data(n->inputs[1]);
    in = at.trans_b ? bs[1] : bs[0];
    w.resize(b.size());
    for (std::int64_t i = 0; i < in; ++i)
      for (std::int64_t j = 0; j < r.out; ++j)
        w[static_cast<std::size_t>(i * r.out + j)] =
            b[static_cast<std::size_t>(at.trans_b ? j * in + i : i * r.out + j)];
    if (n->inputs.size() == 3) {
      const auto c = per_column(ix, n->inputs[2], r.out);
      if (!c || !r.b.empty()) return std::nullopt;
      r.b = *c;
    }
  } else {
    return std::nullopt;
  }
  if (in <= 0 || shape_of(g, a).back() != in || static_cast<std::int64_t>(w.size()) != in * r.out)
    return std::nullopt;
  r.nodes.push_back(ix.producer_index(n->output));
  r.x = token_source(ix, a);
  r.in = in;
  r.rows = count_of(g, a) / in;
  r.w = std::move(w);
  return r;
}

/// One side of the scores (Q, Kᵀ) or the values: its projection and, for each head h and coordinate c of
/// the head, the projection column it reads (heads x dim entries).
struct Side {
  Projection proj;
  Chain chain;  // from the projection (or the rotary embedding) to the side
  std::vector<std::int64_t> column;
  std::optional<RotaryMatch> rotary;
  Chain inner;  // with a rotary embedding: from the projection to its z
  std::optional<RotaryPattern> pattern;
};

/// `v` has shape [batch..., a, b] with batch product `heads`; `tokens_last` says whether the token axis is
/// b (Kᵀ) or a (Q, V). Every entry must read projection row = its token and one column per (head, coord).
std::optional<Side> side(const Index& ix, int v, std::int64_t heads, bool tokens_last, const char* what,
                         std::string& why) {
  const Graph& g = ix.graph();
  Side s;
  s.chain = back_chain(ix, v);
  auto p = projection(ix, s.chain.from);
  if (!p) {
    std::string rotary_why;
    s.rotary = rotary_at(ix, s.chain.from, rotary_why);
    if (s.rotary) {
      s.inner = back_chain(ix, s.rotary->z);
      p = projection(ix, s.inner.from);
    }
    if (!p) {
      why = std::string(what) + " is not a constant linear map of tokens" +
            (s.rotary ? " (before its rotary embedding)" : "") +
            (rotary_why.empty() ? "" : " (" + rotary_why + ")");
      return std::nullopt;
    }
  }
  s.proj = *p;
  const Shape& sh = shape_of(g, v);
  const std::int64_t a = sh[sh.size() - 2], b = sh.back();
  const std::int64_t tokens = tokens_last ? b : a, dim = tokens_last ? a : b;
  if (s.proj.rows != tokens) {
    why = std::string(what) + " has " + std::to_string(tokens) + " tokens, its projection " +
          std::to_string(s.proj.rows) + " rows";
    return std::nullopt;
  }
  auto pos = positions(g, s.chain);
  std::vector<std::int64_t> zpos;  // with a rotary embedding: the entry of z (or its result) of each entry
  if (s.rotary) {
    zpos = pos;
    const auto before = positions(g, s.inner);
    for (auto& e : pos) e = before[static_cast<std::size_t>(e)];
  }
  s.column.assign(static_cast<std::size_t>(heads * dim), -1);
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < a; ++i)
      for (std::int64_t j = 0; j < b; ++j) {
        const std::int64_t at = pos[static_cast<std::size_t>((h * a + i) * b + j)];
        const std::int64_t token = tokens_last ? j : i, coord = tokens_last ? i : j;
        auto& col = s.column[static_cast<std::size_t>(h * dim + coord)];
        if (at / s.proj.out != token || (col >= 0 && col != at % s.proj.out)) {
          why = std::string(what) + " does not split the projection into heads token by token";
          return std::nullopt;
        }
        col = at % s.proj.out;
      }
  if (s.rotary)
    s.pattern = rotary_pattern(*s.rotary, s.proj.out, s.column, heads, a, b, tokens_last, pos, zpos);
  if (s.rotary && !s.pattern) {
    why = std::string(what) + "'s rotary embedding is not q*cos + rotate_half(q)*sin over each head's " +
          "coordinates with tables the same for every head";
    return std::nullopt;
  }
  return s;
}

/// Per head: the `dim` columns of W (in x out) that side reads, as an in x dim row-major matrix.
std::vector<std::vector<double>> head_weights(const Side& s, std::int64_t heads, std::int64_t dim) {
  std::vector<std::vector<double>> w(static_cast<std::size_t>(heads));
  for (std::int64_t h = 0; h < heads; ++h) {
    auto& m = w[static_cast<std::size_t>(h)];
    m.resize(static_cast<std::size_t>(s.proj.in * dim));
    for (std::int64_t r = 0; r < s.proj.in; ++r)
      for (std::int64_t c = 0; c < dim; ++c)
        m[static_cast<std::size_t>(r * dim + c)] = s.proj.w[static_cast<std::size_t>(
            r * s.proj.out + s.column[static_cast<std::size_t>(h * dim + c)])];
  }
  return w;
}
std::vector<std::vector<double>> head_biases(const Side& s, std::int64_t heads, std::int64_t dim) {
  if (s.proj.b.empty()) return {};
  std::vector<std::vector<double>> b(static_cast<std::size_t>(heads));
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t c = 0; c < dim; ++c)
      b[static_cast<std::size_t>(h)].push_back(
          s.proj.b[static_cast<std::size_t>(s.column[static_cast<std::size_t>(h * dim + c)])]);
  return b;
}

std::optional<AttentionPattern> match(const Index& ix, int softmax_index, std::string& why) {
  const Graph& g = ix.graph();
  const Node& sm = g.nodes[static_cast<std::size_t>(softmax_index)];
  const auto rank = static_cast<std::int64_t>(shape_of(g, sm.output).size());
  const auto& sa = std::get<SoftmaxAttrs>(sm.attributes);
  if (rank < 2 || sa.first_axis != rank - 1 || sa.end_axis != rank) {
    why = "the softmax is not over the last axis alone";
    return std::nullopt;
  }
  std::vector<int> nodes{softmax_index};
  // Back from the softmax: scalar factors and constant masks, down to the scores MatMul.
  struct MaskStep {
    const Node* node;
    double factor = 1;
    int constant = -1, runtime = -1;
  };
  std::vector<MaskStep> steps;
  int v = sm.inputs[0];
  const Node* scores = nullptr;
  while (const Node* n = ix.producer(v)) {
    const int k = ix.producer_index(v);
    if (n->op == Op::matmul && !ix.input_free(n->inputs[0]) && !ix.input_free(n->inputs[1])) {
      scores = n;
      nodes.push_back(k);
      break;
    }
    MaskStep step{n};
    if (const auto s = scaled_operand(ix, *n)) {
      step.factor = s->second;
      step.runtime = s->first;
    } else if (n->op == Op::add && ix.input_free(n->inputs[0]) != ix.input_free(n->inputs[1])) {
      const int c = ix.input_free(n->inputs[0]) ? 0 : 1;
      step.constant = n->inputs[static_cast<std::size_t>(c)];
      step.runtime = n->inputs[static_cast<std::size_t>(1 - c)];
    } else if (n->op == Op::where && ix.input_free(n->inputs[1]) != ix.input_free(n->inputs[2])) {
      const int c = ix.input_free(n->inputs[1]) ? 1 : 2;
      step.constant = n->inputs[static_cast<std::size_t>(c)];
      step.runtime = n->inputs[static_cast<std::size_t>(3 - c)];
    } else {
      why = "no MatMul of two runtime operands (the scores) before the softmax";
      return std::nullopt;
    }
    if (shape_of(g, step.runtime) != shape_of(g, v)) {
      why = "a mask or factor broadcasts the scores to a larger shape";
      return std::nullopt;
    }
    steps.push_back(step);
    nodes.push_back(k);
    v = step.runtime;
  }
  if (!scores) {
    why = "no MatMul of two runtime operands (the scores) before the softmax";
    return std::nullopt;
  }
  const Shape& ss = shape_of(g, scores->output);
  const Shape &qs = shape_of(g, scores->inputs[0]), &ks = shape_of(g, scores->inputs[1]);
  if (qs.size() != ss.size() || ks.size() != ss.size() || !std::equal(qs.begin(), qs.end() - 2, ss.begin()) ||
      !std::equal(ks.begin(), ks.end() - 2, ss.begin())) {
    why = "the scores MatMul broadcasts its batch axes";
    return std::nullopt;
  }
  const std::int64_t n = ss[ss.size() - 2], m = ss.back(), hd = qs.back();
  if (element_count(ss) == 0 || hd <= 0) {
    why = "empty scores";
    return std::nullopt;
  }
  const std::int64_t heads = element_count(ss) / (n * m);
  // The values: the one MatMul that reads the softmax.
  const Node* values =
      ix.single_use(sm.output) ? &g.nodes[static_cast<std::size_t>(ix.users(sm.output)[0])] : nullptr;
  if (!values || values->op != Op::matmul || values->inputs[0] != sm.output ||
      shape_of(g, values->inputs[1]).size() != ss.size() ||
      !std::equal(ss.begin(), ss.end() - 2, shape_of(g, values->inputs[1]).begin()) ||
      shape_of(g, values->inputs[1])[ss.size() - 2] != m) {
    why = "the softmax is not read by one MatMul with the values";
    return std::nullopt;
  }
  const std::int64_t dv = shape_of(g, values->inputs[1]).back();
  if (dv <= 0) {
    why = "empty values";
    return std::nullopt;
  }
  nodes.push_back(ix.producer_index(values->output));
  const auto q = side(ix, scores->inputs[0], heads, false, "Q", why);
  if (!q) return std::nullopt;
  const auto k = side(ix, scores->inputs[1], heads, true, "K", why);
  if (!k) return std::nullopt;
  const auto val = side(ix, values->inputs[1], heads, false, "V", why);
  if (!val) return std::nullopt;
  if (k->proj.x != val->proj.x || q->proj.in != k->proj.in || k->proj.in != val->proj.in) {
    why = "keys and values are not maps of the same tokens";
    return std::nullopt;
  }
  if (val->rotary) {
    why = "the values are rotated (a rotary embedding applies to queries and keys)";
    return std::nullopt;
  }
  if (val->chain.factor != 1) {
    why = "a constant factor scales the values";
    return std::nullopt;
  }
  // The mask, applied in order to a·scores + M (where-masked entries: a = 0, M = the fill).
  const std::size_t count = static_cast<std::size_t>(element_count(ss));
  std::vector<double> a(count, 1), mk(count, 0);
  double factor = q->chain.factor * q->inner.factor * k->chain.factor * k->inner.factor;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    if (it->constant < 0) {
      for (std::size_t e = 0; e < count; ++e) a[e] *= it->factor, mk[e] *= it->factor;
      factor *= it->factor;
      continue;
    }
    const auto c = broadcast(*ix.constant_data(it->constant), shape_of(g, it->constant), ss);
    if (it->node->op == Op::add) {
      for (std::size_t e = 0; e < count; ++e) mk[e] += c[e];
    } else {
      const auto cond =
          broadcast(*ix.constant_data(it->node->inputs[0]), shape_of(g, it->node->inputs[0]), ss);
      const bool runtime_when_true = it->runtime == it->node->inputs[1];
      for (std::size_t e = 0; e < count; ++e)
        if ((cond[e] != 0) != runtime_when_true) a[e] = 0, mk[e] = c[e];
    }
  }
  if (!(factor > 0) || !std::isfinite(factor)) {
    why = "the factor on the scores is not positive";
    return std::nullopt;
  }
  std::vector<double> mask(static_cast<std::size_t>(n * m));
  double fill = -std::numeric_limits<double>::infinity();
  for (std::size_t e = 0; e < count; ++e) {
    const bool masked = mk[e] <= masked_below;
    if (masked) fill = std::max(fill, mk[e]);
    if (!masked && a[e] == 0) {
      why = "a Where replaces scores by a value above -1e4 (not a mask)";
      return std::nullopt;
    }
    const double entry = masked ? -std::numeric_limits<double>::infinity() : mk[e];
    auto& slot = mask[e % static_cast<std::size_t>(n * m)];
    if (e < mask.size())
      slot = entry;
    else if (slot != entry) {
      why = "the mask differs between heads";
      return std::nullopt;
    }
  }
  AttentionPattern p;
  p.mask_fill = fill;
  bool zero = true, causal = n == m;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < m; ++j) {
      const double e = mask[static_cast<std::size_t>(i * m + j)];
      zero = zero && e == 0;
      causal = causal && (j <= i ? e == 0 : std::isinf(e));
    }
  p.mask = zero ? AttentionMask::none : causal ? AttentionMask::causal : AttentionMask::additive;
  if (p.mask == AttentionMask::additive) p.mask_values = std::move(mask);

  // The merge of the heads: forward through data movement to the last value laid out as n x (heads·dv).
  Chain merge;
  merge.from = values->output;
  std::vector<std::int64_t> column;  // merged column of head h, coordinate c
  int merged = -1;
  {
    std::vector<int> path;
    int w = values->output;
    while (ix.single_use(w)) {
      const int u = ix.users(w)[0];
      const Node& un = g.nodes[static_cast<std::size_t>(u)];
      if (!moves_data(un.op)) break;
      path.push_back(u);
      w = un.output;
    }
    for (std::size_t len = path.size() + 1; len-- > 0 && merged < 0;) {
      const int out = len == 0 ? values->output : g.nodes[static_cast<std::size_t>(path[len - 1])].output;
      const Shape& os = shape_of(g, out);
      if (os.empty() || os.back() != heads * dv || count_of(g, out) != n * heads * dv) continue;
      Chain c{values->output, std::vector<int>(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(len)),
              1};
      const auto pos = positions(g, c);
      std::vector<std::int64_t> col(static_cast<std::size_t>(heads * dv), -1);
      std::set<std::int64_t> used;
      bool ok = true;
      for (std::int64_t i = 0; i < n && ok; ++i)
        for (std::int64_t f = 0; f < heads * dv && ok; ++f) {
          const std::int64_t at = pos[static_cast<std::size_t>(i * heads * dv + f)];
          const std::int64_t h = at / (n * dv), row = at % (n * dv) / dv, coord = at % dv;
          auto& slot = col[static_cast<std::size_t>(h * dv + coord)];
          ok = row == i && (slot < 0 || slot == f);
          if (slot < 0) used.insert(f);
          slot = f;
        }
      if (ok && static_cast<std::int64_t>(used.size()) == heads * dv) {
        merged = out;
        merge = c;
        column = std::move(col);
      }
    }
  }
  if (merged < 0) {
    why = "the heads are not merged back into a tokens x (heads*value_dim) matrix";
    return std::nullopt;
  }
  nodes.insert(nodes.end(), merge.nodes.begin(), merge.nodes.end());
  for (const Side* s : {&*q, &*k, &*val}) {
    nodes.insert(nodes.end(), s->chain.nodes.begin(), s->chain.nodes.end());
    nodes.insert(nodes.end(), s->proj.nodes.begin(), s->proj.nodes.end());
    if (s->rotary) {
      nodes.insert(nodes.end(), s->inner.nodes.begin(), s->inner.nodes.end());
      nodes.insert(nodes.end(), s->rotary->nodes.begin(), s->rotary->nodes.end());
    }
  }
  // The output projection: the one constant linear map that reads the merged heads.
  std::optional<Projection> out;
  if (ix.single_use(merged)) {
    int last = g.nodes[static_cast<std::size_t>(ix.users(merged)[0])].output;
    if (ix.single_use(last)) {
      const Node& bias = g.nodes[static_cast<std::size_t>(ix.users(last)[0])];
      if (bias.op == Op::add && other_operand(bias, last) >= 0 &&
          shape_of(g, bias.output) == shape_of(g, last) &&
          per_column(ix, other_operand(bias, last), shape_of(g, last).back()))
        last = bias.output;
    }
    out = projection(ix, last);
    if (out && (out->x != token_source(ix, merged) || out->rows != n)) out.reset();
    if (out) p.output = last;
  }
  const std::int64_t F = heads * dv;
  if (out) {
    p.output_projection = true;
    p.out_width = static_cast<int>(out->out);
    p.wo.resize(static_cast<std::size_t>(F * out->out));
    for (std::int64_t r = 0; r < F; ++r)
      for (std::int64_t j = 0; j < out->out; ++j)
        p.wo[static_cast<std::size_t>(r * out->out + j)] =
            out->w[static_cast<std::size_t>(column[static_cast<std::size_t>(r)] * out->out + j)];
    p.bo = out->b;
    nodes.insert(nodes.end(), out->nodes.begin(), out->nodes.end());
  } else {
    p.output = merged;
    p.out_width = static_cast<int>(F);
    p.wo.assign(static_cast<std::size_t>(F * F), 0.0);
    for (std::int64_t r = 0; r < F; ++r)
      p.wo[static_cast<std::size_t>(r * F + column[static_cast<std::size_t>(r)])] = 1;
  }
  p.name = sm.name;
  p.input = q->proj.x;
  p.context = k->proj.x;
  p.tokens = static_cast<int>(n);
  p.context_tokens = static_cast<int>(m);
  p.width = static_cast<int>(q->proj.in);
  p.heads = static_cast<int>(heads);
  p.head_dim = static_cast<int>(hd);
  p.value_dim = static_cast<int>(dv);
  p.scale = factor;
  p.wq = head_weights(*q, heads, hd);
  p.wk = head_weights(*k, heads, hd);
  p.wv = head_weights(*val, heads, dv);
  p.bq = head_biases(*q, heads, hd);
  p.bk = head_biases(*k, heads, hd);
  p.bv = head_biases(*val, heads, dv);
  p.q_rotary = q->pattern;
  p.k_rotary = k->pattern;
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  p.nodes = std::move(nodes);
  return p;
}

}  // namespace

std::vector<AttentionPattern> find_attention(const Graph& g, const Index& index,
                                             std::vector<std::string>* not_attention) {
  std::vector<AttentionPattern> found;
  std::set<std::string> names;
  for (int k = 0; k < static_cast<int>(g.nodes.size()); ++k) {
    const Node& n = g.nodes[static_cast<std::size_t>(k)];
    if (n.op != Op::softmax) continue;
    std::string why;
    auto p = match(index, k, why);
    if (!p) {
      if (not_attention)
        not_attention->push_back((n.name.empty() ? "(unnamed softmax)" : n.name) + ": " + why);
      continue;
    }
    if (p->name.empty() || names.count(p->name)) p->name = "attention_" + std::to_string(found.size());
    names.insert(p->name);
    found.push_back(std::move(*p));
  }
  return found;
}

}  // namespace regatta::graph::fuse_detail
