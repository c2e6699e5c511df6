// attend / attend_cross against PyTorch on the same weights. The reference outputs in tests/data/torch were
// computed by tests/data/torch/generate.py (Debian's python3-torch, float64): nn.MultiheadAttention for dot
// attention, and torch implementations written from docs/math/attention.md for tied L2 attention,
// Sinkhorn attention and pre-norm blocks (the file format is described in tests/data/torch/README.md).
// Each file is read with load_layer under its PyTorch / Hugging Face names, so the weight mapping of
// docs/math/README.md#pytorch-conventions is tested along with the forward pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/local.hpp>
#include <set>
#include <string>
#include <vector>

#include "support/tolerance.hpp"

namespace regatta::operators {
namespace {

/// The longest chain of rounded operations behind one output entry: projections of width d ≤ 12, the scores,
/// a softmax or up to 7 Sinkhorn half-steps over ≤ 6 keys, a pre-norm over d, the per-head sums and the
/// output projection: ≲ 512.
constexpr double kForwardChain = 512;
/// ‖ours − torch‖_F ≤ kRelativeTolerance·‖torch‖_F: two double evaluations of that chain in different
/// orders, c = 2. A wrong mapping gives O(1) errors.
const double kRelativeTolerance = testing::rounding_bound<double>(2, kForwardChain);
/// The same for Jacobian entries: a JVP runs the chain and its derivative, doubling its length.
const double kJacobianRelativeTolerance = testing::rounding_bound<double>(2, 2 * kForwardChain);

const std::filesystem::path& data_dir() {
  static const std::filesystem::path dir = std::filesystem::path(REGATTA_TEST_DATA_DIR) / "torch";
  return dir;
}

/// One reference file with its metadata decoded (the members are listed in tests/data/torch/README.md).
struct TorchCase {
  std::string name;
  std::filesystem::path path;
  std::map<std::string, io::Array> arrays;
  int heads = 0;
  AttentionKind kind = AttentionKind::dot;
  AttentionOptions options;
  bool cross = false;
  std::string prefix;

