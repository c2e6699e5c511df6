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

#include "radius_search.hpp"

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
  return search_certified_radius(margin, at_centre, upper, tolerance, stopped).radius;
}

}  // namespace regatta::operators
