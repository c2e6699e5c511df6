// Sinkhorn: convergence to the exact W_p^p (network simplex) as ε → 0 within the entropic bracket
// W ≤ <P_ε, C> ≤ OT_ε ≤ W + ε min(H(a), H(b)), monotonicity in ε, the reported marginal error against the
// marginals of the materialised plan, the debiased divergence (≥ 0, = 0 for mu = nu), non-convergence
// reported as a status, float against double, and input errors; the dense and streamed paths of
// measures::sinkhorn (SinkhornOptions::kernel) against each other, and which one runs.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <regatta/core/error.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/measures/sinkhorn.hpp>
#include <regatta/measures/sinkhorn_attention.hpp>
#include <regatta/measures/wasserstein.hpp>
#include <string>
#include <vector>
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

/// The largest entry of the cost matrix, max C.
double max_cost(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu, double p) {
  return cost_matrix(mu, nu, p).maxCoeff();
}

/// How far a run stopped at marginal error ≤ τ may sit from the fixed point in cost units: a plan whose
/// row marginals are off by δ in L1 (columns exact) moves <P, C> and the objective by at most δ max C, and
/// two such runs (or one run and the exact value) differ by twice that; c = 4 doubles it again for the
/// rounding of the sums. The rounding itself, 64 eps per entry of the n m entries (the log-sum-exp of each
/// potential update, the sums), is added for runs at tolerances near the rounding floor.
double stopping_slack(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu, double p,
                      double tolerance) {
  const double cmax = max_cost(mu, nu, p);
  return 4 * tolerance * cmax + testing::rounding_bound<double>(64, double(mu.size() * nu.size())) * cmax;
}

