#pragma once
// Norms of the Jacobian J = DF(X) of a block or stack at one input X, from its JVPs and VJPs (matrix-free;
// docs/math/jacobian.md#matrix-free-norms). Norms as in local.hpp: ‖J‖₂ spectral, ‖J‖∞ maximum absolute row
// sum, ‖J‖₁
// maximum absolute column sum, with the row-major vectorisation (i, a) ↦ i·d + a.
#include <regatta/core/eigen.hpp>
#include <regatta/core/scalar.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/lipschitz/matrix_free.hpp>
#include <regatta/operators/lipschitz/progress.hpp>

namespace regatta::lip {

/// ‖J‖₂ by matrix_free_norm_2 with apply = lin.jvp, apply_transpose = lin.vjp (one JVP and one VJP per step).
/// An ESTIMATE FROM BELOW (claim havens.power_iteration); see jacobian_ratio_enclosure for the certified
/// lower bound at the returned witness.
SpectralEstimate jacobian_norm_2(const operators::Linearization<double>& lin,
                                 const SpectralOptions& options = {});

/// Interval enclosure of ‖J w‖_F/‖w‖_F, computed at the working precision from an interval linearisation of
/// the same layer at the same X (Block<interval>(layer, options).linearize(X)) and the exact double witness
/// w. Its lower endpoint is a CERTIFIED lower bound on ‖J‖₂ (‖J w‖/‖w‖ ≤ ‖J‖₂ for every w ≠ 0). Cost: one
/// interval JVP. Throws InputError for a wrong shape or w = 0.
interval jacobian_ratio_enclosure(const operators::Linearization<interval>& lin, const Matrix<double>& w);

/// An induced norm with the row (or column) that attains it.
template <class S>
struct InducedNorm {
  /// double / mpfr: the floating-point evaluation of the exact maximum of absolute row (column) sums;
  /// interval: an enclosure [max of lower ends, max of upper ends] of the exact value.
  S value{};
  Eigen::Index index = 0;  ///< row (column) i·d + a of the maximum (interval: largest upper end)
};

/// ‖J‖∞ = max over rows (i, a) of ‖VJP(E_ia)‖₁ (docs/math/jacobian.md#matrix-free-norms): n·e VJPs, O(n·e)
/// memory beyond one VJP.
/// For S = interval the value encloses ‖J‖∞ (certified). Instantiated for double, mpfr and interval.
template <class S>
InducedNorm<S> jacobian_norm_inf(const operators::Linearization<S>& lin, const Progress& progress = {});

/// ‖J‖₁ = max over columns (j, b) of ‖JVP(E_jb)‖₁: n·d JVPs. Same guarantees as jacobian_norm_inf.
template <class S>
InducedNorm<S> jacobian_norm_one(const operators::Linearization<S>& lin, const Progress& progress = {});

/// Largest n·d for which the certified upper bound on ‖J‖₂ is computed by default: the dense interval
/// Jacobian (O(H·n²·d²) interval operations) and the interval Cholesky of θ²I − JᵀJ (O((n·d)³) at 106 bits;
/// measured 2 s at n·d = 256 on a loaded 2-core VM, about 8× per doubling of n·d).
inline constexpr Eigen::Index dense_certification_limit = 256;

}  // namespace regatta::lip
