// Attention blocks with JVP / VJP, generic over the scalar type (differentiable.hpp; attention.md §2, §4).
//
// One head, queries Xn = N(X) (n×d), context Yn = N(Y) (m×d):
//   Q = Xn·WQ + 1bQᵀ, K = Yn·WK + 1bKᵀ,
//   S_ij = q_i·k_j/√d_h (dot) or −‖q_i − k_j‖²/√d_h (l2, difference form), masked entries never formed,
//   kernel: t alternating normalisations in the log domain (§2.6), g⁰ = 0,
//     odd s:  f_i = −LSE_j(S_ij + g_j)   (R_s = row-softmax(S + 1gᵀ)),
//     even s: g_j = −LSE_i(S_ij + f_i)   (C_s = column-softmax(S + f1ᵀ)),
//   and the kernel is R_t (t odd) or C_t (t even) — for t = 1 the softmax P;
//   values V = Yn·WVO + 1·bVOᵀ (WVO = WV·WO or A·WV·WO), head output Kernel·V.
// F = [X] + Σ_h Kernel_h·V_h + bO.
//
// Derivatives (the kernel is exp(S + f1ᵀ + 1gᵀ) on visible entries):
//   JVP:  ḟ_i = −Σ_j R_ij(Ṡ_ij + ġ_j),  ġ_j = −Σ_i C_ij(Ṡ_ij + ḟ_i),  K̇ = K ⊙ (Ṡ + ḟ1ᵀ + 1ġᵀ);
//   VJP:  L̄ = K ⊙ K̄; S̄ = L̄, f̄ = L̄1, ḡ = L̄ᵀ1; then back through the steps:
//         odd s:  S̄ −= diag(f̄)·R_s, ḡ −= R_sᵀ f̄, f̄ = 0;   even s: S̄ −= C_s·diag(ḡ), f̄ −= C_s ḡ, ḡ = 0.
// For t = 1 these reduce to §4.1: Ṗ = P ⊙ (Ṡ − (P ⊙ Ṡ)11ᵀ), S̄ = P ⊙ (P̄ − (P ⊙ P̄)11ᵀ).
// Score derivatives: dot Ṡ = (Q̇Kᵀ + QK̇ᵀ)/√d_h, Q̄ = S̄K/√d_h, K̄ = S̄ᵀQ/√d_h; l2 (tied or untied, §4.4)
// Ṡ_ij = −(2/√d_h)(q_i − k_j)·(q̇_i − k̇_j), Q̄_i = −(2/√d_h)Σ_j S̄_ij(q_i − k_j), K̄_j = (2/√d_h)Σ_i S̄_ij(q_i −
// k_j).
//
// Interval arithmetic: every shift of a log-sum-exp is a point value (scalar_traits::pivot), so softmax rows
// are evaluated as exp(s − c)/Σ exp(s − c) with the identity exact for any c; all results are enclosures.
#include <regatta/operators/differentiable.hpp>

#include <cmath>
#include <type_traits>

#include <regatta/core/checks.hpp>
#include <regatta/core/convert.hpp>
#include <regatta/core/detail/scalar_math.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/operators/normalization.hpp>

