// The graph of a Model's forward function (model_graph.hpp; docs/graph.md#front-ends-safetensors-layouts).
// Every stage of forward.cpp becomes the graph nodes that compute the same real-number function, in the
// shapes the fusion pass reads attention from (tokens [n, d], heads [H, n, d_h]).
#include <regatta/operators/model_graph.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/graph/fuse.hpp>

#include "../rotary.hpp"
#include "model_graph_builder.hpp"

namespace regatta::operators {

// A named namespace, not an anonymous one: the unity build compiles this file in one translation unit with
// others of regatta::operators, and these names must not meet theirs.
namespace model_graph_detail {

using graph::Op;
using graph::Shape;

/// The additive causal mask: a masked key gets this score offset (the fusion pass counts entries at or below
/// −1e4 as masked; docs/graph.md#fusion).
constexpr double kMaskFill = -1e9;

class Assembler {
 public:
  Assembler(const Model& m, std::int64_t tokens, std::string source)
      : m_(m), n_(tokens), b_(std::move(source)) {}

  graph::Graph build() {
    int X = m_.text() ? embed_text() : embed_image();
    for (std::size_t k = 0; k < m_.blocks.size(); ++k)
      X = block(X, m_.blocks[k], "blocks." + std::to_string(k));
    int pooled = pool(X);
    if (m_.final_norm.present()) pooled = norm(pooled, m_.final_norm, m_.eps, "norm");
    if (m_.pooler.W.size() != 0)
      pooled = b_.node(Op::tanh, "pooler.tanh", {affine(pooled, m_.pooler, "pooler")}, b_.shape(pooled));
    const int logits = affine(pooled, m_.head, "head");
    graph::Graph g = b_.finish(b_.node(Op::identity, "logits", {logits}, b_.shape(logits)));
    graph::fuse(g);
    return g;
  }

 private:
  std::int64_t d() const { return m_.width; }

  /// x·W + 1·bᵀ for x [rows, in] (b empty: no add).
  int affine(int x, const Affine& a, const std::string& name) {
    const Shape out{b_.shape(x)[0], a.W.cols()};
    int y = b_.node(Op::matmul, name + ".matmul", {x, b_.matrix(name + ".weight", a.W)}, out);
    if (a.b.size() != 0) y = b_.node(Op::add, name + ".add", {y, b_.vector(name + ".bias", a.b)}, out);
    return y;
  }

  int ones(const std::string& name) { return b_.vector(name, Vector<double>::Ones(d())); }

  /// The model's row-wise norm (LayerNorm: one layer_norm node; RMSNorm: x / √(mean(x²) + ε) · γ).
  int norm(int x, const Vector<double>& gamma, const Vector<double>& beta, double eps,
           const std::string& name) {
    const Shape s = b_.shape(x);
    const int scale = gamma.size() != 0 ? b_.vector(name + ".weight", gamma) : ones(name + ".weight");
    if (m_.norm == Prenorm::layernorm) {
      std::vector<int> in{x, scale};
      if (beta.size() != 0) in.push_back(b_.vector(name + ".bias", beta));
      return b_.node(Op::layer_norm, name, in, s, graph::LayerNormAttrs{std::int64_t(s.size()) - 1, eps});
    }
    const int sq = b_.node(Op::pow, name + ".square", {x, b_.constant(name + ".two", {}, {2.0})}, s);
    const Shape r{s[0], 1};
    const int mean = b_.node(Op::reduce_mean, name + ".mean", {sq}, r, graph::ReduceMeanAttrs{{1}, true});
    const int shifted = b_.node(Op::add, name + ".add_eps", {mean, b_.constant(name + ".eps", {}, {eps})}, r);
    const int root = b_.node(Op::sqrt, name + ".sqrt", {shifted}, r);
    const int unit = b_.node(Op::div, name + ".div", {x, root}, s);
    return b_.node(Op::mul, name, {unit, scale}, s);
  }
  int norm(int x, const NormParameters& p, double eps, const std::string& name) {
    return norm(x, p.gamma, p.beta, eps, name);
  }

