// Tests of regatta::lambert_w0 and regatta::lambert_phi_inverse (core/include/regatta/core/lambert_w.hpp).
//
// Reference tables: tests/data/lambert_w0_reference.csv and lambert_phi_inverse_reference.csv, written by
// tools/generate_lambert_w_reference.py (mpmath, 1100 digits; outputs with 320 significant digits, so they
// resolve results up to 1024 bits). The table's x is an exact decimal; a scalar type holds the rounded
// value x_S, and W0 moves by |W0(x_S) - W0(x)| <= W0'(min(x, x_S)) |x_S - x| (W0 is increasing and concave).
// Tolerances below add that input term, written `input_effect`, to the evaluation error of the routine.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <regatta/core/error.hpp>
#include <regatta/core/lambert_w.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/scalar_traits.hpp>

namespace regatta {
namespace {

/// Precision of every reference-side computation: far above the 1024-bit results under test.
constexpr unsigned reference_bits = 1200;

struct Row {
  std::string x;
  std::string y;  // w0, or lambda_n
};

std::vector<Row> read_table(const std::string& name) {
  std::ifstream in(std::string(REGATTA_TEST_DATA_DIR) + "/" + name);
  EXPECT_TRUE(in.good()) << "missing " << name << "; run tools/generate_lambert_w_reference.py";
  std::vector<Row> rows;
  std::string line;
  bool header = true;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (header) {  // column names
      header = false;
      continue;
    }
    std::stringstream s(line);
    Row r;
    std::getline(s, r.x, ',');
    std::getline(s, r.y, ',');
    rows.push_back(r);
  }
  return rows;
}

/// A decimal string as an mpfr of `bits` bits (rounded to nearest).
mpfr parse(const std::string& s, unsigned bits) {
  PrecisionGuard g(bits);
  return mpfr(s);
}

mpfr at_bits(const mpfr& x, unsigned bits) {
  PrecisionGuard g(bits);
  mpfr r;
  mpfr_set(r.backend().data(), x.backend().data(), MPFR_RNDN);
  return r;
}

mpfr minus_inverse_e() {
  PrecisionGuard g(reference_bits);
  return mpfr(-exp(mpfr(-1)));
}

/// W0'(x) = W / (x (1 + W)) (= 1 at x = 0), from the reference value W = W0(x).
mpfr derivative(const mpfr& x, const mpfr& w) {
  PrecisionGuard g(reference_bits);
  if (x == 0) return mpfr(1);
  return mpfr(w / (x * (1 + w)));
}

/// Bound on |W0(x_S) - W0(x)| from the rounding x -> x_S, or a negative number when the rounding is not small
/// against the distance to the branch point (then W0'(x) is no bound for W0' on the segment; factor 2 allows
/// W0' to grow by 2 between x and min(x, x_S), which holds when |x_S - x| <= (x + 1/e) / 4).
mpfr input_effect(const mpfr& x, const mpfr& x_s, const mpfr& w) {
  PrecisionGuard g(reference_bits);
  const mpfr d = abs(mpfr(x_s - x));
  if (d == 0) return mpfr(0);
  if (4 * d > x - minus_inverse_e()) return mpfr(-1);
  return mpfr(2 * derivative(x, w) * d);
}

double relative_error(const mpfr& approx, const mpfr& exact) {
  PrecisionGuard g(reference_bits);
  if (exact == 0) return approx == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return static_cast<double>(mpfr(abs(mpfr(approx - exact)) / abs(exact)));
}

// ---------------------------------------------------------------------------------------------------------
// (1) float and double against the table.

/// Evaluation error allowed for float/double, in units of the unit roundoff u = eps/2: Boost documents a few
/// eps for lambert_w0 (its tests allow 2-3 eps); 8 u = 4 eps leaves room for the final rounding.
constexpr double binary_evaluation_units = 8;

template <class T>
void check_binary_against_table() {
  const double u = std::numeric_limits<T>::epsilon() / 2;
  double max_ulps = 0;
  int checked = 0;
  for (const Row& row : read_table("lambert_w0_reference.csv")) {
    const mpfr x = parse(row.x, reference_bits);
    const mpfr w = parse(row.y, reference_bits);
    const T x_s = static_cast<T>(std::is_same_v<T, float> ? std::strtof(row.x.c_str(), nullptr)
                                                          : std::strtod(row.x.c_str(), nullptr));
    // Skip what T cannot hold: overflow to inf, underflow to 0 or to a subnormal.
    if (!std::isfinite(x_s) || (x != 0 && std::fabs(x_s) < std::numeric_limits<T>::min())) continue;
    const mpfr x_exact(x_s);  // exact: binary32/64 -> 1200 bits
    // The rounded branch-point rows: x_s may be the number just below -1/e, whose W0 is -1 by contract.
    if (x_exact < minus_inverse_e()) {
      EXPECT_EQ(lambert_w0(x_s), T(-1)) << row.x;
      continue;
    }
    const T w_s = lambert_w0(x_s);
    const mpfr effect = input_effect(x, x_exact, w);
    // W0 of the rounded input, exactly (mpfr at 256 bits, checked against the table in test (2)).
    mpfr w_of_rounded;
    {
      PrecisionGuard g(256);
      w_of_rounded = lambert_w0(x_exact);
    }
    if (effect >= 0) {
      const double tolerance =
          binary_evaluation_units * u * std::fabs(static_cast<double>(w)) + static_cast<double>(effect);
      EXPECT_LE(std::fabs(static_cast<double>(mpfr(mpfr(w_s) - w))), tolerance)
          << scalar_traits<T>::name() << " x = " << row.x;
    }
    // Against the exact W0(x_s), in ulps of the result.
    const double exact = static_cast<double>(w_of_rounded);
    if (exact != 0) {
      const double ulp = std::ldexp(1.0, std::ilogb(exact) - (std::numeric_limits<T>::digits - 1));
      const double ulps = static_cast<double>(abs(mpfr(mpfr(w_s) - w_of_rounded))) / ulp;
      max_ulps = std::max(max_ulps, ulps);
      EXPECT_LE(ulps, binary_evaluation_units / 2) << scalar_traits<T>::name() << " x = " << row.x;
    } else {
      EXPECT_EQ(w_s, T(0));
    }
    ++checked;
  }
  EXPECT_GE(checked, 20);
  std::cout << "[ measured ] " << scalar_traits<T>::name() << ": max error " << max_ulps
            << " ulp against W0 of the rounded argument, " << checked << " rows\n";
}

TEST(LambertW0, DoubleMatchesReferenceTable) { check_binary_against_table<double>(); }
TEST(LambertW0, FloatMatchesReferenceTable) { check_binary_against_table<float>(); }

/// float and double against mpfr (128 bits) of the same exact argument, on random arguments biased toward the
/// branch point (the first few thousand numbers above it), the switch at -0.25, tiny and huge magnitudes.
template <class T>
void check_binary_against_mpfr_random() {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int> kind(0, 4);
  const T branch = std::nextafter(static_cast<T>(-0.36787944117144232159552377016146086744581113), T(0));
  double max_ulps = 0;
  double worst = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    T x;
    switch (kind(rng)) {
      case 0: {  // the first 2^k representable numbers above -1/e, k up to 40 (double) or 20 (float)
        x = branch;
        const int max_k = std::numeric_limits<T>::digits - 13;
        const double steps = std::floor(std::ldexp(unit(rng), static_cast<int>(unit(rng) * max_k)));
        x = static_cast<T>(x + static_cast<T>(steps) * (std::nextafter(branch, T(0)) - branch));
        break;
      }
      case 1:  // around the switch of method at -0.25, and the rest of [-1/e, 0)
        x = static_cast<T>(unit(rng) < 0.5 ? -0.25 + 0.01 * (unit(rng) - 0.5) : -0.36 * unit(rng));
        break;
      case 2:  // tiny, either sign
        x = static_cast<T>((unit(rng) < 0.5 ? -1 : 1) *
                           std::pow(10.0, -1 - unit(rng) * (std::numeric_limits<T>::max_exponent10 - 2)));
        break;
      case 3:  // huge
        x = static_cast<T>(std::pow(10.0, unit(rng) * std::numeric_limits<T>::max_exponent10));
        break;
      default:  // moderate
        x = static_cast<T>(std::pow(10.0, 8 * unit(rng) - 4));
    }
    if (!std::isfinite(x)) continue;
    const T w = lambert_w0(x);
    PrecisionGuard g(128);
    const mpfr exact = lambert_w0(mpfr(x));
    if (exact == 0) continue;
    const double ulp =
        std::ldexp(1.0, std::ilogb(static_cast<double>(exact)) - (std::numeric_limits<T>::digits - 1));
    const double ulps = static_cast<double>(abs(mpfr(mpfr(w) - exact))) / ulp;
    EXPECT_LE(ulps, binary_evaluation_units / 2) << scalar_traits<T>::name() << " x = " << x;
    if (ulps > max_ulps) {
      max_ulps = ulps;
      worst = static_cast<double>(x);
    }
  }
  std::cout << "[ measured ] " << scalar_traits<T>::name() << ": max error " << max_ulps
            << " ulp on 20000 random arguments (at x = " << worst << ")\n";
}