namespace regatta::operators {

namespace {

template <class S>
using Mat = Matrix<S>;

/// A·B: Eigen's product for IEEE types, the plain triple loop for multiprecision (reference order; Eigen's
/// blocked kernels are not tuned for these types).
template <class S, class A, class B>
Mat<S> mul(const A& a, const B& b) {
  if constexpr (std::is_floating_point_v<S>) {
    return Mat<S>(a * b);
  } else {
    return regatta::detail::plain_product<S>(Mat<S>(a), Mat<S>(b));
  }
}

/// True when the point value a is above b (for interval: the upper endpoints are compared).
template <class S>
bool above(const S& a, const S& b) {
  if constexpr (scalar_traits<S>::is_interval) {
    return upper_bound(a) > upper_bound(b);
  } else {
    return a > b;
  }
}

bool visible(bool causal, Eigen::Index i, Eigen::Index j) { return !causal || j <= i; }

template <class S>
Mat<S> cast_matrix(const Matrix<double>& m) {
  return matrix_cast<S>(m);
}

template <class S>
Vector<S> cast_vector(const Vector<double>& v) {
  Vector<S> r(v.size());
  for (Eigen::Index i = 0; i < v.size(); ++i) r(i) = scalar_cast<S>(v(i));
  return r;
}

/// Row-softmax of T (rows over visible entries) into R; invisible entries are 0.
template <class S>
void softmax_rows(const Mat<S>& T, bool causal, Mat<S>& R) {
  using std::exp;
  R = Mat<S>::Zero(T.rows(), T.cols());
  for (Eigen::Index i = 0; i < T.rows(); ++i) {
    bool first = true;
    S c(0);
    for (Eigen::Index j = 0; j < T.cols(); ++j) {
      if (!visible(causal, i, j)) continue;
      const S p = scalar_traits<S>::pivot(T(i, j));
      if (first || above(p, c)) c = p;
      first = false;
    }
    S sum(0);
    for (Eigen::Index j = 0; j < T.cols(); ++j) {
      if (!visible(causal, i, j)) continue;
      R(i, j) = exp(T(i, j) - c);
      sum += R(i, j);
    }
    for (Eigen::Index j = 0; j < T.cols(); ++j)
      if (visible(causal, i, j)) R(i, j) /= sum;
  }
}

/// −log Σ_visible exp(T(i, ·)) per row (rows with no visible entry get 0: they carry no mass).
template <class S>
Vector<S> neg_lse_rows(const Mat<S>& T, bool causal) {
  using std::exp;
  using std::log;
  Vector<S> out(T.rows());
  for (Eigen::Index i = 0; i < T.rows(); ++i) {
    bool first = true;
    S c(0);
    for (Eigen::Index j = 0; j < T.cols(); ++j) {
      if (!visible(causal, i, j)) continue;
      const S p = scalar_traits<S>::pivot(T(i, j));
      if (first || above(p, c)) c = p;
      first = false;
    }
    if (first) {
      out(i) = S(0);
      continue;
    }
    S sum(0);
    for (Eigen::Index j = 0; j < T.cols(); ++j)
      if (visible(causal, i, j)) sum += exp(T(i, j) - c);
    out(i) = -(c + log(sum));
  }
  return out;
}

}  // namespace

/// Everything one block needs at a point (X, Y) to apply its derivatives.
template <class S>
struct BlockState {
  struct Head {
    Mat<S> Q, K;                // n×d_h, m×d_h
    Mat<S> V;                   // m×d: values through WVO (with the value bias)
    Mat<S> kernel;              // n×m
    std::vector<Mat<S>> steps;  // R_1, C_2, R_3, ... (t matrices; steps.back() == kernel)
  };
  const Block<S>* block = nullptr;
  /// Set by linearize / linearize_cross: a copy of the block that `block` then points to, so that a
  /// linearization stays valid after the block it came from is gone (forward passes use the block itself).
  std::shared_ptr<const Block<S>> owner;
  bool self = true;
  bool causal = false;
  Mat<S> X, Y, Xn, Yn;
  std::vector<Head> heads;

