#pragma once
// Certified upper bounds on the norms of every matrix in an interval64 box M (each M' with
// lower(M_ij) ≤ M'_ij ≤ upper(M_ij)): the one set of interval-matrix norms the Lipschitz and model passes
// multiply. Every function returns a double u with ‖M'‖ ≤ u for every member M', computed in binary64 with
// upward rounding (interval64 operations; the sum of magnitudes, never a midpoint), and +inf when an
// endpoint is not finite (no member has a finite norm bound there; spectral_norm_bound throws instead).
// Empty matrices give 0.
//
// The norms (docs/math/README.md#norms): ‖M‖∞ = max_i Σ_j |m_ij| (ℓ∞ → ℓ∞), ‖M‖₁ =
// max_j Σ_i |m_ij| (ℓ1 → ℓ1), ‖M‖_F = (Σ_ij m_ij²)^{1/2}, ‖M‖₂ = σ_max(M). For ∞, 1 and F the maximum over
// the box is attained at the member of largest magnitudes, so these bounds are tight up to the rounding of
// the sums; the spectral bounds come from core/spectral_norm.hpp's certificates.
#include <regatta/core/eigen.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/spectral_norm.hpp>

namespace regatta {

/// Whether every endpoint of M is finite.
bool all_finite(const Matrix<interval64>& M);

/// ‖M'‖∞ ≤ max_i Σ_j mag(M_ij), the sums rounded up.
double inf_norm_upper(const Matrix<interval64>& M);

/// ‖M'‖₁ ≤ max_j Σ_i mag(M_ij), the sums rounded up.
double one_norm_upper(const Matrix<interval64>& M);

/// ‖M'‖_F ≤ √(Σ_ij mag(M_ij)²), the squares, sum and root rounded up. Also the ℓ2 norm of a vector.
double frobenius_norm_upper(const Matrix<interval64>& M);

/// ‖M'‖₂ ≤ spectral_norm_upper_fast(M).upper: the binary64 Cholesky certificate of ‖mid‖₂ plus a bound on
/// ‖rad‖₂, or its fallback min(√(‖M‖₁‖M‖∞), ‖M‖_F). No MPFI: the cheap bound for inner loops (a branch and
/// bound box, a stage of a model).
double spectral_norm_upper(const Matrix<interval64>& M);

/// ‖M'‖₂ ≤ result.upper (and result.lower ≤ ‖M'‖₂ for every member): spectral_norm_upper_fast, and when that
/// only reached its norm-product fallback, the MPFI certificate spectral_norm_upper_certified<interval64>
/// on the same box if it is smaller (the tighter, slower bound, for one matrix per region). Unlike the
/// functions above, a non-finite endpoint throws InputError (spectral_norm_upper_fast's "M: entry (i, j) is
/// ..."): the callers (the region passes) report it as a quantity that left the double range.
CertifiedNormBound spectral_norm_bound(const Matrix<interval64>& M);

}  // namespace regatta
