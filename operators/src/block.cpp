// One attention block: its weights in the scalar type, the forward pass and the state at a point that its
// linearisation keeps (see block_state.hpp for the formulas; docs/math/attention.md#layers).
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include <regatta/core/checks.hpp>
#include <regatta/core/convert.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/scalar.hpp>
#include <regatta/operators/normalization.hpp>

#include "block_state.hpp"

namespace regatta::operators {

namespace {

using detail::Mat;
using detail::mul;
using detail::owning;
using detail::visible;

/// True when the point value a is above b (for interval: the upper endpoints are compared).
template <class S>
bool above(const S& a, const S& b) {
  if constexpr (scalar_traits<S>::is_interval) {
    return upper_bound(a) > upper_bound(b);
  } else {
    return a > b;
  }
}

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
    // l2 value map A_h·WV_h = WQ_h·(WQ_hᵀ·WV_h)/√d_h (docs/math/attention.md#l2-mha), without forming A_h.
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
  rotary_ = layer.rotary;
}

template <class S>
std::shared_ptr<const BlockState<S>> Block<S>::state(MatrixRef<S> X, MatrixRef<S> Y, bool self) const {
  check_nonempty("X", X.rows());
  check_cols("X", X.cols(), d_);
  if (!self) {
    check_nonempty("Y", Y.rows());
    check_cols("Y", Y.cols(), d_);
  }
  for (const MatrixRef<S>* Z : {&X, &Y})
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
  if (rotary_) st->rotary = detail::rotary_tables<S>(*rotary_, std::max(n, m), head_dim_);
  for (int h = 0; h < heads_; ++h) {
    typename BlockState<S>::Head hd;
    hd.Q = mul<S>(st->Xn, WQ_[h]);
    hd.K = mul<S>(st->Yn, WK_[h]);
    if (!bQ_.empty()) hd.Q.rowwise() += bQ_[h].transpose();
    if (!bK_.empty()) hd.K.rowwise() += bK_[h].transpose();
    hd.Q = st->rotated(std::move(hd.Q));  // RoPE after the biases
    hd.K = st->rotated(std::move(hd.K));
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
Linearization<S> Block<S>::linearize(MatrixRef<S> X) const {
  Linearization<S> lin;
  auto st = owning(state(X, X, true), *this);
  lin.value_ = st->value();
  lin.states_.push_back(std::move(st));
  return lin;
}

template <class S>
CrossLinearization<S> Block<S>::linearize_cross(MatrixRef<S> X, MatrixRef<S> Y) const {
  CrossLinearization<S> lin;
  lin.state_ = owning(state(X, Y, false), *this);
  lin.value_ = lin.state_->value();
  return lin;
}

#define REGATTA_INSTANTIATE(S) template class Block<S>;
REGATTA_FOR_EACH_EXACT64_SCALAR(REGATTA_INSTANTIATE)
#undef REGATTA_INSTANTIATE

}  // namespace regatta::operators