TEST(LambertW0, DoubleAgreesWithMpfrOnRandomArguments) { check_binary_against_mpfr_random<double>(); }
TEST(LambertW0, FloatAgreesWithMpfrOnRandomArguments) { check_binary_against_mpfr_random<float>(); }

// ---------------------------------------------------------------------------------------------------------
// (2) mpfr against the table, and against itself at twice the precision.

/// mpfr evaluation error allowed, in units of 2^-bits: the result is the Halley iterate at bits + 32 rounded
/// to nearest (1/2 ulp = 2^-bits relative at most) plus 2^-32 ulp; 8 units = 4 ulps is a safety margin.
constexpr double mpfr_evaluation_units = 8;

void check_mpfr_against_table(unsigned bits) {
  double max_ulps = 0;
  for (const Row& row : read_table("lambert_w0_reference.csv")) {
    const mpfr x = parse(row.x, reference_bits);
    const mpfr w = parse(row.y, reference_bits);
    const mpfr x_s = parse(row.x, bits);
    mpfr w_s;
    {
      PrecisionGuard g(bits);
      w_s = lambert_w0(x_s);
      EXPECT_EQ(mpfr_get_prec(w_s.backend().data()), static_cast<mpfr_prec_t>(working_precision_bits()));
    }
    const mpfr effect = input_effect(x, x_s, w);
    if (effect < 0) {
      // x_s is not close to x relative to x + 1/e (the 1e-30 row at 64 bits): a different problem. It is
      // either the rounded branch point (W0 = -1 by contract) or checked against itself at 4x the precision.
      if (x_s < minus_inverse_e()) {
        EXPECT_EQ(w_s, -1) << bits << " bits, x = " << row.x;
      } else {
        PrecisionGuard g(4 * bits);
        EXPECT_LE(relative_error(w_s, lambert_w0(x_s)), mpfr_evaluation_units * std::ldexp(1.0, -int(bits)));
      }
      continue;
    }
    PrecisionGuard g(reference_bits);
    const mpfr unit = ldexp(mpfr(1), -static_cast<int>(bits));
    const mpfr tolerance = mpfr_evaluation_units * unit * abs(w) + effect;
    EXPECT_LE(abs(mpfr(w_s - w)), tolerance) << bits << " bits, x = " << row.x;
    if (x != 0) {
      // Where the input rounding is negligible (effect <= 2^-bits |w|) the table itself resolves the ulps.
      if (effect <= unit * abs(w))
        max_ulps = std::max(max_ulps, static_cast<double>(mpfr(abs(mpfr(w_s - w)) / (2 * unit * abs(w)))));
    }
  }
  std::cout << "[ measured ] mpfr " << bits << " bits: max error " << max_ulps
            << " ulp on rows with negligible input rounding\n";
}

