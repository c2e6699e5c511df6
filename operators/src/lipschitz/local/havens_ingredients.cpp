// The ingredients of the Havens et al. local sensitivity at one input: estimates and certified enclosures
// of ξ, κ_h and the spectral norms (see havens.hpp; docs/math/bounds.md#havens-local).
#include <regatta/operators/lipschitz/havens.hpp>
#include <regatta/operators/lipschitz/havens_operators.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <regatta/core/error.hpp>
#include <regatta/core/spectral_norm.hpp>

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

std::optional<std::string> havens_refusal(const AttentionLayer& layer, const AttentionOptions& options) {
  if (layer.kind != AttentionKind::dot)
    return "the score perturbation of docs/math/bounds.md#havens-kappa is for dot-product scores, not L2 "
           "attention";
  if (options.prenorm != Prenorm::none)
    return "a pre-normalisation inside F is outside the hypotheses of docs/math/bounds.md#havens-delta";
  if (options.sinkhorn_iterations != 1)
    return "Sinkhorn kernels are not row softmaxes (the 1/2-Lipschitz softmax step of "
           "docs/math/bounds.md#havens-delta does not apply)";
  if (layer.rotary)
    return "the score perturbation of docs/math/bounds.md#havens-kappa has no position-dependent rotation of "
           "queries and keys "
           "(rotary embeddings)";
  return std::nullopt;
}

namespace {

/// The per-head matrices of docs/math/bounds.md#havens-local in S, from the exact binary64 layer and X.
template <class S>
struct HavensMatrices {
  std::vector<Matrix<S>> P, WVO, A, C, B, WQ, WK, WV, WO;  // C = X A_hᵀ, B = X A_h + 1 b_Qᵀ W^Kᵀ/√d_h
  std::vector<Vector<S>> query_bias;                       // W^K_h b_Q,h/√d_h (empty without bias)
  Matrix<S> X;
  bool residual = false;
};

template <class S>
HavensMatrices<S> havens_matrices(const AttentionLayer& layer, const AttentionOptions& options,
                                  const Matrix<double>& X) {
  if (const auto why = havens_refusal(layer, options)) throw InputError("havens.local_delta", *why);
  const Block<S> block(layer, options);
  HavensMatrices<S> m;
  m.X = cast<S>(X);
  m.P = block.kernels(m.X);  // validates X
  m.residual = options.residual;
  using std::sqrt;
  const S inv_sqrt_dh = S(1) / sqrt(scalar_cast<S>(double(layer.head_dim)));
  for (int h = 0; h < layer.heads; ++h) {
    const Matrix<S>& WQ = block.WQ()[h];
    const Matrix<S>& WK = block.WK()[h];
    m.WQ.push_back(WQ);
    m.WK.push_back(WK);
    m.WV.push_back(cast<S>(layer.WV[h]));
    m.WO.push_back(cast<S>(Matrix<double>(layer.WO.middleRows(Index(h) * layer.value_dim, layer.value_dim))));
    m.WVO.push_back(block.WVO()[h]);
    const Matrix<S> WKt = WK.transpose();
    const Matrix<S> A = mul<S>(WQ, WKt) * inv_sqrt_dh;
    m.A.push_back(A);
    m.C.push_back(mul<S>(m.X, Matrix<S>(A.transpose())));
    Matrix<S> Q = mul<S>(m.X, WQ);
    if (!layer.bQ.empty()) {
      const Vector<S> bQ = cast<S>(layer.bQ[h]);
      Q.rowwise() += bQ.transpose();
      m.query_bias.push_back(Vector<S>(mul<S>(WK, Matrix<S>(bQ)) * inv_sqrt_dh));
    } else {
      m.query_bias.push_back(Vector<S>());
    }
    m.B.push_back(mul<S>(Q, WKt) * inv_sqrt_dh);
  }
  return m;
}

/// The product the library's Havens operators (havens_operators.hpp) use: Eigen's for double, the plain
/// triple loop for interval (local_support.hpp).
template <class S>
struct Product {
  Matrix<S> operator()(const Matrix<S>& a, const Matrix<S>& b) const { return mul<S>(a, b); }
};

template <class S>
Matrix<S> xi_of(const HavensMatrices<S>& m, const Matrix<S>& V) {
  return xi_apply<S>(m.residual, m.P, m.WVO, V, Product<S>{});
}
template <class S>
Matrix<S> xi_transpose_of(const HavensMatrices<S>& m, const Matrix<S>& U) {
  return xi_apply_transpose<S>(m.residual, m.P, m.WVO, U, Product<S>{});
}
template <class S>
Matrix<S> kappa_of(const Matrix<S>& C, const Matrix<S>& B, const Matrix<S>& V) {
  return kappa_apply<S>(C, B, V, Product<S>{});
}
template <class S>
Matrix<S> kappa_transpose_of(const Matrix<S>& C, const Matrix<S>& B, const Matrix<S>& G) {
  return kappa_apply_transpose<S>(C, B, G, Product<S>{});
}

template <class S>
S vector_norm(const Vector<S>& v) {
  using std::sqrt;
  S sum(0);
  for (Index i = 0; i < v.size(); ++i) sum += regatta::detail::square<S>(v(i));
  return sqrt(sum);
}

/// Certified enclosure [lower, upper] of ‖M‖₂ for an interval matrix.
/// Certified [lower, upper] of ‖M‖₂ over the box M: binary64 first (the MPFI entries rounded outward to
/// interval64, spectral_norm_upper_fast), the 106-bit MPFI Cholesky only when that reaches no Cholesky
/// certificate or an entry leaves the double range.
interval certified_norm(const Matrix<interval>& M) {
  if (M.size() == 0) return interval(0);
  const Matrix<interval64> fast = matrix_cast<interval64>(M);
  bool finite = true;
  for (Index r = 0; r < fast.rows() && finite; ++r)
    for (Index c = 0; c < fast.cols() && finite; ++c) finite = isfinite(fast(r, c));
  if (finite) {
    const CertifiedNormBound b = spectral_norm_upper_fast(fast);
    if (b.method == "binary64-cholesky") return enclosure(std::min(b.lower, b.upper), b.upper);
  }
  const CertifiedNormBound b = spectral_norm_upper_certified<interval>(M);
  return enclosure(std::min(b.lower, b.upper), b.upper);
}

/// [lower end of `below`, upper end of `above`] for an enclosure `below` of a value ≤ x and `above` of a
/// value ≥ x (the lower end is capped at the upper end; mathematically it never exceeds it).
interval bracket(const interval& below, const interval& above) {
  const mpfr hi = upper_bound(above);
  const mpfr lo = lower_bound(below);
  return make_interval(lo < hi ? lo : hi, hi);
}

/// [max(lo₁, lo₂), min(hi₁, hi₂)] of two enclosures of the same number (never empty in exact arithmetic;
/// should rounding ever make it so, the first enclosure is kept).
interval intersect(const interval& a, const interval& b) {
  const mpfr lo = std::max(lower_bound(a), lower_bound(b));
  const mpfr hi = std::min(upper_bound(a), upper_bound(b));
  return lo <= hi ? make_interval(lo, hi) : a;
}

}  // namespace