  int embed_image() {
    const std::int64_t c = m_.channels, p = m_.patch_size, size = m_.image_size, g = m_.grid();
    const int pixels = b_.input("pixels", {1, c, size, size});
    // The patch convolution: kernel = stride = p, weight [width, C, p, p] with entry (o, k) = W_E(k, o),
    // k = (c·p + ky)·p + kx (Model::pixel_of).
    const std::int64_t K = c * p * p;
    std::vector<double> w(static_cast<std::size_t>(d() * K));
    for (std::int64_t o = 0; o < d(); ++o)
      for (std::int64_t k = 0; k < K; ++k) w[static_cast<std::size_t>(o * K + k)] = m_.patch.W(k, o);
    graph::ConvAttrs conv;
    conv.strides = {p, p};
    int X = b_.node(Op::conv, "patch_embed.proj",
                    {pixels, b_.constant("patch_embed.proj.weight", {d(), c, p, p}, std::move(w)),
                     b_.vector("patch_embed.proj.bias", m_.patch.b)},
                    {1, d(), g, g}, conv);
    X = b_.node(Op::reshape, "patch_embed.flatten", {X}, {d(), g * g});
    X = b_.node(Op::transpose, "patch_embed.tokens", {X}, {g * g, d()}, graph::TransposeAttrs{{1, 0}});
    if (m_.class_token) {
      const int cls = b_.constant("cls_token", {1, d()},
                                  std::vector<double>(m_.cls_token.data(), m_.cls_token.data() + d()));
      X = b_.node(Op::concat, "cat_cls", {cls, X}, {n_, d()}, graph::ConcatAttrs{0});
    }
    return b_.node(Op::add, "add_pos", {X, b_.matrix("pos_embed", m_.pos_embed)}, {n_, d()});
  }

  int embed_text() {
    int X = b_.input("embeddings", {n_, d()});
    if (m_.pos_embed.size() != 0)
      X = b_.node(Op::add, "add_pos", {X, b_.matrix("pos_embed", m_.pos_embed.topRows(n_))}, {n_, d()});
    if (m_.token_type.size() != 0)
      X = b_.node(Op::add, "add_token_type", {X, b_.vector("token_type", m_.token_type)}, {n_, d()});
    if (m_.embed_norm.present()) X = norm(X, m_.embed_norm, m_.eps, "embeddings.norm");
    return X;
  }

  /// The per-head matrices side by side (d × H·cols) and their biases (empty when the layer has none).
  static Affine stacked(const std::vector<Matrix<double>>& W, const std::vector<Vector<double>>& b) {
    const Eigen::Index rows = W[0].rows(), cols = W[0].cols(), H = Eigen::Index(W.size());
    Affine a;
    a.W.resize(rows, H * cols);
    for (Eigen::Index h = 0; h < H; ++h) a.W.middleCols(h * cols, cols) = W[std::size_t(h)];
    if (!b.empty()) {
      a.b.resize(H * cols);
      for (Eigen::Index h = 0; h < H; ++h) a.b.segment(h * cols, cols) = b[std::size_t(h)];
    }
    return a;
  }

  /// Rows i of a head tensor [n, H, d_h] rotated by the angles of position i (layer.hpp): z·cos +
  /// rotate_half(z)·sin with rotate_half([z₁, z₂]) = [−z₂, z₁] and the tables [n, 1, d_h] = [cos φ, cos φ],
  /// [sin φ, sin φ].
  int rotate(int z, const std::string& name) {
    const Shape s = b_.shape(z);
    const std::int64_t half = s[2] / 2;
    const Shape halves{s[0], s[1], half};
    const int second =
        b_.node(Op::slice, name + ".second", {z}, halves, graph::SliceAttrs{{0, 0, half}, {1, 1, 1}});
    const int first =
        b_.node(Op::slice, name + ".first", {z}, halves, graph::SliceAttrs{{0, 0, 0}, {1, 1, 1}});
    const int neg = b_.node(Op::neg, name + ".neg", {second}, halves);
    const int turned = b_.node(Op::concat, name + ".rotate_half", {neg, first}, s, graph::ConcatAttrs{2});
    const int a = b_.node(Op::mul, name + ".cos", {z, rotary_cos_}, s);
    const int c = b_.node(Op::mul, name + ".sin", {turned, rotary_sin_}, s);
    return b_.node(Op::add, name, {a, c}, s);
  }