  Mat<S> value() const;
  /// Ṡ of head h for query / context tangents of the normalised tokens (either may be empty: zero).
  Mat<S> score_jvp(const Head& hd, const Mat<S>& Qdot, const Mat<S>& Kdot) const;
  Mat<S> kernel_jvp(const Head& hd, const Mat<S>& Sdot) const;
  Mat<S> kernel_vjp(const Head& hd, const Mat<S>& Kbar) const;
  /// Ḟ without the residual term, for tangents of the normalised queries / context (empty = zero).
  Mat<S> attention_jvp(const Mat<S>& Xn_dot, const Mat<S>& Yn_dot) const;
  /// Cotangents of the normalised queries and context for F̄ (without the residual term).
  void attention_vjp(const Mat<S>& Fbar, Mat<S>& Xn_bar, Mat<S>& Yn_bar) const;
  Mat<S> norm_jvp(const Mat<S>& Z, const Mat<S>& Zdot) const;
  Mat<S> norm_vjp(const Mat<S>& Z, const Mat<S>& Zbar) const;
};

template <class S>
Mat<S> BlockState<S>::norm_jvp(const Mat<S>& Z, const Mat<S>& Zdot) const {
  return normalize_rows_jvp<S>(block->options_.prenorm, Z, block->gamma_, block->norm_eps_, Zdot);
}

template <class S>
Mat<S> BlockState<S>::norm_vjp(const Mat<S>& Z, const Mat<S>& Zbar) const {
  return normalize_rows_vjp<S>(block->options_.prenorm, Z, block->gamma_, block->norm_eps_, Zbar);
}

template <class S>
Mat<S> BlockState<S>::value() const {
  Mat<S> F = block->options().residual ? X : Mat<S>(Mat<S>::Zero(X.rows(), block->d_));
  for (const Head& hd : heads) F += mul<S>(hd.kernel, hd.V);
  if (block->bO_.size() != 0) F.rowwise() += block->bO_.transpose();
  return F;
}

template <class S>
Mat<S> BlockState<S>::score_jvp(const Head& hd, const Mat<S>& Qdot, const Mat<S>& Kdot) const {
  const Eigen::Index n = hd.Q.rows(), m = hd.K.rows();
  const S& scale = block->inv_sqrt_dh_;
  Mat<S> Sdot = Mat<S>::Zero(n, m);
  if (block->kind_ == AttentionKind::dot) {
    if (Qdot.size() != 0) Sdot += mul<S>(Qdot, hd.K.transpose());
    if (Kdot.size() != 0) Sdot += mul<S>(hd.Q, Kdot.transpose());
    Sdot *= scale;
  } else {
    const S c = S(-2) * scale;
    for (Eigen::Index i = 0; i < n; ++i)
      for (Eigen::Index j = 0; j < m; ++j) {
        if (!visible(causal, i, j)) continue;
        S acc(0);
        for (Eigen::Index a = 0; a < hd.Q.cols(); ++a) {
          const S diff = hd.Q(i, a) - hd.K(j, a);
          S tangent(0);
          if (Qdot.size() != 0) tangent += Qdot(i, a);
          if (Kdot.size() != 0) tangent -= Kdot(j, a);
          acc += diff * tangent;
        }
        Sdot(i, j) = c * acc;
      }
  }
  return Sdot;
}

template <class S>
Mat<S> BlockState<S>::kernel_jvp(const Head& hd, const Mat<S>& Sdot) const {
  const Eigen::Index n = Sdot.rows(), m = Sdot.cols();
  Vector<S> fdot = Vector<S>::Zero(n), gdot = Vector<S>::Zero(m);
  for (std::size_t s = 0; s < hd.steps.size(); ++s) {
    const Mat<S>& W = hd.steps[s];
    if (s % 2 == 0) {  // row step (odd s counting from 1)
      for (Eigen::Index i = 0; i < n; ++i) {
        S acc(0);
        for (Eigen::Index j = 0; j < m; ++j)
          if (visible(causal, i, j)) acc += W(i, j) * (Sdot(i, j) + gdot(j));
        fdot(i) = -acc;
      }
    } else {  // column step
      for (Eigen::Index j = 0; j < m; ++j) {
        S acc(0);
        for (Eigen::Index i = 0; i < n; ++i)
          if (visible(causal, i, j)) acc += W(i, j) * (Sdot(i, j) + fdot(i));
        gdot(j) = -acc;
      }
    }
  }
  Mat<S> Kdot = Mat<S>::Zero(n, m);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < m; ++j)
      if (visible(causal, i, j)) Kdot(i, j) = hd.kernel(i, j) * (Sdot(i, j) + fdot(i) + gdot(j));
  return Kdot;
}

