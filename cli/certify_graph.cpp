// regatta certify --model M.onnx: robustness of any ONNX graph (one input, logits out) on a labelled test set
// in l2 or l-inf (docs/models.md#certifying-an-onnx-graph): per input the certified radius by affine forms
// over the graph (graph_certified_radius, CERTIFIED) below the attack radius (the smallest radius at which
// projected gradient descent found a misclassification, by bisection: an ESTIMATE); the printing and
// writing are certify's own (certify_output.hpp).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/graph/attack.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/graph.hpp>
#include <regatta/operators/graph_affine.hpp>
#include <string>
#include <vector>
#ifdef REGATTA_HAVE_ONNX
#include <regatta/graph/onnx_import.hpp>
#endif

#include "certify_output.hpp"
#include "numbers.hpp"
#include "report/progress.hpp"

namespace regatta::cli {
namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

struct GraphTestSet {
  std::vector<std::vector<double>> inputs;
  std::vector<int> labels;
};

/// TEST.npz: `images` (N, ...) whose per-item element count is the graph input's, finite (and inside the
/// --input-range box when given), and integer `labels` (N,) among the graph's outputs.
GraphTestSet read_graph_test_set(const std::string& path, std::size_t size, std::size_t classes, long limit,
                                 const std::vector<double>& range) {
  const io::Array images = io::read_npz_member(path, "images");
  const io::Array labels =
      io::read_npz_member(path, "labels", io::default_max_file_bytes, io::NonFloat::integers);
  io::require_converted(images);
  io::require_converted(labels);
  const std::size_t n = images.shape.empty() ? 0 : images.shape[0];
  std::size_t per = 1;
  for (std::size_t k = 1; k < images.shape.size(); ++k) per *= images.shape[k];
  if (images.shape.size() < 2 || per != size)
    throw InputError(images.source, "shape " + io::shape_repr(images.shape) +
                                        " is not a batch (N, ...) of items of " + std::to_string(size) +
                                        " values (the graph input's element count)");
  if (n == 0) throw InputError(images.source, "the batch is empty");
  io::require_finite(images);
  if (labels.shape != std::vector<std::size_t>{n})
    throw InputError(labels.source, "shape " + io::shape_repr(labels.shape) + " does not match the " +
                                        std::to_string(n) + " images");
  for (std::size_t i = 0; i < n; ++i) {
    const double y = labels.data[i];
    if (!(y >= 0 && y < double(classes) && y == std::floor(y)))
      throw InputError(labels.source, "label " + number(y) + " at index " + std::to_string(i) +
                                          " is not an output of the graph (0.." +
                                          std::to_string(classes - 1) + ")");
  }
  GraphTestSet t;
  const std::size_t count = limit > 0 ? std::min<std::size_t>(n, std::size_t(limit)) : n;
  for (std::size_t i = 0; i < count; ++i) {
    t.inputs.emplace_back(images.data.begin() + std::ptrdiff_t(i * size),
                          images.data.begin() + std::ptrdiff_t((i + 1) * size));
    if (!range.empty())
      for (std::size_t k = 0; k < size; ++k)
        if (!(t.inputs.back()[k] >= range[0] && t.inputs.back()[k] <= range[1]))
          throw InputError(images.source, "value " + number(t.inputs.back()[k]) + " of image " +
                                              std::to_string(i) + " is outside --input-range [" +
                                              number(range[0]) + ", " + number(range[1]) + "]");
    t.labels.push_back(int(labels.data[i]));
  }
  return t;
}

struct Context {
  const graph::Graph& graph;
  graph::Norm norm;
  std::vector<double> lower, upper;  ///< the --input-range box per coordinate (empty: none)
  double cap = 100;                  ///< the largest radius searched
  double tolerance = 0.01;
};

/// The smallest radius at which PGD finds a point the double forward misclassifies (an ESTIMATE, an upper
/// bound on the true radius): from a first-order guess, doubling until found, then geometric bisection
/// between the largest radius where it failed and the smallest where it succeeded (2 % apart). inf when
/// nothing is found up to the cap.
double attack_radius(const Context& c, const std::vector<double>& x, int label, double margin) {
  graph::AttackSet set{c.norm, x, 0, {}, c.lower, c.upper};
  graph::AttackOptions options;
  options.steps = 100;
  options.restarts = 1;
  auto found = [&](double r) {
    set.radius = r;
    return graph::pgd_attack(c.graph, set, label, options).found;
  };
  if (!(margin > 0)) return 0;  // the centre itself is misclassified (double forward)
  // First-order guess: margin / ‖∇(y_label − y_runner-up)‖ in the dual norm.
  const std::vector<double> y =
      graph::evaluate<double>(
          c.graph, {graph::Tensor<double>{c.graph.values[std::size_t(c.graph.inputs[0])].shape, x}})[0]
          .data;
  std::size_t runner = label == 0 ? 1 : 0;
  for (std::size_t k = 0; k < y.size(); ++k)
    if (int(k) != label && y[k] > y[runner]) runner = k;
  std::vector<double> w(y.size(), 0.0);
  w[std::size_t(label)] = 1;
  w[runner] = -1;
  const std::vector<double> g = graph::vjp(c.graph, x, w);
  double dual = 0;
  for (double v : g) dual = c.norm == graph::Norm::l2 ? std::hypot(dual, v) : dual + std::abs(v);
  double r = dual > 0 && std::isfinite(dual) ? std::min(c.cap, margin / dual) : c.cap / 1000;
  double lo = 0, hi = inf;
  while (true) {
    if (found(r)) {
      hi = r;
      break;
    }
    lo = r;
    if (r >= c.cap) return inf;
    r = std::min(c.cap, 2 * r);
  }
  for (int k = 0; k < 40 && !(lo > 0 && hi / lo <= 1.02); ++k) {
    const double mid = lo > 0 ? std::sqrt(lo * hi) : hi / 2;
    (found(mid) ? hi : lo) = mid;
  }
  return hi;
}

operators::InputRobustness one_input(const Context& c, const std::vector<double>& x, int label) {
  operators::InputRobustness r;
  r.label = label;
  r.method = operators::RadiusMethod::affine;
  r.refuted = std::numeric_limits<double>::quiet_NaN();  // graph_certified_radius does not report it
  const graph::Shape& shape = c.graph.values[std::size_t(c.graph.inputs[0])].shape;
  const std::vector<double> y = graph::evaluate<double>(c.graph, {graph::Tensor<double>{shape, x}})[0].data;
  r.prediction = int(std::max_element(y.begin(), y.end()) - y.begin());
  double runner_up = -inf;
  for (std::size_t k = 0; k < y.size(); ++k)
    if (int(k) != label) runner_up = std::max(runner_up, y[k]);
  r.margin = y[std::size_t(label)] - runner_up;
  graph::Tensor<interval64> xi{shape, {}};
  for (double v : x) xi.data.emplace_back(v);
  const std::vector<interval64> yi = graph::evaluate<interval64>(c.graph, {xi})[0].data;
  double lower = inf;
  for (std::size_t k = 0; k < yi.size(); ++k)
    if (int(k) != label) {
      const interval64 d = yi[std::size_t(label)] - yi[k];
      lower = std::min(lower, d.is_nan() ? -inf : d.lower());
    }
  r.margin_lower = lower;
  r.attack = attack_radius(c, x, label, r.prediction == label ? r.margin : 0.0);
  if (r.prediction == label && r.margin_lower > 0) {
    operators::InputSet set;
    set.norm = c.norm;
    set.centre = Eigen::Map<const Vector<double>>(x.data(), Eigen::Index(x.size()));
    if (!c.lower.empty()) {
      set.lower = Eigen::Map<const Vector<double>>(c.lower.data(), Eigen::Index(c.lower.size()));
      set.upper = Eigen::Map<const Vector<double>>(c.upper.data(), Eigen::Index(c.upper.size()));
    }
    r.certified = operators::graph_certified_radius(c.graph, set, label,
                                                    std::isfinite(r.attack) ? r.attack : c.cap, c.tolerance);
  }
  return r;
}

}  // namespace