HavensIngredients<double> havens_estimates(const AttentionLayer& layer, const AttentionOptions& options,
                                           const Matrix<double>& X, const SpectralOptions& spectral) {
  check_spectral_options(spectral);
  const HavensMatrices<double> m = havens_matrices<double>(layer, options, X);
  HavensIngredients<double> q;
  q.n = X.rows();
  q.heads = layer.heads;
  q.skip = options.residual ? 1.0 : 0.0;
  const Index n = X.rows(), d = X.cols();
  const SpectralEstimate xi =
      matrix_free_norm_2([&](const Matrix<double>& V) { return xi_of(m, V); },
                         [&](const Matrix<double>& U) { return xi_transpose_of(m, U); }, n, d, spectral);
  q.xi = xi.estimate;
  q.xi_estimate = xi;
  q.input_two = spectral_norm_reference<double>(X);
  q.input_frobenius = X.norm();
  for (int h = 0; h < layer.heads; ++h) {
    const Matrix<double>& C = m.C[h];
    const Matrix<double>& B = m.B[h];
    const SpectralEstimate kappa = matrix_free_norm_2(
        [&](const Matrix<double>& V) { return kappa_of(C, B, V); },
        [&](const Matrix<double>& G) { return kappa_transpose_of(C, B, G); }, n, d, spectral);
    q.kappa.push_back(kappa.estimate);
    q.kappa_estimates.push_back(kappa);
    q.score.push_back(spectral_norm_reference<double>(m.A[h]));
    q.values.push_back(spectral_norm_reference<double>(m.WVO[h]));
    q.input_values.push_back(spectral_norm_reference<double>(Matrix<double>(X * m.WVO[h])));
    q.kernel.push_back(spectral_norm_reference<double>(m.P[h]));
    q.value_factors.push_back(spectral_norm_reference<double>(m.WV[h]) *
                              spectral_norm_reference<double>(m.WO[h]));
    q.kappa_split.push_back(spectral_norm_reference<double>(C) + spectral_norm_reference<double>(B));
    q.query_bias.push_back(m.query_bias[h].size() != 0 ? m.query_bias[h].norm() : 0.0);
    q.query_key.push_back(spectral_norm_reference<double>(m.WQ[h]) *
                          spectral_norm_reference<double>(m.WK[h]) / std::sqrt(double(layer.head_dim)));
  }
  return q;
}

