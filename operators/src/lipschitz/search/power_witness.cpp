// ‖J(X)‖₂ by power iteration, certified through certify_witness (see power_witness.hpp).
#include <regatta/operators/lipschitz/power_witness.hpp>

#include <limits>
#include <random>

#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/lipschitz/bracket.hpp>

#include "jacobian_probe.hpp"

namespace regatta::lip {

PowerWitness power_witness(const operators::AttentionLayer& layer, const operators::AttentionOptions& options,
                           const Matrix<double>& X, int iterations, bool certify, std::uint64_t seed,
                           std::optional<double> radius) {
  const operators::Block<double> block(layer, options);
  const operators::Linearization<double> lin = block.linearize(X);
  std::mt19937_64 rng(seed);
  Matrix<double> start(X.rows(), X.cols());
  for (Eigen::Index k = 0; k < start.size(); ++k) start.data()[k] = double(rng() >> 11) * 0x1p-53 * 2.0 - 1.0;
  const detail::Probe probe = detail::power_probe(lin, start, iterations, power_witness_tolerance);
  PowerWitness w;
  w.estimate = probe.value;
  w.direction = probe.direction;
  w.certified_lower = std::numeric_limits<double>::quiet_NaN();
  if (certify) {
    JacobianWitness witness;
    witness.input = X;
    witness.direction = w.direction;
    witness.value = w.estimate;
    witness.origin = "power iteration";
    const WitnessCertificate c = certify_witness(layer, options, witness, Norm::two, radius, 128);
    if (c.lower) w.certified_lower = *c.lower;
  }
  return w;
}

}  // namespace regatta::lip
