// The scalar contract (scalar_traits, our Eigen NumTraits, conversions, the precision guard), checked on all
// four scalar types.
#include <gtest/gtest.h>

#include <limits>
#include <regatta/core/convert.hpp>
#include <regatta/core/eigen.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>

#include "support/scalar_names.hpp"

namespace regatta {
namespace {

template <class S>
class ScalarContract : public ::testing::Test {};
using AllScalars = testing::TypesOf<scalars::all>;
TYPED_TEST_SUITE(ScalarContract, AllScalars, testing::ScalarNames);

TYPED_TEST(ScalarContract, NumTraitsLowestIsMinusHighest) {
  using S = TypeParam;
  PrecisionGuard guard(200);
  const S hi = Eigen::NumTraits<S>::highest();
  const S lo = Eigen::NumTraits<S>::lowest();
  EXPECT_TRUE(scalar_traits<S>::is_finite(hi));
  EXPECT_EQ(scalar_traits<S>::to_double(lo), -scalar_traits<S>::to_double(hi));
  EXPECT_TRUE(scalar_traits<S>::to_double(lo) < 0);
  EXPECT_FALSE(scalar_traits<S>::is_finite(Eigen::NumTraits<S>::infinity()));
  EXPECT_TRUE(scalar_traits<S>::is_nan(Eigen::NumTraits<S>::quiet_NaN()));
}

TYPED_TEST(ScalarContract, EpsilonIsGapAboveOne) {
  using S = TypeParam;
  for (unsigned bits : {64u, 256u}) {
    PrecisionGuard guard(bits);
    const int p = scalar_traits<S>::digits();
    if constexpr (scalar_traits<S>::is_multiprecision) {
      EXPECT_GE(p, static_cast<int>(bits));
      EXPECT_EQ(Eigen::NumTraits<S>::digits(), p);
    } else if constexpr (std::is_same_v<S, interval64>) {
      EXPECT_EQ(p, std::numeric_limits<double>::digits);  // binary64 endpoints
    } else {
      EXPECT_EQ(p, std::numeric_limits<S>::digits);
    }
    const S e = eps<S>();
    // 1 + eps is representable and > 1; 1 + eps/2 rounds (to even) back to 1.
    const S one(1);
    EXPECT_TRUE(scalar_traits<S>::to_double(scalar_traits<S>::upper(S(one + e))) > 1.0 ||
                scalar_traits<S>::is_multiprecision);
    if constexpr (!scalar_traits<S>::is_interval) {
      EXPECT_TRUE(one + e > one);
      EXPECT_TRUE(one + e / 2 == one);
    } else {
      EXPECT_TRUE(upper_bound(one + e) > mpfr(1));
    }
  }
}

TEST(ScalarTraits, Names) {
  EXPECT_EQ(scalar_traits<float>::name(), "float");
  EXPECT_EQ(scalar_traits<double>::name(), "double");
  EXPECT_EQ(scalar_traits<mpfr>::name(), "mpfr");
  EXPECT_EQ(scalar_traits<interval>::name(), "interval");
  EXPECT_EQ(scalar_traits<interval64>::name(), "interval64");
}

TEST(PrecisionGuard, SetsAndRestores) {
  const unsigned before = working_precision_bits();
  {
    PrecisionGuard g(512);
    EXPECT_GE(working_precision_bits(), 512u);
    EXPECT_GE(mpfr(1).precision(), 150u);  // Boost counts decimal digits: 512 bits ~ 154 digits
    {
      PrecisionGuard inner(80);
      EXPECT_GE(working_precision_bits(), 80u);
      EXPECT_LT(working_precision_bits(), 512u);
    }
    EXPECT_GE(working_precision_bits(), 512u);
  }
  EXPECT_EQ(working_precision_bits(), before);
}

TEST(PrecisionGuard, RejectsAbsurdPrecision) {
  EXPECT_THROW(set_working_precision(1), InputError);
  EXPECT_THROW(set_working_precision(max_precision_bits + 1), InputError);
}

TEST(Interval, OutwardRoundingEnclosesOneThird) {
  PrecisionGuard g(64);
  const interval third = interval(1) / interval(3);
  EXPECT_TRUE(lower_bound(third) < upper_bound(third));
  // The exact 1/3 is inside: check 3*lo < 1 < 3*hi exactly at a higher precision.
  // Boost.Multiprecision computes at the precision of the operands: raise it before multiplying.
  PrecisionGuard wide(256);
  EXPECT_TRUE(at_working_precision(lower_bound(third)) * 3 < 1);
  EXPECT_TRUE(at_working_precision(upper_bound(third)) * 3 > 1);
}

TEST(PrecisionGuard, AtWorkingPrecisionWidensExactly) {
  mpfr third;
  {
    PrecisionGuard g(64);
    third = mpfr(1) / 3;
  }
  PrecisionGuard g(256);
  const mpfr wide = at_working_precision(third);
  EXPECT_GE(wide.precision(), 77u);
  EXPECT_EQ(wide, third);        // the value is copied exactly
  EXPECT_NE(wide * 3, mpfr(1));  // and arithmetic now runs at 256 bits
}

TEST(Interval, EndpointsPivotAndWidth) {
  PrecisionGuard g(100);
  const interval x = make_interval(mpfr(-2), mpfr(5));
  EXPECT_EQ(lower_bound(x), mpfr(-2));
  EXPECT_EQ(upper_bound(x), mpfr(5));
  EXPECT_EQ(upper_bound(scalar_traits<interval>::pivot(x)), mpfr(5));
  EXPECT_EQ(lower_bound(scalar_traits<interval>::pivot(x)), mpfr(5));
  EXPECT_EQ(scalar_traits<interval>::to_double(x), 1.5);
  EXPECT_EQ(upper_bound(scalar_traits<interval>::width(x)), mpfr(7));
  EXPECT_TRUE(contains(x, mpfr(0)));
  EXPECT_FALSE(contains(x, mpfr(6)));
  EXPECT_TRUE(certainly_less(make_point(mpfr(1)), make_point(mpfr(2))));
  EXPECT_FALSE(certainly_less(x, make_point(mpfr(2))));
  const interval h = hull(make_point(mpfr(7)), x);
  EXPECT_EQ(upper_bound(h), mpfr(7));
  EXPECT_EQ(lower_bound(h), mpfr(-2));
}

TEST(Convert, DoubleToEveryTypeAndBack) {
  PrecisionGuard g(128);
  const double v = 0.1;  // not a dyadic fraction at any precision below 55 bits
  EXPECT_EQ(scalar_cast<double>(scalar_cast<mpfr>(v)), v);  // exact both ways at 128 bits
  const interval iv = scalar_cast<interval>(v);
  EXPECT_EQ(lower_bound(iv), upper_bound(iv));  // binary64 is exact in a 128-bit interval
  EXPECT_EQ(scalar_cast<double>(iv), v);
  EXPECT_EQ(scalar_cast<float>(v), 0.1f);
}

TEST(Convert, DoubleToNarrowIntervalEncloses) {
  PrecisionGuard g(20);  // 0.1 is not representable in 20 bits: the interval must straddle it
  const interval x = scalar_cast<interval>(0.1);
  PrecisionGuard wide(128);
  EXPECT_TRUE(lower_bound(x) < mpfr(0.1));
  EXPECT_TRUE(mpfr(0.1) < upper_bound(x));
}

TEST(Convert, MpfrToIntervalEnclosesWhenNarrowing) {
  mpfr third;
  {
    PrecisionGuard g(256);
    third = mpfr(1) / 3;
  }
  PrecisionGuard g(53);
  const interval enclosure = scalar_cast<interval>(third);
  PrecisionGuard wide(256);
  EXPECT_TRUE(lower_bound(enclosure) <= third);
  EXPECT_TRUE(third <= upper_bound(enclosure));
  EXPECT_TRUE(lower_bound(enclosure) < upper_bound(enclosure));
}

TEST(Convert, MatrixCastRoundTrip) {
  PrecisionGuard g(113);
  Matrix<double> m(2, 3);
  m << 1, -2.5, 1e-300, 3e300, 0.1, -0.0;
  const Matrix<mpfr> mm = matrix_cast<mpfr>(m);
  const Matrix<interval> mi = matrix_cast<interval>(mm);
  const Matrix<double> back = matrix_cast<double>(mi);
  EXPECT_EQ(back, m);
}

TEST(EigenGlue, MpfrMatrixProductMatchesDouble) {
  PrecisionGuard g(256);
  Matrix<double> a(3, 3);
  a << 1, 2, 3, 4, 5, 6, 7, 8, 10;  // small integers: the double product is exact
  const Matrix<mpfr> am = matrix_cast<mpfr>(a);
  const Matrix<mpfr> p = am * am.transpose();
  EXPECT_EQ(matrix_cast<double>(p), Matrix<double>(a * a.transpose()));
  const Matrix<interval> ai = matrix_cast<interval>(a);
  const Matrix<interval> pi = ai * ai.transpose();
  EXPECT_EQ(matrix_cast<double>(pi), Matrix<double>(a * a.transpose()));
}

// The subsets of the one scalar list (core/scalar.hpp) agree with the traits of their members: the rules
// there are written on the table's columns, these checks read the traits instead.
template <class... Ts>
constexpr bool all_intervals(scalars::list<Ts...>) {
  return (scalar_traits<Ts>::is_interval && ...);
}
template <class... Ts>
constexpr bool no_intervals(scalars::list<Ts...>) {
  return (!scalar_traits<Ts>::is_interval && ...);
}
template <class... Ts>
constexpr std::size_t count(scalars::list<Ts...>) {
  return sizeof...(Ts);
}
static_assert(all_intervals(scalars::intervals{}));
static_assert(no_intervals(scalars::point{}) && no_intervals(scalars::hardware{}));
static_assert(no_intervals(scalars::exact64_point{}));
static_assert(count(scalars::point{}) + count(scalars::intervals{}) == count(scalars::all{}));

template <class... Ts>
void expect_exact64(scalars::list<Ts...>) {
  PrecisionGuard guard(53);
  const auto check = [](int digits, std::string_view name) { EXPECT_GE(digits, 53) << name; };
  (check(scalar_traits<Ts>::digits(), scalar_traits<Ts>::name()), ...);
}

TEST(ScalarList, Exact64TypesHoldEveryBinary64) {
  expect_exact64(scalars::exact64{});
  EXPECT_EQ(count(scalars::exact64{}) + 1, count(scalars::all{})) << "only float is narrower than binary64";
}

}  // namespace
}  // namespace regatta
