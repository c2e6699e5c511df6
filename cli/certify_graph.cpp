// The one route of `regatta certify` for every model file (docs/models.md#certifying-a-model-file), and its
// ONNX front end. A transformer recognised in the graph (docs/models.md#recognised-transformers) is certified
// on its Model: per input the certified radius by affine forms or region enclosures of the block pipeline,
// the attack radius (an ESTIMATE), the naive product certificate and with --compare local the composition of
// per-stage local bounds. Any other graph, and any graph in l-inf or inside a box, is certified over the
// graph (docs/models.md#certifying-an-onnx-graph): affine forms (graph_certified_radius) or region enclosures
// of the margin's gradient (graph_region_radius, docs/models.md#region-enclosures-of-a-graph) below the PGD
// attack radius. The printing and writing are certify_output.cpp's.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/graph/attack.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/graph.hpp>
#include <regatta/operators/graph_affine.hpp>
#include <regatta/operators/graph_naive.hpp>
#include <regatta/operators/graph_region.hpp>
#include <regatta/operators/graph_robustness.hpp>
#include <regatta/operators/graph_transformer.hpp>
#include <regatta/operators/model_affine.hpp>
#include <regatta/operators/model_local.hpp>
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

/// --position on a graph whose logits are per token ([1, n, C] or [n, C], n > 1): the graph's output becomes
/// the row of token K (the last by default: a causal language model's next-token prediction). Refused for
/// any other output, or for K out of range.
void select_position(CertifySource& s, const std::string& position) {
  graph::Graph& g = *s.graph;
  const std::int64_t n = operators::output_token_count(g);
  if (n == 0) {
    if (position.empty()) return;
    throw InputError("--position",
                     "applies to logits per token ([1, n, C] or [n, C] with n > 1); the output '" +
                         g.values[std::size_t(g.outputs[0])].name + "' of " + s.model_path + " has shape " +
                         graph::shape_text(g.values[std::size_t(g.outputs[0])].shape));
  }
  std::int64_t k = n - 1;
  if (!position.empty() && position != "last") {
    if (!std::all_of(position.begin(), position.end(), [](char c) { return c >= '0' && c <= '9'; }))
      throw InputError("--position", "'" + position + "' is neither 'last' nor a 0-based token index");
    // Digits only: past the int64 range it is out of range all the same.
    const std::int64_t parsed = position.size() > 18 ? n : std::int64_t(std::stoll(position));
    if (parsed >= n)
      throw InputError("--position", position + " is out of range: the logits have " + std::to_string(n) +
                                         " tokens (0.." + std::to_string(n - 1) + ")");
    k = parsed;
  }
  operators::select_output_token(g, k);
  s.position = k;
  s.positions = n;
}

}  // namespace

std::string recognised_origin(const operators::RecognisedTransformer& t) {
  return "the graph's recognised transformer (the block pipeline; " + t.summary() + ")";
}

void check_graph_rows(const CertifySource& s, const CertifyOptions& options) {
  const graph::Graph& g = *s.graph;
  const std::string why = options.method == "region" ? operators::graph_region_unsupported(g)
                                                     : operators::graph_affine_unsupported(g);
  if (!why.empty()) throw InputError(s.model_path, why);
  const std::vector<double>& range = options.input_range;
  if (!range.empty())
    for (std::size_t i = 0; i < s.inputs.size(); ++i)
      for (double v : s.inputs[i])
        if (!(v >= range[0] && v <= range[1]))
          throw InputError(s.data_path, "value " + number(v) + " of input " + std::to_string(i) +
                                            " is outside --input-range [" + number(range[0]) + ", " +
                                            number(range[1]) + "]");
}

