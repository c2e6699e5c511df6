#pragma once
// Seeded random test matrices (double), shared by the CLI, tests and benchmarks.
//
// Every family is deterministic in (rows, cols, parameters, seed) across platforms: entries come from
// std::mt19937_64 through a Box–Muller transform written here (std::normal_distribution is
// implementation-defined).
#include <cstdint>
#include <string>

#include <regatta/core/eigen.hpp>

namespace regatta {

enum class RandomMatrixKind {
  gaussian,        ///< i.i.d. N(0, 1) entries
  low_rank,        ///< G1 G2 with G1: rows x rank, G2: rank x cols Gaussian (rank-deficient when rank < min)
  ill_conditioned  ///< U diag(s) V^T, U and V orthonormal (QR of Gaussians), s log-spaced from 1 to
                   ///< 1/condition
};

struct RandomMatrixSpec {
  Eigen::Index rows = 8;
  Eigen::Index cols = 8;
  RandomMatrixKind kind = RandomMatrixKind::gaussian;
  Eigen::Index rank = 1;    ///< low_rank only
  double condition = 1e12;  ///< ill_conditioned only (>= 1)
  std::uint64_t seed = 0;
};

/// The matrix described by spec. Asserts rows, cols >= 0 (user-facing callers validate first).
Matrix<double> random_matrix(const RandomMatrixSpec& spec);

/// n standard normal samples from the seeded generator (portable Box–Muller).
Vector<double> standard_normal(Eigen::Index n, std::uint64_t seed);

std::string to_string(RandomMatrixKind kind);

}  // namespace regatta
