#pragma once
// Inversion of a residual block F(X) = X + g(X) with Lip(g) ≤ L < 1 (Behrmann et al. 2019;
// docs/math/attention.md#residual-inversion), by the fixed-point iteration X⁽⁰⁾ = Y, X⁽ᵏ⁺¹⁾ = Y − g(X⁽ᵏ⁾),
// all norms Frobenius.
//
// Banach's fixed-point theorem gives, for the unique X* with F(X*) = Y,
//   a priori      ‖X⁽ᵏ⁾ − X*‖ ≤ Lᵏ/(1 − L)·‖X⁽¹⁾ − X⁽⁰⁾‖,
//   a posteriori  ‖X⁽ᵏ⁾ − X*‖ ≤ L/(1 − L)·‖X⁽ᵏ⁾ − X⁽ᵏ⁻¹⁾‖,
// and the residual F(X⁽ᵏ⁾) − Y = X⁽ᵏ⁾ − X⁽ᵏ⁺¹⁾ bounds the error by ‖F(X⁽ᵏ⁾) − Y‖/(1 − L). These hold for the
// exact iteration; the reported numbers are evaluated in S (double: estimates up to rounding of g).
// The caller supplies L: it must be a valid upper bound on Lip(g) (for attention a *certified* one, e.g.
// the upper end of the interval evaluation of kim.thm32_2 — power iteration underestimates).
#include <functional>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>

namespace regatta::operators {

struct InversionOptions {
  double lipschitz = 0.5;     ///< L ∈ (0, 1): an upper bound on Lip(g) in the Frobenius norm
  double tolerance = 1e-12;   ///< stop when the a posteriori bound is ≤ tolerance
  int max_iterations = 1000;  ///< ≥ 1
};

template <class S>
struct InversionResult {
  Matrix<S> X;                    ///< X⁽ᵏ⁾, the last iterate
  int iterations = 0;             ///< k
  bool converged = false;         ///< a posteriori bound ≤ tolerance
  double residual = 0;            ///< ‖F(X⁽ᵏ⁾) − Y‖_F (= ‖X⁽ᵏ⁾ − X⁽ᵏ⁺¹⁾‖_F)
  double a_priori_bound = 0;      ///< Lᵏ/(1 − L)·‖X⁽¹⁾ − X⁽⁰⁾‖_F
  double a_posteriori_bound = 0;  ///< L/(1 − L)·‖X⁽ᵏ⁾ − X⁽ᵏ⁻¹⁾‖_F
  double residual_bound = 0;      ///< ‖F(X⁽ᵏ⁾) − Y‖_F/(1 − L)
  int iterations_needed_a_priori = 0;  ///< ⌈ln(τ(1 − L)/‖X⁽¹⁾ − X⁽⁰⁾‖)/ln L⌉ (0 when already below τ)
};

/// Inverts Y ↦ X with X + g(X) = Y. Throws InputError for L ∉ (0, 1), a non-positive tolerance,
/// max_iterations < 1, an empty or non-finite Y, or g returning a matrix of another shape.
template <class S>
InversionResult<S> invert_residual(const std::function<Matrix<S>(const Matrix<S>&)>& g, const Matrix<S>& Y,
                                   const InversionOptions& options);

/// The layer with W^O scaled by c/B, so that g = c·F/B (no residual in g): with B a certified upper bound
/// on Lip₂(F) at the largest sequence length in use, Lip₂(g) ≤ c < 1 and X + g(X) is invertible
/// (docs/math/attention.md#contractive-l2). Output biases are scaled too. Throws InputError for
/// c ∉ (0, 1) or B not positive and finite.
AttentionLayer scaled_layer(const AttentionLayer& layer, double c, double B);

}  // namespace regatta::operators
