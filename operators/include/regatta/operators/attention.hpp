#pragma once
// Multi-head self- and cross-attention on token matrices (docs/math/attention.md#multi-head to
// docs/math/attention.md#sinkhorn-attention).
//
//   dot: MHA(X) = Σ_h K_h·(X WV_h + 1 bV_hᵀ)·WO_h + 1 bOᵀ,
//        S_h = (X WQ_h + 1 bQ_hᵀ)(X WK_h + 1 bK_hᵀ)ᵀ/√d_h
//   l2 (Kim et al. 2021, tied WK = WQ): S_h,ij = −‖q_i − k_j‖²/√d_h with q, k as above, and values
//        X·A_h·WV_h + 1 bV_hᵀ, A_h = WQ_h WQ_hᵀ/√d_h (docs/math/attention.md#l2-mha).
// Block: F(X) = [X] + MHA(N(X)) with the optional row-wise pre-norm N (LayerNorm or RMSNorm with the layer's
// γ, β, ε; docs/math/attention.md#residual-prenorm, docs/math/attention.md#normalisation) and [X] the
// un-normalised input when residual. Cross-attention replaces the keys' and
// values' X by the context Y (m×d), normalised by the same N. M is 0 or the causal mask (key j visible to
// query i iff j ≤ i).
//
// Kernels. Softmax (t = 1): K_h = softmax_row(S_h + M). Sinkhorn (t ≥ 2 half-steps, rows first; Sander et
// al. 2022, docs/math/attention.md#sinkhorn-attention): with potentials f ∈ R^n, g ∈ R^m, g = 0 at the start,
//     row step     f_i = −LSE_j(S_ij + M_ij + g_j)
//     column step  g_j = −LSE_i(S_ij + M_ij + f_i)
// and K^(t)_ij = exp(S_ij + M_ij + f_i + g_j) with the latest f and g. After an odd t the rows of K^(t) sum
// to 1 (it is the row softmax of S + M + 1gᵀ); after an even t the columns do. The value bias goes through
// the kernel (K·(Y WV + 1 bVᵀ)), as in the reference code. Without a mask and with n = m, K^(t) tends to the
// doubly stochastic K^(∞) (Sinkhorn's theorem); with the causal mask it tends, slowly, to the identity.
//
// Streaming. Every kernel is applied through pairwise::reduce and never materialised: a row step is one
// reduce with log-weights g; a column step is one reduce with the roles of queries and keys exchanged (both
// scores are symmetric in the projected (q, k)), log-weights f and the anticausal mask when causal; the
// output is one reduce with log-weights g (after an even t its rows are scaled by exp(f_i + lse_i), the row
// sums of K^(t)). Work O(t·n·m·(d_h + d_v)) and memory O((n + m)·(d + d_h + d_v)) per head; rounding error
// is that of pairwise::reduce plus the GEMMs (a few eps times the magnitudes involved), and t = 1 runs
// exactly the softmax path. Every result is a double-precision floating-point evaluation (not certified).
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/normalization.hpp>

namespace regatta::operators {

struct AttentionOptions {
  bool causal = false;
  bool residual = false;         ///< add X (the queries) to the output
  bool allow_untied_l2 = false;  ///< run l2 with WK ≠ WQ (outside the hypotheses of the L2 theorem)
  /// Pre-normalisation N applied row-wise before attention: F(X) = [X] + MHA(N(X))
  /// (docs/math/attention.md#residual-prenorm);
  /// for cross-attention N is applied to queries and context. γ, β, ε come from the layer.
  Prenorm prenorm = Prenorm::none;
  /// Sinkhorn attention (docs/math/attention.md#sinkhorn-attention): number t ≥ 1 of alternating
  /// normalisation half-steps, rows
  /// first; t = 1 is softmax attention.
  int sinkhorn_iterations = 1;
};

/// Inputs are read in place (MatrixRef: a Matrix, or a Map of a caller's C-ordered buffer, is not copied).
///
/// Self-attention F(X) of tokens X (n×d). Throws InputError for a wrong-width, empty or non-finite X, an
/// invalid layer, sinkhorn_iterations < 1, or an untied l2 layer unless allowed ("untied L2 is outside the
/// L2 theorem").
Matrix<double> attend(const AttentionLayer& layer, const MatrixRef<double>& X,
                      const AttentionOptions& options = {});

/// Cross-attention of queries X (n×d) to context Y (m×d); same errors, Y checked as X. Causal Sinkhorn
/// attention (t ≥ 2) needs n ≥ m (every context column must see a query).
Matrix<double> attend_cross(const AttentionLayer& layer, const MatrixRef<double>& X,
                            const MatrixRef<double>& Y, const AttentionOptions& options = {});

/// Self-attention of tokens carrying log-weights ω ∈ [−∞, ∞)^n
/// (docs/math/attention.md#empirical-weighted-grid): ω_j is added to every
/// logit of key j, in the row steps, the column steps (as a query log-weight) and the output; ω = log w for
/// the atoms of a weighted measure (Sinkhorn then has both marginals w). An empty ω, or one whose entries
/// are all exactly 0, runs exactly the unweighted path of attend(). Throws as attend() and for a wrong length
/// or a NaN / +inf entry ("log_weights"), and when a query sees no key of finite log-weight.
Matrix<double> attend_weighted(const AttentionLayer& layer, const MatrixRef<double>& X,
                               const Vector<double>& log_weights, const AttentionOptions& options = {});

/// Cross-attention to a context carrying log-weights ω (length m; empty or all 0: exactly attend_cross).
/// Softmax only: a non-empty ω with sinkhorn_iterations ≠ 1 throws InputError (the Sinkhorn marginals of a
/// weighted context need the query weights too; use attend_weighted for self-attention).
Matrix<double> attend_cross_weighted(const AttentionLayer& layer, const MatrixRef<double>& X,
                                     const MatrixRef<double>& Y, const Vector<double>& context_log_weights,
                                     const AttentionOptions& options = {});

/// The materialised kernel K_h (n×m) of head `head` (0-based) for queries X and context Y — the softmax P_h
/// or the Sinkhorn K_h^(t), after pre-norm; residual and value maps play no part. Computed from the same
/// potentials as attend_cross, then exp of the materialised log-kernel (pairwise::log_kernel_matrix):
/// O(n·m) memory, for tests and small sizes (InputError beyond pairwise::max_materialized_entries). Masked
/// entries are exactly 0. Errors as attend_cross, plus a head outside 0..H−1 ("head").
Matrix<double> attention_kernel(const AttentionLayer& layer, int head, const MatrixRef<double>& X,
                                const MatrixRef<double>& Y, const AttentionOptions& options = {});

/// The kernel of attend_cross_weighted (softmax only for a non-empty ω): row i is
/// softmax_j(S_ij + M_ij + ω_j); entries of keys with ω_j = −∞ are exactly 0.
Matrix<double> attention_kernel_weighted(const AttentionLayer& layer, int head, const MatrixRef<double>& X,
                                         const MatrixRef<double>& Y,
                                         const Vector<double>& context_log_weights,
                                         const AttentionOptions& options = {});

/// F_L ∘ … ∘ F_1 (X) with F_k = attend(layers[k], ·, options) (docs/math/attention.md#residual-prenorm);
/// weight sharing is the
/// same layer repeated. Throws InputError for an empty list ("layers") or a layer whose width differs from
/// layers[0] ("layers[k]"), and as attend().
Matrix<double> attend_stack(const std::vector<AttentionLayer>& layers, const MatrixRef<double>& X,
                            const AttentionOptions& options = {});

}  // namespace regatta::operators
