#pragma once
// Log-domain Sinkhorn for the squared Euclidean cost, written as the attention kernel it is
// (docs/flow.md#sinkhorn-attention-row,
// docs/math/transport.md#entropic).
//
// For C_ij = ‖x_i − y_j‖² = ‖x_i‖² + ‖y_j‖² − 2⟨x_i, y_j⟩ the soft c-transform of the potential g is
//     f_i = −ε log Σ_j b_j exp((g_j − C_ij)/ε) = ‖x_i‖² − ε LSE_j(ω_j + ⟨x_i, (2/ε) y_j⟩),
//     ω_j = log b_j + (g_j − ‖y_j‖²)/ε,
// a row-wise log-sum-exp of biased dot products: exactly an attention row with query x_i, key (2/ε) y_j and
// key bias ω_j. The row constant ‖x_i‖² stays out of the exponentials. Two evaluation paths:
//   * narrow tokens (d ≤ narrow_dimension): a fused kernel — the keys are stored coordinate-major, a chunk of
//     scores t_j = ω_j + Σ_k x_ik y'_jk is formed with d fused multiply-adds per key into an L1-resident
//     buffer, then its maximum and Σ exp(t_j − max) are taken with the vectorised exp; chunks are merged in
//     the online log-sum-exp state (LogSumExp of online_softmax.hpp semantics). A GEMM of inner width 3 would
//     spend its time packing; this path spends it in exp.
//   * wide tokens: pairwise::reduce with the dot score (scale 2/ε) and log-weights ω — the GEMM-blocked
//     attention path.
// Storage: float64, or float32 (scores and exps in float, each chunk's sum of ≤ chunk_keys terms merged into
// a float64 running state when accumulate_double, else into a float state). The float32 path's error in each
// score is O(eps_f · |t_j|), and the reported marginal error is itself evaluated with float32 scores: it
// describes the exact plan of the returned potentials only up to O(eps_f · max|t_j|) (the tests bound the
// difference against the dense double-precision plan). Tolerances below that floor are typically not reached
// (status max_iterations).
//
// Iteration (optionally over-relaxed, see AttentionSinkhornOptions), ε-scaling, stopping test, outputs and
// statuses are those of measures::sinkhorn (sinkhorn.hpp):
// the same (f, g) updates, ‖P 1 − a‖₁ ≤ tolerance at the target ε, cost = <P, C>, objective = D_ε(f, g),
// all accumulated in double. The atoms are centred on the common bounding box first (C is translation
// invariant; the rounding of ‖x‖² + ‖y‖² − 2⟨x, y⟩ grows with ‖x‖²). Memory of the streamed path
// O((n + m) d) plus one chunk buffer per thread (10⁵ points per side need a few MB); the dense path
// (SinkhornKernel below, by default up to min(1 GiB, ¼ of the available memory)) holds the n×m kernel.
//
// Every number is an estimate (floating point, an entropic plan). Bad input throws InputError like
// measures::sinkhorn ("epsilon", "tolerance", …, "nu" for a dimension mismatch, "storage").
#include <cstddef>
#include <cstdint>

#include <regatta/measures/discrete_measure.hpp>
#include <regatta/measures/sinkhorn.hpp>

namespace regatta::measures {

enum class SinkhornStorage { float64, float32 };

/// How sinkhorn_sq_euclidean evaluates its iterations (options.sinkhorn.kernel, SinkhornKernel of
/// sinkhorn.hpp; docs/flow.md#sinkhorn-attention-row):
///   streamed  the log-domain iteration above, memory O((n + m) d): n·m exponentials per half-step;
///   dense     the stabilised scaling iteration (Schmitzer 2019, "absorption"): the Gibbs kernel
///             K_ij = exp((α_i + β_j − C_ij)/ε) of absorbed potentials is materialised (n·m entries in the
///             storage type) and every half-step is a matrix–vector product — the exponentials are paid once
///             per ε stage or absorption (when a scaling leaves e^{±10} in float32, e^{±30} in float64), and
///             each iteration reads K once (the row update and the next column sums in one pass).
///             Iterates, ε-scaling, over-relaxation and the stopping rule are those of the log-domain
///             iteration; when its in-loop marginal error (from K) reaches the tolerance, the returned
///             potentials are re-evaluated by the streamed log-domain transform and `converged` is decided on
///             that exact error; if K's rounding keeps it above the tolerance, or a scaling leaves the
///             representable range, the log-domain iteration finishes the solve from the current potentials
///             (SinkhornResult::handed_over). Only when every weight is positive (else streamed).
///   automatic dense when every weight is positive and n·m·sizeof(storage) ≤ dense_kernel_budget(options.
///             sinkhorn), else streamed.
/// SinkhornResult::kernel says which ran. options.sinkhorn.poll is called after every iteration of either,
/// and after every build of the dense kernel.
struct AttentionSinkhornOptions {
  SinkhornOptions sinkhorn{};  ///< ε, ε-scaling, tolerance, budget, threads (reduce_options)
  SinkhornStorage storage = SinkhornStorage::float64;
  bool accumulate_double = true;      ///< float32 storage: merge chunk sums in float64
  Eigen::Index narrow_dimension = 8;  ///< fused kernel for d ≤ this; pairwise::reduce above
  /// ω ∈ [1, 2): over-relaxed updates h ← h + ω (T(h′) − h) of both potentials at the target ε (Thibault,
  /// Chizat, Dossal, Papadakis 2021, "Overrelaxed Sinkhorn–Knopp"); the same fixed point. 1 = plain Sinkhorn.
  /// The stopping test is applied only to plain iterations: relaxing stops once the row error is within 10 ×
  /// tolerance or when it grows, and plain iterations finish the solve, so status and marginal_error keep
  /// their meaning. sinkhorn_sq_euclidean only (the symmetric solver ignores it).
  double over_relaxation = 1.0;
};

/// OT_ε(mu, nu) for C = ‖x − y‖² (see the header comment). Same contract as sinkhorn(mu, nu, 2, ...).
SinkhornResult<double> sinkhorn_sq_euclidean(const DiscreteMeasure<double>& mu,
                                             const DiscreteMeasure<double>& nu,
                                             const AttentionSinkhornOptions& options = {});

/// OT_ε(mu, mu) by the averaged symmetric update (as sinkhorn_symmetric), through the same kernel.
SinkhornResult<double> sinkhorn_sq_euclidean_symmetric(const DiscreteMeasure<double>& mu,
                                                       const AttentionSinkhornOptions& options = {});

/// Debiased S_ε = OT_ε(mu, nu) − ½ OT_ε(mu, mu) − ½ OT_ε(nu, nu) through the same kernel.
SinkhornDivergenceResult sinkhorn_divergence_sq_euclidean(const DiscreteMeasure<double>& mu,
                                                          const DiscreteMeasure<double>& nu,
                                                          const AttentionSinkhornOptions& options = {});

const char* to_string(SinkhornStorage storage);

/// Whether sinkhorn_sq_euclidean(mu, nu, options) runs the dense scaling iteration (see SinkhornKernel).
bool uses_dense_kernel(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu,
                       const AttentionSinkhornOptions& options);

}  // namespace regatta::measures
