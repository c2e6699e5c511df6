// The JVP and VJP of one attention block at its state: scores, kernel (softmax or Sinkhorn steps) and values
// (see block_state.hpp for the formulas; docs/math/jacobian.md).
#include <cstddef>
#include <utility>

#include <regatta/core/scalar.hpp>
#include <regatta/operators/normalization.hpp>

#include "block_state.hpp"

namespace regatta::operators {

namespace {
using detail::Mat;
using detail::mul;
using detail::visible;
}  // namespace

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
    const Mat<S> Qdot = Xn_dot.size() != 0 ? rotated(mul<S>(Xn_dot, b.WQ_[h])) : Mat<S>();
    const Mat<S> Kdot = Yn_dot.size() != 0 ? rotated(mul<S>(Yn_dot, b.WK_[h])) : Mat<S>();
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
    Xn_bar += mul<S>(rotated(std::move(Qbar), true), b.WQ_[h].transpose());
    Yn_bar += mul<S>(rotated(std::move(Kb), true), b.WK_[h].transpose());
  }
}

#define REGATTA_INSTANTIATE(S) template struct BlockState<S>;
REGATTA_FOR_EACH_EXACT64_SCALAR(REGATTA_INSTANTIATE)
#undef REGATTA_INSTANTIATE

}  // namespace regatta::operators
