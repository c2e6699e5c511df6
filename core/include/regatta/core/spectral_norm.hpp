#pragma once
// The spectral norm ‖M‖₂ = σ_max(M) of a dense matrix: an estimate from below (power iteration), a certified
// lower bound from a witness vector, a certified upper bound (interval Cholesky of θ²I − MᵀM, with cheap
// norm-product fallbacks), and a high-precision reference for tests.
//
// Claim `havens.power_iteration` (docs/math/claims.md): for v ≠ 0, ‖Mv‖/‖v‖ ≤ σ_max(M), so power iteration
// converges from below and never certifies an upper bound on its own
// (docs/conventions.md#what-a-number-means).
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include <regatta/core/eigen.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/scalar_traits.hpp>

namespace regatta {

// ---------------------------------------------------------------------------------------------------------
// Power iteration (an estimate from below)
// ---------------------------------------------------------------------------------------------------------

struct PowerIterationOptions {
  /// Number of MᵀM applications at most (>= 1).
  int max_iterations = 500;
  /// Stop when |ρ_k − ρ_{k−1}| / ρ_k <= relative_tolerance (>= 0). Unset: default_power_tolerance<S>(m, n).
  std::optional<double> relative_tolerance;
  /// Seed of the start vector: entries uniform in [−1, 1) from the raw bits of std::mt19937_64(seed), so the
  /// start vector (and the whole iteration) is the same on every platform and standard library.
  std::uint64_t seed = 0x5eed5eedULL;
};

template <class S>
struct PowerIterationResult {
  S estimate{};            ///< ‖M v‖ / ‖v‖ for v = right_vector: a LOWER estimate of ‖M‖₂
  Vector<S> right_vector;  ///< the final iterate (unit up to rounding); a witness for the lower bound
  int iterations = 0;      ///< MᵀM applications performed
  bool converged = false;  ///< the relative change of the estimate fell below the tolerance
  S relative_change{};     ///< |ρ_k − ρ_{k−1}| / ρ_k at the last step (0 for empty or zero matrices)
};

/// Default stopping tolerance of the power iteration on an m×n matrix:
///   τ = 2 η,   η = (max(m, n) + 2) · √min(m, n) · eps<S>.
/// Derivation: η bounds the rounding noise of one evaluation of ρ = ‖Mv‖/‖v‖ near convergence: fl(Mv)
/// differs from Mv componentwise by γ_n |M||v| (Higham, Thm 3.5), ‖|M||v|‖ ≤ ‖M‖_F ≤ √rank · ‖M‖₂ with
/// rank ≤ min(m, n), and the two norms and the division add ≤ 2 eps. Two successive estimates then differ by
/// at most 2η from noise alone, so τ = 2η is the smallest tolerance that a converged iteration is sure to
/// meet. Since the error e_k = 1 − ρ_k/σ_max shrinks by the factor r⁴ per step (r = σ₂/σ_max, the gap ratio),
/// a stop at change Δ leaves e ≈ Δ / (1 − r⁴) + η. (For double and 64×64: τ ≈ 2.3e-13.)
template <class S>
S default_power_tolerance(Eigen::Index rows, Eigen::Index cols) {
  using std::max;
  using std::min;
  const double lo = static_cast<double>(min(rows, cols));
  const double hi = static_cast<double>(max(rows, cols));
  return eps<S>() * S(2.0 * (hi + 2.0) * std::sqrt(lo > 0 ? lo : 1.0));
}

/// Power iteration on MᵀM with renormalisation every step: v ← Mᵀ(Mv/‖Mv‖) / ‖·‖, from a random start.
/// Returns estimate = ‖M v‖/‖v‖ for the returned v. Mathematically estimate ≤ ‖M‖₂ (a lower estimate; for
/// float/double/mpfr rounding may put it above ‖M‖₂ by O(η) of default_power_tolerance, never more).
/// Empty matrices (0×n, m×0) and the zero matrix give estimate 0, converged = true, iterations = 0.
/// Cost: 2·m·n multiply-adds per iteration. Instantiated for float, double, mpfr (at the working precision);
/// for an interval matrix run it on the midpoint matrix (intervals would widen at every step).
/// Throws InputError for non-finite entries or invalid options.
template <class S>
PowerIterationResult<S> spectral_norm_power(const Matrix<S>& M, const PowerIterationOptions& options = {});

// ---------------------------------------------------------------------------------------------------------
// Certified lower bound from a witness vector
// ---------------------------------------------------------------------------------------------------------

/// Interval enclosure of ‖M v‖₂ / ‖v‖₂, evaluated with outward rounding at max(working precision, 53) bits.
/// Guarantee: its lower endpoint is ≤ ‖M'v'‖/‖v'‖ ≤ ‖M'‖₂ for every M' in M and every v' ≠ 0 in v (for point
/// inputs: M' = M, v' = v), so lower_bound(result) is a certified lower bound on ‖M‖₂ — for an interval
/// matrix, on min over the box of ‖M'‖₂. Any v works; the power-iteration vector makes it tight.
/// n = 0 gives [0, 0]. Throws InputError if v.size() != M.cols(), v == 0, or an entry is not finite.
template <class S>
interval certified_lower_bound_from_vector(const Matrix<S>& M, const Vector<S>& v);
/// The same for an interval matrix and a point witness (e.g. power iteration on the midpoint matrix).
interval certified_lower_bound_from_vector(const Matrix<interval>& M, const Vector<double>& v);

// ---------------------------------------------------------------------------------------------------------
// Certified upper bound
// ---------------------------------------------------------------------------------------------------------

struct CertifiedNormOptions {
  /// Try the interval Cholesky certificate; false forces the fallback min(√(‖M‖₁‖M‖∞), ‖M‖_F).
  bool allow_cholesky = true;
  /// Precision (bits, >= 53) of the interval Gram matrix and Cholesky. 106 = 2·53 makes the rounding widths
  /// of G (≈ N·K²·2^-p relative, N = min(m,n), K = max(m,n)) negligible next to the power-iteration error for
  /// K up to ~10^6, so the margin δ is set by the estimate alone; the cost is ~1.3× that of 53 bits.
  unsigned gram_precision_bits = 106;
  /// Interval Cholesky factorisations at most (each N³/6 interval operations; cheap double screening
  /// decides which margins get one, see spectral_norm_upper_certified).
  int max_cholesky_attempts = 8;
  /// Options of the double power iteration on the midpoint matrix that gives σ̃.
  PowerIterationOptions power{};
};

/// Growth of the margin δ per step. The steps are screened by a double Cholesky (O(N³) flops), so fine steps
/// cost little: 2 keeps the certified θ within twice the margin that the screen needs.
inline constexpr double cholesky_margin_growth = 2.0;

/// Tightness of the Cholesky certificate (tested, not guaranteed): for point matrices with
/// min(m, n) ≤ 256 whose power iteration converges, upper ≤ ‖M‖₂ · (1 + certified_upper_tightness).
/// Reason: the accepted δ is within a factor 2 of what the double screen needs, about
/// max(error of σ̃, N·u) ≈ 1e-13..1e-11 at these sizes (default power tolerance); measured ≤ 3e-12 up to 256.
inline constexpr double certified_upper_tightness = 1e-10;

struct CertifiedNormBound {
  double upper = 0;  ///< CERTIFIED: upper ≥ ‖M'‖₂ for every M' in M (rounded up to a double)
  double lower = 0;  ///< CERTIFIED: lower ≤ ‖M'‖₂ for every M' in M (witness = power vector, rounded down)
  std::string method;   ///< what gave `upper`: "interval-cholesky", "sqrt(norm1*norminf)" or "frobenius"
  double estimate = 0;  ///< power-iteration value σ̃ on the midpoint matrix in double (an estimate)
  double ratio = 1;     ///< upper / estimate (1 when both are 0, +inf when only the estimate is 0)
  int cholesky_attempts = 0;  ///< interval Cholesky factorisations tried
};

/// Certified upper bound on ‖M‖₂. S = float, double, mpfr or interval; an interval matrix means the bound
/// holds for every matrix in the box.
///
/// Method. (1) σ̃ = power iteration in double on the midpoint matrix. (2) G = MᵀM or MMᵀ, whichever is
/// smaller (N×N, N = min(m, n); same nonzero spectrum), in interval arithmetic at gram_precision_bits (double
/// entries and their products are exact there, so G is a tight enclosure). (3) For θ = σ̃(1 + δ),
/// δ growing from δ₀ = max(Δ, 2(m+n)·2^-53) (×2 per screened-out step, ×8 after a failed interval attempt) (Δ
/// = the last relative change of the power iteration, which bounds its error up to the gap factor; 2(m+n)u
/// covers the rounding of σ̃), skip θ unless the double Cholesky of θ²I − G_mid succeeds (a cheap predictor,
/// no part of the proof), then run the interval Cholesky of A = θ²I − G. If every pivot radicand has a
/// positive lower endpoint, every symmetric matrix in A is positive definite (inclusion isotonicity; Alefeld
/// & Mayer, "The Cholesky method for interval data", Linear Algebra Appl. 194, 1993), so θ² > λ_max(M'ᵀM')
/// for every M' in M, i.e. ‖M'‖₂ < θ. (4) The fallback min(√(‖M‖₁‖M‖∞), ‖M‖_F), summed with upward rounding
/// over |entries| (the magnitude of each interval), is always valid since ‖M‖₂² ≤ ‖M‖₁‖M‖∞ and ‖M‖₂ ≤ ‖M‖_F;
/// it is always computed, caps θ (no attempt once θ ≥ fallback), and the smaller certified value is returned.
/// The zero matrix gives 0 exactly ("frobenius"); empty matrices give 0.
///
/// Cost: N²K/2 multiply-adds for G (OpenMP-parallel over rows) plus N³/6 interval operations per Cholesky
/// attempt (usually one), all at gram_precision_bits; O(N³) flops in double for the screen. Measured
/// (Release, one thread, Gaussian double, 106 bits): 64×64 ≈ 15 ms, 128×128 ≈ 0.1 s, 256×256 ≈ 0.7 s
/// (0.54 s on 2 threads); at 53 bits the wider G needs more margin and attempts (256×256: 1.2 s, 2e-10).
/// Entries outside the double range (mpfr/interval) skip the Cholesky and use the fallback.
/// Throws InputError for non-finite entries or invalid options.
template <class S>
CertifiedNormBound spectral_norm_upper_certified(const Matrix<S>& M,
                                                 const CertifiedNormOptions& options = {});

// ---------------------------------------------------------------------------------------------------------
// Certified upper bound in binary64 (fast)
// ---------------------------------------------------------------------------------------------------------

/// Tightness of spectral_norm_upper_fast (tested, not guaranteed): for point matrices with min(m, n) ≤ 256
/// whose power iteration converges, upper ≤ ‖M‖₂ · (1 + fast_upper_tightness). Reason: the shift c that the
/// proof needs is about γ_N·N·θ² + γ_K·N·K·max|m_ij|² (N = min(m, n), K = max(m, n), γ_k ≈ k·2^-53), i.e.
/// ≲ 2·N²·2^-53·θ² ≈ 1.5e-11·θ² at N = K = 256, and the margin δ ≈ c/(2θ²) grows by at most 2× per step.
inline constexpr double fast_upper_tightness = 1e-9;

/// Certified upper bound on ‖M'‖₂ for every M' in M, in binary64 only (no MPFI): the same contract as
/// spectral_norm_upper_certified (upper ≥ ‖M'‖₂ rounded up, lower ≤ ‖M'‖₂ from the power witness rounded
/// down, estimate, ratio), method "binary64-cholesky" when the certificate below gave `upper`, else the
/// fallback's name ("sqrt(norm1*norminf)" or "frobenius"). cholesky_attempts counts double factorisations.
/// options.allow_cholesky, max_cholesky_attempts (bounds the verified factorisations) and power are used;
/// gram_precision_bits is ignored (everything is binary64).
///
/// Proof (every step rounds toward the safe side; u = 2^-53, γ_k = k·u/(1 − k·u), η = 2^-1074):
///  0. Scaling. e = ilogb(max |endpoint|); the box is multiplied by 2^-e with endpoints rounded outward
///     (exact unless an entry underflows), so it encloses 2^-e·M' for every member; the final bound is
///     multiplied by 2^e rounding up. Entries are then ≤ 2 in magnitude: no sum below can overflow.
///  1. Midpoint and radius. c_ij = fl(lo/2 + hi/2), r_ij = max(hi − c, c − lo) rounded up, so every member
///     is C + E with |E| ≤ R entrywise and ‖M'‖₂ ≤ ‖C‖₂ + ‖E‖₂ ≤ ‖C‖₂ + ‖R‖₂ (‖E‖₂ ≤ ‖|E|‖₂ ≤ ‖R‖₂ for a
///     non-negative R, Perron–Frobenius).
///  2. ‖R‖₂ by Collatz–Wielandt: for any x > 0, ρ(RᵀR) ≤ max_i (Rᵀ(R x))_i / x_i (Horn & Johnson, Matrix
///     Analysis, Cor. 8.1.29). x comes from a few power steps on RᵀR (floored at 2^-30·max x); the products,
///     sums and quotients use directed rounding up (all terms ≥ 0), and √ is rounded up. Capped by ‖R‖_F.
///  3. ‖C‖₂. F = C (G = CᵀC, K = m rows) or Cᵀ (G = CCᵀ, K = n), N×N with N = min(m, n). G̃ = fl(FᵀF) by
///     Eigen's GEMM; each entry is a sum of K products in some order, with or without fma, so (Higham,
///     Accuracy and Stability, Lemma 3.1 / Thm 3.5, with underflow: each product adds ≤ η/2, later
///     multiplied by ≤ 1 + γ_K < 2) |G̃_ij − G_ij| ≤ γ_K (|F|ᵀ|F|)_ij + K·η ≤ γ_K ‖f_i‖‖f_j‖ + K·η =: B_ij
///     (Cauchy–Schwarz, f_i the columns of F; ‖f_i‖ rounded up). S is the symmetric matrix with G̃'s lower
///     triangle; |S − G| ≤ B since G is symmetric, so ‖S − G‖₂ ≤ ‖B‖₂ ≤ ‖B‖∞ =: β (B symmetric, ≥ 0).
///  4. For θ = σ̃(1 + δ) (σ̃ from power iteration on C, δ grown ×2) and a shift c > 0, Q is the double
///     matrix with Q_ij = −S_ij off the diagonal and Q_ii ∈ enclosure of θ² − c − S_ii (interval64, width
///     ≤ ω). Any upper triangular double R̂ (Eigen's LLT of Q; how it was computed does not matter) gives
///     θ²I − G = R̂ᵀR̂ + cI + (Q − R̂ᵀR̂) + D + (S − G) with |D_ii| ≤ ω. W̃ = fl(R̂ᵀR̂) by GEMM (inner length
///     N) satisfies |W̃ − R̂ᵀR̂| ≤ γ_N ‖r̂_i‖‖r̂_j‖ + N·η as in 3., so ‖Q − R̂ᵀR̂‖₂ ≤ max_i Σ_j (|Q_ij − W̃_ij|
///     + γ_N‖r̂_i‖‖r̂_j‖ + N·η) =: ε (rounded up; the matrix is symmetric). If ε + ω + β < c (evaluated
///     rounding up), then λ_min(θ²I − G) ≥ c − ε − ω − β > 0, so ‖C‖₂ < θ.
///  5. upper = min(2^e·(θ + ‖R‖₂ bound), fallback), all rounded up; fallback = min(√(‖M‖₁‖M‖∞), ‖M‖_F) over
///     the magnitudes, with upward sums, always valid.
/// lower: ‖M'v‖/‖v‖ for the power vector v, enclosed in interval64 over the whole box (rounded down).
///
/// Cost: one m×n power iteration in double, two N×N GEMM-sized products (N²K and N³ flops) and one LLT per
/// verified attempt (usually one), O(mn) directed-rounding operations. The zero matrix gives 0 exactly
/// ("frobenius"); empty matrices give 0. Throws InputError for non-finite entries or invalid options.
CertifiedNormBound spectral_norm_upper_fast(const Matrix<double>& M,
                                            const CertifiedNormOptions& options = {});
/// The same for every matrix in an interval64 box.
CertifiedNormBound spectral_norm_upper_fast(const Matrix<interval64>& M,
                                            const CertifiedNormOptions& options = {});

// ---------------------------------------------------------------------------------------------------------
// Reference value (tests)
// ---------------------------------------------------------------------------------------------------------

/// √λ_max of the smaller Gram matrix (MᵀM or MMᵀ formed in S), by Eigen's SelfAdjointEigenSolver at the
/// working precision. An ESTIMATE, not certified: its relative error is about N·eps<S> (the Gram matrix
/// squares only the small singular values' conditioning), so at 256-bit mpfr it is a reference for tests.
/// Empty matrices give 0. Instantiated for float, double, mpfr.
template <class S>
S spectral_norm_reference(const Matrix<S>& M);

// ---- explicit instantiations (core/src/spectral_norm.cpp) ----
#define REGATTA_SPECTRAL_NORM_POINT_EXTERN(S)                                                   \
  extern template PowerIterationResult<S> spectral_norm_power<S>(const Matrix<S>&,              \
                                                                 const PowerIterationOptions&); \
  extern template S spectral_norm_reference<S>(const Matrix<S>&);
#define REGATTA_SPECTRAL_NORM_ALL_EXTERN(S)                                                          \
  extern template interval certified_lower_bound_from_vector<S>(const Matrix<S>&, const Vector<S>&); \
  extern template CertifiedNormBound spectral_norm_upper_certified<S>(const Matrix<S>&,              \
                                                                      const CertifiedNormOptions&);
REGATTA_FOR_EACH_POINT_SCALAR(REGATTA_SPECTRAL_NORM_POINT_EXTERN)
REGATTA_FOR_EACH_SCALAR(REGATTA_SPECTRAL_NORM_ALL_EXTERN)
#undef REGATTA_SPECTRAL_NORM_POINT_EXTERN
#undef REGATTA_SPECTRAL_NORM_ALL_EXTERN

}  // namespace regatta