  const io::Array& member(const std::string& key) const {
    const auto it = arrays.find(key);
    if (it == arrays.end()) throw InputError(path.string() + ":" + key, "missing member");
    return it->second;
  }
  /// A 0-d float64 member holding metadata.
  double scalar(const std::string& key) const {
    const io::Array& a = member(key);
    if (!a.shape.empty()) throw InputError(a.source, "expected a 0-d array");
    return a.data[0];
  }
  bool flag(const std::string& key) const { return scalar(key) != 0.0; }
  bool has(const std::string& key) const { return arrays.count(key) != 0; }
};

TorchCase read_case(const std::filesystem::path& path) {
  TorchCase c;
  c.path = path;
  c.name = path.stem().string();
  c.arrays = io::read_npz(path);
  c.heads = int(c.scalar("heads"));
  c.kind = c.scalar("kind") == 1.0 ? AttentionKind::l2 : AttentionKind::dot;
  c.options.causal = c.flag("causal");
  c.options.residual = c.flag("residual");
  const double prenorm = c.scalar("prenorm");
  c.options.prenorm = prenorm == 1.0 ? Prenorm::layernorm : prenorm == 2.0 ? Prenorm::rmsnorm : Prenorm::none;
  c.options.sinkhorn_iterations = int(c.scalar("sinkhorn_iterations"));
  c.cross = c.flag("cross");
  for (double code : c.member("layer_prefix").data) c.prefix.push_back(char(int(code)));
  return c;
}

/// Every .npz in tests/data/torch, sorted by name.
std::vector<TorchCase> all_cases() {
  std::vector<std::filesystem::path> paths;
  for (const auto& entry : std::filesystem::directory_iterator(data_dir()))
    if (entry.path().extension() == ".npz") paths.push_back(entry.path());
  std::sort(paths.begin(), paths.end());
  std::vector<TorchCase> cases;
  for (const auto& p : paths) cases.push_back(read_case(p));
  return cases;
}

bool needs_prenorm_or_sinkhorn(const TorchCase& c) {
  return c.options.prenorm != Prenorm::none || c.options.sinkhorn_iterations != 1;
}

/// The file's layer, with the pre-norm parameters when the case has a pre-norm.
AttentionLayer case_layer(const TorchCase& c) {
  // generate.py's references (the llama-named case too) are attention without rotary embeddings.
  AttentionLayer layer =
      load_layer(c.path, c.heads, c.kind, c.prefix, OutputProjection::from_file, RotaryStatement::none());
  if (c.options.prenorm != Prenorm::none) {
    layer.norm_gamma = c.member("norm.weight").vector();
    if (c.has("norm.bias")) layer.norm_beta = c.member("norm.bias").vector();
    layer.norm_eps = c.scalar("norm_eps");
  }
  return layer;
}

/// Our streamed forward pass on the file's layer, inputs and options.
Matrix<double> our_output(const TorchCase& c) {
  const AttentionLayer layer = case_layer(c);
  const Matrix<double> X = c.member("input").matrix();
  return c.cross ? attend_cross(layer, X, c.member("context").matrix(), c.options)
                 : attend(layer, X, c.options);
}

/// Compares our output with torch's for every case and prints the largest relative Frobenius error seen.
void compare_all(const std::vector<TorchCase>& cases) {
  double worst = 0.0;
  std::string worst_name;
  for (const TorchCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Matrix<double> reference = c.member("output").matrix();
    Matrix<double> ours;
    try {
      ours = our_output(c);
    } catch (const InputError& e) {
      ADD_FAILURE() << c.name << ": attend threw: " << e.what();
      continue;
    }
    if (ours.rows() != reference.rows() || ours.cols() != reference.cols()) {
      ADD_FAILURE() << c.name << ": output is " << ours.rows() << "x" << ours.cols() << ", torch's is "
                    << reference.rows() << "x" << reference.cols();
      continue;
    }
    const double relative = (ours - reference).norm() / reference.norm();
    const double max_abs = (ours - reference).cwiseAbs().maxCoeff();
    EXPECT_LE(relative, kRelativeTolerance)
        << c.name << ": relative Frobenius error " << relative << ", max entrywise error " << max_abs
        << " (output entries up to " << reference.cwiseAbs().maxCoeff() << ")";
    if (relative >= worst) {
      worst = relative;
      worst_name = c.name;
    }
  }
  std::cout << "[ torch    ] " << cases.size() << " cases, largest relative Frobenius error " << worst << " ("
            << worst_name << ")\n";
}

TEST(TorchReference, ForwardMatchesTorchForDotL2CausalCrossBiasesAndNamings) {
  std::vector<TorchCase> cases;
  for (TorchCase& c : all_cases())
    if (!needs_prenorm_or_sinkhorn(c)) cases.push_back(std::move(c));

  // The data must cover what this test claims (a truncated data directory fails here, not silently).
  std::set<int> heads, dims;
  int l2 = 0, cross = 0, causal = 0, residual = 0, biased = 0, unbiased = 0, prefixed = 0, separate = 0;
  for (const TorchCase& c : cases) {
    heads.insert(c.heads);
    dims.insert(int(c.member("input").shape.at(1)));
    l2 += c.kind == AttentionKind::l2;
    cross += c.cross;
    causal += c.options.causal;
    residual += c.options.residual;
    (c.flag("bias") ? biased : unbiased) += 1;
    prefixed += !c.prefix.empty();
    separate += c.has("q_proj_weight");
  }
  EXPECT_GE(cases.size(), 15u);
  EXPECT_EQ(heads, (std::set<int>{1, 2, 3, 4}));
  EXPECT_EQ(dims, (std::set<int>{4, 8, 12}));
  EXPECT_GE(l2, 3);
  EXPECT_GE(cross, 3);
  EXPECT_GE(causal, 4);
  EXPECT_GE(residual, 3);
  EXPECT_GE(biased, 3);
  EXPECT_GE(unbiased, 3);
  EXPECT_GE(prefixed, 2);
  EXPECT_GE(separate, 1);

  compare_all(cases);
}

// Pre-norm (LayerNorm, RMSNorm; γ, β, ε from the file) and Sinkhorn attention with t > 1 half-steps.
TEST(TorchReference, PrenormAndSinkhornForward) {
  std::vector<TorchCase> cases;
  int layernorm = 0, rmsnorm = 0, sinkhorn = 0;
  for (TorchCase& c : all_cases()) {
    if (!needs_prenorm_or_sinkhorn(c)) continue;
    layernorm += c.options.prenorm == Prenorm::layernorm;
    rmsnorm += c.options.prenorm == Prenorm::rmsnorm;
    sinkhorn += c.options.sinkhorn_iterations > 1;
    cases.push_back(std::move(c));
  }
  EXPECT_GE(layernorm, 3);
  EXPECT_GE(rmsnorm, 3);
  EXPECT_GE(sinkhorn, 3);

  compare_all(cases);
}

/// The dense Jacobians of the generic blocks (differentiable.hpp, assembled from JVPs) against
/// torch.autograd.functional.jacobian on every case — an independent derivative (reverse-mode autograd
/// through torch's own softmax, layer norm and, for dot attention, nn.MultiheadAttention). Also the
/// materialised forward pass of the block against torch's output.
TEST(TorchReference, DenseJacobiansMatchTorchAutograd) {
  double worst = 0.0;
  std::string worst_name;
  int compared = 0;
  for (const TorchCase& c : all_cases()) {
    SCOPED_TRACE(c.name);
    const Block<double> block(case_layer(c), c.options);
    const Matrix<double> X = c.member("input").matrix();
    const auto check = [&](const Matrix<double>& ours, const std::string& key) {
      const Matrix<double> reference = c.member(key).matrix();
      ASSERT_EQ(ours.rows(), reference.rows()) << key;
      ASSERT_EQ(ours.cols(), reference.cols()) << key;
      const double relative =
          (ours - reference).norm() / std::max(reference.norm(), std::numeric_limits<double>::min());
      EXPECT_LE(relative, kJacobianRelativeTolerance)
          << c.name << " " << key << ": relative Frobenius error " << relative;
      if (relative >= worst) {
        worst = relative;
        worst_name = c.name + ":" + key;
      }
      ++compared;
    };
    if (c.cross) {
      const Matrix<double> Y = c.member("context").matrix();
      const CrossLinearization<double> lin = block.linearize_cross(X, Y);
      check(lin.value(), "output");
      check(dense_jacobian_query(lin, X.rows(), X.cols()), "jacobian_query");
      check(dense_jacobian_context(lin, Y.rows(), Y.cols()), "jacobian_context");
    } else {
      const Linearization<double> lin = block.linearize(X);
      check(lin.value(), "output");
      check(dense_jacobian(lin), "jacobian");
    }
  }
  EXPECT_GE(compared, 40);
  std::cout << "[ torch    ] " << compared << " Jacobians and outputs, largest relative Frobenius error "
            << worst << " (" << worst_name << ")\n";
}

/// interval64 against MPFI at 256 bits on every case: the forward pass and the dense Jacobian of the generic
/// blocks (and, where it applies, the structured dense Jacobian that `regatta local` certifies with) must
/// contain the MPFI-256 enclosures entrywise. Both enclose the exact values; MPFI-256 is ~2^-200 narrow, so
/// containment tests interval64's soundness end to end. Widths are bounded too: relative to the largest
/// entry, at most 2^-30 — each of the ≲ 3·d + n + a few dozen dependent operations of a chain adds one
/// ulp per endpoint (2^-52 relative), amplified by the softmax and normalisation Jacobians (entries O(10)
/// here); 2^-30 leaves a factor 10^4 above that and still fails an enclosure that has lost its meaning.
TEST(TorchReference, Interval64EnclosesMpfi256ForwardAndJacobians) {
  const PrecisionGuard guard(256);
  const double width_limit = std::ldexp(1.0, -30);
  int compared = 0;
  double widest = 0;
  const auto check = [&](const Matrix<interval64>& fast, const Matrix<interval>& ref,
                         const std::string& what) {
    ASSERT_EQ(fast.rows(), ref.rows()) << what;
    ASSERT_EQ(fast.cols(), ref.cols()) << what;
    double scale = 0, width = 0;
    for (Eigen::Index i = 0; i < ref.rows(); ++i)
      for (Eigen::Index j = 0; j < ref.cols(); ++j) {
        const double lo = mpfr_get_d(lower_bound(ref(i, j)).backend().data(), MPFR_RNDD);
        const double hi = mpfr_get_d(upper_bound(ref(i, j)).backend().data(), MPFR_RNDU);
        ASSERT_LE(fast(i, j).lower(), lo) << what << " (" << i << ", " << j << ")";
        ASSERT_GE(fast(i, j).upper(), hi) << what << " (" << i << ", " << j << ")";
        scale = std::max(scale, std::max(std::fabs(lo), std::fabs(hi)));
        width = std::max(width, fast(i, j).upper() - fast(i, j).lower());
      }
    EXPECT_LE(width, width_limit * std::max(scale, 1.0)) << what << ": interval64 widths " << width;
    widest = std::max(widest, width / std::max(scale, 1.0));
    ++compared;
  };
  for (const TorchCase& c : all_cases()) {
    SCOPED_TRACE(c.name);
    const AttentionLayer layer = case_layer(c);
    const Block<interval64> fast(layer, c.options);
    const Block<interval> ref(layer, c.options);
    const Matrix<double> X = c.member("input").matrix();
    if (c.cross) {
      const Matrix<double> Y = c.member("context").matrix();
      const auto lf = fast.linearize_cross(matrix_cast<interval64>(X), matrix_cast<interval64>(Y));
      const auto lr = ref.linearize_cross(matrix_cast<interval>(X), matrix_cast<interval>(Y));
      check(lf.value(), lr.value(), c.name + " output");
      check(dense_jacobian_query(lf, X.rows(), X.cols()), dense_jacobian_query(lr, X.rows(), X.cols()),
            c.name + " jacobian_query");
      check(dense_jacobian_context(lf, Y.rows(), Y.cols()), dense_jacobian_context(lr, Y.rows(), Y.cols()),
            c.name + " jacobian_context");
    } else {
      const Linearization<interval64> lf = fast.linearize(matrix_cast<interval64>(X));
      const Linearization<interval> lr = ref.linearize(matrix_cast<interval>(X));
      check(lf.value(), lr.value(), c.name + " output");
      check(dense_jacobian(lf), dense_jacobian(lr), c.name + " jacobian");
      if (!lip::structured_rows_refusal(layer, c.options))
        check(lip::block_dense_jacobian<interval64>(layer, c.options, X),
              lip::block_dense_jacobian<interval>(layer, c.options, X), c.name + " structured jacobian");
    }
  }
  EXPECT_GE(compared, 40);
  std::cout << "[ torch    ] " << compared
            << " interval64 enclosures contain MPFI-256; widest relative width " << widest << "\n";
}

}  // namespace
}  // namespace regatta::operators