template <class S>
Mat<S> BlockState<S>::kernel_vjp(const Head& hd, const Mat<S>& Kbar) const {
  const Eigen::Index n = Kbar.rows(), m = Kbar.cols();
  Mat<S> Sbar = Mat<S>::Zero(n, m);
  Vector<S> fbar = Vector<S>::Zero(n), gbar = Vector<S>::Zero(m);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index j = 0; j < m; ++j) {
      if (!visible(causal, i, j)) continue;
      const S l = hd.kernel(i, j) * Kbar(i, j);
      Sbar(i, j) = l;
      fbar(i) += l;
      gbar(j) += l;
    }
  for (std::size_t s = hd.steps.size(); s-- > 0;) {
    const Mat<S>& W = hd.steps[s];
    if (s % 2 == 0) {  // f = −LSE_row(S + 1gᵀ)
      for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < m; ++j) {
          if (!visible(causal, i, j)) continue;
          const S w = W(i, j) * fbar(i);
          Sbar(i, j) -= w;
          gbar(j) -= w;
        }
      fbar.setZero();
    } else {  // g = −LSE_col(S + f1ᵀ)
      for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < m; ++j) {
          if (!visible(causal, i, j)) continue;
          const S w = W(i, j) * gbar(j);
          Sbar(i, j) -= w;
          fbar(i) -= w;
        }
      gbar.setZero();
    }
  }
  return Sbar;
}

template <class S>
Mat<S> BlockState<S>::attention_jvp(const Mat<S>& Xn_dot, const Mat<S>& Yn_dot) const {
  const Block<S>& b = *block;
  Mat<S> Fdot = Mat<S>::Zero(X.rows(), b.d_);
  for (std::size_t h = 0; h < heads.size(); ++h) {
    const Head& hd = heads[h];
    const Mat<S> Qdot = Xn_dot.size() != 0 ? mul<S>(Xn_dot, b.WQ_[h]) : Mat<S>();
    const Mat<S> Kdot = Yn_dot.size() != 0 ? mul<S>(Yn_dot, b.WK_[h]) : Mat<S>();
    const Mat<S> Sdot = score_jvp(hd, Qdot, Kdot);
    Fdot += mul<S>(kernel_jvp(hd, Sdot), hd.V);
    if (Yn_dot.size() != 0) Fdot += mul<S>(hd.kernel, mul<S>(Yn_dot, b.WVO_[h]));
  }
  return Fdot;
}

template <class S>
void BlockState<S>::attention_vjp(const Mat<S>& Fbar, Mat<S>& Xn_bar, Mat<S>& Yn_bar) const {
  const Block<S>& b = *block;
  Xn_bar = Mat<S>::Zero(Xn.rows(), b.d_);
  Yn_bar = Mat<S>::Zero(Yn.rows(), b.d_);
  for (std::size_t h = 0; h < heads.size(); ++h) {
    const Head& hd = heads[h];
    Mat<S> Kbar = mul<S>(Fbar, hd.V.transpose());
    Yn_bar += mul<S>(mul<S>(hd.kernel.transpose(), Fbar), b.WVO_[h].transpose());
    const Mat<S> Sbar = kernel_vjp(hd, Kbar);
    Mat<S> Qbar, Kb;
    if (b.kind_ == AttentionKind::dot) {
      Qbar = mul<S>(Sbar, hd.K) * b.inv_sqrt_dh_;
      Kb = mul<S>(Sbar.transpose(), hd.Q) * b.inv_sqrt_dh_;
    } else {
      const S c = S(2) * b.inv_sqrt_dh_;
      Qbar = Mat<S>::Zero(hd.Q.rows(), hd.Q.cols());
      Kb = Mat<S>::Zero(hd.K.rows(), hd.K.cols());
      for (Eigen::Index i = 0; i < hd.Q.rows(); ++i)
        for (Eigen::Index j = 0; j < hd.K.rows(); ++j) {
          if (!visible(causal, i, j)) continue;
          for (Eigen::Index a = 0; a < hd.Q.cols(); ++a) {
            const S w = c * Sbar(i, j) * (hd.Q(i, a) - hd.K(j, a));
            Qbar(i, a) -= w;
            Kb(j, a) += w;
          }
        }
    }
    Xn_bar += mul<S>(Qbar, b.WQ_[h].transpose());
    Yn_bar += mul<S>(Kb, b.WK_[h].transpose());
  }
}

// ---- Block ----

