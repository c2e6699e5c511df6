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

/// The single reader of v when it is of kind `op` (after identity nodes), else -1.
int reader_of_kind(Matcher& m, int& v, Op op) {
  v = m.skip_identity(v);
  if (m.users(v).size() != 1 || is_output(m.graph(), v)) return -1;
  const int k = m.users(v)[0];
  return m.graph().nodes[std::size_t(k)].op == op ? k : -1;
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
  // The grid flattened to width x patches, with the batch axis (ONNX exports) or without it (model_graph).
  const std::int64_t grid = xs[2] / ws[2], patches = grid * grid;
  const int kr = m.only_user(v, Op::reshape, "flattening of the patch grid");
  const graph::Shape& flat = m.shape(g.nodes[std::size_t(kr)].output);
  const bool batched = flat == graph::Shape{1, W, patches};
  if (!batched && flat != graph::Shape{W, patches})
    throw Refusal{describe(g.nodes[std::size_t(kr)]) + " does not flatten the patch grid"};
  m.consume(kr);
  v = g.nodes[std::size_t(kr)].output;
  const int kt = m.only_user(v, Op::transpose, "patches to tokens");
  if (std::get<graph::TransposeAttrs>(g.nodes[std::size_t(kt)].attributes).perm !=
      (batched ? std::vector<std::int64_t>{0, 2, 1} : std::vector<std::int64_t>{1, 0}))
    throw Refusal{describe(g.nodes[std::size_t(kt)]) + " is not the transpose to tokens x width"};
  m.consume(kt);
  v = g.nodes[std::size_t(kt)].output;
}

/// The position table: an Add of a constant tokens x width to v (advanced past it); false when v is not read
/// so (nothing consumed).
bool match_position_table(Matcher& m, int& v, Model& model, Eigen::Index T) {
  const graph::Graph& g = m.graph();
  const Eigen::Index W = model.width;
  if (m.users(v).size() != 1 || g.nodes[std::size_t(m.users(v)[0])].op != Op::add || is_output(g, v))
    return false;
  const int k = m.users(v)[0];
  const Node& a = g.nodes[std::size_t(k)];
  const int c = m.other_operand(a, v, "tokens");
  const graph::Shape& cs = m.shape(c);
  if (!m.value(c).constant || graph::element_count(cs) != T * W || cs.size() < 2 || cs[cs.size() - 2] != T ||
      m.shape(a.output) != m.shape(v))
    return false;
  const std::vector<double>& p = m.constant(c, T * W, "position table");
  model.pos_embed = Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      p.data(), T, W);
  m.consume(k);
  v = a.output;
  return true;
}

/// Whether the input v reaches a convolution through reshapes (an image model) or not (a text model).
bool reads_patches(Matcher& m, int v) {
  const graph::Graph& g = m.graph();
  for (;;) {
    if (m.users(v).size() != 1 || is_output(g, v)) return false;
    const Node& n = g.nodes[std::size_t(m.users(v)[0])];
    if (n.op == Op::conv) return true;
    if (n.op != Op::reshape && n.op != Op::identity) return false;
    v = n.output;
  }
}

/// The text input stage: the input is the n x width matrix of token embeddings ([n, width] or
/// [1, n, width]); then, each optional, the position table (an Add of a constant n x width), the token type
/// (an Add of a constant row of `width` values) and the embedding LayerNorm (the tokens' single reader).
/// The model has no token table (vocab 0): the graph starts at the embeddings.
void match_text_input(Matcher& m, int& v, Model& model, double& eps) {
  const graph::Graph& g = m.graph();
  v = m.skip_identity(v);
  const graph::Shape s = m.shape(v);
  if (!(s.size() == 2 || (s.size() == 3 && s[0] == 1)) || s.back() < 1 || s[s.size() - 2] < 1)
    throw Refusal{"the input '" + m.value(v).name + "' of shape " + graph::shape_text(s) +
                  " is neither an image read by a patch convolution nor an n x width matrix of token "
                  "embeddings"};
  model.input = InputStage::tokens;
  model.class_token = false;
  model.vocab = 0;
  model.context = int(s[s.size() - 2]);
  model.width = int(s.back());
  const Eigen::Index W = model.width;
  if (!match_position_table(m, v, model, model.context)) model.pos_embed.resize(0, 0);
  v = m.skip_identity(v);
  if (m.users(v).size() == 1 && g.nodes[std::size_t(m.users(v)[0])].op == Op::add && !is_output(g, v)) {
    const int k = m.users(v)[0];
    const Node& a = g.nodes[std::size_t(k)];
    const int c = m.other_operand(a, v, "token embeddings");
    const graph::Shape& cs = m.shape(c);
    if (m.value(c).constant && graph::element_count(cs) == W && !cs.empty() && cs.back() == W &&
        m.shape(a.output) == s) {
      const std::vector<double>& t = m.constant(c, W, "token type");
      model.token_type = Eigen::Map<const Vector<double>>(t.data(), W);
      m.consume(k);
      v = m.skip_identity(a.output);
    }
  }
  if (reader_of_kind(m, v, Op::layer_norm) >= 0)
    model.embed_norm = m.layer_norm(v, int(W), eps, "embedding norm");
}

