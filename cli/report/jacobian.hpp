#pragma once
// ‖J(X)‖₂ of one attention block at one input, for the report's explicit constructions (section 2): a power
// iteration estimate through JVP/VJP and its certification by lip::certify_witness (bracket.hpp).
#include <cstdint>
#include <optional>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>

namespace regatta::cli::report {

struct NormWitness {
  double estimate = 0;         ///< ESTIMATE: ‖J v‖_F for the final unit v (≤ ‖J‖₂ up to rounding)
  double certified_lower = 0;  ///< CERTIFIED lower bound on ‖J‖₂ (NaN when not certified)
  Matrix<double> direction;    ///< the unit witness v
};

/// Power iteration v ← JᵀJv/‖·‖ (Linearization<double>, one JVP and one VJP per step) from a seeded start, at
/// most `iterations` steps, relative tolerance 1e-10. With `certify`, the witness (X, v) is re-evaluated in
/// interval arithmetic at 128 bits by lip::certify_witness (tokens checked to lie in B_radius when a radius
/// is given).
NormWitness jacobian_norm_two(const operators::AttentionLayer& layer,
                              const operators::AttentionOptions& options, const Matrix<double>& X,
                              int iterations, bool certify, std::uint64_t seed,
                              std::optional<double> radius = {});

}  // namespace regatta::cli::report