template <class S>
Block<S>::Block(const AttentionLayer& layer, const AttentionOptions& options)
    : d_(layer.d),
      heads_(layer.heads),
      head_dim_(layer.head_dim),
      value_dim_(layer.value_dim),
      kind_(layer.kind),
      options_(options) {
  layer.validate();
  if (options.sinkhorn_iterations < 1)
    throw InputError("sinkhorn_iterations",
                     "must be at least 1 (1 = softmax), got " + std::to_string(options.sinkhorn_iterations));
  if (layer.kind == AttentionKind::l2 && !options.allow_untied_l2 && !layer.tied())
    throw InputError("layer",
                     "untied L2 is outside the L2 theorem (WK must equal WQ; allow_untied_l2 overrides)");
  using std::sqrt;
  inv_sqrt_dh_ = S(1) / sqrt(scalar_cast<S>(double(head_dim_)));
  norm_eps_ = scalar_cast<S>(layer.norm_eps);
  WO_ = cast_matrix<S>(layer.WO);
  bVO_ = Vector<S>::Zero(d_);
  for (int h = 0; h < heads_; ++h) {
    WQ_.push_back(cast_matrix<S>(layer.WQ[h]));
    WK_.push_back(cast_matrix<S>(layer.WK[h]));
    WV_.push_back(cast_matrix<S>(layer.WV[h]));
    const Mat<S> WO_h = WO_.middleRows(Eigen::Index(h) * value_dim_, value_dim_);
    // l2 value map A_h·WV_h = WQ_h·(WQ_hᵀ·WV_h)/√d_h (attention.md §2.2), without forming A_h.
    const Mat<S> value_map = kind_ == AttentionKind::dot
                                 ? WV_[h]
                                 : Mat<S>(mul<S>(WQ_[h], mul<S>(WQ_[h].transpose(), WV_[h])) * inv_sqrt_dh_);
    WVO_.push_back(mul<S>(value_map, WO_h));
  }
  for (const auto& b : layer.bQ) bQ_.push_back(cast_vector<S>(b));
  for (const auto& b : layer.bK) bK_.push_back(cast_vector<S>(b));
  for (const auto& b : layer.bV) bV_.push_back(cast_vector<S>(b));
  if (layer.bO.size() != 0) bO_ = cast_vector<S>(layer.bO);
  if (layer.norm_gamma.size() != 0) gamma_ = cast_vector<S>(layer.norm_gamma);
  if (layer.norm_beta.size() != 0) beta_ = cast_vector<S>(layer.norm_beta);
}

