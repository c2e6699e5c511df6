#pragma once
// Internal: the point-dependent state of one attention block (BlockState) and the helpers its three sources
// share: block.cpp (forward pass, building the state), block_derivatives.cpp (the JVP / VJP of one block
// through its scores and kernel) and linearization.cpp (chaining them through a stack, dense Jacobians).
// Public interface: differentiable.hpp.
//
// The mathematics (docs/math/attention.md#layers, docs/math/jacobian.md), generic over the scalar type:
//
// One head, queries Xn = N(X) (n×d), context Yn = N(Y) (m×d):
//   Q = ρ(Xn·WQ + 1bQᵀ), K = ρ(Yn·WK + 1bKᵀ), ρ the row-wise rotary map (rotary.hpp) or the identity,
//   S_ij = q_i·k_j/√d_h (dot) or −‖q_i − k_j‖²/√d_h (l2, difference form), masked entries never formed,
//   kernel: t alternating normalisations in the log domain (docs/math/attention.md#sinkhorn-attention), g⁰ =
//     0,
//     odd s:  f_i = −LSE_j(S_ij + g_j)   (R_s = row-softmax(S + 1gᵀ)),
//     even s: g_j = −LSE_i(S_ij + f_i)   (C_s = column-softmax(S + f1ᵀ)),
//   and the kernel is R_t (t odd) or C_t (t even) — for t = 1 the softmax P;
//   values V = Yn·WVO + 1·bVOᵀ (WVO = WV·WO or A·WV·WO), head output Kernel·V.
// F = [X] + Σ_h Kernel_h·V_h + bO.
//
// Derivatives (the kernel is exp(S + f1ᵀ + 1gᵀ) on visible entries):
//   JVP:  ḟ_i = −Σ_j R_ij(Ṡ_ij + ġ_j),  ġ_j = −Σ_i C_ij(Ṡ_ij + ḟ_i),  K̇ = K ⊙ (Ṡ + ḟ1ᵀ + 1ġᵀ);
//   VJP:  L̄ = K ⊙ K̄; S̄ = L̄, f̄ = L̄1, ḡ = L̄ᵀ1; then back through the steps:
//         odd s:  S̄ −= diag(f̄)·R_s, ḡ −= R_sᵀ f̄, f̄ = 0;   even s: S̄ −= C_s·diag(ḡ), f̄ −= C_s ḡ, ḡ = 0.
// For t = 1 these reduce to docs/math/jacobian.md#softmax-derivative: Ṗ = P ⊙ (Ṡ − (P ⊙ Ṡ)11ᵀ), S̄ = P ⊙ (P̄
// − (P ⊙ P̄)11ᵀ).
// RoPE is linear and fixed per row: Q̇ = ρ(Ẋn·WQ), Q̄ ↦ ρᵀ(Q̄) before ·WQᵀ (and the same for keys).
// Score derivatives: dot Ṡ = (Q̇Kᵀ + QK̇ᵀ)/√d_h, Q̄ = S̄K/√d_h, K̄ = S̄ᵀQ/√d_h; l2 (tied or untied,
// docs/math/jacobian.md#l2-untied-derivatives)
// Ṡ_ij = −(2/√d_h)(q_i − k_j)·(q̇_i − k̇_j), Q̄_i = −(2/√d_h)Σ_j S̄_ij(q_i − k_j), K̄_j = (2/√d_h)Σ_i S̄_ij(q_i −
// k_j).
//
// Interval arithmetic: every shift of a log-sum-exp is a point value (scalar_traits::pivot), so softmax rows
// are evaluated as exp(s − c)/Σ exp(s − c) with the identity exact for any c; all results are enclosures.
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include <regatta/core/detail/product.hpp>
#include <regatta/core/detail/scalar_math.hpp>
#include <regatta/core/eigen.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/operators/differentiable.hpp>

#include "rotary.hpp"

namespace regatta::operators {

namespace detail {

template <class S>
using Mat = Matrix<S>;

/// A·B (the library's one product, core/detail/product.hpp).
template <class S, class A, class B>
Mat<S> mul(const A& a, const B& b) {
  return regatta::detail::product<S>(a, b);
}

inline bool visible(bool causal, Eigen::Index i, Eigen::Index j) { return !causal || j <= i; }

}  // namespace detail

/// Everything one block needs at a point (X, Y) to apply its derivatives.
template <class S>
struct BlockState {
  struct Head {
    Matrix<S> Q, K;                // n×d_h, m×d_h
    Matrix<S> V;                   // m×d: values through WVO (with the value bias)
    Matrix<S> kernel;              // n×m
    std::vector<Matrix<S>> steps;  // R_1, C_2, R_3, ... (t matrices; steps.back() == kernel)
  };
  const Block<S>* block = nullptr;
  /// Set by linearize / linearize_cross: a copy of the block that `block` then points to, so that a
  /// linearization stays valid after the block it came from is gone (forward passes use the block itself).
  std::shared_ptr<const Block<S>> owner;
  bool self = true;
  bool causal = false;
  Matrix<S> X, Y, Xn, Yn;
  std::vector<Head> heads;
  std::optional<detail::RotaryTables<S>> rotary;  // rows 0..max(n, m)−1 when the block has RoPE
  /// ρ(Z) (or ρᵀ(Z) when transpose) for a query/key-side matrix; Z itself without RoPE.
  Matrix<S> rotated(Matrix<S> Z, bool transpose = false) const {
    if (rotary && Z.size() != 0) detail::rotate_rows(Z, *rotary, transpose);
    return Z;
  }

  Matrix<S> value() const;
  /// Ṡ of head h for query / context tangents of the normalised tokens (either may be empty: zero).
  Matrix<S> score_jvp(const Head& hd, const Matrix<S>& Qdot, const Matrix<S>& Kdot) const;
  Matrix<S> kernel_jvp(const Head& hd, const Matrix<S>& Sdot) const;
  Matrix<S> kernel_vjp(const Head& hd, const Matrix<S>& Kbar) const;
  /// Ḟ without the residual term, for tangents of the normalised queries / context (empty = zero).
  Matrix<S> attention_jvp(const Matrix<S>& Xn_dot, const Matrix<S>& Yn_dot) const;
  /// The whole self-attention JVP (norm, attention, residual) of `count` tangents of X stacked row-wise
  /// (tangent_stack.hpp), one product per linear step (block_tangents.cpp).
  Matrix<S> self_jvp_stacked(const Matrix<S>& T, Eigen::Index count) const;
  /// Cotangents of the normalised queries and context for F̄ (without the residual term).
  void attention_vjp(const Matrix<S>& Fbar, Matrix<S>& Xn_bar, Matrix<S>& Yn_bar) const;
  Matrix<S> norm_jvp(const Matrix<S>& Z, const Matrix<S>& Zdot) const;
  Matrix<S> norm_vjp(const Matrix<S>& Z, const Matrix<S>& Zbar) const;
};

namespace detail {

/// The state with its own copy of the block (state() builds a fresh, non-const BlockState, so the cast only
/// restores the access its creator had).
template <class S>
std::shared_ptr<const BlockState<S>> owning(std::shared_ptr<const BlockState<S>> st, const Block<S>& block) {
  auto mutable_state = std::const_pointer_cast<BlockState<S>>(st);
  mutable_state->owner = std::make_shared<const Block<S>>(block);
  mutable_state->block = mutable_state->owner.get();
  return st;
}

}  // namespace detail

}  // namespace regatta::operators
