// graph_certified_radius (graph_affine.hpp, docs/models.md#certifying-an-onnx-graph): on a linear graph the
// exact robustness radius is closed-form (min over classes c of the margin over the dual norm of
// W_label − W_c, or a piecewise-linear equation with a valid-range box), computed here in long double without
// the library: the certified radius must be at most it (soundness) and within the search's tolerance of it
// (the affine forms are exact on a linear map). On a torch-exported ViT: the affine margin at the returned
// radius is positive, it fails just above (the bracket closed), and projected gradient descent finds no
// misclassification inside.
//
// graph_region_radius (graph_region.hpp, docs/models.md#region-enclosures-of-a-graph): on the linear graph
// the gradient is constant, so the region bound is exact without a range box and the radius must match the
// closed form as the affine one does; on the ViT the region radius is positive, at most the affine radius
// (the affine forms keep first-order dependence the box loses), its own test passes, and the double forward
// classifies sampled points of the certified set (on its sphere and inside) as the label.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <regatta/graph/attack.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/graph.hpp>
#include <regatta/operators/graph_affine.hpp>
#include <regatta/operators/graph_region.hpp>
#ifdef REGATTA_HAVE_ONNX
#include <regatta/core/io/npy.hpp>
#include <regatta/graph/onnx_import.hpp>
#endif

