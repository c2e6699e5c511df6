// Network simplex: against a brute-force assignment (Birkhoff: uniform equal-size measures have a
// permutation optimum), duality (gap ~ 0, dual feasibility, complementary slackness), exact marginals,
// degenerate and corner cases, and the three cost interfaces agreeing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <regatta/core/random_matrix.hpp>
#include <regatta/measures/network_simplex.hpp>
#include <vector>

#include "support/tolerance.hpp"

namespace regatta::measures {
namespace {

constexpr double eps = std::numeric_limits<double>::epsilon();

Matrix<double> cost_matrix(const Matrix<double>& x, const Matrix<double>& y, double p) {
  Matrix<double> c(x.rows(), y.rows());
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    for (Eigen::Index j = 0; j < y.rows(); ++j) c(i, j) = std::pow((x.row(i) - y.row(j)).norm(), p);
  return c;
}

Eigen::VectorXd random_weights(Eigen::Index n, std::uint64_t seed, double zero_fraction = 0) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Eigen::VectorXd w(n);
  for (Eigen::Index i = 0; i < n; ++i) w(i) = u(gen) < zero_fraction ? 0.0 : u(gen) + 0.01;
  if (w.sum() == 0) w(0) = 1;
  return w / w.sum();
}

/// Two computations of a transport cost Σ F_ij C_ij over a plan of at most n + m − 1 entries: masses off by
/// ~(n + m) eps each (sums and differences of weights along the tree), on the scale max |C|, plus the
/// sums' own rounding; c = 4 for the two sides.
double cost_tolerance(Eigen::Index n, Eigen::Index m, const Matrix<double>& c) {
  return testing::rounding_bound<double>(4, double(n + m)) * c.cwiseAbs().maxCoeff();
}

/// Two orders of one sum of k nonnegative terms with exact masses: each is within (k − 1) eps of the exact
/// sum, relative (c = 2 for the two).
double reordered_sum_rounding(Eigen::Index k) { return testing::rounding_bound<double>(2, double(k)); }

// Checks every property of an optimal plan; `scale` is max |C|.
void expect_optimal_plan(const TransportPlan& plan, const Eigen::VectorXd& a, const Eigen::VectorXd& b,
                         const Matrix<double>& c) {
  ASSERT_EQ(plan.status, TransportStatus::optimal);
  // The smallest normal number keeps the tolerance positive for an all-zero cost matrix.
  const double scale = std::max(std::numeric_limits<double>::min(), c.cwiseAbs().maxCoeff());
  const double tol = 1e3 * eps * scale;
  EXPECT_LE(Eigen::Index(plan.entries.size()), a.size() + b.size() - 1);
  Eigen::VectorXd row = Eigen::VectorXd::Zero(a.size()), col = Eigen::VectorXd::Zero(b.size());
  double primal = 0;
  for (const Coupling& e : plan.entries) {
    EXPECT_GT(e.mass, 0);
    row(e.i) += e.mass;
    col(e.j) += e.mass;
    primal += e.mass * c(e.i, e.j);
    // complementary slackness: positive mass only where u_i + v_j = C_ij
    EXPECT_NEAR(plan.u(e.i) + plan.v(e.j), c(e.i, e.j), tol);
  }
  EXPECT_NEAR(primal, plan.cost, tol);
  EXPECT_LE((row - a).cwiseAbs().maxCoeff(), 64 * eps * (a.size() + b.size()));
  EXPECT_LE((col - b).cwiseAbs().maxCoeff(), 64 * eps * (a.size() + b.size()));
  double worst = -std::numeric_limits<double>::infinity();
  for (Eigen::Index i = 0; i < a.size(); ++i)
    for (Eigen::Index j = 0; j < b.size(); ++j) worst = std::max(worst, plan.u(i) + plan.v(j) - c(i, j));
  EXPECT_LE(worst, tol) << "dual infeasible";
  const double dual = a.dot(plan.u) + b.dot(plan.v);
  EXPECT_NEAR(dual, plan.cost, tol) << "duality gap";
}

double brute_force_assignment(const Matrix<double>& c) {
  const int n = int(c.rows());
  std::vector<int> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  double best = std::numeric_limits<double>::infinity();
  do {
    double s = 0;
    for (int i = 0; i < n; ++i) s += c(i, perm[std::size_t(i)]);
    best = std::min(best, s);
  } while (std::next_permutation(perm.begin(), perm.end()));
  return best / n;
}

TEST(NetworkSimplex, MatchesBruteForceAssignmentForUniformMeasures) {
  for (int n = 1; n <= 7; ++n)
    for (std::uint64_t seed = 0; seed < 6; ++seed)
      for (double p : {1.0, 2.0, 3.0}) {
        const Matrix<double> x = random_matrix({n, 2, RandomMatrixKind::gaussian, 1, 1e12, 100 + seed});
        const Matrix<double> y = random_matrix({n, 2, RandomMatrixKind::gaussian, 1, 1e12, 200 + seed});
        const Matrix<double> c = cost_matrix(x, y, p);
        const Eigen::VectorXd w = Eigen::VectorXd::Constant(n, 1.0 / n);
        const TransportPlan plan = network_simplex(w, w, c);
        expect_optimal_plan(plan, w, w, c);
        EXPECT_NEAR(plan.cost, brute_force_assignment(c), cost_tolerance(n, n, c)) << "n=" << n << " p=" << p;
      }
}

TEST(NetworkSimplex, RandomWeightsUnequalSizesSatisfyDuality) {
  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    const Eigen::Index n = 40 + Eigen::Index(seed) * 7, m = 29 + Eigen::Index(seed) * 3;
    const Matrix<double> x = random_matrix({n, 3, RandomMatrixKind::gaussian, 1, 1e12, seed});
    const Matrix<double> y = random_matrix({m, 3, RandomMatrixKind::gaussian, 1, 1e12, seed + 50});
    const Eigen::VectorXd a = random_weights(n, seed, 0.2), b = random_weights(m, seed + 9, 0.2);
    for (double p : {1.0, 1.5, 2.0}) {
      const Matrix<double> c = cost_matrix(x, y, p);
      const TransportPlan dense = network_simplex(a, b, c);
      expect_optimal_plan(dense, a, b, c);
      const TransportPlan cloud = network_simplex(a, b, x, y, p);
      expect_optimal_plan(cloud, a, b, c);
      EXPECT_NEAR(cloud.cost, dense.cost, cost_tolerance(n, m, c));
      const std::function<double(Eigen::Index, Eigen::Index)> f = [&](Eigen::Index i, Eigen::Index j) {
        return c(i, j);
      };
      EXPECT_NEAR(network_simplex(a, b, f).cost, dense.cost, cost_tolerance(n, m, c));
    }
  }
}