/// The class token (a Concat of a constant row before the patch tokens) and the position table, each
/// optional (absent: no class token; a zero table). The tokens are [1, T, width] (ONNX exports) or
/// [T, width] (model_graph).
void match_embedding(Matcher& m, int& v, Model& model) {
  const graph::Graph& g = m.graph();
  const Eigen::Index W = model.width;
  v = m.skip_identity(v);
  const bool batched = m.shape(v).size() == 3;
  model.class_token = false;
  if (m.users(v).size() == 1 && g.nodes[std::size_t(m.users(v)[0])].op == Op::concat) {
    const int k = m.users(v)[0];
    const Node& c = g.nodes[std::size_t(k)];
    if (std::get<graph::ConcatAttrs>(c.attributes).axis != (batched ? 1 : 0) || c.inputs.size() != 2 ||
        c.inputs[1] != v)
      throw Refusal{describe(c) + " is not a class token put before the patch tokens"};
    const std::vector<double>& t = m.constant(c.inputs[0], W, "class token");
    model.class_token = true;
    model.cls_token = Eigen::Map<const Vector<double>>(t.data(), W);
    m.consume(k);
    v = m.skip_identity(c.output);
  }
  const Eigen::Index T = model.patch_count() + (model.class_token ? 1 : 0);
  if (!match_position_table(m, v, model, T)) model.pos_embed = Matrix<double>::Zero(T, W);
  const graph::Shape expected = batched ? graph::Shape{1, T, W} : graph::Shape{T, W};
  if (m.shape(v) != expected)
    throw Refusal{"the embedded tokens '" + m.value(v).name + "' have shape " +
                  graph::shape_text(m.shape(v)) + ", expected " + graph::shape_text(expected)};
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

/// σ(Y·W₁ + b₁)·W₂ + b₂ from v (advanced to its output).
void match_mlp(Matcher& m, int& v, Model& model, TransformerBlock& block, bool first) {
  const graph::Graph& g = m.graph();
  block.fc1 = m.linear(v, model.width, "MLP's first layer");
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
    if (rms_norm_output(m, v) == p.input) return true;
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
  const bool rms = reads_rms_norm(m, v);  // LLaMA: pre-norm RMSNorm
  pre = pre || rms;
  if (first) {
    model.prenorm = pre;
    if (rms) model.norm = Prenorm::rmsnorm;
  } else if (pre != model.prenorm) {
    throw Refusal{at + " is " + (pre ? "pre" : "post") + "-norm, block 0 is not"};
  }
  if ((model.norm == Prenorm::rmsnorm) != rms)
    throw Refusal{at + "'s norm is " + (rms ? "" : "not ") + "an RMSNorm, block 0's is " +
                  (rms ? "not" : "one")};
  TransformerBlock block;
  bool causal = false;
  const auto attention = [&](int& u) {
    block.attention = m.attention(u, int(W), model.heads, model.text(), causal, at + "'s attention");
    if (first)
      model.causal = causal;
    else if (causal != model.causal)
      throw Refusal{at + "'s attention is " + (causal ? "causal" : "not causal") + ", block 0's is " +
                    (model.causal ? "causal" : "not causal")};
  };
  const int x = v;
  int u = x;
  if (pre) {
    block.norm1 = rms ? rms_norm(m, u, int(W), eps, at + "'s first norm")
                      : m.layer_norm(u, int(W), eps, at + "'s first norm");
    attention(u);
    const int x2 = residual(m, x, u, at + "'s attention residual");
    u = x2;
    block.norm2 = rms ? rms_norm(m, u, int(W), eps, at + "'s second norm")
                      : m.layer_norm(u, int(W), eps, at + "'s second norm");
    if (rms && reads_gated_mlp(m, m.skip_identity(u))) {  // LLaMA's SwiGLU
      int hidden = first ? -1 : model.mlp_width;
      gated_mlp(m, u, int(W), block, hidden);
      if (first) model.activation = Activation::silu, model.mlp_width = hidden;
      if (!first && !model.blocks[0].gated()) throw Refusal{at + "'s MLP is gated, block 0's is not"};
    } else {
      if (!first && model.blocks[0].gated()) throw Refusal{at + "'s MLP is not gated, block 0's is"};
      match_mlp(m, u, model, block, first);
    }
    v = residual(m, x2, u, at + "'s MLP residual");
  } else {
    attention(u);
    int x2 = residual(m, x, u, at + "'s attention residual");
    block.norm1 = m.layer_norm(x2, int(W), eps, at + "'s first norm");
    u = x2;
    match_mlp(m, u, model, block, first);
    int x3 = residual(m, x2, u, at + "'s MLP residual");
    block.norm2 = m.layer_norm(x3, int(W), eps, at + "'s second norm");
    v = x3;
  }
  block.attention.norm_gamma = block.norm1.gamma;
  block.attention.norm_beta = block.norm1.beta;
  model.blocks.push_back(std::move(block));
}

/// Reshapes of the pooled row that keep its `width` values (a dropped or added axis of length 1).
void skip_reshapes(Matcher& m, int& v, Eigen::Index width) {
  for (int k; (k = reader_of_kind(m, v, Op::reshape)) >= 0;) {
    if (graph::element_count(m.shape(m.graph().nodes[std::size_t(k)].output)) != width) return;
    m.consume(k);
    v = m.graph().nodes[std::size_t(k)].output;
  }
}

/// Whether slice node n takes one token (row `row`) of the tokens v, all of its width.
bool takes_one_token(const Matcher& m, const Node& n, int v, std::size_t axis, std::int64_t& row) {
  const auto& a = std::get<graph::SliceAttrs>(n.attributes);
  const graph::Shape &in = m.shape(v), &out = m.shape(n.output);
  if (n.inputs[0] != v || a.starts.size() != in.size() || out.size() != in.size() || out[axis] != 1 ||
      out.back() != in.back())
    return false;
  for (std::size_t k = 0; k < in.size(); ++k)
    if (a.steps[k] != 1 || (k != axis && a.starts[k] != 0)) return false;
  row = a.starts[axis];
  return true;
}

/// The pooling of the final tokens v ([1, T, W] or [T, W]) to one row: Gather or Slice of the first or last
/// token, or the mean (with a class token, of the Slice without it). Advances v to the pooled row. With
/// `one_row` (v the head's logits of every token) only the Gather or Slice of one token is accepted.
void match_pooling(Matcher& m, int& v, Model& model, bool normed, bool one_row = false) {
  const graph::Graph& g = m.graph();
  const Eigen::Index T = model.tokens();
  const std::size_t axis = m.shape(v).size() - 2;  // the token axis
  v = m.skip_identity(v);
  if (m.users(v).size() != 1 || is_output(g, v)) throw Refusal{"the final tokens are not pooled to one row"};
  const int k = m.users(v)[0];
  const Node& n = g.nodes[std::size_t(k)];
  std::int64_t row = -1;
  if (n.op == Op::gather) {
    const auto& a = std::get<graph::GatherAttrs>(n.attributes);
    if (n.inputs[0] == v && a.axis == std::int64_t(axis) && a.indices.size() == 1) row = a.indices[0];
  } else if (n.op == Op::slice && !takes_one_token(m, n, v, axis, row)) {
    row = -1;
  }
  if (n.op == Op::gather || (n.op == Op::slice && row >= 0 && (T == 1 || !model.class_token || row == 0))) {
    if (row != 0 && row != T - 1) throw Refusal{describe(n) + " takes neither the first nor the last token"};
    if (row == 0 && T > 1 && model.causal)
      throw Refusal{describe(n) +
                    " takes the first token of a causal model (which sees that token alone): no "
                    "pooling of the Model"};
    // The first token: the class token, or for text BERT's [CLS] position; the last: a causal model's
    // summary token. A single token is the last of a causal model and the first of any other.
    const bool first_is_cls = model.class_token || model.text();
    if (row == 0 && first_is_cls && !(T == 1 && model.causal))
      model.pooling = Pooling::cls;
    else if (row == T - 1 && (T > 1 || !model.class_token))
      model.pooling = Pooling::last;
    else
      throw Refusal{describe(n) + " takes the first token of a model without a class token"};
    m.consume(k);
    v = n.output;
    return;
  }
  if (one_row) throw Refusal{"the logits of every token go to " + describe(n) + ", not one token's row"};
  if (n.op != Op::slice && n.op != Op::reduce_mean)
    throw Refusal{"the final tokens go to " + describe(n) + ", not a pooling"};
  // The mean of the patch tokens: with a class token, a Slice dropping it before the ReduceMean.
  if (normed) throw Refusal{"the final norm acts before the mean pooling (the model normalises the mean)"};
  if (n.op == Op::slice) {
    const auto& a = std::get<graph::SliceAttrs>(n.attributes);
    graph::Shape rest = m.shape(v);
    rest[axis] = T - 1;
    std::vector<std::int64_t> starts(rest.size(), 0);
    starts[axis] = 1;
    if (!model.class_token || a.starts != starts || a.steps != std::vector<std::int64_t>(rest.size(), 1) ||
        m.shape(n.output) != rest)
      throw Refusal{describe(n) + " is not the patch tokens without the class token"};
    m.consume(k);
    v = n.output;
  } else if (model.class_token) {
    throw Refusal{describe(n) + " averages the class token with the patch tokens"};
  }
  const int kr = m.only_user(v, Op::reduce_mean, "mean pooling");
  const auto& a = std::get<graph::ReduceMeanAttrs>(g.nodes[std::size_t(kr)].attributes);
  if (a.axes != std::vector<std::int64_t>{std::int64_t(axis)})
    throw Refusal{"the mean pooling is not over the tokens"};
  model.pooling = Pooling::mean;
  m.consume(kr);
  v = g.nodes[std::size_t(kr)].output;
}

/// x·W + b with b = 0 when the graph adds none (the Model's heads always have a bias vector).
Affine with_bias(Affine a) {
  if (a.b.size() == 0) a.b = Vector<double>::Zero(a.W.cols());
  return a;
}

/// Whether the tokens v are read by one linear map (a language model's head over every token).
bool head_over_tokens(Matcher& m, int& v) {
  v = m.skip_identity(v);
  if (m.users(v).size() != 1 || is_output(m.graph(), v)) return false;
  const Node& n = m.graph().nodes[std::size_t(m.users(v)[0])];
  return (n.op == Op::matmul || n.op == Op::gemm) && n.inputs[0] == v;
}

/// The head's output v, the graph's one output: sets the classes.
void match_logits(Matcher& m, int v, Model& model) {
  const graph::Graph& g = m.graph();
  v = m.skip_identity(v);
  model.classes = int(model.head.W.cols());
  if (g.outputs.size() != 1 || g.outputs[0] != v || graph::element_count(m.shape(v)) != model.classes)
    throw Refusal{"the head's output '" + m.value(v).name + "' is not the graph's one output"};
}

/// The final norm, the pooling, BERT's pooler (a linear map to the width and tanh) and the head, from the
/// last block's tokens v to the graph's output. A causal language model's head over every token, then one
/// token's row of its logits (the row `regatta certify --position` selects), is the same function as the
/// head of that token's row: the final norm and the head act on each token alone.
void match_output(Matcher& m, int v, Model& model, double& eps) {
  const graph::Graph& g = m.graph();
  const Eigen::Index W = model.width;
  bool normed = false;
  const bool rms = model.norm == Prenorm::rmsnorm;
  v = m.skip_identity(v);
  if (rms ? reads_rms_norm(m, v) : reader_of_kind(m, v, Op::layer_norm) >= 0) {
    model.final_norm =
        rms ? rms_norm(m, v, int(W), eps, "final norm") : m.layer_norm(v, int(W), eps, "final norm");
    normed = true;
  }
  if (head_over_tokens(m, v)) {
    model.head = with_bias(m.linear(v, int(W), "head"));
    match_pooling(m, v, model, normed, true);
    skip_reshapes(m, v, model.head.W.cols());
    match_logits(m, v, model);
    return;
  }
  match_pooling(m, v, model, normed);
  skip_reshapes(m, v, W);
  v = m.skip_identity(v);
  if (!normed && (rms ? reads_rms_norm(m, v) : reader_of_kind(m, v, Op::layer_norm) >= 0)) {
    model.final_norm =
        rms ? rms_norm(m, v, int(W), eps, "final norm") : m.layer_norm(v, int(W), eps, "final norm");
    skip_reshapes(m, v, W);
  }
  Affine last = with_bias(m.linear(v, int(W), "head"));
  if (last.W.cols() == W && reader_of_kind(m, v, Op::tanh) >= 0) {  // that was the pooler
    const int k = m.users(v)[0];
    m.consume(k);
    v = g.nodes[std::size_t(k)].output;
    model.pooler = std::move(last);
    skip_reshapes(m, v, W);
    last = with_bias(m.linear(v, int(W), "head"));
  }
  model.head = std::move(last);
  match_logits(m, v, model);
}

Model match(const graph::Graph& g) {
  if (g.inputs.size() != 1 || g.outputs.size() != 1)
    throw Refusal{"the graph has not one input and one output"};
  Matcher m(g);
  Model model;
  // The layout names the structure read, not the naming: patches, class token and position table are a
  // timm ViT's; a text model is GPT-2's (causal) or BERT's (not), the LayerNorm text layouts.
  model.layout = "timm-vit";
  model.input = InputStage::patches;
  model.norm = Prenorm::layernorm;
  int v = g.inputs[0];
  double eps = -1;
  if (reads_patches(m, v)) {
    match_patches(m, v, model);
    match_embedding(m, v, model);
  } else {
    match_text_input(m, v, model, eps);
  }
  while (block_starts(m, m.skip_identity(v))) match_block(m, v, model, eps);
  if (model.blocks.empty()) throw Refusal{"no attention block after the embedding"};
  match_output(m, v, model, eps);
  if (model.text()) model.layout = model.norm == Prenorm::rmsnorm ? "llama" : model.causal ? "gpt2" : "bert";
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

namespace {
std::string shortest(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}
}  // namespace

std::string RecognisedTransformer::summary() const {
  const Model& m = model;
  if (m.text())
    return std::string(m.prenorm ? "pre" : "post") + "-norm " + (m.causal ? "causal " : "") +
           (m.norm == Prenorm::rmsnorm ? "RMSNorm " : "") +
           "text transformer: " + std::to_string(m.blocks.size()) + " blocks, width " +
           std::to_string(m.width) + ", " + std::to_string(m.heads) + " heads, MLP " +
           std::to_string(m.mlp_width) + " (" + to_string(m.activation) +
           (!m.blocks.empty() && m.blocks[0].gated() ? ", gated" : "") + "), " + to_string(m.pooling) +
           " pooling" +
           (!m.blocks.empty() && m.blocks[0].attention.rotary
                ? ", rotary theta " + shortest(m.blocks[0].attention.rotary->theta)
                : "") +
           (m.pos_embed.size() != 0 ? ", position table" : "") +
           (m.token_type.size() != 0 ? ", token type" : "") +
           (m.embed_norm.present() ? ", embedding norm" : "") +
           (m.final_norm.present() ? ", final norm" : "") + (m.pooler.W.size() != 0 ? ", tanh pooler" : "") +
           ", " + std::to_string(m.context) + " tokens, " + std::to_string(m.classes) + " classes";
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
