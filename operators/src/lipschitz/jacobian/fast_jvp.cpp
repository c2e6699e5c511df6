// The interval64 JVP of one softmax self-attention block by midpoint–radius products (see fast_jvp.hpp).
#include <regatta/operators/lipschitz/fast_jvp.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/interval64_product.hpp>
#include <regatta/operators/normalization.hpp>

#include "../local/local_support.hpp"

namespace regatta::lip {

namespace {

using Eigen::Index;
using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using I = interval64;

Matrix<I> plus_row(Matrix<I> M, const Vector<double>& bias) {
  if (bias.size() != 0)
    for (Index i = 0; i < M.rows(); ++i)
      for (Index c = 0; c < M.cols(); ++c) M(i, c) += I(bias(c));
  return M;
}

Matrix<I> transposed(const Matrix<I>& M) { return M.transpose(); }

}  // namespace

Matrix<I> softmax_rows_fast(const Matrix<I>& S, bool causal) {
  const Index n = S.rows(), m = S.cols();
  Matrix<I> P = Matrix<I>::Constant(n, m, I(0));
  for (Index i = 0; i < n; ++i) {
    const Index visible = causal ? std::min(i + 1, m) : m;
    double c = -std::numeric_limits<double>::infinity();
    for (Index j = 0; j < visible; ++j) c = std::max(c, static_cast<double>(S(i, j)));
    I sum(0);
    for (Index j = 0; j < visible; ++j) {
      P(i, j) = exp(S(i, j) - I(c));
      sum += P(i, j);
    }
    for (Index j = 0; j < visible; ++j) P(i, j) /= sum;
  }
  return P;
}

std::optional<std::string> fast_jvp_refusal(const AttentionLayer& layer, const AttentionOptions& options) {
  if (options.sinkhorn_iterations != 1)
    return "the fast interval64 JVP needs softmax attention (Sinkhorn t = " +
           std::to_string(options.sinkhorn_iterations) + ")";
  if (layer.kind != AttentionKind::dot) return "the fast interval64 JVP needs dot-product attention";
  if (layer.rotary) return "the fast interval64 JVP does not handle rotary position embeddings";
  return std::nullopt;
}

Matrix<I> jacobian_jvp_fast(const AttentionLayer& layer, const AttentionOptions& options,
                            const Matrix<double>& X, const Matrix<double>& W) {
  if (const auto why = fast_jvp_refusal(layer, options)) throw InputError("fast JVP", *why);
  layer.validate();
  check_nonempty("X", X.rows());
  check_cols("X", X.cols(), layer.d);
  check_finite("X", X);
  check_shape("tangent", W.rows(), W.cols(), X.rows(), X.cols());
  check_finite("tangent", W);
  const Index n = X.rows(), d = layer.d;
  const Vector<I> gamma = detail::cast<I>(layer.norm_gamma), beta = detail::cast<I>(layer.norm_beta);
  const I eps(layer.norm_eps);
  const Matrix<I> Xs = X.cast<I>(), Ws = W.cast<I>();
  const Matrix<I> Xn = operators::normalize_rows<I>(options.prenorm, Xs, gamma, beta, eps);
  const Matrix<I> Wn = operators::normalize_rows_jvp<I>(options.prenorm, Xs, gamma, eps, Ws);
  const I inv_sqrt_dh = I(1) / sqrt(I(double(layer.head_dim)));
  Matrix<I> Fdot = options.residual ? Ws : Matrix<I>(Matrix<I>::Constant(n, d, I(0)));
  for (int h = 0; h < layer.heads; ++h) {
    const Matrix<double> WO_h = layer.WO.middleRows(Index(h) * layer.value_dim, layer.value_dim);
    const Matrix<I> Q =
        plus_row(midrad_product(Xn, layer.WQ[h]), layer.bQ.empty() ? Vector<double>() : layer.bQ[h]);
    const Matrix<I> K =
        plus_row(midrad_product(Xn, layer.WK[h]), layer.bK.empty() ? Vector<double>() : layer.bK[h]);
    const Matrix<I> V = midrad_product(
        plus_row(midrad_product(Xn, layer.WV[h]), layer.bV.empty() ? Vector<double>() : layer.bV[h]), WO_h);
    const Matrix<I> Qdot = midrad_product(Wn, layer.WQ[h]), Kdot = midrad_product(Wn, layer.WK[h]);
    const Matrix<I> Vdot = midrad_product(midrad_product(Wn, layer.WV[h]), WO_h);
    const Matrix<I> Kt = transposed(K);
    const Matrix<I> scores = midrad_product(Q, Kt);
    Matrix<I> Sdot = midrad_product(Qdot, Kt);
    Sdot += midrad_product(Q, transposed(Kdot));
    // Ṗ = P ⊙ (Ṡ − rowsum(P ⊙ Ṡ)) on the visible entries (P is 0 on the masked ones).
    const Matrix<I> P = softmax_rows_fast(Matrix<I>(scores * inv_sqrt_dh), options.causal);
    Matrix<I> Pdot = Matrix<I>::Constant(n, n, I(0));
    for (Index i = 0; i < n; ++i) {
      const Index visible = options.causal ? std::min(i + 1, n) : n;
      I mean(0);
      for (Index j = 0; j < visible; ++j) {
        Sdot(i, j) *= inv_sqrt_dh;
        mean += P(i, j) * Sdot(i, j);
      }
      for (Index j = 0; j < visible; ++j) Pdot(i, j) = P(i, j) * (Sdot(i, j) - mean);
    }
    Fdot += midrad_product(Pdot, V);
    Fdot += midrad_product(P, Vdot);
  }
  return Fdot;
}

I jacobian_ratio_fast(const AttentionLayer& layer, const AttentionOptions& options, const Matrix<double>& X,
                      const Matrix<double>& w) {
  check_shape("witness", w.rows(), w.cols(), X.rows(), X.cols());
  check_finite("witness", w);
  if (w.cwiseAbs().maxCoeff() == 0) throw InputError("witness", "is zero");
  const Matrix<I> image = jacobian_jvp_fast(layer, options, X, w);
  return detail::frobenius<I>(image) / detail::frobenius<I>(Matrix<I>(w.cast<I>()));
}

}  // namespace regatta::lip
