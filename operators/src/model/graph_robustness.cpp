// The robustness of one labelled input of a graph::Graph (graph_robustness.hpp): the PGD attack radius, an
// ESTIMATE, bounds the search of the certified radius by affine forms (graph_radius.cpp) from above
// (docs/models.md#certifying-an-onnx-graph); a graph recognised as a transformer gets the block pipeline's
// row instead (docs/models.md#recognised-transformers). One implementation for `regatta certify --model
// M.onnx` and Python's GraphModel.robustness.
#include <regatta/operators/graph_robustness.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <regatta/core/interval64.hpp>
#include <regatta/graph/attack.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/operators/graph_affine.hpp>
#include <regatta/operators/graph_bab_radius.hpp>
#include <regatta/operators/graph_region.hpp>
#include <regatta/operators/graph_transformer.hpp>

namespace regatta::operators {

// graph_robustness.hpp states both contracts.
double graph_attack_radius(const graph::Graph& graph, const std::vector<double>& x, int label, double margin,
                           const GraphRobustnessOptions& c) {
  graph::AttackSet set{c.norm, x, 0, {}, c.lower, c.upper};
  graph::AttackOptions options;
  options.steps = 100;
  options.restarts = 1;
  options.stop = c.stop;
  auto found = [&](double r) {
    set.radius = r;
    return graph::pgd_attack(graph, set, label, options).found;
  };
  if (!(margin > 0)) return 0;  // the centre itself is misclassified (double forward)
  // First-order guess: margin / ‖∇(y_label − y_runner-up)‖ in the dual norm.
  const std::vector<double> y =
      graph::evaluate<double>(graph,
                              {graph::Tensor<double>{graph.values[std::size_t(graph.inputs[0])].shape, x}})[0]
          .data;
  std::size_t runner = label == 0 ? 1 : 0;
  for (std::size_t k = 0; k < y.size(); ++k)
    if (int(k) != label && y[k] > y[runner]) runner = k;
  std::vector<double> w(y.size(), 0.0);
  w[std::size_t(label)] = 1;
  w[runner] = -1;
  const std::vector<double> g = graph::vjp(graph, x, w);
  double dual = 0;
  for (double v : g) dual = c.norm == graph::Norm::l2 ? std::hypot(dual, v) : dual + std::abs(v);
  double r = dual > 0 && std::isfinite(dual) ? std::min(c.cap, margin / dual) : c.cap / 1000;
  double lo = 0, hi = std::numeric_limits<double>::infinity();
  while (true) {
    if (found(r)) {
      hi = r;
      break;
    }
    lo = r;
    if (r >= c.cap) return std::numeric_limits<double>::infinity();
    r = std::min(c.cap, 2 * r);
  }
  for (int k = 0; k < 40 && !(lo > 0 && hi / lo <= 1.02); ++k) {
    const double mid = lo > 0 ? std::sqrt(lo * hi) : hi / 2;
    (found(mid) ? hi : lo) = mid;
  }
  return hi;
}

namespace {

// The row without branch and bound.
InputRobustness plain_row(const graph::Graph& graph, const std::vector<double>& x, int label,
                          const GraphRobustnessOptions& c) {
  // A recognised transformer on the ball without a box: the block pipeline's row
  // (docs/models.md#recognised-transformers). Not one with rotary attention: its Model rotates by the exact
  // angles of θ, the graph by its binary64 tables, and the row is the graph's.
  if (c.method == RadiusMethod::affine && c.norm == graph::Norm::l2 && c.lower.empty())
    if (const auto t = recognise_transformer(graph, nullptr))
      if (t->model.blocks.empty() || !t->model.blocks[0].attention.rotary)
        return transformer_input_robustness(*t, x, label, c);
  InputRobustness r;
  r.label = label;
  r.method = c.method;
  r.refuted = std::numeric_limits<double>::quiet_NaN();  // graph_certified_radius does not report it
  const graph::Shape& shape = graph.values[std::size_t(graph.inputs[0])].shape;
  const std::vector<double> y = graph::evaluate<double>(graph, {graph::Tensor<double>{shape, x}})[0].data;
  r.prediction = int(std::max_element(y.begin(), y.end()) - y.begin());
  double runner_up = -std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < y.size(); ++k)
    if (int(k) != label) runner_up = std::max(runner_up, y[k]);
  r.margin = y[std::size_t(label)] - runner_up;
  graph::Tensor<interval64> xi{shape, {}};
  for (double v : x) xi.data.emplace_back(v);
  const std::vector<interval64> yi = graph::evaluate<interval64>(graph, {xi})[0].data;
  double lower = std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < yi.size(); ++k)
    if (int(k) != label) {
      const interval64 d = yi[std::size_t(label)] - yi[k];
      lower = std::min(lower, d.is_nan() ? -std::numeric_limits<double>::infinity() : d.lower());
    }
  r.margin_lower = lower;
  r.attack = graph_attack_radius(graph, x, label, r.prediction == label ? r.margin : 0.0, c);
  if (r.prediction == label && r.margin_lower > 0) {
    InputSet set;
    set.norm = c.norm;
    set.centre = Eigen::Map<const Vector<double>>(x.data(), Eigen::Index(x.size()));
    if (!c.lower.empty()) {
      set.lower = Eigen::Map<const Vector<double>>(c.lower.data(), Eigen::Index(c.lower.size()));
      set.upper = Eigen::Map<const Vector<double>>(c.upper.data(), Eigen::Index(c.upper.size()));
    }
    const double upper = std::isfinite(r.attack) ? r.attack : c.cap;
    if (c.method == RadiusMethod::region) {
      const CertifiedRadius region = graph_region_radius(graph, set, label, upper, c.tolerance, c.stop);
      r.certified = region.radius;
      r.refuted = region.refuted;
      r.checks = region.checks;
    } else {
      r.certified = graph_certified_radius(graph, set, label, upper, c.tolerance, GraphAffineOptions{c.stop});
    }
  }
  return r;
}

}  // namespace

InputRobustness graph_input_robustness(const graph::Graph& graph, const std::vector<double>& x, int label,
                                       const GraphRobustnessOptions& c) {
  InputRobustness r = plain_row(graph, x, label, c);
  if (!(c.budget_per_input > 0) || c.method != RadiusMethod::affine) return r;
  r.has_bab = true;
  r.bab = r.certified;
  if (!(r.prediction == label && r.margin_lower > 0)) {
    r.bab_note = "not certified at the input itself";
    return r;
  }
  const double upper = std::isfinite(r.attack) ? r.attack : c.cap;
  if (!(upper > r.certified)) return r;  // the certified radius reached the upper end already
  const GraphBabRadius b =
      graph_bab_radius(graph, x, label, r.certified, upper,
                       GraphBabOptions{c.norm, c.lower, c.upper, c.tolerance, c.budget_per_input, c.stop});
  r.bab = b.radius;
  r.bab_seconds = b.seconds;
  r.bab_branches = b.branches;
  r.bab_tests = b.tests;
  r.bab_note = b.note;
  return r;
}

}  // namespace regatta::operators
