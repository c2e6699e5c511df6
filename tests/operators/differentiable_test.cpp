// The generic attention blocks (differentiable.hpp), each property from two independent computations:
// forward against the streamed attend(); JVP against VJP (duality ⟨J v, u⟩ = ⟨v, Jᵀ u⟩ and the dense
// Jacobian assembled from JVP columns against the one from VJP rows); JVP against central differences in
// mpfr at 256 bits; the analytic block formulas of docs/math/jacobian.md#dot-derivatives to
// docs/math/jacobian.md#l2-tied-derivatives against the dense Jacobian;
// interval enclosures against mpfr; the InputError cases.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regatta/core/convert.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/layer.hpp>
#include <string>
#include <vector>

#include "support/tolerance.hpp"

namespace regatta::operators {
namespace {

// ---- tolerances (docs/math/README.md#checking), derived from the sizes of these tests ----

/// Rounded operations on the longest dependency chain of one entry of a block's forward pass, JVP or VJP at
/// these sizes (n <= 7 tokens, d <= 6, d_h <= 6, t <= 5 Sinkhorn steps): pre-norm 2d + 2, queries and keys d
/// each, the score d_h, t normalisation steps of n terms, the value product n and its map 2d, the heads and
/// the residual: below 100.
constexpr double block_chain = 100;
/// c = 64 for one double evaluation: a score of size up to about 9 (the large-scale configuration) carries
/// its relative error into the kernel through exp, and every exp / log / sqrt adds up to an ulp.
constexpr double block_safety = 64;
/// Two double evaluations of the same block quantity by different code paths (Block against the streamed
/// attend(), JVP columns against VJP rows, a formula against the dense Jacobian, the stack against the
/// chain rule): their errors add. About 2.8e-12.
const double two_paths = testing::rounding_bound<double>(2 * block_safety, block_chain);
/// <J v, u> = <v, J^T u>: the two paths plus the two inner products of n*d <= 42 terms each. About 5.2e-12.
const double duality = testing::rounding_bound<double>(2 * block_safety, block_chain + 2 * 42);
/// The same through a stack of three blocks (each block's chain in sequence). About 1.1e-11.
const double stack_duality = testing::rounding_bound<double>(2 * block_safety, 3 * block_chain + 2 * 42);
/// sum_j P_ij - 1 for a kernel row (or column) of n <= 6 entries, each rounded by its exp and its division (2
/// ulps) and summed (n - 1 more): 3n roundings, c = 1. About 4e-15.
const double marginal = testing::rounding_bound<double>(1, 3 * 6);
/// Sinkhorn's marginal error contracts geometrically on a positive kernel (Birkhoff-Hopf); the bound allows
/// a contraction ratio up to 0.9 per half-step of an initial error below 1/7, down to the marginal's
/// rounding: after t half-steps 0.9^t / 7 + marginal (about 1e-10 at t = 200).
constexpr double sinkhorn_contraction = 0.9;
double sinkhorn_converged(int t) { return std::pow(sinkhorn_contraction, t) / 7 + marginal; }
/// Central differences in mpfr at 256 bits with h = 2^-90: truncation h^2 |D^3 F| = 2^-180 (third
/// derivatives of order 1 at these weights) and rounding 2^-256 |F| chain / h = 2^-159; 2^9 safety on the
/// larger.
mpfr central_difference_256() { return ldexp(mpfr(1), -150); }
/// Width of an MPFI enclosure at 128 bits of a block JVP entry: the chain's rounding 2^-127 chain, times the
/// wrapping of the interval softmax, which evaluates exp(s - c) and sum exp(s - c) as independent and can
/// widen by up to the kernel's dynamic range e^(max s - min s) <= e^18 < 2^26 here; 2^4 safety: 2^30.
double interval_width_128() { return testing::rounding_bound<interval>(0x1p30, block_chain); }
/// Central differences in double with step h: truncation h^2 |D^3 F| plus rounding eps |F| / h; c = 1024 for
/// third derivatives of the untied L2 block up to about 1e3 at these weights.
double central_difference_double(double h) {
  return 1024 * (h * h + std::numeric_limits<double>::epsilon() / h);
}

Matrix<double> gaussian(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed, double scale = 1.0) {
  const Vector<double> z = standard_normal(rows * cols, seed);
  return scale * Eigen::Map<const Matrix<double>>(z.data(), rows, cols);
}

struct Config {
  std::string name;
  AttentionKind kind = AttentionKind::dot;
  int d = 6, heads = 2, head_dim = 0;
  bool biases = false, causal = false, residual = false;
  Prenorm prenorm = Prenorm::none;
  int sinkhorn = 1;
  double scale = 1.0;
  double rope_theta = 0;  ///< > 0: rotary position embeddings with this base
};

std::vector<Config> configs() {
  std::vector<Config> c;
  c.push_back({"dot"});
  c.push_back({"dot_biases_causal_residual", AttentionKind::dot, 6, 2, 0, true, true, true});
  c.push_back({"l2", AttentionKind::l2, 6, 3, 2});
  c.push_back({"l2_causal_residual_biases", AttentionKind::l2, 4, 2, 0, true, true, true});
  c.push_back({"dot_layernorm", AttentionKind::dot, 5, 1, 3, true, false, true, Prenorm::layernorm});
  c.push_back({"l2_rmsnorm", AttentionKind::l2, 6, 2, 0, false, false, true, Prenorm::rmsnorm});
  c.push_back({"dot_sinkhorn2", AttentionKind::dot, 4, 2, 0, false, false, false, Prenorm::none, 2});
  c.push_back({"dot_sinkhorn5_biases", AttentionKind::dot, 4, 1, 0, true, false, true, Prenorm::none, 5});
  c.push_back({"l2_sinkhorn3_causal", AttentionKind::l2, 4, 2, 0, false, true, false, Prenorm::none, 3});
  c.push_back({"dot_large_scale", AttentionKind::dot, 4, 2, 0, false, false, false, Prenorm::none, 1, 3.0});
  // Rotary embeddings: a small base turns every plane by a sizeable angle per position; LLaMA's 10000.
  c.push_back({"dot_rope", AttentionKind::dot, 6, 2, 4, false, false, false, Prenorm::none, 1, 1.0, 7.5});
  c.push_back({"dot_rope_biases_causal_rmsnorm", AttentionKind::dot, 6, 1, 4, true, true, true,
               Prenorm::rmsnorm, 1, 1.0, 10000});
  c.push_back(
      {"dot_rope_sinkhorn3", AttentionKind::dot, 4, 2, 2, false, false, false, Prenorm::none, 3, 1.0, 3});
  return c;
}

AttentionLayer layer_for(const Config& c, std::uint64_t seed) {
  RandomLayerSpec s;
  s.d = c.d;
  s.heads = c.heads;
  s.head_dim = c.head_dim;
  s.kind = c.kind;
  s.biases = c.biases;
  s.seed = seed;
  s.scale = c.scale;
  AttentionLayer L = random_layer(s);
  if (c.prenorm != Prenorm::none) {
    L.norm_gamma = Vector<double>::Constant(c.d, 1.0) + 0.3 * standard_normal(c.d, seed + 7);
    L.norm_beta = 0.2 * standard_normal(c.d, seed + 8);
  }
  if (c.rope_theta > 0) L.rotary = Rotary{c.rope_theta};
  return L;
}

AttentionOptions options_for(const Config& c) {
  AttentionOptions o;
  o.causal = c.causal;
  o.residual = c.residual;
  o.prenorm = c.prenorm;
  o.sinkhorn_iterations = c.sinkhorn;
  return o;
}

template <class S>
S inner(const Matrix<S>& a, const Matrix<S>& b) {
  S acc(0);
  for (Eigen::Index i = 0; i < a.rows(); ++i)
    for (Eigen::Index j = 0; j < a.cols(); ++j) acc += a(i, j) * b(i, j);
  return acc;
}

double max_abs(const Matrix<double>& m) { return m.cwiseAbs().maxCoeff(); }

class BlockConfigs : public ::testing::TestWithParam<Config> {};

TEST_P(BlockConfigs, ForwardMatchesStreamedAttendWhereItApplies) {
  const Config c = GetParam();
  if (c.prenorm != Prenorm::none || c.sinkhorn != 1) {
    // attend() gains pre-norm and Sinkhorn in the streamed path separately; compared in attention_test.
    return;
  }
  const AttentionLayer L = layer_for(c, 11);
  const Matrix<double> X = gaussian(7, c.d, 3), Y = gaussian(5, c.d, 4);
  const Block<double> block(L, options_for(c));
  const Matrix<double> ours = block.forward(X), theirs = attend(L, X, options_for(c));
  EXPECT_LE(max_abs(ours - theirs), two_paths * (1 + max_abs(theirs)));
  if (!c.causal) {
    const Matrix<double> oc = block.forward_cross(X, Y), tc = attend_cross(L, X, Y, options_for(c));
    EXPECT_LE(max_abs(oc - tc), two_paths * (1 + max_abs(tc)));
  }
}

TEST_P(BlockConfigs, JvpAndVjpAreDual) {
  const Config c = GetParam();
  const AttentionLayer L = layer_for(c, 21);
  const Block<double> block(L, options_for(c));
  const Matrix<double> X = gaussian(6, c.d, 5);
  const Linearization<double> lin = block.linearize(X);
  for (std::uint64_t k = 0; k < 4; ++k) {
    const Matrix<double> v = gaussian(6, c.d, 100 + k), u = gaussian(6, c.d, 200 + k);
    const double lhs = inner(lin.jvp(v), u), rhs = inner(v, lin.vjp(u));
    EXPECT_NEAR(lhs, rhs, duality * (1 + v.norm() * u.norm())) << c.name;
  }
  // Cross-attention, in the queries and in the context separately.
  const Matrix<double> Y = gaussian(4, c.d, 6);
  const CrossLinearization<double> cl = block.linearize_cross(X, Y);
  const Matrix<double> vx = gaussian(6, c.d, 7), vy = gaussian(4, c.d, 8), u = gaussian(6, c.d, 9);
  EXPECT_NEAR(inner(cl.jvp_query(vx), u), inner(vx, cl.vjp_query(u)), duality * (1 + u.norm() * vx.norm()));
  EXPECT_NEAR(inner(cl.jvp_context(vy), u), inner(vy, cl.vjp_context(u)),
              duality * (1 + u.norm() * vy.norm()));
}

TEST_P(BlockConfigs, DenseJacobianFromColumnsEqualsRowsFromVjp) {
  const Config c = GetParam();
  const AttentionLayer L = layer_for(c, 31);
  const Block<double> block(L, options_for(c));
  const Eigen::Index n = 5;
  const Matrix<double> X = gaussian(n, c.d, 12);
  const Linearization<double> lin = block.linearize(X);
  const Matrix<double> J = dense_jacobian(lin);
  ASSERT_EQ(J.rows(), n * c.d);
  ASSERT_EQ(J.cols(), n * c.d);
  Matrix<double> E = Matrix<double>::Zero(n, c.d);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index a = 0; a < c.d; ++a) {
      E(i, a) = 1;
      const Matrix<double> row = lin.vjp(E);
      E(i, a) = 0;
      const Eigen::Map<const Vector<double>> flat(row.data(), row.size());
      EXPECT_LE((J.row(i * c.d + a).transpose() - flat).cwiseAbs().maxCoeff(), two_paths * (1 + max_abs(J)))
          << c.name << " row " << i << "," << a;
    }
}

TEST_P(BlockConfigs, JvpMatchesCentralDifferencesAt256Bits) {
  const Config c = GetParam();
  const PrecisionGuard guard(256);
  const AttentionLayer L = layer_for(c, 41);
  const Block<mpfr> block(L, options_for(c));
  const Matrix<mpfr> X = matrix_cast<mpfr>(gaussian(4, c.d, 13));
  const Matrix<mpfr> V = matrix_cast<mpfr>(gaussian(4, c.d, 14));
  const mpfr h = ldexp(mpfr(1), -90);
  const Matrix<mpfr> fd =
      (block.forward(Matrix<mpfr>(X + h * V)) - block.forward(Matrix<mpfr>(X - h * V))) / (2 * h);
  const Matrix<mpfr> jv = block.linearize(X).jvp(V);
  mpfr err(0), size(1);
  for (Eigen::Index i = 0; i < jv.rows(); ++i)
    for (Eigen::Index a = 0; a < jv.cols(); ++a) {
      err = std::max(err, mpfr(abs(fd(i, a) - jv(i, a))));
      size = std::max(size, mpfr(abs(jv(i, a))));
    }
  EXPECT_LT(err / size, central_difference_256()) << c.name << ": " << err.str(5);
  // Cross-attention, context direction.
  const Matrix<mpfr> Y = matrix_cast<mpfr>(gaussian(3, c.d, 15)), W = matrix_cast<mpfr>(gaussian(3, c.d, 16));
  const Matrix<mpfr> fdc =
      (block.forward_cross(X, Matrix<mpfr>(Y + h * W)) - block.forward_cross(X, Matrix<mpfr>(Y - h * W))) /
      (2 * h);
  const Matrix<mpfr> jc = block.linearize_cross(X, Y).jvp_context(W);
  mpfr errc(0);
  for (Eigen::Index i = 0; i < jc.rows(); ++i)
    for (Eigen::Index a = 0; a < jc.cols(); ++a) errc = std::max(errc, mpfr(abs(fdc(i, a) - jc(i, a))));
  EXPECT_LT(errc, central_difference_256()) << c.name;
}

TEST_P(BlockConfigs, IntervalJvpAndVjpEncloseMpfr) {
  const Config c = GetParam();
  const PrecisionGuard guard(128);
  const AttentionLayer L = layer_for(c, 51);
  const Matrix<double> Xd = gaussian(4, c.d, 17), Vd = gaussian(4, c.d, 18), Ud = gaussian(4, c.d, 19);
  Matrix<mpfr> jm, vm, fm;
  {
    const PrecisionGuard high(256);
    const Block<mpfr> b(L, options_for(c));
    const Linearization<mpfr> lin = b.linearize(matrix_cast<mpfr>(Xd));
    fm = lin.value();
    jm = lin.jvp(matrix_cast<mpfr>(Vd));
    vm = lin.vjp(matrix_cast<mpfr>(Ud));
  }
  const Block<interval> b(L, options_for(c));
  const Linearization<interval> lin = b.linearize(matrix_cast<interval>(Xd));
  const Matrix<interval> ji = lin.jvp(matrix_cast<interval>(Vd)), vi = lin.vjp(matrix_cast<interval>(Ud));
  for (Eigen::Index i = 0; i < ji.rows(); ++i)
    for (Eigen::Index a = 0; a < ji.cols(); ++a) {
      EXPECT_TRUE(contains(lin.value()(i, a), fm(i, a))) << c.name;
      EXPECT_TRUE(contains(ji(i, a), jm(i, a))) << c.name;
      EXPECT_TRUE(contains(vi(i, a), vm(i, a))) << c.name;
      EXPECT_LT(scalar_traits<interval>::to_double(scalar_traits<interval>::width(ji(i, a))),
                interval_width_128())
          << c.name;
    }
}

INSTANTIATE_TEST_SUITE_P(Configs, BlockConfigs, ::testing::ValuesIn(configs()),
                         [](const auto& info) { return info.param.name; });

/// Kernel rows and columns: softmax rows sum to 1; Sinkhorn after an even number of half-steps has unit
/// column sums, after an odd number unit row sums; t = 1 is the softmax itself.
TEST(BlockKernels, SinkhornMarginalsAndFirstStep) {
  Config c{"s", AttentionKind::dot, 6, 2};
  const AttentionLayer L = layer_for(c, 61);
  const Matrix<double> X = gaussian(6, c.d, 20);
  AttentionOptions o;
  const auto softmax = Block<double>(L, o).kernels(X);
  for (int t : {1, 2, 3, 8, 9, 20, 50, 100, 200}) {
    o.sinkhorn_iterations = t;
    const auto K = Block<double>(L, o).kernels(X);
    for (std::size_t h = 0; h < K.size(); ++h) {
      EXPECT_GE(K[h].minCoeff(), 0.0) << t;

      if (t % 2 == 1)
        EXPECT_LE((K[h].rowwise().sum().array() - 1).abs().maxCoeff(), marginal) << t;
      else
        EXPECT_LE((K[h].colwise().sum().array() - 1).abs().maxCoeff(), marginal) << t;
      if (t == 1) {
        EXPECT_EQ(K[h], softmax[h]);
      }
      if (t >= 200) {  // converged: doubly stochastic
        EXPECT_LE((K[h].rowwise().sum().array() - 1).abs().maxCoeff(), sinkhorn_converged(t));
        EXPECT_LE((K[h].colwise().sum().array() - 1).abs().maxCoeff(), sinkhorn_converged(t));
      }
    }
  }
}

/// docs/math/jacobian.md#dot-derivatives block form for one bias-free dot head with W^O = I (value_dim = d):
/// J_ij = W_Vᵀ(P_ij[I + (x_j − m_i)(Aᵀx_i)ᵀ] + δ_ij Cov_i Aᵀ), A = W_Q W_Kᵀ/√d_h, in column convention.
TEST(BlockFormulas, DotBlockFormulaMatchesDenseJacobian) {
  const int d = 4, n = 5;
  RandomLayerSpec s;
  s.d = d;
  s.heads = 1;
  s.head_dim = 3;
  s.value_dim = d;
  s.seed = 71;
  AttentionLayer L = random_layer(s);
  L.WO = Matrix<double>::Identity(d, d);
  const Matrix<double> X = gaussian(n, d, 22);
  const Block<double> block(L);
  const Matrix<double> J = dense_jacobian(block.linearize(X));
  const Matrix<double> P = block.kernels(X)[0];
  const Matrix<double> A = L.WQ[0] * L.WK[0].transpose() / std::sqrt(3.0);
  const Matrix<double> Vt = L.WV[0].transpose();
  for (int i = 0; i < n; ++i) {
    const Vector<double> m = (P.row(i) * X).transpose();
    Matrix<double> cov = Matrix<double>::Zero(d, d);
    for (int k = 0; k < n; ++k)
      cov += P(i, k) * (X.row(k).transpose() - m) * (X.row(k).transpose() - m).transpose();
    const Vector<double> ax = A.transpose() * X.row(i).transpose();
    for (int j = 0; j < n; ++j) {
      Matrix<double> block_ij =
          P(i, j) * (Matrix<double>::Identity(d, d) + (X.row(j).transpose() - m) * ax.transpose());
      if (i == j) block_ij += cov * A.transpose();
      const Matrix<double> formula = Vt * block_ij;
      EXPECT_LE((J.block(i * d, j * d, d, d) - formula).cwiseAbs().maxCoeff(), two_paths) << i << "," << j;
    }
  }
}

/// docs/math/jacobian.md#l2-tied-derivatives block form of tied L2 attention, f = P X A, F_i = (W_V W_O)ᵀ f_i
/// (column convention):
/// J_ij = A[2 P_ij (x_j − m_i)(x_i − x_j)ᵀ A + P_ij I] (j ≠ i), J_ii = A[2 Cov_i A + P_ii I].
TEST(BlockFormulas, L2BlockFormulaMatchesDenseJacobian) {
  const int d = 5, n = 6;
  RandomLayerSpec s;
  s.d = d;
  s.heads = 2;
  s.head_dim = 2;
  s.value_dim = 3;
  s.kind = AttentionKind::l2;
  s.seed = 81;
  const AttentionLayer L = random_layer(s);
  const Matrix<double> X = gaussian(n, d, 23);
  const Block<double> block(L);
  const Matrix<double> J = dense_jacobian(block.linearize(X));
  const auto kernels = block.kernels(X);
  Matrix<double> expected = Matrix<double>::Zero(n * d, n * d);
  for (int h = 0; h < L.heads; ++h) {
    const Matrix<double>& P = kernels[h];
    const Matrix<double> A = L.WQ[h] * L.WQ[h].transpose() / std::sqrt(2.0);
    const Matrix<double> out = (L.WV[h] * L.WO.middleRows(h * 3, 3)).transpose();
    for (int i = 0; i < n; ++i) {
      const Vector<double> m = (P.row(i) * X).transpose();
      Matrix<double> cov = Matrix<double>::Zero(d, d);
      for (int k = 0; k < n; ++k)
        cov += P(i, k) * (X.row(k).transpose() - m) * (X.row(k).transpose() - m).transpose();
      for (int j = 0; j < n; ++j) {
        Matrix<double> inner_ij =
            i == j ? Matrix<double>(2 * cov * A)
                   : Matrix<double>(2 * P(i, j) * (X.row(j).transpose() - m) * (X.row(i) - X.row(j)) * A);
        inner_ij += P(i, j) * Matrix<double>::Identity(d, d);
        expected.block(i * d, j * d, d, d) += out * A * inner_ij;
      }
    }
  }
  EXPECT_LE((J - expected).cwiseAbs().maxCoeff(), two_paths * (1 + max_abs(J)));
}

TEST(BlockStack, StackIsCompositionAndChainRule) {
  Config c{"stack", AttentionKind::dot, 4, 2, 0, true, false, true, Prenorm::layernorm};
  const AttentionLayer L1 = layer_for(c, 91), L2 = layer_for(c, 92);
  const AttentionOptions o = options_for(c);
  const Block<double> b1(L1, o), b2(L2, o);
  const Stack<double> stack({b1, b2, b1});  // the first layer shared twice
  const Matrix<double> X = gaussian(5, c.d, 24), V = gaussian(5, c.d, 25), U = gaussian(5, c.d, 26);
  EXPECT_EQ(stack.forward(X), b1.forward(b2.forward(b1.forward(X))));
  const Linearization<double> lin = stack.linearize(X);
  const Matrix<double> Z1 = b1.forward(X), Z2 = b2.forward(Z1);
  const Matrix<double> chained = b1.linearize(Z2).jvp(b2.linearize(Z1).jvp(b1.linearize(X).jvp(V)));
  EXPECT_LE(max_abs(lin.jvp(V) - chained), two_paths * (1 + max_abs(chained)));
  EXPECT_NEAR(inner(lin.jvp(V), U), inner(V, lin.vjp(U)), stack_duality * (1 + V.norm() * U.norm()));
}

// A linearisation keeps what it needs of its block: taken from a temporary block or stack, its JVP and VJP
// still equal those of a linearisation of a block that is alive (the sanitizer pass catches a dangling use).
TEST(BlockLifetime, LinearizationsOutliveTheirBlocks) {
  Config c{"lifetime", AttentionKind::dot, 4, 2, 0, true, false, true, Prenorm::rmsnorm};
  const AttentionLayer L = layer_for(c, 93);
  const AttentionOptions o = options_for(c);
  const Matrix<double> X = gaussian(5, c.d, 27), V = gaussian(5, c.d, 28), U = gaussian(5, c.d, 29);
  const Matrix<double> Y = gaussian(3, c.d, 30), W = gaussian(3, c.d, 31);
  const Block<double> alive(L, o);

  const Linearization<double> from_temporary = Block<double>(L, o).linearize(X);
  EXPECT_EQ(from_temporary.jvp(V), alive.linearize(X).jvp(V));
  EXPECT_EQ(from_temporary.vjp(U), alive.linearize(X).vjp(U));

  AttentionOptions cross = o;
  cross.causal = false;
  const Block<double> alive_cross(L, cross);
  const CrossLinearization<double> cross_from_temporary = Block<double>(L, cross).linearize_cross(X, Y);
  EXPECT_EQ(cross_from_temporary.jvp_context(W), alive_cross.linearize_cross(X, Y).jvp_context(W));
  EXPECT_EQ(cross_from_temporary.vjp_query(U), alive_cross.linearize_cross(X, Y).vjp_query(U));

  const Linearization<double> stack_from_temporary = Stack<double>({alive, alive}).linearize(X);
  const Matrix<double> chained = alive.linearize(alive.forward(X)).jvp(alive.linearize(X).jvp(V));
  EXPECT_LE(max_abs(stack_from_temporary.jvp(V) - chained), two_paths * (1 + max_abs(chained)));
}
TEST(BlockErrors, BadInputIsRejectedWithTheArgumentNamed) {
  Config c{"e", AttentionKind::dot, 4, 2};
  AttentionLayer L = layer_for(c, 101);
  const Block<double> block(L);
  const auto message = [](auto&& f) {
    try {
      f();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { block.forward(gaussian(3, 5, 1)); }).find("X"), std::string::npos);
  EXPECT_NE(message([&] { block.forward(Matrix<double>(0, 4)); }).find("X"), std::string::npos);
  Matrix<double> bad = gaussian(3, 4, 1);
  bad(1, 2) = std::nan("");
  EXPECT_NE(message([&] { block.forward(bad); }).find("non-finite"), std::string::npos);
  const Linearization<double> lin = block.linearize(gaussian(3, 4, 2));
  EXPECT_NE(message([&] { lin.jvp(gaussian(2, 4, 3)); }).find("Xdot"), std::string::npos);
  EXPECT_NE(message([&] { lin.vjp(gaussian(3, 3, 3)); }).find("Fbar"), std::string::npos);
  AttentionOptions o;
  o.sinkhorn_iterations = 0;
  EXPECT_NE(message([&] { Block<double>(L, o); }).find("sinkhorn"), std::string::npos);
  L.kind = AttentionKind::l2;  // WK ≠ WQ: untied
  EXPECT_NE(message([&] { Block<double>(L, {}); }).find("untied"), std::string::npos);
  AttentionOptions allow;
  allow.allow_untied_l2 = true;
  EXPECT_EQ(message([&] { Block<double>(L, allow); }), "no error");
  EXPECT_NE(message([&] { Stack<double>(std::vector<Block<double>>{}); }).find("stack"), std::string::npos);
}

/// Untied L2 (docs/math/jacobian.md#l2-untied-derivatives) — outside the theorem but differentiable: duality
/// and finite differences.
TEST(BlockFormulas, UntiedL2DerivativesAreConsistent) {
  Config c{"untied", AttentionKind::dot, 4, 2};
  AttentionLayer L = layer_for(c, 111);
  L.kind = AttentionKind::l2;
  AttentionOptions o;
  o.allow_untied_l2 = true;
  const Block<double> block(L, o);
  const Matrix<double> X = gaussian(5, 4, 27), V = gaussian(5, 4, 28), U = gaussian(5, 4, 29);
  const Linearization<double> lin = block.linearize(X);
  EXPECT_NEAR(inner(lin.jvp(V), U), inner(V, lin.vjp(U)), duality * (1 + V.norm() * U.norm()));
  const double h = 1e-6;
  const Matrix<double> fd = (block.forward(X + h * V) - block.forward(X - h * V)) / (2 * h);
  EXPECT_LE(max_abs(fd - lin.jvp(V)), central_difference_double(h) * (1 + max_abs(fd)));
}

}  // namespace
}  // namespace regatta::operators
