// Models as typed graphs (docs/graph.md; docs/python.md, "Any model: ONNX and torch export"): ONNX files
// and bytes (torch exports, made in memory by the Python layer) into a graph::Graph, its shapes and nodes,
// and its forward in double (an estimate) and in interval64 (certified enclosures of the exact outputs).
#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <variant>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/graph/derivatives.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/graph.hpp>
#include <regatta/graph/local_lipschitz.hpp>
#include <regatta/operators/graph_robustness.hpp>
#ifdef REGATTA_HAVE_ONNX
#include <regatta/graph/onnx_import.hpp>
#endif
#include "bindings.hpp"
#include "convert.hpp"

namespace regatta::python {

namespace {

/// An imported graph with one runtime input and one output (what GraphModel evaluates; the robustness of
/// such a graph is a function of that one input). Shared and immutable: calls on several threads are safe.
struct GraphCore {
  std::shared_ptr<const graph::Graph> graph;
  int restored_epsilons = 0;  ///< normalisation epsilons given back their binary64 value (restore_epsilons)

  const graph::Value& input() const { return graph->values[std::size_t(graph->inputs[0])]; }
  const graph::Value& output() const { return graph->values[std::size_t(graph->outputs[0])]; }
};

GraphCore core_of(graph::Graph g, int restored = 0) {
  if (g.inputs.size() != 1 || g.outputs.size() != 1)
    throw InputError(g.source, "the graph has " + std::to_string(g.inputs.size()) + " runtime inputs and " +
                                   std::to_string(g.outputs.size()) +
                                   " outputs; a regatta.GraphModel takes exactly one of each");
  return GraphCore{std::make_shared<const graph::Graph>(std::move(g)), restored};
}

#ifdef REGATTA_HAVE_ONNX
/// Restores the binary64 epsilons of LayerNormalization and BatchNormalization nodes from a torch export.
/// ONNX stores them as binary32 attributes (torch's 1e-6 becomes binary32(1e-6), 2.5e-15 below it), so
/// the graph as exported computes a slightly different function than the float64 module; a tiny-variance
/// row (a zero class token plus small positions) turns that into logit differences of ~4e-12. The caller
/// passes the eps of every nn.LayerNorm (resp. BatchNorm) module; a node whose binary32 epsilon is the
/// rounding of exactly one of them gets that value back. Any other node keeps what the file says. Returns
/// how many nodes were restored.
int restore_epsilons(graph::Graph& g, const std::vector<double>& layer_norm,
                     const std::vector<double>& batch_norm) {
  const auto exact = [](const std::vector<double>& candidates, double& epsilon) {
    std::optional<double> found;
    for (double e : candidates) {
      if (!(std::isfinite(e) && e > 0) || double(float(e)) != epsilon) continue;
      if (found && *found != e) return false;  // two module values round alike: ambiguous, keep the file's
      found = e;
    }
    if (!found) return false;
    epsilon = *found;
    return true;
  };
  int restored = 0;
  for (graph::Node& n : g.nodes) {
    if (n.op == graph::Op::layer_norm && n.source_op == "LayerNormalization")
      restored += exact(layer_norm, std::get<graph::LayerNormAttrs>(n.attributes).epsilon);
    else if (n.op == graph::Op::batch_norm && n.source_op == "BatchNormalization")
      restored += exact(batch_norm, std::get<graph::BatchNormAttrs>(n.attributes).epsilon);
  }
  return restored;
}
#endif

py::tuple shape_tuple(const graph::Shape& s) {
  py::tuple t(s.size());
  for (std::size_t k = 0; k < s.size(); ++k) t[k] = py::int_(s[k]);
  return t;
}

/// `s` without its leading axes of size 1 (the batch axis of one sample).
graph::Shape squeezed(graph::Shape s) {
  std::size_t k = 0;
  while (k < s.size() && s[k] == 1) ++k;
  s.erase(s.begin(), s.begin() + std::ptrdiff_t(k));
  return s;
}

/// The graph's input from `x`: a finite real array of the input's shape, up to leading axes of size 1 (a
/// batch axis of one sample may be left out or added). Any other shape is refused, not reshaped: an image
/// in the wrong axis order has the right number of entries.
graph::Tensor<double> input_arg(const GraphCore& c, const py::handle& x) {
  const auto a = as_doubles(x, "input");
  const graph::Shape& want = c.input().shape;
  graph::Shape got(a.shape(), a.shape() + a.ndim());
  if (squeezed(got) != squeezed(want))
    throw InputError("input", "has shape " + shape_text(a) + ", the model takes " + graph::shape_text(want) +
                                  " (leading axes of size 1 may be left out)");
  graph::Tensor<double> t{want, std::vector<double>(a.data(), a.data() + a.size())};
  for (std::size_t k = 0; k < t.data.size(); ++k)
    if (!std::isfinite(t.data[k]))
      throw InputError("input", "entry " + std::to_string(k) + " (row-major) is not finite");
  return t;
}

/// A flat vector as a NumPy array of `shape` (the data are copied once into the array).
py::array_t<double> array_of(const graph::Shape& shape, const std::vector<double>& data) {
  std::vector<py::ssize_t> dims(shape.begin(), shape.end());
  py::array_t<double> out(dims);
  std::copy(data.begin(), data.end(), out.mutable_data());
  return out;
}

py::list node_list(const graph::Graph& g) {
  py::list nodes;
  for (const graph::Node& n : g.nodes)
    nodes.append(py::make_tuple(n.name, std::string(graph::op_name(n.op)), n.source_op,
                                shape_tuple(g.values[std::size_t(n.output)].shape)));
  return nodes;
}

/// GraphModel.robustness: graph_input_robustness on another thread while this one, holding the GIL between
/// waits, runs Python's signal handlers every 25 ms; a pending exception (Ctrl-C's KeyboardInterrupt) sets
/// the stop flag, the computation ends at its next check, and the exception reaches the caller.
py::dict robustness_row(const GraphCore& c, const graph::Tensor<double>& x, int label,
                        operators::GraphRobustnessOptions options) {
  std::atomic<bool> stop{false};
  options.stop = &stop;
  auto task = std::async(std::launch::async,
                         [&] { return operators::graph_input_robustness(*c.graph, x.data, label, options); });
  bool interrupted = false;
  while (true) {
    std::future_status status;
    {
      py::gil_scoped_release release;
      status = task.wait_for(std::chrono::milliseconds(25));
    }
    if (status == std::future_status::ready) break;
    if (!interrupted && PyErr_CheckSignals() != 0) {
      interrupted = true;
      stop = true;
    }
  }
  if (interrupted) {
    // Ctrl-C: KeyboardInterrupt, whatever the stopped computation returned or threw on its way out.
    try {
      task.get();
    } catch (...) {
    }
    throw py::error_already_set();
  }
  const operators::InputRobustness r = task.get();  // rethrows the computation's exception
  py::dict out;
  out["label"] = r.label;
  out["prediction"] = r.prediction;
  out["margin"] = r.margin;
  out["margin_lower"] = r.margin_lower;
  out["attack_radius"] = r.attack;
  out["certified_radius"] = r.certified;
  out["refuted_radius"] = py::none();
  out["region_checks"] = 0;
  out["method"] = "affine";
  out["norm"] = options.norm == graph::Norm::linf ? "inf" : "2";
  out["local_radius"] = py::none();
  out["local_unavailable"] = "not computed for graph models (the per-stage local bounds need a named layout)";
  return out;
}

py::list attention_list(const graph::Graph& g) {
  py::list layers;
  for (const graph::AttentionPattern& a : g.attention) {
    py::dict d;
    d["name"] = a.name;
    d["tokens"] = a.tokens;
    d["context_tokens"] = a.context_tokens;
    d["width"] = a.width;
    d["heads"] = a.heads;
    d["head_dim"] = a.head_dim;
    d["value_dim"] = a.value_dim;
    d["scale"] = a.scale;
    d["self"] = a.self();
    d["output_projection"] = a.output_projection;
    d["rotary"] = a.q_rotary.has_value() || a.k_rotary.has_value();
    layers.append(d);
  }
  return layers;
}

#ifndef REGATTA_HAVE_ONNX
constexpr const char* no_onnx =
    "this regatta was built without ONNX import (REGATTA_ONNX; Debian: libonnx-dev)";
#endif

}  // namespace

py::object graph_core(graph::Graph g) { return py::cast(core_of(std::move(g))); }

void bind_graph(py::module_& m) {
#ifdef REGATTA_HAVE_ONNX
  m.attr("onnx_available") = true;
#else
  m.attr("onnx_available") = false;
#endif
  py::class_<GraphCore>(m, "GraphCore",
                        "A model as a typed graph with one input and one output (use "
                        "regatta.Model.from_onnx / from_torch)")
      .def_property_readonly("source", [](const GraphCore& c) { return c.graph->source; })
      .def_property_readonly("opset", [](const GraphCore& c) { return c.graph->opset; })
      .def_property_readonly("input_name", [](const GraphCore& c) { return c.input().name; })
      .def_property_readonly("output_name", [](const GraphCore& c) { return c.output().name; })
      .def_property_readonly("input_shape", [](const GraphCore& c) { return shape_tuple(c.input().shape); })
      .def_property_readonly("output_shape", [](const GraphCore& c) { return shape_tuple(c.output().shape); })
      .def_property_readonly("node_count", [](const GraphCore& c) { return c.graph->nodes.size(); })
      .def_property_readonly("nodes_by_kind",
                             [](const GraphCore& c) {
                               std::map<std::string, int> count;
                               for (const graph::Node& n : c.graph->nodes)
                                 ++count[std::string(graph::op_name(n.op))];
                               return count;
                             })
      .def_property_readonly("nodes", [](const GraphCore& c) { return node_list(*c.graph); })
      .def_property_readonly("folded",
                             [](const GraphCore& c) {
                               std::map<std::string, int> count(c.graph->folded.begin(),
                                                                c.graph->folded.end());
                               return count;
                             })
      .def_property_readonly("restored_epsilons", [](const GraphCore& c) { return c.restored_epsilons; })
      .def_property_readonly("constant_entries",
                             [](const GraphCore& c) {
                               std::int64_t total = 0;
                               for (const graph::Value& v : c.graph->values)
                                 if (v.constant) total += std::int64_t(v.data.size());
                               return total;
                             })
      .def_property_readonly("attention_layers", [](const GraphCore& c) { return attention_list(*c.graph); })
      .def(
          "robustness",
          [](const GraphCore& c, const py::handle& x, int label, const std::string& norm, double tolerance,
             const std::optional<std::pair<double, double>>& input_range) {
            const graph::Tensor<double> input = input_arg(c, x);
            const std::int64_t classes = graph::element_count(c.output().shape);
            if (classes < 2)
              throw InputError("model", "has " + std::to_string(classes) +
                                            " outputs; robustness needs logits of 2 or more classes");
            if (label < 0 || label >= classes)
              throw InputError("label", "must be an output index in [0, " + std::to_string(classes) + ")");
            if (norm != "2" && norm != "inf") throw InputError("norm", "must be '2' or 'inf'");
            if (!(std::isfinite(tolerance) && tolerance > 0 && tolerance <= 1))
              throw InputError("tolerance", "must be in (0, 1]");
            operators::GraphRobustnessOptions options;
            options.norm = norm == "inf" ? graph::Norm::linf : graph::Norm::l2;
            options.tolerance = tolerance;
            if (input_range) {
              const auto [lo, hi] = *input_range;
              if (!(std::isfinite(lo) && std::isfinite(hi) && lo < hi))
                throw InputError("input_range", "must be (lo, hi) with finite lo < hi");
              for (std::size_t k = 0; k < input.data.size(); ++k)
                if (input.data[k] < lo || input.data[k] > hi)
                  throw InputError("input", "entry " + std::to_string(k) + " lies outside input_range");
              options.lower.assign(input.data.size(), lo);
              options.upper.assign(input.data.size(), hi);
              // beyond the box's diameter in the norm the set is the whole box (as certify --model)
              options.cap = options.norm == graph::Norm::linf
                                ? hi - lo
                                : (hi - lo) * std::sqrt(double(input.data.size())) * (1 + 1e-12);
            }
            return robustness_row(c, input, label, options);
          },
          py::arg("input"), py::arg("label"), py::arg("norm") = "2", py::arg("tolerance") = 0.01,
          py::arg("input_range") = py::none(),
          "One row of `regatta certify --model`: prediction, margin (estimates), margin_lower (certified), "
          "the "
          "PGD attack radius (an estimate) and the certified radius by affine forms over the graph")
      .def(
          "logits",
          [](const GraphCore& c, const py::handle& x) {
            const graph::Tensor<double> input = input_arg(c, x);
            std::vector<graph::Tensor<double>> out;
            {
              py::gil_scoped_release release;
              out = graph::evaluate(*c.graph, std::vector<graph::Tensor<double>>{input});
            }
            return array_of(out[0].shape, out[0].data);
          },
          py::arg("input"), "The output of the double forward (an estimate), in the output's shape")
      .def(
          "logits_enclosure",
          [](const GraphCore& c, const py::handle& x) {
            const graph::Tensor<double> input = input_arg(c, x);
            graph::Shape shape;
            std::vector<double> lower, upper;
            {
              py::gil_scoped_release release;
              const graph::Tensor<interval64> point{
                  input.shape, std::vector<interval64>(input.data.begin(), input.data.end())};
              const auto out = graph::evaluate(*c.graph, std::vector<graph::Tensor<interval64>>{point});
              shape = out[0].shape;
              lower.reserve(out[0].data.size());
              upper.reserve(out[0].data.size());
              for (const interval64& v : out[0].data) {
                lower.push_back(v.lower());
                upper.push_back(v.upper());
              }
            }
            return py::make_tuple(array_of(shape, lower), array_of(shape, upper));
          },
          py::arg("input"),
          "(lower, upper): certified enclosures of the exact outputs (interval64 forward), in the output's "
          "shape")
      .def(
          "jacobian",
          [](const GraphCore& c, const py::handle& x) {
            const graph::Tensor<double> input = input_arg(c, x);
            graph::Jacobian<double> J;
            {
              py::gil_scoped_release release;
              J = graph::jacobian(*c.graph, input.data);
            }
            return array_of(graph::Shape{std::int64_t(J.rows), std::int64_t(J.cols)}, J.data);
          },
          py::arg("input"),
          "J(x), output elements x input elements, in binary64 (an estimate): forward or reverse mode")
      .def(
          "local_lipschitz",
          [](const GraphCore& c, const py::handle& x) {
            const graph::Tensor<double> input = input_arg(c, x);
            graph::WholeLipschitz w;
            {
              py::gil_scoped_release release;
              w = graph::local_lipschitz(*c.graph, input.data);
            }
            return py::dict(py::arg("estimate") = w.estimate, py::arg("certified_upper") = w.certified,
                            py::arg("iterations") = w.iterations);
          },
          py::arg("input"),
          "||J(x)||_2: estimate (power iteration) and certified_upper (interval Jacobian at the point)");

  m.def(
      "import_onnx_file",
      [](const std::string& path) -> GraphCore {
#ifdef REGATTA_HAVE_ONNX
        py::gil_scoped_release release;
        return core_of(graph::import_onnx(path));
#else
        throw InputError(path, no_onnx);
#endif
      },
      py::arg("path"));
  m.def(
      "import_onnx_bytes",
      [](const py::bytes& data, const std::string& source, const std::vector<double>& layer_norm_eps,
         const std::vector<double>& batch_norm_eps) -> GraphCore {
#ifdef REGATTA_HAVE_ONNX
        char* buffer = nullptr;
        py::ssize_t size = 0;
        if (PyBytes_AsStringAndSize(data.ptr(), &buffer, &size) != 0) throw py::error_already_set();
        // `data` stays referenced by the caller while the GIL is released: the buffer outlives the import.
        const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(buffer), std::size_t(size));
        py::gil_scoped_release release;
        graph::Graph g = graph::import_onnx_bytes(bytes, source);
        const int restored = restore_epsilons(g, layer_norm_eps, batch_norm_eps);
        return core_of(std::move(g), restored);
#else
        (void)data, (void)layer_norm_eps, (void)batch_norm_eps;
        throw InputError(source, no_onnx);
#endif
      },
      py::arg("data"), py::arg("source"), py::arg("layer_norm_eps") = std::vector<double>{},
      py::arg("batch_norm_eps") = std::vector<double>{});
}

}  // namespace regatta::python