TEST(LambertW0, Mpfr256MatchesReferenceTable) { check_mpfr_against_table(256); }
TEST(LambertW0, Mpfr1024MatchesReferenceTable) { check_mpfr_against_table(1024); }
TEST(LambertW0, Mpfr64MatchesReferenceTable) { check_mpfr_against_table(64); }

// ---------------------------------------------------------------------------------------------------------
// (3) interval: encloses the table's value, and is narrow.

void check_interval_against_table(unsigned bits) {
  double max_relative_width = 0;
  int enclosed = 0;
  for (const Row& row : read_table("lambert_w0_reference.csv")) {
    const mpfr x = parse(row.x, reference_bits);
    // The table value has 320 digits: its error (1e-320 relative) is far below the width of a 1024-bit
    // interval (~1e-306), so "contains the rounded reference" is the enclosure test.
    const mpfr w = parse(row.y, reference_bits);
    PrecisionGuard g(bits);
    const interval x_s(row.x.c_str());  // encloses the decimal x (mpfi_set_str rounds outward)
    ASSERT_TRUE(contains(x_s, x));
    if (lower_bound(x_s) < minus_inverse_e()) {
      // The enclosure of x reaches below -1/e at this precision: documented InputError.
      EXPECT_THROW(lambert_w0(x_s), InputError) << bits << " bits, x = " << row.x;
      continue;
    }
    const interval w_s = lambert_w0(x_s);
    EXPECT_TRUE(contains(w_s, w)) << bits << " bits, x = " << row.x << ": [" << lower_bound(w_s) << ", "
                                  << upper_bound(w_s) << "] misses " << w;
    ++enclosed;
    // Width: the routine's own <= 2^-(bits-8) relative, plus the image of the input's width.
    const mpfr effect = input_effect(lower_bound(x_s), upper_bound(x_s), w);
    if (effect < 0) continue;  // input interval wide against the distance to -1/e
    PrecisionGuard gr(reference_bits);
    const mpfr width = upper_bound(w_s) - lower_bound(w_s);
    const mpfr allowed = ldexp(abs(w), -static_cast<int>(bits) + 8) + effect;
    EXPECT_LE(width, allowed) << bits << " bits, x = " << row.x;
    if (effect == 0 && w != 0)
      max_relative_width = std::max(max_relative_width, static_cast<double>(mpfr(width / abs(w))));
  }
  EXPECT_GE(enclosed, 25);
  std::cout << "[ measured ] interval " << bits << " bits: max relative width " << max_relative_width
            << " = 2^" << std::log2(max_relative_width) << " on exact (point) inputs\n";
}

