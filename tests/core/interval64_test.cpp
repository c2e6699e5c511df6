// interval64 (core/interval64.hpp) against MPFI at 256 bits: every result must contain the MPFI-256
// enclosure of the same operation on the same (exact) operands, and must not be wider than the binary64
// rounding of that enclosure by more than one ulp per endpoint (so an over-wide result fails as well). A
// second, independent check samples points inside the operands, evaluates the operation on them with MPFR
// at 256 bits, and requires the result to contain each value.
#include <gtest/gtest.h>
#include <mpfi.h>
#include <mpfr.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <regatta/core/convert.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/precision.hpp>
#include <string>
#include <vector>

namespace regatta {
namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double dmax = std::numeric_limits<double>::max();
constexpr double dmin = std::numeric_limits<double>::min();
constexpr double tiny = std::numeric_limits<double>::denorm_min();
constexpr mpfr_prec_t reference_bits = 256;

enum class Op { add, sub, mul, div, sqrt, square, abs, exp, expm1, log, log1p, pow, pow_int, count };

const char* name(Op op) {
  static const char* names[] = {"add", "sub",   "mul", "div",   "sqrt", "square", "abs",
                                "exp", "expm1", "log", "log1p", "pow",  "pow_int"};
  return names[static_cast<int>(op)];
}

/// An MPFI interval at 256 bits.
struct Ref {
  mpfi_t v;
  Ref() { mpfi_init2(v, reference_bits); }
  explicit Ref(const interval64& x) : Ref() { set(x); }
  void set(const interval64& x) {
    if (x.is_nan())
      mpfi_set_d(v, std::numeric_limits<double>::quiet_NaN());
    else
      mpfi_interv_d(v, x.lower(), x.upper());  // exact: 256 ≥ 53 bits
  }
  ~Ref() { mpfi_clear(v); }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  double lo_down() const { return mpfr_get_d(&v[0].left, MPFR_RNDD); }
  double hi_up() const { return mpfr_get_d(&v[0].right, MPFR_RNDU); }
  bool nan() const { return mpfi_nan_p(v) != 0; }
};

/// r = x^n for an integer n by the endpoints at 256 bits (t ↦ t^n is monotone on each sign, or even).
void reference_pow_int(Ref& r, const Ref& x, long n) {
  mpfr_t a, b;
  mpfr_inits2(reference_bits, a, b, static_cast<mpfr_ptr>(nullptr));
  if (n % 2 == 0) {
    Ref ax;
    mpfi_abs(ax.v, x.v);
    mpfr_pow_si(a, &ax.v[0].left, n, MPFR_RNDD);
    mpfr_pow_si(b, &ax.v[0].right, n, MPFR_RNDU);
  } else {
    mpfr_pow_si(a, &x.v[0].left, n, MPFR_RNDD);
    mpfr_pow_si(b, &x.v[0].right, n, MPFR_RNDU);
  }
  mpfi_interv_fr(r.v, a, b);
  mpfr_clears(a, b, static_cast<mpfr_ptr>(nullptr));
}

/// r = x^y for x ≥ 0: exp(y · log x) in MPFI (positive x only; the callers keep x away from 0).
void reference_pow(Ref& r, const Ref& x, const Ref& y) {
  Ref l;
  mpfi_log(l.v, x.v);
  mpfi_mul(l.v, l.v, y.v);
  mpfi_exp(r.v, l.v);
}

interval64 apply(Op op, const interval64& a, const interval64& b, int n) {
  switch (op) {
    case Op::add:
      return a + b;
    case Op::sub:
      return a - b;
    case Op::mul:
      return a * b;
    case Op::div:
      return a / b;
    case Op::sqrt:
      return sqrt(a);
    case Op::square:
      return square(a);
    case Op::abs:
      return abs(a);
    case Op::exp:
      return exp(a);
    case Op::expm1:
      return expm1(a);
    case Op::log:
      return log(a);
    case Op::log1p:
      return log1p(a);
    case Op::pow:
      return pow(a, b);
    case Op::pow_int:
      return pow(a, n);
    case Op::count:
      break;
  }
  return interval64::nan();
}

void reference(Op op, Ref& r, const Ref& a, const Ref& b, int n) {
  switch (op) {
    case Op::add:
      mpfi_add(r.v, a.v, b.v);
      break;
    case Op::sub:
      mpfi_sub(r.v, a.v, b.v);
      break;
    case Op::mul:
      mpfi_mul(r.v, a.v, b.v);
      break;
    case Op::div:
      mpfi_div(r.v, a.v, b.v);
      break;
    case Op::sqrt:
      mpfi_sqrt(r.v, a.v);
      break;
    case Op::square:
      mpfi_sqr(r.v, a.v);
      break;
    case Op::abs:
      mpfi_abs(r.v, a.v);
      break;
    case Op::exp:
      mpfi_exp(r.v, a.v);
      break;
    case Op::expm1:
      mpfi_expm1(r.v, a.v);
      break;
    case Op::log:
      mpfi_log(r.v, a.v);
      break;
    case Op::log1p:
      mpfi_log1p(r.v, a.v);
      break;
    case Op::pow:
      reference_pow(r, a, b);
      break;
    case Op::pow_int:
      reference_pow_int(r, a, n < 0 ? -n : n);
      if (n < 0) mpfi_inv(r.v, r.v);
      break;
    case Op::count:
      break;
  }
}

/// The value of op at points (sa, sb) in MPFR at 256 bits, rounded to nearest (into out).
void point_value(Op op, mpfr_t out, double sa, double sb, int n) {
  mpfr_t a, b;
  mpfr_inits2(reference_bits, a, b, static_cast<mpfr_ptr>(nullptr));
  mpfr_set_d(a, sa, MPFR_RNDN);
  mpfr_set_d(b, sb, MPFR_RNDN);
  switch (op) {
    case Op::add:
      mpfr_add(out, a, b, MPFR_RNDN);
      break;
    case Op::sub:
      mpfr_sub(out, a, b, MPFR_RNDN);
      break;
    case Op::mul:
      mpfr_mul(out, a, b, MPFR_RNDN);
      break;
    case Op::div:
      mpfr_div(out, a, b, MPFR_RNDN);
      break;
    case Op::sqrt:
      mpfr_sqrt(out, a, MPFR_RNDN);
      break;
    case Op::square:
      mpfr_sqr(out, a, MPFR_RNDN);
      break;
    case Op::abs:
      mpfr_abs(out, a, MPFR_RNDN);
      break;
    case Op::exp:
      mpfr_exp(out, a, MPFR_RNDN);
      break;
    case Op::expm1:
      mpfr_expm1(out, a, MPFR_RNDN);
      break;
    case Op::log:
      mpfr_log(out, a, MPFR_RNDN);
      break;
    case Op::log1p:
      mpfr_log1p(out, a, MPFR_RNDN);
      break;
    case Op::pow:
      mpfr_pow(out, a, b, MPFR_RNDN);
      break;
    case Op::pow_int:
      mpfr_pow_si(out, a, n, MPFR_RNDN);
      break;
    case Op::count:
      break;
  }
  mpfr_clears(a, b, static_cast<mpfr_ptr>(nullptr));
}

// ---- operand generation: moderate, full-range (subnormal to huge), special values, ties ----
class Generator {
 public:
  explicit Generator(std::uint64_t seed) : rng_(seed) {}