void run_graph_certify(const GraphCertifyArgs& args, report::OutputDir* plot_dir) {
  if (!args.input_range.empty() &&
      !(args.input_range.size() == 2 && std::isfinite(args.input_range[0]) &&
        std::isfinite(args.input_range[1]) && args.input_range[0] < args.input_range[1]))
    throw InputError("--input-range", "must be LO,HI with finite LO < HI");
#ifndef REGATTA_HAVE_ONNX
  throw InputError(args.model,
                   "this regatta was built without ONNX support (REGATTA_ONNX; Debian: libonnx-dev)");
#else
  const graph::Graph g = graph::import_onnx(args.model);
  const std::string why = operators::graph_affine_unsupported(g);
  if (!why.empty()) throw InputError(args.model, why);
  const std::size_t size = std::size_t(graph::element_count(g.values[std::size_t(g.inputs[0])].shape));
  const std::size_t classes = std::size_t(graph::element_count(g.values[std::size_t(g.outputs[0])].shape));
  if (classes < 2)
    throw InputError(args.model, "the output has " + std::to_string(classes) +
                                     " entries; certify needs logits of 2 or more classes");
  const GraphTestSet data = read_graph_test_set(args.data, size, classes, args.limit, args.input_range);

  Context c{g, args.norm == "inf" ? graph::Norm::linf : graph::Norm::l2, {}, {}, 100, args.tolerance};
  if (!args.input_range.empty()) {
    c.lower.assign(size, args.input_range[0]);
    c.upper.assign(size, args.input_range[1]);
    // Beyond the box's diameter in the norm the set is the whole box: nothing larger is searched.
    const double width = args.input_range[1] - args.input_range[0];
    c.cap = c.norm == graph::Norm::linf ? width : width * std::sqrt(double(size)) * (1 + 1e-12);
  }
  const long count = long(data.inputs.size());
  std::vector<operators::InputRobustness> rows(static_cast<std::size_t>(count));
  {
    report::Progress progress("certify", count, true);
    std::exception_ptr failure;  // the first exception of any thread, rethrown after the loop
#pragma omp parallel for schedule(dynamic, 1)
    for (long i = 0; i < count; ++i) {
      try {
        rows[std::size_t(i)] = one_input(c, data.inputs[std::size_t(i)], data.labels[std::size_t(i)]);
      } catch (...) {
#pragma omp critical(regatta_certify_graph_failure)
        if (!failure) failure = std::current_exception();
      }
#pragma omp critical(regatta_certify_graph_progress)
      progress.advance();
    }
    if (failure) std::rethrow_exception(failure);
  }

  CertifyOutput o;
  o.model = args.model;
  o.data = args.data;
  o.norm = args.norm;
  o.rows = std::move(rows);
  o.why_naive = "not computed for an ONNX graph (per-stage factors exist for the safetensors layouts)";
  o.compare_local = true;  // so the output says why there is no local column
  o.why_local = "not computed for an ONNX graph";
  o.method_line =
      "certified radius by affine forms over the graph (" + std::to_string(g.nodes.size()) + " nodes)" +
      (args.input_range.empty() ? std::string()
                                : ", the ball intersected with the input range [" +
                                      number(args.input_range[0]) + ", " + number(args.input_range[1]) + "]");
  o.attack_kind =
      "estimate (the smallest radius at which projected gradient descent found a point the double forward "
      "misclassifies, by bisection to 2 %: an upper bound on the true radius; null: none found up to the "
      "search's cap)";
  o.attack_line =
      "attack: projected gradient descent (100 steps) at radii doubled from the first-order guess "
      "margin/|grad|, then bisected to 2 %; the certified search runs below it (" +
      number(c.cap) + " when none was found)";
  o.tolerance = args.tolerance;
  o.radii = args.radii;
  o.out = args.out;
  o.plot = args.plot;
  o.plot_dir = plot_dir;
  write_certify_output(o);
#endif
}

}  // namespace regatta::cli
