// The rows of the Jacobian of one softmax self-attention block from their rank-one structure (see
// structured_rows.hpp; attention.md §4.1–§4.6).
#include <regatta/operators/lipschitz/structured_rows.hpp>

#include <optional>
#include <string>
#include <vector>

#include <regatta/core/error.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/operators/normalization.hpp>

#include "../rotary.hpp"
#include "local_support.hpp"

namespace regatta::lip {

namespace {
using Eigen::Index;
using namespace detail;
using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Block;
using operators::Linearization;
using operators::Prenorm;
}  // namespace

namespace {

/// Row (i, a) of J = DF(X) for F(X) = [X] + Σ_h P_h·V_h + const, P_h = softmax_row(S_h + M), V_h = Xn W^VO_h
/// + 1 c_hᵀ, Xn = N(X) (attention.md §4.1–§4.6). With F̄ = E_ia (only row i):
///   value path    Xn̄ += P_h,i·ᵀ ⊗ W^VO_h[:, a]ᵀ
///   kernel path   S̄_h = e_i s̄ᵀ with s̄_j = P_h,ij (V_h,ja − (P_h V_h)_ia)
///     dot:  Q̄_i = s̄ᵀK_h/√d_h (row i),  K̄ = s̄ q_iᵀ/√d_h            → Xn̄ += e_i Q̄_i W^Qᵀ + s̄ (q_i W^Kᵀ)/√d_h
///           with RoPE (q', k' rotated by position):  Xn̄ += e_i (ρ_iᵀ Q̄_i) W^Qᵀ + Σ_j s̄_j e_j (ρ_jᵀ q'_i)
///           W^Kᵀ/√d_h, Q̄_i = s̄ᵀK'/√d_h
///     l2:   Q̄_i = −c Σ_j s̄_j (q_i − k_j),  K̄_j = c s̄_j (q_i − k_j),  c = 2/√d_h
///           → Xn̄ += e_i Q̄_i W^Qᵀ + c s̄ ⊙ (q_i W^Kᵀ − k_j W^Kᵀ)_j
/// then X̄ = N'(X)ᵀ[Xn̄] row-wise, plus E_ia when residual. Each row costs O(H·n·d).
template <class S>
class StructuredRows {
 public:
  /// The rows of J at Xs; for an interval matrix Xs each entry of a row encloses that entry of J(X') for
  /// every X' in Xs (inclusion isotonicity of the formulas below).
  StructuredRows(const AttentionLayer& layer, const AttentionOptions& options, const Matrix<S>& Xs)
      : options_(options), kind_(layer.kind), n_(Xs.rows()), d_(layer.d) {
    if (const auto why = structured_rows_refusal(layer, options)) throw InputError("structured rows", *why);
    const Block<S> block(layer, options);
    const std::vector<Matrix<S>> kernels = block.kernels(Xs);  // validates X
    using std::sqrt;
    const S inv_sqrt_dh = S(1) / sqrt(scalar_cast<S>(double(layer.head_dim)));
    const Vector<S> gamma = cast<S>(layer.norm_gamma), beta = cast<S>(layer.norm_beta);
    const S eps = scalar_cast<S>(layer.norm_eps);
    const Matrix<S> Xn = operators::normalize_rows<S>(options.prenorm, Xs, gamma, beta, eps);
    if (options.prenorm != Prenorm::none) {
      operators::detail::normalized_rows(options.prenorm, Xs, eps, U_, inv_scale_);
      gamma_ = gamma;
    }
    const Matrix<S> WO = cast<S>(layer.WO);
    if (layer.rotary) rotary_ = operators::detail::rotary_tables<S>(*layer.rotary, n_, layer.head_dim);
    for (int h = 0; h < layer.heads; ++h) {
      Head hd;
      hd.P = kernels[h];
      const Matrix<S>& WQ = block.WQ()[h];
      const Matrix<S>& WK = block.WK()[h];
      hd.WQt = WQ.transpose();
      hd.WVO = block.WVO()[h];
      Matrix<S> Q = mul<S>(Xn, WQ), K = mul<S>(Xn, WK);
      if (!layer.bQ.empty()) Q.rowwise() += cast<S>(layer.bQ[h]).transpose();
      if (!layer.bK.empty()) K.rowwise() += cast<S>(layer.bK[h]).transpose();
      if (rotary_) {  // q'_i = ρ_i q_i, k'_j = ρ_j k_j (dot only: validate() refuses l2 with RoPE)
        operators::detail::rotate_rows(Q, *rotary_);
        operators::detail::rotate_rows(K, *rotary_);
        hd.WKt = WK.transpose();
        hd.Qs = Q * inv_sqrt_dh;
      }
      Matrix<S> V = mul<S>(Xn, hd.WVO);
      if (!layer.bV.empty()) {
        const Matrix<S> offset =
            mul<S>(Matrix<S>(cast<S>(layer.bV[h]).transpose()),
                   Matrix<S>(WO.middleRows(Index(h) * layer.value_dim, layer.value_dim)));
        V.rowwise() += offset.row(0);
      }
      hd.Vt = V.transpose();  // row a = column a of V, contiguous
      hd.F = mul<S>(hd.P, V);
      const Matrix<S> WKt = WK.transpose();
      hd.QW = mul<S>(Q, WKt);
      if (kind_ == AttentionKind::dot) {
        hd.QW *= inv_sqrt_dh;
        hd.K = K * inv_sqrt_dh;
      } else {
        const S c = S(2) * inv_sqrt_dh;
        hd.QW *= c;
        hd.KW = mul<S>(K, WKt) * c;
        hd.K = K * c;
        hd.Q = Q * c;
      }
      heads_.push_back(std::move(hd));
    }
  }