TEST(LambertW0, Interval64EnclosesReference) { check_interval_against_table(64); }
TEST(LambertW0, Interval256EnclosesReference) { check_interval_against_table(256); }
TEST(LambertW0, Interval1024EnclosesReference) { check_interval_against_table(1024); }

TEST(LambertW0, IntervalPointInputsAtTheEdges) {
  PrecisionGuard g(256);
  // 0 exactly.
  const interval zero = lambert_w0(interval(0));
  EXPECT_EQ(lower_bound(zero), 0);
  EXPECT_EQ(upper_bound(zero), 0);
  // The smallest 256-bit number above -1/e: the lower end may be -1, the upper end just above -1.
  mpfr above = -exp(mpfr(-1));
  {
    PrecisionGuard gr(reference_bits);
    mpfr e_inv = exp(mpfr(-1));
    above = at_bits(mpfr(-e_inv), 256);
  }
  if (above < minus_inverse_e()) mpfr_nextabove(above.backend().data());
  const interval near = lambert_w0(make_point(above));
  EXPECT_GE(lower_bound(near), -1);
  EXPECT_LT(upper_bound(near), mpfr(-1) + ldexp(mpfr(1), -120));  // W0 = -1 + O(sqrt(2^-256))
  // Beyond binary64 and beyond exp(1e6): W0 e^W0 = x certified.
  const mpfr huge = ldexp(mpfr(1), 4000000);
  const interval w = lambert_w0(make_point(huge));
  const interval residual = w * exp(w) - make_point(huge);
  EXPECT_TRUE(contains(residual, mpfr(0)));
  EXPECT_LE(mpfr(upper_bound(w) - lower_bound(w)), ldexp(upper_bound(w), -248));
}

