// The parts of a recognised transformer (graph_transformer_parts.hpp;
// docs/models.md#recognised-transformers).
#include "graph_transformer_parts.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <variant>

#include <regatta/core/interval64.hpp>
#include <regatta/operators/graph_rotary.hpp>

namespace regatta::operators::recognise {

using graph::Node;
using graph::Op;

std::string describe(const Node& node) {
  return "node '" + node.name + "' (" +
         (node.source_op.empty() ? std::string(graph::op_name(node.op)) : node.source_op) + ")";
}

Matcher::Matcher(const graph::Graph& graph)
    : g_(graph),
      users_(graph.values.size()),
      producer_(graph.values.size(), -1),
      consumed_(graph.nodes.size(), false) {
  for (std::size_t k = 0; k < g_.nodes.size(); ++k) {
    producer_[std::size_t(g_.nodes[k].output)] = int(k);
    for (int v : g_.nodes[k].inputs)
      if (std::find(users_[std::size_t(v)].begin(), users_[std::size_t(v)].end(), int(k)) ==
          users_[std::size_t(v)].end())
        users_[std::size_t(v)].push_back(int(k));
  }
}

const Node* Matcher::producer(int v) const {
  const int k = producer_[std::size_t(v)];
  return k < 0 ? nullptr : &g_.nodes[std::size_t(k)];
}

void Matcher::consume(int node) {
  if (consumed_[std::size_t(node)])
    throw Refusal{describe(g_.nodes[std::size_t(node)]) + " belongs to two parts of the match"};
  consumed_[std::size_t(node)] = true;
}

int Matcher::unconsumed() const {
  for (std::size_t k = 0; k < consumed_.size(); ++k)
    if (!consumed_[k]) return int(k);
  return -1;
}

bool Matcher::input_free(int v) const {
  if (value(v).constant) return true;
  const Node* n = producer(v);
  if (!n) return false;
  return std::all_of(n->inputs.begin(), n->inputs.end(), [this](int u) { return input_free(u); });
}

bool Matcher::same_order(const Node& n) const {
  if (n.op == Op::reshape || n.op == Op::identity) return true;
  if (n.op != Op::transpose) return false;
  const graph::Shape& in = shape(n.inputs[0]);
  std::int64_t last = -1;
  for (std::int64_t axis : std::get<graph::TransposeAttrs>(n.attributes).perm)
    if (in[std::size_t(axis)] != 1) {
      if (axis < last) return false;
      last = axis;
    }
  return true;
}

bool Matcher::same_order_path(int u, int v) {
  std::vector<int> path;
  while (u != v) {
    const int k = producer_[std::size_t(u)];
    if (k < 0 || !same_order(g_.nodes[std::size_t(k)])) return false;
    path.push_back(k);
    u = g_.nodes[std::size_t(k)].inputs[0];
  }
  for (int k : path) consumed_[std::size_t(k)] = true;
  return true;
}

int Matcher::skip_identity(int v) {
  while (users(v).size() == 1 && g_.nodes[std::size_t(users(v)[0])].op == Op::identity &&
         std::find(g_.outputs.begin(), g_.outputs.end(), v) == g_.outputs.end()) {
    const int k = users(v)[0];
    consume(k);
    v = g_.nodes[std::size_t(k)].output;
  }
  return v;
}

int Matcher::only_user(int& v, Op op, const std::string& what) {
  v = skip_identity(v);
  if (std::find(g_.outputs.begin(), g_.outputs.end(), v) != g_.outputs.end())
    throw Refusal{"the graph's output is taken before the " + what};
  if (users(v).size() != 1)
    throw Refusal{"expected one " + std::string(graph::op_name(op)) + " node (the " + what + ") reading '" +
                  value(v).name + "', found " + std::to_string(users(v).size()) + " readers"};
  const int k = users(v)[0];
  const Node& n = g_.nodes[std::size_t(k)];
  if (n.op != op)
    throw Refusal{"expected a " + std::string(graph::op_name(op)) + " node (the " + what + "), found " +
                  describe(n)};
  return k;
}

int Matcher::user_of_kind(int& v, Op op, const std::string& what) {
  v = skip_identity(v);
  int found = -1;
  for (int k : users(v))
    if (g_.nodes[std::size_t(k)].op == op) {
      if (found >= 0)
        throw Refusal{"two " + std::string(graph::op_name(op)) + " nodes read '" + value(v).name + "' (the " +
                      what + ")"};
      found = k;
    }
  if (found < 0)
    throw Refusal{"expected a " + std::string(graph::op_name(op)) + " node (the " + what + ") reading '" +
                  value(v).name + "'"};
  return found;
}

int Matcher::other_operand(const Node& node, int v, const std::string& what) const {
  if (node.inputs.size() != 2 || (node.inputs[0] == v) == (node.inputs[1] == v))
    throw Refusal{describe(node) + " is not a binary operation on the " + what + " and one other operand"};
  return node.inputs[0] == v ? node.inputs[1] : node.inputs[0];
}

const std::vector<double>& Matcher::constant(int v, std::int64_t count, const std::string& what) const {
  if (!value(v).constant)
    throw Refusal{"the " + what + " '" + value(v).name + "' is not a constant of the graph"};
  if (graph::element_count(shape(v)) != count)
    throw Refusal{"the " + what + " '" + value(v).name + "' has shape " + graph::shape_text(shape(v)) +
                  ", expected " + std::to_string(count) + " values"};
  if (value(v).radius != 0)  // a Model's weights are exact binary64 values
    throw Refusal{"the " + what + " '" + value(v).name + "' has an enclosure radius (not exact values)"};
  return value(v).data;
}

Affine Matcher::linear(int& v, int in, const std::string& what) {
  v = skip_identity(v);
  // The one MatMul or Gemm reading v as its first operand; other readers (a post-norm block's residual Add)
  // are left to the parts that expect them.
  int k = users(v).size() == 1 ? users(v)[0] : -1;
  if (k < 0) {
    for (int u : users(v)) {
      const Node& n = g_.nodes[std::size_t(u)];
      if ((n.op != Op::matmul && n.op != Op::gemm) || n.inputs[0] != v) continue;
      if (k >= 0) throw Refusal{"two linear maps read the input of the " + what};
      k = u;
    }
    if (k < 0)
      throw Refusal{"the input of the " + what + " has " + std::to_string(users(v).size()) +
                    " readers, none of them a MatMul or Gemm"};
  }
  const Node& n = g_.nodes[std::size_t(k)];
  Affine a;
  if (n.op == Op::gemm) {
    const auto& at = std::get<graph::GemmAttrs>(n.attributes);
    if (at.alpha != 1 || (n.inputs.size() > 2 && at.beta != 1) || at.trans_a || n.inputs[0] != v ||
        shape(v).size() != 2 || shape(v)[1] != in)
      throw Refusal{describe(n) + " (the " + what + ") is not x·W + b on the rows of its first operand"};
    const graph::Shape& bs = shape(n.inputs[1]);
    if (bs.size() != 2) throw Refusal{describe(n) + ": the weight is not a matrix"};
    const std::int64_t out = at.trans_b ? bs[0] : bs[1];
    if ((at.trans_b ? bs[1] : bs[0]) != in) throw Refusal{describe(n) + ": the weight does not match width"};
    const std::vector<double>& w = constant(n.inputs[1], in * out, what + " weight");
    a.W.resize(in, Eigen::Index(out));
    for (Eigen::Index i = 0; i < in; ++i)
      for (Eigen::Index j = 0; j < Eigen::Index(out); ++j)
        a.W(i, j) = at.trans_b ? w[std::size_t(j * in + i)] : w[std::size_t(i * out + j)];
    if (n.inputs.size() > 2) {
      const std::vector<double>& b = constant(n.inputs[2], out, what + " bias");
      if (shape(n.inputs[2]).size() > 1 && shape(n.inputs[2])[0] != 1)
        throw Refusal{describe(n) + ": the bias is not one row"};
      a.b = Eigen::Map<const Vector<double>>(b.data(), Eigen::Index(out));
    }
    consume(k);
    v = n.output;
    return a;
  }
  if (n.op != Op::matmul || n.inputs[0] != v || shape(n.inputs[1]).size() != 2 || shape(n.inputs[1])[0] != in)
    throw Refusal{"expected a MatMul by a constant " + std::to_string(in) + " x out matrix (the " + what +
                  "), found " + describe(n)};
  const std::int64_t out = shape(n.inputs[1])[1];
  const std::vector<double>& w = constant(n.inputs[1], in * out, what + " weight");
  a.W = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      w.data(), in, Eigen::Index(out));
  consume(k);
  v = skip_identity(n.output);
  // The bias: an Add of a constant of `out` values along the last axis that keeps the shape.
  if (users(v).size() == 1 && std::find(g_.outputs.begin(), g_.outputs.end(), v) == g_.outputs.end()) {
    const int ka = users(v)[0];
    const Node& add = g_.nodes[std::size_t(ka)];
    if (add.op == Op::add) {
      const int c = other_operand(add, v, what);
      const graph::Shape& cs = shape(c);
      const bool row = !cs.empty() && cs.back() == out && graph::element_count(cs) == out;
      if (value(c).constant && row && cs.size() <= shape(v).size() && shape(add.output) == shape(v)) {
        const std::vector<double>& b = constant(c, out, what + " bias");
        a.b = Eigen::Map<const Vector<double>>(b.data(), Eigen::Index(out));
        consume(ka);
        v = add.output;
      }
    }
  }
  return a;
}