TEST(NetworkSimplex, DegenerateTiedCostsAndSmallBlocks) {
  // Integer grid points: many equal costs; tiny blocks force many pricing passes.
  Matrix<double> x(8, 2), y(8, 2);
  for (int i = 0; i < 8; ++i) {
    x.row(i) << i % 3, i % 2;
    y.row(i) << (i * 5) % 4, 1;
  }
  const Eigen::VectorXd w = Eigen::VectorXd::Constant(8, 1.0 / 8);
  NetworkSimplexOptions small;
  small.block_factor = 0.01;
  for (double p : {1.0, 2.0}) {
    const Matrix<double> c = cost_matrix(x, y, p);
    expect_optimal_plan(network_simplex(w, w, c, small), w, w, c);
    // Masses 1/8 are exact: an optimal assignment's cost is one sum of 8 terms, in two orders.
    const double assignment = brute_force_assignment(c);
    EXPECT_NEAR(network_simplex(w, w, c).cost, assignment, reordered_sum_rounding(8) * assignment)
        << "p=" << p;
  }
  // All costs zero (identical points).
  const Matrix<double> zero = Matrix<double>::Zero(5, 3);
  const Eigen::VectorXd a = random_weights(5, 1), b = random_weights(3, 2);
  const TransportPlan plan = network_simplex(a, b, zero);
  EXPECT_EQ(plan.status, TransportStatus::optimal);
  EXPECT_EQ(plan.cost, 0.0);
}