template <class S>
std::shared_ptr<const BlockState<S>> Block<S>::state(const Mat<S>& X, const Mat<S>& Y, bool self) const {
  check_nonempty("X", X.rows());
  check_cols("X", X.cols(), d_);
  if (!self) {
    check_nonempty("Y", Y.rows());
    check_cols("Y", Y.cols(), d_);
  }
  for (const Mat<S>* Z : {&X, &Y})
    for (Eigen::Index i = 0; i < Z->rows(); ++i)
      for (Eigen::Index a = 0; a < Z->cols(); ++a)
        if (!scalar_traits<S>::is_finite((*Z)(i, a)))
          throw InputError(Z == &X ? "X" : "Y", "has a non-finite entry at (" + std::to_string(i) + ", " +
                                                    std::to_string(a) + ")");

  auto st = std::make_shared<BlockState<S>>();
  st->block = this;
  st->self = self;
  st->causal = options_.causal;
  st->X = regatta::detail::at_working_precision_all(X);
  st->Y = self ? st->X : regatta::detail::at_working_precision_all(Y);
  st->Xn = normalize_rows<S>(options_.prenorm, st->X, gamma_, beta_, norm_eps_);
  st->Yn = self ? st->Xn : normalize_rows<S>(options_.prenorm, st->Y, gamma_, beta_, norm_eps_);
  const Eigen::Index n = st->Xn.rows(), m = st->Yn.rows();
  const int t = options_.sinkhorn_iterations;
  for (int h = 0; h < heads_; ++h) {
    typename BlockState<S>::Head hd;
    hd.Q = mul<S>(st->Xn, WQ_[h]);
    hd.K = mul<S>(st->Yn, WK_[h]);
    if (!bQ_.empty()) hd.Q.rowwise() += bQ_[h].transpose();
    if (!bK_.empty()) hd.K.rowwise() += bK_[h].transpose();
    hd.V = mul<S>(st->Yn, WVO_[h]);
    if (!bV_.empty()) {
      const Mat<S> WO_h = WO_.middleRows(Eigen::Index(h) * value_dim_, value_dim_);
      const Mat<S> offset = mul<S>(Mat<S>(bV_[h].transpose()), WO_h);
      hd.V.rowwise() += offset.row(0);
    }
    // Scores on visible entries (masked entries stay 0 and are never read).
    Mat<S> Sc = Mat<S>::Zero(n, m);
    if (kind_ == AttentionKind::dot) {
      Sc = mul<S>(hd.Q, hd.K.transpose()) * inv_sqrt_dh_;
    } else {
      for (Eigen::Index i = 0; i < n; ++i)
        for (Eigen::Index j = 0; j < m; ++j) {
          if (!visible(options_.causal, i, j)) continue;
          S acc(0);
          for (Eigen::Index a = 0; a < hd.Q.cols(); ++a)
            acc += regatta::detail::square<S>(hd.Q(i, a) - hd.K(j, a));
          Sc(i, j) = -acc * inv_sqrt_dh_;
        }
    }
    Vector<S> f = Vector<S>::Zero(n), g = Vector<S>::Zero(m);
    for (int s = 0; s < t; ++s) {
      Mat<S> W;
      if (s % 2 == 0) {
        const Mat<S> T = Sc.rowwise() + g.transpose();
        softmax_rows<S>(T, options_.causal, W);
        if (s + 1 < t) f = neg_lse_rows<S>(T, options_.causal);
      } else {
        // Column step = row step of the transpose with the transposed (anticausal) mask.
        Mat<S> Tt = (Sc.colwise() + f).transpose();
        Mat<S> Wt = Mat<S>::Zero(m, n);
        {
          using std::exp;
          for (Eigen::Index j = 0; j < m; ++j) {
            bool first = true;
            S c(0);
            for (Eigen::Index i = 0; i < n; ++i) {
              if (!visible(options_.causal, i, j)) continue;
              const S p = scalar_traits<S>::pivot(Tt(j, i));
              if (first || above(p, c)) c = p;
              first = false;
            }
            if (first) continue;
            S sum(0);
            for (Eigen::Index i = 0; i < n; ++i) {
              if (!visible(options_.causal, i, j)) continue;
              Wt(j, i) = exp(Tt(j, i) - c);
              sum += Wt(j, i);
            }
            for (Eigen::Index i = 0; i < n; ++i)
              if (visible(options_.causal, i, j)) Wt(j, i) /= sum;
            if (s + 1 < t) {
              using std::log;
              g(j) = -(c + log(sum));
            }
          }
        }
        W = Wt.transpose();
      }
      hd.steps.push_back(std::move(W));
    }
    hd.kernel = hd.steps.back();
    st->heads.push_back(std::move(hd));
  }
  return st;
}

namespace {

/// The state with its own copy of the block (state() builds a fresh, non-const BlockState, so the cast only
/// restores the access its creator had).
template <class S>
std::shared_ptr<const BlockState<S>> owning(std::shared_ptr<const BlockState<S>> st, const Block<S>& block) {
  auto mutable_state = std::const_pointer_cast<BlockState<S>>(st);
  mutable_state->owner = std::make_shared<const Block<S>>(block);
  mutable_state->block = mutable_state->owner.get();
  return st;
}

}  // namespace

template <class S>
Mat<S> Block<S>::forward(const Mat<S>& X) const {
  return state(X, X, true)->value();
}

template <class S>
Mat<S> Block<S>::forward_cross(const Mat<S>& X, const Mat<S>& Y) const {
  return state(X, Y, false)->value();
}

