#pragma once
// The centred (mean-value) enclosure of the Jacobian of one self-attention block over a box, for the
// small-n·d branch and bound (branch_bound.cpp). Internal header.
//
// Mean-value form (docs/math/region.md#mean-value): for every X in the box B with centre c,
//   J(X) = J(c) + Σ_k ∂J/∂x_k(ξ_k)·(x_k − c_k)   (mean-value theorem entry by entry, ξ on the segment),
// so J(B) ⊆ J(c) + Σ_k [∂J/∂x_k](B)·(B_k − c_k), with [∂J/∂x_k](B) an enclosure of the derivative over B.
// Its excess width is O(rad(B)) with the constant of the true second derivative, where the naive interval
// extension carries the blow-up of the interval softmax (measured: 35·r relative on Kim's unit layer at
// n = 3, about ten times less with this form).
//
// The derivatives come from forward-mode differentiation in interval64 (a value and K partials, one per box
// coordinate) of the closed-form Jacobian of softmax attention (docs/math/jacobian.md): for head h with
// q_i = x_i W^Q + b_Q, k_j = x_j W^K + b_K, u_j = (x_j M_h + b_V) W^O_h (M_h = W^V, or W^Q W^Qᵀ W^V/√d_h for
// L2), scores s_ij (dot: q_i·k_j/√d_h; l2: −‖q_i − k_j‖²/√d_h), P = softmax_row(S + mask), F_i = Σ_j P_ij
// u_j:
//   ∂F_i/∂x_k = P_ik (M_h W^O_h)ᵀ + Σ_j P_ij (u_j − F_i)ᵀ ∂s_ij/∂x_k    (+ I_d δ_ik for a residual),
//   dot: ∂s_ij/∂x_k = (δ_ik k_j W^Qᵀ + δ_jk q_i W^Kᵀ)/√d_h,
//   l2:  ∂s_ij/∂x_k = −2 (q_i − k_j)(δ_ik W^Q − δ_jk W^K)ᵀ/√d_h.
// Pre-normalisation is not covered (centred_refusal); the caller uses the naive enclosure there.
#include <optional>
#include <string>

#include <regatta/core/eigen.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>

namespace regatta::lip::detail {

/// Why the centred enclosure does not apply (pre-norm, Sinkhorn), or nullopt.
std::optional<std::string> centred_refusal(const operators::AttentionLayer& layer,
                                           const operators::AttentionOptions& options);

/// The closed-form Jacobian above at a point, in double (an ESTIMATE; tested against the generic engine).
Matrix<double> closed_form_jacobian(const operators::AttentionLayer& layer,
                                    const operators::AttentionOptions& options, const Matrix<double>& X);

/// Enclosures over the box [lo, hi] (row-major n·d coordinates): value[r][c] encloses J_rc over the box
/// (the naive interval extension of the closed form) and partial[k](r, c) encloses ∂J_rc/∂x_k over it.
struct JacobianDerivatives {
  Matrix<interval64> value;
  std::vector<Matrix<interval64>> partial;
};
JacobianDerivatives jacobian_derivatives_on_box(const operators::AttentionLayer& layer,
                                                const operators::AttentionOptions& options,
                                                const Matrix<interval64>& box);

/// J(c) + Σ_k [∂J/∂x_k](B)·(B_k − c_k), intersected with the naive enclosure: CERTIFIED, every J(X) with
/// X in the box lies in it. `at_centre` must enclose J(c) for the c given (c inside the box).
Matrix<interval64> centred_enclosure(const operators::AttentionLayer& layer,
                                     const operators::AttentionOptions& options,
                                     const Matrix<interval64>& box, const Matrix<double>& centre,
                                     const Matrix<interval64>& at_centre);

}  // namespace regatta::lip::detail