  Index n() const { return n_; }
  Index d() const { return d_; }

  /// G = row i·d + a of J, reshaped n×d.
  void row(Index i, Index a, Matrix<S>& G) {
    G.setZero(n_, d_);
    S tmp(0);
    Vector<S> sbar(n_), qbar, r(d_);
    for (Head& hd : heads_) {
      const Index dh = hd.WQt.rows();
      // s̄_j = P_ij (V_ja − F_ia)
      for (Index j = 0; j < n_; ++j) sbar(j) = hd.P(i, j) * (hd.Vt(a, j) - hd.F(i, a));
      // With RoPE the key part is s̄_j (ρ_jᵀ q'_i) W^Kᵀ/√d_h, a different vector per key j: the n×d matrix
      // U_i of them is built once per query row i (rows are visited i-major) for O(n·d_h·d).
      if (rotary_ && hd.rows_of != i) {
        hd.U.resize(n_, d_);
        Vector<S> v(dh);
        for (Index j = 0; j < n_; ++j) {
          v = hd.Qs.row(i).transpose();
          operators::detail::rotate_at(v, *rotary_, j, true);
          hd.U.row(j) = mul<S>(Matrix<S>(v.transpose()), hd.WKt);
        }
        hd.rows_of = i;
      }
      const Matrix<S>& key_part = rotary_ ? hd.U : hd.QW;
      const Index key_row_of = rotary_ ? -1 : i;  // U: row j; QW: row i for every j
      // Value path and the key part of the kernel path: G_jb += P_ij W^VO_ba + s̄_j u_b (u_b = key_part).
      for (Index j = 0; j < n_; ++j) {
        const S& p = hd.P(i, j);
        const S& s = sbar(j);
        const Index kr = key_row_of < 0 ? j : key_row_of;
        for (Index b = 0; b < d_; ++b) {
          add_product<S>(G(j, b), p, hd.WVO(b, a), tmp);
          add_product<S>(G(j, b), s, key_part(kr, b), tmp);
        }
      }
      qbar = Vector<S>::Zero(dh);
      if (kind_ == AttentionKind::dot) {
        for (Index j = 0; j < n_; ++j)
          for (Index c = 0; c < dh; ++c) add_product<S>(qbar(c), sbar(j), hd.K(j, c), tmp);
      } else {
        // −s̄_j K W^Kᵀ part of the keys, and Q̄_i = −c (q_i Σ_j s̄_j − Σ_j s̄_j k_j) (c folded into Q, K).
        S total(0);
        for (Index j = 0; j < n_; ++j) {
          total += sbar(j);
          const S minus = -sbar(j);
          for (Index b = 0; b < d_; ++b) add_product<S>(G(j, b), minus, hd.KW(j, b), tmp);
          for (Index c = 0; c < dh; ++c) add_product<S>(qbar(c), sbar(j), hd.K(j, c), tmp);
        }
        for (Index c = 0; c < dh; ++c) qbar(c) -= total * hd.Q(i, c);
      }
      // G_i· += Q̄_i W^Qᵀ, with Q̄_i taken back through ρ_iᵀ under RoPE
      if (rotary_) operators::detail::rotate_at(qbar, *rotary_, i, true);
      for (Index c = 0; c < dh; ++c)
        for (Index b = 0; b < d_; ++b) add_product<S>(G(i, b), qbar(c), hd.WQt(c, b), tmp);
    }
    if (options_.prenorm != Prenorm::none) {
      if (gamma_.size() != 0) G = G * gamma_.asDiagonal();
      operators::detail::apply_bracket(options_.prenorm, U_, inv_scale_, G);
    }
    if (options_.residual) G(i, a) += S(1);
  }

