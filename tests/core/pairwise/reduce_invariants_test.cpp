// Invariants of regatta::pairwise::reduce in every scalar type (rows of π sum to 1, outputs in the convex
// hull of the visible values, causal row 0, key permutation, translation of neg_sq_dist) on the random cases
// of reduce_cases.hpp.
#include <gtest/gtest.h>

#include "reduce_cases.hpp"

namespace regatta::pairwise {
namespace {

using namespace reduce_test;

template <class S>
class PairwiseInvariants : public ::testing::Test {};

/// v as the endpoint type of the interval type S (mpfr for interval, double for interval64), for contains().
template <class S>
auto endpoint_value(double v) {
  if constexpr (std::is_same_v<S, interval>)
    return mpfr(v);
  else
    return v;
}
TYPED_TEST_SUITE(PairwiseInvariants, AllScalars, testing::ScalarNames);

TYPED_TEST(PairwiseInvariants, RowsOfPiSumToOne) {
  using S = TypeParam;
  for (const Fixture& fx : fixtures()) {
    Case c = fx.c_float;  // float-representable, so every type sees the same problem
    c.v = Matrix<double>::Ones(c.y.rows(), 1);
    c.request = Request{};
    at_precision<S>([&] {
      Converted<S> p(c);
      const Result<S> r = reduce<S>(p.problem, c.kernel, c.request);
      const double u = scalar_traits<S>::to_double(eps<S>());
      // Σ_j w_j·1 / Σ_j w_j: both sums of m non-negative terms (m u each) and one division.
      const double tol = (2.0 * double(c.y.rows()) + 4) * u;
      for (Eigen::Index i = 0; i < r.out.rows(); ++i) {
        if constexpr (scalar_traits<S>::is_interval) {
          EXPECT_TRUE(contains(r.out(i, 0), endpoint_value<S>(1.0))) << c.name << " row " << i;
        } else {
          EXPECT_LE(std::abs(scalar_traits<S>::to_double(r.out(i, 0)) - 1), tol) << c.name << " row " << i;
        }
      }
    });
  }
}

TYPED_TEST(PairwiseInvariants, OutputsInConvexHullOfVisibleValues) {
  using S = TypeParam;
  for (const Fixture& fx : fixtures()) {
    const Case& c = fx.c_float;
    at_precision<S>([&] {
      Converted<S> p(c);
      const Result<S> r = reduce<S>(p.problem, c.kernel, c.request);
      const double u = scalar_traits<S>::to_double(eps<S>());
      for (Eigen::Index i = 0; i < r.out.rows(); ++i)
        for (Eigen::Index k = 0; k < r.out.cols(); ++k) {
          double lo = kInf, hi = -kInf, mx = 0;
          for (Eigen::Index j = 0; j < c.y.rows(); ++j)
            if (visible(c, i, j)) {
              lo = std::min(lo, c.v(j, k));
              hi = std::max(hi, c.v(j, k));
              mx = std::max(mx, std::abs(c.v(j, k)));
            }
          const double slack = (double(c.y.rows()) + 2) * u * mx;  // weighted mean of m terms, one division
          const double got_lo = scalar_traits<S>::to_double(scalar_traits<S>::lower(r.out(i, k)));
          const double got_hi = scalar_traits<S>::to_double(scalar_traits<S>::upper(r.out(i, k)));
          if constexpr (scalar_traits<S>::is_interval) {  // the enclosure meets the hull
            EXPECT_TRUE(got_hi >= lo - slack && got_lo <= hi + slack)
                << c.name << " (" << i << ", " << k << ")";
          } else {
            EXPECT_GE(got_lo, lo - slack) << c.name << " (" << i << ", " << k << ")";
            EXPECT_LE(got_hi, hi + slack) << c.name << " (" << i << ", " << k << ")";
          }
        }
    });
  }
}

// Exactly v_0 for the point types (one visible term: weight exp(0) = 1); an enclosure of v_0 for interval.
TYPED_TEST(PairwiseInvariants, CausalRowZeroIsFirstValueExactly) {
  using S = TypeParam;
  for (const Fixture& fx : fixtures()) {
    Case c = fx.c_float;
    c.kernel.mask = MaskKind::causal;
    if (c.has_w && c.w(0) == -kInf) c.w(0) = 1.5;  // ω_0 finite
    at_precision<S>([&] {
      Converted<S> p(c);
      const Result<S> r = reduce<S>(p.problem, c.kernel, c.request);
      for (Eigen::Index k = 0; k < c.v.cols(); ++k) {
        if constexpr (scalar_traits<S>::is_interval) {  // w·v_0 / w with an interval weight w: an enclosure
          EXPECT_TRUE(contains(r.out(0, k), endpoint_value<S>(c.v(0, k))))
              << c.name << " out(0, " << k << ")";
          continue;
        }
        EXPECT_TRUE(lower_bound(scalar_cast<interval>(r.out(0, k))) == mpfr(c.v(0, k)) &&
                    upper_bound(scalar_cast<interval>(r.out(0, k))) == mpfr(c.v(0, k)))
            << c.name << " out(0, " << k << ") = " << scalar_traits<S>::to_double(r.out(0, k)) << " != v_0 "
            << c.v(0, k);
      }
    });
  }
}

/// Applies a permutation of the keys to keys, values, features and log-weights.
Case permute_keys(Case c, const std::vector<Eigen::Index>& perm) {
  auto rows = [&](Matrix<double>& a) {
    const Matrix<double> old = a;
    for (std::size_t j = 0; j < perm.size(); ++j) a.row(Eigen::Index(j)) = old.row(perm[j]);
  };
  rows(c.y);
  rows(c.v);
  rows(c.b);
  if (c.has_w) {
    const Vector<double> old = c.w;
    for (std::size_t j = 0; j < perm.size(); ++j) c.w(Eigen::Index(j)) = old(perm[j]);
  }
  return c;
}

TEST(PairwiseSymmetries, KeyPermutationLeavesOutputsUnchanged) {
  std::mt19937_64 rng(7);
  for (const Fixture& fx : fixtures()) {
    if (fx.c.kernel.mask != MaskKind::none) continue;  // masks are tied to key positions
    std::vector<Eigen::Index> perm(std::size_t(fx.c.y.rows()));
    std::iota(perm.begin(), perm.end(), Eigen::Index(0));
    std::shuffle(perm.begin(), perm.end(), rng);
    const Case pc = permute_keys(fx.c, perm);
    Converted<double> a(fx.c), b(pc);
    const Result<double> ra = reduce<double>(a.problem, fx.c.kernel, fx.c.request);
    const Result<double> rb = reduce<double>(b.problem, pc.kernel, pc.request);
    // Each is within the derived tolerance of the exact value, which the permutation does not change.
    const Tolerance tol = tolerance(fx.c, to_double(fx.ref.lse), Form::expanded, eps<double>());
    for_each_entry(fx.c.request, ra, rb,
                   [&](const std::string& name, Eigen::Index i, Eigen::Index k, double x, double y) {
                     EXPECT_LE(std::abs(x - y), 2 * tolerance_of(tol, name, i, k))
                         << fx.c.name << " " << name << "(" << i << ", " << k << ")";
                   });
    // In mpfr at 256 bits too (to its own, much smaller, tolerance).
    PrecisionGuard guard(256);
    Converted<mpfr> mb(pc);
    expect_close("reduce<mpfr> permuted keys", fx.c, reduce<mpfr>(mb.problem, pc.kernel, pc.request), fx.ref,
                 Form::difference);
  }
}

TEST(PairwiseSymmetries, NegSqDistIsTranslationInvariant) {
  // Coordinates are multiples of 2^-20 below 8 and the translation is an integer vector below 1000, so the
  // translated inputs are exact in double: only the paths' own rounding differs.
  std::mt19937_64 rng(11);
  for (int index = 0; index < 12; ++index) {
    Case c = random_case(rng, 10 * (index % 3) + 2);  // the self-l2 family ...
    if (index % 2 == 1) c = random_case(rng, 9);      // ... and the huge-logit one
    c.kernel.score = ScoreKind::neg_sq_dist;
    c.has_qmap = false;
    c.key_map = KeyMap::none;
    auto grid = [](double v) {
      return std::ldexp(std::round(std::ldexp(std::clamp(v, -7.0, 7.0), 20)), -20);
    };
    c.x = c.x.unaryExpr(grid);
    c.y = c.y.unaryExpr(grid);
    Case t = c;
    std::uniform_int_distribution<int> shift(-999, 999);
    for (Eigen::Index k = 0; k < c.x.cols(); ++k) {
      const double bk = shift(rng);
      t.x.col(k).array() += bk;
      t.y.col(k).array() += bk;
    }
    {  // mpfr, difference form: (x + b) − (y + b) = x − y exactly, so the results are identical.
      PrecisionGuard guard(256);
      Converted<mpfr> a(c), b(t);
      const Result<mpfr> ra = reduce<mpfr>(a.problem, c.kernel, c.request);
      const Result<mpfr> rb = reduce<mpfr>(b.problem, t.kernel, t.request);
      for_each_entry(
          c.request, ra, rb,
          [&](const std::string& name, Eigen::Index i, Eigen::Index k, const mpfr& x, const mpfr& y) {
            EXPECT_TRUE(x == y) << c.name << " mpfr " << name << "(" << i << ", " << k << ")";
          });
      // Blocked double: both within the derived tolerance (of their own inputs) of the same exact value.
      Converted<double> da(c), db(t);
      const Result<double> xa = reduce<double>(da.problem, c.kernel, c.request);
      const Result<double> xb = reduce<double>(db.problem, t.kernel, t.request);
      const Tolerance ta = tolerance(c, to_double(ra.lse), Form::expanded, eps<double>());
      const Tolerance tb = tolerance(t, to_double(rb.lse), Form::expanded, eps<double>());
      for_each_entry(c.request, xa, xb,
                     [&](const std::string& name, Eigen::Index i, Eigen::Index k, double x, double y) {
                       EXPECT_LE(std::abs(x - y), tolerance_of(ta, name, i, k) + tolerance_of(tb, name, i, k))
                           << c.name << " double " << name << "(" << i << ", " << k << ")";
                     });
    }
  }
}

}  // namespace
}  // namespace regatta::pairwise
