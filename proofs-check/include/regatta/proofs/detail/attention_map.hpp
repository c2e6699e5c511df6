#pragma once
// Internal: multi-head attention on token matrices with its JVP and dense Jacobian, materialised and
// generic over the scalar type — the maps the Kim and Castin claims are about, including the variants that
// lie outside the theorems (untied L2, masked diagonal, values without A_h).
//
//   F(X) = X·W_skip + Σ_h P_h(X)·X·Wval_h,     P_h = softmax_row(S_h + M)
//   dot: S_ij = c · q_iᵀ k_j;  l2: S_ij = −c · ‖q_i − k_j‖²  (difference form, never the expansion),
//   q = X·WQ_h, k = X·WK_h, c = the head's score scale (1/√d_h for Kim's L2 attention).
// Wval_h is the d×e value-output map (W^V_h W^O_h for dot attention, A_h W^V_h W^O_h for Kim's L2).
// Masks: none, causal (key j visible to query i iff j ≤ i) or no_diagonal (j ≠ i).
//
// JVP (docs/math/jacobian.md#softmax-derivative to docs/math/jacobian.md#l2-untied-derivatives): Ṡ_ij =
// c(q̇_iᵀk_j + q_iᵀk̇_j) or −2c(q_i − k_j)ᵀ(q̇_i − k̇_j),
// Ṗ = P ⊙ (Ṡ − rowsum(P ⊙ Ṡ)), Ḟ = Ẋ W_skip + Σ_h (Ṗ_h X + P_h Ẋ) Wval_h. The dense Jacobian has
// J(i·e + a, j·d + b) = ∂F_ia/∂X_jb (row-major vectorisation, docs/math/README.md#vectorisation): column (j,
// b) is the
// JVP along E_jb. Cost O(H n² (d_h + e)) per JVP, n·d JVPs for the Jacobian — for the small sizes of the
// claims.
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/proofs/detail/numeric.hpp>

namespace regatta::proofs::detail {

enum class ScoreKind { dot, l2 };
enum class MaskKind { none, causal, no_diagonal };

template <class S>
struct Head {
  Matrix<S> WQ, WK;  ///< d×d_h
  Matrix<S> Wval;    ///< d×e
  S scale = S(1);    ///< c
};

template <class S>
struct AttentionMap {
  ScoreKind kind = ScoreKind::dot;
  MaskKind mask = MaskKind::none;
  std::vector<Head<S>> heads;
  Matrix<S> skip;  ///< empty (no skip) or d×e

  bool visible(Eigen::Index i, Eigen::Index j) const {
    switch (mask) {
      case MaskKind::causal:
        return j <= i;
      case MaskKind::no_diagonal:
        return j != i;
      default:
        return true;
    }
  }
  Eigen::Index out_dim() const { return heads.empty() ? skip.cols() : heads.front().Wval.cols(); }

  /// The point-dependent quantities of one head.
  struct HeadState {
    Matrix<S> Q, K, V, P;
  };

  std::vector<HeadState> state(const Matrix<S>& X) const {
    std::vector<HeadState> out;
    const Eigen::Index n = X.rows();
    for (const Head<S>& h : heads) {
      HeadState st;
      st.Q = num::mul(X, h.WQ);
      st.K = num::mul(X, h.WK);
      st.V = num::mul(X, h.Wval);
      st.P = Matrix<S>::Zero(n, n);
      for (Eigen::Index i = 0; i < n; ++i) {
        std::vector<S> s(static_cast<std::size_t>(n), S(0));
        std::vector<bool> vis(static_cast<std::size_t>(n));
        for (Eigen::Index j = 0; j < n; ++j) {
          vis[j] = visible(i, j);
          if (vis[j]) s[j] = score(h, st.Q, st.K, i, j);
        }
        const std::vector<S> p = num::softmax(s, vis);
        for (Eigen::Index j = 0; j < n; ++j) st.P(i, j) = p[j];
      }
      out.push_back(std::move(st));
    }
    return out;
  }

  /// The attention matrices P_h(X).
  std::vector<Matrix<S>> kernels(const Matrix<S>& X) const {
    std::vector<Matrix<S>> out;
    for (auto& st : state(X)) out.push_back(st.P);
    return out;
  }

  Matrix<S> forward(const Matrix<S>& X) const {
    const auto st = state(X);
    Matrix<S> F = skip.size() != 0 ? num::mul(X, skip) : Matrix<S>(Matrix<S>::Zero(X.rows(), out_dim()));
    for (const auto& s : st) F += num::mul(s.P, s.V);
    return F;
  }

  Matrix<S> jvp(const std::vector<HeadState>& st, const Matrix<S>& X, const Matrix<S>& Xd) const {
    const Eigen::Index n = X.rows();
    Matrix<S> Fd = skip.size() != 0 ? num::mul(Xd, skip) : Matrix<S>(Matrix<S>::Zero(X.rows(), out_dim()));
    for (std::size_t h = 0; h < heads.size(); ++h) {
      const Head<S>& hd = heads[h];
      const HeadState& s = st[h];
      const Matrix<S> Qd = num::mul(Xd, hd.WQ), Kd = num::mul(Xd, hd.WK), Vd = num::mul(Xd, hd.Wval);
      Matrix<S> Pd = Matrix<S>::Zero(n, n);
      for (Eigen::Index i = 0; i < n; ++i) {
        std::vector<S> sd(static_cast<std::size_t>(n), S(0));
        S mean(0);
        for (Eigen::Index j = 0; j < n; ++j) {
          if (!visible(i, j)) continue;
          S v(0);
          if (kind == ScoreKind::dot) {
            for (Eigen::Index a = 0; a < s.Q.cols(); ++a) v += Qd(i, a) * s.K(j, a) + s.Q(i, a) * Kd(j, a);
            v *= hd.scale;
          } else {
            for (Eigen::Index a = 0; a < s.Q.cols(); ++a)
              v += (s.Q(i, a) - s.K(j, a)) * (Qd(i, a) - Kd(j, a));
            v *= S(-2) * hd.scale;
          }
          sd[j] = v;
          mean += s.P(i, j) * v;
        }
        for (Eigen::Index j = 0; j < n; ++j)
          if (visible(i, j)) Pd(i, j) = s.P(i, j) * (sd[j] - mean);
      }
      Fd += num::mul(Pd, s.V) + num::mul(s.P, Vd);
    }
    return Fd;
  }