CertifySource read_onnx_source(const std::string& model, const std::string& data, long limit,
                               const CertifyOptions& options) {
#ifndef REGATTA_HAVE_ONNX
  (void)model, (void)data, (void)limit;
  throw InputError(model, "this regatta was built without ONNX support (REGATTA_ONNX; Debian: libonnx-dev)");
#else
  CertifySource s;
  s.model_path = model;
  s.data_path = data;
  s.graph = graph::import_onnx(model);
  select_position(s, options.position);
  const graph::Graph& g = *s.graph;
  if (options.norm == "2" && options.input_range.empty()) {
    s.model = operators::recognise_transformer(g, &s.why_not);
    // A rotary Model rotates by the exact angles of its θ; this file's function uses its binary64 tables as
    // they are, which the Model's enclosures need not contain: its rows walk the graph
    // (docs/graph.md#fusion).
    if (s.model && !s.model->model.blocks.empty() && s.model->model.blocks[0].attention.rotary) {
      s.model.reset();
      s.why_not =
          "rotary attention (the file's binary64 tables are not the recognised Model's exact rotation)";
    }
    if (s.model) s.model_origin = recognised_origin(*s.model);
  } else {
    s.why_not = options.norm == "2" ? "--input-range" : "--norm inf";
  }
  if (!s.model) check_graph_rows(s, options);  // before reading the data
  const std::size_t size = std::size_t(graph::element_count(g.values[std::size_t(g.inputs[0])].shape));
  const std::size_t classes = std::size_t(graph::element_count(g.values[std::size_t(g.outputs[0])].shape));
  if (classes < 2)
    throw InputError(model, "the output has " + std::to_string(classes) +
                                " entries; certify needs logits of 2 or more classes");
  GraphTestSet t = read_graph_test_set(data, size, classes, limit, options.input_range);
  s.inputs = std::move(t.inputs);
  s.labels = std::move(t.labels);
  return s;
#endif
}

