// The enclosure checks of transfer_test.cpp have power: a form that loses its dependence on the input
// symbols is caught; and hand-made cases whose exact result is not a binary64 number (1 + 2⁻⁶⁰, e, ...)
// with no symbols at all: there the output form is a point plus its rounding terms, and the test checks that
// the enclosure holds and that the same check FAILS once the slack and the fresh symbols are dropped, so a
// transfer function that forgot its rounding terms would be caught.
#include <gtest/gtest.h>

#include "transfer_cases.hpp"

namespace regatta::operators::affine {
namespace {

using namespace transfer_test;

// ---- the checks have power
// ---------------------------------------------------------------------------------

/// The number of (point, entry) pairs at which y lies outside `out` (check (a)), without failing.
int count_outside(const Form& F, const Form& out, const Pass& p, const std::function<R(const R&)>& f,
                  std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  int outside = 0;
  for (int k = 0; k < 200; ++k) {
    const Symbols sym = draw_symbols(p.q, Index(F.A.cols()), rng, k % 2);
    const std::vector<R> x = values(F, sym, std::vector<double>(static_cast<std::size_t>(F.size()), 0.0));
    for (Index e = 0; e < out.size(); ++e) outside += excess(out, e, sym, f(x[std::size_t(e)])) > 0;
  }
  return outside;
}

TEST(AffineTransfer, AFormThatLosesItsDependenceIsCaught) {
  // The same transfer functions as above, with the output's coefficient on the first input symbol negated:
  // the sampled points must then find exact values outside the form, so the checks above can fail.
  PrecisionGuard guard(bits);
  const Form F = random_form(6, K, 0.5, 1.0, 0.3, 1e-3, 70);
  const Pass p = pass_for(q, K);
  const auto flip = [](Form out) {
    out.A.col(0) *= -1;
    out.forget();
    return out;
  };
  EXPECT_GT(count_outside(
                F, flip(affine_entries(F, I(2.0), std::vector<I>(6, I(0.0)), p)), p,
                [](const R& x) { return R(2) * x; }, 72),
            0);
  Pass pe = pass_for(q, K);
  EXPECT_GT(count_outside(
                F, flip(nonlinear(F, Function::exp, pe)), pe, [](const R& x) { return exp(x); }, 73),
            0);
  Pass pg = pass_for(q, K);
  EXPECT_GT(count_outside(
                F, flip(nonlinear(F, Function::gelu_erf, pg)), pg,
                [](const R& x) { return exact_function(Function::gelu_erf, x); }, 74),
            0);
}

// ---- rounding terms: hand-made cases ----------------------------------------------------------------------

/// A form of point entries (no symbols but q zero input columns).
Form points(const std::vector<double>& c) {
  const Index N = Index(c.size());
  Form F{Vector<double>(N), Matrix<double>::Zero(N, q), Vector<double>::Zero(N)};
  for (Index e = 0; e < N; ++e) F.c(e) = c[std::size_t(e)];
  return F;
}

/// `out` with its slack and the columns beyond `K_old` removed: what a transfer function that forgot its
/// rounding terms (and its remainders) would give.
Form dropped(Form out, Index K_old) {
  out.s.setZero();
  if (out.A.cols() > K_old) out.A.rightCols(out.A.cols() - K_old).setZero();
  out.forget();
  return out;
}

/// The exact values y of a hand-made case must lie in `out` (at ε = 0) and outside dropped(out).
void expect_rounding_matters(const Form& out, const std::vector<R>& y) {
  const Symbols zero(static_cast<std::size_t>(q), 0.0);
  const Form bare = dropped(out, q);
  bool some_outside = false;
  for (Index e = 0; e < out.size(); ++e) {
    EXPECT_LE(excess(out, e, zero, y[std::size_t(e)]), 0) << "entry " << e;
    some_outside = some_outside || excess(bare, e, zero, y[std::size_t(e)]) > 0;
  }
  EXPECT_TRUE(some_outside) << "the exact values lie in the form without its rounding terms: the case does "
                               "not exercise them";
}

TEST(AffineRounding, SumBelowOneUlpNeedsTheSlack) {
  PrecisionGuard guard(bits);
  const double tiny = std::ldexp(1.0, -60);
  const Pass p = pass_for(q, q);
  const Form out = combine(points({1.0, -1.0}), points({tiny, -tiny}), 1.0, p);  // 1 + 2⁻⁶⁰ rounds to 1
  expect_rounding_matters(out, {R(1) + R(tiny), R(-1) - R(tiny)});
  const Form sum = sum_groups(points({1.0, tiny, tiny}), {{0, 1, 2}}, p);
  expect_rounding_matters(sum, {R(1) + R(2) * R(tiny)});
}

TEST(AffineRounding, LinearMapCancellationNeedsTheSlack) {
  PrecisionGuard guard(bits);
  // x·W with x = (1 + u, 1), W = (1 + u, 1 + u)ᵀ: exactly 2 + 3u + u², and u² = 2⁻⁶⁰ is lost by the binary64
  // dot product.
  const double u = std::ldexp(1.0, -30);
  const Pass p = pass_for(q, q);
  Matrix<double> W(2, 1);
  W << 1.0 + u, 1.0 + u;
  const Form out = linear_rows(points({1.0 + u, 1.0}), 1, W, Vector<double>(), p);
  expect_rounding_matters(out, {(R(1) + R(u)) * (R(1) + R(u)) + (R(1) + R(u))});
}

TEST(AffineRounding, ProductOfCentresNeedsTheSlack) {
  PrecisionGuard guard(bits);
  const double u = std::ldexp(1.0, -30);
  Pass p = pass_for(q, q);
  const Form out = product(points({1.0 + u}), points({1.0 + u}), p);  // (1 + u)² = 1 + 2u + 2⁻⁶⁰
  expect_rounding_matters(out, {(R(1) + R(u)) * (R(1) + R(u))});
}

TEST(AffineRounding, TranscendentalAtAPointNeedsItsEnclosure) {
  PrecisionGuard guard(bits);
  for (Function f : {Function::exp, Function::reciprocal, Function::rsqrt, Function::gelu_erf,
                     Function::gelu_tanh, Function::tanh, Function::silu}) {
    Pass p = pass_for(q, q);
    const Form out = nonlinear(points({3.0, 0.7}), f, p, 1e-3);
    expect_rounding_matters(out, {exact_function(f, R(3.0)), exact_function(f, R(0.7))});
  }
}

TEST(AffineRounding, LayerNormOfAPointRowNeedsItsRoundingTerms) {
  PrecisionGuard guard(bits);
  const Index d = 4;
  const std::vector<double> row{1.0, 0.1, -0.3, std::ldexp(1.0, -40)};
  Pass p = pass_for(q, q);
  const Vector<double> gamma = Vector<double>::Constant(d, 1.0), beta = Vector<double>::Zero(d);
  const Form out = layer_norm(points(row), 1, d, gamma, beta, 1e-5, p);
  std::vector<R> x;
  for (double v : row) x.push_back(R(v));
  expect_rounding_matters(out, exact_norm(x, 1, d, gamma, beta, 1e-5, true));
}

}  // namespace
}  // namespace regatta::operators::affine
