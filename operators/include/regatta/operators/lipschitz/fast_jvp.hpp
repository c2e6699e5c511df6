#pragma once
// The JVP of one softmax self-attention block in interval64 with every matrix product a midpoint–radius
// product (core/interval64_product.hpp): the certified lower bound on ‖J(X)‖₂ at BERT size in seconds.
// Unlike Block<interval64> (differentiable.hpp) nothing d×d is formed: the value path multiplies by W^V_h
// and then by W^O_h (O(n·d·d_v) per head instead of the d×d product W^V_h W^O_h).
#include <optional>
#include <string>

#include <regatta/core/eigen.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>

namespace regatta::lip {

/// Why jacobian_jvp_fast does not apply to (layer, options), or nullopt. It needs softmax dot-product
/// attention (sinkhorn_iterations = 1, kind dot) without rotary embeddings; masks, biases, residual and
/// pre-norm (LayerNorm, RMSNorm) are handled.
std::optional<std::string> fast_jvp_refusal(const operators::AttentionLayer& layer,
                                            const operators::AttentionOptions& options);

/// CERTIFIED enclosure of P = softmax_row(S) for an interval64 score matrix S (n×m): on the visible entries
/// (all, or j ≤ i when causal) exp(S_ij − c_i)/Σ_k exp(S_ik − c_i) with c_i a double near the row maximum
/// (any c_i gives the same exact P; this one keeps the exps in range), 0 on the masked ones. Every entry
/// encloses the exact softmax of every score matrix in S.
Matrix<interval64> softmax_rows_fast(const Matrix<interval64>& S, bool causal);

/// CERTIFIED enclosure of J(X)·W (n×d), J the Jacobian of the self-attention block (layer, options) at X,
/// for the exact binary64 tangent W: each entry contains the exact real value of that entry. The formulas
/// (docs/math/jacobian.md): Q̇ = Ẋn W^Q, K̇ = Ẋn W^K, Ṡ = (Q̇Kᵀ + QK̇ᵀ)/√d_h, Ṗ = P ⊙ (Ṡ − rowsum(P ⊙ Ṡ)),
/// Ḟ = [Ẋ] + Σ_h Ṗ_h V_h + P_h (Ẋn W^V_h) W^O_h with Ẋn = DN(X)[Ẋ] and V_h = (Xn W^V_h + 1b^Vᵀ) W^O_h.
/// Products: midrad_product; softmax: interval64 exp (MPFR endpoints) of the scores shifted by the row
/// maximum of their midpoints, divided by the row sums. Cost O(H·(n²·d_h + n·d·(d_h + d_v)) + n·d) flops
/// (three GEMMs per product) and H·n² interval exps. Throws InputError(refusal) when fast_jvp_refusal gives
/// a reason, and for a wrong shape or non-finite X or W.
Matrix<interval64> jacobian_jvp_fast(const operators::AttentionLayer& layer,
                                     const operators::AttentionOptions& options, const Matrix<double>& X,
                                     const Matrix<double>& W);

/// CERTIFIED enclosure of ‖J(X) w‖_F/‖w‖_F from jacobian_jvp_fast (sums of squares and the square root in
/// interval64): its lower end is a certified lower bound on ‖J(X)‖₂ for every w ≠ 0. Throws InputError for
/// w = 0 and as jacobian_jvp_fast.
interval64 jacobian_ratio_fast(const operators::AttentionLayer& layer,
                               const operators::AttentionOptions& options, const Matrix<double>& X,
                               const Matrix<double>& w);

}  // namespace regatta::lip