template <class S>
std::vector<Mat<S>> Block<S>::kernels(const Mat<S>& X) const {
  const auto st = state(X, X, true);  // kept alive for the loop
  std::vector<Mat<S>> out;
  for (const auto& hd : st->heads) out.push_back(hd.kernel);
  return out;
}

template <class S>
std::vector<Mat<S>> Block<S>::kernels_cross(const Mat<S>& X, const Mat<S>& Y) const {
  const auto st = state(X, Y, false);
  std::vector<Mat<S>> out;
  for (const auto& hd : st->heads) out.push_back(hd.kernel);
  return out;
}

template <class S>
Linearization<S> Block<S>::linearize(const Mat<S>& X) const {
  Linearization<S> lin;
  auto st = owning(state(X, X, true), *this);
  lin.value_ = st->value();
  lin.states_.push_back(std::move(st));
  return lin;
}

template <class S>
CrossLinearization<S> Block<S>::linearize_cross(const Mat<S>& X, const Mat<S>& Y) const {
  CrossLinearization<S> lin;
  lin.state_ = owning(state(X, Y, false), *this);
  lin.value_ = lin.state_->value();
  return lin;
}

// ---- Linearization ----

namespace {

template <class S>
void check_tangent(const char* name, const Mat<S>& T, Eigen::Index rows, Eigen::Index cols) {
  check_shape(name, T.rows(), T.cols(), rows, cols);
}

}  // namespace

template <class S>
Eigen::Index Linearization<S>::input_cols() const {
  return states_.front()->X.cols();
}

template <class S>
Mat<S> Linearization<S>::jvp(const Mat<S>& Xdot) const {
  check_tangent<S>("Xdot", Xdot, rows(), input_cols());
  Mat<S> T = regatta::detail::at_working_precision_all(Xdot);
  for (const auto& st : states_) {
    const Mat<S> Tn = st->norm_jvp(st->X, T);
    Mat<S> next = st->attention_jvp(Tn, Tn);
    if (st->block->options().residual) next += T;
    T = std::move(next);
  }
  return T;
}

template <class S>
Mat<S> Linearization<S>::vjp(const Mat<S>& Fbar) const {
  check_tangent<S>("Fbar", Fbar, rows(), value_.cols());
  Mat<S> G = regatta::detail::at_working_precision_all(Fbar);
  for (auto it = states_.rbegin(); it != states_.rend(); ++it) {
    const BlockState<S>& st = **it;
    Mat<S> Xn_bar, Yn_bar;
    st.attention_vjp(G, Xn_bar, Yn_bar);
    Mat<S> prev = st.norm_vjp(st.X, Mat<S>(Xn_bar + Yn_bar));
    if (st.block->options().residual) prev += G;
    G = std::move(prev);
  }
  return G;
}

template <class S>
Mat<S> CrossLinearization<S>::jvp_query(const Mat<S>& Xdot) const {
  check_tangent<S>("Xdot", Xdot, state_->X.rows(), state_->X.cols());
  const Mat<S> T = regatta::detail::at_working_precision_all(Xdot);
  Mat<S> out = state_->attention_jvp(state_->norm_jvp(state_->X, T), Mat<S>());
  if (state_->block->options().residual) out += T;
  return out;
}

template <class S>
Mat<S> CrossLinearization<S>::jvp_context(const Mat<S>& Ydot) const {
  check_tangent<S>("Ydot", Ydot, state_->Y.rows(), state_->Y.cols());
  const Mat<S> T = regatta::detail::at_working_precision_all(Ydot);
  return state_->attention_jvp(Mat<S>(), state_->norm_jvp(state_->Y, T));
}

template <class S>
Mat<S> CrossLinearization<S>::vjp_query(const Mat<S>& Fbar) const {
  check_tangent<S>("Fbar", Fbar, value_.rows(), value_.cols());
  const Mat<S> G = regatta::detail::at_working_precision_all(Fbar);
  Mat<S> Xn_bar, Yn_bar;
  state_->attention_vjp(G, Xn_bar, Yn_bar);
  Mat<S> out = state_->norm_vjp(state_->X, Xn_bar);
  if (state_->block->options().residual) out += G;
  return out;
}