NormParameters Matcher::layer_norm(int& v, int width, double& eps, const std::string& what) {
  const int k = user_of_kind(v, Op::layer_norm, what);
  const Node& n = g_.nodes[std::size_t(k)];
  const auto& at = std::get<graph::LayerNormAttrs>(n.attributes);
  if (n.inputs[0] != v || shape(v).empty() || at.axis != std::int64_t(shape(v).size()) - 1 ||
      shape(v).back() != width)
    throw Refusal{describe(n) + " (the " + what + ") does not normalise the rows of the tokens"};
  NormParameters p;
  const std::vector<double>& gamma = constant(n.inputs[1], width, what + " scale");
  p.gamma = Eigen::Map<const Vector<double>>(gamma.data(), width);
  if (n.inputs.size() > 2) {
    const std::vector<double>& beta = constant(n.inputs[2], width, what + " bias");
    p.beta = Eigen::Map<const Vector<double>>(beta.data(), width);
  } else {
    p.beta = Vector<double>::Zero(width);
  }
  if (eps < 0)
    eps = at.epsilon;
  else if (at.epsilon != eps)
    throw Refusal{describe(n) + " has epsilon " + std::to_string(at.epsilon) +
                  ", another LayerNorm has a different one (the model has one epsilon)"};
  consume(k);
  v = n.output;
  return p;
}

