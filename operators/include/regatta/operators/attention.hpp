#pragma once
// Multi-head self- and cross-attention on token matrices (shared/math/attention.md §2.1–§2.4).
//
//   dot: MHA(X) = Σ_h P_h·(X WV_h + 1 bV_hᵀ)·WO_h + 1 bOᵀ (+ X if residual),
//        P_h = softmax_row((X WQ_h + 1 bQ_hᵀ)(X WK_h + 1 bK_hᵀ)ᵀ/√d_h + M)
//   l2 (Kim et al. 2021, tied WK = WQ): P_h = softmax_row(−‖q_i − k_j‖²/√d_h + M) with q, k as above, and
//        values X·A_h·WV_h + 1 bV_hᵀ, A_h = WQ_h WQ_hᵀ/√d_h (§2.2).
// Cross-attention replaces the keys' and values' X by the context Y (m×d). M is 0 or the causal mask (key j
// visible to query i iff j ≤ i). Each P_h is applied through pairwise::reduce (streamed, never materialised):
// O(n·m·(d_h + d_v)) work and O((n + m)·(d + d_h + d_v)) memory per head; rounding error is that of
// pairwise::reduce plus the GEMMs (a few eps times the magnitudes involved).
#include <regatta/core/eigen.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/normalization.hpp>

namespace regatta::operators {

struct AttentionOptions {
  bool causal = false;
  bool residual = false;         ///< add X (the queries) to the output
  bool allow_untied_l2 = false;  ///< run l2 with WK ≠ WQ (outside the hypotheses of the L2 theorem)
  /// Pre-normalisation N applied row-wise before attention: F(X) = [X] + MHA(N(X)) (attention.md §2.3);
  /// for cross-attention N is applied to queries and context. γ, β, ε come from the layer.
  Prenorm prenorm = Prenorm::none;
  /// Sinkhorn attention (attention.md §2.6): number t ≥ 1 of alternating normalisation half-steps, rows
  /// first; t = 1 is softmax attention.
  int sinkhorn_iterations = 1;
};

/// Self-attention of tokens X (n×d). Throws InputError for a wrong-width or non-finite X, an invalid layer,
/// or an untied l2 layer unless allowed ("untied L2 is outside the L2 theorem").
Matrix<double> attend(const AttentionLayer& layer, const Matrix<double>& X,
                      const AttentionOptions& options = {});

/// Cross-attention of queries X (n×d) to context Y (m×d); same errors, Y checked as X.
Matrix<double> attend_cross(const AttentionLayer& layer, const Matrix<double>& X, const Matrix<double>& Y,
                            const AttentionOptions& options = {});

}  // namespace regatta::operators
