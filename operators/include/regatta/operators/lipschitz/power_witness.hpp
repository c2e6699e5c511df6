#pragma once
// ‖J(X)‖₂ of one attention block at one input by power iteration through JVP/VJP, with the witness
// certified by certify_witness (bracket.hpp): the report's explicit constructions (regatta report, section
// 2).
#include <cstdint>
#include <optional>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>

namespace regatta::lip {

struct PowerWitness {
  double estimate = 0;         ///< ESTIMATE: ‖J v‖_F for the best unit v (≤ ‖J‖₂ up to rounding)
  double certified_lower = 0;  ///< CERTIFIED lower bound on ‖J‖₂ (NaN when not certified)
  Matrix<double> direction;    ///< the unit witness v
};

/// Relative change of ‖J v‖ below which the power iteration of power_witness stops (well above the double
/// rounding of one JVP/VJP pair, about n·d·eps relative, and far below the report's printed digits).
inline constexpr double power_witness_tolerance = 1e-10;

/// Power iteration v ← JᵀJv/‖·‖ (Linearization<double>, one JVP and one VJP per step; the best iterate is
/// kept) from a start with entries uniform in [−1, 1) drawn from std::mt19937_64(seed), at most `iterations`
/// steps, relative tolerance power_witness_tolerance. With `certify`, the witness (X, v) is re-evaluated in
/// interval arithmetic at 128 bits by certify_witness (tokens checked to lie in B_radius when a radius is
/// given). Throws InputError for a bad layer or X.
PowerWitness power_witness(const operators::AttentionLayer& layer, const operators::AttentionOptions& options,
                           const Matrix<double>& X, int iterations, bool certify, std::uint64_t seed,
                           std::optional<double> radius = {});

}  // namespace regatta::lip
