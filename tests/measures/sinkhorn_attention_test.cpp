// sinkhorn_sq_euclidean (the attention-kernel Sinkhorn) against the streamed pairwise Sinkhorn
// (measures::sinkhorn, difference-form neg_sq_dist scores) and against the dense plan rebuilt from the
// returned potentials; narrow (fused) and wide (GEMM) paths, float32 storage, zero weights, the divergence.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <regatta/core/error.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/measures/sinkhorn.hpp>
#include <regatta/measures/sinkhorn_attention.hpp>

#include "support/tolerance.hpp"

namespace regatta::measures {
namespace {

DiscreteMeasure<double> random_measure(Eigen::Index n, Eigen::Index d, std::uint64_t seed, double shift = 0,
                                       bool zero_weight = false) {
  Matrix<double> x = random_matrix({n, d, RandomMatrixKind::gaussian, 1, 1e12, seed});
  x.array() += shift;
  std::mt19937_64 gen(seed + 1000);
  std::uniform_real_distribution<double> u(0.1, 1);
  Vector<double> w(n);
  for (Eigen::Index i = 0; i < n; ++i) w(i) = u(gen);
  if (zero_weight) w(2) = 0;
  return DiscreteMeasure<double>::from_weights(std::move(x), std::move(w), true);
}

/// Row and column marginal L1 errors and <P, C> of the dense plan P_ij = a_i b_j exp((f_i + g_j − C_ij)/ε).
struct DensePlan {
  double row_error = 0, column_error = 0, cost = 0;
};
DensePlan dense_plan(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu,
                     const SinkhornResult<double>& r) {
  Vector<double> rows = Vector<double>::Zero(mu.size()), cols = Vector<double>::Zero(nu.size());
  DensePlan out;
  for (Eigen::Index i = 0; i < mu.size(); ++i)
    for (Eigen::Index j = 0; j < nu.size(); ++j) {
      const double c = (mu.atoms().row(i) - nu.atoms().row(j)).squaredNorm();
      const double p = mu.weights()(i) * nu.weights()(j) * std::exp((r.f(i) + r.g(j) - c) / r.epsilon);
      rows(i) += p;
      cols(j) += p;
      out.cost += p * c;
    }
  out.row_error = (rows - mu.weights()).lpNorm<1>();
  out.column_error = (cols - nu.weights()).lpNorm<1>();
  return out;
}

/// Rounding of a marginal of the dense plan rebuilt from the potentials: each entry's exponent
/// (f_i + g_j − C_ij)/ε carries an absolute rounding of ~eps κ, κ = max (|f_i| + |g_j| + C_ij)/ε, so the
/// entry is off by eps κ relative; a marginal of total mass 1 summed over n terms is then off by ~(κ + n)
/// eps. c = 2: the solver's own evaluation rounds the same way (measured: ≤ 0.11 κ eps).
double marginal_rounding(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu,
                         const SinkhornResult<double>& r) {
  double kappa = 0;
  for (Eigen::Index i = 0; i < mu.size(); ++i)
    for (Eigen::Index j = 0; j < nu.size(); ++j)
      kappa = std::max(kappa, (std::abs(r.f(i)) + std::abs(r.g(j)) +
                               (mu.atoms().row(i) - nu.atoms().row(j)).squaredNorm()) /
                                  r.epsilon);
  return testing::rounding_bound<double>(2, kappa + double(std::max(mu.size(), nu.size())));
}

/// Converged plans of the two solvers differ by at most their marginal errors: a feasible-plan perturbation
/// of L1 size δ changes <P, C> by ≤ δ max C; potentials are unique up to a constant and the plans are
/// equal at the fixed point, so two runs at tolerance τ agree to ~2τ·max C (factor 4: both sides' errors
/// plus the rounding of the sums, bounded by rounding_bound below).
double max_cost(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu) {
  double c = 0;
  for (Eigen::Index i = 0; i < mu.size(); ++i)
    for (Eigen::Index j = 0; j < nu.size(); ++j)
      c = std::max(c, (mu.atoms().row(i) - nu.atoms().row(j)).squaredNorm());
  return c;
}

TEST(SinkhornAttention, AgreesWithThePairwiseSinkhornOnBothPaths) {
  for (Eigen::Index d : {1, 3, 12}) {  // 1, 3: fused narrow kernel; 12: pairwise::reduce dot path
    const auto mu = random_measure(40, d, 10 + d, 0, true);
    const auto nu = random_measure(33, d, 20 + d, 0.7);
    for (double epsilon : {1.0, 0.1}) {
      AttentionSinkhornOptions o;
      o.sinkhorn.epsilon = epsilon;
      o.sinkhorn.tolerance = 1e-11;
      const SinkhornResult<double> fast = sinkhorn_sq_euclidean(mu, nu, o);
      SinkhornOptions pairwise = o.sinkhorn;  // the streamed pairwise::reduce path of measures::sinkhorn
      pairwise.kernel = SinkhornKernel::streamed;
      const SinkhornResult<double> reference = sinkhorn(mu, nu, 2.0, pairwise);
      ASSERT_EQ(reference.kernel, SinkhornKernel::streamed);
      ASSERT_TRUE(fast.converged()) << d << " " << epsilon << " " << fast.marginal_error;
      ASSERT_TRUE(reference.converged());
      const double cmax = max_cost(mu, nu);
      const double tol =
          4 * o.sinkhorn.tolerance * cmax + testing::rounding_bound<double>(64, mu.size() * nu.size()) * cmax;
      EXPECT_NEAR(fast.cost, reference.cost, tol) << "d " << d << " eps " << epsilon;
      EXPECT_NEAR(fast.objective, reference.objective, tol + 4 * o.sinkhorn.tolerance * epsilon);
      // Independent check: the dense plan of the returned potentials.
      const DensePlan plan = dense_plan(mu, nu, fast);
      const double sum_tol = testing::rounding_bound<double>(16, mu.size() * nu.size());
      EXPECT_NEAR(plan.row_error, fast.marginal_error, sum_tol);
      EXPECT_LE(plan.column_error, marginal_rounding(mu, nu, fast)) << "columns are exact after the g-update";
      EXPECT_NEAR(plan.cost, fast.cost, sum_tol * cmax * 4);
    }
  }
}

TEST(SinkhornAttention, OverRelaxationReachesTheSamePlan) {
  const auto mu = random_measure(60, 3, 31, 0, true);
  const auto nu = random_measure(50, 3, 32, 0.2);
  AttentionSinkhornOptions o;
  o.sinkhorn.epsilon = 0.05;
  o.sinkhorn.tolerance = 1e-10;
  const SinkhornResult<double> plain = sinkhorn_sq_euclidean(mu, nu, o);
  for (double omega : {1.3, 1.6, 1.9}) {
    o.over_relaxation = omega;
    const SinkhornResult<double> relaxed = sinkhorn_sq_euclidean(mu, nu, o);
    ASSERT_TRUE(relaxed.converged()) << omega;
    const DensePlan plan = dense_plan(mu, nu, relaxed);
    const double sum_tol = testing::rounding_bound<double>(16, mu.size() * nu.size());
    // The reported error describes the reported plan, and its columns are exact (a plain last iteration).
    EXPECT_NEAR(plan.row_error, relaxed.marginal_error, sum_tol);
    EXPECT_LE(plan.column_error, sum_tol);
    EXPECT_NEAR(relaxed.cost, plain.cost, 4 * o.sinkhorn.tolerance * max_cost(mu, nu));
  }
  o.over_relaxation = 2;
  EXPECT_THROW(sinkhorn_sq_euclidean(mu, nu, o), InputError);
  o.over_relaxation = 0.5;
  EXPECT_THROW(sinkhorn_sq_euclidean(mu, nu, o), InputError);
}

TEST(SinkhornAttention, Float32StorageMeetsItsToleranceAndStaysNearFloat64) {
  const auto mu = random_measure(150, 3, 5);
  const auto nu = random_measure(130, 3, 6, 0.3);
  AttentionSinkhornOptions o;
  o.sinkhorn.epsilon = 0.1;
  o.sinkhorn.tolerance = 1e-4;  // above the float32 floor ~ eps_f · max|t| ~ 1e-7 · 100
  const SinkhornResult<double> r64 = sinkhorn_sq_euclidean(mu, nu, o);
  for (int variant = 0; variant < 3; ++variant) {  // streamed (double / float accumulation), dense
    o.storage = SinkhornStorage::float32;
    o.accumulate_double = variant != 1;
    o.sinkhorn.kernel = variant == 2 ? SinkhornKernel::dense : SinkhornKernel::streamed;
    const SinkhornResult<double> r32 = sinkhorn_sq_euclidean(mu, nu, o);
    ASSERT_TRUE(r32.converged()) << variant << " " << r32.marginal_error;
    // Both plans within tolerance of feasibility: costs agree to 2 · tolerance · max C.
    EXPECT_NEAR(r32.cost, r64.cost, 2 * o.sinkhorn.tolerance * max_cost(mu, nu));
    const DensePlan plan = dense_plan(mu, nu, r32);
    // The float32 evaluation of the marginal differs from the exact one by O(eps_f · |t| · n) per row sum.
    EXPECT_LE(plan.row_error, o.sinkhorn.tolerance + testing::rounding_bound<float>(64, nu.size()));
  }
}

// The dense scaling iteration (SinkhornKernel::dense) is the log-domain iteration in other coordinates: the
// same plan to the tolerance, the same number of iterations up to threshold decisions taken on rounded
// errors, and `converged` decided on the exact (streamed) marginal error of the returned potentials, which
// the dense plan rebuilt here from those potentials confirms.
TEST(SinkhornAttention, DenseScalingIterationReachesTheLogDomainPlan) {
  for (Eigen::Index d : {2, 3, 10}) {
    const auto mu = random_measure(45, d, 40 + d);
    const auto nu = random_measure(38, d, 50 + d, 0.5);
    const double cmax = max_cost(mu, nu);
    for (double epsilon : {1.0, 0.05}) {
      for (double omega : {1.0, 1.5}) {
        AttentionSinkhornOptions o;
        o.sinkhorn.epsilon = epsilon;
        o.sinkhorn.tolerance = 1e-10;
        o.over_relaxation = omega;
        o.sinkhorn.kernel = SinkhornKernel::streamed;
        const SinkhornResult<double> reference = sinkhorn_sq_euclidean(mu, nu, o);
        o.sinkhorn.kernel = SinkhornKernel::dense;
        ASSERT_TRUE(uses_dense_kernel(mu, nu, o));
        const SinkhornResult<double> dense = sinkhorn_sq_euclidean(mu, nu, o);
        ASSERT_TRUE(dense.converged()) << d << " " << epsilon << " " << omega << " " << dense.marginal_error;
        ASSERT_TRUE(reference.converged());
        EXPECT_LE(std::abs(dense.iterations - reference.iterations), 2)
            << d << " " << epsilon << " " << omega;
        EXPECT_NEAR(dense.cost, reference.cost, 4 * o.sinkhorn.tolerance * cmax);
        const DensePlan plan = dense_plan(mu, nu, dense);
        const double sum_tol = testing::rounding_bound<double>(16, mu.size() * nu.size());
        EXPECT_NEAR(plan.row_error, dense.marginal_error, sum_tol);
        EXPECT_LE(plan.row_error, o.sinkhorn.tolerance + sum_tol);
        // Columns come from K's products: exact up to the rounding of K's entries and sums.
        EXPECT_LE(plan.column_error, marginal_rounding(mu, nu, dense));
        EXPECT_NEAR(plan.cost, dense.cost, sum_tol * cmax * 4);
      }
    }
  }
}

// Far-apart clouds at a small ε: the potentials move by many ε per stage, so the scalings are absorbed and
// the kernel rebuilt again and again (or the log-domain iteration takes over); the result is still the
// streamed one.
TEST(SinkhornAttention, DenseKernelSurvivesAbsorptionsOnSeparatedClouds) {
  const auto mu = random_measure(30, 3, 61);
  const auto nu = random_measure(25, 3, 62, 6.0);
  AttentionSinkhornOptions o;
  o.sinkhorn.epsilon = 0.02;
  o.sinkhorn.tolerance = 1e-9;
  o.sinkhorn.kernel = SinkhornKernel::streamed;
  const SinkhornResult<double> reference = sinkhorn_sq_euclidean(mu, nu, o);
  for (SinkhornStorage storage : {SinkhornStorage::float64, SinkhornStorage::float32}) {
    o.storage = storage;
    o.sinkhorn.tolerance = storage == SinkhornStorage::float32 ? 1e-4 : 1e-9;
    o.sinkhorn.kernel = SinkhornKernel::dense;
    const SinkhornResult<double> dense = sinkhorn_sq_euclidean(mu, nu, o);
    ASSERT_TRUE(dense.converged()) << to_string(storage) << " " << dense.marginal_error;
    EXPECT_NEAR(dense.cost, reference.cost, 4 * o.sinkhorn.tolerance * max_cost(mu, nu))
        << to_string(storage);
  }
}

TEST(SinkhornAttention, DenseKernelOnlyWithinItsMemoryBudgetAndForPositiveWeights) {
  const auto mu = random_measure(40, 3, 1), nu = random_measure(30, 3, 2);
  AttentionSinkhornOptions o;
  EXPECT_TRUE(uses_dense_kernel(mu, nu, o));
  o.sinkhorn.dense_kernel_bytes = 40 * 30 * sizeof(double) - 1;
  EXPECT_FALSE(uses_dense_kernel(mu, nu, o));
  o.storage = SinkhornStorage::float32;
  EXPECT_TRUE(uses_dense_kernel(mu, nu, o));
  o.sinkhorn.kernel = SinkhornKernel::streamed;
  EXPECT_FALSE(uses_dense_kernel(mu, nu, o));
  o.sinkhorn.kernel = SinkhornKernel::dense;
  EXPECT_FALSE(uses_dense_kernel(random_measure(40, 3, 1, 0, true), nu, o)) << "a zero weight";
}

TEST(SinkhornAttention, DivergenceMatchesThePairwiseDivergenceAndVanishesOnEqualMeasures) {
  const auto mu = random_measure(40, 3, 7);
  const auto nu = random_measure(35, 3, 8, 0.4);
  AttentionSinkhornOptions o;
  o.sinkhorn.epsilon = 0.2;
  o.sinkhorn.tolerance = 1e-10;
  const SinkhornDivergenceResult fast = sinkhorn_divergence_sq_euclidean(mu, nu, o);
  SinkhornOptions pairwise = o.sinkhorn;  // the streamed pairwise::reduce path of measures::sinkhorn
  pairwise.kernel = SinkhornKernel::streamed;
  const SinkhornDivergenceResult reference = sinkhorn_divergence(mu, nu, 2.0, pairwise);
  ASSERT_TRUE(fast.converged());
  const double tol = 8 * o.sinkhorn.tolerance * max_cost(mu, nu);
  EXPECT_NEAR(fast.value, reference.value, tol);
  EXPECT_GT(fast.value, 0);
  const SinkhornDivergenceResult same = sinkhorn_divergence_sq_euclidean(mu, mu, o);
  const SinkhornDivergenceResult same_ref = sinkhorn_divergence(mu, mu, 2.0, pairwise);
  // Both solvers give the same (tiny) value on mu = mu: the cross and symmetric iterations stop at different
  // points within the tolerance, which the objective sees at first order (the same ~3e-8 for both).
  EXPECT_NEAR(same.value, same_ref.value, tol);
  // S_ε(mu, mu) = 0 exactly; what the stopping points leave (~9 τ max C here, at this τ) must be negligible
  // against a divergence of order one: four orders below S_ε(mu, nu), so the divergence separates mu ≠ nu
  // from mu = mu by far more than the solvers' error. A threshold of separation, not a rounding bound.
  constexpr double negligible_fraction = 1e-4;
  EXPECT_LT(std::abs(same.value), negligible_fraction * fast.value);
}

TEST(SinkhornAttention, ReportsTheBudgetRunningOutAndRejectsBadInput) {
  const auto mu = random_measure(30, 3, 1);
  const auto nu = random_measure(30, 3, 2);
  AttentionSinkhornOptions o;
  o.sinkhorn.epsilon = 1e-3;
  o.sinkhorn.max_iterations = 3;
  const SinkhornResult<double> r = sinkhorn_sq_euclidean(mu, nu, o);
  EXPECT_FALSE(r.converged());
  EXPECT_GT(r.marginal_error, o.sinkhorn.tolerance);
  o.sinkhorn.epsilon = -1;
  EXPECT_THROW(sinkhorn_sq_euclidean(mu, nu, o), InputError);
  o.sinkhorn.epsilon = 0.1;
  o.sinkhorn.tolerance = 0;
  EXPECT_THROW(sinkhorn_sq_euclidean(mu, nu, o), InputError);
  o.sinkhorn.tolerance = 1e-9;
  EXPECT_THROW(sinkhorn_sq_euclidean(mu, random_measure(5, 2, 3), o), InputError);
}

}  // namespace
}  // namespace regatta::measures
