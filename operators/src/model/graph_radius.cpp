// The certified radius of a graph::Graph by affine forms (graph_affine.hpp): the largest radius of the input
// set at which graph_affine_margin certifies the label, found by the same power-law search as the model
// path's affine_certified_radius (docs/models.md#certifying-an-onnx-graph). Only the radius returned is
// certified: it passed its own test; every other radius tried only steered the search.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include <regatta/core/interval64.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/operators/graph_affine.hpp>

namespace regatta::operators {
namespace {

/// The lower end of min_{c≠label} (y_label − y_c) of the interval64 forward at the centre: L(0), certified.
double centre_margin(const graph::Graph& graph, const Vector<double>& centre, int label) {
  const graph::Shape& shape = graph.values[static_cast<std::size_t>(graph.inputs[0])].shape;
  graph::Tensor<interval64> x{shape, {}};
  x.data.reserve(static_cast<std::size_t>(centre.size()));
  for (Eigen::Index j = 0; j < centre.size(); ++j) x.data.emplace_back(centre(j));
  const std::vector<graph::Tensor<interval64>> out = graph::evaluate<interval64>(graph, {x});
  const std::vector<interval64>& y = out[0].data;
  if (label < 0 || static_cast<std::size_t>(label) >= y.size())
    throw std::logic_error("graph_certified_radius: the label is not an output index");
  double worst = std::numeric_limits<double>::infinity();
  for (std::size_t c = 0; c < y.size(); ++c) {
    if (c == static_cast<std::size_t>(label)) continue;
    const interval64 d = y[static_cast<std::size_t>(label)] - y[c];
    worst = std::min(worst, d.is_nan() ? -std::numeric_limits<double>::infinity() : d.lower());
  }
  return worst;
}

}  // namespace

double graph_certified_radius(const graph::Graph& graph, const InputSet& set, int label, double upper,
                              double tolerance, const GraphAffineOptions& options) {
  if (!(tolerance > 0) || !std::isfinite(tolerance))
    throw std::logic_error("graph_certified_radius: the tolerance must be finite and > 0");
  if (!(upper > 0) || !std::isfinite(upper)) return 0;
  const std::string why = graph_affine_unsupported(graph);
  if (!why.empty()) throw std::logic_error("graph_certified_radius: " + why);
  const double at_centre = centre_margin(graph, set.centre, label);
  if (!(at_centre > 0)) return 0;
  auto stopped = [&options] {
    return options.stop != nullptr && options.stop->load(std::memory_order_relaxed);
  };
  InputSet scaled = set;
  auto margin = [&](double r) {
    scaled.radius = r;
    return graph_affine_margin(graph, scaled, label, options);
  };
  // Where to test (the reasoning of affine_certified_radius in model/affine/margin.cpp): the loss D(r) = L(0)
  // − L(r) of the certified lower bound L grows like a power of r, and past the failure it jumps (a range
  // reaches a pole), so candidates come from the passing tests: the log–log slope s of D through the two
  // largest passing radii (plus half its last increase; at least 1; 2.5 from a single pass) predicts where D
  // reaches 0.97·L(0); near the failure a linear extrapolation of L in log r may go further; two failures in
  // a row fall back to geometric bisection, and lo·(1 + tolerance) closes the bracket. The first test is at
  // upper/12; a failure there is followed by upper/(12·1.4), then a quarter of the last failure.
  const double target = std::log(at_centre), aim = std::log(0.97);
  double lo = 0, hi = upper;
  std::vector<std::pair<double, double>> passed;  // (r, log D) in increasing r
  std::vector<double> lows;                       // L(r) at the passing radii
  int failures = 0;
  double r = upper / 12;
  for (int k = 0; k < 200 && !stopped(); ++k) {
    const double l = margin(r);
    if (stopped()) break;  // a stopped pass certifies nothing: r neither passed nor failed
    if (l > 0) {
      lo = r;
      passed.emplace_back(r, std::log(std::max(at_centre - l, at_centre * 1e-300)));
      lows.push_back(l);
      failures = 0;
    } else {
      hi = r;
      ++failures;
    }
    if (lo > 0 && hi / lo <= 1 + tolerance) break;
    if (passed.empty()) {
      r = hi / (failures == 1 ? 1.4 : 4.0);
      if (!(r > 0)) break;  // underflow: nothing positive passes
      continue;
    }
    const std::size_t m = passed.size();
    auto slope = [&passed](std::size_t a, std::size_t b) {
      return (passed[b].second - passed[a].second) / std::log(passed[b].first / passed[a].first);
    };
    double s = 2.5;
    if (m >= 2) {
      s = slope(m - 2, m - 1);
      if (m >= 3) s += 0.5 * std::max(0.0, s - slope(m - 3, m - 2));
      s = std::max(s, 1.0);
    }
    double candidate = passed.back().first * std::exp((target + aim - passed.back().second) / s);
    if (m >= 2 && lows[m - 1] < 0.1 * at_centre) {
      const double sigma = (lows[m - 2] - lows[m - 1]) / std::log(passed[m - 1].first / passed[m - 2].first);
      if (sigma > 0)
        candidate = std::max(candidate, passed.back().first * std::exp(0.8 * lows[m - 1] / sigma));
    }
    if (failures >= 2) candidate = std::sqrt(lo * hi);
    const double next = lo * (1 + tolerance);
    if (!(candidate > next)) candidate = next;
    if (candidate >= hi) candidate = hi / lo > (1 + tolerance) * (1 + tolerance) ? std::sqrt(lo * hi) : next;
    if (candidate >= upper) break;  // nothing below `upper` is left to test but `upper` itself
    r = candidate;
  }
  return lo;
}

}  // namespace regatta::operators