  double uniform() { return std::uniform_real_distribution<double>(0, 1)(rng_); }
  int below(int k) { return std::uniform_int_distribution<int>(0, k - 1)(rng_); }

  double number() {
    static constexpr std::array<double, 16> special = {0.0,  -0.0,  1.0,  -1.0,  0.5, 2.0,  dmax,  -dmax,
                                                       dmin, -dmin, tiny, -tiny, inf, -inf, 1e308, -1e-308};
    const int kind = below(10);
    if (kind < 4) return (below(2) ? -1 : 1) * std::ldexp(1 + uniform(), below(41) - 20);
    if (kind < 7) {
      for (;;) {  // any finite double, exponents uniform over the whole range (subnormals included)
        const double v = std::bit_cast<double>(std::uniform_int_distribution<std::uint64_t>()(rng_));
        if (std::isfinite(v)) return v;
      }
    }
    if (kind < 8) return special[below(special.size())];
    if (kind < 9) return (below(2) ? -1 : 1) * (700 + 50 * uniform());  // huge logits: exp overflows
    return std::nextafter(1.0, below(2) ? 2.0 : 0.0) * (below(2) ? 1 : -1);
  }

  interval64 operand() {
    const int kind = below(10);
    if (kind == 0 && below(10) == 0) return interval64::nan();
    const double a = number();
    if (kind < 5 || !std::isfinite(a)) return interval64(a);
    double b = kind < 8 ? a + std::fabs(a) * std::ldexp(uniform(), -below(50)) : number();
    if (!(b == b)) b = a;
    return interval64::hull(std::fmin(a, b), std::fmax(a, b));
  }

