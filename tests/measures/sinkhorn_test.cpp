// Sinkhorn: convergence to the exact W_p^p (network simplex) as ε → 0 within the entropic bracket
// W ≤ <P_ε, C> ≤ OT_ε ≤ W + ε min(H(a), H(b)), monotonicity in ε, the reported marginal error against the
// marginals of the materialised plan, the debiased divergence (≥ 0, = 0 for mu = nu), non-convergence
// reported as a status, float against double, and input errors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <regatta/core/error.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/measures/sinkhorn.hpp>
#include <regatta/measures/wasserstein.hpp>

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

double entropy(const Vector<double>& a) {
  double h = 0;
  for (Eigen::Index i = 0; i < a.size(); ++i)
    if (a(i) > 0) h -= a(i) * std::log(a(i));
  return h;
}

Matrix<double> cost_matrix(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu, double p) {
  Matrix<double> c(mu.size(), nu.size());
  for (Eigen::Index i = 0; i < mu.size(); ++i)
    for (Eigen::Index j = 0; j < nu.size(); ++j)
      c(i, j) = std::pow((mu.atoms().row(i) - nu.atoms().row(j)).norm(), p);
  return c;
}

TEST(Sinkhorn, ConvergesToExactTransportInsideTheEntropicBracket) {
  for (double p : {1.0, 2.0, 1.5}) {
    const auto mu = random_measure(40, 3, 1);
    const auto nu = random_measure(30, 3, 2, 0.5);
    const double exact = wasserstein_exact(mu, nu, p).cost;
    const double h = std::min(entropy(mu.weights()), entropy(nu.weights()));
    double previous_cost = INFINITY;
    for (double epsilon : {1.0, 0.3, 0.1, 0.03, 0.01, 0.003}) {
      SinkhornOptions o;
      o.epsilon = epsilon;
      o.tolerance = 1e-10;
      const SinkhornResult<double> r = sinkhorn(mu, nu, p, o);
      ASSERT_TRUE(r.converged()) << "p " << p << " eps " << epsilon << " error " << r.marginal_error;
      EXPECT_LE(r.marginal_error, 1e-10);
      // Bracket of transport.md §5, up to the tolerance times the largest cost.
      const double slack = 1e-8 * (1 + exact);
      EXPECT_GE(r.cost, exact - slack) << "p " << p << " eps " << epsilon;
      EXPECT_LE(r.cost, r.objective + slack);
      EXPECT_LE(r.objective, exact + epsilon * h + slack);
      // <P_ε, C> is nondecreasing in ε: the sequence decreases as ε → 0.
      EXPECT_LE(r.cost, previous_cost + slack) << "p " << p << " eps " << epsilon;
      previous_cost = r.cost;
    }
    // At ε = 3·10^-3 (costs O(1)) the entropic cost is within 10^-3 relative of W_p^p (measured: 5·10^-5).
    EXPECT_NEAR(previous_cost, exact, 1e-3 * exact) << "p " << p;
  }
}

TEST(Sinkhorn, ReportedMarginalErrorMatchesTheMaterialisedPlan) {
  const auto mu = random_measure(25, 2, 3, 0, true);
  const auto nu = random_measure(17, 2, 4, 0.3);
  const double p = 2, epsilon = 0.05;
  for (std::int64_t budget : {std::int64_t(40), std::int64_t(100000)}) {
    SinkhornOptions o;
    o.epsilon = epsilon;
    o.tolerance = 1e-12;
    o.max_iterations = budget;
    const SinkhornResult<double> r = sinkhorn(mu, nu, p, o);
    const Matrix<double> c = cost_matrix(mu, nu, p);
    Matrix<double> plan(mu.size(), nu.size());
    for (Eigen::Index i = 0; i < mu.size(); ++i)
      for (Eigen::Index j = 0; j < nu.size(); ++j)
        plan(i, j) = mu.weights()(i) * nu.weights()(j) * std::exp((r.f(i) + r.g(j) - c(i, j)) / epsilon);
    const double row_error = (plan.rowwise().sum() - mu.weights()).lpNorm<1>();
    const double col_error = (plan.colwise().sum().transpose() - nu.weights()).lpNorm<1>();
    EXPECT_NEAR(r.marginal_error, row_error, 1e-13 + 1e-9 * row_error) << "budget " << budget;
    EXPECT_LE(col_error, 1e-13);  // the last update was the g-update: columns exact
    EXPECT_NEAR(r.cost, (plan.array() * c.array()).sum(), 1e-12);
    const double mass = plan.sum();
    EXPECT_NEAR(r.objective, mu.weights().dot(r.f) + nu.weights().dot(r.g) - epsilon * (mass - 1), 1e-12);
    EXPECT_EQ(r.converged(), r.marginal_error <= o.tolerance);
  }
}

TEST(Sinkhorn, TinyBudgetIsReportedAsNotConverged) {
  const auto mu = random_measure(30, 2, 5);
  const auto nu = random_measure(30, 2, 6, 1.0);
  SinkhornOptions o;
  o.epsilon = 1e-3;
  o.max_iterations = 3;
  const SinkhornResult<double> r = sinkhorn(mu, nu, 2.0, o);
  EXPECT_EQ(r.status, SinkhornStatus::max_iterations);
  EXPECT_FALSE(r.converged());
  EXPECT_EQ(r.iterations, 3);
  EXPECT_GT(r.marginal_error, o.tolerance);
  EXPECT_EQ(r.epsilon, 1e-3);
  EXPECT_STREQ(to_string(r.status), "max_iterations");
  const SinkhornDivergenceResult d = sinkhorn_divergence(mu, nu, 2.0, o);
  EXPECT_FALSE(d.converged());
}

