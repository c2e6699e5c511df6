// check_* helpers: each bad input gives one InputError naming the argument and the problem.
#include <gtest/gtest.h>

#include <limits>
#include <regatta/core/checks.hpp>
#include <regatta/core/eigen.hpp>

#include "support/error_message.hpp"

namespace regatta {
namespace {

using testing::error_message_of;
std::string message_of(const std::function<void()>& f) {
  const std::string m = error_message_of(f);
  return m == "no error" ? "" : m;
}

TEST(Checks, ShapeMessageNamesArgumentAndShapes) {
  const std::string m = message_of([] { check_shape("X.npy", 3, 4, 3, 5); });
  EXPECT_EQ(m, "X.npy: expected shape (3, 5), got (3, 4)");
  EXPECT_NO_THROW(check_shape("X", 2, 2, 2, 2));
  EXPECT_THROW(check_rows("W", 3, 4), InputError);
  EXPECT_THROW(check_cols("W", 3, 4), InputError);
}

TEST(Checks, FiniteReportsFirstBadEntry) {
  Matrix<double> x = Matrix<double>::Zero(2, 3);
  EXPECT_NO_THROW(check_finite("X", x));
  x(1, 2) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(message_of([&] { check_finite("X", x); }), "X: entry (1, 2) is NaN");
  x(0, 1) = -std::numeric_limits<double>::infinity();
  EXPECT_EQ(message_of([&] { check_finite("X", x); }), "X: entry (0, 1) is infinite");
}

TEST(Checks, FiniteOnMultiprecisionAndInterval) {
  Matrix<mpfr> a = Matrix<mpfr>::Ones(2, 2);
  EXPECT_NO_THROW(check_finite("A", a));
  a(1, 0) = scalar_traits<mpfr>::quiet_nan();
  EXPECT_THROW(check_finite("A", a), InputError);
  Vector<interval> v = Vector<interval>::Ones(3);
  v(2) = hull(interval(1), scalar_traits<interval>::infinity());
  EXPECT_THROW(check_finite("v", v), InputError);
}

TEST(Checks, NonnegativeAndNormalised) {
  Vector<double> w(3);
  w << 0.25, 0.25, 0.5;
  EXPECT_NO_THROW(check_normalized("w", w));
  w(0) = -0.25;
  w(2) = 1.0;
  EXPECT_EQ(message_of([&] { check_normalized("w", w); }), "w: entry 0 is negative");
  w << 0.25, 0.25, 0.25;
  EXPECT_NE(message_of([&] { check_normalized("w", w); }).find("must sum to 1"), std::string::npos);
  // Within the stated tolerance: 3 weights off by one ulp each still pass.
  w << 1.0 / 3, 1.0 / 3, 1.0 / 3;
  EXPECT_NO_THROW(check_normalized("w", w));
  EXPECT_THROW(check_normalized("w", Vector<double>(0)), InputError);
}

TEST(Checks, ScalarArguments) {
  EXPECT_NO_THROW(check_positive("--epsilon", 1e-3));
  EXPECT_THROW(check_positive("--epsilon", 0), InputError);
  EXPECT_THROW(check_positive("--epsilon", std::numeric_limits<double>::infinity()), InputError);
  EXPECT_THROW(check_positive("--epsilon", std::numeric_limits<double>::quiet_NaN()), InputError);
  EXPECT_THROW(check_in_range("--p", 0.5, 1, 1e6), InputError);
  EXPECT_NO_THROW(check_in_range("--p", 2, 1, 1e6));
}

TEST(Checks, MessagesAreOneLine) {
  const std::string m = message_of([] { check_positive("--radius", -1); });
  EXPECT_EQ(m.find('\n'), std::string::npos);
  EXPECT_EQ(m.rfind("--radius: ", 0), 0u);
}

}  // namespace
}  // namespace regatta