  /// Dense Jacobian, (n·e)×(n·d). Column (j, b) is the JVP along E_jb, evaluated sparsely: only row j of
  /// the scores' derivative is full; any other row i has the single entry Ṡ_ij, whose effect on F_i is
  /// P_ij Ṡ_ij (V_j − m_i) with m_i = Σ_k P_ik V_k; the values add P_ij Wval(b, :). O(n·(d_h + e)) per
  /// column instead of the O(n²·(d_h + e)) of jvp() (which the tests compare it with).
  Matrix<S> jacobian(const Matrix<S>& X) const {
    const Eigen::Index n = X.rows(), d = X.cols(), e = out_dim();
    const auto st = state(X);
    Matrix<S> J = Matrix<S>::Zero(n * e, n * d);
    if (skip.size() != 0)
      for (Eigen::Index j = 0; j < n; ++j)
        for (Eigen::Index b = 0; b < d; ++b)
          for (Eigen::Index a = 0; a < e; ++a) J(j * e + a, j * d + b) += skip(b, a);
    for (std::size_t h = 0; h < heads.size(); ++h) {
      const Head<S>& hd = heads[h];
      const HeadState& s = st[h];
      const Matrix<S> M = num::mul(s.P, s.V);
      const Eigen::Index dh = hd.WQ.cols();
      std::vector<S> sd(static_cast<std::size_t>(n));
      for (Eigen::Index j = 0; j < n; ++j)
        for (Eigen::Index b = 0; b < d; ++b) {
          const Eigen::Index col = j * d + b;
          for (Eigen::Index i = 0; i < n; ++i) {
            if (!visible(i, j)) continue;
            for (Eigen::Index a = 0; a < e; ++a) J(i * e + a, col) += s.P(i, j) * hd.Wval(b, a);
            if (i == j) continue;
            S v(0);
            if (kind == ScoreKind::dot) {
              for (Eigen::Index c = 0; c < dh; ++c) v += s.Q(i, c) * hd.WK(b, c);
              v *= hd.scale;
            } else {
              for (Eigen::Index c = 0; c < dh; ++c) v += (s.Q(i, c) - s.K(j, c)) * hd.WK(b, c);
              v *= S(2) * hd.scale;
            }
            const S coef = s.P(i, j) * v;
            for (Eigen::Index a = 0; a < e; ++a) J(i * e + a, col) += coef * (s.V(j, a) - M(i, a));
          }
          // Row j: the query moves, and so does key j.
          S mean(0);
          for (Eigen::Index k = 0; k < n; ++k) {
            if (!visible(j, k)) continue;
            S v(0);
            if (kind == ScoreKind::dot) {
              for (Eigen::Index c = 0; c < dh; ++c) v += hd.WQ(b, c) * s.K(k, c);
              if (k == j)
                for (Eigen::Index c = 0; c < dh; ++c) v += s.Q(j, c) * hd.WK(b, c);
              v *= hd.scale;
            } else {
              for (Eigen::Index c = 0; c < dh; ++c)
                v += (s.Q(j, c) - s.K(k, c)) * (k == j ? S(hd.WQ(b, c) - hd.WK(b, c)) : S(hd.WQ(b, c)));
              v *= S(-2) * hd.scale;
            }
            sd[k] = v;
            mean += s.P(j, k) * v;
          }
          for (Eigen::Index k = 0; k < n; ++k) {
            if (!visible(j, k)) continue;
            const S coef = s.P(j, k) * (sd[k] - mean);
            for (Eigen::Index a = 0; a < e; ++a) J(j * e + a, col) += coef * s.V(k, a);
          }
        }
    }
    return J;
  }

  /// Dense Jacobian column by column from jvp() (the reference for jacobian()).
  Matrix<S> jacobian_from_jvp(const Matrix<S>& X) const {
    const Eigen::Index n = X.rows(), d = X.cols(), e = out_dim();
    const auto st = state(X);
    Matrix<S> J(n * e, n * d);
    Matrix<S> Xd = Matrix<S>::Zero(n, d);
    for (Eigen::Index j = 0; j < n; ++j)
      for (Eigen::Index b = 0; b < d; ++b) {
        Xd(j, b) = S(1);
        const Matrix<S> col = jvp(st, X, Xd);
        Xd(j, b) = S(0);
        for (Eigen::Index i = 0; i < n; ++i)
          for (Eigen::Index a = 0; a < e; ++a) J(i * e + a, j * d + b) = col(i, a);
      }
    return J;
  }

 private:
  S score(const Head<S>& h, const Matrix<S>& Q, const Matrix<S>& K, Eigen::Index i, Eigen::Index j) const {
    S v(0);
    if (kind == ScoreKind::dot) {
      for (Eigen::Index a = 0; a < Q.cols(); ++a) v += Q(i, a) * K(j, a);
      return h.scale * v;
    }
    for (Eigen::Index a = 0; a < Q.cols(); ++a) v += num::sq<S>(Q(i, a) - K(j, a));
    return -h.scale * v;
  }
};

}  // namespace regatta::proofs::detail
