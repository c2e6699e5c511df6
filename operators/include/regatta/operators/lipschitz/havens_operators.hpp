#pragma once
// The matrix-free linear maps behind the Havens et al. quantities ξ and κ_h
// (docs/math/bounds.md#havens-matrix-free),
// written once for every scalar type and for the two callers: the library (havens_ingredients.cpp: Lanczos
// in double, interval evaluation at the witnesses) and proofs-check (claims havens.xi_exact,
// havens.score_identity, havens.power_iteration, which compare them with the explicit Kronecker matrices).
//
// `mul` is the matrix product (a callable Matrix<S>(const Matrix<S>&, const Matrix<S>&)): the library passes
// its own (Eigen's product for IEEE types), proofs-check the plain triple loop in reference order.
#include <cstddef>
#include <vector>

#include <regatta/core/eigen.hpp>

namespace regatta::lip {

/// ξ's operator M(V) = V W^skip + Σ_h P_h V W^VO_h, W^skip = I with `residual`, else 0 (n×d → n×d).
template <class S, class Product>
Matrix<S> xi_apply(bool residual, const std::vector<Matrix<S>>& P, const std::vector<Matrix<S>>& WVO,
                   const Matrix<S>& V, Product mul) {
  Matrix<S> out = residual ? V : Matrix<S>(Matrix<S>::Zero(V.rows(), V.cols()));
  for (std::size_t h = 0; h < P.size(); ++h) out += mul(P[h], mul(V, WVO[h]));
  return out;
}

/// Mᵀ(U) = U (W^skip)ᵀ + Σ_h P_hᵀ U (W^VO_h)ᵀ.
template <class S, class Product>
Matrix<S> xi_apply_transpose(bool residual, const std::vector<Matrix<S>>& P,
                             const std::vector<Matrix<S>>& WVO, const Matrix<S>& U, Product mul) {
  Matrix<S> out = residual ? U : Matrix<S>(Matrix<S>::Zero(U.rows(), U.cols()));
  for (std::size_t h = 0; h < P.size(); ++h)
    out += mul(Matrix<S>(P[h].transpose()), mul(U, Matrix<S>(WVO[h].transpose())));
  return out;
}

/// κ_h's operator 𝓛(V) = V Cᵀ + B Vᵀ (n×d → n×n), C = X A_hᵀ, B = X A_h (+ the query-bias row term).
template <class S, class Product>
Matrix<S> kappa_apply(const Matrix<S>& C, const Matrix<S>& B, const Matrix<S>& V, Product mul) {
  return mul(V, Matrix<S>(C.transpose())) + mul(B, Matrix<S>(V.transpose()));
}

/// 𝓛ᵀ(G) = G C + Gᵀ B (n×n → n×d).
template <class S, class Product>
Matrix<S> kappa_apply_transpose(const Matrix<S>& C, const Matrix<S>& B, const Matrix<S>& G, Product mul) {
  return mul(G, C) + mul(Matrix<S>(G.transpose()), B);
}

}  // namespace regatta::lip
