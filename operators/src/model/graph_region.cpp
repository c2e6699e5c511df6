// The certified radius of a graph::Graph by region enclosures of the margin's gradient (graph_region.hpp;
// docs/models.md#region-enclosures-of-a-graph): the interval64 forward at the centre, one interval64 forward
// over the box containing the set and one reverse sweep per competing class (graph::vjps), the mean-value
// bound, and the radius search of the affine path (radius_search.hpp).
#include <regatta/operators/graph_region.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <regatta/core/interval64.hpp>
#include <regatta/graph/derivatives.hpp>
#include <regatta/graph/evaluate.hpp>

#include "radius_search.hpp"

namespace regatta::operators {
namespace {

constexpr double minus_inf = -std::numeric_limits<double>::infinity();

/// Per class c the lower end of y_label − y_c of the interval64 forward at the centre (−∞ when NaN); the
/// label's own entry is +∞.
std::vector<double> centre_margins(const graph::Graph& graph, const Vector<double>& centre, int label) {
  const graph::Shape& shape = graph.values[static_cast<std::size_t>(graph.inputs[0])].shape;
  graph::Tensor<interval64> x{shape, {}};
  for (Eigen::Index j = 0; j < centre.size(); ++j) x.data.emplace_back(centre(j));
  const std::vector<interval64> y = graph::evaluate<interval64>(graph, {x})[0].data;
  if (label < 0 || static_cast<std::size_t>(label) >= y.size())
    throw std::logic_error("graph_region_margin: the label is not an output index");
  std::vector<double> m(y.size(), std::numeric_limits<double>::infinity());
  for (std::size_t c = 0; c < y.size(); ++c)
    if (c != static_cast<std::size_t>(label)) {
      const interval64 d = y[static_cast<std::size_t>(label)] - y[c];
      m[c] = d.is_nan() ? minus_inf : d.lower();
    }
  return m;
}

/// An upper bound of max over G of ‖g‖_dual, rounded up: ‖·‖₂ for the ball, Σ_j scale_j·|g_j| for the box.
/// +∞ when an entry is not finite.
double dual_norm_upper(const std::vector<interval64>& G, const InputSet& set) {
  using regatta::detail::i64::add;
  using regatta::detail::i64::mul;
  double sum = 0;
  for (std::size_t j = 0; j < G.size(); ++j) {
    if (!isfinite(G[j])) return std::numeric_limits<double>::infinity();
    const double m = magnitude(G[j]);
    if (set.norm == InputNorm::l2)
      sum = add<true>(sum, mul<true>(m, m));
    else
      sum = add<true>(sum, set.scale.size() > 0 ? mul<true>(m, set.scale(Eigen::Index(j))) : m);
  }
  return set.norm == InputNorm::l2 ? regatta::detail::i64::sqrt<true>(sum) : sum;
}

/// The bound of graph_region.hpp at radius set.radius, given the centre's margins.
double region_margin(const graph::Graph& graph, const InputSet& set, int label,
                     const std::vector<double>& at_x) {
  using regatta::detail::i64::add;
  using regatta::detail::i64::mul;
  const double r = set.radius;
  if (!(r >= 0) || !std::isfinite(r))
    throw std::logic_error("graph_region_margin: the radius must be finite and >= 0");
  double worst = std::numeric_limits<double>::infinity();
  for (std::size_t c = 0; c < at_x.size(); ++c)
    if (c != static_cast<std::size_t>(label)) worst = std::min(worst, at_x[c]);
  if (r == 0 || !(worst > minus_inf)) return worst;
  // The box B ⊇ set: centre ± r·scale_j (the cube of half-width r for the ball), rounded outward, then
  // intersected with the valid input range.
  const auto n = static_cast<std::size_t>(set.centre.size());
  std::vector<double> lo(n), hi(n);
  for (std::size_t j = 0; j < n; ++j) {
    const auto k = Eigen::Index(j);
    const double half = set.norm == InputNorm::linf && set.scale.size() > 0 ? mul<true>(r, set.scale(k)) : r;
    lo[j] = add<false>(set.centre(k), -half);
    hi[j] = add<true>(set.centre(k), half);
    if (set.lower.size() > 0) {
      lo[j] = std::max(lo[j], set.lower(k));
      hi[j] = std::min(hi[j], set.upper(k));
    }
  }
  const std::size_t classes = at_x.size();
  std::vector<std::vector<interval64>> ws;
  std::vector<std::size_t> competitors;
  for (std::size_t c = 0; c < classes; ++c)
    if (c != static_cast<std::size_t>(label)) {
      std::vector<interval64> w(classes, interval64(0.0));
      w[static_cast<std::size_t>(label)] = interval64(1.0);
      w[c] = interval64(-1.0);
      ws.push_back(std::move(w));
      competitors.push_back(c);
    }
  const std::vector<std::vector<interval64>> grads = graph::vjps(graph, graph::input_box(graph, lo, hi), ws);
  double bound = std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; k < grads.size(); ++k) {
    const double dual = dual_norm_upper(grads[k], set);
    if (!std::isfinite(dual)) return minus_inf;
    // m_c(x) − r·dual, rounded down.
    bound = std::min(bound, add<false>(at_x[competitors[k]], -mul<true>(r, dual)));
  }
  return bound;
}

}  // namespace

std::string graph_region_unsupported(const graph::Graph& graph) {
  if (graph.inputs.size() != 1 || graph.outputs.size() != 1)
    return "the graph has " + std::to_string(graph.inputs.size()) + " inputs and " +
           std::to_string(graph.outputs.size()) + " outputs; region enclosures need one of each";
  const auto classes = graph::element_count(graph.values[static_cast<std::size_t>(graph.outputs[0])].shape);
  if (classes < 2)
    return "the output has " + std::to_string(classes) +
           " entries; a margin needs logits of 2 or more classes";
  return {};
}

double graph_region_margin(const graph::Graph& graph, const InputSet& set, int label) {
  const std::string why = graph_region_unsupported(graph);
  if (!why.empty()) throw std::logic_error("graph_region_margin: " + why);
  return region_margin(graph, set, label, centre_margins(graph, set.centre, label));
}

CertifiedRadius graph_region_radius(const graph::Graph& graph, const InputSet& set, int label, double upper,
                                    double tolerance, const std::atomic<bool>* stop) {
  if (!(tolerance > 0) || !std::isfinite(tolerance))
    throw std::logic_error("graph_region_radius: the tolerance must be finite and > 0");
  const std::string why = graph_region_unsupported(graph);
  if (!why.empty()) throw std::logic_error("graph_region_radius: " + why);
  if (!(upper > 0) || !std::isfinite(upper)) return {};
  const std::vector<double> at_x = centre_margins(graph, set.centre, label);
  InputSet scaled = set;
  scaled.radius = 0;
  const double at_centre = region_margin(graph, scaled, label, at_x);
  if (!(at_centre > 0)) return {};
  auto margin = [&](double r) {
    scaled.radius = r;
    return region_margin(graph, scaled, label, at_x);
  };
  auto stopped = [stop] { return stop != nullptr && stop->load(std::memory_order_relaxed); };
  return search_certified_radius(margin, at_centre, upper, tolerance, stopped);
}

}  // namespace regatta::operators
