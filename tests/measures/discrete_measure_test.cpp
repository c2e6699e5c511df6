// DiscreteMeasure: validation (every bad input is one InputError naming the argument), the derived
// quantities (mean, second moment, support radius) against direct formulas, push-forward and mixtures.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regatta/core/precision.hpp>
#include <regatta/measures/discrete_measure.hpp>
#include <vector>

#include "support/scalar_names.hpp"
#include "support/tolerance.hpp"

namespace regatta::measures {
namespace {

template <class S>
Matrix<S> grid_atoms() {  // 3 atoms in R^2
  Matrix<S> x(3, 2);
  x << S(0), S(1), S(3), S(-4), S(2), S(2);
  return x;
}

/// A quantity computed in S by n rounded operations (c = 2) and compared in double on the scale of its terms:
/// the conversion to double and the double reference add one rounding each.
template <class S>
double compared_in_double(double n, double scale) {
  return (testing::rounding_bound<S>(2, n) + testing::rounding_bound<double>(1, 2)) * std::abs(scale);
}

template <class S>
class DiscreteMeasureTyped : public ::testing::Test {
 protected:
  PrecisionGuard guard{128};
};
using Scalars = testing::TypesOf<scalars::all>;
TYPED_TEST_SUITE(DiscreteMeasureTyped, Scalars, testing::ScalarNames);

TYPED_TEST(DiscreteMeasureTyped, EmpiricalIsUniformAndMomentsMatchFormulas) {
  using S = TypeParam;
  const auto mu = DiscreteMeasure<S>::empirical(grid_atoms<S>());
  EXPECT_EQ(mu.size(), 3);
  EXPECT_EQ(mu.dim(), 2);
  for (Eigen::Index i = 0; i < 3; ++i)  // one division
    EXPECT_NEAR(scalar_traits<S>::to_double(mu.weights()(i)), 1.0 / 3, compared_in_double<S>(1, 1.0 / 3));
  // Means: 3 products and their sum, on the scale Σ |w_i x_i| (the second coordinate cancels).
  const Vector<S> m = mu.mean();
  EXPECT_NEAR(scalar_traits<S>::to_double(m(0)), 5.0 / 3, compared_in_double<S>(4, (0.0 + 3 + 2) / 3));
  EXPECT_NEAR(scalar_traits<S>::to_double(m(1)), -1.0 / 3, compared_in_double<S>(4, (1.0 + 4 + 2) / 3));
  // Σ w_i ‖x_i‖²: squares, their sums and the weighted sum, all terms positive.
  const double second = (1.0 + 25.0 + 8.0) / 3;
  EXPECT_NEAR(scalar_traits<S>::to_double(mu.second_moment()), second, compared_in_double<S>(6, second));
  // max ‖x_i‖ = ‖(3, −4)‖: two squares, a sum and a square root.
  EXPECT_NEAR(scalar_traits<S>::to_double(mu.support_radius()), 5.0, compared_in_double<S>(4, 5.0));
}

TYPED_TEST(DiscreteMeasureTyped, RejectsMalformedInput) {
  using S = TypeParam;
  Vector<S> w(3);
  w << S(0.5), S(0.5), S(0);
  EXPECT_NO_THROW(DiscreteMeasure<S>(grid_atoms<S>(), w));  // zero weights are allowed
  Vector<S> neg(3);
  neg << S(0.75), S(0.5), S(-0.25);
  EXPECT_THROW(DiscreteMeasure<S>(grid_atoms<S>(), neg), InputError);
  EXPECT_THROW(DiscreteMeasure<S>::from_weights(grid_atoms<S>(), neg, true), InputError);
  Vector<S> unnormalised(3);
  unnormalised << S(1), S(1), S(2);
  EXPECT_THROW(DiscreteMeasure<S>(grid_atoms<S>(), unnormalised), InputError);
  const auto rescaled = DiscreteMeasure<S>::from_weights(grid_atoms<S>(), unnormalised, true);
  // 2 / (1 + 1 + 2): a sum and a division.
  EXPECT_NEAR(scalar_traits<S>::to_double(rescaled.weights()(2)), 0.5, compared_in_double<S>(3, 0.5));
  EXPECT_THROW(DiscreteMeasure<S>::from_weights(grid_atoms<S>(), Vector<S>::Zero(3), true), InputError);
  EXPECT_THROW(DiscreteMeasure<S>(grid_atoms<S>(), Vector<S>::Ones(2) / S(2)), InputError);
  EXPECT_THROW(DiscreteMeasure<S>::empirical(Matrix<S>(0, 2)), InputError);
  EXPECT_THROW(DiscreteMeasure<S>::empirical(Matrix<S>(3, 0)), InputError);
  Matrix<S> bad = grid_atoms<S>();
  bad(1, 1) = scalar_traits<S>::quiet_nan();
  EXPECT_THROW(DiscreteMeasure<S>::empirical(bad), InputError);
}

TEST(DiscreteMeasure, ErrorsNameTheArgument) {
  Vector<double> w(3);
  w << 0.5, 0.6, -0.1;
  try {
    DiscreteMeasure<double>(grid_atoms<double>(), w);
    FAIL() << "no throw";
  } catch (const InputError& e) {
    EXPECT_EQ(e.subject(), "weights");
  }
  Matrix<double> x = grid_atoms<double>();
  x(0, 0) = std::numeric_limits<double>::infinity();
  try {
    DiscreteMeasure<double>::empirical(x);
    FAIL() << "no throw";
  } catch (const InputError& e) {
    EXPECT_EQ(e.subject(), "atoms");
  }
  Vector<double> nan_w(3);
  nan_w << 0.5, std::numeric_limits<double>::quiet_NaN(), 0.5;
  EXPECT_THROW(DiscreteMeasure<double>::from_weights(grid_atoms<double>(), nan_w, true), InputError);
}

TEST(DiscreteMeasure, PushForwardMovesAtomsAndKeepsWeights) {
  Vector<double> w(3);
  w << 0.25, 0.25, 0.5;
  const DiscreteMeasure<double> mu(grid_atoms<double>(), w);
  Vector<double> shift(2);
  shift << 1.5, -2;
  const auto moved = mu.push_forward([&](const Vector<double>& x) -> Vector<double> { return x + shift; });
  EXPECT_TRUE(moved.weights().isApprox(w));
  EXPECT_TRUE(moved.mean().isApprox(mu.mean() + shift));
  // A map into R^1 changes the dimension.
  const auto proj = mu.push_forward([](const Vector<double>& x) -> Vector<double> { return x.head(1); });
  EXPECT_EQ(proj.dim(), 1);
  int calls = 0;
  EXPECT_THROW(mu.push_forward([&](const Vector<double>& x) -> Vector<double> {
    return ++calls == 2 ? Vector<double>(x.head(1)) : x;
  }),
               InputError);
  EXPECT_THROW(mu.push_forward([](const Vector<double>& x) -> Vector<double> {
    return x * std::numeric_limits<double>::quiet_NaN();
  }),
               InputError);
}

TEST(DiscreteMeasure, MixtureConcatenatesWithScaledWeights) {
  const auto mu = DiscreteMeasure<double>::empirical(grid_atoms<double>());
  Matrix<double> y(1, 2);
  y << 10, 10;
  const auto dirac = DiscreteMeasure<double>::empirical(y);
  const std::vector<DiscreteMeasure<double>> parts{mu, dirac};
  Vector<double> lambda(2);
  lambda << 0.75, 0.25;
  const auto mix = DiscreteMeasure<double>::mixture(parts, lambda);
  EXPECT_EQ(mix.size(), 4);
  EXPECT_DOUBLE_EQ(mix.weights()(3), 0.25);
  EXPECT_DOUBLE_EQ(mix.weights()(0), 0.25);
  EXPECT_TRUE(mix.mean().isApprox(0.75 * mu.mean() + 0.25 * dirac.mean()));
  Vector<double> bad(2);
  bad << 0.7, 0.7;
  EXPECT_THROW(DiscreteMeasure<double>::mixture(parts, bad), InputError);
  const std::vector<DiscreteMeasure<double>> mixed_dims{
      mu, DiscreteMeasure<double>::empirical(Matrix<double>::Ones(1, 3))};
  EXPECT_THROW(DiscreteMeasure<double>::mixture(mixed_dims, lambda), InputError);
  EXPECT_THROW(DiscreteMeasure<double>::mixture({}, Vector<double>()), InputError);
}

}  // namespace
}  // namespace regatta::measures
