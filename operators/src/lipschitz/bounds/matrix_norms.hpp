#pragma once
// Internal: the matrix norms that the bounds multiply, evaluated in a scalar type S (see bounds.hpp):
// double and mpfr give accurate values (estimates), interval gives certified enclosures.
#include <string>

#include <regatta/core/eigen.hpp>
#include <regatta/core/scalar.hpp>

namespace regatta::lip::detail {

/// Above this dimension d the d×d product X Yᵀ is not certified as a product (the interval Cholesky costs
/// O(d³) at 106 bits, ~0.7 s at d = 256); its norm is then enclosed by cheaper certified bounds.
inline constexpr Eigen::Index product_certification_limit = 256;
/// Largest min(rows, cols) for which a single matrix gets the interval Cholesky certificate (the default
/// --cholesky-limit of `regatta norm`); beyond, spectral_norm_upper_certified's cheap fallback is used.
inline constexpr Eigen::Index matrix_certification_limit = 512;

/// max(a, b); for interval the enclosure [max(lo), max(hi)] of {max(x, y)}.
template <class S>
S max_of(const S& a, const S& b);

/// ‖M‖∞ (maximum absolute row sum) and ‖M‖₁ (maximum absolute column sum) of a double matrix, in S.
template <class S>
S norm_inf(const Matrix<double>& M);
template <class S>
S norm_one(const Matrix<double>& M);

/// ‖M‖₂ of a double matrix: spectral_norm_reference for double/mpfr, [certified lower, certified upper] of
/// spectral_norm_upper_certified for interval. `loose`, when given, is set to true when the interval
/// certificate had to use the cheap fallback (min(rows, cols) > matrix_certification_limit).
template <class S>
S spectral(const Matrix<double>& M, bool* loose = nullptr);

/// ‖X Yᵀ‖₂ for X (m×k) and Y (d×k), m ≥ d (equal shapes, or X with extra rows such as [W^Q_h; b_Q,hᵀ]);
/// below, d is the number of rows of X. double/mpfr: ‖R_X R_Yᵀ‖₂ from thin QR factors when k < d (the
/// orthonormal factors do not change the norm), else the product itself. interval: when k < d, the k×k
/// matrix L_Xᵀ L_Y from enclosures of the Cholesky factors of the Gram matrices XᵀX = L_X L_Xᵀ, YᵀY =
/// L_Y L_Yᵀ (X = Q_X L_Xᵀ with orthonormal Q_X, so ‖XYᵀ‖₂ = ‖L_Xᵀ L_Y‖₂; the Grams are formed in double and
/// widened by the rounding-error bound below), certified by spectral_norm_upper_certified; this costs
/// O(k²d) flops + O(k³) interval operations and needs X, Y of certainly full column rank.
/// Otherwise, for d ≤ product_certification_limit, the double product with a rigorous entrywise error bound
/// (Higham, Accuracy and Stability, Thm 3.5: |fl(XYᵀ) − XYᵀ| ≤ γ_k |X||Y|ᵀ, plus k·2^-1074 for underflow),
/// whose Frobenius norm is added to the certified bracket of the double product (‖E‖₂ ≤ ‖E‖_F); beyond, or
/// when the double product overflows, the smaller of the factor bound ‖X‖₂‖Y‖₂ and
/// spectral_norm_upper_certified's cheap fallback. `loose`, when given, is set to true when the upper end did
/// not come from the product's interval Cholesky certificate.
template <class S>
S spectral_product(const Matrix<double>& X, const Matrix<double>& Y, bool* loose = nullptr);

/// Upper endpoint rounded up to a double (+inf when it overflows); a point type is converted to nearest.
template <class S>
double upper_as_double(const S& x);

}  // namespace regatta::lip::detail
