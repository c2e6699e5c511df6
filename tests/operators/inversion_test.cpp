// Fixed-point inversion of residual blocks (inversion.hpp): against the exact inverse of a linear residual
// map (its Lipschitz constant is known exactly), and on contractive L2 attention scaled by the certified
// upper end of kim.thm32_2, where the true preimage is known because Y is built from it.
#include <gtest/gtest.h>

#include <Eigen/LU>

#include <cmath>
#include <regatta/core/convert.hpp>
#include <regatta/core/dense_svd.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/inversion.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>
#include <string>

#include "../support/tolerance.hpp"

namespace regatta::operators {
namespace {

Matrix<double> gaussian(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed) {
  const Vector<double> z = standard_normal(rows * cols, seed);
  return Eigen::Map<const Matrix<double>>(z.data(), rows, cols);
}

/// The rounding floor of the double iteration X ← Y − g(X) at its fixed point X: each step is perturbed by
/// δ ≤ eps·(‖Y‖ + chain·‖g(X)‖) (one rounding of the difference, g's own chain of `chain` operations), and
/// a contraction by L turns a per-step perturbation δ into δ/(1 − L) at the fixed point. The a posteriori
/// bounds, computed from the rounded iterates, can miss it by that much.
double fixed_point_floor(const Matrix<double>& Y, const Matrix<double>& X, double chain, double L) {
  return testing::rounding_bound<double>(1, 1) * (Y.norm() + chain * (Y - X).norm()) / (1 - L);
}

TEST(Inversion, LinearResidualMapMatchesTheExactInverseWithinTheBounds) {
  for (const double L : {0.1, 0.5, 0.9, 0.99}) {
    // g(X) = X·M with ‖M‖₂ = L: Lip_F(g) = L exactly (Frobenius norm of X·M is at most ‖X‖_F‖M‖₂).
    Matrix<double> M = gaussian(5, 5, 3);
    M *= L / largest_singular_value(M);
    const Matrix<double> Y = gaussian(7, 5, 4);
    const Matrix<double> exact =
        Y * (Matrix<double>::Identity(5, 5) + M).inverse();  // X + X·M = Y  ⇔  X = Y (I + M)⁻¹
    InversionOptions o;
    o.lipschitz = L;
    o.tolerance = 1e-10;
    o.max_iterations = 100000;
    const auto r =
        invert_residual<double>([&](const Matrix<double>& X) { return Matrix<double>(X * M); }, Y, o);
    ASSERT_TRUE(r.converged) << L;
    const double err = (r.X - exact).norm();
    // g(X) = X·M is a chain of 5 products; the LU inverse behind `exact` errs by about as much.
    const double slack = 2 * fixed_point_floor(Y, r.X, double(M.cols()), L);
    EXPECT_LE(err, r.a_posteriori_bound + slack) << L;
    EXPECT_LE(err, r.a_priori_bound + slack) << L;
    EXPECT_LE(err, r.residual_bound + slack) << L;
    EXPECT_LE(r.a_posteriori_bound, o.tolerance);
    // The a priori iteration count is sufficient: the run never needs more.
    EXPECT_LE(r.iterations, std::max(1, r.iterations_needed_a_priori)) << L;
    // The residual is ‖F(X) − Y‖ computed directly.
    // Both evaluate X + X·M − Y: 5 products and 2 sums per entry, of terms of size ‖X‖, ‖X·M‖ and ‖Y‖.
    EXPECT_NEAR(r.residual, (r.X + r.X * M - Y).norm(),
                testing::rounding_bound<double>(2, double(M.cols()) + 2) *
                    (r.X.norm() + (r.X * M).norm() + Y.norm()));
  }
}

TEST(Inversion, ContractiveL2AttentionIsInvertedToItsKnownPreimage) {
  RandomLayerSpec spec;
  spec.d = 6;
  spec.heads = 2;
  spec.kind = AttentionKind::l2;
  spec.seed = 5;
  spec.scale = 2.0;
  const AttentionLayer layer = random_layer(spec);
  const std::int64_t n = 8;
  lip::BoundSetting setting;
  setting.n = n;
  const double B =
      lip::theoretical_bounds(layer, {}, setting, lip::Norm::two)[std::size_t(lip::Bound::kim_two)]
          .certified_upper;
  ASSERT_GT(B, 0);
  for (const double c : {0.5, 0.9, 0.99}) {
    const Block<double> g_block(scaled_layer(layer, c, B));
    const auto g = [&](const Matrix<double>& X) { return g_block.forward(X); };
    const Matrix<double> preimage = 3.0 * gaussian(n, spec.d, 6);
    const Matrix<double> Y = preimage + g(preimage);
    InversionOptions o;
    o.lipschitz = c;
    o.tolerance = 1e-11;
    o.max_iterations = 100000;
    const auto r = invert_residual<double>(g, Y, o);
    ASSERT_TRUE(r.converged) << c;
    // One forward of the scaled block is a chain of ≲ 64 rounded operations (projections of width 6, a
    // softmax over 8 keys, two heads); Y = preimage + g(preimage) was rounded once more, moving the exact
    // preimage of Y by as much again.
    const double slack = 2 * fixed_point_floor(Y, r.X, 64, c);
    EXPECT_LE((r.X - preimage).norm(), r.a_posteriori_bound + slack) << c;
    EXPECT_LE((r.X - preimage).norm(), r.a_priori_bound + slack) << c;
  }
}

TEST(Inversion, BadArgumentsAreRejected) {
  const auto id = [](const Matrix<double>& X) { return Matrix<double>(0.5 * X); };
  const Matrix<double> Y = gaussian(3, 2, 1);
  const auto message = [&](InversionOptions o, const Matrix<double>& y,
                           std::function<Matrix<double>(const Matrix<double>&)> g) {
    try {
      invert_residual<double>(g, y, o);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  InversionOptions o;
  o.lipschitz = 1.0;
  EXPECT_NE(message(o, Y, id).find("lipschitz"), std::string::npos);
  o.lipschitz = 0.5;
  o.tolerance = 0;
  EXPECT_NE(message(o, Y, id).find("tolerance"), std::string::npos);
  o.tolerance = 1e-9;
  o.max_iterations = 0;
  EXPECT_NE(message(o, Y, id).find("max_iterations"), std::string::npos);
  o.max_iterations = 10;
  Matrix<double> bad = Y;
  bad(0, 0) = std::nan("");
  EXPECT_NE(message(o, bad, id).find("Y"), std::string::npos);
  EXPECT_NE(message(o, Y, [](const Matrix<double>& X) { return Matrix<double>(X.leftCols(1)); }).find("g"),
            std::string::npos);
  EXPECT_THROW(scaled_layer(random_layer({}), 1.5, 2.0), InputError);
  EXPECT_THROW(scaled_layer(random_layer({}), 0.5, 0.0), InputError);
}

/// mpfr: the same linear example at 200 bits converges to a far smaller tolerance.
TEST(Inversion, MpfrIterationReachesHighAccuracy) {
  const PrecisionGuard guard(200);
  Matrix<double> Md = gaussian(3, 3, 9);
  Md *= 0.5 / largest_singular_value(Md);
  const Matrix<mpfr> M = matrix_cast<mpfr>(Md), Y = matrix_cast<mpfr>(gaussian(4, 3, 10));
  InversionOptions o;
  o.lipschitz = 0.5000001;  // ‖M‖₂ = 0.5 up to the double rounding of the scaling
  o.tolerance = 1e-40;
  o.max_iterations = 1000;
  const auto r = invert_residual<mpfr>([&](const Matrix<mpfr>& X) { return Matrix<mpfr>(X * M); }, Y, o);
  EXPECT_TRUE(r.converged);
  mpfr worst(0);
  const Matrix<mpfr> F = r.X + r.X * M - Y;
  for (Eigen::Index i = 0; i < F.rows(); ++i)
    for (Eigen::Index j = 0; j < F.cols(); ++j) worst = std::max(worst, mpfr(abs(F(i, j))));
  // ‖F(X) − Y‖ ≤ (1 + L)‖X − X*‖ ≤ (1 + L)·tolerance once converged; 200-bit rounding is far below.
  EXPECT_LT(worst, mpfr((1 + o.lipschitz) * o.tolerance));
}

}  // namespace
}  // namespace regatta::operators
