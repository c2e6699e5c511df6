// The rows of the Jacobian of one softmax self-attention block from their rank-one structure (see
// structured_rows.hpp; docs/math/jacobian.md#softmax-derivative to docs/math/jacobian.md#mask-residual-norm).
#include <regatta/operators/lipschitz/structured_rows.hpp>

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/interval64_product.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/operators/lipschitz/fast_jvp.hpp>
#include <regatta/operators/normalization.hpp>

#include "../../rotary.hpp"
#include "../local/local_support.hpp"

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
/// + 1 c_hᵀ, Xn = N(X) (docs/math/jacobian.md#softmax-derivative to
///   docs/math/jacobian.md#mask-residual-norm). With F̄ = E_ia (only row i):
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
  /// With `point` (Xs a point, S = interval64) the precomputed products are midpoint–radius products
  /// (midrad_product), which enclose the same exact products as the scalar loop, at GEMM speed; on a box
  /// the scalar loop stays (up to 1.5 times tighter on wide intervals).
  StructuredRows(const AttentionLayer& layer, const AttentionOptions& options, const Matrix<S>& Xs,
                 bool point = false)
      : options_(options), kind_(layer.kind), n_(Xs.rows()), d_(layer.d) {
    const auto mul = [point](const Matrix<S>& A, const Matrix<S>& B) -> Matrix<S> {
      if constexpr (std::is_same_v<S, interval64>)
        if (point) return midrad_product(A, B);
      return detail::mul<S>(A, B);
    };
    if (const auto why = structured_rows_refusal(layer, options)) throw InputError("structured rows", *why);
    // interval64 at a point, dot attention without RoPE: no Block (its d×d products W^V_h W^O_h and the
    // values are scalar loops); the kernels come from the scores below (softmax_rows_fast) and W^VO_h from
    // one midpoint–radius product.
    bool direct = false;
    if constexpr (std::is_same_v<S, interval64>)
      direct = point && layer.kind == AttentionKind::dot && !layer.rotary;
    std::optional<Block<S>> block;
    std::vector<Matrix<S>> kernels;
    if (direct) {
      check_nonempty("X", Xs.rows());
      check_cols("X", Xs.cols(), layer.d);
      for (Index k = 0; k < Xs.size(); ++k)
        if (!scalar_traits<S>::is_finite(Xs.data()[k])) throw InputError("X", "has a non-finite entry");
    } else {
      block.emplace(layer, options);
      kernels = block->kernels(Xs);  // validates X
    }
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
      const Matrix<S> WQ = direct ? cast<S>(layer.WQ[h]) : block->WQ()[h];
      const Matrix<S> WK = direct ? cast<S>(layer.WK[h]) : block->WK()[h];
      hd.WQt = WQ.transpose();
      if constexpr (std::is_same_v<S, interval64>)
        if (direct)
          hd.WVO = midrad_product(
              layer.WV[h],
              cast<S>(Matrix<double>(layer.WO.middleRows(Index(h) * layer.value_dim, layer.value_dim))));
      if (!direct) {
        hd.P = kernels[h];
        hd.WVO = block->WVO()[h];
      }
      Matrix<S> Q = mul(Xn, WQ), K = mul(Xn, WK);
      if (!layer.bQ.empty()) Q.rowwise() += cast<S>(layer.bQ[h]).transpose();
      if (!layer.bK.empty()) K.rowwise() += cast<S>(layer.bK[h]).transpose();
      if constexpr (std::is_same_v<S, interval64>)
        if (direct) hd.P = softmax_rows_fast(mul(Q, Matrix<S>(K.transpose())) * inv_sqrt_dh, options.causal);
      if (rotary_) {  // q'_i = ρ_i q_i, k'_j = ρ_j k_j (dot only: validate() refuses l2 with RoPE)
        operators::detail::rotate_rows(Q, *rotary_);
        operators::detail::rotate_rows(K, *rotary_);
        hd.WKt = WK.transpose();
        hd.Qs = Q * inv_sqrt_dh;
      }
      Matrix<S> V = mul(Xn, hd.WVO);
      if (!layer.bV.empty()) {
        const Matrix<S> offset = mul(Matrix<S>(cast<S>(layer.bV[h]).transpose()),
                                     Matrix<S>(WO.middleRows(Index(h) * layer.value_dim, layer.value_dim)));
        V.rowwise() += offset.row(0);
      }
      hd.Vt = V.transpose();  // row a = column a of V, contiguous
      hd.F = mul(hd.P, V);
      const Matrix<S> WKt = WK.transpose();
      hd.QW = mul(Q, WKt);
      if (kind_ == AttentionKind::dot) {
        hd.QW *= inv_sqrt_dh;
        hd.K = K * inv_sqrt_dh;
      } else {
        const S c = S(2) * inv_sqrt_dh;
        hd.QW *= c;
        hd.KW = mul(K, WKt) * c;
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
    finish_row(i, a, G);
  }

  /// Whether dense_by_products applies: interval64 without RoPE (whose key part differs per key and query).
  bool products_apply() const { return std::is_same_v<S, interval64> && !rotary_; }

  /// Every row at once (S = interval64, products_apply()): the sums of products in row() regrouped so that
  /// each is one midpoint–radius product of interval64 matrices (midrad_product, binary64 GEMMs with an
  /// a-priori rounding bound) instead of n·d scalar interval loops. Entry (i·d + a, j·d + b) of J is
  ///   Σ_h P_h,ij W^VO_h,ba + Σ_h s̄_h(i,a,j) QW_h,ib − [l2] Σ_h s̄_h(i,a,j) KW_h,jb
  ///     + δ_ij Σ_h Σ_c Q̄_h(i,a,c) W^Qᵀ_h,cb,
  /// with s̄_h(i,a,j) = P_h,ij (V_h,ja − F_h,ia) and Q̄_h(i,a,·) = Σ_j s̄_h(i,a,j) K_h,j· (minus Σ_j s̄_h(i,a,j)
  /// times Q_h,i· for l2). The products: value path, per query row i, (P_h,ij)_(j,h) · (W^VO_h,ba)_(h,ab);
  /// key part, per i, (s̄_h(i,a,j))_(aj,h) · (QW_h,ib)_(h,b); l2 keys, per key row j,
  /// (−s̄_h(i,a,j))_(ia,h) · (KW_h,jb)_(h,b); query part, Q̄_h = s̄_h K_h per head, then the heads side by side
  /// times the stacked W^Qᵀ_h. Each product encloses its exact value and interval sums enclose sums, so every
  /// entry encloses the same real number as row() does; the pre-norm and residual steps are those of row().
  Matrix<S> dense_by_products(const Progress& progress) const {
    static_assert(std::is_same_v<S, interval64>);
    const Index H = Index(heads_.size()), n = n_, d = d_, nd = n * d;
    const std::string stage = stage_name<S>("dense Jacobian (midpoint-radius products)");
    report(progress, stage, 0, 4);
    // s̄_h as an (n·d)×n matrix: row i·d + a, column j.
    std::vector<Matrix<S>> sbar(heads_.size());
    for (Index h = 0; h < H; ++h) {
      const Head& hd = heads_[h];
      Matrix<S>& Sb = sbar[h];
      Sb.resize(nd, n);
      for (Index i = 0; i < n; ++i)
        for (Index a = 0; a < d; ++a)
          for (Index j = 0; j < n; ++j) Sb(i * d + a, j) = hd.P(i, j) * (hd.Vt(a, j) - hd.F(i, a));
    }
    Matrix<S> J(nd, nd);
    // Value path and key part, one query row i at a time.
    Matrix<S> W(H, d * d);  // row h: W^VO_h transposed, flattened as (a, b)
    for (Index h = 0; h < H; ++h)
      for (Index a = 0; a < d; ++a)
        for (Index b = 0; b < d; ++b) W(h, a * d + b) = heads_[h].WVO(b, a);
    Matrix<S> Pi(n, H), Si(d * n, H), QWi(H, d);
    for (Index i = 0; i < n; ++i) {
      for (Index h = 0; h < H; ++h) {
        const Head& hd = heads_[h];
        for (Index j = 0; j < n; ++j) Pi(j, h) = hd.P(i, j);
        for (Index a = 0; a < d; ++a)
          for (Index j = 0; j < n; ++j) Si(a * n + j, h) = sbar[h](i * d + a, j);
        for (Index b = 0; b < d; ++b) QWi(h, b) = hd.QW(i, b);
      }
      const Matrix<S> value = midrad_product(Pi, W);  // (j, a·d + b)
      const Matrix<S> key = midrad_product(Si, QWi);  // (a·n + j, b)
      for (Index a = 0; a < d; ++a)
        for (Index j = 0; j < n; ++j)
          for (Index b = 0; b < d; ++b) J(i * d + a, j * d + b) = value(j, a * d + b) + key(a * n + j, b);
    }
    report(progress, stage, 1, 4);
    if (kind_ == AttentionKind::l2) {  // − Σ_h s̄_h(i,a,j) KW_h,jb, one key row j at a time
      Matrix<S> Sj(nd, H), KWj(H, d);
      for (Index j = 0; j < n; ++j) {
        for (Index h = 0; h < H; ++h) {
          for (Index r = 0; r < nd; ++r) Sj(r, h) = -sbar[h](r, j);
          for (Index b = 0; b < d; ++b) KWj(h, b) = heads_[h].KW(j, b);
        }
        const Matrix<S> keys = midrad_product(Sj, KWj);  // (i·d + a, b)
        for (Index r = 0; r < nd; ++r)
          for (Index b = 0; b < d; ++b) J(r, j * d + b) += keys(r, b);
      }
    }
    report(progress, stage, 2, 4);
    // Query part: Q̄_h = s̄_h K_h per head, side by side, times the stacked W^Qᵀ_h.
    Index width = 0;
    for (const Head& hd : heads_) width += hd.WQt.rows();
    Matrix<S> Qbar(nd, width), WQ(width, d);
    Index offset = 0;
    for (Index h = 0; h < H; ++h) {
      const Head& hd = heads_[h];
      const Index dh = hd.WQt.rows();
      Matrix<S> qb = midrad_product(sbar[h], hd.K);  // (i·d + a, c)
      if (kind_ == AttentionKind::l2)
        for (Index i = 0; i < n; ++i)
          for (Index a = 0; a < d; ++a) {
            S total(0);
            for (Index j = 0; j < n; ++j) total += sbar[h](i * d + a, j);
            for (Index c = 0; c < dh; ++c) qb(i * d + a, c) -= total * hd.Q(i, c);
          }
      Qbar.middleCols(offset, dh) = qb;
      WQ.middleRows(offset, dh) = hd.WQt;
      offset += dh;
    }
    const Matrix<S> query = midrad_product(Qbar, WQ);  // (i·d + a, b)
    for (Index i = 0; i < n; ++i)
      for (Index a = 0; a < d; ++a)
        for (Index b = 0; b < d; ++b) J(i * d + a, i * d + b) += query(i * d + a, b);
    report(progress, stage, 3, 4);
    if (options_.prenorm != Prenorm::none || options_.residual) {
      Matrix<S> G(n, d);
      for (Index i = 0; i < n; ++i)
        for (Index a = 0; a < d; ++a) {
          const Index k = i * d + a;
          G = Eigen::Map<const Matrix<S>>(J.row(k).data(), n, d);
          finish_row(i, a, G);
          J.row(k) = Eigen::Map<const Eigen::Matrix<S, 1, Eigen::Dynamic>>(G.data(), nd);
        }
    }
    report(progress, stage, 4, 4);
    return J;
  }

 private:
  /// The pre-norm VJP (row-wise, through γ) and the residual's E_ia, applied to a row G of the attention
  /// part.
  void finish_row(Index i, Index a, Matrix<S>& G) const {
    if (options_.prenorm != Prenorm::none) {
      if (gamma_.size() != 0) G = G * gamma_.asDiagonal();
      operators::detail::apply_bracket(options_.prenorm, U_, inv_scale_, G);
    }
    if (options_.residual) G(i, a) += S(1);
  }

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

namespace {

/// The dense Jacobian from its rows, one row() at a time.
template <class S>
Matrix<S> dense_from_rows(StructuredRows<S>& rows, const Progress& progress) {
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

}  // namespace

template <class S>
Matrix<S> block_dense_jacobian(const AttentionLayer& layer, const AttentionOptions& options,
                               const Matrix<double>& X, const Progress& progress) {
  StructuredRows<S> rows(layer, options, cast<S>(X), /*point=*/true);
  // interval64 at a point: every interval is narrow and the midpoint–radius products lose nothing
  // measurable. On a box (block_dense_jacobian_on_box, wide intervals) the scalar rows stay, since a
  // midpoint–radius product of two interval matrices may be up to 1.5 times wider than the scalar one.
  if constexpr (std::is_same_v<S, interval64>)
    if (rows.products_apply()) return rows.dense_by_products(progress);
  return dense_from_rows(rows, progress);
}

template <class S>
Matrix<S> block_dense_jacobian_on_box(const AttentionLayer& layer, const AttentionOptions& options,
                                      const Matrix<S>& X, const Progress& progress) {
  StructuredRows<S> rows(layer, options, X);
  return dense_from_rows(rows, progress);
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
