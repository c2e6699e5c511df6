#pragma once
// Seeded sampling from discrete and standard continuous measures, and the lifted (token, time) measure of
// causal attention (docs/math/attention.md#lifted-causal).
//
// Portability: every sampler is deterministic in (its arguments, seed) across platforms. Uniforms are
// (mt19937_64() >> 11) · 2^-53 ∈ [0, 1) and normals come from core's portable Box–Muller
// (regatta::standard_normal); no std::*_distribution (implementation-defined) is used. Samples are the rows
// of the returned n × d matrix. Bad input (n < 0, d < 1, σ or R not finite and > 0, NaN/Inf means) throws
// InputError naming the argument.
#include <cstdint>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/measures/discrete_measure.hpp>

namespace regatta::measures {

/// n i.i.d. indices from the weights of mu by inversion of the cumulative weights (binary search,
/// O(log size) each). Atoms of weight 0 are never drawn.
std::vector<Eigen::Index> sample_indices(const DiscreteMeasure<double>& mu, Eigen::Index n,
                                         std::uint64_t seed);

/// n i.i.d. atoms of mu (rows of mu.atoms() at sample_indices(mu, n, seed)).
Matrix<double> sample(const DiscreteMeasure<double>& mu, Eigen::Index n, std::uint64_t seed);

/// n samples of N(mean, σ² I_d), d = mean.size().
Matrix<double> sample_gaussian(const Vector<double>& mean, double sigma, Eigen::Index n, std::uint64_t seed);

/// n samples of the uniform measure on the closed ball B_R ⊂ R^d: x = R U^{1/d} z/‖z‖, z standard normal,
/// U uniform on [0, 1). Moments: E x = 0, E xxᵀ = R² I/(d + 2), E‖x‖ = R d/(d + 1).
Matrix<double> sample_ball(Eigen::Index d, double radius, Eigen::Index n, std::uint64_t seed);

/// n samples of the uniform measure on the sphere S^{d−1}(R) = {‖x‖ = R}: x = R z/‖z‖ (‖x‖ = R up to a few
/// ulps). Moments: E x = 0, E xxᵀ = R² I/d. d ≥ 1 (for d = 1 the two points ±R).
Matrix<double> sample_sphere(Eigen::Index d, double radius, Eigen::Index n, std::uint64_t seed);

/// The lifted empirical measure of a token sequence for causal attention
///     (docs/math/attention.md#lifted-causal):
///     mu_X = (1/n) Σ_{i=1..n} δ_{(x_i, i/n)} on R^d × (0, 1],
/// i.e. the n × (d + 1) atoms [X | s] with s_i = i/n for the 1-based position i (row r of X gets (r + 1)/n),
/// uniform weights. Key j is visible to query i iff s_j ≤ s_i iff j ≤ i. X: n × d, n ≥ 1, finite.
DiscreteMeasure<double> lift_causal(const Matrix<double>& tokens);

}  // namespace regatta::measures
