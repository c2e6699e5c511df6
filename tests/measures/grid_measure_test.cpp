// GridMeasure: midpoint quadrature of a correlated Gaussian density (mean and covariance), the quantisation
// bound W_p(binned samples, to_discrete()) <= quantisation_radius() against the network simplex, binning
// counts and the outside-sample policy, and input errors.
#include <gtest/gtest.h>

#include <Eigen/LU>
#include <cmath>
#include <regatta/core/error.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/measures/grid_measure.hpp>
#include <regatta/measures/sampling.hpp>
#include <regatta/measures/wasserstein.hpp>
#include "support/tolerance.hpp"

namespace regatta::measures {
namespace {

Vector<double> vec(std::initializer_list<double> v) {
  Vector<double> out(Eigen::Index(v.size()));
  Eigen::Index k = 0;
  for (double x : v) out(k++) = x;
  return out;
}

TEST(GridMeasure, QuadratureOfAGaussianMatchesItsMoments) {
  // N(m, Σ) with Σ = [[1, 0.5], [0.5, 2]], unnormalised density, box m ± 9 sd per axis.
  const Vector<double> m = vec({0.3, -1.0});
  Matrix<double> sigma(2, 2);
  sigma << 1.0, 0.5, 0.5, 2.0;
  const Matrix<double> precision = sigma.inverse();
  const auto density = [&](const Vector<double>& x) {
    const Vector<double> z = x - m;
    return 7.0 * std::exp(-0.5 * z.dot(precision * z));
  };
  const Vector<double> lo = vec({m(0) - 9, m(1) - 9 * std::sqrt(2.0)});
  const Vector<double> hi = vec({m(0) + 9, m(1) + 9 * std::sqrt(2.0)});
  const GridMeasure grid = GridMeasure::from_density(lo, hi, {180, 200}, density);
  EXPECT_EQ(grid.total_cells(), 180 * 200);
  const double n = double(grid.total_cells());
  // Every mass is one rounded division by the total, and their sum rounds n − 1 times: |Σ − 1| ≤ 1.5 n eps;
  // c = 2.
  const double sum_rounding = testing::rounding_bound<double>(2, n);
  EXPECT_NEAR(grid.masses().sum(), 1.0, sum_rounding);
  const DiscreteMeasure<double> d = grid.to_discrete();
  const Vector<double> mean = d.mean();
  // The midpoint rule is spectrally accurate for a smooth, rapidly decaying integrand: its aliasing error is
  // ~exp(−2π² σ_min²/h²) with σ_min ≈ 0.89 (Σ's smallest axis) and h ≤ 0.13, i.e. below e^-900, and the
  // box at 9 sd per axis cuts a tail of ~81 e^(−81/2) ≈ 2e-16 from the moments, both far below the rounding:
  // moments are sums of n weighted terms, off by ~n eps times the sum of |terms| (c = 4 for the products and
  // the centring; ≈ 1e-10 here).
  const Matrix<double> abs_atoms = d.atoms().cwiseAbs();
  const double first_moment = d.weights().dot(abs_atoms.rowwise().maxCoeff());
  const double second_moment = d.weights().dot(abs_atoms.rowwise().squaredNorm());
  const double moment_rounding = testing::rounding_bound<double>(4, n);
  EXPECT_NEAR(mean(0), m(0), moment_rounding * first_moment);
  EXPECT_NEAR(mean(1), m(1), moment_rounding * first_moment);
  Matrix<double> centred = d.atoms().rowwise() - mean.transpose();
  const Matrix<double> cov = centred.transpose() * d.weights().asDiagonal() * centred;
  EXPECT_LE((cov - sigma).cwiseAbs().maxCoeff(), moment_rounding * second_moment) << cov;
}

TEST(GridMeasure, QuantisationRadiusBoundsTheWassersteinDistanceToTheCentres) {
  const Matrix<double> samples = sample_gaussian(vec({0, 0}), 0.6, 300, 21);
  const Vector<double> lo = vec({-3, -2.5}), hi = vec({3, 2.5});
  for (std::vector<Eigen::Index> cells :
       {std::vector<Eigen::Index>{4, 5}, std::vector<Eigen::Index>{12, 9}}) {
    const GridMeasure grid = GridMeasure::from_samples(lo, hi, cells, samples);
    const Vector<double> h = grid.cell_widths();
    EXPECT_DOUBLE_EQ(grid.quantisation_radius(), 0.5 * std::hypot(h(0), h(1)));
    const auto empirical = DiscreteMeasure<double>::empirical(samples);
    for (double p : {1.0, 2.0, 3.0}) {
      const WassersteinResult w = wasserstein_exact(empirical, grid.to_discrete(), p);
      ASSERT_EQ(w.status, TransportStatus::optimal);
      // W_p from the network simplex: ~(n + m) eps relative (a sum of n + m transported costs; c = 4 as
      // in wasserstein_test).
      const double rounding =
          testing::rounding_bound<double>(4, double(empirical.size() + grid.total_cells()));
      EXPECT_LE(w.value, grid.quantisation_radius() * (1 + rounding)) << "p " << p;
      EXPECT_GT(w.value, 0);
    }
  }
}

TEST(GridMeasure, BinningCountsSamplesPerCell) {
  Matrix<double> samples(6, 2);
  // lo corner, hi corner (closed box: last cell), interior points.
  samples << 0, 0, 1, 1, 0.1, 0.6, 0.4, 0.9, 0.9, 0.1, 0.55, 0.2;
  const GridMeasure grid = GridMeasure::from_samples(vec({0, 0}), vec({1, 1}), {2, 2}, samples);
  // Row-major cells (axis 0 slowest): (0,0) (0,1) (1,0) (1,1). A mass is a count over the total, one
  // rounded division (or a product with 1/total) against the reference's one: c = 1, n = 2, relative.
  const double fraction_rounding = testing::rounding_bound<double>(1, 2);
  EXPECT_NEAR(grid.masses()(0), 1.0 / 6, fraction_rounding / 6);
  EXPECT_NEAR(grid.masses()(1), 2.0 / 6, fraction_rounding * 2 / 6);
  EXPECT_NEAR(grid.masses()(2), 2.0 / 6, fraction_rounding * 2 / 6);
  EXPECT_NEAR(grid.masses()(3), 1.0 / 6, fraction_rounding / 6);
  EXPECT_EQ(grid.cell_of(vec({0.75, 0.25})), 2);
  EXPECT_EQ(grid.cell_centre(1), vec({0.25, 0.75}));
  const DiscreteMeasure<double> d = grid.to_discrete();
  EXPECT_EQ(d.size(), 4);
  EXPECT_EQ(grid.outside_samples(), 0);
}

TEST(GridMeasure, SamplesOutsideTheBoxAreRejectedOrDroppedAndCounted) {
  Matrix<double> samples(4, 1);
  samples << 0.5, 1.5, -0.1, 0.25;
  EXPECT_THROW(GridMeasure::from_samples(vec({0}), vec({1}), {4}, samples), InputError);
  const GridMeasure grid = GridMeasure::from_samples(vec({0}), vec({1}), {4}, samples, OutsideSamples::drop);
  EXPECT_EQ(grid.outside_samples(), 2);
  const double fraction_rounding =
      testing::rounding_bound<double>(1, 2);  // as in BinningCountsSamplesPerCell
  EXPECT_NEAR(grid.masses()(1), 0.5, fraction_rounding * 0.5);
  EXPECT_NEAR(grid.masses()(2), 0.5, fraction_rounding * 0.5);
  EXPECT_EQ(grid.to_discrete().size(), 2);
  EXPECT_EQ(grid.to_discrete(true).size(), 4);
  Matrix<double> all_outside(1, 1);
  all_outside << 3.0;
  EXPECT_THROW(GridMeasure::from_samples(vec({0}), vec({1}), {4}, all_outside, OutsideSamples::drop),
               InputError);
  Matrix<double> nan(1, 1);
  nan << NAN;
  EXPECT_THROW(GridMeasure::from_samples(vec({0}), vec({1}), {4}, nan, OutsideSamples::drop), InputError);
}

TEST(GridMeasure, RejectsBadInput) {
  const auto one = [](const Vector<double>&) { return 1.0; };
  EXPECT_THROW(GridMeasure::from_density(vec({0, 0}), vec({1, 1}), {4, 4},
                                         [](const Vector<double>& x) { return x(0) - 0.5; }),
               InputError);  // negative somewhere
  EXPECT_THROW(GridMeasure::from_density(vec({0}), vec({1}), {4}, [](const Vector<double>&) { return 0.0; }),
               InputError);  // integrates to 0
  EXPECT_THROW(GridMeasure::from_density(vec({0}), vec({1}), {4}, [](const Vector<double>&) { return NAN; }),
               InputError);
  EXPECT_THROW(
      GridMeasure::from_density(vec({0}), vec({1}), {4}, [](const Vector<double>&) { return 1e308; }),
      InputError);                                                                       // total overflows
  EXPECT_THROW(GridMeasure::from_density(vec({1}), vec({1}), {4}, one), InputError);     // empty box
  EXPECT_THROW(GridMeasure::from_density(vec({0}), vec({1}), {0}, one), InputError);     // no cells
  EXPECT_THROW(GridMeasure::from_density(vec({0}), vec({1}), {4, 4}, one), InputError);  // cells vs dim
  EXPECT_THROW(GridMeasure::from_density(vec({0, 0, 0}), vec({1, 1, 1}), {1000, 1000, 11}, one), InputError);
  EXPECT_THROW(GridMeasure(vec({0}), vec({1}), {2}, vec({0.5, 0.6})), InputError);  // unnormalised
  EXPECT_THROW(GridMeasure(vec({0}), vec({1}), {2}, vec({1.0})), InputError);       // wrong size
  EXPECT_NO_THROW(GridMeasure(vec({0}), vec({1}), {2}, vec({0.25, 0.75})));
}

}  // namespace
}  // namespace regatta::measures