void run_certify(const CertifySource& s, const CertifyOptions& a, const TaskCheckpoint& checkpoint,
                 report::OutputDir* plot_dir) {
  const long count = long(s.inputs.size());
  CertifyOutput o;
  o.model = s.model_path;
  o.data = s.data_path;
  o.norm = a.norm;
  o.position = s.position;
  o.positions = s.positions;
  o.compare_local = a.compare_local;
  std::optional<std::vector<operators::InputRobustness>> rows;
  // --budget-per-input runs on the graph (graph_input_robustness: a recognised transformer's plain row is
  // still the block pipeline's), where verify's branch and bound works.
  if (s.model && !(a.budget > 0)) {
    // The Model's rows (the l2 ball without a box; read_onnx_source recognises a model only there).
    const operators::Model& m = s.model->model;
    o.factors = operators::global_lipschitz_factors(m, o.why_naive);
    const double product = o.factors ? operators::naive_denominator(*o.factors) : NAN;  // √2·Π L_k, up
    o.why_local = operators::local_composition_unsupported(m);
    o.local = a.compare_local && o.why_local.empty();
    const operators::ConvertedModel<double> md(m);
    const operators::ConvertedModel<interval64> mi(m);
    retain_freed_memory();  // the region passes free and reallocate megabyte temporaries many times a second
    const auto method =
        a.method == "region" ? operators::RadiusMethod::region : operators::RadiusMethod::affine;
    rows = certify_rows(
        count,
        [&](long i) {
          return operators::input_robustness(md, mi, s.model->model_input(s.inputs[std::size_t(i)]),
                                             s.labels[std::size_t(i)], product, a.tolerance, method, o.local);
        },
        checkpoint);
    if (!rows) return;  // a rank > 0 of mpirun: rank 0 writes
    long affine = 0;
    for (const operators::InputRobustness& r : *rows) affine += r.method == operators::RadiusMethod::affine;
    o.method_line = std::string("certified radius by ") +
                    (affine == count ? "affine forms"
                     : affine == 0   ? "region enclosures"
                                     : "affine forms and region enclosures") +
                    (a.method == "affine" && affine < count
                         ? " (affine forms do not apply: " + operators::affine_unsupported(m) + ")"
                         : std::string()) +
                    " over " + s.model_origin;
    o.attack_kind = "estimate (upper bound on the true radius; null: no attack succeeded)";
    o.attack_line =
        "attack: the model attack (DeepFool, then PGD rounds on shrinking spheres); the certified search "
        "runs "
        "below it";
  } else {
    const graph::Graph& g = *s.graph;
    const std::size_t size = std::size_t(graph::element_count(g.values[std::size_t(g.inputs[0])].shape));
    const bool region = a.method == "region";
    operators::GraphRobustnessOptions c{
        a.norm == "inf" ? graph::Norm::linf : graph::Norm::l2, {}, {}, 100, a.tolerance};
    c.method = region ? operators::RadiusMethod::region : operators::RadiusMethod::affine;
    c.budget_per_input = a.budget;
    if (!a.input_range.empty()) {
      c.lower.assign(size, a.input_range[0]);
      c.upper.assign(size, a.input_range[1]);
      // Beyond the box's diameter in the norm the set is the whole box: nothing larger is searched.
      const double width = a.input_range[1] - a.input_range[0];
      c.cap = c.norm == graph::Norm::linf ? width : width * std::sqrt(double(size)) * (1 + 1e-12);
    }
    // The naive certificate: a global l2 bound composed over the graph's nodes (also inside a box: the
    // ball intersected with it is a subset of the ball).
    double product = NAN;
    if (a.norm == "2") {
      std::string why;
      o.factors = operators::graph_lipschitz_factors(g, why);
      if (o.factors)
        product = operators::naive_denominator(*o.factors);  // √2·L rounded up
      else
        o.why_naive = "no global bound over the graph: " + why;
    } else {
      o.why_naive = "not available with --norm inf (a bound of the l2 ball)";
    }
    rows = certify_rows(
        count,
        [&](long i) {
          operators::InputRobustness r =
              operators::graph_input_robustness(g, s.inputs[std::size_t(i)], s.labels[std::size_t(i)], c);
          if (std::isfinite(product) && r.margin_lower > 0)  // as input_robustness's naive column
            r.naive = (interval64(r.margin_lower) / interval64(product)).lower();
          return r;
        },
        checkpoint);
    if (!rows) return;  // a rank > 0 of mpirun: rank 0 writes
    // The local composition bounds a recognised transformer's stages.
    o.why_local =
        s.model ? std::string("not computed with --budget-per-input (the rows come from the graph)")
        : a.norm == "2" && a.input_range.empty()
            ? "not available for an unrecognised graph: " + s.why_not
            : "not available with " + s.why_not + " (the stages of a recognised transformer, l2 ball)";
    o.method_line =
        (region ? "certified radius by region enclosures of the margin's gradient over the graph ("
                : "certified radius by affine forms over the graph (") +
        std::to_string(g.nodes.size()) + " nodes)" +
        (a.input_range.empty() ? std::string()
                               : ", the ball intersected with the input range [" + number(a.input_range[0]) +
                                     ", " + number(a.input_range[1]) + "]");
    o.attack_kind =
        "estimate (the smallest radius at which projected gradient descent found a point the double forward "
        "misclassifies, by bisection to 2 %: an upper bound on the true radius; null: none found up to the "
        "search's cap)";
    o.attack_line =
        "attack: projected gradient descent (100 steps) at radii doubled from the first-order guess "
        "margin/|grad|, then bisected to 2 %; the certified search runs below it (" +
        number(c.cap) + " when none was found)";
    if (s.model) {  // graph_input_robustness ran the recognised transformer's row before the search
      o.method_line = "certified radius by affine forms over " + s.model_origin;
      o.attack_kind = "estimate (upper bound on the true radius; null: no attack succeeded)";
      o.attack_line =
          "attack: the model attack (DeepFool, then PGD rounds on shrinking spheres) of the recognised "
          "transformer; the certified search runs below it";
    }
  }
  o.rows = std::move(*rows);
  o.tolerance = a.tolerance;
  o.budget = a.budget;
  o.radii = a.radii;
  o.out = a.out;
  o.plot = a.plot;
  o.plot_dir = plot_dir;
  write_certify_output(o);
}

}  // namespace regatta::cli