  /// The tables hold the binary64 cos and sin (rotary.hpp's double tables: what fusion and rotary_of read
  /// θ back from), each with the enclosure radius (docs/graph.md#enclosure-radii-of-constants) that covers
  /// the Model's exact rotation: the largest distance, rounded up, from a stored value to the far end of
  /// rotary.hpp's interval64 enclosure of cos or sin of the exact angle i·θ^(−2a/d_h).
  void rotary_tables(const Rotary& rotary, int head_dim) {
    if (rotary_cos_ >= 0) return;  // one pair of tables for every layer (the same θ and head_dim)
    const auto t = detail::rotary_tables<double>(rotary, n_, head_dim);
    const auto e = detail::rotary_tables<interval64>(rotary, n_, head_dim);
    const std::int64_t half = head_dim / 2;
    std::vector<double> c, s;
    double r = 0;
    const auto reach = [&r](double v, const interval64& x) {
      r = std::max({r, (interval64(x.upper()) - interval64(v)).upper(),
                    (interval64(v) - interval64(x.lower())).upper()});
    };
    for (std::int64_t i = 0; i < n_; ++i) {
      for (std::int64_t a = 0; a < half; ++a)
        reach(t.cos(i, a), e.cos(i, a)), reach(t.sin(i, a), e.sin(i, a));
      for (int copy = 0; copy < 2; ++copy)
        for (std::int64_t a = 0; a < half; ++a) c.push_back(t.cos(i, a)), s.push_back(t.sin(i, a));
    }
    rotary_cos_ = b_.constant("rotary.cos", {n_, 1, head_dim}, std::move(c));
    rotary_sin_ = b_.constant("rotary.sin", {n_, 1, head_dim}, std::move(s));
    b_.enclose(rotary_cos_, r);
    b_.enclose(rotary_sin_, r);
  }

  int causal_mask() {
    if (mask_ >= 0) return mask_;
    std::vector<double> mask(static_cast<std::size_t>(n_ * n_), 0.0);
    for (std::int64_t i = 0; i < n_; ++i)
      for (std::int64_t j = i + 1; j < n_; ++j) mask[static_cast<std::size_t>(i * n_ + j)] = kMaskFill;
    return mask_ = b_.constant("causal_mask", {n_, n_}, std::move(mask));
  }

  /// Multi-head attention of tokens x [n, d] (AttentionLayer, dot kind): heads split by reshape/transpose,
  /// scores Q·Kᵀ/√d_h (+ the causal mask), softmax over the keys, merge, output projection.
  int attention(int x, const AttentionLayer& l, const std::string& name) {
    const std::int64_t H = l.heads, dh = l.head_dim, dv = l.value_dim;
    const auto heads = [&](int p, std::int64_t cols, const std::string& what, bool rotated) {
      int z = b_.node(Op::reshape, name + "." + what + ".heads", {p}, {n_, H, cols});
      if (rotated) z = rotate(z, name + "." + what + ".rotary");
      return z;
    };
    const bool rope = l.rotary.has_value();
    if (rope) rotary_tables(*l.rotary, l.head_dim);
    const int q = heads(affine(x, stacked(l.WQ, l.bQ), name + ".q"), dh, "q", rope);
    const int k = heads(affine(x, stacked(l.WK, l.bK), name + ".k"), dh, "k", rope);
    const int v = heads(affine(x, stacked(l.WV, l.bV), name + ".v"), dv, "v", false);
    const int qt = b_.node(Op::transpose, name + ".q.t", {q}, {H, n_, dh}, graph::TransposeAttrs{{1, 0, 2}});
    const int kt = b_.node(Op::transpose, name + ".k.t", {k}, {H, dh, n_}, graph::TransposeAttrs{{1, 2, 0}});
    const int vt = b_.node(Op::transpose, name + ".v.t", {v}, {H, n_, dv}, graph::TransposeAttrs{{1, 0, 2}});
    const Shape scores{H, n_, n_};
    int s = b_.node(Op::matmul, name + ".scores", {qt, kt}, scores);
    // 1/√d_h as the graph's √ of the constant d_h (enclosed in interval evaluations, as Block's factor is).
    const int root =
        b_.node(Op::sqrt, name + ".sqrt_head_dim", {b_.constant(name + ".head_dim", {}, {double(dh)})}, {});
    s = b_.node(Op::div, name + ".scaled", {s, root}, scores);
    if (m_.causal) s = b_.node(Op::add, name + ".masked", {s, causal_mask()}, scores);
    const int p = b_.node(Op::softmax, name, {s}, scores, graph::SoftmaxAttrs{2, 3});
    int o = b_.node(Op::matmul, name + ".weighted", {p, vt}, {H, n_, dv});
    o = b_.node(Op::transpose, name + ".merge.t", {o}, {n_, H, dv}, graph::TransposeAttrs{{1, 0, 2}});
    o = b_.node(Op::reshape, name + ".merge", {o}, {n_, H * dv});
    return affine(o, Affine{l.WO, l.bO}, name + ".proj");
  }

