#pragma once
// The spectral norm of a linear map given only by its action V ↦ M V and its transpose U ↦ Mᵀ U (never
// formed): Lanczos or power iteration on MᵀM in double. Every value is an ESTIMATE FROM BELOW (exact
// arithmetic: ‖M w‖_F ≤ σ_max(M) for the unit witness w); certified brackets of an explicit matrix are in
// core/spectral_norm.hpp, certified lower ends at a witness in jacobian_norms.hpp.
#include <cstdint>
#include <functional>
#include <string>

#include <regatta/core/eigen.hpp>

namespace regatta::lip {

enum class SpectralMethod {
  lanczos,  ///< Lanczos on MᵀM with full reorthogonalisation (the default: far fewer steps)
  power,    ///< power iteration v ← MᵀMv/‖MᵀMv‖
};
std::string to_string(SpectralMethod method);
/// "lanczos" or "power"; anything else throws InputError naming `subject`.
SpectralMethod parse_spectral_method(const std::string& text, const std::string& subject = "--method");

struct SpectralOptions {
  SpectralMethod method = SpectralMethod::lanczos;
  /// Target relative accuracy τ of σ_max (> 0, < 1). Lanczos stops when the residual bound r = β_k|s_k| of
  /// the top Ritz pair (θ, y) of MᵀM satisfies r ≤ 2τθ: some eigenvalue λ of MᵀM has |λ − θ| ≤ r, hence
  /// |√λ − √θ| = |λ − θ|/(√λ + √θ) ≤ 2τθ/(√λ + √θ) ≈ τ√θ, and θ ≤ λ_max always (interlacing); once θ is
  /// the top Ritz value of a converged pair the Kato–Temple bound r²/gap is far smaller still. Power
  /// iteration stops when the relative change of its estimate falls below τ (a weaker criterion: its error
  /// is about τ/(1 − ρ⁴) for the gap ratio ρ = σ₂/σ₁).
  double relative_tolerance = 1e-10;
  /// MᵀM applications at most (≥ 1); Lanczos also stops at the dimension of the input space.
  int max_iterations = 500;
  /// Start vector: entries uniform in [−1, 1) from std::mt19937_64(seed) (same on every platform).
  std::uint64_t seed = 0x10ca1ULL;
};

/// The estimate of ‖M‖₂ and how it was obtained.
struct SpectralEstimate {
  /// ESTIMATE FROM BELOW: ‖M w‖_F for the unit witness w (exact arithmetic: ≤ σ_max(M); the double
  /// evaluation may exceed it by rounding, about n·eps relative).
  double estimate = 0;
  Matrix<double> witness;  ///< w, unit Frobenius norm, the shape of the map's input
  int iterations = 0;      ///< MᵀM applications (each: one application of M and one of Mᵀ)
  bool converged = false;  ///< the stopping criterion of SpectralOptions was met
  /// Lanczos: r/(2θ), an estimate of the relative error of estimate (see SpectralOptions); power: the last
  /// relative change of the estimate.
  double relative_error = 0;
  SpectralMethod method = SpectralMethod::lanczos;
};

/// A linear map between n×d-shaped matrices (rows and columns fixed by the caller).
using LinearMap = std::function<Matrix<double>(const Matrix<double>&)>;

/// σ_max(M) for M: R^{rows×cols} → R^{out_rows×out_cols} given by `apply` (V ↦ M V) and `apply_transpose`
/// (U ↦ Mᵀ U), never formed. Cost per iteration: one apply and one apply_transpose, plus O(k·rows·cols) for
/// the reorthogonalisation against the k previous Lanczos vectors (memory k·rows·cols doubles). The zero map
/// gives estimate 0, converged. Throws InputError for rows·cols = 0 or invalid options
/// ("relative_tolerance", "max_iterations").
SpectralEstimate matrix_free_norm_2(const LinearMap& apply, const LinearMap& apply_transpose,
                                    Eigen::Index rows, Eigen::Index cols,
                                    const SpectralOptions& options = {});

}  // namespace regatta::lip
