#pragma once
// The rows of the Jacobian J = DF(X) of one softmax self-attention block from their rank-one structure
// (docs/math/jacobian.md#softmax-derivative to docs/math/jacobian.md#mask-residual-norm): ‖J‖∞ and the dense
// Jacobian at a point, and its CERTIFIED enclosure
// over a box of inputs.
#include <optional>
#include <string>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/jacobian_norms.hpp>

namespace regatta::lip {

/// Why the structured row path does not apply to (layer, options), or nullopt: it needs softmax attention
/// (sinkhorn_iterations = 1); dot or l2, masks, biases, residual, pre-norm and rotary position embeddings are
/// all handled.
std::optional<std::string> structured_rows_refusal(const operators::AttentionLayer& layer,
                                                   const operators::AttentionOptions& options);

/// ‖J‖∞ of one self-attention block at X from the structure of its rows: with Fbar = E_ia only row i of the
/// score cotangent is non-zero, S̄_i· = P_i· ⊙ (V_·a − F_ia), so every row of J is a sum of 2H rank-one terms,
/// a term in row i and the row-wise pre-norm VJP (docs/math/jacobian.md#softmax-derivative to
/// docs/math/jacobian.md#mask-residual-norm). Cost O(H·n²·d²) for all rows
/// instead of n·d generic VJPs of O(H·(n²d + nd²)) each; the same numbers up to rounding (tested against
/// jacobian_norm_inf and the dense Jacobian). S = double (ESTIMATE: floating-point evaluation) or interval
/// (CERTIFIED enclosure at the working precision). Throws InputError(refusal) when structured_rows_refusal
/// gives a reason, and for a bad X.
template <class S>
InducedNorm<S> block_jacobian_norm_inf(const operators::AttentionLayer& layer,
                                       const operators::AttentionOptions& options, const Matrix<double>& X,
                                       const Progress& progress = {});

/// The dense Jacobian (n·d × n·d) of one self-attention block from the same structured rows; for the
/// certified upper bound on ‖J‖₂ at small sizes. Same refusals as block_jacobian_norm_inf.
template <class S>
Matrix<S> block_dense_jacobian(const operators::AttentionLayer& layer,
                               const operators::AttentionOptions& options, const Matrix<double>& X,
                               const Progress& progress = {});

/// The same rows evaluated on a box: X is an interval matrix (S = interval or interval64) and entry (r, c)
/// of the result encloses J(X')_rc for EVERY X' in X (a CERTIFIED enclosure of the Jacobian over the box;
/// see region.hpp for the norms over balls and boxes). For a point X it is block_dense_jacobian.
template <class S>
Matrix<S> block_dense_jacobian_on_box(const operators::AttentionLayer& layer,
                                      const operators::AttentionOptions& options, const Matrix<S>& X,
                                      const Progress& progress = {});

}  // namespace regatta::lip
