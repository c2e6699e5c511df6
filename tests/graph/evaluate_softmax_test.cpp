// The interval forward of `softmax` (graph/src/evaluate.cpp;
// docs/graph.md#evaluation-graphincluderegattagraphevaluatehpp) against a second computation: each weight is
// increasing in its own score and decreasing in the others, so over a box of scores its exact range runs from
// the corner (own score low, others high) to the corner (own score high, others low), and the double forward
// (the shifted quotient e_l / Σ e_j, a different formula) evaluates those corners to ~1e-16. The enclosure
// must contain every sampled point and both corners and be no wider than the corners' range plus rounding; on
// scores spread over hundreds it stays finite and inside [0, 1]; −∞ mask entries get weight exactly 0, two of
// them in one row included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <regatta/core/precision.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/graph/evaluate.hpp>

namespace {

using namespace regatta;
using namespace regatta::graph;

// input [rows, len] (+ an optional constant mask [len] added first) → softmax over the last axis.
Graph softmax_graph(std::int64_t rows, std::int64_t len, const std::vector<double>& mask = {}) {
  Graph g;
  g.values.push_back(Value{"x", {rows, len}, false, {}});
  g.inputs = {0};
  int scores = 0;
  if (!mask.empty()) {
    g.values.push_back(Value{"mask", {len}, true, mask});
    g.values.push_back(Value{"masked", {rows, len}, false, {}});
    g.nodes.push_back(Node{Op::add, "add", "Add", {0, 1}, 2, {}});
    scores = 2;
  }
  g.values.push_back(Value{"y", {rows, len}, false, {}});
  const int y = static_cast<int>(g.values.size()) - 1;
  g.nodes.push_back(Node{Op::softmax, "softmax", "Softmax", {scores}, y, SoftmaxAttrs{1, 2}});
  g.outputs = {y};
  g.source = "hand-built";
  g.validate();
  return g;
}

std::vector<double> forward(const Graph& g, Shape s, std::vector<double> x) {
  return evaluate<double>(g, {Tensor<double>{std::move(s), std::move(x)}})[0].data;
}

template <class S>
std::vector<S> enclosure(const Graph& g, const Shape& s, const std::vector<double>& lo,
                         const std::vector<double>& hi) {
  std::vector<S> box;
  for (std::size_t k = 0; k < lo.size(); ++k) {
    if constexpr (std::is_same_v<S, interval64>)
      box.push_back(interval64::hull(lo[k], hi[k]));
    else
      box.push_back(S(lo[k], hi[k]));
  }
  return evaluate<S>(g, {Tensor<S>{s, box}})[0].data;
}

double lower_of(const interval64& v) { return v.lower(); }
double upper_of(const interval64& v) { return v.upper(); }
double lower_of(const interval& v) {
  return static_cast<double>(lower_bound(v));
}  // to nearest: within the tolerances
double upper_of(const interval& v) { return static_cast<double>(upper_bound(v)); }

template <class S>
void check_boxes(double spread, double width) {
  const std::int64_t rows = 3, len = 6;
  const Shape s{rows, len};
  const Graph g = softmax_graph(rows, len);
  PrecisionGuard guard(128);  // the MPFI walk's precision (interval64 ignores it)
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> centre(-spread, spread), half(0, width), unit(0, 1);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<double> lo(rows * len), hi(rows * len);
    for (std::size_t k = 0; k < lo.size(); ++k) {
      const double c = centre(rng), h = half(rng);
      lo[k] = c - h;
      hi[k] = c + h;
    }
    const std::vector<S> y = enclosure<S>(g, s, lo, hi);
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t l = 0; l < len; ++l) {
        const std::size_t k = static_cast<std::size_t>(r * len + l);
        // The two extreme corners of this weight's row, evaluated by the double forward.
        std::vector<double> at_min = lo, at_max = lo;
        for (std::int64_t j = 0; j < len; ++j) {
          const std::size_t m = static_cast<std::size_t>(r * len + j);
          at_min[m] = j == l ? lo[m] : hi[m];
          at_max[m] = j == l ? hi[m] : lo[m];
        }
        const double w_min = forward(g, s, at_min)[k], w_max = forward(g, s, at_max)[k];
        const double tol = 4e-16 * std::max(1.0, w_max) + 1e-300;
        EXPECT_LE(lower_of(y[k]), w_min + tol) << "trial " << trial << " weight " << k;
        EXPECT_GE(upper_of(y[k]), w_max - tol) << "trial " << trial << " weight " << k;
        // Tight: no wider than the exact range and rounding (the quotient form is far wider on wide boxes).
        EXPECT_GE(lower_of(y[k]), w_min - 1e-13 - 1e-12 * w_min) << "trial " << trial << " weight " << k;
        EXPECT_LE(upper_of(y[k]), w_max + 1e-13 + 1e-12 * w_max) << "trial " << trial << " weight " << k;
        EXPECT_GE(lower_of(y[k]), 0.0);
        EXPECT_LE(upper_of(y[k]), 1.0);
      }
    // Sampled points of the box.
    for (int p = 0; p < 20; ++p) {
      std::vector<double> x(lo.size());
      for (std::size_t k = 0; k < x.size(); ++k) x[k] = lo[k] + unit(rng) * (hi[k] - lo[k]);
      const std::vector<double> w = forward(g, s, x);
      for (std::size_t k = 0; k < w.size(); ++k) {
        EXPECT_LE(lower_of(y[k]), w[k] + 4e-16) << "trial " << trial;
        EXPECT_GE(upper_of(y[k]), w[k] - 4e-16) << "trial " << trial;
      }
    }
  }
}

TEST(GraphSoftmaxEnclosure, IsTheExactRangeOfEachWeightOnNarrowAndWideBoxes) {
  check_boxes<interval64>(2, 0.05);
  check_boxes<interval64>(3, 2);
  check_boxes<interval>(2, 0.05);
  check_boxes<interval>(3, 2);
}

// Scores spread over ±400 with widths up to 300: exp of a difference overflows binary64, and the range must
// still be a finite sub-interval of [0, 1] that holds the corners.
TEST(GraphSoftmaxEnclosure, StaysInsideZeroOneWhereExponentialsOverflow) {
  check_boxes<interval64>(400, 300);
}

TEST(GraphSoftmaxEnclosure, MaskedEntriesHaveWeightZeroAndTheOthersEncloseTheForward) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> mask{0, -inf, 0, -inf, 0};
  const Graph g = softmax_graph(2, 5, mask);
  const Shape s{2, 5};
  const std::vector<double> lo{-1, 0.2, 0.5, -3, 1, 0, 0, 0, 0, 0},
      hi{-0.5, 0.4, 0.7, -2, 1.5, 0.1, 0, 0.2, 0, 0.3};
  const std::vector<interval64> y = enclosure<interval64>(g, s, lo, hi);
  const std::vector<double> w = forward(g, s, lo);
  for (std::size_t k = 0; k < y.size(); ++k) {
    if (k % 5 == 1 || k % 5 == 3) {
      EXPECT_EQ(y[k].lower(), 0.0) << k;
      EXPECT_EQ(y[k].upper(), 0.0) << k;
      EXPECT_EQ(w[k], 0.0) << k;
    } else {
      EXPECT_FALSE(std::isnan(y[k].lower()) || std::isnan(y[k].upper())) << k;
      EXPECT_LE(y[k].lower(), w[k]) << k;
      EXPECT_GE(y[k].upper(), w[k]) << k;
      EXPECT_GT(y[k].lower(), 0.0) << k;
    }
  }
}

}  // namespace
