#pragma once
// Row-wise LayerNorm and RMSNorm with their JVP and VJP (docs/math/attention.md#normalisation,
// docs/math/jacobian.md#mask-residual-norm), generic over
// the scalar type. γ empty means 1, β empty means 0.
//
//   LN(x)  = γ ⊙ (x − x̄1)/s + β,  s = √(σ²(x) + ε),  σ² the biased variance
//   RMS(x) = γ ⊙ x/r,             r = √(‖x‖²/d + ε)
//   J_LN  = diag(γ) s⁻¹ (I − 11ᵀ/d − uuᵀ/d),   u = (x − x̄1)/s
//   J_RMS = diag(γ) r⁻¹ (I − wwᵀ/d),           w = x/r
// The brackets are symmetric, so the VJP applies the same bracket to γ ⊙ ȳ.
#include <cmath>
#include <string>

#include <regatta/core/eigen.hpp>

namespace regatta::operators {

enum class Prenorm { none, layernorm, rmsnorm };

std::string to_string(Prenorm norm);
/// "none", "layernorm" or "rmsnorm"; anything else throws InputError naming `subject`.
Prenorm parse_prenorm(const std::string& text, const std::string& subject = "--prenorm");

namespace detail {

/// Per row: the centred (LN) or raw (RMS) vector divided by its scale, and the inverse scale.
template <class S>
void normalized_rows(Prenorm norm, const Matrix<S>& X, const S& eps, Matrix<S>& U, Vector<S>& inv_scale) {
  using std::sqrt;
  const Eigen::Index d = X.cols();
  U.resize(X.rows(), d);
  inv_scale.resize(X.rows());
  const S dd = S(double(d));
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    S mean(0);
    if (norm == Prenorm::layernorm) {
      for (Eigen::Index a = 0; a < d; ++a) mean += X(i, a);
      mean /= dd;
    }
    S second(0);
    for (Eigen::Index a = 0; a < d; ++a) {
      const S c = X(i, a) - mean;
      second += c * c;
    }
    const S inv = S(1) / sqrt(second / dd + eps);
    inv_scale(i) = inv;
    for (Eigen::Index a = 0; a < d; ++a) U(i, a) = (X(i, a) - mean) * inv;
  }
}

/// Applies the symmetric bracket s⁻¹(I − [11ᵀ/d] − uuᵀ/d) of row i to G (in place).
template <class S>
void apply_bracket(Prenorm norm, const Matrix<S>& U, const Vector<S>& inv_scale, Matrix<S>& G) {
  const Eigen::Index d = U.cols();
  const S dd = S(double(d));
  for (Eigen::Index i = 0; i < G.rows(); ++i) {
    S mean(0), proj(0);
    for (Eigen::Index a = 0; a < d; ++a) {
      if (norm == Prenorm::layernorm) mean += G(i, a);
      proj += U(i, a) * G(i, a);
    }
    mean /= dd;
    proj /= dd;
    for (Eigen::Index a = 0; a < d; ++a) G(i, a) = inv_scale(i) * (G(i, a) - mean - U(i, a) * proj);
  }
}

}  // namespace detail

/// N(X) row-wise; Prenorm::none returns X.
template <class S>
Matrix<S> normalize_rows(Prenorm norm, const Matrix<S>& X, const Vector<S>& gamma, const Vector<S>& beta,
                         const S& eps) {
  if (norm == Prenorm::none) return X;
  Matrix<S> U;
  Vector<S> inv;
  detail::normalized_rows(norm, X, eps, U, inv);
  if (gamma.size() != 0) U = U * gamma.asDiagonal();
  if (beta.size() != 0 && norm == Prenorm::layernorm) U.rowwise() += beta.transpose();
  return U;
}

/// DN(X)[Ẋ].
template <class S>
Matrix<S> normalize_rows_jvp(Prenorm norm, const Matrix<S>& X, const Vector<S>& gamma, const S& eps,
                             const Matrix<S>& Xdot) {
  if (norm == Prenorm::none) return Xdot;
  Matrix<S> U;
  Vector<S> inv;
  detail::normalized_rows(norm, X, eps, U, inv);
  Matrix<S> G = Xdot;
  detail::apply_bracket(norm, U, inv, G);
  if (gamma.size() != 0) G = G * gamma.asDiagonal();
  return G;
}

/// DN(X)ᵀ[Ȳ].
template <class S>
Matrix<S> normalize_rows_vjp(Prenorm norm, const Matrix<S>& X, const Vector<S>& gamma, const S& eps,
                             const Matrix<S>& Ybar) {
  if (norm == Prenorm::none) return Ybar;
  Matrix<S> U;
  Vector<S> inv;
  detail::normalized_rows(norm, X, eps, U, inv);
  Matrix<S> G = gamma.size() != 0 ? Matrix<S>(Ybar * gamma.asDiagonal()) : Ybar;
  detail::apply_bracket(norm, U, inv, G);
  return G;
}

}  // namespace regatta::operators
