// ‖J(X)‖₂ by power iteration, certified through lip::certify_witness (see jacobian.hpp).
#include "jacobian.hpp"

#include <cmath>
#include <limits>
#include <random>

#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/lipschitz/bracket.hpp>

namespace regatta::cli::report {

NormWitness jacobian_norm_two(const operators::AttentionLayer& layer,
                              const operators::AttentionOptions& options, const Matrix<double>& X,
                              int iterations, bool certify, std::uint64_t seed,
                              std::optional<double> radius) {
  const operators::Block<double> block(layer, options);
  const operators::Linearization<double> lin = block.linearize(X);
  std::mt19937_64 rng(seed);
  Matrix<double> v(X.rows(), X.cols());
  for (Eigen::Index k = 0; k < v.size(); ++k) v.data()[k] = double(rng() >> 11) * 0x1p-53 * 2.0 - 1.0;
  v /= v.norm();
  NormWitness w;
  double previous = 0;
  for (int k = 0; k < iterations; ++k) {
    const Matrix<double> Jv = lin.jvp(v);
    const double sigma = Jv.norm();
    if (sigma > w.estimate || w.direction.size() == 0) {
      w.estimate = sigma;
      w.direction = v;
    }
    if (!(sigma > 0) || !std::isfinite(sigma)) break;
    const Matrix<double> u = lin.vjp(Jv / sigma);
    const double nu = u.norm();
    if (!(nu > 0) || !std::isfinite(nu)) break;
    v = u / nu;
    if (k > 0 && std::abs(sigma - previous) <= 1e-10 * sigma) break;
    previous = sigma;
  }
  const double last = lin.jvp(v).norm();
  if (last > w.estimate) {
    w.estimate = last;
    w.direction = v;
  }
  w.certified_lower = std::numeric_limits<double>::quiet_NaN();
  if (certify) {
    lip::JacobianWitness witness;
    witness.input = X;
    witness.direction = w.direction;
    witness.value = w.estimate;
    witness.origin = "power iteration";
    const lip::WitnessCertificate c =
        lip::certify_witness(layer, options, witness, lip::Norm::two, radius, 128);
    if (c.lower) w.certified_lower = *c.lower;
  }
  return w;
}

}  // namespace regatta::cli::report
