// Constants with an enclosure radius (graph::Value::radius, docs/graph.md#enclosure-radii-of-constants):
// the interval forwards (interval64 and MPFI, graph/src/evaluate.cpp) and the graph affine pass
// (operators/src/model/affine/graph/linear.cpp) take each such constant as the interval [v − r, v + r].
// The second computation: the same graph with its constants perturbed inside their radii, evaluated in
// double, and the exact hull of the interval expression computed here term by term.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/scalar.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/operators/graph_affine.hpp>

#include "graph_builder.hpp"

namespace regatta::test {
namespace {

using graph::Op;

constexpr double kRc = 1e-3, kRw = 2e-3, kRb = 5e-4;  // the radii of c, W and b

const std::vector<double> kX{0.7, -1.3, 0.25, 2.0};
const std::vector<double> kC{1.5, -0.5, 2.0, 0.75};
const std::vector<double> kW{0.3, -1.1, 0.6, 0.9, 0.2, -0.4, -0.7, 0.5, 1.2, 0.1, -0.8, 0.35};  // 4 × 3
const std::vector<double> kB{0.05, -0.2, 0.4};

/// y = (x ∘ c)·W + b for x [1, 4], c [1, 4], W [4, 3], b [1, 3]; the constants with the given radii.
graph::Graph net(const std::vector<double>& c, const std::vector<double>& w, const std::vector<double>& b,
                 double rc, double rw, double rb) {
  GraphBuilder gb;
  const int x = gb.input({1, 4});
  const int C = gb.constant({1, 4}, c), W = gb.constant({4, 3}, w), B = gb.constant({1, 3}, b);
  gb.g.values[std::size_t(C)].radius = rc;
  gb.g.values[std::size_t(W)].radius = rw;
  gb.g.values[std::size_t(B)].radius = rb;
  const int h = gb.node(Op::mul, {x, C}, {1, 4});
  const int y = gb.node(Op::matmul, {h, W}, {1, 3});
  return gb.done(gb.node(Op::add, {y, B}, {1, 3}));
}

graph::Graph radius_net() { return net(kC, kW, kB, kRc, kRw, kRb); }

/// Constants drawn inside their radii (corners for the first half of the draws, interior points after).
struct Perturbed {
  std::vector<double> c, w, b;
};
Perturbed perturb(std::mt19937_64& rng, bool corner) {
  std::uniform_real_distribution<double> u(-1, 1);
  const auto draw = [&](const std::vector<double>& v, double r) {
    std::vector<double> out(v);
    for (double& e : out) e += r * (corner ? (u(rng) < 0 ? -1.0 : 1.0) : u(rng)) * (1 - 1e-12);
    return out;
  };
  return {draw(kC, kRc), draw(kW, kRw), draw(kB, kRb)};
}

std::vector<double> forward_double(const graph::Graph& g, const std::vector<double>& x) {
  return graph::evaluate<double>(g, {graph::Tensor<double>{{1, 4}, x}}).front().data;
}

/// The exact range of output j of (x ∘ C)·W + B at the point x, C, W, B the interval constants: each interval
/// enters once, so the hull is the sum over k of the range of x_k·C_k·W_kj (its four corners) and B_j; in
/// MPFR at 256 bits (exact for these sums of products of binary64 numbers).
std::pair<mpfr, mpfr> exact_range(const std::vector<double>& x, std::size_t j) {
  PrecisionGuard guard(256);
  mpfr lo = mpfr(kB[j]) - mpfr(kRb), hi = mpfr(kB[j]) + mpfr(kRb);
  for (std::size_t k = 0; k < 4; ++k) {
    mpfr tlo = 1e300, thi = -1e300;
    for (double sc : {-1.0, 1.0})
      for (double sw : {-1.0, 1.0}) {
        const mpfr t = mpfr(x[k]) * (mpfr(kC[k]) + sc * mpfr(kRc)) * (mpfr(kW[k * 3 + j]) + sw * mpfr(kRw));
        if (t < tlo) tlo = t;
        if (t > thi) thi = t;
      }
    lo += tlo;
    hi += thi;
  }
  return {lo, hi};
}

TEST(ConstantRadius, ValidateAndTheQuery) {
  const graph::Graph exact = net(kC, kW, kB, 0, 0, 0);
  EXPECT_FALSE(exact.has_inexact_constants());
  EXPECT_TRUE(radius_net().has_inexact_constants());
  graph::Graph bad = radius_net();
  bad.values[std::size_t(bad.inputs[0])].radius = 1e-3;  // on a runtime input
  EXPECT_THROW(bad.validate(), InputError);
  for (double r : {-1e-3, double(NAN), double(INFINITY)}) {
    graph::Graph g = radius_net();
    g.values[1].radius = r;  // the constant c
    EXPECT_THROW(g.validate(), InputError) << r;
  }
  // An exponent is read as exact by every consumer: one with a radius is refused.
  GraphBuilder gb;
  const int x = gb.input({1, 2});
  const int e = gb.constant({}, {2.0});
  gb.g.values[std::size_t(e)].radius = 1e-9;
  const int y = gb.node(Op::pow, {x, e}, {1, 2});
  EXPECT_THROW(gb.done(y), InputError);
}

TEST(ConstantRadius, IntervalForwardsWidenByTheRadius) {
  const graph::Graph g = radius_net(), exact = net(kC, kW, kB, 0, 0, 0);
  const std::vector<interval64> xi(kX.begin(), kX.end());
  const auto y64 = graph::evaluate<interval64>(g, {graph::Tensor<interval64>{{1, 4}, xi}}).front().data;
  const auto point = graph::evaluate<interval64>(exact, {graph::Tensor<interval64>{{1, 4}, xi}}).front().data;
  std::vector<graph::Tensor<interval>> ympfi;
  {
    PrecisionGuard guard(128);
    graph::Tensor<interval> t{{1, 4}, {}};
    for (double v : kX) t.data.emplace_back(v);
    ympfi = graph::evaluate<interval>(g, {t});
  }
  for (std::size_t j = 0; j < 3; ++j) {
    const auto [lo, hi] = exact_range(kX, j);
    // Contains the exact range, and not wider than it by more than the binary64 rounding of the walk.
    PrecisionGuard guard(256);
    EXPECT_LE(mpfr(y64[j].lower()), lo) << j;
    EXPECT_GE(mpfr(y64[j].upper()), hi) << j;
    EXPECT_GE(mpfr(y64[j].lower()), lo - 1e-13) << j;
    EXPECT_LE(mpfr(y64[j].upper()), hi + 1e-13) << j;
    const interval& m = ympfi[0].data[j];
    EXPECT_LE(lower_bound(m), lo) << j;
    EXPECT_GE(upper_bound(m), hi) << j;
    EXPECT_GE(lower_bound(m), lo - 1e-30) << j;  // 128 bits
    EXPECT_LE(upper_bound(m), hi + 1e-30) << j;
    // Without the radii the enclosure is a point up to rounding: the width comes from the radii.
    EXPECT_LT(point[j].upper() - point[j].lower(), 1e-13) << j;
    EXPECT_GT(y64[j].upper() - y64[j].lower(), 2 * kRb) << j;
  }
  // Constants perturbed inside their radii, evaluated in double: inside both enclosures.
  std::mt19937_64 rng(20261208);
  for (int k = 0; k < 200; ++k) {
    const Perturbed p = perturb(rng, k < 100);
    const auto y = forward_double(net(p.c, p.w, p.b, 0, 0, 0), kX);
    for (std::size_t j = 0; j < 3; ++j) {
      const double tol = 1e-14 * (1 + std::fabs(y[j]));  // the double forward's own rounding
      EXPECT_GE(y[j], y64[j].lower() - tol) << j;
      EXPECT_LE(y[j], y64[j].upper() + tol) << j;
      EXPECT_GE(y[j], double(lower_bound(ympfi[0].data[j])) - tol) << j;
      EXPECT_LE(y[j], double(upper_bound(ympfi[0].data[j])) + tol) << j;
    }
  }
}

TEST(ConstantRadius, AffinePassWidensByTheRadius) {
  operators::InputSet set;
  set.norm = operators::InputNorm::linf;
  set.centre = Eigen::Map<const Vector<double>>(kX.data(), 4);
  set.radius = 0.05;
  const graph::Graph g = radius_net(), exact = net(kC, kW, kB, 0, 0, 0);
  const std::vector<interval64> wide = operators::graph_affine_output_ranges(g, set);
  const std::vector<interval64> narrow = operators::graph_affine_output_ranges(exact, set);
  ASSERT_EQ(wide.size(), 3u);
  // The slack the pass adds (linear.cpp): the mul's |x|·r_c through |W|, r_W·Σ_k sup|x_k ∘ c_k| of the
  // matmul, r_b of the add; sup|x_k| = |x_k| + 0.05.
  for (std::size_t j = 0; j < 3; ++j) {
    double extra = kRb;
    for (std::size_t k = 0; k < 4; ++k) {
      const double sx = std::fabs(kX[k]) + set.radius;
      extra += std::fabs(kW[k * 3 + j]) * sx * kRc + kRw * (std::fabs(kC[k]) * sx + sx * kRc);
    }
    EXPECT_NEAR(wide[j].upper() - narrow[j].upper(), extra, 1e-6 * extra) << j;
    EXPECT_NEAR(narrow[j].lower() - wide[j].lower(), extra, 1e-6 * extra) << j;
  }
  // Points of the box with the constants perturbed inside their radii: inside the ranges; the widest
  // reach (a corner of x and of the constants) is more than the radius-free ranges allow.
  std::mt19937_64 rng(7);
  bool outside_narrow = false;
  const auto points = sample_set(set, 300, 11);
  for (std::size_t k = 0; k < points.size(); ++k) {
    const Perturbed p = perturb(rng, k % 2 == 0);
    const auto y = forward_double(net(p.c, p.w, p.b, 0, 0, 0), points[k]);
    for (std::size_t j = 0; j < 3; ++j) {
      const double tol = 1e-14 * (1 + std::fabs(y[j]));
      EXPECT_GE(y[j], wide[j].lower() - tol) << j;
      EXPECT_LE(y[j], wide[j].upper() + tol) << j;
      outside_narrow = outside_narrow || y[j] < narrow[j].lower() || y[j] > narrow[j].upper();
    }
  }
  EXPECT_TRUE(outside_narrow)
      << "the perturbed constants never left the radius-free ranges: the check is blind";
}

/// Ranges of g over the box of radius h around centre, and of g with every radius set to 0.
std::pair<std::vector<interval64>, std::vector<interval64>> ranges_with_and_without(
    const graph::Graph& g, const std::vector<double>& centre, double h) {
  operators::InputSet set;
  set.norm = operators::InputNorm::linf;
  set.centre = Eigen::Map<const Vector<double>>(centre.data(), Eigen::Index(centre.size()));
  set.radius = h;
  graph::Graph exact = g;
  for (graph::Value& v : exact.values) v.radius = 0;
  return {operators::graph_affine_output_ranges(g, set), operators::graph_affine_output_ranges(exact, set)};
}

/// Points of the box with every constant perturbed inside its radius: inside `ranges`.
void expect_perturbed_inside(const graph::Graph& g, const std::vector<double>& centre, double h,
                             const std::vector<interval64>& ranges) {
  operators::InputSet set;
  set.norm = operators::InputNorm::linf;
  set.centre = Eigen::Map<const Vector<double>>(centre.data(), Eigen::Index(centre.size()));
  set.radius = h;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  const graph::Shape& shape = g.values[std::size_t(g.inputs[0])].shape;
  for (const auto& point : sample_set(set, 200, 3)) {
    graph::Graph p = g;
    for (graph::Value& v : p.values)
      if (v.constant) {
        for (double& e : v.data) e += v.radius * u(rng) * (1 - 1e-12);
        v.radius = 0;
      }
    const auto out = graph::evaluate<double>(p, {graph::Tensor<double>{shape, point}}).front().data;
    for (std::size_t j = 0; j < out.size(); ++j) {
      EXPECT_GE(out[j], ranges[j].lower() - 1e-12) << j;
      EXPECT_LE(out[j], ranges[j].upper() + 1e-12) << j;
    }
  }
}

TEST(ConstantRadius, AConstantLeftOperandOfMatmul) {
  // W·x for a constant W [3, 4] of radius r_W and x [4, 1] (the sparse path): each output widens by
  // r_W·Σ_k sup|x_k| on both sides.
  GraphBuilder gb;
  const int x = gb.input({4, 1});
  const int W = gb.constant({3, 4}, kW);
  gb.g.values[std::size_t(W)].radius = kRw;
  const graph::Graph g = gb.done(gb.node(Op::matmul, {W, x}, {3, 1}));
  const double h = 0.02;
  const auto [wide, narrow] = ranges_with_and_without(g, kX, h);
  double extra = 0;
  for (double v : kX) extra += kRw * (std::fabs(v) + h);
  for (std::size_t j = 0; j < 3; ++j) {
    EXPECT_NEAR(wide[j].upper() - narrow[j].upper(), extra, 1e-6 * extra) << j;
    EXPECT_NEAR(narrow[j].lower() - wide[j].lower(), extra, 1e-6 * extra) << j;
  }
  expect_perturbed_inside(g, kX, h, wide);
}

TEST(ConstantRadius, ALayerNormScaleAndBias) {
  // LayerNorm of x [1, 3] with a scale of radius r_γ and a bias of radius r_β: the normalised entries have
  // |z| ≤ √3, so each output widens by r_γ·√3 + r_β.
  GraphBuilder gb;
  const int x = gb.input({1, 3});
  const int gamma = gb.constant({3}, {1.2, 0.8, -0.5}), beta = gb.constant({3}, {0.1, 0.0, -0.3});
  gb.g.values[std::size_t(gamma)].radius = kRc;
  gb.g.values[std::size_t(beta)].radius = kRb;
  const graph::Graph g =
      gb.done(gb.node(Op::layer_norm, {x, gamma, beta}, {1, 3}, graph::LayerNormAttrs{1, 1e-5}));
  const std::vector<double> centre{0.4, -1.1, 0.9};
  const double h = 0.01;
  const auto [wide, narrow] = ranges_with_and_without(g, centre, h);
  const double extra = kRc * std::sqrt(3.0) + kRb;
  for (std::size_t j = 0; j < 3; ++j) {
    EXPECT_NEAR(wide[j].upper() - narrow[j].upper(), extra, 1e-9) << j;
    EXPECT_NEAR(narrow[j].lower() - wide[j].lower(), extra, 1e-9) << j;
  }
  expect_perturbed_inside(g, centre, h, wide);
}

}  // namespace
}  // namespace regatta::test
