#pragma once
// The product of interval64 matrices in midpoint–radius form: three binary64 GEMMs (Eigen, vectorised) and a
// rigorous a-priori bound on their rounding errors, instead of n·k·p scalar interval64 products
// (docs/numerics.md, "Products of interval64 matrices", has the proof).
//
// Contract. For A (n×k) and B (k×p), the result C encloses A′·B′ for every pair of point matrices A′ ∈ A,
// B′ ∈ B (each entry of C contains the exact real value of Σ_l A′_il B′_lj). Widths: for a point B (or a
// point A) C is the exact hull m_A·B ± r_A·|B| widened by the rounding term γ_{k}·|m_A|·|B| (relative
// ≈ k·2^-53); for two interval matrices it is at most 1.5 times the hull (Rump 1999) plus that term.
//
// Proof sketch (u = 2^-53, γ_k = k·u/(1 − k·u) rounded up, η = 2^-1074). Split A = m_A ± r_A entrywise
// (m = fl(lo/2 + hi/2), r = max(hi − m, m − lo) rounded up, so [lo, hi] ⊆ [m − r, m + r]); same for B. Then
//   A′B′ − m_A m_B = m_A E_B + E_A m_B + E_A E_B,  |E_A| ≤ r_A, |E_B| ≤ r_B,
// so |A′B′ − m_A m_B| ≤ |m_A| r_B + r_A (|m_B| + r_B). The midpoint M̃ = fl(m_A m_B) by GEMM (any summation
// order, with or without fma) has |M̃ − m_A m_B| ≤ γ_k |m_A||m_B| + k·η (Higham, Accuracy and Stability,
// Thm 3.5, with underflow as in spectral_norm.hpp step 3). Hence, with U = r_B + γ_k|m_B| and
// V = |m_B| + r_B (both rounded up entrywise),
//   |A′B′ − M̃| ≤ |m_A|·U + r_A·V + k·η.
// The two non-negative products P = |m_A|·U and Q = r_A·V are GEMMs too: for a non-negative sum s of k
// products, fl(s) ≥ (1 − γ_k)s − k·η, so s ≤ (fl(s) + k·η)/(1 − γ_k), evaluated rounding up. The radius
//   ρ = (fl(P) + k·η)/(1 − γ_k) + (fl(Q) + k·η)/(1 − γ_k) + k·η   (rounded up)
// bounds the error, and C = [M̃ − ρ, M̃ + ρ] with outward-rounded endpoints. A point factor drops one GEMM
// (r_A = 0: no Q; r_B = 0: U = γ_k|m_B|, and P and Q merge into (γ_k|m_A| + r_A)·|m_B|). The k·η terms are
// dropped when no GEMM factor has a nonzero entry below 2^-480 (nothing can then round in the subnormal
// range), so exact zeros stay exact.
//
// In practice the elementwise steps run in round-to-nearest with their relative errors folded into one
// constant on the radius and one successor step on each endpoint (docs/numerics.md, step 8); the directed
// operations above are the path taken when a factor may underflow.
//
// Non-finite entries (in A, B, or an overflow in any GEMM) fall back to the scalar interval64 product
// (regatta::detail::plain_product), which handles ±∞ and NaN by interval64's own rules.
//
// Cost: 2–3 GEMMs of n·k·p flops plus O(nk + kp + np) directed-rounding operations.
#include <regatta/core/eigen.hpp>
#include <regatta/core/interval64.hpp>

namespace regatta {

/// Encloses A′·B′ for every A′ ∈ A, B′ ∈ B (see the file comment). A.cols() == B.rows() (asserted).
Matrix<interval64> midrad_product(const Matrix<interval64>& A, const Matrix<interval64>& B);
/// Encloses A′·B for every A′ ∈ A (B a point matrix, exact in binary64).
Matrix<interval64> midrad_product(const Matrix<interval64>& A, const Matrix<double>& B);
/// Encloses A·B′ for every B′ ∈ B (A a point matrix).
Matrix<interval64> midrad_product(const Matrix<double>& A, const Matrix<interval64>& B);

/// The product for hot loops of generic code: midrad_product for interval64, Eigen's GEMM for the IEEE
/// types, the scalar triple loop (regatta::detail::product) for the multiprecision types. Each is what that
/// type's `a * b` promises: an enclosure for interval64, a rounded value for the point types.
template <class S>
Matrix<S> fast_product(const Matrix<S>& A, const Matrix<S>& B);

}  // namespace regatta

#include <regatta/core/detail/product.hpp>

namespace regatta {

template <class S>
Matrix<S> fast_product(const Matrix<S>& A, const Matrix<S>& B) {
  if constexpr (std::is_same_v<S, interval64>)
    return midrad_product(A, B);
  else
    return detail::product<S>(A, B);
}

}  // namespace regatta
