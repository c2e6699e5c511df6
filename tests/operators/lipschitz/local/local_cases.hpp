#pragma once
// The shared part of the local-norm tests (local_test.cpp, local_havens_test.cpp): random matrices, dense
// reference norms, the rounding tolerances of docs/math/README.md#checking, and the layer configurations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <regatta/core/convert.hpp>
#include <regatta/core/dense_svd.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/local.hpp>
#include "support/random_layers.hpp"
#include "support/tolerance.hpp"

namespace regatta::lip::local_test {

using Eigen::Index;
using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Block;
using operators::Linearization;
using operators::Prenorm;

inline Matrix<double> gaussian(Index rows, Index cols, std::uint64_t seed, double scale = 1.0) {
  const Vector<double> z = standard_normal(rows * cols, seed);
  return scale * Eigen::Map<const Matrix<double>>(z.data(), rows, cols);
}

inline double sigma_max(const Matrix<double>& M) {
  if (M.size() == 0) return 0;
  return largest_singular_value(M);
}
inline double max_row_sum(const Matrix<double>& M) { return M.cwiseAbs().rowwise().sum().maxCoeff(); }
inline double max_col_sum(const Matrix<double>& M) { return M.cwiseAbs().colwise().sum().maxCoeff(); }

// ---- tolerances (docs/math/README.md#checking) ----

/// The longest chain of rounded double operations behind a quantity of J(X) for n tokens of width d: one JVP
/// or VJP through the block (projections of width d, scores, a softmax over n keys: n·d + d² + n per Sinkhorn
/// sweep) followed by a sum over the n·d entries of a row, a column or a witness (2·n·d with the products).
inline double jacobian_chain(Index n, Index d, int sweeps = 1) {
  return double(sweeps) * double(n * d + d * d + n) + double(2 * n * d);
}

/// Two double computations of a quantity of J(X) (an entry, ‖J‖∞, ‖J‖₁, ‖J w‖, σ_max by JacobiSVD) round
/// independently along jacobian_chain. c = 4: 2 for the two sides, 2 for the condition of the softmax's
/// cancelling sums and of JacobiSVD's rotations.
inline double jacobian_rounding(Index n, Index d, int sweeps = 1) {
  return testing::rounding_bound<double>(4, jacobian_chain(n, d, sweeps));
}

/// Relative error of a converged Lanczos estimate of σ_max with SpectralOptions::relative_tolerance τ: the
/// stopping rule bounds it by about τ (matrix_free.hpp); 2τ leaves room for the rounding of the residual.
inline double lanczos_error(double tau) { return 2 * tau; }

struct Config {
  std::string name;
  AttentionKind kind = AttentionKind::dot;
  int d = 6, heads = 2, head_dim = 0;
  bool biases = false, causal = false, residual = false;
  Prenorm prenorm = Prenorm::none;
  int sinkhorn = 1;
  double scale = 1.0;
  Index n = 5;
  double rope_theta = 0;  ///< > 0: rotary position embeddings with this base
};

inline std::vector<Config> configs() {
  std::vector<Config> c;
  c.push_back({"dot"});
  c.push_back({"dot_biases_causal_residual", AttentionKind::dot, 6, 2, 0, true, true, true});
  c.push_back(
      {"dot_one_head_wide", AttentionKind::dot, 4, 1, 3, true, false, false, Prenorm::none, 1, 2.0, 7});
  c.push_back({"l2", AttentionKind::l2, 6, 3, 2});
  c.push_back({"l2_causal_residual_biases", AttentionKind::l2, 4, 2, 0, true, true, true});
  c.push_back({"dot_layernorm", AttentionKind::dot, 5, 1, 3, true, false, true, Prenorm::layernorm});
  c.push_back({"l2_rmsnorm", AttentionKind::l2, 6, 2, 0, false, false, true, Prenorm::rmsnorm});
  c.push_back({"dot_sinkhorn3", AttentionKind::dot, 4, 2, 0, false, false, false, Prenorm::none, 3});
  c.push_back({"dot_large_scale", AttentionKind::dot, 4, 2, 0, false, false, false, Prenorm::none, 1, 3.0});
  c.push_back({"dot_rope_biases_causal_rmsnorm", AttentionKind::dot, 6, 2, 4, true, true, true,
               Prenorm::rmsnorm, 1, 1.0, 5, 7.5});
  return c;
}

inline AttentionLayer layer_for(const Config& c, std::uint64_t seed) {
  operators::RandomLayerSpec s;
  s.d = c.d;
  s.heads = c.heads;
  s.head_dim = c.head_dim;
  s.kind = c.kind;
  s.biases = c.biases;
  s.seed = seed;
  s.scale = c.scale;
  AttentionLayer L = operators::random_layer(s);
  if (c.prenorm != Prenorm::none) testing::draw_norm_weights(L, seed);
  if (c.rope_theta > 0) L.rotary = operators::Rotary{c.rope_theta};
  return L;
}

inline AttentionOptions options_for(const Config& c) {
  AttentionOptions o;
  o.causal = c.causal;
  o.residual = c.residual;
  o.prenorm = c.prenorm;
  o.sinkhorn_iterations = c.sinkhorn;
  return o;
}

/// The dense Jacobian at 256 bits (the engine's JVP columns in mpfr): a reference for the certified values.
inline Matrix<mpfr> mpfr_jacobian(const AttentionLayer& L, const AttentionOptions& o,
                                  const Matrix<double>& X) {
  const Block<mpfr> block(L, o);
  return operators::dense_jacobian(block.linearize(matrix_cast<mpfr>(X)));
}

inline mpfr mpfr_max_row_sum(const Matrix<mpfr>& J) {
  mpfr best(0);
  for (Index r = 0; r < J.rows(); ++r) {
    mpfr s(0);
    for (Index c = 0; c < J.cols(); ++c) s += abs(J(r, c));
    best = std::max(best, s);
  }
  return best;
}

}  // namespace regatta::lip::local_test
