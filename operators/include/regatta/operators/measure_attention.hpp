#pragma once
// Attention on probability measures (docs/math/attention.md#measures; Vuckovic et al. 2020, Castin et al.
// 2024).
//
// For a context μ = Σ_j w_j δ_{y_j} and head h with score k_h (dot: k_h(x, y) = q(x)ᵀk(y)/√d_h; l2:
// −‖q(x) − k(y)‖²/√d_h, the layer's projections and biases as in attention.hpp):
//     K^h_μ(x, ·) = Σ_j softmax_j(k_h(x, y_j) + log w_j) δ_{y_j}          the attention kernel
//     (docs/math/attention.md#measure-kernel, docs/math/attention.md#empirical-weighted-grid)
//     Γ_μ(x)      = Σ_h (Σ_j K^h_μ(x, {y_j}) v_h(y_j)) WO_h + bO           the value map
//     (docs/math/attention.md#measure-multi-head)
//     T_μ(x)      = [x] + Γ_{N#μ}(N(x))                                    [x] when residual, N the pre-norm
//     F(μ)        = (T_μ)_#μ                                               F or F_res
//     (docs/math/attention.md#measure-kernel)
//     CA(η, μ)    = (T_μ)_#η                                               cross-attention
//     (docs/math/attention.md#measure-cross-attention)
// Log-weights are ω_j = log w_j − max_k log w_k, added to the logits; the shift cancels in every softmax and
// makes uniform weights exactly 0. Atoms of weight 0 carry no mass: they are removed from the context (their
// ω is −∞) and from the measures returned. The token path is the measure path: the functions below call
// attend_weighted / attend_cross_weighted of attention.hpp with ω, and ω = 0 there is the unweighted code,
// so on an empirical measure F(μ_X) has exactly (bit for bit) the atoms attend(X) with the weights of μ_X.
// Merging equal atoms into one atom with the summed weight leaves Γ_μ unchanged up to rounding.
//
// Sinkhorn attention (options.sinkhorn_iterations = t ≥ 2) is defined for self-attention F(μ): potentials
// with both marginals μ (attend_weighted); Γ at arbitrary points, the kernel at a point and cross-attention
// need the query measure's potentials and refuse t ≠ 1 with InputError.
//
// Causal attention (options.causal) acts on lifted measures (docs/math/attention.md#lifted-causal): atoms
// (x, s) ∈ R^{d+1} with time s in the last coordinate (measures::lift_causal gives μ_X = (1/n) Σ_i δ_{(x_i,
// i/n)}); key (y, t) is visible to the query (x, s) iff t ≤ s, and T_μ(x, s) = ([x] + Γ^{≤s}_μ(x), s) keeps
// the time. For F(μ) the atoms of positive weight must have strictly increasing times (then time order is
// index order and the causal mask of pairwise applies); otherwise InputError. Causal cross-attention of two
// measures is absent (InputError).
//
// Layers with rotary position embeddings (layer.hpp) are refused with InputError ("layer"): the rotation
// depends on a token's position, which an atom of a measure does not have.
//
// Grid measures are used through GridMeasure::to_discrete() (cell masses at cell centres, empty cells
// omitted). Cost: that of the token path with n queries and m atoms of positive weight; every result is a
// double-precision floating-point evaluation (not certified).
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/measures/discrete_measure.hpp>
#include <regatta/measures/grid_measure.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>

namespace regatta::operators {

/// K^h_μ(x, ·) of head `head` (0-based) as a probability measure on the atoms of μ (same atoms and order;
/// atoms of weight 0, and with causal those later than the query's time, get weight 0). x has d entries, or
/// d + 1 (time last) with causal. Softmax only. Throws InputError for a wrong-width, non-finite x or μ, a
/// head outside 0..H−1, sinkhorn_iterations ≠ 1, and with causal a query that sees no atom of positive
/// weight.
measures::DiscreteMeasure<double> measure_kernel(const AttentionLayer& layer, int head,
                                                 const Vector<double>& x,
                                                 const measures::DiscreteMeasure<double>& mu,
                                                 const AttentionOptions& options = {});
/// The same on mu.to_discrete() (atoms: the centres of the non-empty cells).
measures::DiscreteMeasure<double> measure_kernel(const AttentionLayer& layer, int head,
                                                 const Vector<double>& x, const measures::GridMeasure& mu,
                                                 const AttentionOptions& options = {});

/// T_μ at the rows of X: n×d, or with causal n×(d + 1) rows (x, s) mapped to (T_μ(x, s), s) for any query
/// times s (queries are grouped by the number of atoms they see; each group is one softmax pass). Softmax
/// only. Throws InputError as measure_kernel.
Matrix<double> attention_value_map(const AttentionLayer& layer, const Matrix<double>& X,
                                   const measures::DiscreteMeasure<double>& mu,
                                   const AttentionOptions& options = {});
Matrix<double> attention_value_map(const AttentionLayer& layer, const Matrix<double>& X,
                                   const measures::GridMeasure& mu, const AttentionOptions& options = {});

/// F(μ) = (T_μ)_#μ (F_res with options.residual), softmax or Sinkhorn, causal on lifted measures. The result
/// has the atoms of positive weight of μ, mapped, with their weights. Throws InputError for a dimension
/// other than d (d + 1 with causal), times not strictly increasing with causal, and as attend_weighted.
measures::DiscreteMeasure<double> attend_measure(const AttentionLayer& layer,
                                                 const measures::DiscreteMeasure<double>& mu,
                                                 const AttentionOptions& options = {});
measures::DiscreteMeasure<double> attend_measure(const AttentionLayer& layer, const measures::GridMeasure& mu,
                                                 const AttentionOptions& options = {});

/// CA(η, μ) = (T_μ)_#η: the atoms of positive weight of η, mapped, with their weights. Softmax, not causal
/// (InputError otherwise); pre-norm normalises η's and μ's atoms, residual adds η's atoms.
measures::DiscreteMeasure<double> attend_measure_cross(const AttentionLayer& layer,
                                                       const measures::DiscreteMeasure<double>& eta,
                                                       const measures::DiscreteMeasure<double>& mu,
                                                       const AttentionOptions& options = {});
measures::DiscreteMeasure<double> attend_measure_cross(const AttentionLayer& layer,
                                                       const measures::DiscreteMeasure<double>& eta,
                                                       const measures::GridMeasure& mu,
                                                       const AttentionOptions& options = {});

/// F_L ∘ … ∘ F_1 (μ) with F_k = attend_measure(layers[k], ·, options); on an empirical measure its atoms are
/// exactly attend_stack's rows. Throws InputError as attend_stack and attend_measure.
measures::DiscreteMeasure<double> attend_measure_stack(const std::vector<AttentionLayer>& layers,
                                                       const measures::DiscreteMeasure<double>& mu,
                                                       const AttentionOptions& options = {});

}  // namespace regatta::operators
