#pragma once
// Certified stability of the sphere flows (docs/flow.md#flow-stability): a Grönwall bound on the distance
// between two
// solutions started from nearby empirical measures with the same weights.
//
// Setting. Weights a_i ≥ 0 (Σ a_i = S, S = 1 up to the rounding of the given doubles; uniform a_i = 1/n
// exactly when none are given), the a-weighted norm ‖X‖_a = (Σ_i a_i ‖x_i‖²)^{1/2} on R^{n×d}, and the
// velocity fields of flow.hpp extended to all of R^{n×d} by the same formulas (P⊥_x v = v − ⟨x, v⟩ x). On the
// convex set D = {X : ‖x_i‖ ≤ 1 for every i} (the product of closed unit balls) the field is L-Lipschitz in
// ‖·‖_a with
//     sphere (SA)                 L = 2 + β + (1 + β) e^β
//     sphere-unnormalized (USA)   L = (3 + 2β) S e^β
// (derivation in docs/flow.md#flow-stability: the softmax derivative, the covariance of the attention row,
// the
// column sums Σ_i a_i π_ij ≤ e^{2β} a_j, and ‖I − x xᵀ‖ ≤ 1, ‖⟨x, m⟩ I + x mᵀ‖ ≤ 2 |m| on the ball).
// The exact flow keeps every particle on the unit sphere (d‖x_i‖²/dt = 2⟨x_i, v_i⟩ = 0 there), so two exact
// solutions X_t, Y_t stay in D together with the segment between them, and the mean-value inequality and
// Grönwall's lemma give
//     W₂(μ_t, ν_t) ≤ ‖X_t − Y_t‖_a ≤ e^{L t} ‖X_0 − Y_0‖_a
// (the first inequality: the coupling by index is a transport plan between μ_t = Σ a_i δ_{x_i(t)} and
// ν_t = Σ a_i δ_{y_i(t)}). The bound is about the exact flows started from the radial projections
// x_i/‖x_i‖ of the given particles; the distances computed from integrated trajectories are estimates.
//
// Certification: L is evaluated in interval64 (outward rounding; exp from MPFR) from the double β, the
// initial distance in interval64 from the given doubles (projection included), and e^{L t} d_0 likewise;
// the upper ends are certified upper bounds. Not available (a reason instead) for sphere-sinkhorn (its
// kernel is the output of finitely many scaling iterations, no derivative bound is derived) and for the
// layer models (no invariant bounded set is established for them).
#include <string>

#include <regatta/core/eigen.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/operators/flow.hpp>

namespace regatta::operators::flow {

struct FieldLipschitz {
  bool available = false;
  interval64 constant{0.0};  ///< encloses the closed form above; constant.upper() is the certified L
  std::string formula;       ///< the closed form used, e.g. "2 + beta + (1 + beta) e^beta"
  std::string reason;        ///< why none is available
};

/// The certified Lipschitz constant of the model's velocity field on D in ‖·‖_a (see above). `weights`:
/// empty for uniform weights, else the particle weights (finite, ≥ 0).
FieldLipschitz certified_field_lipschitz(const ModelSpec& spec, const Vector<double>& weights = {});

/// ‖X̂ − Ŷ‖_a for the radial projections X̂, Ŷ (rows divided by their norms) of the given doubles
/// (`project`; else ‖X − Y‖_a of the doubles themselves), enclosed in interval64; weights empty for exactly
/// uniform 1/n. Rows must be nonzero when projecting (contract).
interval64 projected_distance(const Matrix<double>& X, const Matrix<double>& Y,
                              const Vector<double>& weights = {}, bool project = true);

/// ‖X − Y‖_a of the given doubles, a double estimate (the distance between two integrated states).
double weighted_distance(const Matrix<double>& X, const Matrix<double>& Y,
                         const Vector<double>& weights = {});

/// The certified upper bound e^{L t} d for L ≤ lipschitz_upper, d ≤ distance_upper, t ≥ 0: the upper end of
/// its interval64 evaluation (+inf beyond the double range).
double gronwall_upper(double lipschitz_upper, double distance_upper, double t);

}  // namespace regatta::operators::flow