// ---------------------------------------------------------------------------------------------------------
// (4) a wide input.

TEST(LambertW0, IntervalOfWideInputEnclosesTheRange) {
  for (unsigned bits : {64u, 256u}) {
    PrecisionGuard g(bits);
    const interval w = lambert_w0(make_interval(mpfr(1), mpfr(2)));
    // W0 at 64 more bits: within 2^-(bits+60) of the truth, while the interval ends are >= 1 ulp outside.
    mpfr w1, w15, w2;
    {
      PrecisionGuard gh(bits + 64);
      w1 = lambert_w0(mpfr(1));
      w15 = lambert_w0(mpfr(1.5));
      w2 = lambert_w0(mpfr(2));
    }
    EXPECT_TRUE(contains(w, w1));
    EXPECT_TRUE(contains(w, w15));
    EXPECT_TRUE(contains(w, w2));
    // and is no wider than [W0(1), W0(2)] plus the point widths.
    EXPECT_GE(lower_bound(w), mpfr(w1 - ldexp(mpfr(1), 8 - static_cast<int>(bits))));
    EXPECT_LE(upper_bound(w), mpfr(w2 + ldexp(mpfr(1), 8 - static_cast<int>(bits))));
  }
}

// ---------------------------------------------------------------------------------------------------------
// (5) two ways: the defining identity W e^W = x, and two precisions, on random corner-biased arguments.

TEST(LambertW0, MpfrIdentityAndTwoPrecisionsOnRandomArguments) {
  constexpr unsigned bits = 512;
  std::mt19937_64 rng(20240607);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int> kind(0, 4);
  double max_residual_units = 0, max_ulps = 0;
  for (int trial = 0; trial < 400; ++trial) {
    PrecisionGuard g(bits);
    mpfr x;
    switch (kind(rng)) {
      case 0:  // tiny, either sign
        x = ldexp(mpfr(unit(rng) + 0.5), -static_cast<int>(unit(rng) * 200000)) * (unit(rng) < 0.5 ? -1 : 1);
        break;
      case 1:  // huge
        x = ldexp(mpfr(unit(rng) + 0.5), static_cast<int>(unit(rng) * 200000));
        break;
      case 2: {  // next to the branch point: -1/e + 2^-k, k up to 500
        mpfr c;
        {
          PrecisionGuard gr(reference_bits);
          c = exp(mpfr(-1));
        }
        x = at_bits(mpfr(-c + ldexp(mpfr(unit(rng) + 0.5), -static_cast<int>(unit(rng) * 500))), bits);
        if (x < minus_inverse_e()) mpfr_nextabove(x.backend().data());
        break;
      }
      case 3:  // moderate negative
        x = mpfr(-0.36 * unit(rng));
        break;
      default:  // moderate positive
        x = mpfr(std::pow(10.0, 12 * unit(rng) - 4));
    }
    const mpfr w = lambert_w0(x);
    mpfr w_high;
    {
      PrecisionGuard gh(2 * bits);
      w_high = lambert_w0(x);
    }
    PrecisionGuard gr(reference_bits);
    // Residual of w e^w - x relative to x: f'(w) dw / x = (1 + w) dw / w with |dw| <= 4 ulps =
    // 2^-(bits-3)|w|.
    const mpfr residual = abs(mpfr(w * exp(w) - x)) / abs(x);
    const mpfr residual_units = residual / ldexp(mpfr(1), -static_cast<int>(bits));
    const mpfr allowed_units = 8 * (1 + abs(w)) + 2;
    EXPECT_LE(residual_units, allowed_units) << "x = " << x;
    max_residual_units =
        std::max(max_residual_units, static_cast<double>(mpfr(residual_units / (1 + abs(w)))));
    // Two precisions: |w_512 - w_1024| <= 4 ulps at 512 bits.
    const mpfr ulps = abs(mpfr(w - w_high)) / ldexp(abs(w_high), 1 - static_cast<int>(bits));
    EXPECT_LE(ulps, 4) << "x = " << x;
    max_ulps = std::max(max_ulps, static_cast<double>(ulps));
  }
  std::cout << "[ measured ] mpfr 512 bits, 400 random arguments: max |w e^w - x| / (|x| (1 + |w|)) = "
            << max_residual_units << " * 2^-512; max |w_512 - w_1024| = " << max_ulps << " ulp\n";
}