HavensIngredients<interval> havens_certified(const AttentionLayer& layer, const AttentionOptions& options,
                                             const Matrix<double>& X,
                                             const HavensIngredients<double>& estimates, Index dense_limit) {
  const HavensMatrices<interval> m = havens_matrices<interval>(layer, options, X);
  if (!estimates.xi_estimate || Index(estimates.kappa_estimates.size()) != layer.heads)
    throw InputError("estimates", "must come from havens_estimates for the same layer and input");
  const Index n = X.rows(), d = X.cols();
  HavensIngredients<interval> q;
  q.n = n;
  q.heads = layer.heads;
  q.skip = interval(options.residual ? 1 : 0);
  q.input_two = certified_norm(m.X);
  q.input_frobenius = frobenius<interval>(m.X);
  using std::sqrt;
  const interval inv_sqrt_dh = interval(1) / sqrt(interval(layer.head_dim));
  for (int h = 0; h < layer.heads; ++h) {
    q.score.push_back(certified_norm(m.A[h]));
    q.values.push_back(certified_norm(m.WVO[h]));
    q.input_values.push_back(certified_norm(mul<interval>(m.X, m.WVO[h])));
    q.kernel.push_back(certified_norm(m.P[h]));
    q.value_factors.push_back(certified_norm(m.WV[h]) * certified_norm(m.WO[h]));
    q.kappa_split.push_back(certified_norm(m.C[h]) + certified_norm(m.B[h]));
    q.query_bias.push_back(m.query_bias[h].size() != 0 ? vector_norm<interval>(m.query_bias[h])
                                                       : interval(0));
    q.query_key.push_back(certified_norm(m.WQ[h]) * certified_norm(m.WK[h]) * inv_sqrt_dh);
  }
  // ξ: the witness value from below, the first naive bound from above (docs/math/bounds.md#havens-naive), the
  // dense certificate when
  // small.
  const bool dense = n * d <= dense_limit;
  const bool dense_kappa = dense && n * n <= 2 * dense_limit;
  {
    const Matrix<interval> w = cast<interval>(estimates.xi_estimate->witness);
    const interval lower = frobenius<interval>(xi_of(m, w)) / frobenius<interval>(w);
    interval upper = q.skip;
    for (int h = 0; h < layer.heads; ++h) upper += q.kernel[h] * q.values[h];
    q.xi = bracket(lower, upper);
    if (dense) {
      // Kronecker matrix I_n ⊗ (W^skip)ᵀ + Σ_h P_h ⊗ (W^VO_h)ᵀ: entry ((i,a),(j,b)) = δ_ij δ_ab [residual]
      // + Σ_h P_h,ij W^VO_h,ba (row-major vectorisation, docs/math/README.md#vectorisation).
      Matrix<interval> M = Matrix<interval>::Zero(n * d, n * d);
      for (Index i = 0; i < n; ++i)
        for (Index j = 0; j < n; ++j)
          for (Index a = 0; a < d; ++a)
            for (Index b = 0; b < d; ++b) {
              interval v(options.residual && i == j && a == b ? 1 : 0);
              for (int h = 0; h < layer.heads; ++h) v += m.P[h](i, j) * m.WVO[h](b, a);
              M(i * d + a, j * d + b) = v;
            }
      q.xi = intersect(q.xi, certified_norm(M));
    }
  }
  for (int h = 0; h < layer.heads; ++h) {
    const Matrix<interval> w = cast<interval>(estimates.kappa_estimates[h].witness);
    const interval lower = frobenius<interval>(kappa_of(m.C[h], m.B[h], w)) / frobenius<interval>(w);
    interval kappa = bracket(lower, q.kappa_split[h]);
    if (dense_kappa) {
      // 𝓛(V)_ij = Σ_b V_ib C_jb + B_ib V_jb: entry ((i,j),(k,b)) = δ_ik C_jb + δ_jk B_ib.
      Matrix<interval> M = Matrix<interval>::Zero(n * n, n * d);
      for (Index i = 0; i < n; ++i)
        for (Index j = 0; j < n; ++j)
          for (Index b = 0; b < d; ++b) {
            M(i * n + j, i * d + b) += m.C[h](j, b);
            M(i * n + j, j * d + b) += m.B[h](i, b);
          }
      kappa = intersect(kappa, certified_norm(M));
    }
    q.kappa.push_back(kappa);
  }
  q.certificate = std::string("xi: ") +
                  (dense ? "certified Cholesky of the Kronecker matrix (binary64, MPFI on fallback)"
                         : "naive bound ||W^skip|| + sum ||P_h|| ||W^VO_h||") +
                  "; kappa: " +
                  (dense_kappa ? "certified Cholesky of the Kronecker matrix (binary64, MPFI on fallback)"
                               : "||X A^T|| + ||B|| (triangle inequality)");
  return q;
}

}  // namespace regatta::lip
