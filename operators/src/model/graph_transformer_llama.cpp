// The parts of a recognised transformer that LLaMA adds to the LayerNorm layouts
// (docs/models.md#recognised-transformers): RMSNorm x / √(mean(x²) + ε) · γ and the SwiGLU MLP
// (σ-gated: silu(Y·W_gate + b) ⊙ (Y·W_up + b) then W_down), in the node forms model_graph writes.
#include <algorithm>

#include "graph_transformer_parts.hpp"

namespace regatta::operators::recognise {

using graph::Node;
using graph::Op;

namespace {

bool is_output(const graph::Graph& g, int v) {
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

/// The Pow(v, 2) among v's readers, or -1.
int square_of(const Matcher& m, int v) {
  for (int k : m.users(v)) {
    const Node& n = m.graph().nodes[std::size_t(k)];
    if (n.op == Op::pow && n.inputs[0] == v && m.value(n.inputs[1]).constant &&
        m.value(n.inputs[1]).data == std::vector<double>{2.0})
      return k;
  }
  return -1;
}

/// The one node reading value u, of kind op, or a Refusal naming `what`.
int next(const Matcher& m, int u, Op op, const std::string& what) {
  if (m.users(u).size() != 1 || is_output(m.graph(), u) ||
      m.graph().nodes[std::size_t(m.users(u)[0])].op != op)
    throw Refusal{"the " + what + " is not read by one " + std::string(graph::op_name(op)) + " node"};
  return m.users(u)[0];
}

}  // namespace

bool reads_rms_norm(const Matcher& m, int v) { return square_of(m, v) >= 0; }

int rms_norm_output(const Matcher& m, int v) {
  const int k = square_of(m, v);
  if (k < 0) return -1;
  // v is also read by the Div whose single reader, the Mul by γ, gives the norm.
  for (int u : m.users(v)) {
    const Node& d = m.graph().nodes[std::size_t(u)];
    if (d.op != Op::div || d.inputs[0] != v || m.users(d.output).size() != 1) continue;
    const Node& g = m.graph().nodes[std::size_t(m.users(d.output)[0])];
    if (g.op == Op::mul) return g.output;
  }
  return -1;
}

NormParameters rms_norm(Matcher& m, int& v, int width, double& eps, const std::string& what) {
  const graph::Graph& g = m.graph();
  v = m.skip_identity(v);
  const int ks = square_of(m, v);
  if (ks < 0) throw Refusal{"no RMSNorm (the " + what + ") reads '" + m.value(v).name + "'"};
  const graph::Shape& s = m.shape(v);
  if (s.empty() || s.back() != width) throw Refusal{"the " + what + " does not normalise rows of the width"};
  const int km = next(m, g.nodes[std::size_t(ks)].output, Op::reduce_mean, what + "'s square");
  const auto& axes = std::get<graph::ReduceMeanAttrs>(g.nodes[std::size_t(km)].attributes);
  if (axes.axes != std::vector<std::int64_t>{std::int64_t(s.size()) - 1} || !axes.keepdims)
    throw Refusal{"the " + what + "'s mean is not over the last axis"};
  const int mean = g.nodes[std::size_t(km)].output;
  const int ka = next(m, mean, Op::add, what + "'s mean square");
  const int c = m.other_operand(g.nodes[std::size_t(ka)], mean, what);
  const double e = m.constant(c, 1, what + " epsilon")[0];
  const int kr = next(m, g.nodes[std::size_t(ka)].output, Op::sqrt, what + "'s shifted mean");
  const int root = g.nodes[std::size_t(kr)].output;
  const int kd = next(m, root, Op::div, what + "'s root");
  const Node& div = g.nodes[std::size_t(kd)];
  if (div.inputs[0] != v || div.inputs[1] != root || m.shape(div.output) != s)
    throw Refusal{describe(div) + " does not divide the " + what + "'s input by its root"};
  const int kg = next(m, div.output, Op::mul, what + "'s normalised rows");
  const Node& mul = g.nodes[std::size_t(kg)];
  const int gamma = m.other_operand(mul, div.output, what);
  if (m.shape(mul.output) != s) throw Refusal{describe(mul) + " broadcasts the " + what};
  NormParameters p;
  const std::vector<double>& gm = m.constant(gamma, width, what + " scale");
  p.gamma = Eigen::Map<const Vector<double>>(gm.data(), width);
  if (eps < 0)
    eps = e;
  else if (e != eps)
    throw Refusal{"the " + what + " has epsilon " + std::to_string(e) +
                  ", another norm has a different one (the model has one epsilon)"};
  for (int k : {ks, km, ka, kr, kd, kg}) m.consume(k);
  v = mul.output;
  return p;
}

namespace {

/// x·W [+ b] of the MatMul node k reading v (a constant [in, out]; the bias an Add of a constant row).
/// Sets `out` to the result.
Affine linear_at(Matcher& m, int k, int v, int in, int& out, const std::string& what) {
  const graph::Graph& g = m.graph();
  const Node& n = g.nodes[std::size_t(k)];
  if (n.inputs[0] != v || m.shape(n.inputs[1]).size() != 2 || m.shape(n.inputs[1])[0] != in)
    throw Refusal{describe(n) + " (the " + what + ") is not x·W on the rows of its input"};
  const std::int64_t cols = m.shape(n.inputs[1])[1];
  const std::vector<double>& w = m.constant(n.inputs[1], in * cols, what + " weight");
  Affine a;
  a.W = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      w.data(), in, Eigen::Index(cols));
  m.consume(k);
  out = n.output;
  if (m.users(out).size() == 1 && !is_output(g, out)) {
    const Node& add = g.nodes[std::size_t(m.users(out)[0])];
    if (add.op == Op::add) {
      const int c = m.other_operand(add, out, what);
      if (m.value(c).constant && graph::element_count(m.shape(c)) == cols && m.shape(c).back() == cols &&
          m.shape(add.output) == m.shape(out)) {
        a.b =
            Eigen::Map<const Vector<double>>(m.constant(c, cols, what + " bias").data(), Eigen::Index(cols));
        m.consume(m.users(out)[0]);
        out = add.output;
      }
    }
  }
  return a;
}

}  // namespace

bool reads_gated_mlp(const Matcher& m, int v) {
  int linears = 0;
  for (int k : m.users(v)) linears += m.graph().nodes[std::size_t(k)].op == Op::matmul ? 1 : 0;
  return linears == 2;
}

void gated_mlp(Matcher& m, int& v, int width, TransformerBlock& block, int& hidden) {
  const graph::Graph& g = m.graph();
  v = m.skip_identity(v);
  std::vector<int> maps;
  for (int k : m.users(v))
    if (g.nodes[std::size_t(k)].op == Op::matmul) maps.push_back(k);
  if (maps.size() != 2 || m.users(v).size() != 2)
    throw Refusal{"the gated MLP's input is not read by exactly two linear maps"};
  // The gate is the map whose result a Sigmoid reads: silu(a) = a·σ(a), then ⊙ the other map's result.
  int gate_out = -1, up_out = -1;
  Affine gate, up;
  for (int k : maps) {
    int out = -1;
    Affine a = linear_at(m, k, v, width, out, "gated MLP's first layer");
    bool gating = false;
    for (int u : m.users(out)) gating = gating || g.nodes[std::size_t(u)].op == Op::sigmoid;
    (gating ? gate : up) = std::move(a);
    (gating ? gate_out : up_out) = out;
  }
  if (gate_out < 0 || up_out < 0) throw Refusal{"the gated MLP has not one Sigmoid-gated map and one other"};
  if (m.users(gate_out).size() != 2) throw Refusal{"the MLP gate has readers besides its SiLU"};
  int ks = -1, km = -1;
  for (int u : m.users(gate_out)) (g.nodes[std::size_t(u)].op == Op::sigmoid ? ks : km) = u;
  if (ks < 0 || km < 0) throw Refusal{"the MLP gate is not read by a Sigmoid and a Mul (SiLU)"};
  const Node& mul = g.nodes[std::size_t(km)];
  if (mul.op != Op::mul || m.other_operand(mul, gate_out, "MLP gate") != g.nodes[std::size_t(ks)].output ||
      m.users(g.nodes[std::size_t(ks)].output).size() != 1)
    throw Refusal{describe(mul) + " is not the SiLU a·sigmoid(a) of the MLP gate"};
  const int kp = next(m, mul.output, Op::mul, "MLP's SiLU");
  const Node& prod = g.nodes[std::size_t(kp)];
  if (m.other_operand(prod, mul.output, "MLP's SiLU") != up_out || m.users(up_out).size() != 1)
    throw Refusal{describe(prod) + " is not the SiLU gate times the up projection"};
  for (int k : {ks, km, kp}) m.consume(k);
  if (gate.W.cols() != up.W.cols()) throw Refusal{"the MLP's gate and up projection differ in width"};
  if (hidden < 0)
    hidden = int(up.W.cols());
  else if (up.W.cols() != hidden)
    throw Refusal{"the MLPs differ from block to block (hidden width)"};
  block.gate = std::move(gate);
  block.fc1 = std::move(up);
  v = prod.output;
  block.fc2 = m.linear(v, hidden, "MLP's down projection");
  if (block.fc2.W.cols() != width) throw Refusal{"the MLP does not return to the width"};
}

}  // namespace regatta::operators::recognise
