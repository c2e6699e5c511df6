// Layers (from files, tensors, random), forward passes on tokens and measures, JVP / VJP / Jacobians.
#include <chrono>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>

#include <pybind11/eigen.h>
#include <pybind11/stl.h>

#include <regatta/core/error.hpp>
#include <regatta/core/io/array.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/measures/discrete_measure.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/layer_tensors.hpp>
#include <regatta/operators/measure_attention.hpp>
#include "bindings.hpp"
#include "convert.hpp"

namespace regatta::python {

namespace {

/// A forward result, or an InputError when finite inputs gave a non-finite output (the scores or values left
/// the double range: huge weights or inputs), instead of returning NaN silently.
Matrix<double> finite_output(Matrix<double> Y, int layer, int depth) {
  if (!Y.allFinite())
    throw InputError("X", "the output" + (depth > 1 ? " of layer " + std::to_string(layer) : std::string()) +
                              " is not finite (the scores or values overflow the double range): rescale the "
                              "input or the layer's weights");
  return Y;
}

using operators::AttentionLayer;
using operators::AttentionOptions;

operators::OutputProjection output_of(bool no_out_proj) {
  return no_out_proj ? operators::OutputProjection::identity : operators::OutputProjection::from_file;
}

LayerCore with_options(const LayerCore& base, bool causal, bool residual, const std::string& prenorm,
                       int sinkhorn, bool allow_untied_l2, std::optional<double> norm_eps) {
  LayerCore r = base;
  r.options.causal = causal;
  r.options.residual = residual;
  r.options.prenorm = operators::parse_prenorm(prenorm, "prenorm");
  if (sinkhorn < 1)
    throw InputError("sinkhorn", "must be >= 1 (1 = softmax), got " + std::to_string(sinkhorn));
  r.options.sinkhorn_iterations = sinkhorn;
  r.options.allow_untied_l2 = allow_untied_l2;
  if (norm_eps) {
    if (!(std::isfinite(*norm_eps) && *norm_eps > 0)) throw InputError("norm_eps", "must be finite and > 0");
    r.layer.norm_eps = *norm_eps;
  }
  const operators::Block<double> check(r.layer, r.options);  // the library's validation of the combination
  return r;
}

/// The measure (atoms, weights); messages name the Python arguments `name` and `weights_name`.
measures::DiscreteMeasure<double> measure_of(const py::handle& atoms, const py::handle& weights,
                                             const std::string& name, const std::string& weights_name) {
  Matrix<double> x = atoms_arg(atoms, name);
  if (weights.is_none()) return measures::DiscreteMeasure<double>::empirical(std::move(x));
  Vector<double> w = vector_arg(weights, weights_name, x.rows());
  try {
    return measures::DiscreteMeasure<double>(std::move(x), std::move(w));
  } catch (const InputError& e) {  // the measure's own check names its parameter ("weights")
    throw InputError(weights_name, e.problem());
  }
}

py::tuple measure_tuple(const measures::DiscreteMeasure<double>& mu) {
  return py::make_tuple(Matrix<double>(mu.atoms()), Vector<double>(mu.weights()));
}

/// rope=: None (nothing stated: a LLaMA-layout layer is refused), "none", or the base theta.
operators::RotaryStatement rope_of(const py::object& rope) {
  if (rope.is_none()) return {};
  if (py::isinstance<py::str>(rope)) {
    const std::string text = rope.cast<std::string>();
    if (text == "none") return operators::RotaryStatement::none();
    throw InputError("rope", "expected None, 'none' or a positive finite theta, got '" + text + "'");
  }
  const double theta = rope.cast<double>();
  if (!(std::isfinite(theta) && theta > 0))
    throw InputError("rope", "theta must be positive and finite, got " + std::to_string(theta));
  return operators::RotaryStatement::with_theta(theta);
}

void check_direction(const MatrixRef<double>& M, Eigen::Index rows, Eigen::Index cols, const char* name) {
  if (M.rows() != rows || M.cols() != cols)
    throw InputError(name, "has shape (" + std::to_string(M.rows()) + ", " + std::to_string(M.cols()) +
                               "), expected (" + std::to_string(rows) + ", " + std::to_string(cols) + ")");
}

}  // namespace

void bind_layer(py::module_& m) {
  py::class_<LayerCore>(m, "LayerCore", "An attention layer with its options (use regatta.Layer)")
      .def_property_readonly("d", [](const LayerCore& l) { return l.layer.d; })
      .def_property_readonly("heads", [](const LayerCore& l) { return l.layer.heads; })
      .def_property_readonly("head_dim", [](const LayerCore& l) { return l.layer.head_dim; })
      .def_property_readonly("value_dim", [](const LayerCore& l) { return l.layer.value_dim; })
      .def_property_readonly("kind", [](const LayerCore& l) { return operators::to_string(l.layer.kind); })
      .def_property_readonly("source", [](const LayerCore& l) { return l.source; })
      .def_property_readonly("causal", [](const LayerCore& l) { return l.options.causal; })
      .def_property_readonly("residual", [](const LayerCore& l) { return l.options.residual; })
      .def_property_readonly("prenorm",
                             [](const LayerCore& l) { return operators::to_string(l.options.prenorm); })
      .def_property_readonly("sinkhorn", [](const LayerCore& l) { return l.options.sinkhorn_iterations; })
      .def_property_readonly("allow_untied_l2", [](const LayerCore& l) { return l.options.allow_untied_l2; })
      .def_property_readonly("norm_eps", [](const LayerCore& l) { return l.layer.norm_eps; })
      .def_property_readonly("has_biases",
                             [](const LayerCore& l) { return !l.layer.bQ.empty() || l.layer.bO.size() != 0; })
      .def_property_readonly("has_norm_weights",
                             [](const LayerCore& l) { return l.layer.norm_gamma.size() != 0; })
      .def_property_readonly("rope_theta",
                             [](const LayerCore& l) -> std::optional<double> {
                               if (!l.layer.rotary) return std::nullopt;
                               return l.layer.rotary->theta;
                             })
      .def("with_options", &with_options, py::arg("causal"), py::arg("residual"), py::arg("prenorm"),
           py::arg("sinkhorn"), py::arg("allow_untied_l2"), py::arg("norm_eps"))
      .def(
          "attend",
          [](const LayerCore& l, const py::handle& X, int depth) {
            const MatrixView x = matrix_view(X, "X", l.layer.d);
            if (depth < 1) throw InputError("depth", "must be >= 1");
            py::gil_scoped_release release;
            Matrix<double> Y = finite_output(operators::attend(l.layer, x.map(), l.options), 1, depth);
            for (int k = 1; k < depth; ++k)
              Y = finite_output(operators::attend(l.layer, Y, l.options), k + 1, depth);
            return Y;
          },
          py::arg("X"), py::arg("depth") = 1)
      .def(
          "attend_cross",
          [](const LayerCore& l, const py::handle& X, const py::handle& context, int depth) {
            const MatrixView x = matrix_view(X, "X", l.layer.d);
            const MatrixView c = matrix_view(context, "context", l.layer.d);
            if (depth < 1) throw InputError("depth", "must be >= 1");
            py::gil_scoped_release release;
            Matrix<double> Y =
                finite_output(operators::attend_cross(l.layer, x.map(), c.map(), l.options), 1, depth);
            for (int k = 1; k < depth; ++k)
              Y = finite_output(operators::attend_cross(l.layer, Y, c.map(), l.options), k + 1, depth);
            return Y;
          },
          py::arg("X"), py::arg("context"), py::arg("depth") = 1)
      .def(
          "kernel",
          [](const LayerCore& l, int head, const py::handle& X, const py::handle& context) {
            const MatrixView q = matrix_view(X, "X", l.layer.d);
            const MatrixView c =
                matrix_view(context.is_none() ? X : context, context.is_none() ? "X" : "context", l.layer.d);
            py::gil_scoped_release release;
            return finite_output(operators::attention_kernel(l.layer, head, q.map(), c.map(), l.options), 1,
                                 1);
          },
          py::arg("head"), py::arg("X"), py::arg("context") = py::none())
      .def(
          "attend_measure",
          [](const LayerCore& l, const py::handle& atoms, const py::handle& weights) {
            const auto mu = measure_of(atoms, weights, "atoms", "weights");
            if (mu.dim() != l.layer.d)
              throw InputError("atoms", "have dimension " + std::to_string(mu.dim()) +
                                            ", the layer expects d = " + std::to_string(l.layer.d));
            std::optional<measures::DiscreteMeasure<double>> out;
            {
              py::gil_scoped_release release;
              out.emplace(operators::attend_measure(l.layer, mu, l.options));
            }
            return measure_tuple(*out);
          },
          py::arg("atoms"), py::arg("weights") = py::none())
      .def(
          "attend_measure_cross",
          [](const LayerCore& l, const py::handle& atoms, const py::handle& weights,
             const py::handle& context, const py::handle& context_weights) {
            const auto eta = measure_of(atoms, weights, "atoms", "weights");
            const auto mu = measure_of(context, context_weights, "context", "context_weights");
            std::optional<measures::DiscreteMeasure<double>> out;
            {
              py::gil_scoped_release release;
              out.emplace(operators::attend_measure_cross(l.layer, eta, mu, l.options));
            }
            return measure_tuple(*out);
          },
          py::arg("atoms"), py::arg("weights"), py::arg("context"), py::arg("context_weights"))
      .def(
          "linearize",
          [](const LayerCore& l, const py::handle& X) {
            const MatrixView x = matrix_view(X, "X", l.layer.d);
            py::gil_scoped_release release;
            return operators::Block<double>(l.layer, l.options).linearize(x.map());
          },
          py::arg("X"))
      .def(
          "linearize_cross",
          [](const LayerCore& l, const py::handle& X, const py::handle& context) {
            const MatrixView x = matrix_view(X, "X", l.layer.d);
            const MatrixView y = matrix_view(context, "context", l.layer.d);
            py::gil_scoped_release release;
            return operators::Block<double>(l.layer, l.options).linearize_cross(x.map(), y.map());
          },
          py::arg("X"), py::arg("context"))
      .def(
          "_time_attend",
          [](const LayerCore& l, const py::handle& X, int repeats) {
            // The C++ call alone, for bench/python/overhead.py: seconds per operators::attend call.
            const MatrixView view = matrix_view(X, "X", l.layer.d);
            const auto& x = view.map();
            if (repeats < 1) throw InputError("repeats", "must be >= 1");
            py::gil_scoped_release release;
            double sink = 0;
            const auto start = std::chrono::steady_clock::now();
            for (int k = 0; k < repeats; ++k) sink += operators::attend(l.layer, x, l.options)(0, 0);
            const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
            if (!std::isfinite(sink)) throw InputError("X", "the output is not finite");
            return elapsed.count() / repeats;
          },
          py::arg("X"), py::arg("repeats"));

  py::class_<operators::Linearization<double>>(m, "Linearization",
                                               "DF at one point: value, JVP, VJP, dense Jacobian (double)")
      .def_property_readonly(
          "value", [](const operators::Linearization<double>& lin) { return Matrix<double>(lin.value()); })
      .def(
          "jvp",
          [](const operators::Linearization<double>& lin, const py::handle& Xdot) {
            const MatrixView v_view = matrix_view(Xdot, "Xdot");
            const auto& v = v_view.map();
            check_direction(v, lin.rows(), lin.input_cols(), "Xdot");
            py::gil_scoped_release release;
            return lin.jvp(v);
          },
          py::arg("Xdot"))
      .def(
          "vjp",
          [](const operators::Linearization<double>& lin, const py::handle& Fbar) {
            const MatrixView u_view = matrix_view(Fbar, "Fbar");
            const auto& u = u_view.map();
            check_direction(u, lin.rows(), lin.value().cols(), "Fbar");
            py::gil_scoped_release release;
            return lin.vjp(u);
          },
          py::arg("Fbar"))
      .def("jacobian", [](const operators::Linearization<double>& lin) {
        check_memory("jacobian", 8.0 * double(lin.value().size()) * double(lin.rows() * lin.input_cols()),
                     "a dense Jacobian");
        py::gil_scoped_release release;
        return operators::dense_jacobian(lin);
      });

  py::class_<operators::CrossLinearization<double>>(m, "CrossLinearization",
                                                    "D F(X, Y) in the queries and in the context (double)")
      .def_property_readonly(
          "value",
          [](const operators::CrossLinearization<double>& lin) { return Matrix<double>(lin.value()); })
      .def(
          "jvp_query",
          [](const operators::CrossLinearization<double>& lin, const py::handle& Xdot) {
            const MatrixView v_view = matrix_view(Xdot, "Xdot");
            const auto& v = v_view.map();
            check_direction(v, lin.value().rows(), lin.value().cols(), "Xdot");
            py::gil_scoped_release release;
            return lin.jvp_query(v);
          },
          py::arg("Xdot"))
      .def(
          "vjp_query",
          [](const operators::CrossLinearization<double>& lin, const py::handle& Fbar) {
            const MatrixView u_view = matrix_view(Fbar, "Fbar");
            const auto& u = u_view.map();
            check_direction(u, lin.value().rows(), lin.value().cols(), "Fbar");
            py::gil_scoped_release release;
            return lin.vjp_query(u);
          },
          py::arg("Fbar"))
      .def(
          "jvp_context",
          [](const operators::CrossLinearization<double>& lin, const py::handle& Ydot, Eigen::Index m_rows) {
            const MatrixView v_view = matrix_view(Ydot, "Ydot");
            const auto& v = v_view.map();
            check_direction(v, m_rows, lin.value().cols(), "Ydot");
            py::gil_scoped_release release;
            return lin.jvp_context(v);
          },
          py::arg("Ydot"), py::arg("context_rows"))
      .def(
          "vjp_context",
          [](const operators::CrossLinearization<double>& lin, const py::handle& Fbar) {
            const MatrixView u_view = matrix_view(Fbar, "Fbar");
            const auto& u = u_view.map();
            check_direction(u, lin.value().rows(), lin.value().cols(), "Fbar");
            py::gil_scoped_release release;
            return lin.vjp_context(u);
          },
          py::arg("Fbar"));

  m.def(
      "load_layer",
      [](const std::string& path, int heads, const std::string& kind, const std::string& prefix,
         bool no_out_proj, const py::object& rope) {
        LayerCore r;
        const auto k = operators::parse_attention_kind(kind, "kind");
        const operators::RotaryStatement statement = rope_of(rope);
        {
          py::gil_scoped_release release;
          r.layer = operators::load_layer(path, heads, k, prefix, output_of(no_out_proj), statement);
        }
        r.source = path + (prefix.empty() ? "" : " prefix '" + prefix + "'");
        return r;
      },
      py::arg("path"), py::arg("heads"), py::arg("kind") = "dot", py::arg("prefix") = "",
      py::arg("no_out_proj") = false, py::arg("rope") = py::none());
  m.def(
      "layer_from_tensors",
      [](const py::dict& tensors, int heads, const std::string& kind, const std::string& prefix,
         bool no_out_proj, const std::string& collection, const py::object& rope) {
        LayerCore r;
        const auto k = operators::parse_attention_kind(kind, "kind");
        r.layer = operators::layer_from_tensors(tensors_of(tensors, collection), collection, heads, k, prefix,
                                                output_of(no_out_proj), rope_of(rope));
        r.source = collection + (prefix.empty() ? "" : " prefix '" + prefix + "'");
        return r;
      },
      py::arg("tensors"), py::arg("heads"), py::arg("kind") = "dot", py::arg("prefix") = "",
      py::arg("no_out_proj") = false, py::arg("collection") = "state_dict", py::arg("rope") = py::none());
  m.def(
      "random_layer",
      [](int d, int heads, int head_dim, int value_dim, double scale, std::uint64_t seed,
         const std::string& kind, bool biases, bool no_out_proj, const py::object& rope) {
        operators::RandomLayerSpec spec;
        spec.d = d;
        spec.heads = heads;
        spec.head_dim = head_dim;
        spec.value_dim = value_dim;
        spec.scale = scale;
        spec.seed = seed;
        spec.kind = operators::parse_attention_kind(kind, "kind");
        spec.biases = biases;
        if (d < 1 || heads < 1 || head_dim < 0 || value_dim < 0)
          throw InputError("random", "d and heads must be >= 1, head_dim and value_dim >= 0");
        const double dd = d, h = heads, k = head_dim > 0 ? head_dim : dd / h,
                     v = value_dim > 0 ? value_dim : k;
        check_memory("random", 8 * 2 * (2 * dd * h * k + 2 * dd * h * v + 2 * h * dd * dd),
                     "a layer with d=" + std::to_string(d) + ", heads=" + std::to_string(heads));
        LayerCore r;
        r.layer = operators::random_layer(spec);
        if (no_out_proj) {
          if (r.layer.heads * r.layer.value_dim != r.layer.d)
            throw InputError("no_out_proj", "W^O = I needs heads*value_dim = d, got " +
                                                std::to_string(r.layer.heads * r.layer.value_dim) +
                                                " and d = " + std::to_string(r.layer.d));
          r.layer.WO = Matrix<double>::Identity(r.layer.d, r.layer.d);
        }
        r.layer.rotary = rope_of(rope).rotary;  // None and "none": no rotary embeddings
        r.layer.validate();                     // an odd head_dim or l2 with RoPE: InputError "rotary"
        std::ostringstream os;
        os << "random d=" << r.layer.d << " heads=" << r.layer.heads << " head_dim=" << r.layer.head_dim
           << " value_dim=" << r.layer.value_dim << " scale=" << spec.scale << " seed=" << spec.seed
           << " biases=" << spec.biases;
        r.source = os.str();
        return r;
      },
      py::arg("d") = 16, py::arg("heads") = 2, py::arg("head_dim") = 0, py::arg("value_dim") = 0,
      py::arg("scale") = 1.0, py::arg("seed") = 0, py::arg("kind") = "dot", py::arg("biases") = false,
      py::arg("no_out_proj") = false, py::arg("rope") = py::none());
}

}  // namespace regatta::python