namespace {

using namespace regatta;
using operators::InputNorm;
using operators::InputSet;

/// y = x·W + b: x [1, n], W [n, m], b [m] (a matmul and an add, as an ONNX exporter writes a linear layer).
graph::Graph linear_graph(const std::vector<double>& W, const std::vector<double>& b, std::int64_t n,
                          std::int64_t m) {
  graph::Graph g;
  g.source = "linear";
  g.values.push_back({"x", {1, n}, false, {}});
  g.values.push_back({"W", {n, m}, true, W});
  g.values.push_back({"b", {m}, true, b});
  g.values.push_back({"xW", {1, m}, false, {}});
  g.values.push_back({"y", {1, m}, false, {}});
  g.nodes.push_back({graph::Op::matmul, "mm", "MatMul", {0, 1}, 3, {}});
  g.nodes.push_back({graph::Op::add, "add", "Add", {3, 2}, 4, {}});
  g.inputs = {0};
  g.outputs = {4};
  g.validate();
  return g;
}

struct Linear {
  std::int64_t n = 12, m = 5;
  std::vector<double> W, b, x;
  int label = 0;
};

/// Weights and biases of 2^-6 steps, a point the graph classifies as its label with some margin.
Linear random_linear(unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> step(-64, 64);
  Linear L;
  for (std::int64_t k = 0; k < L.n * L.m; ++k) L.W.push_back(std::ldexp(step(rng), -6));
  for (std::int64_t k = 0; k < L.m; ++k) L.b.push_back(std::ldexp(step(rng), -6));
  for (std::int64_t k = 0; k < L.n; ++k) L.x.push_back(0.5 + std::ldexp(step(rng), -8));
  std::vector<long double> y(static_cast<std::size_t>(L.m));
  for (std::int64_t c = 0; c < L.m; ++c) {
    y[std::size_t(c)] = L.b[std::size_t(c)];
    for (std::int64_t j = 0; j < L.n; ++j)
      y[std::size_t(c)] += (long double)L.x[std::size_t(j)] * L.W[std::size_t(j * L.m + c)];
  }
  L.label = int(std::max_element(y.begin(), y.end()) - y.begin());
  return L;
}

/// The exact radius in long double: min_c margin_c / ‖W_label − W_c‖_dual (l2: ‖·‖₂; l∞ with per-coordinate
/// scale s: Σ_j s_j·|·|).
long double exact_radius(const Linear& L, InputNorm norm, const std::vector<double>& scale) {
  long double best = std::numeric_limits<long double>::infinity();
  for (std::int64_t c = 0; c < L.m; ++c) {
    if (c == L.label) continue;
    long double margin = (long double)L.b[std::size_t(L.label)] - L.b[std::size_t(c)], dual = 0;
    for (std::int64_t j = 0; j < L.n; ++j) {
      const long double a = (long double)L.W[std::size_t(j * L.m + L.label)] - L.W[std::size_t(j * L.m + c)];
      margin += a * L.x[std::size_t(j)];
      dual += norm == InputNorm::l2 ? a * a : std::fabs(a) * (scale.empty() ? 1.0L : scale[std::size_t(j)]);
    }
    best = std::min(best, margin / (norm == InputNorm::l2 ? std::sqrt(dual) : dual));
  }
  return best;
}

/// The exact l∞ radius with the valid range [lo, hi]: the smallest r where some class's worst case over the
/// box ∩ [lo, hi] reaches 0 (each coordinate moves against a_j by min(r, room)), by bisection on r.
long double exact_boxed_linf(const Linear& L, double lo, double hi) {
  auto worst = [&](long double r) {
    long double w = std::numeric_limits<long double>::infinity();
    for (std::int64_t c = 0; c < L.m; ++c) {
      if (c == L.label) continue;
      long double v = (long double)L.b[std::size_t(L.label)] - L.b[std::size_t(c)];
      for (std::int64_t j = 0; j < L.n; ++j) {
        const long double a =
            (long double)L.W[std::size_t(j * L.m + L.label)] - L.W[std::size_t(j * L.m + c)];
        const long double x = L.x[std::size_t(j)];
        const long double moved = a > 0 ? std::max<long double>(lo, x - r) : std::min<long double>(hi, x + r);
        v += a * moved;
      }
      w = std::min(w, v);
    }
    return w;
  };
  long double a = 0, b = hi - lo;
  if (worst(b) > 0) return std::numeric_limits<long double>::infinity();
  for (int k = 0; k < 200; ++k) {
    const long double mid = (a + b) / 2;
    (worst(mid) > 0 ? a : b) = mid;
  }
  return a;
}

InputSet set_at(const std::vector<double>& x, InputNorm norm) {
  InputSet s;
  s.norm = norm;
  s.centre = Eigen::Map<const Vector<double>>(x.data(), Eigen::Index(x.size()));
  return s;
}

TEST(GraphCertifiedRadius, LinearGraphL2MatchesTheClosedForm) {
  for (unsigned seed = 1; seed <= 5; ++seed) {
    const Linear L = random_linear(seed);
    const graph::Graph g = linear_graph(L.W, L.b, L.n, L.m);
    const long double exact = exact_radius(L, InputNorm::l2, {});
    ASSERT_GT(exact, 0);
    const double tol = 0.01;
    const double r = operators::graph_certified_radius(g, set_at(L.x, InputNorm::l2), L.label, 100.0, tol);
    EXPECT_LE((long double)r, exact) << "seed " << seed << ": certified above the exact radius";
    EXPECT_GE((long double)r, exact / ((1 + tol) * (1 + tol))) << "seed " << seed;
  }
}

TEST(GraphCertifiedRadius, LinearGraphLinfWithScalesMatchesTheClosedForm) {
  for (unsigned seed = 11; seed <= 15; ++seed) {
    const Linear L = random_linear(seed);
    const graph::Graph g = linear_graph(L.W, L.b, L.n, L.m);
    std::vector<double> scale;
    for (std::int64_t j = 0; j < L.n; ++j) scale.push_back(j % 3 == 0 ? 0.25 : 1.0 + 0.5 * double(j % 2));
    const long double exact = exact_radius(L, InputNorm::linf, scale);
    InputSet s = set_at(L.x, InputNorm::linf);
    s.scale = Eigen::Map<const Vector<double>>(scale.data(), Eigen::Index(scale.size()));
    const double tol = 0.01;
    const double r = operators::graph_certified_radius(g, s, L.label, 100.0, tol);
    EXPECT_LE((long double)r, exact) << "seed " << seed;
    EXPECT_GE((long double)r, exact / ((1 + tol) * (1 + tol))) << "seed " << seed;
    // Without the scales the radius is a different closed form: the scales are honoured, not ignored.
    const long double plain = exact_radius(L, InputNorm::linf, {});
    const double r_plain =
        operators::graph_certified_radius(g, set_at(L.x, InputNorm::linf), L.label, 100.0, tol);
    EXPECT_LE((long double)r_plain, plain);
    EXPECT_GE((long double)r_plain, plain / ((1 + tol) * (1 + tol)));
  }
}

TEST(GraphCertifiedRadius, LinearGraphLinfInsideAValidRange) {
  // A range that cuts the box: every x_j is in [0.25, 0.75], so the room below is 0.02 to 0.52: coordinates
  // stop at the range at different radii.
  for (unsigned seed = 21; seed <= 24; ++seed) {
    const Linear L = random_linear(seed);
    const graph::Graph g = linear_graph(L.W, L.b, L.n, L.m);
    const double lo = 0.5 - 0.25 - 0.02, hi = 0.5 + 0.25 + 0.5;  // every x_j is in [0.25, 0.75]
    const long double exact = exact_boxed_linf(L, lo, hi), free = exact_radius(L, InputNorm::linf, {});
    InputSet s = set_at(L.x, InputNorm::linf);
    s.lower = Vector<double>::Constant(L.n, lo);
    s.upper = Vector<double>::Constant(L.n, hi);
    const double r = operators::graph_certified_radius(g, s, L.label, 10.0, 0.01);
    EXPECT_LE((long double)r, exact) << "seed " << seed;
    if (std::isfinite((double)exact)) EXPECT_GE((long double)r, exact / (1.01L * 1.01L)) << "seed " << seed;
    EXPECT_GE((long double)r, free / (1.01L * 1.01L));  // a smaller set: never a smaller radius
  }
}

TEST(GraphCertifiedRadius, ZeroWhenTheLabelIsNotThePrediction) {
  const Linear L = random_linear(3);
  const graph::Graph g = linear_graph(L.W, L.b, L.n, L.m);
  const int other = (L.label + 1) % int(L.m);
  EXPECT_EQ(operators::graph_certified_radius(g, set_at(L.x, InputNorm::l2), other, 100.0), 0.0);
  EXPECT_EQ(operators::graph_certified_radius(g, set_at(L.x, InputNorm::linf), other, 100.0), 0.0);
}

TEST(GraphCertifiedRadius, NeverAboveUpper) {
  const Linear L = random_linear(4);
  const graph::Graph g = linear_graph(L.W, L.b, L.n, L.m);
  const long double exact = exact_radius(L, InputNorm::l2, {});
  const double upper = double(exact) / 3;
  const double r = operators::graph_certified_radius(g, set_at(L.x, InputNorm::l2), L.label, upper);
  EXPECT_GT(r, 0);
  EXPECT_LE(r, upper);
}

TEST(GraphRegionRadius, LinearGraphMatchesTheClosedFormInBothNorms) {
  for (unsigned seed = 21; seed <= 25; ++seed) {
    const Linear L = random_linear(seed);
    const graph::Graph g = linear_graph(L.W, L.b, L.n, L.m);
    for (InputNorm norm : {InputNorm::l2, InputNorm::linf}) {
      const long double exact = exact_radius(L, norm, {});
      const double tol = 0.01;
      const operators::CertifiedRadius r =
          operators::graph_region_radius(g, set_at(L.x, norm), L.label, 100.0, tol);
      EXPECT_LE((long double)r.radius, exact) << "seed " << seed << ": certified above the exact radius";
      EXPECT_GE((long double)r.radius, exact / ((1 + tol) * (1 + tol))) << "seed " << seed;
      EXPECT_GT(r.checks, 0);
    }
  }
}

TEST(GraphRegionRadius, ZeroWhenTheLabelIsNotThePredictionAndSoundInsideARange) {
  const Linear L = random_linear(3);
  const graph::Graph g = linear_graph(L.W, L.b, L.n, L.m);
  const int other = (L.label + 1) % int(L.m);
  EXPECT_EQ(operators::graph_region_radius(g, set_at(L.x, InputNorm::l2), other, 100.0).radius, 0.0);
  InputSet s = set_at(L.x, InputNorm::linf);
  s.lower = Vector<double>::Constant(Eigen::Index(L.n), 0.2);
  s.upper = Vector<double>::Constant(Eigen::Index(L.n), 0.8);
  const double r = operators::graph_region_radius(g, s, L.label, 10.0, 0.01).radius;
  EXPECT_LE((long double)r, exact_boxed_linf(L, 0.2, 0.8));
}

#ifdef REGATTA_HAVE_ONNX
// The VNN-COMP-like ViT of tests/data/onnx (conv patches, attention, LayerNorm, ReLU MLP), at torch's input.
TEST(GraphCertifiedRadius, VitBracketAndAttack) {
  const std::string dir = std::string(REGATTA_TEST_DATA_DIR) + "/onnx/";
  const graph::Graph g = graph::import_onnx(dir + "vit_vnncomp_like.onnx");
  ASSERT_EQ(operators::graph_affine_unsupported(g), "");
  const io::Array x = io::read_npy(dir + "vit_vnncomp_like.input.npy");
  const graph::Shape shape = g.values[std::size_t(g.inputs[0])].shape;
  const std::vector<double> y = graph::evaluate<double>(g, {graph::Tensor<double>{shape, x.data}})[0].data;
  const int label = int(std::max_element(y.begin(), y.end()) - y.begin());
  for (InputNorm norm : {InputNorm::l2, InputNorm::linf}) {
    const double tol = 0.02;
    const InputSet s = set_at(x.data, norm);
    const double r = operators::graph_certified_radius(g, s, label, 10.0, tol);
    ASSERT_GT(r, 0) << "norm " << int(norm);
    InputSet at = s;
    at.radius = r;
    EXPECT_GT(operators::graph_affine_margin(g, at, label), 0);  // the radius returned passed its test
    at.radius = r * (1 + tol) * 1.001;
    EXPECT_LE(operators::graph_affine_margin(g, at, label), 0);  // and the bracket is closed above it
    graph::AttackSet a{norm, x.data, r, {}, {}, {}};
    graph::AttackOptions o;
    o.steps = 200;
    o.restarts = 4;
    EXPECT_FALSE(graph::pgd_attack(g, a, label, o).found)
        << "a misclassified point inside the certified ball";
  }
}

TEST(GraphRegionRadius, VitPositiveBelowAffineAndHoldsAtSampledPoints) {
  const std::string dir = std::string(REGATTA_TEST_DATA_DIR) + "/onnx/";
  const graph::Graph g = graph::import_onnx(dir + "vit_vnncomp_like.onnx");
  ASSERT_EQ(operators::graph_region_unsupported(g), "");
  const io::Array x = io::read_npy(dir + "vit_vnncomp_like.input.npy");
  const graph::Shape shape = g.values[std::size_t(g.inputs[0])].shape;
  const auto logits = [&](const std::vector<double>& p) {
    return graph::evaluate<double>(g, {graph::Tensor<double>{shape, p}})[0].data;
  };
  const std::vector<double> y = logits(x.data);
  const int label = int(std::max_element(y.begin(), y.end()) - y.begin());
  std::mt19937_64 rng(5);
  for (InputNorm norm : {InputNorm::l2, InputNorm::linf}) {
    const InputSet s = set_at(x.data, norm);
    const operators::CertifiedRadius r = operators::graph_region_radius(g, s, label, 10.0, 0.02);
    const double affine = operators::graph_certified_radius(g, s, label, 10.0, 0.02);
    ASSERT_GT(r.radius, 0) << "norm " << int(norm);
    EXPECT_LE(r.radius, affine * 1.05) << "norm " << int(norm);
    std::cout << "vit_vnncomp_like " << (norm == InputNorm::l2 ? "l2" : "linf") << ": region radius "
              << r.radius << " (" << r.checks << " tests), affine radius " << affine << "\n";
    InputSet at = s;
    at.radius = r.radius;
    EXPECT_GT(operators::graph_region_margin(g, at, label), 0);  // the radius returned passed its test
    for (int k = 0; k < 200; ++k) {  // points of the set: the sphere (ℓ2) or the corners (ℓ∞), and inside
      std::vector<double> d(x.data.size());
      double len = 0;
      for (double& v : d) {
        v = norm == InputNorm::l2 ? std::normal_distribution<double>()(rng) : (rng() % 2 ? 1.0 : -1.0);
        len = std::hypot(len, v);
      }
      const double t = r.radius * (k % 2 ? 1.0 : 0.5) / (norm == InputNorm::l2 ? len : 1.0);
      std::vector<double> p = x.data;
      for (std::size_t j = 0; j < p.size(); ++j) p[j] += t * d[j];
      const std::vector<double> q = logits(p);
      EXPECT_EQ(int(std::max_element(q.begin(), q.end()) - q.begin()), label) << "sample " << k;
    }
  }
}
#endif

}  // namespace
