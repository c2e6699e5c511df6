#pragma once
// A PGD lower bound on the largest output change of an attention block within distance ε of an input
// (docs/math/bounds.md#havens-pgd): Δ*(X, ε) = max_{‖E‖_F ≤ ε} ‖F(X + E) − F(X)‖_F.
//
// Projected ascent on ½‖F(X + E) − F(X)‖²_F (gradient: the VJP of the Block at X + E applied to
// F(X + E) − F(X)), normalised steps of adaptive length (×1.5 after an accepted step, ÷3 after a rejected
// one), projection onto the ball after every step; restarts along ± a given direction (the top singular
// vector of the first-order map) and seeded random directions. The best perturbation is re-evaluated in
// interval arithmetic: with Y = X + E (an exact double matrix), ‖Y − X‖_F ≤ ε is checked in interval
// arithmetic and ‖F(Y) − F(X)‖_F enclosed by Block<interval>::forward, so its lower end is a CERTIFIED lower
// bound on Δ*.
#include <cstdint>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>

namespace regatta::lip {

struct PgdResult {
  double estimate = 0;         ///< ‖F(X + E) − F(X)‖_F at the best E found (double): ESTIMATE
  double certified_lower = 0;  ///< the interval re-evaluation, lower end (NaN when not certified)
  /// The witness Y (doubles) at which certified_lower was evaluated: ‖F(Y) − F(X)‖_F ≥ certified_lower and
  /// ‖Y − X‖_F ≤ ε, both checked in interval arithmetic when certified_lower is not NaN.
  Matrix<double> witness;
};

/// `direction` (n×d, any norm; zero: none) seeds two restarts (±); `random_restarts` more from `seed`.
PgdResult pgd_lower_bound(const operators::AttentionLayer& layer, const operators::AttentionOptions& options,
                          const Matrix<double>& X, double eps, const Matrix<double>& direction, int steps,
                          int random_restarts, std::uint64_t seed);

}  // namespace regatta::lip