TEST(Sinkhorn, ConvergesToExactTransportInsideTheEntropicBracket) {
  for (double p : {1.0, 2.0, 1.5}) {
    const auto mu = random_measure(40, 3, 1);
    const auto nu = random_measure(30, 3, 2, 0.5);
    const double exact = wasserstein_exact(mu, nu, p).cost;
    const double h = std::min(entropy(mu.weights()), entropy(nu.weights()));
    double previous_cost = INFINITY, last_epsilon = 0;
    for (double epsilon : {1.0, 0.3, 0.1, 0.03, 0.01, 0.003}) {
      SinkhornOptions o;
      o.epsilon = epsilon;
      o.tolerance = 1e-10;
      const SinkhornResult<double> r = sinkhorn(mu, nu, p, o);
      ASSERT_TRUE(r.converged()) << "p " << p << " eps " << epsilon << " error " << r.marginal_error;
      EXPECT_LE(r.marginal_error, o.tolerance);
      // Bracket of docs/math/transport.md#entropic, up to the tolerance times the largest cost.
      const double slack = stopping_slack(mu, nu, p, o.tolerance);
      EXPECT_GE(r.cost, exact - slack) << "p " << p << " eps " << epsilon;
      EXPECT_LE(r.cost, r.objective + slack);
      EXPECT_LE(r.objective, exact + epsilon * h + slack);
      // <P_ε, C> is nondecreasing in ε: the sequence decreases as ε → 0.
      EXPECT_LE(r.cost, previous_cost + slack) << "p " << p << " eps " << epsilon;
      previous_cost = r.cost;
      last_epsilon = epsilon;
    }
    // The bracket proves only |<P_ε, C> - W_p^p| ≤ ε h; the cost's entropic bias is much smaller (for a
    // unique optimal plan it vanishes exponentially in 1/ε, Cominetti & San Martín 1994). At the last
    // ε = 3·10^-3 it is measured at ≤ ε h / 100: require a tenth of ε h, which the bracket alone does not
    // force.
    const double cost_bias = last_epsilon * h / 10;
    EXPECT_NEAR(previous_cost, exact, cost_bias) << "p " << p;
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
    // Each entry's exponent (f_i + g_j - C_ij)/ε carries an absolute rounding of ~eps κ, κ = (max |f| +
    // max |g| + max C)/ε, hence a relative one of eps κ; sums of entries of total mass 1 (over n + m terms)
    // are then off by ~(κ + n + m) eps. The solver's own evaluation rounds the same way: c = 2.
    const double kappa = (r.f.cwiseAbs().maxCoeff() + r.g.cwiseAbs().maxCoeff() + c.maxCoeff()) / epsilon;
    const double mass_rounding = testing::rounding_bound<double>(2, kappa + double(mu.size() + nu.size()));
    EXPECT_NEAR(r.marginal_error, row_error, mass_rounding) << "budget " << budget;
    EXPECT_LE(col_error, mass_rounding);  // the last update was the g-update: columns exact
    EXPECT_NEAR(r.cost, (plan.array() * c.array()).sum(), mass_rounding * c.maxCoeff());
    const double mass = plan.sum();
    // The objective's terms <a, f> + <b, g> are at most max |f| + max |g| ≤ ε κ in size.
    EXPECT_NEAR(r.objective, mu.weights().dot(r.f) + nu.weights().dot(r.g) - epsilon * (mass - 1),
                mass_rounding * epsilon * kappa);
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
  EXPECT_EQ(r.epsilon, o.epsilon);
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
  const double slack = stopping_slack(mu, mu, 2.0, o.tolerance);
  EXPECT_NEAR(general.objective, symmetric.objective, slack);
  EXPECT_NEAR(general.cost, symmetric.cost, slack);
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
        EXPECT_NEAR(same.value, 0, stopping_slack(mu, mu, p, o.tolerance)) << "p " << p << " eps " << epsilon;
      }
      for (double shift : {0.05, 0.5, 2.0}) {
        const auto nu = random_measure(25, 2, 9, shift);
        const SinkhornDivergenceResult d = sinkhorn_divergence(mu, nu, p, o);
        ASSERT_TRUE(d.converged());
        EXPECT_GT(d.value, 0) << "p " << p << " eps " << epsilon << " shift " << shift;
        // S_ε ≤ OT_ε(mu, nu) since OT_ε(mu, mu), OT_ε(nu, nu) ≥ 0.
        EXPECT_LE(d.value, d.cross + stopping_slack(mu, nu, p, o.tolerance));
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
  // W ≤ OT_ε(mu, nu) ≤ W + ε min(H(a), H(b)) and 0 ≤ OT_ε(mu, mu) ≤ ε H(a) (the bracket of
  // docs/math/transport.md#entropic
  // for each solve) give W - ε (H(a) + H(b))/2 ≤ S_ε ≤ W + ε min(H(a), H(b)).
  const double entropic_bias = o.epsilon * std::max(entropy(mu.weights()), entropy(nu.weights()));
  EXPECT_NEAR(d.value, exact, entropic_bias + stopping_slack(mu, nu, 2.0, o.tolerance));
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
  // Both runs within the tolerance of the fixed point (2 τ max C), plus float's rounding of the entries:
  // exponents (f + g - C)/ε of size up to max C/ε, each off by that many eps_f, relative to costs ≤ max C.
  const double cmax = max_cost(mu, nu, 2.0);
  const double tol = 2 * o.tolerance * cmax + testing::rounding_bound<float>(1, cmax / o.epsilon) * cmax;
  EXPECT_NEAR(rf.cost, rd.cost, tol);
  EXPECT_NEAR(rf.objective, rd.objective, tol);
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

// check_sinkhorn_options is the one check of the options: each out-of-range member is named by its member
// name (or the front end's spelling of it), with the same text whether the measure-level or the attention
// solver runs.
TEST(Sinkhorn, OptionCheckNamesTheMemberOnceForEveryFrontEnd) {
  struct Bad {
    const char* member;
    std::function<void(SinkhornOptions&)> set;
  };
  const std::vector<Bad> bad = {
      {"epsilon", [](SinkhornOptions& o) { o.epsilon = 0; }},
      {"epsilon", [](SinkhornOptions& o) { o.epsilon = double(NAN); }},
      {"scaling", [](SinkhornOptions& o) { o.scaling = 1; }},
      {"epsilon_start", [](SinkhornOptions& o) { o.epsilon_start = -1; }},
      {"stage_iterations", [](SinkhornOptions& o) { o.stage_iterations = 0; }},
      {"max_iterations", [](SinkhornOptions& o) { o.max_iterations = 0; }},
      {"tolerance", [](SinkhornOptions& o) { o.tolerance = double(INFINITY); }},
  };
  const auto mu = random_measure(4, 2, 16);
  const auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NO_THROW(check_sinkhorn_options(SinkhornOptions{}));
  for (const Bad& b : bad) {
    SinkhornOptions o;
    b.set(o);
    const std::string library = message([&] { check_sinkhorn_options(o); });
    EXPECT_NE(library.find(b.member), std::string::npos) << library;
    EXPECT_EQ(library.find('\n'), std::string::npos) << library;
    EXPECT_EQ(message([&] { (void)sinkhorn(mu, mu, 2.0, o); }), library);
    AttentionSinkhornOptions a;
    a.sinkhorn = o;
    EXPECT_EQ(message([&] { (void)sinkhorn_divergence_sq_euclidean(mu, mu, a); }), library);
    const std::string flag =
        message([&] { check_sinkhorn_options(o, [](const std::string& m) { return "--x-" + m; }); });
    EXPECT_NE(flag.find(std::string("--x-") + b.member), std::string::npos) << flag;
  }
}

/// Positive random weights (the dense path needs them), atoms uniform in [0, 1]^d.
DiscreteMeasure<double> weighted_uniform(Eigen::Index n, Eigen::Index d, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(0, 1), w(0.2, 1);
  Matrix<double> x(n, d);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index k = 0; k < d; ++k) x(i, k) = u(gen);
  Vector<double> weights(n);
  for (Eigen::Index i = 0; i < n; ++i) weights(i) = w(gen);
  return DiscreteMeasure<double>::from_weights(std::move(x), std::move(weights), true);
}

// The dense path (scaling iteration on the materialised Gibbs kernel) and the streamed path (pairwise::reduce
// soft c-transforms) compute the same quantities: plans feasible to the reported L1 row error δ (columns
// exact) differ in <P, C> by at most (δ_dense + δ_streamed) max C once both sit within δ of the fixed point;
// the objective likewise, plus ε times the mass defect of each. Rounding of the n m terms is added.
TEST(Sinkhorn, DenseAndStreamedPathsAgreeWithinTheMarginalErrorBound) {
  for (Eigen::Index d : {2, 3, 5}) {
    const auto mu = weighted_uniform(60, d, 100 + d);
    const auto nu = weighted_uniform(45, d, 200 + d);
    const double cmax = max_cost(mu, nu, 2.0);
    const double rounding = testing::rounding_bound<double>(64, double(mu.size() * nu.size())) * cmax;
    double mean_cost = cost_matrix(mu, nu, 2.0).mean();
    for (double relative : {1.0, 0.1, 0.05, 0.02}) {
      SinkhornOptions o;
      o.epsilon = relative * mean_cost;
      o.tolerance = 1e-9;
      o.kernel = SinkhornKernel::streamed;
      const SinkhornResult<double> streamed = sinkhorn(mu, nu, 2.0, o);
      o.kernel = SinkhornKernel::dense;
      const SinkhornResult<double> dense = sinkhorn(mu, nu, 2.0, o);
      o.kernel = SinkhornKernel::automatic;
      const SinkhornResult<double> automatic = sinkhorn(mu, nu, 2.0, o);
      const std::string what = "d " + std::to_string(d) + " eps " + std::to_string(o.epsilon);
      ASSERT_TRUE(streamed.converged()) << what;
      ASSERT_TRUE(dense.converged()) << what << " " << dense.marginal_error;
      EXPECT_EQ(streamed.kernel, SinkhornKernel::streamed);
      EXPECT_EQ(dense.kernel, SinkhornKernel::dense);
      EXPECT_EQ(automatic.kernel, SinkhornKernel::dense) << "small, positive weights, p = 2";
      EXPECT_LE(dense.marginal_error, o.tolerance);
      EXPECT_LE(std::abs(dense.iterations - streamed.iterations), 2) << what;
      EXPECT_EQ(dense.epsilon, streamed.epsilon);
      const double bound = (dense.marginal_error + streamed.marginal_error) * cmax + rounding;
      EXPECT_NEAR(dense.cost, streamed.cost, bound) << what;
      EXPECT_NEAR(dense.objective, streamed.objective,
                  bound + o.epsilon * (dense.marginal_error + streamed.marginal_error))
          << what;
      // The same computation twice gives the same bits.
      EXPECT_EQ(automatic.cost, dense.cost);
    }
  }
}

TEST(Sinkhorn, AutomaticKernelIsDenseOnlyWhereItAppliesAndFits) {
  const auto mu = weighted_uniform(40, 3, 1), nu = weighted_uniform(30, 3, 2);
  SinkhornOptions o;
  o.epsilon = 0.1;
  EXPECT_GT(dense_kernel_budget(o), 0u);
  EXPECT_LE(dense_kernel_budget(o), o.dense_kernel_bytes);
  EXPECT_EQ(sinkhorn_kernel_for(mu, nu, 2.0, o), SinkhornKernel::dense);
  EXPECT_EQ(sinkhorn_kernel_for(mu, nu, 1.0, o), SinkhornKernel::streamed) << "p != 2";
  EXPECT_EQ(sinkhorn(mu, nu, 1.5, o).kernel, SinkhornKernel::streamed);
  const auto with_zero = random_measure(40, 3, 1, 0, true);
  EXPECT_EQ(sinkhorn_kernel_for(with_zero, nu, 2.0, o), SinkhornKernel::streamed) << "a zero weight";
  EXPECT_EQ(sinkhorn(with_zero, nu, 2.0, o).kernel, SinkhornKernel::streamed);
  o.dense_kernel_bytes = 40 * 30 * sizeof(double);
  EXPECT_EQ(sinkhorn_kernel_for(mu, nu, 2.0, o), SinkhornKernel::dense) << "exactly fits";
  o.dense_kernel_bytes -= 1;
  EXPECT_EQ(sinkhorn_kernel_for(mu, nu, 2.0, o), SinkhornKernel::streamed) << "over the budget";
  EXPECT_EQ(sinkhorn(mu, nu, 2.0, o).kernel, SinkhornKernel::streamed);
  // Forced: streamed always; dense over the budget, but refused where it does not apply.
  o.kernel = SinkhornKernel::dense;
  EXPECT_EQ(sinkhorn(mu, nu, 2.0, o).kernel, SinkhornKernel::dense);
  EXPECT_TRUE(dense_kernel_refusal(mu, nu, 2.0).empty());
  EXPECT_NE(dense_kernel_refusal(mu, nu, 1.0).find("p = 2"), std::string::npos);
  EXPECT_NE(dense_kernel_refusal(with_zero, nu, 2.0).find("zero weight"), std::string::npos);
  EXPECT_THROW(sinkhorn(mu, nu, 1.0, o), InputError);
  EXPECT_THROW(sinkhorn(with_zero, nu, 2.0, o), InputError);
  const auto muf =
      DiscreteMeasure<float>::from_weights(mu.atoms().cast<float>(), mu.weights().cast<float>(), true);
  const auto nuf =
      DiscreteMeasure<float>::from_weights(nu.atoms().cast<float>(), nu.weights().cast<float>(), true);
  EXPECT_THROW(sinkhorn(muf, nuf, 2.0, o), InputError) << "the dense kernel is double only";
  o.kernel = SinkhornKernel::automatic;
  o.tolerance = 1e-4;  // float: above its rounding floor
  EXPECT_EQ(sinkhorn(muf, nuf, 2.0, o).kernel, SinkhornKernel::streamed);
  EXPECT_STREQ(to_string(SinkhornKernel::dense), "dense");
}

// The dense path keeps the contract of the loop: poll after every iteration (a way to stop), the budget
// spent during ε-scaling reported as max_iterations with every number at the target ε.
TEST(Sinkhorn, DensePathPollsEveryIterationAndReportsTheBudgetRunningOut) {
  const auto mu = weighted_uniform(50, 3, 5), nu = weighted_uniform(40, 3, 6);
  SinkhornOptions o;
  o.epsilon = 0.01;
  o.kernel = SinkhornKernel::dense;
  std::int64_t calls = 0, last = -1;
  bool monotone = true;
  o.poll = [&](std::int64_t k, std::int64_t limit) {
    ++calls;
    monotone = monotone && k >= last;
    last = k;
    EXPECT_EQ(limit, o.max_iterations);
  };
  const SinkhornResult<double> r = sinkhorn(mu, nu, 2.0, o);
  ASSERT_TRUE(r.converged());
  // Every iteration, plus every build of the kernel (the first at 0 iterations, one per ε stage at least).
  EXPECT_GE(calls, r.iterations + r.stages);
  EXPECT_TRUE(monotone);
  EXPECT_EQ(last, r.iterations);
  o.max_iterations = 4;  // inside ε-scaling
  const SinkhornResult<double> cut = sinkhorn(mu, nu, 2.0, o);
  EXPECT_EQ(cut.status, SinkhornStatus::max_iterations);
  EXPECT_EQ(cut.iterations, 4);
  EXPECT_EQ(cut.kernel, SinkhornKernel::dense);
  EXPECT_GT(cut.marginal_error, o.tolerance);
  o.max_iterations = 100000;
  o.poll = [](std::int64_t k, std::int64_t) {
    if (k == 3) throw std::runtime_error("stop");
  };
  EXPECT_THROW(sinkhorn(mu, nu, 2.0, o), std::runtime_error);
}

}  // namespace
}  // namespace regatta::measures
