// The forward pass of a whole Model on affine forms over the ball (pass.hpp): the input stage, the blocks
// (attention, then the MLP), pooling and the head.
#include "pass.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include "attention.hpp"
#include "linear.hpp"
#include "nonlinear.hpp"
#include "norms.hpp"
#include "per_token.hpp"
#include "products.hpp"

namespace regatta::operators::affine {

namespace {

/// X + MLP(N(X)) (N = LN₂ for pre-norm, the identity for post-norm). `pooled`: X is the pooled row alone
/// (after the last attention), which reads LN₂ through project; other rows read it as one form.
/// `deferred` (the pooled row of the last block only): LN₂'s product remainder is left out of the result and
/// described there instead.
Form mlp_block(const Form& X, Index n, const Model& m, const TransformerBlock& blk, const Pass& p,
               bool pooled, Deferred* deferred) {
  std::optional<Rows> N;
  Form normed;
  if (m.prenorm) {
    N = normed_rows(X, n, m.width, m.norm, blk.norm2.gamma, blk.norm2.beta, m.eps, p);
    if (!pooled) normed = materialise(*N, m.width, p);
  }
  auto linear = [&](const Affine& map) {
    if (N && pooled) return project(*N, n, map.W, map.b, p);
    return linear_rows(N ? normed : X, n, map.W, map.b, p);
  };
  const Form H = linear(blk.fc1);
  const Function f = m.activation == Activation::silu        ? Function::silu
                     : m.activation == Activation::relu      ? Function::relu
                     : m.activation == Activation::tanh      ? Function::tanh
                     : m.activation == Activation::gelu_tanh ? Function::gelu_tanh
                                                             : Function::gelu_erf;
  if (deferred && N && pooled && !blk.gated() && f != Function::relu) {
    // Deferred: fc1 without the norm's product remainder, whose range widens the activation's range only.
    const Form lin = linear_rows(N->linear, 1, blk.fc1.W, blk.fc1.b, p);
    deferred->Zw = linear_rows(N->scaled, 1, blk.fc1.W, Vector<double>(), p);
    deferred->root = N->root;
    measure(deferred->Zw, p);
    measure(deferred->root, p);
    const Index hidden = lin.size();
    Form wide = lin;
    deferred->rho.resize(hidden);
    for (Index o = 0; o < hidden; ++o) {
      const I dev = deviation_product(deferred->Zw, o, deferred->root, 0, p);
      deferred->rho(o) = magnitude_of(dev);
      wide.s(o) = hi(I(wide.s(o)) + I(deferred->rho(o)));
    }
    wide.forget();
    const Linearisation l = linearise(wide, f, p);
    deferred->slope.resize(hidden);
    for (Index o = 0; o < hidden; ++o) {
      if (l.lambda[std::size_t(o)].lower() != l.lambda[std::size_t(o)].upper())
        throw std::logic_error("mlp_block: a tangent slope is a point");
      deferred->slope(o) = l.lambda[std::size_t(o)].lower();
    }
    deferred->W = blk.fc2.W;
    Form T = affine_entries(lin, l.lambda, l.M, p, fresh_count(l.beta));
    add_fresh(T, l.beta, p);
    return combine(X, linear_rows(T, 1, blk.fc2.W, blk.fc2.b, p), +1, p);
  }
  if (blk.gated()) {  // SwiGLU: σ(Y·W_g + b_g) ⊙ H, the product of two forms
    const Form G = nonlinear(linear(blk.gate), f, p);
    return combine(X, linear_rows(product(G, H, p), n, blk.fc2.W, blk.fc2.b, p), +1, p);
  }
  return combine(X, linear_rows(nonlinear(H, f, p), n, blk.fc2.W, blk.fc2.b, p), +1, p);
}

/// The input stage: embed(x + r·ε), linear in ε.
Form input_form(const Model& m, const Vector<double>& x, double r, const Pass& p) {
  const Matrix<I> centre = embed<I>(m, Vector<I>(x.cast<I>()));
  const Index N = centre.size(), q = x.size();
  Form L{Vector<double>::Zero(N), Matrix<double>::Zero(N, q), Vector<double>::Zero(N)};
  if (m.text()) {
    for (Index e = 0; e < q; ++e) L.A(e, e) = 1;
  } else {
    const int first = m.class_token ? 1 : 0, K = m.channels * m.patch_size * m.patch_size;
    for (int t = 0; t < m.patch_count(); ++t)
      for (int k = 0; k < K; ++k)
        for (int f = 0; f < m.width; ++f)
          L.A(Index(t + first) * m.width + f, m.pixel_of(t, k)) = m.patch.W(k, f);
  }
  Form F = affine_entries(L, I(r), std::vector<I>(std::size_t(N), I(0.0)), p);
  for (Index e = 0; e < N; ++e) {
    const I c = centre(e / m.width, e % m.width);
    F.c(e) = mid(c);
    F.s(e) = hi(I(F.s(e)) + I(halfwidth(c, F.c(e))));
  }
  F.forget();
  return F;
}

}  // namespace

/// The pooled row's form over the ball (what the final norm, the pooler and the head read).
/// `deferred`: as mlp_block's, for the last block.
Form pooled_form(const Model& m, const Vector<double>& x, double r, const Pass& p, Deferred* deferred) {
  Index n = m.text() ? x.size() / m.width : m.tokens();
  const Index d = m.width;
  Form X = input_form(m, x, r, p);
  if (m.embed_norm.present()) X = layer_norm(X, n, d, m.embed_norm.gamma, m.embed_norm.beta, m.eps, p);
  for (std::size_t b = 0; b < m.blocks.size(); ++b) {
    p.tick();
    const TransformerBlock& blk = m.blocks[b];
    std::vector<Index> queries(static_cast<std::size_t>(n));
    for (Index i = 0; i < n; ++i) queries[std::size_t(i)] = i;
    if (b + 1 == m.blocks.size() && n > 1 && m.pooling != Pooling::mean)
      // Only the pooled token reaches the head, and the rest of the network is row-wise from here.
      queries = {m.pooling == Pooling::cls ? 0 : n - 1};
    p.record = true;  // the products go to the ledger, the last block's with their other symbols exactly
    p.exact = b + 1 == m.blocks.size();
    X = attention_block(X, n, queries, blk.attention, m.prenorm ? m.norm : Prenorm::none, m.causal, p);
    n = Index(queries.size());
    if (!m.prenorm) X = layer_norm(X, n, d, blk.norm1.gamma, blk.norm1.beta, m.eps, p);
    p.tick();
    auto mlp = [&](const Form& rows, Index count, const Pass& pass) {
      Form out = mlp_block(rows, count, m, blk, pass, n == 1, b + 1 == m.blocks.size() ? deferred : nullptr);
      if (!m.prenorm) out = layer_norm(out, count, d, blk.norm2.gamma, blk.norm2.beta, m.eps, pass);
      return out;
    };
    X = n > 1 ? per_token(X, n, d, p,
                          [&](Index, const Form& row, const Pass& pass) {
                            return std::vector<Form>{mlp(row, 1, pass)};
                          })
                    .stacked(0)
              : mlp(X, n, p);
  }
  if (n > 1) {
    if (m.pooling == Pooling::mean) {
      const Index first = m.text() ? 0 : n - m.patch_count();
      std::vector<std::vector<Index>> columns(static_cast<std::size_t>(d));
      for (Index i = first; i < n; ++i)
        for (Index f = 0; f < d; ++f) columns[std::size_t(f)].push_back(i * d + f);
      X = affine_entries(sum_groups(X, columns, p), I(1.0) / I(double(n - first)),
                         std::vector<I>(std::size_t(d), I(0.0)), p);
    } else {
      X = keep_tokens(X, {m.pooling == Pooling::cls ? 0 : n - 1}, d);
    }
  }
  return X;
}

/// The logits' forms from the pooled row's.
Form logits_form(const Model& m, Form X, const Pass& p) {
  const Index d = m.width;
  if (m.final_norm.present()) X = norm_rows(X, 1, d, m.norm, m.final_norm.gamma, m.final_norm.beta, m.eps, p);
  if (m.pooler.W.size() != 0) X = nonlinear(linear_rows(X, 1, m.pooler.W, m.pooler.b, p), Function::tanh, p);
  return linear_rows(X, 1, m.head.W, m.head.b, p);
}

}  // namespace regatta::operators::affine