TEST(NetworkSimplex, SingleAtomOnEitherSide) {
  const Matrix<double> y = random_matrix({6, 2, RandomMatrixKind::gaussian, 1, 1e12, 3});
  const Matrix<double> x = Matrix<double>::Zero(1, 2);
  const Eigen::VectorXd one = Eigen::VectorXd::Ones(1);
  const Eigen::VectorXd b = random_weights(6, 4, 0.3);
  const Matrix<double> c = cost_matrix(x, y, 2);
  const TransportPlan plan = network_simplex(one, b, c);
  expect_optimal_plan(plan, one, b, c);
  // One source atom: the masses are b itself, exactly, and the cost one sum of 6 terms in two orders.
  const double direct = (c.row(0).transpose().array() * b.array()).sum();
  EXPECT_NEAR(plan.cost, direct, reordered_sum_rounding(6) * direct);
  const TransportPlan flipped = network_simplex(b, one, Matrix<double>(c.transpose()));
  expect_optimal_plan(flipped, b, one, c.transpose());
  const TransportPlan both = network_simplex(one, one, Matrix<double>(Matrix<double>::Constant(1, 1, 2.5)));
  EXPECT_EQ(both.cost, 2.5);
  ASSERT_EQ(both.entries.size(), 1u);
}

TEST(NetworkSimplex, MaxIterationsIsReportedNotHidden) {
  const Matrix<double> x = random_matrix({30, 2, RandomMatrixKind::gaussian, 1, 1e12, 5});
  const Matrix<double> y = random_matrix({30, 2, RandomMatrixKind::gaussian, 1, 1e12, 6});
  const Eigen::VectorXd w = Eigen::VectorXd::Constant(30, 1.0 / 30);
  NetworkSimplexOptions few;
  few.max_iterations = 3;
  EXPECT_EQ(network_simplex(w, w, x, y, 2.0, few).status, TransportStatus::max_iterations);
}

TEST(NetworkSimplex, RejectsMalformedInput) {
  const Matrix<double> c = Matrix<double>::Ones(2, 3);
  Eigen::VectorXd a(2), b(3);
  a << 0.5, 0.5;
  b << 0.2, 0.3, 0.5;
  EXPECT_NO_THROW(network_simplex(a, b, c));
  Eigen::VectorXd neg = a;
  neg << 1.5, -0.5;
  EXPECT_THROW(network_simplex(neg, b, c), InputError);
  Eigen::VectorXd heavy = b * 2;
  EXPECT_THROW(network_simplex(a, heavy, c), InputError);
  EXPECT_THROW(network_simplex(a, b, Matrix<double>(Matrix<double>::Ones(3, 3))), InputError);
  Matrix<double> nan_cost = c;
  nan_cost(1, 2) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(network_simplex(a, b, nan_cost), InputError);
  EXPECT_THROW(network_simplex(Eigen::VectorXd(0), b, Matrix<double>(0, 3)), InputError);
  const Matrix<double> x = Matrix<double>::Zero(2, 2), y3 = Matrix<double>::Zero(3, 3);
  EXPECT_THROW(network_simplex(a, b, x, y3, 2.0), InputError);  // dimension mismatch
  EXPECT_THROW(network_simplex(a, b, x, Matrix<double>(Matrix<double>::Zero(3, 2)), 0.5), InputError);
}

}  // namespace
}  // namespace regatta::measures