TEST(Sinkhorn, SymmetricSolverAgreesWithTheGeneralOne) {
  // For mu = nu the alternating iteration crawls (the unregularised dual optimum is far from unique) unless ε
  // is comparable to the nearest-neighbour costs; the averaged symmetric update has no such problem.
  const auto mu = random_measure(30, 3, 7);
  SinkhornOptions o;
  o.epsilon = 0.5;
  o.tolerance = 1e-11;
  const SinkhornResult<double> general = sinkhorn(mu, mu, 2.0, o);
  const SinkhornResult<double> symmetric = sinkhorn_symmetric(mu, 2.0, o);
  ASSERT_TRUE(general.converged());
  ASSERT_TRUE(symmetric.converged());
  EXPECT_NEAR(general.objective, symmetric.objective, 1e-9);
  EXPECT_NEAR(general.cost, symmetric.cost, 1e-9);
}

TEST(Sinkhorn, DivergenceIsNonnegativeAndZeroForEqualMeasures) {
  SinkhornOptions o;
  o.tolerance = 1e-11;
  for (double p : {1.0, 2.0})
    for (double epsilon : {1.0, 0.1, 0.03}) {
      o.epsilon = epsilon;
      const auto mu = random_measure(30, 2, 8);
      if (epsilon >= 0.1) {  // mu = nu: see SymmetricSolverAgreesWithTheGeneralOne for small ε
        const SinkhornDivergenceResult same = sinkhorn_divergence(mu, mu, p, o);
        ASSERT_TRUE(same.converged()) << "p " << p << " eps " << epsilon;
        EXPECT_NEAR(same.value, 0, 1e-9) << "p " << p << " eps " << epsilon;
      }
      for (double shift : {0.05, 0.5, 2.0}) {
        const auto nu = random_measure(25, 2, 9, shift);
        const SinkhornDivergenceResult d = sinkhorn_divergence(mu, nu, p, o);
        ASSERT_TRUE(d.converged());
        EXPECT_GT(d.value, 0) << "p " << p << " eps " << epsilon << " shift " << shift;
        // S_ε ≤ OT_ε(mu, nu) since OT_ε(mu, mu), OT_ε(nu, nu) ≥ 0.
        EXPECT_LE(d.value, d.cross + 1e-9);
      }
    }
}

TEST(Sinkhorn, DivergenceApproachesExactTransportForSmallEpsilon) {
  const auto mu = random_measure(30, 2, 10);
  const auto nu = random_measure(30, 2, 11, 1.0);
  const double exact = wasserstein_exact(mu, nu, 2.0).cost;
  SinkhornOptions o;
  o.epsilon = 1e-3;
  o.tolerance = 1e-10;
  const SinkhornDivergenceResult d = sinkhorn_divergence(mu, nu, 2.0, o);
  ASSERT_TRUE(d.converged());
  EXPECT_NEAR(d.value, exact, 0.01 * exact);
}

TEST(Sinkhorn, FloatAgreesWithDouble) {
  const auto mu = random_measure(50, 3, 12);
  const auto nu = random_measure(40, 3, 13, 0.2);
  SinkhornOptions o;
  o.epsilon = 0.1;
  o.tolerance = 1e-4;
  const SinkhornResult<double> rd = sinkhorn(mu, nu, 2.0, o);
  // float weights sum to 1 only to float rounding: from_weights(..., normalize = true).
  const auto muf =
      DiscreteMeasure<float>::from_weights(mu.atoms().cast<float>(), mu.weights().cast<float>(), true);
  const auto nuf =
      DiscreteMeasure<float>::from_weights(nu.atoms().cast<float>(), nu.weights().cast<float>(), true);
  const SinkhornResult<float> rf = sinkhorn(muf, nuf, 2.0, o);
  ASSERT_TRUE(rd.converged());
  ASSERT_TRUE(rf.converged());
  EXPECT_NEAR(rf.cost, rd.cost, 1e-3 * rd.cost);
  EXPECT_NEAR(rf.objective, rd.objective, 1e-3 * std::abs(rd.objective));
}

TEST(Sinkhorn, RejectsBadInput) {
  const auto mu = random_measure(5, 2, 14);
  const auto nu3 = random_measure(5, 3, 15);
  SinkhornOptions o;
  EXPECT_THROW(sinkhorn(mu, nu3, 2.0, o), InputError);
  EXPECT_THROW(sinkhorn(mu, mu, 0.5, o), InputError);
  for (double bad : {0.0, -1.0, double(NAN), double(INFINITY)}) {
    o.epsilon = bad;
    EXPECT_THROW(sinkhorn(mu, mu, 2.0, o), InputError) << bad;
  }
  o = {};
  o.scaling = 1.0;
  EXPECT_THROW(sinkhorn(mu, mu, 2.0, o), InputError);
  o = {};
  o.max_iterations = 0;
  EXPECT_THROW(sinkhorn_symmetric(mu, 2.0, o), InputError);
  o = {};
  o.tolerance = 0;
  EXPECT_THROW(sinkhorn_divergence(mu, mu, 2.0, o), InputError);
}

}  // namespace
}  // namespace regatta::measures
