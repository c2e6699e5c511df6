// The interval64 paths by midpoint–radius products (operators/lipschitz/fast_jvp.hpp, and the dense
// Jacobian of structured_rows.hpp at a point), each against an independent computation:
// * jacobian_jvp_fast: the JVP of the generic Block<interval> at 256 bits (MPFI). Every entry must contain
//   the MPFI-256 enclosure (both enclose the exact value, MPFI's is ~2^-200 narrow), on random layers with
//   biases, masks, residual, pre-norm and d_v ≠ d_h.
// * block_dense_jacobian<interval64>: the structured rows evaluated in MPFI at 256 bits, the same
//   containment (also l2 and RoPE, which keep the scalar rows or the generic block).
// * the certified lower bound: σ_max of torch.autograd.functional.jacobian's float64 Jacobian
//   (tests/data/torch, generate.py) must lie above the certified lower end at the Lanczos witness and close
//   to it; ‖J w‖/‖w‖ recomputed in MPFI-256 (jacobian_ratio_enclosure) for the same w must lie inside it.
#include <gtest/gtest.h>
#include <mpfr.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/fast_jvp.hpp>
#include <regatta/operators/lipschitz/local.hpp>
#include "support/random_layers.hpp"
#include "support/tolerance.hpp"

namespace regatta::lip {
namespace {

using Eigen::Index;
using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Block;
using operators::Prenorm;

/// Largest interval64 width accepted, relative to max(1, the largest entry): each entry is a chain of ≲ a
/// few hundred dependent operations here (projections of width d ≤ 12, a softmax over ≤ 7 keys, a pre-norm,
/// the head sums), each adding at most a few ulps (2^-52 relative) through the midpoint–radius bound and
/// the softmax and normalisation Jacobians (entries O(10)); 2^-30 leaves a factor 10^3 above that and
/// still fails an enclosure that has lost its meaning.
const double kWidthLimit = std::ldexp(1.0, -30);

Matrix<double> gaussian(Index rows, Index cols, std::uint64_t seed, double scale = 1.0) {
  const Vector<double> z = standard_normal(rows * cols, seed);
  return scale * Eigen::Map<const Matrix<double>>(z.data(), rows, cols);
}

double down(const mpfr& x) { return mpfr_get_d(x.backend().data(), MPFR_RNDD); }
double up(const mpfr& x) { return mpfr_get_d(x.backend().data(), MPFR_RNDU); }

/// Every entry of `fast` contains the MPFI entry of `ref` (rounded outward to binary64), and is narrow.
void expect_encloses(const Matrix<interval64>& fast, const Matrix<interval>& ref, const std::string& what) {
  ASSERT_EQ(fast.rows(), ref.rows()) << what;
  ASSERT_EQ(fast.cols(), ref.cols()) << what;
  double scale = 1, width = 0;
  for (Index i = 0; i < ref.rows(); ++i)
    for (Index j = 0; j < ref.cols(); ++j) {
      const double lo = down(lower_bound(ref(i, j))), hi = up(upper_bound(ref(i, j)));
      ASSERT_LE(fast(i, j).lower(), lo) << what << " (" << i << ", " << j << ")";
      ASSERT_GE(fast(i, j).upper(), hi) << what << " (" << i << ", " << j << ")";
      scale = std::max({scale, std::fabs(lo), std::fabs(hi)});
      width = std::max(width, fast(i, j).upper() - fast(i, j).lower());
    }
  EXPECT_LE(width, kWidthLimit * scale) << what << ": widest entry " << width;
}

struct Config {
  std::string name;
  AttentionKind kind = AttentionKind::dot;
  int d = 8, heads = 2, value_dim = 0;
  bool biases = false, causal = false, residual = false;
  Prenorm prenorm = Prenorm::none;
  Index n = 5;
};

std::vector<Config> configs() {
  std::vector<Config> c(7);
  c[0].name = "plain";
  c[1] = {"biases causal residual", AttentionKind::dot, 12, 3, 0, true, true, true};
  c[2] = {"layernorm", AttentionKind::dot, 8, 2, 0, true, false, true, Prenorm::layernorm};
  c[3] = {"rmsnorm causal", AttentionKind::dot, 8, 4, 0, false, true, false, Prenorm::rmsnorm};
  c[4] = {"value dim 3", AttentionKind::dot, 8, 2, 3, true, false, false};
  c[5] = {"l2", AttentionKind::l2, 8, 2, 0, true, true, true};  // dense Jacobian only (no fast JVP)
  c[6] = {"one token", AttentionKind::dot, 6, 2, 0, true, true, true, Prenorm::layernorm, 1};
  return c;
}

AttentionLayer layer_for(const Config& c, std::uint64_t seed) {
  operators::RandomLayerSpec spec;
  spec.d = c.d;
  spec.heads = c.heads;
  spec.value_dim = c.value_dim;
  spec.kind = c.kind;
  spec.biases = c.biases;
  spec.scale = 2.0;  // sharper softmax rows than the default
  spec.seed = seed;
  AttentionLayer layer = operators::random_layer(spec);
  if (c.prenorm != Prenorm::none) testing::draw_norm_weights(layer, seed);
  return layer;
}

AttentionOptions options_for(const Config& c) {
  AttentionOptions o;
  o.causal = c.causal;
  o.residual = c.residual;
  o.prenorm = c.prenorm;
  return o;
}

TEST(FastJvp, EnclosesTheMpfi256Jvp) {
  const PrecisionGuard guard(256);
  int compared = 0;
  for (const Config& c : configs()) {
    SCOPED_TRACE(c.name);
    const AttentionLayer layer = layer_for(c, 11);
    const AttentionOptions o = options_for(c);
    if (fast_jvp_refusal(layer, o)) continue;
    const Matrix<double> X = gaussian(c.n, c.d, 3, 1.5), W = gaussian(c.n, c.d, 4);
    const Matrix<interval> ref =
        Block<interval>(layer, o).linearize(matrix_cast<interval>(X)).jvp(matrix_cast<interval>(W));
    expect_encloses(jacobian_jvp_fast(layer, o, X, W), ref, c.name + " JVP");
    ++compared;
  }
  EXPECT_GE(compared, 6);
}

TEST(FastJvp, DenseJacobianByProductsEnclosesTheMpfi256Rows) {
  const PrecisionGuard guard(256);
  for (const Config& c : configs()) {
    SCOPED_TRACE(c.name);
    const AttentionLayer layer = layer_for(c, 21);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(c.n, c.d, 5, 1.5);
    expect_encloses(block_dense_jacobian<interval64>(layer, o, X),
                    block_dense_jacobian<interval>(layer, o, X), c.name + " dense Jacobian");
  }
}

/// With RoPE the point path keeps the scalar rows (products_apply is false) on top of midpoint–radius
/// precomputations: the same containment, and the fast JVP refuses the layer.
TEST(FastJvp, DenseJacobianWithRotaryEnclosesTheMpfi256Rows) {
  const PrecisionGuard guard(256);
  Config c;
  c.biases = c.causal = true;
  AttentionLayer layer = layer_for(c, 41);
  layer.rotary = operators::Rotary{5.0};
  const AttentionOptions o = options_for(c);
  const Matrix<double> X = gaussian(c.n, c.d, 7, 1.5);
  expect_encloses(block_dense_jacobian<interval64>(layer, o, X), block_dense_jacobian<interval>(layer, o, X),
                  "rotary dense Jacobian");
  EXPECT_TRUE(fast_jvp_refusal(layer, o).has_value());
}

TEST(FastJvp, RefusalsAndBadInput) {
  Config c;
  AttentionLayer layer = layer_for(c, 1);
  AttentionOptions o = options_for(c);
  const Matrix<double> X = gaussian(3, c.d, 1), W = gaussian(3, c.d, 2);
  EXPECT_FALSE(fast_jvp_refusal(layer, o).has_value());
  EXPECT_THROW(jacobian_jvp_fast(layer, o, X, gaussian(2, c.d, 2)), InputError);  // wrong tangent shape
  EXPECT_THROW(jacobian_ratio_fast(layer, o, X, Matrix<double>::Zero(3, c.d)), InputError);  // w = 0
  Matrix<double> bad = X;
  bad(1, 1) = std::nan("");
  EXPECT_THROW(jacobian_jvp_fast(layer, o, bad, W), InputError);
  o.sinkhorn_iterations = 3;
  EXPECT_TRUE(fast_jvp_refusal(layer, o).has_value());
  EXPECT_THROW(jacobian_jvp_fast(layer, o, X, W), InputError);
  c.kind = AttentionKind::l2;
  EXPECT_TRUE(fast_jvp_refusal(layer_for(c, 1), options_for(c)).has_value());
}

/// local_jacobian_norms takes the fast JVP where it applies, and the generic interval64 block elsewhere; the
/// two enclose the same ratio, and ‖J‖∞ can be left out (not together with certify).
TEST(FastJvp, LocalNormsTakeTheFastJvpWhereItApplies) {
  Config c;
  c.biases = c.residual = true;
  const AttentionLayer layer = layer_for(c, 31);
  const AttentionOptions o = options_for(c);
  const Matrix<double> X = gaussian(4, c.d, 6);
  LocalNormOptions local;
  local.inf_norm = false;
  const LocalNormReport r = local_jacobian_norms(layer, o, X, local);
  EXPECT_EQ(r.two_lower_jvp, "midpoint-radius products");
  EXPECT_FALSE(r.has_inf);
  ASSERT_TRUE(r.has_two_lower);
  const Matrix<interval64> w = r.two.witness.cast<interval64>();
  const auto norm = [](const Matrix<interval64>& M) {
    interval64 sum(0);
    for (Index k = 0; k < M.size(); ++k) sum += square(M.data()[k]);
    return sqrt(sum);
  };
  const interval64 generic =
      norm(Block<interval64>(layer, o).linearize(Matrix<interval64>(X.cast<interval64>())).jvp(w)) / norm(w);
  EXPECT_LE(r.two_lower, generic.upper());  // both enclose ‖J w‖/‖w‖
  EXPECT_GE(r.two_lower, generic.lower() - kWidthLimit * generic.upper());
  EXPECT_LE(r.two_lower, r.two.estimate * (1 + kWidthLimit));
  local.certify = true;
  EXPECT_THROW(local_jacobian_norms(layer, o, X, local), InputError);
  c.kind = AttentionKind::l2;
  const LocalNormReport l2 = local_jacobian_norms(layer_for(c, 31), options_for(c), X, LocalNormOptions{});
  EXPECT_EQ(l2.two_lower_jvp, "generic block");
  EXPECT_TRUE(l2.has_inf);
}

// ---- the certified lower bound against PyTorch autograd and MPFI ----

struct TorchCase {
  std::string name;
  std::map<std::string, io::Array> arrays;
  AttentionLayer layer;
  AttentionOptions options;
  bool cross = false;
  double scalar(const std::string& key) const { return arrays.at(key).data.at(0); }
};

/// The self-attention cases of tests/data/torch (format in its README.md).
std::vector<TorchCase> torch_cases() {
  const std::filesystem::path dir = std::filesystem::path(REGATTA_TEST_DATA_DIR) / "torch";
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().extension() == ".npz") paths.push_back(entry.path());
  std::sort(paths.begin(), paths.end());
  std::vector<TorchCase> cases;
  for (const auto& p : paths) {
    TorchCase c;
    c.name = p.stem().string();
    c.arrays = io::read_npz(p);
    if (c.scalar("cross") != 0) continue;
    const AttentionKind kind = c.scalar("kind") == 1.0 ? AttentionKind::l2 : AttentionKind::dot;
    std::string prefix;
    for (double code : c.arrays.at("layer_prefix").data) prefix.push_back(char(int(code)));
    c.layer =  // the references (the llama-named one too) have no rotary embeddings
        operators::load_layer(p, int(c.scalar("heads")), kind, prefix, operators::OutputProjection::from_file,
                              operators::RotaryStatement::none());
    c.options.causal = c.scalar("causal") != 0;
    c.options.residual = c.scalar("residual") != 0;
    const double prenorm = c.scalar("prenorm");
    c.options.prenorm = prenorm == 1.0   ? Prenorm::layernorm
                        : prenorm == 2.0 ? Prenorm::rmsnorm
                                         : Prenorm::none;
    if (c.options.prenorm != Prenorm::none) {
      c.layer.norm_gamma = c.arrays.at("norm.weight").vector();
      if (c.arrays.count("norm.bias")) c.layer.norm_beta = c.arrays.at("norm.bias").vector();
      c.layer.norm_eps = c.scalar("norm_eps");
    }
    c.options.sinkhorn_iterations = int(c.scalar("sinkhorn_iterations"));
    cases.push_back(std::move(c));
  }
  return cases;
}

TEST(FastJvp, CertifiedLowerBoundAgainstTorchAutogradAndMpfi) {
  const PrecisionGuard guard(256);
  SpectralOptions lanczos;
  lanczos.relative_tolerance = 1e-13;
  // Lanczos stops when its residual is below τ·θ: the witness's ratio is within about τ of σ_max (2τ for
  // the rounding of the residual, local_test's lanczos_error); torch's float64 Jacobian and σ_max by
  // JacobiSVD carry rounding of a chain of ≲ 512 operations (c = 4: two sides, and the softmax's and the
  // SVD's cancellations), as in torch_reference_test.
  const double close = 2 * lanczos.relative_tolerance + testing::rounding_bound<double>(4, 512);
  int compared = 0;
  double worst = 0;
  for (const TorchCase& c : torch_cases()) {
    SCOPED_TRACE(c.name);
    if (fast_jvp_refusal(c.layer, c.options)) continue;
    const Matrix<double> X = c.arrays.at("input").matrix();
    const Matrix<double> J = c.arrays.at("jacobian").matrix();
    const double sigma = largest_singular_value(J);
    const Block<double> block(c.layer, c.options);
    const Matrix<double> w = jacobian_norm_2(block.linearize(X), lanczos).witness;
    const interval64 ratio = jacobian_ratio_fast(c.layer, c.options, X, w);
    const double lower = ratio.lower();
    EXPECT_LE(lower, sigma * (1 + close)) << "certified lower end above torch's sigma_max";
    EXPECT_GE(lower, sigma * (1 - close)) << "certified lower end far below torch's sigma_max";
    worst = std::max(worst, std::abs(lower - sigma) / sigma);
    // The same ratio for the same w in MPFI at 256 bits lies inside the interval64 enclosure.
    const interval ref =
        jacobian_ratio_enclosure(Block<interval>(c.layer, c.options).linearize(matrix_cast<interval>(X)), w);
    EXPECT_LE(lower, down(lower_bound(ref)));
    EXPECT_GE(ratio.upper(), up(upper_bound(ref)));
    EXPECT_LE(ratio.upper() - lower, kWidthLimit * std::max(1.0, sigma));
    ++compared;
  }
  EXPECT_GE(compared, 12);
  std::cout << "[ torch    ] " << compared
            << " certified lower bounds (interval64, midpoint-radius JVP); largest relative distance to "
               "torch's sigma_max "
            << worst << "\n";
}

}  // namespace
}  // namespace regatta::lip