  /// A second operand that makes a + b or a · b a tie (half an ulp of a), or an ordinary one.
  interval64 partner(Op op, const interval64& a) {
    if ((op == Op::add || op == Op::sub) && below(5) == 0 && a.lower() == a.upper() &&
        std::isfinite(a.lower()) && a.lower() != 0) {
      const double v = a.lower();
      const double half_ulp = (std::nextafter(std::fabs(v), inf) - std::fabs(v)) / 2;
      return interval64((below(2) ? 1 : -1) * half_ulp * (1 + 2 * below(3)));
    }
    return operand();
  }

  std::mt19937_64& rng() { return rng_; }

 private:
  std::mt19937_64 rng_;
};

/// Restricts operands to the part of the domain where the MPFI reference means the same set.
bool in_reference_domain(Op op, const interval64& a, const interval64& b, int n) {
  switch (op) {
    case Op::div:
      return !(b.lower() <= 0 && b.upper() >= 0);  // 0 ∈ b: checked by the corner tests
    case Op::pow_int:
      return n >= 0 || a.lower() > 0 || a.upper() < 0;
    case Op::sqrt:
      return a.lower() >= 0;
    case Op::log:
      return a.lower() > 0;
    case Op::log1p:
      return a.lower() > -1;
    case Op::pow:
      return a.lower() > 0 && std::isfinite(a.upper()) && std::isfinite(b.lower()) &&
             std::isfinite(b.upper());
    default:
      return true;
  }
}

TEST(Interval64, RunsInRoundToNearest) { EXPECT_EQ(std::fegetround(), FE_TONEAREST); }

TEST(Interval64, EnclosesMpfi256OnAMillionRandomAndCornerOperations) {
  Generator gen(20261201);
  std::array<long, static_cast<int>(Op::count)> checked{};
  long trials = 0, nan_results = 0;
  Ref ra, rb, r;  // reused: the reference costs a few MPFI operations per trial, not allocations
  for (; trials < 1'000'000; ++trials) {
    const Op op = static_cast<Op>(gen.below(static_cast<int>(Op::count)));
    interval64 a = gen.operand();
    interval64 b = gen.partner(op, a);
    if (op == Op::pow) {  // exponents of moderate size, bases in a range where x^y stays finite often
      a = abs(a);
      b = interval64::hull(-4 + 8 * gen.uniform(), 0) + interval64(8 * gen.uniform());
    }
    const int n = gen.below(12) - 3;
    const interval64 got = apply(op, a, b, n);
    if (a.is_nan() ||
        ((op == Op::add || op == Op::sub || op == Op::mul || op == Op::div || op == Op::pow) && b.is_nan())) {
      ASSERT_TRUE(got.is_nan()) << name(op) << " of NaN gave " << got;
      ++nan_results;
      continue;
    }
    if (!in_reference_domain(op, a, b, n)) continue;
    ra.set(a);
    rb.set(b);
    reference(op, r, ra, rb, n);
    if (r.nan()) {  // ∞ − ∞, 0 · ∞ in MPFI's convention, ∞/∞: interval64 must not return a finite claim
      EXPECT_TRUE(got.is_nan() || !isfinite(got) || isinf(a) || isinf(b))
          << name(op) << "(" << a << ", " << b << ") = " << got;
      continue;
    }
    const double lo = r.lo_down(), hi = r.hi_up();
    ASSERT_FALSE(got.is_nan()) << name(op) << "(" << a << ", " << b << ", n=" << n << ")";
    ASSERT_LE(got.lower(), lo) << name(op) << "(" << a << ", " << b << ", n=" << n << ") = " << got
                               << " does not enclose MPFI-256";
    ASSERT_GE(got.upper(), hi) << name(op) << "(" << a << ", " << b << ", n=" << n << ") = " << got
                               << " does not enclose MPFI-256";
    // Tightness: one ulp per endpoint beyond the binary64 rounding of the reference (pow and integer
    // powers compose several roundings: a few ulps).
    const int slack = 1;
    double lo_limit = lo, hi_limit = hi;
    for (int k = 0; k < slack; ++k) {
      lo_limit = std::nextafter(lo_limit, -inf);
      hi_limit = std::nextafter(hi_limit, inf);
    }
    if (op != Op::pow) {
      ASSERT_GE(got.lower(), lo_limit) << name(op) << "(" << a << ", " << b << ") = " << got << " too wide";
      ASSERT_LE(got.upper(), hi_limit) << name(op) << "(" << a << ", " << b << ") = " << got << " too wide";
    }
    ++checked[static_cast<int>(op)];
  }
  for (int k = 0; k < static_cast<int>(Op::count); ++k)
    EXPECT_GT(checked[k], 10'000) << name(static_cast<Op>(k)) << " was compared too rarely";
  EXPECT_GT(nan_results, 1000);
}

TEST(Interval64, ContainsTheValueAtSampledPointsOfTheOperands) {
  Generator gen(7);
  mpfr_t v;
  mpfr_init2(v, reference_bits);
  for (int trial = 0; trial < 100'000; ++trial) {
    const Op op = static_cast<Op>(gen.below(static_cast<int>(Op::count)));
    interval64 a = gen.operand(), b = gen.operand();
    if (op == Op::pow) a = abs(a);
    if (a.is_nan() || b.is_nan() || !isfinite(a) || !isfinite(b)) continue;
    const int n = gen.below(12) - 3;
    const interval64 got = apply(op, a, b, n);
    for (int s = 0; s < 3; ++s) {
      const double t = gen.uniform(), u = gen.uniform();
      const double sa = std::clamp(a.lower() * (1 - t) + a.upper() * t, a.lower(), a.upper());
      const double sb = std::clamp(b.lower() * (1 - u) + b.upper() * u, b.lower(), b.upper());
      point_value(op, v, sa, sb, n);
      if (mpfr_nan_p(v) || mpfr_inf_p(v)) continue;  // outside the domain, or a pole, at this point
      ASSERT_FALSE(got.is_nan()) << name(op) << "(" << a << ", " << b << ") is NaN, but the value at (" << sa
                                 << ", " << sb << ") exists";
      ASSERT_TRUE(mpfr_cmp_d(v, got.lower()) >= 0 && mpfr_cmp_d(v, got.upper()) <= 0)
          << name(op) << "(" << a << ", " << b << ", n=" << n << ") = " << got << " misses the value at ("
          << sa << ", " << sb << "): " << mpfr_get_d(v, MPFR_RNDN);
    }
  }
  mpfr_clear(v);
}

TEST(Interval64, CornerCases) {
  // −0.0 and +0.0 are the same point; products with zero are exactly zero, even against infinity.
  EXPECT_EQ(interval64(-0.0) + interval64(0.0), interval64(0.0));
  const interval64 z = interval64(0.0) * interval64::hull(-inf, inf);
  EXPECT_EQ(z.lower(), 0);
  EXPECT_EQ(z.upper(), 0);
  // Exact operations stay points (TwoSum / fma error terms are zero).
  EXPECT_EQ(interval64(3.0) * interval64(0.25), interval64(0.75));
  EXPECT_EQ(interval64(1.0) / interval64(4.0), interval64(0.25));
  EXPECT_EQ(sqrt(interval64(16.0)), interval64(4.0));
  const interval64 lost = interval64(1.0) + interval64(std::ldexp(1.0, -60)) - interval64(1.0);
  EXPECT_EQ(lost.lower(), 0);
  EXPECT_TRUE(contains(lost, std::ldexp(1.0, -60)));
  // An inexact operation is one ulp wide and contains the real result: 1/3.
  const interval64 third = interval64(1.0) / interval64(3.0);
  EXPECT_EQ(std::nextafter(third.lower(), inf), third.upper());
  EXPECT_TRUE(third.lower() * 3 <= 1.0 && std::fma(third.upper(), 3.0, -1.0) > 0);
  // Overflow: the exact value is finite but beyond DBL_MAX.
  const interval64 big = interval64(dmax) + interval64(dmax);
  EXPECT_EQ(big.lower(), dmax);
  EXPECT_EQ(big.upper(), inf);
  const interval64 e = exp(interval64(710.0));
  EXPECT_EQ(e.lower(), dmax);
  EXPECT_EQ(e.upper(), inf);
  // Underflow: exp(−800) > 0 lies below the smallest subnormal.
  const interval64 u = exp(interval64(-800.0));
  EXPECT_EQ(u.lower(), 0);
  EXPECT_EQ(u.upper(), tiny);
  // Subnormal products widen outward and keep the sign.
  const interval64 s = interval64(tiny) * interval64(0.5);
  EXPECT_EQ(s.lower(), 0);
  EXPECT_EQ(s.upper(), tiny);
  // Division by intervals containing zero.
  EXPECT_TRUE((interval64(1.0) / interval64::hull(0, 0)).is_nan());
  const interval64 one_sided = interval64::hull(1, 2) / interval64::hull(0, 4);
  EXPECT_EQ(one_sided.lower(), 0.25);
  EXPECT_EQ(one_sided.upper(), inf);
  const interval64 both = interval64::hull(1, 2) / interval64::hull(-1, 4);
  EXPECT_EQ(both.lower(), -inf);
  EXPECT_EQ(both.upper(), inf);
  // NaN in, NaN out; ∞ − ∞ is NaN.
  EXPECT_TRUE((interval64::nan() + interval64(1.0)).is_nan());
  EXPECT_TRUE((interval64(inf) - interval64(inf)).is_nan());
  EXPECT_TRUE(log(interval64(-1.0)).is_nan());
  EXPECT_EQ(log(interval64(0.0)).upper(), -inf);
  // Comparisons follow Boost's MPFI number: certain, equal, or an error when ambiguous.
  EXPECT_TRUE(interval64::hull(0, 1) < interval64::hull(2, 3));
  EXPECT_FALSE(interval64::nan() < interval64(1.0));
  EXPECT_THROW((void)(interval64::hull(0, 2) < interval64::hull(1, 3)), std::domain_error);
}

// exp of a point takes one round-to-nearest MPFR call and its ternary value: its ends must be exactly
// MPFR's correctly rounded values down and up at 53 bits (two directed calls here), on random points of
// every size and on the edges of the normal range, of overflow and of underflow.
TEST(Interval64, ExpOfAPointIsTheDirectedRoundingsOfMpfr) {
  mpfr_t x, y;
  mpfr_init2(x, 53);
  mpfr_init2(y, 53);
  auto directed = [&](double v, mpfr_rnd_t rnd) {
    mpfr_set_d(x, v, MPFR_RNDN);
    mpfr_exp(y, x, rnd);
    return mpfr_get_d(y, rnd);
  };
  std::vector<double> points = {0.0,
                                -0.0,
                                1.0,
                                -1.0,
                                709.78,
                                709.7827128933840,
                                709.79,
                                710.0,
                                -708.39,
                                -708.4,
                                -708.3964185322641,
                                -744.44,
                                -745.13,
                                -745.2,
                                -800.0,
                                1e-300,
                                -1e-300,
                                tiny,
                                -tiny,
                                dmin,
                                -dmin,
                                0.6931471805599453};
  std::mt19937_64 rng(40);
  std::uniform_real_distribution<double> wide(-760.0, 720.0), small(-1.0, 1.0);
  std::uniform_int_distribution<int> scale(-60, 3);
  for (int k = 0; k < 300000; ++k) {
    points.push_back(wide(rng));
    points.push_back(std::ldexp(small(rng), scale(rng)));
  }
  for (double v : points) {
    const interval64 e = exp(interval64(v));
    ASSERT_EQ(e.lower(), directed(v, MPFR_RNDD)) << v;
    ASSERT_EQ(e.upper(), directed(v, MPFR_RNDU)) << v;
  }
  mpfr_clear(x);
  mpfr_clear(y);
}

TEST(Interval64, ConversionsToAndFromMpfiEnclose) {
  PrecisionGuard guard(24);  // below 53 bits: interval64 → interval must round outward
  const interval64 x = interval64(1.0) / interval64(3.0);
  const interval back = scalar_cast<interval>(x);
  EXPECT_LE(mpfr_get_d(lower_bound(back).backend().data(), MPFR_RNDD), x.lower());
  EXPECT_GE(mpfr_get_d(upper_bound(back).backend().data(), MPFR_RNDU), x.upper());
  const interval64 again = scalar_cast<interval64>(back);
  EXPECT_LE(again.lower(), x.lower());
  EXPECT_GE(again.upper(), x.upper());
  const PrecisionGuard wide(256);
  const interval64 from_mpfr = scalar_cast<interval64>(mpfr(1) / 3);
  EXPECT_EQ(from_mpfr, x);  // the two neighbours of 1/3
}

}  // namespace
}  // namespace regatta