std::pair<double, double> Matcher::scalar_enclosure(int v, const std::string& what) {
  if (graph::element_count(shape(v)) != 1) throw Refusal{"the " + what + " is not a scalar"};
  const auto exact = [&](int u) {  // the constants below are read as exact values
    if (value(u).radius != 0) throw Refusal{"the " + what + " reads '" + value(u).name + "', not exact"};
    return value(u).data[0];
  };
  if (value(v).constant) return {exact(v), exact(v)};
  // Identity nodes (an ONNX Cast to float or double, Identity) and reshapes of the scalar keep its real
  // value: torch writes `/ (d // heads) ** 0.5` as Cast(Pow(c, 0.5)). Each has this scalar as its only
  // reader, as the node computing the scale must.
  for (const Node* w = producer(v); w && (w->op == Op::identity || w->op == Op::reshape);) {
    if (users(v).size() != 1) throw Refusal{"the " + what + " has more than one reader"};
    consume(producer_[std::size_t(v)]);
    v = w->inputs[0];
    if (value(v).constant) return {exact(v), exact(v)};
    w = producer(v);
  }
  const int k = producer_[std::size_t(v)];
  const Node* n = producer(v);
  auto constant_scalar = [&](int u) -> double {
    if (!value(u).constant || graph::element_count(shape(u)) != 1)
      throw Refusal{"the " + what + " is computed from something other than constants (" + describe(*n) +
                    ")"};
    return exact(u);
  };
  interval64 s;
  if (n && n->op == Op::pow) {
    const double base = constant_scalar(n->inputs[0]), exponent = constant_scalar(n->inputs[1]);
    if (!(base > 0) || (exponent != 0.5 && exponent != -0.5))
      throw Refusal{"the " + what + " is a Pow other than a positive constant to the power ±1/2"};
    s = exponent > 0 ? sqrt(interval64(base)) : interval64(1.0) / sqrt(interval64(base));
  } else if (n && n->op == Op::sqrt) {
    const double base = constant_scalar(n->inputs[0]);
    if (!(base > 0)) throw Refusal{"the " + what + " is the square root of a non-positive constant"};
    s = sqrt(interval64(base));
  } else {
    throw Refusal{"the " + what + " '" + value(v).name + "' is neither a constant nor Pow/Sqrt of one"};
  }
  if (users(v).size() != 1) throw Refusal{"the " + what + " has more than one reader"};
  consume(k);
  return {s.lower(), s.upper()};
}