  int activation(Activation act, int x, const std::string& name) {
    const Shape s = b_.shape(x);
    switch (act) {
      case Activation::gelu_erf:
        return b_.node(Op::gelu, name, {x}, s, graph::GeluAttrs{false});
      case Activation::gelu_tanh:
        return b_.node(Op::gelu, name, {x}, s, graph::GeluAttrs{true});
      case Activation::relu:
        return b_.node(Op::relu, name, {x}, s);
      case Activation::tanh:
        return b_.node(Op::tanh, name, {x}, s);
      case Activation::silu:  // x·s(x)
        return b_.node(Op::mul, name, {x, b_.node(Op::sigmoid, name + ".sigmoid", {x}, s)}, s);
    }
    throw std::logic_error("model_graph: unknown activation");
  }

  int mlp(int y, const TransformerBlock& blk, const std::string& name) {
    const int h = affine(y, blk.fc1, name + ".fc1");
    int a;
    if (blk.gated()) {  // SwiGLU: σ(Y·W_g + b_g) ⊙ (Y·W₁ + b₁)
      const int gate = activation(m_.activation, affine(y, blk.gate, name + ".gate"), name + ".act");
      a = b_.node(Op::mul, name + ".gated", {gate, h}, b_.shape(h));
    } else {
      a = activation(m_.activation, h, name + ".act");
    }
    return affine(a, blk.fc2, name + ".fc2");
  }

  int block(int X, const TransformerBlock& blk, const std::string& name) {
    const Shape s = b_.shape(X);
    const AttentionLayer& l = blk.attention;
    if (m_.prenorm) {  // X + MHA(N₁(X)), then X + MLP(N₂(X)); N₁ is the layer's pre-norm (Block)
      const int xn = norm(X, l.norm_gamma, l.norm_beta, l.norm_eps, name + ".norm1");
      X = b_.node(Op::add, name + ".attn.residual", {X, attention(xn, l, name + ".attn")}, s);
      const int y = norm(X, blk.norm2, m_.eps, name + ".norm2");
      return b_.node(Op::add, name + ".mlp.residual", {X, mlp(y, blk, name + ".mlp")}, s);
    }
    X = b_.node(Op::add, name + ".attn.residual", {X, attention(X, l, name + ".attn")}, s);
    X = norm(X, blk.norm1, m_.eps, name + ".norm1");
    X = b_.node(Op::add, name + ".mlp.residual", {X, mlp(X, blk, name + ".mlp")}, s);
    return norm(X, blk.norm2, m_.eps, name + ".norm2");
  }

  /// pool(): row 0 (cls), row n−1 (last), or the mean of the patch tokens / all tokens, as [1, d].
  int pool(int X) {
    const Shape row{1, d()};
    switch (m_.pooling) {
      case Pooling::cls:
        return b_.node(Op::slice, "pool.cls", {X}, row, graph::SliceAttrs{{0, 0}, {1, 1}});
      case Pooling::last:
        return b_.node(Op::slice, "pool.last", {X}, row, graph::SliceAttrs{{n_ - 1, 0}, {1, 1}});
      case Pooling::mean: {
        const std::int64_t first = m_.text() || !m_.class_token ? 0 : 1;
        if (first != 0 && n_ > 1)
          X = b_.node(Op::slice, "pool.patches", {X}, {n_ - first, d()},
                      graph::SliceAttrs{{first, 0}, {1, 1}});
        return b_.node(Op::reduce_mean, "pool.mean", {X}, row, graph::ReduceMeanAttrs{{0}, true});
      }
    }
    throw std::logic_error("model_graph: unknown pooling");
  }

  const Model& m_;
  std::int64_t n_;
  detail::GraphBuilder b_;
  int mask_ = -1, rotary_cos_ = -1, rotary_sin_ = -1;
};

}  // namespace model_graph_detail

graph::Graph model_graph(const Model& model, Eigen::Index input_length, const std::string& source) {
  model.validate();
  if (!model.accepts(input_length))
    throw InputError("input", std::to_string(input_length) + " values; the " + model.layout +
                                  " model takes " +
                                  (model.text() ? "n·" + std::to_string(model.width) +
                                                      " with 1 <= n <= " + std::to_string(model.context)
                                                : std::to_string(model.input_size())));
  for (const TransformerBlock& blk : model.blocks)
    if (blk.attention.kind != AttentionKind::dot)
      throw InputError("model.blocks", "l2 attention has no graph form (dot-product attention only)");
  const std::int64_t tokens = model.text() ? input_length / model.width : model.tokens();
  return model_graph_detail::Assembler(model, tokens, source + " (" + model.layout + ")").build();
}

}  // namespace regatta::operators