// ---------------------------------------------------------------------------------------------------------
// (6) domain and special values.

template <class T>
void check_binary_domain() {
  const T branch = static_cast<T>(std::is_same_v<T, float> ? -0.36787944117144232159552377016146086744581113f
                                                           : -0.36787944117144232159552377016146086744581113);
  // The nearest float/double to -1/e lies below it (checked here), and is the rounded branch point.
  ASSERT_LT(mpfr(branch), minus_inverse_e());
  EXPECT_EQ(lambert_w0(branch), T(-1));
  EXPECT_THROW(lambert_w0(std::nextafter(branch, T(-1))), InputError);
  EXPECT_THROW(lambert_w0(T(-0.5)), InputError);
  EXPECT_THROW(lambert_w0(-std::numeric_limits<T>::infinity()), InputError);
  const T above = std::nextafter(branch, T(0));
  EXPECT_GT(lambert_w0(above), T(-1));
  EXPECT_LT(lambert_w0(above), T(-0.99));
  EXPECT_TRUE(std::isnan(lambert_w0(std::numeric_limits<T>::quiet_NaN())));
  EXPECT_EQ(lambert_w0(std::numeric_limits<T>::infinity()), std::numeric_limits<T>::infinity());
  EXPECT_EQ(lambert_w0(T(0)), T(0));
  EXPECT_EQ(lambert_w0(T(-0.0)), T(0));
  EXPECT_THROW(lambert_phi_inverse(T(-1)), InputError);
  EXPECT_TRUE(std::isnan(lambert_phi_inverse(std::numeric_limits<T>::quiet_NaN())));
}

TEST(LambertW0, DoubleDomainAndSpecialValues) { check_binary_domain<double>(); }
TEST(LambertW0, FloatDomainAndSpecialValues) { check_binary_domain<float>(); }

TEST(LambertW0, MpfrDomainAndSpecialValues) {
  PrecisionGuard g(256);
  mpfr below;  // -1/e rounded down to 256 bits: the rounded branch point
  {
    PrecisionGuard gr(reference_bits);
    const mpfr c = minus_inverse_e();
    below = mpfr(0);
    mpfr_set_prec(below.backend().data(), 256);
    mpfr_set(below.backend().data(), c.backend().data(), MPFR_RNDD);
  }
  EXPECT_EQ(lambert_w0(below), -1);
  mpfr further = below;
  mpfr_nextbelow(further.backend().data());
  EXPECT_THROW(lambert_w0(further), InputError);
  try {
    lambert_w0(mpfr(-1));
  } catch (const InputError& e) {
    EXPECT_EQ(e.subject(), "lambert_w0 argument");
    EXPECT_NE(e.problem().find("-1/e"), std::string::npos);
  }
  mpfr above = below;
  mpfr_nextabove(above.backend().data());
  const mpfr w = lambert_w0(above);
  EXPECT_GT(w, -1);
  EXPECT_LT(w, mpfr(-1) + ldexp(mpfr(1), -120));
  EXPECT_TRUE(scalar_traits<mpfr>::is_nan(lambert_w0(scalar_traits<mpfr>::quiet_nan())));
  EXPECT_EQ(lambert_w0(scalar_traits<mpfr>::infinity()), scalar_traits<mpfr>::infinity());
  EXPECT_EQ(lambert_w0(mpfr(0)), 0);
  EXPECT_THROW(lambert_phi_inverse(mpfr(-1)), InputError);
}

