// pgd_lower_bound (operators/lipschitz/pgd.hpp): the largest output change Δ*(X, ε) = max_{‖E‖_F ≤ ε}
// ‖F(X + E) − F(X)‖_F of a small attention layer, checked against computations that share nothing with the
// ascent:
//   * its certified value is re-derived at the returned witness Y in interval64 (binary64 endpoints,
//     directed rounding; pgd.cpp certifies in MPFI at 128 bits): ‖Y − X‖_F ≤ ε and the re-evaluated
//     ‖F(Y) − F(X)‖_F encloses a number ≥ certified_lower;
//   * it is at least what a plain random search of the ball finds (double);
//   * it is at most ε·sup_{ball} ‖J‖₂ (mean-value inequality on the convex ball), the sup certified by the
//     region enclosure (region.hpp), a different method;
//   * for a small ε it reaches the first-order value ε·‖J(X)‖₂ (dense Jacobian, SVD) up to O(ε²).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include <Eigen/SVD>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/lipschitz/pgd.hpp>
#include <regatta/operators/lipschitz/region.hpp>

namespace regatta::lip {
namespace {

using operators::AttentionLayer;
using operators::AttentionOptions;

AttentionLayer small_layer(std::uint64_t seed) {
  operators::RandomLayerSpec spec;
  spec.d = 2;
  spec.heads = 1;
  spec.seed = seed;
  spec.scale = 2.0;  // sharp enough softmax that the change is not linear over the ball
  spec.biases = true;
  return operators::random_layer(spec);
}

Matrix<double> input(Eigen::Index n, Eigen::Index d, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  Matrix<double> X(n, d);
  for (Eigen::Index k = 0; k < X.size(); ++k) X.data()[k] = normal(rng);
  return X;
}

/// The top right singular vector of J(X), as an n×d direction (row-major flattening of the Jacobian).
Matrix<double> top_direction(const Matrix<double>& J, Eigen::Index n, Eigen::Index d) {
  Eigen::JacobiSVD<Eigen::MatrixXd> svd(J, Eigen::ComputeFullV);
  const Vector<double> v = svd.matrixV().col(0);
  Matrix<double> D(n, d);
  for (Eigen::Index i = 0; i < n; ++i)
    for (Eigen::Index a = 0; a < d; ++a) D(i, a) = v(i * d + a);
  return D;
}

/// max over `samples` random E of the ball (on the sphere and inside) of ‖F(X + E) − F(X)‖_F, in double.
double random_search(const operators::Block<double>& block, const Matrix<double>& X, double eps, int samples,
                     std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const Matrix<double> F0 = block.forward(X);
  double best = 0;
  for (int s = 0; s < samples; ++s) {
    Matrix<double> E(X.rows(), X.cols());
    for (Eigen::Index k = 0; k < E.size(); ++k) E.data()[k] = normal(rng);
    const double radius = s % 2 == 0 ? eps : eps * std::pow(unit(rng), 1.0 / double(E.size()));
    E *= radius / E.norm() * (1 - 1e-12);
    best = std::max(best, (block.forward(X + E) - F0).norm());
  }
  return best;
}

struct Checked {
  double distance_upper;  ///< ‖Y − X‖_F, upper end in interval64
  interval64 change;      ///< ‖F(Y) − F(X)‖_F enclosed in interval64
};

Checked recheck(const AttentionLayer& layer, const AttentionOptions& options, const Matrix<double>& X,
                const Matrix<double>& Y) {
  const Matrix<interval64> Xi = X.cast<interval64>(), Yi = Y.cast<interval64>();
  interval64 d2(0.0);
  for (Eigen::Index k = 0; k < X.size(); ++k) {
    const interval64 diff = Yi.data()[k] - Xi.data()[k];
    d2 = d2 + diff * diff;
  }
  const operators::Block<interval64> block(layer, options);
  const Matrix<interval64> D = block.forward(Yi) - block.forward(Xi);
  interval64 s(0.0);
  for (Eigen::Index k = 0; k < D.size(); ++k) s = s + D.data()[k] * D.data()[k];
  return {sqrt(d2).upper(), sqrt(s)};
}

TEST(PgdLowerBound, CertifiedAtItsWitnessAndBracketedByRandomSearchAndRegionBound) {
  const Eigen::Index n = 3, d = 2;
  for (std::uint64_t seed : {3u, 11u, 29u}) {
    SCOPED_TRACE(seed);
    const AttentionLayer layer = small_layer(seed);
    const AttentionOptions options;
    const Matrix<double> X = input(n, d, seed + 100);
    const operators::Block<double> block(layer, options);
    const Matrix<double> J = operators::dense_jacobian(block.linearize(X));
    const double eps = 0.3;

    const PgdResult r = pgd_lower_bound(layer, options, X, eps, top_direction(J, n, d), 200, 8, seed);
    ASSERT_TRUE(std::isfinite(r.certified_lower));
    ASSERT_EQ(r.witness.rows(), n);
    ASSERT_EQ(r.witness.cols(), d);
    EXPECT_GT(r.certified_lower, 0.0);
    EXPECT_LE(r.certified_lower, r.estimate * (1 + 1e-12));

    // The witness is in the ball and the certified value holds there (interval64, independent of MPFI).
    const Checked c = recheck(layer, options, X, r.witness);
    EXPECT_LE(c.distance_upper, eps);
    EXPECT_LE(r.certified_lower, c.change.upper());
    // and the certified value is tight at the witness: within 1e-12 relative of the enclosure.
    EXPECT_GE(r.certified_lower, c.change.lower() * (1 - 1e-12));

    // At least what a random search of the ball finds.
    const double searched = random_search(block, X, eps, 4000, seed + 7);
    EXPECT_GE(r.certified_lower, searched * (1 - 1e-9)) << "random search " << searched;

    // At most ε·sup ‖J‖₂ over the ball, certified by the region enclosure.
    RegionOptions ro;
    ro.closed_form = false;
    const RegionNormReport region = region_jacobian_norms(layer, options, X, {RegionShape::ball, eps}, ro);
    ASSERT_TRUE(region.certified) << region.status;
    const double upper = (interval64(eps) * interval64(region.two_upper)).upper();
    EXPECT_LE(r.certified_lower, upper);
  }
}

TEST(PgdLowerBound, SmallRadiusReachesTheFirstOrderValue) {
  // Δ*(X, ε) = ε·‖J(X)‖₂ + O(ε²): the ascent seeded along the top singular vector must find it.
  const Eigen::Index n = 3, d = 2;
  const AttentionLayer layer = small_layer(5);
  const AttentionOptions options;
  const Matrix<double> X = input(n, d, 17);
  const operators::Block<double> block(layer, options);
  const Matrix<double> J = operators::dense_jacobian(block.linearize(X));
  const double sigma = largest_singular_value(J);
  const double eps = 1e-4;
  const PgdResult r = pgd_lower_bound(layer, options, X, eps, top_direction(J, n, d), 50, 2, 1);
  ASSERT_TRUE(std::isfinite(r.certified_lower));
  EXPECT_NEAR(r.certified_lower / (eps * sigma), 1.0, 1e-2);
}

TEST(PgdLowerBound, ZeroDirectionStillCertifies) {
  // No seeding direction: the random restarts alone must give a certified value.
  const AttentionLayer layer = small_layer(8);
  const AttentionOptions options;
  const Matrix<double> X = input(3, 2, 23);
  const PgdResult r = pgd_lower_bound(layer, options, X, 0.1, Matrix<double>::Zero(3, 2), 100, 3, 4);
  ASSERT_TRUE(std::isfinite(r.certified_lower));
  const Checked c = recheck(layer, options, X, r.witness);
  EXPECT_LE(c.distance_upper, 0.1);
  EXPECT_LE(r.certified_lower, c.change.upper());
}

}  // namespace
}  // namespace regatta::lip