template <class S>
Mat<S> CrossLinearization<S>::vjp_context(const Mat<S>& Fbar) const {
  check_tangent<S>("Fbar", Fbar, value_.rows(), value_.cols());
  const Mat<S> G = regatta::detail::at_working_precision_all(Fbar);
  Mat<S> Xn_bar, Yn_bar;
  state_->attention_vjp(G, Xn_bar, Yn_bar);
  return state_->norm_vjp(state_->Y, Yn_bar);
}

// ---- Stack ----

template <class S>
Stack<S>::Stack(std::vector<Block<S>> blocks) : blocks_(std::move(blocks)) {
  if (blocks_.empty()) throw InputError("stack", "needs at least one block");
  for (std::size_t l = 1; l < blocks_.size(); ++l)
    if (blocks_[l].d() != blocks_[0].d())
      throw InputError("stack", "block " + std::to_string(l) + " has d = " + std::to_string(blocks_[l].d()) +
                                    ", block 0 has d = " + std::to_string(blocks_[0].d()));
}

template <class S>
Mat<S> Stack<S>::forward(const Mat<S>& X) const {
  Mat<S> Z = X;
  for (const auto& b : blocks_) Z = b.forward(Z);
  return Z;
}

template <class S>
Linearization<S> Stack<S>::linearize(const Mat<S>& X) const {
  Linearization<S> lin;
  Mat<S> Z = X;
  for (const auto& b : blocks_) {
    auto st = owning(b.state(Z, Z, true), b);
    Z = st->value();
    lin.states_.push_back(std::move(st));
  }
  lin.value_ = std::move(Z);
  return lin;
}

// ---- dense Jacobians ----

namespace {

template <class S, class Apply>
Mat<S> columns_from(Apply apply, Eigen::Index in_rows, Eigen::Index in_cols, Eigen::Index out_size) {
  Mat<S> J(out_size, in_rows * in_cols);
  Mat<S> E = Mat<S>::Zero(in_rows, in_cols);
  for (Eigen::Index j = 0; j < in_rows; ++j)
    for (Eigen::Index b = 0; b < in_cols; ++b) {
      E(j, b) = S(1);
      const Mat<S> col = apply(E);
      E(j, b) = S(0);
      for (Eigen::Index r = 0; r < col.rows(); ++r)
        for (Eigen::Index c = 0; c < col.cols(); ++c) J(r * col.cols() + c, j * in_cols + b) = col(r, c);
    }
  return J;
}

}  // namespace

template <class S>
Mat<S> dense_jacobian(const Linearization<S>& lin) {
  return columns_from<S>([&](const Mat<S>& E) { return lin.jvp(E); }, lin.rows(), lin.input_cols(),
                         lin.value().size());
}

template <class S>
Mat<S> dense_jacobian_query(const CrossLinearization<S>& lin, Eigen::Index n, Eigen::Index d) {
  return columns_from<S>([&](const Mat<S>& E) { return lin.jvp_query(E); }, n, d, lin.value().size());
}

template <class S>
Mat<S> dense_jacobian_context(const CrossLinearization<S>& lin, Eigen::Index m, Eigen::Index d) {
  return columns_from<S>([&](const Mat<S>& E) { return lin.jvp_context(E); }, m, d, lin.value().size());
}

#define REGATTA_INSTANTIATE(S)                                                                          \
  template struct BlockState<S>;                                                                        \
  template class Linearization<S>;                                                                      \
  template class CrossLinearization<S>;                                                                 \
  template class Block<S>;                                                                              \
  template class Stack<S>;                                                                              \
  template Matrix<S> dense_jacobian<S>(const Linearization<S>&);                                        \
  template Matrix<S> dense_jacobian_query<S>(const CrossLinearization<S>&, Eigen::Index, Eigen::Index); \
  template Matrix<S> dense_jacobian_context<S>(const CrossLinearization<S>&, Eigen::Index, Eigen::Index);
REGATTA_FOR_EACH_EXACT64_SCALAR(REGATTA_INSTANTIATE)
#undef REGATTA_INSTANTIATE

}  // namespace regatta::operators