TEST(LambertW0, IntervalDomainAndSpecialValues) {
  PrecisionGuard g(128);
  EXPECT_THROW(lambert_w0(make_interval(mpfr(-0.5), mpfr(-0.4))), InputError);  // entirely below -1/e
  EXPECT_THROW(lambert_w0(make_interval(mpfr(-0.5), mpfr(1))), InputError);     // straddles -1/e
  // An enclosure of -1/e straddles it: InputError by contract.
  const interval minus_e_inv = -exp(interval(-1));
  EXPECT_THROW(lambert_w0(minus_e_inv), InputError);
  // Its upper end alone is >= -1/e: fine, and the result has lower end >= -1.
  const interval from_above = lambert_w0(scalar_traits<interval>::upper(minus_e_inv));
  EXPECT_GE(lower_bound(from_above), -1);
  EXPECT_LT(upper_bound(from_above), -0.99);
  EXPECT_TRUE(scalar_traits<interval>::is_nan(lambert_w0(scalar_traits<interval>::quiet_nan())));
  EXPECT_THROW(lambert_phi_inverse(make_interval(mpfr(-1), mpfr(1))), InputError);
}

// ---------------------------------------------------------------------------------------------------------
// (7) phi^{-1}: Lambda_n against its table, and phi(Lambda_n) = n - 1.

TEST(LambertPhiInverse, MatchesReferenceTableAndInvertsPhi) {
  const auto rows = read_table("lambert_phi_inverse_reference.csv");
  ASSERT_GE(rows.size(), 5u);
  for (const Row& row : rows) {
    const double n = std::stod(row.x);
    const mpfr lambda = parse(row.y, reference_bits);
    // double: y = n - 1 exact; y / e rounds once (1/2 ulp + 1/2 ulp of e) and the condition number of W0 is
    // <= 1 for y >= 0, so the evaluation units of (1) plus 2 units.
    const double u = std::numeric_limits<double>::epsilon() / 2;
    const double d = lambert_phi_inverse(n - 1);
    EXPECT_LE(std::fabs(d - static_cast<double>(lambda)),
              (binary_evaluation_units + 2) * u * static_cast<double>(lambda))
        << "n = " << row.x;
    // mpfr 256 bits: the same argument with 2^-256 units.
    {
      PrecisionGuard g(256);
      const mpfr m = lambert_phi_inverse(mpfr(n - 1));
      EXPECT_LE(relative_error(m, lambda), (mpfr_evaluation_units + 2) * std::ldexp(1.0, -256)) << row.x;
    }
    // interval 256 bits: encloses and narrow; phi(Lambda_n) = Lambda e^(Lambda + 1) contains n - 1.
    {
      PrecisionGuard g(256);
      const interval i = lambert_phi_inverse(interval(n - 1));
      EXPECT_TRUE(contains(i, lambda)) << "n = " << row.x;
      EXPECT_LE(relative_error(upper_bound(i), lower_bound(i)), std::ldexp(1.0, -246)) << row.x;
      const interval phi = i * exp(i + 1);
      EXPECT_TRUE(contains(phi, mpfr(n - 1))) << "n = " << row.x;
      // and the point values of phi at the ends bracket n - 1: lower end phi <= n - 1 <= upper end phi.
      const interval phi_lo = scalar_traits<interval>::lower(i) * exp(scalar_traits<interval>::lower(i) + 1);
      const interval phi_hi = scalar_traits<interval>::upper(i) * exp(scalar_traits<interval>::upper(i) + 1);
      EXPECT_LE(lower_bound(phi_lo), n - 1);
      EXPECT_GE(upper_bound(phi_hi), n - 1);
    }
  }
}

}  // namespace
}  // namespace regatta