AttentionLayer Matcher::attention(int& v, int width, int& heads, bool text, bool& causal,
                                  const std::string& what) {
  v = skip_identity(v);
  const graph::AttentionPattern* found = nullptr;
  for (const graph::AttentionPattern& p : g_.attention)
    if (p.input == v) found = &p;
  if (!found)
    throw Refusal{"no attention layer (Graph::attention) reads '" + value(v).name + "' (the " + what + ")"};
  const graph::AttentionPattern& p = *found;
  if (!p.self()) throw Refusal{"the " + what + " is cross-attention"};
  if (p.mask != graph::AttentionMask::none && !(text && p.mask == graph::AttentionMask::causal))
    throw Refusal{"the " + what + " has a " + graph::to_string(p.mask) + " mask (" +
                  (text ? "text: none or causal" : "images: none") + ")"};
  causal = p.mask == graph::AttentionMask::causal;
  if (p.width != width || p.out_width != width || !p.output_projection || p.head_dim != p.value_dim ||
      p.heads * p.head_dim != width)
    throw Refusal{"the " + what + " is not heads x head_dim = width with an output projection to the width"};
  if (heads > 0 && p.heads != heads) throw Refusal{"the " + what + " has another head count than block 0"};
  heads = p.heads;
  const std::set<int> group(p.nodes.begin(), p.nodes.end());
  std::set<int> produced;
  for (int k : p.nodes) produced.insert(g_.nodes[std::size_t(k)].output);
  // The real scale: the product of every Mul/Div factor by an input-free scalar inside the layer.
  interval64 factor(1.0);
  for (int k : p.nodes) {
    const Node& n = g_.nodes[std::size_t(k)];
    consume(k);
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      const int u = n.inputs[i];
      if (u == v || produced.count(u)) continue;
      if (value(u).constant) {
        if ((n.op == Op::mul || n.op == Op::div) && graph::element_count(shape(u)) == 1) {
          if (n.op == Op::div && i == 0) throw Refusal{describe(n) + ": a constant divided by the scores"};
          const interval64 c(value(u).data[0]);
          factor = n.op == Op::mul ? factor * c : factor / c;
        }
        continue;
      }
      if (same_order_path(u, v)) continue;
      if (!input_free(u))
        throw Refusal{describe(n) + " in the " + what + " reads '" + value(u).name +
                      "' from outside the layer"};
      if ((n.op != Op::mul && n.op != Op::div) || (n.op == Op::div && i == 0))
        throw Refusal{describe(n) + " in the " + what +
                      " reads a computed constant other than a scale factor"};
      const auto [lo, hi] = scalar_enclosure(u, what + " scale");
      const interval64 s = interval64::hull(lo, hi);
      factor = n.op == Op::mul ? factor * s : factor / s;
    }
  }
  for (int k : p.nodes)
    if (g_.nodes[std::size_t(k)].output != p.output)
      for (int user : users(g_.nodes[std::size_t(k)].output))
        if (!group.count(user))
          throw Refusal{describe(g_.nodes[std::size_t(user)]) + " reads a value inside the " + what};
  // The block pipeline scales the scores by the interval 1/√d_h (model/affine/attention.cpp), sound for
  // every real scale inside it.
  const interval64 model_scale = interval64(1.0) / sqrt(interval64(double(p.head_dim)));
  if (!(factor.lower() >= model_scale.lower() && factor.upper() <= model_scale.upper()) ||
      !(std::fabs(p.scale - factor.lower()) <= 1e-12 * std::fabs(p.scale)))
    throw Refusal{"the " + what + " scales the scores by " + std::to_string(p.scale) + ", not 1/sqrt(" +
                  std::to_string(p.head_dim) + ") as the model's attention does"};
  AttentionLayer a;
  a.d = width;
  a.heads = p.heads;
  a.head_dim = a.value_dim = p.head_dim;
  using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const Eigen::Index d = width, hd = p.head_dim;
  for (int h = 0; h < p.heads; ++h) {
    a.WQ.push_back(Eigen::Map<const RowMajor>(p.wq[std::size_t(h)].data(), d, hd));
    a.WK.push_back(Eigen::Map<const RowMajor>(p.wk[std::size_t(h)].data(), d, hd));
    a.WV.push_back(Eigen::Map<const RowMajor>(p.wv[std::size_t(h)].data(), d, hd));
    if (!p.bq.empty()) a.bQ.push_back(Eigen::Map<const Vector<double>>(p.bq[std::size_t(h)].data(), hd));
    if (!p.bk.empty()) a.bK.push_back(Eigen::Map<const Vector<double>>(p.bk[std::size_t(h)].data(), hd));
    if (!p.bv.empty()) a.bV.push_back(Eigen::Map<const Vector<double>>(p.bv[std::size_t(h)].data(), hd));
  }
  if (p.q_rotary || p.k_rotary) {  // LLaMA: the rotation of the graph's tables, θ checked bit for bit
    std::string why;
    a.rotary = rotary_of(p, &why);
    if (!a.rotary) throw Refusal{"the " + what + "'s rotary embedding: " + why};
  }
  a.WO = Eigen::Map<const RowMajor>(p.wo.data(), d, d);
  if (!p.bo.empty()) a.bO = Eigen::Map<const Vector<double>>(p.bo.data(), d);
  v = p.output;
  // Back to tokens x width through same-order data movement.
  for (v = skip_identity(v); users(v).size() == 1 &&
                             std::find(g_.outputs.begin(), g_.outputs.end(), v) == g_.outputs.end() &&
                             same_order(g_.nodes[std::size_t(users(v)[0])]);) {
    consume(users(v)[0]);
    v = g_.nodes[std::size_t(users(v)[0])].output;
  }
  return a;
}

}  // namespace regatta::operators::recognise
