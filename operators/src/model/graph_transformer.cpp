// A vision transformer recognised in a fused graph (graph_transformer.hpp,
// docs/models.md#recognised-transformers): the walk from the input to the logits, part by part
// (graph_transformer_parts.hpp), the Model it builds, and the guard comparing the two forwards.
#include <regatta/operators/graph_transformer.hpp>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <exception>
#include <random>
#include <sstream>

#include <regatta/core/error.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/operators/model_affine.hpp>

#include "graph_transformer_parts.hpp"

// The walk lives in the named internal namespace of its parts (not an anonymous one: the unity build puts
// other files' helpers in the same translation unit).
namespace regatta::operators::recognise {

using graph::Node;
using graph::Op;

bool is_output(const graph::Graph& g, int v) {
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

/// The input stage: [reshapes], the patch convolution (kernel = stride = p, no padding), the flattening of
/// its grid and the transpose to tokens × width. Fills the model's image sizes and patch map; v ends on the
/// patch tokens [1, g², width].
void match_patches(Matcher& m, int& v, Model& model) {
  const graph::Graph& g = m.graph();
  const std::int64_t size = graph::element_count(m.shape(v));
  // Reshapes of the image (an added batch or channel axis) keep its row-major order.
  for (v = m.skip_identity(v);
       m.users(v).size() == 1 && !is_output(g, v) && g.nodes[std::size_t(m.users(v)[0])].op == Op::reshape;) {
    m.consume(m.users(v)[0]);
    v = m.skip_identity(g.nodes[std::size_t(m.users(v)[0])].output);
  }
  const int kc = m.only_user(v, Op::conv, "patch embedding");
  const Node& conv = g.nodes[std::size_t(kc)];
  const auto& at = std::get<graph::ConvAttrs>(conv.attributes);
  const graph::Shape &xs = m.shape(v), &ws = m.shape(conv.inputs[1]);
  if (conv.inputs[0] != v || xs.size() != 4 || xs[0] != 1 || ws.size() != 4 || ws[2] != ws[3] ||
      xs[2] != xs[3] || xs[2] % ws[2] != 0 || at.strides[0] != ws[2] || at.strides[1] != ws[2] ||
      at.dilations[0] != 1 || at.dilations[1] != 1 || at.pads != std::array<std::int64_t, 4>{0, 0, 0, 0} ||
      graph::element_count(xs) != size)
    throw Refusal{describe(conv) +
                  " is not a square patch embedding (kernel = stride, no padding) of the whole image"};
  model.channels = int(xs[1]);
  model.image_size = int(xs[2]);
  model.patch_size = int(ws[2]);
  model.width = int(ws[0]);
  const Eigen::Index K = Eigen::Index(xs[1] * ws[2] * ws[2]), W = model.width;
  const std::vector<double>& w = m.constant(conv.inputs[1], K * W, "patch embedding weight");
  model.patch.W.resize(K, W);
  for (Eigen::Index o = 0; o < W; ++o)
    for (Eigen::Index k = 0; k < K; ++k) model.patch.W(k, o) = w[std::size_t(o * K + k)];
  model.patch.b = conv.inputs.size() > 2
                      ? Vector<double>(Eigen::Map<const Vector<double>>(
                            m.constant(conv.inputs[2], W, "patch embedding bias").data(), W))
                      : Vector<double>(Vector<double>::Zero(W));
  m.consume(kc);
  v = conv.output;
  const std::int64_t grid = xs[2] / ws[2], patches = grid * grid;
  const int kr = m.only_user(v, Op::reshape, "flattening of the patch grid");
  if (m.shape(g.nodes[std::size_t(kr)].output) != graph::Shape{1, W, patches})
    throw Refusal{describe(g.nodes[std::size_t(kr)]) + " does not flatten the patch grid"};
  m.consume(kr);
  v = g.nodes[std::size_t(kr)].output;
  const int kt = m.only_user(v, Op::transpose, "patches to tokens");
  if (std::get<graph::TransposeAttrs>(g.nodes[std::size_t(kt)].attributes).perm !=
      std::vector<std::int64_t>{0, 2, 1})
    throw Refusal{describe(g.nodes[std::size_t(kt)]) + " is not the transpose to tokens x width"};
  m.consume(kt);
  v = g.nodes[std::size_t(kt)].output;
}

/// The class token (a Concat of a constant row before the patch tokens) and the position table (an Add of a
/// constant tokens × width), each optional (absent: no class token; a zero table).
void match_embedding(Matcher& m, int& v, Model& model) {
  const graph::Graph& g = m.graph();
  const Eigen::Index W = model.width;
  v = m.skip_identity(v);
  model.class_token = false;
  if (m.users(v).size() == 1 && g.nodes[std::size_t(m.users(v)[0])].op == Op::concat) {
    const int k = m.users(v)[0];
    const Node& c = g.nodes[std::size_t(k)];
    if (std::get<graph::ConcatAttrs>(c.attributes).axis != 1 || c.inputs.size() != 2 || c.inputs[1] != v)
      throw Refusal{describe(c) + " is not a class token put before the patch tokens"};
    const std::vector<double>& t = m.constant(c.inputs[0], W, "class token");
    model.class_token = true;
    model.cls_token = Eigen::Map<const Vector<double>>(t.data(), W);
    m.consume(k);
    v = m.skip_identity(c.output);
  }
  const Eigen::Index T = model.patch_count() + (model.class_token ? 1 : 0);
  model.pos_embed = Matrix<double>::Zero(T, W);
  if (m.users(v).size() == 1 && g.nodes[std::size_t(m.users(v)[0])].op == Op::add && !is_output(g, v)) {
    const int k = m.users(v)[0];
    const Node& a = g.nodes[std::size_t(k)];
    const int c = m.other_operand(a, v, "tokens");
    const graph::Shape& cs = m.shape(c);
    if (m.value(c).constant && graph::element_count(cs) == T * W && cs.size() >= 2 &&
        cs[cs.size() - 2] == T && m.shape(a.output) == m.shape(v)) {
      const std::vector<double>& p = m.constant(c, T * W, "position table");
      model.pos_embed =
          Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(p.data(),
                                                                                                   T, W);
      m.consume(k);
      v = a.output;
    }
  }
  if (m.shape(v) != graph::Shape{1, T, W})
    throw Refusal{"the embedded tokens '" + m.value(v).name + "' have shape " +
                  graph::shape_text(m.shape(v)) + ", expected [1, " + std::to_string(T) + ", " +
                  std::to_string(W) + "]"};
}

/// The residual Add of `x` and `branch`; returns its output.
int residual(Matcher& m, int x, int branch, const std::string& what) {
  branch = m.skip_identity(branch);
  const int k = m.only_user(branch, Op::add, what);
  const Node& a = m.graph().nodes[std::size_t(k)];
  if (m.other_operand(a, branch, what) != x || m.shape(a.output) != m.shape(x) ||
      graph::element_count(m.shape(branch)) != graph::element_count(m.shape(x)))
    throw Refusal{describe(a) + " is not the " + what};
  m.consume(k);
  return a.output;
}

/// σ(Y·W₁ + b₁)·W₂ + b₂ from v (advanced to its output). `shared`: v is also read by the residual Add
/// (post-norm).
void match_mlp(Matcher& m, int& v, Model& model, TransformerBlock& block, bool first, bool shared) {
  const graph::Graph& g = m.graph();
  block.fc1 = m.linear(v, model.width, "MLP's first layer", shared);
  v = m.skip_identity(v);
  if (m.users(v).size() != 1) throw Refusal{"the MLP's hidden layer has more than one reader"};
  const int k = m.users(v)[0];
  const Node& s = g.nodes[std::size_t(k)];
  Activation act;
  if (s.op == Op::gelu)
    act = std::get<graph::GeluAttrs>(s.attributes).tanh_approximation ? Activation::gelu_tanh
                                                                      : Activation::gelu_erf;
  else if (s.op == Op::relu)
    act = Activation::relu;
  else
    throw Refusal{"the MLP's activation " + describe(s) + " is not GELU or ReLU"};
  if (first) {
    model.activation = act;
    model.mlp_width = int(block.fc1.W.cols());
  } else if (act != model.activation || block.fc1.W.cols() != model.mlp_width) {
    throw Refusal{"the MLPs differ from block to block (activation or hidden width)"};
  }
  m.consume(k);
  v = s.output;
  block.fc2 = m.linear(v, model.mlp_width, "MLP's second layer");
  if (block.fc2.W.cols() != model.width) throw Refusal{"the MLP does not return to the width"};
}

/// Whether a block starts at v: pre-norm (v read by a LayerNorm feeding an attention layer and by the
/// residual Add) or post-norm (v the input of an attention layer).
bool block_starts(const Matcher& m, int v) {
  const graph::Graph& g = m.graph();
  for (const graph::AttentionPattern& p : g.attention) {
    if (p.input == v) return true;
    for (int u : m.users(v))
      if (g.nodes[std::size_t(u)].op == Op::layer_norm && g.nodes[std::size_t(u)].output == p.input)
        return true;
  }
  return false;
}

/// One block from v (advanced to its output): pre-norm X ← X + MHA(LN₁(X)), X ← X + MLP(LN₂(X)), or
/// post-norm X ← LN₁(X + MHA(X)), X ← LN₂(X + MLP(X)).
void match_block(Matcher& m, int& v, Model& model, double& eps) {
  const graph::Graph& g = m.graph();
  const bool first = model.blocks.empty();
  const std::string at = "block " + std::to_string(model.blocks.size());
  const Eigen::Index W = model.width;
  v = m.skip_identity(v);
  bool pre = false;
  for (int u : m.users(v)) pre = pre || g.nodes[std::size_t(u)].op == Op::layer_norm;
  if (first)
    model.prenorm = pre;
  else if (pre != model.prenorm)
    throw Refusal{at + " is " + (pre ? "pre" : "post") + "-norm, block 0 is not"};
  TransformerBlock block;
  const int x = v;
  int u = x;
  if (pre) {
    block.norm1 = m.layer_norm(u, int(W), eps, at + "'s first norm");
    block.attention = m.attention(u, int(W), model.heads, at + "'s attention");
    const int x2 = residual(m, x, u, at + "'s attention residual");
    u = x2;
    block.norm2 = m.layer_norm(u, int(W), eps, at + "'s second norm");
    match_mlp(m, u, model, block, first, false);
    v = residual(m, x2, u, at + "'s MLP residual");
  } else {
    block.attention = m.attention(u, int(W), model.heads, at + "'s attention");
    int x2 = residual(m, x, u, at + "'s attention residual");
    block.norm1 = m.layer_norm(x2, int(W), eps, at + "'s first norm");
    u = x2;
    match_mlp(m, u, model, block, first, true);
    int x3 = residual(m, x2, u, at + "'s MLP residual");
    block.norm2 = m.layer_norm(x3, int(W), eps, at + "'s second norm");
    v = x3;
  }
  block.attention.norm_gamma = block.norm1.gamma;
  block.attention.norm_beta = block.norm1.beta;
  model.blocks.push_back(std::move(block));
}

/// The single reader of v when it is of kind `op` (after identity nodes), else -1.
int reader_of_kind(Matcher& m, int& v, Op op) {
  v = m.skip_identity(v);
  if (m.users(v).size() != 1 || is_output(m.graph(), v)) return -1;
  const int k = m.users(v)[0];
  return m.graph().nodes[std::size_t(k)].op == op ? k : -1;
}

/// Reshapes of the pooled row that keep its `width` values (a dropped or added axis of length 1).
void skip_reshapes(Matcher& m, int& v, Eigen::Index width) {
  for (int k; (k = reader_of_kind(m, v, Op::reshape)) >= 0;) {
    if (graph::element_count(m.shape(m.graph().nodes[std::size_t(k)].output)) != width) return;
    m.consume(k);
    v = m.graph().nodes[std::size_t(k)].output;
  }
}

/// The final norm, the pooling and the head, from the last block's tokens v to the graph's output.
void match_output(Matcher& m, int v, Model& model, double& eps) {
  const graph::Graph& g = m.graph();
  const Eigen::Index W = model.width, T = model.tokens();
  bool normed = false;
  if (reader_of_kind(m, v, Op::layer_norm) >= 0) {
    model.final_norm = m.layer_norm(v, int(W), eps, "final norm");
    normed = true;
  }
  v = m.skip_identity(v);
  if (m.users(v).size() != 1 || is_output(g, v)) throw Refusal{"the final tokens are not pooled to one row"};
  const int k = m.users(v)[0];
  const Node& n = g.nodes[std::size_t(k)];
  if (n.op == Op::gather) {
    const auto& a = std::get<graph::GatherAttrs>(n.attributes);
    if (n.inputs[0] != v || a.axis != 1 || a.indices.size() != 1 ||
        (a.indices[0] != 0 && a.indices[0] != T - 1))
      throw Refusal{describe(n) + " takes neither the first nor the last token"};
    if (a.indices[0] == 0 && model.class_token)
      model.pooling = Pooling::cls;
    else if (a.indices[0] == T - 1 && (T > 1 || !model.class_token))
      model.pooling = Pooling::last;
    else
      throw Refusal{describe(n) + " takes the first token of a model without a class token"};
    m.consume(k);
    v = n.output;
  } else if (n.op == Op::slice || n.op == Op::reduce_mean) {
    // The mean of the patch tokens: with a class token, a Slice dropping it before the ReduceMean.
    if (normed) throw Refusal{"the final norm acts before the mean pooling (the model normalises the mean)"};
    if (n.op == Op::slice) {
      const auto& a = std::get<graph::SliceAttrs>(n.attributes);
      if (!model.class_token || a.starts != std::vector<std::int64_t>{0, 1, 0} ||
          a.steps != std::vector<std::int64_t>{1, 1, 1} || m.shape(n.output) != graph::Shape{1, T - 1, W})
        throw Refusal{describe(n) + " is not the patch tokens without the class token"};
      m.consume(k);
      v = n.output;
    } else if (model.class_token) {
      throw Refusal{describe(n) + " averages the class token with the patch tokens"};
    }
    const int kr = m.only_user(v, Op::reduce_mean, "mean pooling");
    const auto& a = std::get<graph::ReduceMeanAttrs>(g.nodes[std::size_t(kr)].attributes);
    if (a.axes != std::vector<std::int64_t>{1}) throw Refusal{"the mean pooling is not over the tokens"};
    model.pooling = Pooling::mean;
    m.consume(kr);
    v = g.nodes[std::size_t(kr)].output;
  } else {
    throw Refusal{"the final tokens go to " + describe(n) + ", not a pooling"};
  }
  skip_reshapes(m, v, W);
  if (!normed && reader_of_kind(m, v, Op::layer_norm) >= 0) {
    model.final_norm = m.layer_norm(v, int(W), eps, "final norm");
    skip_reshapes(m, v, W);
  }
  model.head = m.linear(v, int(W), "head");
  v = m.skip_identity(v);
  model.classes = int(model.head.W.cols());
  if (g.outputs.size() != 1 || g.outputs[0] != v || graph::element_count(m.shape(v)) != model.classes)
    throw Refusal{"the head's output '" + m.value(v).name + "' is not the graph's one output"};
}

Model match(const graph::Graph& g) {
  if (g.inputs.size() != 1 || g.outputs.size() != 1)
    throw Refusal{"the graph has not one input and one output"};
  Matcher m(g);
  Model model;
  model.layout = "timm-vit";  // the structure read (patches, class token, position table), not the naming
  model.input = InputStage::patches;
  model.norm = Prenorm::layernorm;
  int v = g.inputs[0];
  match_patches(m, v, model);
  match_embedding(m, v, model);
  double eps = -1;
  while (block_starts(m, m.skip_identity(v))) match_block(m, v, model, eps);
  if (model.blocks.empty()) throw Refusal{"no attention block after the embedding"};
  match_output(m, v, model, eps);
  model.eps = eps;
  for (TransformerBlock& b : model.blocks) b.attention.norm_eps = eps;
  if (const int k = m.unconsumed(); k >= 0)
    throw Refusal{describe(g.nodes[std::size_t(k)]) + " is not part of the transformer"};
  try {
    model.validate();
  } catch (const std::exception& e) {
    throw Refusal{std::string("the model read is inconsistent: ") + e.what()};
  }
  if (const std::string why = affine_unsupported(model); !why.empty())
    throw Refusal{"the block pipeline does not cover it: " + why};
  return model;
}

/// The guard: the double forwards of graph and model at three seeded points (uniform in [0, 1], the pixel
/// range, and standard normal) agree to 1e-10 relative; the reason when not.
std::string guard(const graph::Graph& g, const RecognisedTransformer& t) {
  const graph::Shape& shape = g.values[std::size_t(g.inputs[0])].shape;
  const std::size_t n = std::size_t(graph::element_count(shape));
  std::mt19937_64 rng(20261207);
  std::uniform_real_distribution<double> uniform(0, 1);
  std::normal_distribution<double> normal(0, 1);
  for (int trial = 0; trial < 3; ++trial) {
    std::vector<double> x(n);
    for (double& e : x) e = trial < 2 ? uniform(rng) : normal(rng);
    const std::vector<double> y = graph::evaluate<double>(g, {graph::Tensor<double>{shape, x}})[0].data;
    const Vector<double> z = forward<double>(t.model, t.model_input(x));
    if (Eigen::Index(y.size()) != z.size()) return "the model's logits are not the graph's";
    double scale = 0, diff = 0;
    for (std::size_t j = 0; j < y.size(); ++j) {
      scale = std::max(scale, std::fabs(y[j]));
      diff = std::max(diff, std::fabs(y[j] - z(Eigen::Index(j))));
    }
    if (!(diff <= 1e-10 * std::max(scale, 1e-300))) {
      std::ostringstream s;
      s << "the matched model's forward differs from the graph's by " << diff << " (logits up to " << scale
        << ") at a test point";
      return s.str();
    }
  }
  return {};
}

}  // namespace regatta::operators::recognise

namespace regatta::operators {

using recognise::Refusal;

Vector<double> RecognisedTransformer::model_input(const std::vector<double>& graph_input) const {
  assert(graph_input.size() == std::size_t(model.input_size()));
  Vector<double> x(Eigen::Index(graph_input.size()));
  for (std::size_t j = 0; j < graph_input.size(); ++j)
    x(model_index.empty() ? Eigen::Index(j) : model_index[j]) = graph_input[j];
  return x;
}

std::string RecognisedTransformer::summary() const {
  const Model& m = model;
  return std::string(m.prenorm ? "pre" : "post") + "-norm ViT: " + std::to_string(m.blocks.size()) +
         " blocks, width " + std::to_string(m.width) + ", " + std::to_string(m.heads) + " heads, MLP " +
         std::to_string(m.mlp_width) + " (" + to_string(m.activation) + "), " + to_string(m.pooling) +
         " pooling" + (m.class_token ? ", class token" : "") +
         (m.final_norm.present() ? ", final norm" : "") + ", patch " + std::to_string(m.patch_size) + " on " +
         std::to_string(m.channels) + "x" + std::to_string(m.image_size) + "x" +
         std::to_string(m.image_size) + ", " + std::to_string(m.classes) + " classes";
}

std::optional<RecognisedTransformer> recognise_transformer(const graph::Graph& graph, std::string* why_not) {
  std::string why;
  try {
    RecognisedTransformer t{recognise::match(graph), {}};
    why = recognise::guard(graph, t);
    if (why.empty()) return t;
  } catch (const Refusal& r) {
    why = r.reason;
  }
  if (why_not) *why_not = why;
  return std::nullopt;
}

}  // namespace regatta::operators
