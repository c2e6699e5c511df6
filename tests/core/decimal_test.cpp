// Directed decimal output: the text of a lower end is <= the number, of an upper end >= it, and each is the
// closest such decimal with the requested digits. Checked against glibc's printf (an independent, correctly
// rounded conversion) and by reading the text back exactly in MPFR.
#include <gtest/gtest.h>

#include <mpfr.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include <regatta/core/decimal.hpp>
#include <regatta/core/precision.hpp>

namespace regatta {
namespace {

/// Sign of (decimal text − x), the text read exactly (4000 bits hold any %g output of a double exactly
/// enough to decide the sign: the difference of two such numbers is a multiple of 2^-1074 · 10^-40).
int compare_text(const std::string& text, double x) {
  mpfr_t t, v;
  mpfr_init2(t, 4000);
  mpfr_init2(v, 53);
  mpfr_strtofr(t, text.c_str(), nullptr, 10, MPFR_RNDN);
  mpfr_set_d(v, x, MPFR_RNDN);
  const int c = mpfr_cmp(t, v);
  mpfr_clear(t);
  mpfr_clear(v);
  return c;
}

std::string glibc_nearest(double x, int digits) {
  char buffer[128];
  std::snprintf(buffer, sizeof buffer, "%.*g", digits, x);
  return buffer;
}

TEST(Decimal, DirectedTextBracketsTheNumber) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::uint64_t> bits;
  int checked = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    double x;
    const std::uint64_t b = bits(rng);
    std::memcpy(&x, &b, sizeof x);  // every binary64 pattern: subnormals, huge, negative
    if (!std::isfinite(x)) continue;
    const int digits = 1 + int(b % 17);
    const std::string down = to_decimal(x, digits, Rounding::down);
    const std::string up = to_decimal(x, digits, Rounding::up);
    const std::string nearest = to_decimal(x, digits, Rounding::nearest);
    ASSERT_LE(compare_text(down, x), 0) << down << " vs " << x;
    ASSERT_GE(compare_text(up, x), 0) << up << " vs " << x;
    ASSERT_EQ(nearest, glibc_nearest(x, digits));
    // Tightness: the directed texts are the two neighbours of x among `digits`-digit decimals, so one of
    // them is the nearest one.
    ASSERT_TRUE(nearest == down || nearest == up) << nearest << " " << down << " " << up;
    ++checked;
  }
  EXPECT_GT(checked, 19000);
}

// The shorthands every front end prints with (cli/numbers.hpp, the report's tables, proofs-check's docs): a
// lower end's text read back exactly is <= the double, an upper end's >= it; an estimate is glibc's %.*g.
TEST(Decimal, ShorthandsKeepTheirDirection) {
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<std::uint64_t> bits;
  for (int trial = 0; trial < 5000; ++trial) {
    double x;
    const std::uint64_t b = bits(rng);
    std::memcpy(&x, &b, sizeof x);
    if (!std::isfinite(x)) continue;
    const int digits = 1 + int(b % 17);
    ASSERT_LE(compare_text(lower_decimal(x, digits), x), 0) << x;
    ASSERT_GE(compare_text(upper_decimal(x, digits), x), 0) << x;
    ASSERT_EQ(nearest_decimal(x, digits), glibc_nearest(x, digits));
  }
  EXPECT_EQ(nearest_decimal(1.0 / 3), "0.333333");  // 6 digits by default, as %g
}

// shortest_decimal reads back as the same double (glibc's strtod, correctly rounded), and is no longer than
// glibc's %.*g with the fewest digits that read back (found here by trying 1 to 17 digits).
TEST(Decimal, ShortestDecimalRoundTripsAndIsShortest) {
  std::mt19937_64 rng(13);
  std::uniform_int_distribution<std::uint64_t> bits;
  int checked = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    double x;
    const std::uint64_t b = bits(rng);
    std::memcpy(&x, &b, sizeof x);
    if (!std::isfinite(x) || x == 0) continue;
    const std::string text = shortest_decimal(x);
    const double back = std::strtod(text.c_str(), nullptr);
    ASSERT_EQ(std::memcmp(&back, &x, sizeof x), 0) << text << " vs " << glibc_nearest(x, 17);
    int digits = 1;
    while (std::strtod(glibc_nearest(x, digits).c_str(), nullptr) != x) ++digits;
    ASSERT_LE(text.size(), glibc_nearest(x, digits).size()) << text << " " << glibc_nearest(x, digits);
    ++checked;
  }
  EXPECT_GT(checked, 19000);
  EXPECT_EQ(shortest_decimal(0.1), "0.1");
  EXPECT_EQ(shortest_decimal(-0.0), "-0");
  EXPECT_EQ(shortest_decimal(5e-324), "5e-324");
  EXPECT_EQ(shortest_decimal(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(shortest_decimal(-std::numeric_limits<double>::infinity()), "-inf");
  EXPECT_EQ(shortest_decimal(std::numeric_limits<double>::quiet_NaN()), "nan");
}

TEST(Decimal, ExactValuesPrintTheSameInEveryDirection) {
  for (double x : {0.0, 1.0, -2.5, 0.125, 1e22, 3.0}) {
    EXPECT_EQ(to_decimal(x, 10, Rounding::down), to_decimal(x, 10, Rounding::up)) << x;
  }
  EXPECT_EQ(to_decimal(0.1, 3, Rounding::down), "0.1");  // 0.1 in binary is 0.1000000000000000055...
  EXPECT_EQ(to_decimal(0.1, 3, Rounding::up), "0.101");
  EXPECT_EQ(to_decimal(-0.1, 3, Rounding::down), "-0.101");
  EXPECT_EQ(to_decimal(-0.1, 3, Rounding::up), "-0.1");
}

TEST(Decimal, NonFiniteValues) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(to_decimal(inf, 5, Rounding::up), "inf");
  EXPECT_EQ(to_decimal(-inf, 5, Rounding::down), "-inf");
  EXPECT_EQ(to_decimal(std::numeric_limits<double>::quiet_NaN(), 5, Rounding::down), "nan");
}

TEST(Decimal, IntervalEndpointsOutward) {
  PrecisionGuard guard(128);
  const interval third = interval(1) / interval(3);
  const std::string text = interval_decimal(third, 5);
  EXPECT_EQ(text, "[0.33333, 0.33334]");
  const mpfr a = mpfr(2) / mpfr(3);
  EXPECT_EQ(to_decimal(a, 3, Rounding::down), "0.666");
  EXPECT_EQ(to_decimal(a, 3, Rounding::up), "0.667");
}

}  // namespace
}  // namespace regatta
