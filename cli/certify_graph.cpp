// regatta certify --model M.onnx: robustness of any ONNX graph (one input, logits out) on a labelled test set
// in l2 or l-inf (docs/models.md#certifying-an-onnx-graph): per input the certified radius by affine forms
// over the graph (graph_certified_radius, CERTIFIED; with --method region by region enclosures of the
// margin's gradient, graph_region_radius, docs/models.md#region-enclosures-of-a-graph) below the attack
// radius (the smallest radius at which projected gradient descent found a misclassification, by bisection: an
// ESTIMATE); the printing and writing are certify's own (certify_output.hpp).
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
#include <regatta/operators/graph_region.hpp>
#include <regatta/operators/graph_robustness.hpp>
#include <regatta/operators/graph_transformer.hpp>
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

}  // namespace

void run_graph_certify(const GraphCertifyArgs& args, const TaskCheckpoint& checkpoint,
                       report::OutputDir* plot_dir) {
  if (!args.input_range.empty() &&
      !(args.input_range.size() == 2 && std::isfinite(args.input_range[0]) &&
        std::isfinite(args.input_range[1]) && args.input_range[0] < args.input_range[1]))
    throw InputError("--input-range", "must be LO,HI with finite LO < HI");
#ifndef REGATTA_HAVE_ONNX
  throw InputError(args.model,
                   "this regatta was built without ONNX support (REGATTA_ONNX; Debian: libonnx-dev)");
#else
  const graph::Graph g = graph::import_onnx(args.model);
  const bool region = args.method == "region";
  const std::string why =
      region ? operators::graph_region_unsupported(g) : operators::graph_affine_unsupported(g);
  if (!why.empty()) throw InputError(args.model, why);
  const std::size_t size = std::size_t(graph::element_count(g.values[std::size_t(g.inputs[0])].shape));
  const std::size_t classes = std::size_t(graph::element_count(g.values[std::size_t(g.outputs[0])].shape));
  if (classes < 2)
    throw InputError(args.model, "the output has " + std::to_string(classes) +
                                     " entries; certify needs logits of 2 or more classes");
  if (args.budget > 0 && region)
    throw InputError("--budget-per-input", "applies to --method affine (branch and bound on affine forms)");
  const GraphTestSet data = read_graph_test_set(args.data, size, classes, args.limit, args.input_range);

  operators::GraphRobustnessOptions c{
      args.norm == "inf" ? graph::Norm::linf : graph::Norm::l2, {}, {}, 100, args.tolerance};
  c.method = region ? operators::RadiusMethod::region : operators::RadiusMethod::affine;
  c.budget_per_input = args.budget;
  if (!args.input_range.empty()) {
    c.lower.assign(size, args.input_range[0]);
    c.upper.assign(size, args.input_range[1]);
    // Beyond the box's diameter in the norm the set is the whole box: nothing larger is searched.
    const double width = args.input_range[1] - args.input_range[0];
    c.cap = c.norm == graph::Norm::linf ? width : width * std::sqrt(double(size)) * (1 + 1e-12);
  }
  std::optional<std::vector<operators::InputRobustness>> rows = certify_rows(
      long(data.inputs.size()),
      [&](long i) {
        return operators::graph_input_robustness(g, data.inputs[std::size_t(i)], data.labels[std::size_t(i)],
                                                 c);
      },
      checkpoint);
  if (!rows) return;  // a rank > 0 of mpirun: rank 0 writes

  CertifyOutput o;
  o.model = args.model;
  o.data = args.data;
  o.norm = args.norm;
  o.rows = std::move(*rows);
  o.why_naive = "not computed for an ONNX graph (per-stage factors exist for the safetensors layouts)";
  o.compare_local = true;  // so the output says why there is no local column
  o.why_local = "not computed for an ONNX graph";
  o.method_line =
      (region ? "certified radius by region enclosures of the margin's gradient over the graph ("
              : "certified radius by affine forms over the graph (") +
      std::to_string(g.nodes.size()) + " nodes)" +
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
  // A recognised transformer in l2 without a box, --method affine: graph_input_robustness ran the block
  // pipeline's row (docs/models.md#recognised-transformers); --method region stays on the graph.
  if (!region && c.norm == graph::Norm::l2 && c.lower.empty())
    if (const auto t = operators::recognise_transformer(g, nullptr)) {
      o.method_line =
          "certified radius by affine forms over the graph's recognised transformer (the block "
          "pipeline of the model path; " +
          t->summary() + ")";
      o.attack_kind = "estimate (upper bound on the true radius; null: no attack succeeded)";
      o.attack_line =
          "attack: the model attack (DeepFool, then PGD rounds on shrinking spheres) of the "
          "recognised transformer; the certified search runs below it";
    }
  o.tolerance = args.tolerance;
  o.budget = args.budget;
  o.radii = args.radii;
  o.out = args.out;
  o.plot = args.plot;
  o.plot_dir = plot_dir;
  write_certify_output(o);
#endif
}

}  // namespace regatta::cli
