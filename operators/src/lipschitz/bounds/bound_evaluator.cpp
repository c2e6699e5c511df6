// The bound formulas of bounds.hpp, written once for double, mpfr and interval (docs/math/bounds.md).
#include "bound_evaluator.hpp"

#include <cmath>
#include <limits>
#include <type_traits>

#include <regatta/core/detail/scalar_math.hpp>
#include <regatta/core/lambert_w.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/operators/normalization.hpp>
#include "bound_table.hpp"
#include "matrix_norms.hpp"

namespace regatta::lip::detail {

namespace {

using Eigen::Index;
using operators::Prenorm;

template <class S>
S sqrt_of(const S& x) {
  using std::sqrt;
  return sqrt(x);
}

template <class S>
S exp_of(const S& x) {
  using std::exp;
  return exp(x);
}

/// x = 0 exactly (for interval: the point interval [0, 0]).
template <class S>
bool is_zero(const S& x) {
  if constexpr (scalar_traits<S>::is_interval)
    return lower_bound(x) == 0 && upper_bound(x) == 0;
  else
    return x == 0;
}

/// ‖v‖₂ in S (tight squares: an interval entry containing 0 must not give a negative sum).
template <class S>
S euclidean(const Vector<S>& v) {
  S sum(0);
  for (Index i = 0; i < v.size(); ++i) sum += ::regatta::detail::square(v(i));
  return sqrt_of(sum);
}

/// max|γ_k| (1 for an empty γ), exact.
double max_abs_gamma(const Vector<double>& gamma) {
  return gamma.size() == 0 ? 1.0 : gamma.cwiseAbs().maxCoeff();
}

/// Row-wise softmax of the score matrix of head h at tokens X (key bias dropped: it is row-constant; the
/// query bias is excluded by the hypotheses), with the causal mask when asked.
template <class S>
Matrix<S> attention_matrix(const Matrix<S>& Q, const Matrix<S>& K, const S& scale, bool causal) {
  const Index n = Q.rows();
  Matrix<S> P(n, n);
  for (Index i = 0; i < n; ++i) {
    const Index visible = causal ? i + 1 : n;
    for (Index j = 0; j < visible; ++j) P(i, j) = Q.row(i).dot(K.row(j)) * scale;
    S top = P(i, 0);
    for (Index j = 1; j < visible; ++j) top = max_of(top, P(i, j));
    const S shift = scalar_traits<S>::pivot(top);  // any shift gives the same softmax; a point keeps it tight
    S sum(0);
    for (Index j = 0; j < visible; ++j) {
      P(i, j) = exp_of(S(P(i, j) - shift));
      sum += P(i, j);
    }
    for (Index j = 0; j < visible; ++j) P(i, j) /= sum;
    for (Index j = visible; j < n; ++j) P(i, j) = S(0);
  }
  return P;
}

}  // namespace

template <class S>
BoundEvaluator<S>::BoundEvaluator(const operators::AttentionLayer& layer,
                                  const operators::AttentionOptions& options, const BoundSetting& setting)
    : layer_(layer), options_(options), setting_(setting) {}

// ---- per-head norms ----

template <class S>
const std::vector<S>& BoundEvaluator<S>::query_inf() {
  if (!query_inf_) {
    query_inf_.emplace();
    for (const auto& w : layer_.WQ) query_inf_->push_back(norm_inf<S>(w));
  }
  return *query_inf_;
}

template <class S>
const std::vector<S>& BoundEvaluator<S>::query_one() {
  if (!query_one_) {
    query_one_.emplace();
    for (const auto& w : layer_.WQ) query_one_->push_back(norm_one<S>(w));
  }
  return *query_one_;
}

template <class S>
const std::vector<S>& BoundEvaluator<S>::query_two() {
  if (!query_two_) {
    query_two_.emplace();
    for (const auto& w : layer_.WQ) {
      bool loose = false;
      query_two_->values.push_back(spectral<S>(w, &loose));
      query_two_->loose = query_two_->loose || loose;
    }
  }
  return use(*query_two_);
}

template <class S>
const std::vector<S>& BoundEvaluator<S>::value_one() {
  if (!value_one_) {
    value_one_.emplace();
    for (const auto& w : layer_.WV) value_one_->push_back(norm_one<S>(w));
  }
  return *value_one_;
}

template <class S>
const std::vector<S>& BoundEvaluator<S>::value_two() {
  if (!value_two_) {
    value_two_.emplace();
    for (const auto& w : layer_.WV) {
      bool loose = false;
      value_two_->values.push_back(spectral<S>(w, &loose));
      value_two_->loose = value_two_->loose || loose;
    }
  }
  return use(*value_two_);
}

template <class S>
const S& BoundEvaluator<S>::output_one() {
  if (!output_one_) output_one_ = norm_one<S>(layer_.WO);
  return *output_one_;
}

template <class S>
const S& BoundEvaluator<S>::output_two() {
  if (!output_two_) {
    output_two_.emplace();
    output_two_->values.push_back(spectral<S>(layer_.WO, &output_two_->loose));
  }
  return use(*output_two_).front();
}

template <class S>
const std::vector<S>& BoundEvaluator<S>::score_two() {
  if (!score_two_) {
    score_two_.emplace();
    const S root = sqrt_of(S(double(layer_.head_dim)));
    for (int h = 0; h < layer_.heads; ++h) {
      bool loose = false;
      score_two_->values.push_back(spectral_product<S>(layer_.WQ[h], layer_.WK[h], &loose) / root);
      score_two_->loose = score_two_->loose || loose;
    }
  }
  return use(*score_two_);
}

template <class S>
const std::vector<S>& BoundEvaluator<S>::values_two() {
  if (!values_two_) {
    values_two_.emplace();
    for (int h = 0; h < layer_.heads; ++h) {
      // W^V_h W^O_h = X Yᵀ with X = W^V_h (d×d_v) and Y = (W^O_h)ᵀ (d×d_v).
      const Matrix<double> out_t =
          layer_.WO.middleRows(Index(h) * layer_.value_dim, layer_.value_dim).transpose();
      bool loose = false;
      values_two_->values.push_back(spectral_product<S>(layer_.WV[h], out_t, &loose));
      values_two_->loose = values_two_->loose || loose;
    }
  }
  return use(*values_two_);
}

template <class S>
S BoundEvaluator<S>::bias_norm() {
  Vector<S> b = Vector<S>::Zero(layer_.d);
  if (!layer_.bV.empty())
    for (int h = 0; h < layer_.heads; ++h) {
      const Matrix<double> block = layer_.WO.middleRows(Index(h) * layer_.value_dim, layer_.value_dim);
      for (Index c = 0; c < layer_.d; ++c)
        for (Index a = 0; a < layer_.value_dim; ++a) b(c) += S(layer_.bV[h](a)) * S(block(a, c));
    }
  if (layer_.bO.size() != 0)
    for (Index c = 0; c < layer_.d; ++c) b(c) += S(layer_.bO(c));
  return euclidean(b);
}

template <class S>
const std::vector<S>& BoundEvaluator<S>::query_bias_two() {
  if (!query_bias_two_) {
    query_bias_two_.emplace();
    const S root = sqrt_of(S(double(layer_.head_dim)));
    for (int h = 0; h < layer_.heads; ++h) {
      Vector<S> c = Vector<S>::Zero(layer_.d);
      if (!layer_.bQ.empty())
        for (Index a = 0; a < layer_.d; ++a)
          for (Index k = 0; k < layer_.head_dim; ++k) c(a) += S(layer_.WK[h](a, k)) * S(layer_.bQ[h](k));
      query_bias_two_->push_back(euclidean(c) / root);
    }
  }
  return *query_bias_two_;
}

namespace {

/// [W^Q_h; β_hᵀ] with β_h = 2^{-k} b_Q,h ((d+1)×d_h); zero last row without a query bias.
Matrix<double> stacked_query(const operators::AttentionLayer& layer, int h, int k) {
  Matrix<double> stacked(layer.d + 1, layer.head_dim);
  stacked.topRows(layer.d) = layer.WQ[h];
  stacked.row(layer.d).setZero();
  if (!layer.bQ.empty())
    for (Index j = 0; j < layer.head_dim; ++j) stacked(layer.d, j) = std::ldexp(layer.bQ[h](j), -k);
  return stacked;
}

/// 2^{-k} b is exact for every entry (no underflow), so the stacked matrix is exactly [W^Q_h; b_Q,hᵀ/t].
bool exact_scaling(const Vector<double>& b, int k) {
  for (Index j = 0; j < b.size(); ++j)
    if (std::ldexp(std::ldexp(b(j), -k), k) != b(j)) return false;
  return true;
}

}  // namespace

template <class S>
const std::vector<int>& BoundEvaluator<S>::augmentation_exponents() {
  if (!augmentation_exponents_) {
    augmentation_exponents_.emplace();
    // The Remark of docs/bounds.md#augmented-castin: tokens (x, t) with t = 2^k give a valid bound for every
    // k, with ‖[A_h; c_hᵀ/t]‖₂²(R² + t²)² in place of ‖[A_h; c_hᵀ]‖₂²(R² + 1)² (per head: each head is its
    // own bias-free map on its own augmented tokens). k is chosen in double (the same k for every scalar
    // type); powers of two keep b_Q,h/t exact.
    const double R = options_.prenorm != Prenorm::none ? prenorm_radius<double>(layer_, options_.prenorm)
                                                       : *setting_.radius;
    for (int h = 0; h < layer_.heads; ++h) {
      int best = 0;
      double best_value = std::numeric_limits<double>::infinity();
      for (int k = -augmentation_exponent_limit; k <= augmentation_exponent_limit; ++k) {
        if (!layer_.bQ.empty() && !exact_scaling(layer_.bQ[h], k)) continue;
        const double a = spectral_product<double>(stacked_query(layer_, h, k), layer_.WK[h]);
        const double rr = R * R + std::ldexp(1.0, 2 * k);
        const double value = a * a * rr * rr;
        if (value < best_value) {
          best_value = value;
          best = k;
        }
      }
      augmentation_exponents_->push_back(best);
    }
  }
  return *augmentation_exponents_;
}

template <class S>
const std::vector<S>& BoundEvaluator<S>::augmented_score_two() {
  if (!augmented_score_two_) {
    augmented_score_two_.emplace();
    const S root = sqrt_of(S(double(layer_.head_dim)));
    for (int h = 0; h < layer_.heads; ++h) {
      const int k = augmentation_exponents()[h];
      // [A_h; c_hᵀ/t] = X Yᵀ/√d_h with X = [W^Q_h; b_Q,hᵀ/t] ((d+1)×d_h, exact) and Y = W^K_h (d×d_h).
      bool loose = false;
      S value = spectral_product<S>(stacked_query(layer_, h, k), layer_.WK[h], &loose) / root;
      if constexpr (scalar_traits<S>::is_interval) {
        // ‖[A; cᵀ/t]v‖² = ‖Av‖² + (cᵀv)²/t² ≤ (‖A‖² + ‖c‖²/t²)‖v‖²: a second certified upper end (helps when
        // the stacked product's certificate is loose). c/t is exact (t a power of two).
        const S a = score_two()[h], c = query_bias_two()[h] / S(std::ldexp(1.0, k));
        const S cap = sqrt_of(S(::regatta::detail::square(a) + ::regatta::detail::square(c)));
        if (upper_bound(cap) < upper_bound(value)) {
          const auto lo = lower_bound(value) < upper_bound(cap) ? lower_bound(value) : lower_bound(cap);
          value = make_interval(lo, upper_bound(cap));
          loose = score_two_->loose;
        }
      }
      augmented_score_two_->values.push_back(value);
      augmented_score_two_->loose = augmented_score_two_->loose || loose;
    }
  }
  return use(*augmented_score_two_);
}

// ---- shared ingredients ----

template <class S>
S BoundEvaluator<S>::lambda() {
  return lambert_phi_inverse<S>(S(double(*setting_.n - 1)));
}

template <class S>
S BoundEvaluator<S>::prenorm_lipschitz(Norm norm) {
  if (options_.prenorm == Prenorm::none) return S(1);
  // LayerNorm and RMSNorm: max|γ|/√ε in ℓ₂ (docs/math/bounds.md#layernorm, docs/math/bounds.md#rmsnorm), √d
  // times that in ℓ∞; row-wise maps have
  // the per-row constant on token matrices (block-diagonal Jacobian).
  S c = S(max_abs_gamma(layer_.norm_gamma)) / sqrt_of(S(layer_.norm_eps));
  if (norm == Norm::inf) c *= sqrt_of(S(double(layer_.d)));
  return c;
}

template <class S>
S BoundEvaluator<S>::attention_radius() {
  if (options_.prenorm != Prenorm::none) return prenorm_radius<S>(layer_, options_.prenorm);
  return S(*setting_.radius);
}

template <class S>
S BoundEvaluator<S>::query_radius() {
  if (options_.prenorm != Prenorm::none) return prenorm_radius<S>(layer_, options_.prenorm);
  return S(setting_.query_radius ? *setting_.query_radius : *setting_.radius);
}

template <class S>
S BoundEvaluator<S>::compose(const S& attention, Norm norm) {
  S c = attention * prenorm_lipschitz(norm);
  if (options_.residual) c += S(1);
  return c;
}

// ---- Kim et al. (2021), Theorem 3.2 (docs/math/bounds.md#kim-thm32) ----

template <class S>
S BoundEvaluator<S>::kim_inf() {
  const S dh(double(layer_.head_dim));
  S query(0), value(0);
  for (int h = 0; h < layer_.heads; ++h) {
    query = max_of(query, S(query_inf()[h] * query_one()[h]));
    value = max_of(value, value_one()[h]);
  }
  const S constant = S(S(4) * lambda() + S(1) / sqrt_of(dh)) * output_one() * query * value;
  return compose(constant, Norm::inf);
}

template <class S>
S BoundEvaluator<S>::kim_two(int query_power) {
  const S dh(double(layer_.head_dim));
  S sum(0);
  for (int h = 0; h < layer_.heads; ++h) {
    S q = query_two()[h] * query_two()[h];
    if (query_power == 4) q *= q;
    sum += q * value_two()[h] * value_two()[h];
  }
  return sqrt_of(S(S(double(*setting_.n)) / dh)) * (S(4) * lambda() + S(1)) * sqrt_of(sum) * output_two();
}

// ---- Castin, Ablin, Peyré (2024) on B_R (docs/math/bounds.md#castin-bounded-domain) ----

template <class S>
S BoundEvaluator<S>::castin_sqrt_n() {
  const S R = attention_radius();
  const S R4 = R * R * R * R;
  const S n(double(*setting_.n));
  S sum(0);
  for (int h = 0; h < layer_.heads; ++h) {
    const S a = score_two()[h];
    sum += sqrt_of(S(3)) * values_two()[h] * sqrt_of(S(a * a * R4 * (S(4) * n + S(1)) + n));
  }
  return compose(sum, Norm::two);
}

template <class S>
S BoundEvaluator<S>::castin_sqrt_n_augmented() {
  // docs/bounds.md#augmented-castin: castin.sqrt_n for the augmented tokens (x, 1) on B_√(R²+1), with the
  // score matrix [[A_h, 0], [c_hᵀ, 0]] (norm ‖[A_h; c_hᵀ]‖₂) and unchanged ‖V_h‖₂; with the Remark's t_h =
  // 2^k (augmentation_exponents) in place of 1.
  const S R = attention_radius();
  const S n(double(*setting_.n));
  S sum(0);
  for (int h = 0; h < layer_.heads; ++h) {
    const S a = augmented_score_two()[h];
    const S R2 = R * R + S(std::ldexp(1.0, 2 * augmentation_exponents()[h]));  // R² + t_h², t_h = 2^k
    const S R4 = R2 * R2;
    sum += sqrt_of(S(3)) * values_two()[h] * sqrt_of(S(a * a * R4 * (S(4) * n + S(1)) + n));
  }
  return compose(sum, Norm::two);
}

template <class S>
S BoundEvaluator<S>::castin_local(bool code_form) {
  Matrix<S> X = setting_.input.cast<S>();
  if (options_.prenorm != Prenorm::none)
    X = operators::normalize_rows<S>(options_.prenorm, X, layer_.norm_gamma.cast<S>(),
                                     layer_.norm_beta.cast<S>(), S(layer_.norm_eps));
  const Index n = X.rows();
  S r(0);  // max_{i,j} ‖x_i − x_j‖
  for (Index i = 0; i < n; ++i)
    for (Index j = i + 1; j < n; ++j) r = max_of(r, euclidean<S>((X.row(i) - X.row(j)).transpose()));
  const S scale = S(1) / sqrt_of(S(double(layer_.head_dim)));
  S sum(0);
  for (int h = 0; h < layer_.heads; ++h) {
    const Matrix<S> WQ = layer_.WQ[h].cast<S>(), WK = layer_.WK[h].cast<S>();
    const Matrix<S> Q = X * WQ, K = X * WK;
    // Rows of K W^Qᵀ/√d_h are (A x_i)ᵀ, rows of Q W^Kᵀ/√d_h are (Aᵀ x_i)ᵀ (score x_iᵀ A x_j).
    const Matrix<S> AX = K * WQ.transpose(), AtX = Q * WK.transpose();
    S rho(0), rho_t(0);
    for (Index i = 0; i < n; ++i) {
      rho = max_of(rho, S(euclidean<S>(AX.row(i).transpose()) * scale));
      rho_t = max_of(rho_t, S(euclidean<S>(AtX.row(i).transpose()) * scale));
    }
    const S v = values_two()[h];
    if (code_form) {
      const S rho_h = max_of(rho, rho_t);
      sum += v * sqrt_of(S(rho_h * rho_h * r * r * S(double(n + 1)) + S(double(n))));
      continue;
    }
    const Matrix<S> P = attention_matrix<S>(Q, K, scale, options_.causal);
    S c_max(0);  // largest column sum of P
    for (Index j = 0; j < n; ++j) {
      S column(0);
      for (Index i = 0; i < n; ++i) column += P(i, j);
      c_max = max_of(c_max, column);
    }
    sum += sqrt_of(S(3)) * v * sqrt_of(S(c_max * (S(1) + r * r * rho_t * rho_t) + r * r * rho * rho));
  }
  return code_form ? sum : compose(sum, Norm::two);
}

// ---- measure level (docs/math/bounds.md#mean-field): single-head constants summed over heads ----

template <class S>
S BoundEvaluator<S>::mf_query() {
  const S R = attention_radius();
  S sum(0);
  for (int h = 0; h < layer_.heads; ++h) sum += values_two()[h] * score_two()[h] * R * R;
  return compose(sum, Norm::two);
}

template <class S>
S BoundEvaluator<S>::mf_context() {
  // Theorem B: the residual's identity does not depend on the context, so it adds nothing; a pre-norm maps
  // both measures into P(B_R) (R its radius) and multiplies W₁ by at most Lip(N).
  const S R = attention_radius(), Rq = query_radius();
  S sum(0);
  for (int h = 0; h < layer_.heads; ++h) {
    if (is_zero(values_two()[h])) continue;  // 0·e^t: no NaN when e^t overflows a double
    const S t = S(2) * score_two()[h] * R * Rq;
    sum += values_two()[h] * (S(1) + t) * exp_of(t);
  }
  return sum * prenorm_lipschitz(Norm::two);
}

template <class S>
S BoundEvaluator<S>::mf_self_attention(const S& R) {
  S sum(0);
  for (int h = 0; h < layer_.heads; ++h) {
    if (is_zero(values_two()[h])) continue;  // 0·e^t: no NaN when e^t overflows a double
    const S t = score_two()[h] * R * R;
    sum += values_two()[h] * (S(1) + S(3) * t) * exp_of(S(2) * t);
  }
  return sum;
}

template <class S>
S BoundEvaluator<S>::mf_depth() {
  // Weight-shared stack (docs/math/bounds.md#mean-field-consequences): W₁ ≤ Π_ℓ c_ℓ W₁ with c_ℓ the layer's
  // mf.self constant at the radius
  // of its input measure; outputs of Γ lie in B_{Σ_h‖V_h‖R + ‖b‖} (values are convex combinations), plus the
  // input radius with a residual. With a pre-norm every layer sees radius √d‖γ‖∞ (+‖β‖) and c_ℓ is constant.
  S values(0);
  for (int h = 0; h < layer_.heads; ++h) values += values_two()[h];
  const S b = bias_norm();
  const bool prenorm = options_.prenorm != Prenorm::none;
  S R = prenorm ? prenorm_radius<S>(layer_, options_.prenorm) : S(*setting_.radius);
  S product(1);
  for (int l = 0; l < setting_.depth; ++l) {
    product *= compose(mf_self_attention(R), Norm::two);
    if (!prenorm) R = (options_.residual ? R : S(0)) + values * R + b;
  }
  return product;
}

// ---- dispatch ----

template <class S>
S BoundEvaluator<S>::operator()(Bound bound) {
  last_loose_ = false;
  return row(bound).formula.template of<S>()(*this);
}

template <class S>
S BoundEvaluator<S>::kim_two_quoted() {
  last_loose_ = false;
  return kim_two(2);
}

template <class S>
S BoundEvaluator<S>::castin_local_code_form() {
  last_loose_ = false;
  return castin_local(true);
}

#define REGATTA_BOUND_EVALUATOR(S) template class BoundEvaluator<S>;
REGATTA_FOR_EACH_EXACT64_SCALAR(REGATTA_BOUND_EVALUATOR)
#undef REGATTA_BOUND_EVALUATOR

}  // namespace regatta::lip::detail
