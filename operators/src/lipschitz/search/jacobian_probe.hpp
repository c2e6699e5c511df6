#pragma once
// Internal: matrix-free probes of the Jacobian J = DF(X) of an attention block in double
// (docs/math/jacobian.md#matrix-free-norms),
// and the gradient of a bilinear form ⟨U, J(X)V⟩ with respect to X, used by the adversarial search.
//
// Every value returned is an ESTIMATE FROM BELOW of ‖J(X)‖ (up to double rounding): ‖J v‖_F for a unit v is
// ≤ ‖J‖₂, and one absolute row sum is ≤ ‖J‖∞.
#include <functional>
#include <span>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/differentiable.hpp>

namespace regatta::lip::detail {

/// A value of a probe with what certifies it: for the 2-norm the unit direction v (n×d) with ‖J v‖ = value,
/// for the ∞-norm the flat row r = i·d + a and the sign pattern s of that row (Σ_k |J_rk| = ⟨e_r, J s⟩).
struct Probe {
  double value = 0;
  Matrix<double> direction;
  Eigen::Index row = -1;
  Matrix<double> left;  ///< 2-norm: J v/‖J v‖ (empty when J v = 0); ∞-norm: empty (the unit matrix of `row`)
};

/// Power iteration v ← Jᵀ J v / ‖·‖ (one JVP and one VJP per step) from `start` (any nonzero n×d), at most
/// `iterations` steps, stopping when the relative change of ‖J v‖ is at most `tolerance`, or after the first
/// step once `stop` (polled between steps, when set) returns true — a time budget; every iterate's value is
/// an estimate from below, so stopping early only loses accuracy.
Probe power_probe(const operators::Linearization<double>& lin, const Matrix<double>& start, int iterations,
                  double tolerance, const std::function<bool()>& stop = {});

/// The largest absolute row sum among the rows of the given tokens (each token i contributes the rows
/// i·d .. i·d + d − 1; one VJP per row).
Probe row_probe(const operators::Linearization<double>& lin, std::span<const Eigen::Index> tokens);

/// Every token's rows: the exact ‖J(X)‖∞ (n·d VJPs).
Probe all_rows_probe(const operators::Linearization<double>& lin);

/// ∇_X ⟨U, DF(X)[V]⟩. By the symmetry of the second derivative, ⟨U, D²F(X)[V, W]⟩ = ⟨U, D²F(X)[W, V]⟩, so
/// the gradient is d/dh DF(X + hV)ᵀU at h = 0; it is taken by the central difference
///   (VJP(X + hV; U) − VJP(X − hV; U)) / 2h,   h = ∛eps · length / ‖V‖_max,
/// which moves every entry by at most ∛eps·length (truncation O(h²), rounding O(eps/h): the usual balance).
/// Two linearisations and two VJPs. Used only to choose ascent directions: every step of the search is
/// accepted or rejected on exact probe values, so the approximation never enters a reported number.
Matrix<double> bilinear_gradient(const operators::Block<double>& block, const Matrix<double>& X,
                                 const Matrix<double>& U, const Matrix<double>& V, double length);

/// The X-gradient of the bilinear form that `probe` maximises at X (bilinear_gradient): ⟨left, J(X)v⟩ for a
/// power probe (empty when J v = 0), ⟨e_row, J(X)s⟩ for a row probe (row ≥ 0, s its signs).
Matrix<double> probe_gradient(const operators::Block<double>& block, const Matrix<double>& X,
                              const Probe& probe, double length);

/// The n×d matrix with a single 1 at flat index r (i = r / d, a = r % d).
Matrix<double> unit_matrix(Eigen::Index n, Eigen::Index d, Eigen::Index r);

}  // namespace regatta::lip::detail