 private:
  struct Head {
    Matrix<S> P;    // n×n kernel
    Matrix<S> Vt;   // d×n values, transposed
    Matrix<S> F;    // n×d head output P V
    Matrix<S> WVO;  // d×d
    Matrix<S> WQt;  // d_h×d
    Matrix<S> QW;   // n×d: Q W^Kᵀ/√d_h (dot) or c Q W^Kᵀ (l2)
    Matrix<S> KW;   // n×d: c K W^Kᵀ (l2)
    Matrix<S> K;    // n×d_h: K/√d_h (dot) or c K (l2)
    Matrix<S> Q;    // n×d_h: c Q (l2)
    // RoPE: the rotated queries Q'/√d_h, W^Kᵀ, and U_i (n×d, row j = (ρ_jᵀ q'_i) W^Kᵀ/√d_h) for row i.
    Matrix<S> Qs, WKt, U;
    Index rows_of = -1;
  };
  AttentionOptions options_;
  AttentionKind kind_;
  Index n_, d_;
  std::vector<Head> heads_;
  Matrix<S> U_;
  Vector<S> inv_scale_, gamma_;
  std::optional<operators::detail::RotaryTables<S>> rotary_;
};

}  // namespace

std::optional<std::string> structured_rows_refusal(const AttentionLayer& layer,
                                                   const AttentionOptions& options) {
  if (options.sinkhorn_iterations != 1)
    return "the structured rows need softmax attention (Sinkhorn t = " +
           std::to_string(options.sinkhorn_iterations) + " couples every row of the kernel)";
  (void)layer;
  return std::nullopt;
}

template <class S>
InducedNorm<S> block_jacobian_norm_inf(const AttentionLayer& layer, const AttentionOptions& options,
                                       const Matrix<double>& X, const Progress& progress) {
  StructuredRows<S> rows(layer, options, cast<S>(X));
  RunningMax<S> best;
  Matrix<S> G;
  const Index total = rows.n() * rows.d();
  const std::string stage = stage_name<S>("norm-inf rows (structured)");
  report(progress, stage, 0, total);
  for (Index i = 0; i < rows.n(); ++i)
    for (Index a = 0; a < rows.d(); ++a) {
      rows.row(i, a, G);
      const Index k = i * rows.d() + a;
      best.add(abs_sum<S>(G), k);
      if (due(k + 1, total)) report(progress, stage, k + 1, total);
    }
  return best.result();
}

template <class S>
Matrix<S> block_dense_jacobian(const AttentionLayer& layer, const AttentionOptions& options,
                               const Matrix<double>& X, const Progress& progress) {
  return block_dense_jacobian_on_box<S>(layer, options, cast<S>(X), progress);
}

template <class S>
Matrix<S> block_dense_jacobian_on_box(const AttentionLayer& layer, const AttentionOptions& options,
                                      const Matrix<S>& X, const Progress& progress) {
  StructuredRows<S> rows(layer, options, X);
  const Index nd = rows.n() * rows.d();
  Matrix<S> J(nd, nd);
  Matrix<S> G;
  const std::string stage = stage_name<S>("dense Jacobian rows");
  report(progress, stage, 0, nd);
  for (Index i = 0; i < rows.n(); ++i)
    for (Index a = 0; a < rows.d(); ++a) {
      rows.row(i, a, G);
      const Index k = i * rows.d() + a;
      J.row(k) = Eigen::Map<const Eigen::Matrix<S, 1, Eigen::Dynamic>>(G.data(), nd);
      if (due(k + 1, nd)) report(progress, stage, k + 1, nd);
    }
  return J;
}

// ---- explicit instantiations ----

#define REGATTA_STRUCTURED_ROWS(S)                                                                   \
  template InducedNorm<S> block_jacobian_norm_inf<S>(const AttentionLayer&, const AttentionOptions&, \
                                                     const Matrix<double>&, const Progress&);        \
  template Matrix<S> block_dense_jacobian<S>(const AttentionLayer&, const AttentionOptions&,         \
                                             const Matrix<double>&, const Progress&);
REGATTA_FOR_EACH_CERTIFYING_SCALAR(REGATTA_STRUCTURED_ROWS)
#undef REGATTA_STRUCTURED_ROWS

#define REGATTA_LOCAL_BOX(S)                                                                        \
  template Matrix<S> block_dense_jacobian_on_box<S>(const AttentionLayer&, const AttentionOptions&, \
                                                    const Matrix<S>&, const Progress&);
REGATTA_FOR_EACH_INTERVAL_SCALAR(REGATTA_LOCAL_BOX)
#undef REGATTA_LOCAL_BOX

}  // namespace regatta::lip
