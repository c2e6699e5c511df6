// Whole vision transformers (operators/model.hpp): loading (timm layout + config), logits in double and as
// certified enclosures, and the per-input robustness of `regatta certify` (cli/certify.cpp, one row).
#include <cmath>
#include <functional>
#include <memory>

#include <pybind11/eigen.h>
#include <pybind11/stl.h>

#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/io/json_file.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_affine.hpp>
#include <regatta/operators/model_graph.hpp>
#include <regatta/operators/model_local.hpp>
#include <regatta/operators/model_robustness.hpp>
#include <regatta/operators/model_tensors.hpp>
#include "bindings.hpp"
#include "convert.hpp"
#include "interrupt.hpp"

namespace regatta::python {

namespace {

/// A loaded model with its two converted forms (double for the attack, interval64 for the regions).
struct ModelCore {
  std::shared_ptr<const operators::Model> model;
  std::shared_ptr<const operators::ConvertedModel<double>> md;
  std::shared_ptr<const operators::ConvertedModel<interval64>> mi;
  std::string source;
};

/// The input x of the model: an image of any shape with input_size() entries, flattened in C order (the
/// model's (C, H, W) order), or for a text model a token-embedding matrix of n × width entries (1 ≤ n ≤
/// the positions), flattened in C order (see Model.embed_tokens).
Vector<double> image_arg(const ModelCore& m, const py::handle& image) {
  const operators::Model& model = *m.model;
  const char* name = model.text() ? "input" : "image";
  auto a = as_doubles(image, name);  // complex, bool and object arrays refused, as for layers
  if (model.text() && (a.ndim() != 2 || a.shape(1) != py::ssize_t(model.width)))
    throw InputError(name, "expected a token-embedding matrix of shape (n, " + std::to_string(model.width) +
                               "), got shape " + shape_text(a));
  if (!model.accepts(Eigen::Index(a.size()))) {
    if (model.text())
      throw InputError(name, "has " + std::to_string(a.size()) + " entries, the model takes n x " +
                                 std::to_string(model.width) + " with 1 <= n <= " +
                                 std::to_string(model.context) + " (a token-embedding matrix)");
    throw InputError(name, "has " + std::to_string(a.size()) + " entries, the model takes " +
                               std::to_string(model.channels) + " x " + std::to_string(model.image_size) +
                               " x " + std::to_string(model.image_size) + " = " +
                               std::to_string(model.input_size()));
  }
  const Eigen::Index size = Eigen::Index(a.size());
  return vector_arg(a.reshape({py::ssize_t(size)}), name, size);
}

/// The model with its two converted forms.
ModelCore core_of(operators::Model loaded) {
  ModelCore c;
  auto model = std::make_shared<operators::Model>(std::move(loaded));
  c.md = std::make_shared<operators::ConvertedModel<double>>(*model);
  c.mi = std::make_shared<operators::ConvertedModel<interval64>>(*model);
  c.model = std::move(model);
  return c;
}

int label_arg(const ModelCore& m, int label) {
  if (label < 0 || label >= m.model->classes)
    throw InputError("label", std::to_string(label) + " is not a class of the model (0.." +
                                  std::to_string(m.model->classes - 1) + ")");
  return label;
}

}  // namespace

void bind_model(py::module_& m) {
  py::class_<ModelCore>(m, "ModelCore", "A whole transformer: ViT, GPT-2 or BERT (use regatta.Model)")
      .def_property_readonly("source", [](const ModelCore& c) { return c.source; })
      .def_property_readonly("classes", [](const ModelCore& c) { return c.model->classes; })
      .def_property_readonly("input_shape",
                             [](const ModelCore& c) {
                               // Text: the longest input (positions × width); shorter ones are accepted.
                               return c.model->text() ? py::make_tuple(c.model->context, c.model->width)
                                                      : py::make_tuple(c.model->channels, c.model->image_size,
                                                                       c.model->image_size);
                             })
      .def_property_readonly("layout", [](const ModelCore& c) { return c.model->layout; })
      .def(
          "embed_tokens",
          [](const ModelCore& c, const std::vector<long>& ids) {
            const operators::Model& model = *c.model;
            if (!model.text()) throw InputError("tokens", "the model takes images, not tokens");
            if (ids.empty() || long(ids.size()) > model.context)
              throw InputError("tokens", std::to_string(ids.size()) + " tokens, the model takes 1.." +
                                             std::to_string(model.context));
            std::vector<int> checked;
            for (long id : ids) {
              if (id < 0 || id >= model.vocab)
                throw InputError("tokens", "id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                               std::to_string(model.vocab - 1) + ")");
              checked.push_back(int(id));
            }
            const Vector<double> x = model.embed_tokens(checked);
            return Matrix<double>(
                Eigen::Map<const Matrix<double>>(x.data(), Eigen::Index(ids.size()), model.width));
          },
          py::arg("tokens"))
      .def(
          "graph",
          [](const ModelCore& c, int tokens) {
            // The graph of the forward function (docs/graph.md#front-ends-safetensors-layouts); tokens = 0:
            // a text model's context, an image model's whole image.
            const operators::Model& model = *c.model;
            if (tokens != 0 && !model.text())
              throw InputError("tokens", "applies to text models; this is a " + model.layout + " model");
            if (tokens < 0 || tokens > model.context)
              throw InputError("tokens", std::to_string(tokens) + " rows, the model takes 1.." +
                                             std::to_string(model.context));
            const int n = tokens != 0 ? tokens : model.context;
            const Eigen::Index length = model.text() ? Eigen::Index(n) * model.width : model.input_size();
            return graph_core(operators::model_graph(model, length, c.source));
          },
          py::arg("tokens") = 0)
      .def_property_readonly("depth", [](const ModelCore& c) { return c.model->blocks.size(); })
      .def_property_readonly("width", [](const ModelCore& c) { return c.model->width; })
      .def(
          "logits",
          [](const ModelCore& c, const py::handle& image) {
            const Vector<double> x = image_arg(c, image);
            py::gil_scoped_release release;
            return operators::forward<double>(*c.model, x);
          },
          py::arg("image"))
      .def(
          "logits_enclosure",
          [](const ModelCore& c, const py::handle& image) {
            const Vector<double> x = image_arg(c, image);
            Vector<double> lower, upper;
            {
              py::gil_scoped_release release;
              const Vector<interval64> z = operators::forward<interval64>(*c.model, x.cast<interval64>());
              lower.resize(z.size());
              upper.resize(z.size());
              for (Eigen::Index k = 0; k < z.size(); ++k) lower(k) = z(k).lower(), upper(k) = z(k).upper();
            }
            return py::make_tuple(lower, upper);
          },
          py::arg("image"))
      .def(
          "robustness",
          [](const ModelCore& c, const py::handle& image, int label, double tolerance,
             const std::string& method, const py::object& progress, bool compare_local) {
            const Vector<double> x = image_arg(c, image);
            const int y = label_arg(c, label);
            if (!(std::isfinite(tolerance) && tolerance > 0 && tolerance < 1))
              throw InputError("tolerance", "must lie in (0, 1)");
            if (method != "affine" && method != "region")
              throw InputError("method", "must be 'affine' or 'region'");
            const bool affine = method == "affine" && operators::affine_unsupported(*c.model).empty();
            // One row of `regatta certify` (cli/certify.cpp), without the naive product certificate.
            py::dict out;
            int prediction = 0;
            double margin = 0, margin_lower = 0, attack = INFINITY, certified = 0, refuted = 0, local = 0;
            int checks = 0;
            // The composition of local bounds (model_local.hpp), only when asked and where it applies.
            const std::string why_local = compare_local ? operators::local_composition_unsupported(*c.model)
                                                        : std::string("not computed (compare_local=False)");
            // Progress: "attack" then "region", done = steps so far (passes of the attack; blocks and tangent
            // steps of the region passes, or stages of the affine passes), total unknown (0).
            Interrupter interrupter(progress);
            std::int64_t region_steps = 0;
            operators::AttackOptions attack_options;
            std::int64_t passes = 0;
            attack_options.poll = [&] { interrupter.poll("attack", ++passes, 0); };
            const std::function<void()> region_poll = [&] { interrupter.poll("region", ++region_steps, 0); };
            {
              py::gil_scoped_release release;
              const Vector<double> z = operators::forward<double>(*c.model, x);
              Eigen::Index pred = 0;
              z.maxCoeff(&pred);
              prediction = int(pred);
              double runner = -INFINITY;
              for (Eigen::Index k = 0; k < z.size(); ++k)
                if (k != y) runner = std::max(runner, z(k));
              margin = z(y) - runner;
              const Vector<interval64> zi = operators::forward<interval64>(*c.model, x.cast<interval64>());
              double lower = INFINITY;
              for (Eigen::Index k = 0; k < zi.size(); ++k)
                if (k != y) lower = std::min(lower, (zi(y) - zi(k)).lower());
              margin_lower = lower;  // may be ≤ 0: then no radius is certified
              const operators::AttackResult a = operators::attack(*c.md, x, y, attack_options);
              attack = a.found ? a.radius : INFINITY;
              if (prediction == y && margin_lower > 0) {
                const double upper = a.found ? a.radius : 100.0;
                const auto r =
                    affine ? operators::affine_certified_radius(*c.model, x, y, upper, tolerance, region_poll)
                           : operators::certified_radius(*c.mi, x, y, upper, tolerance, 60, region_poll);
                certified = r.radius;
                refuted = r.refuted;
                checks = r.checks;
                if (why_local.empty())
                  local =
                      operators::local_composition_radius(*c.mi, x, y, upper, tolerance, region_poll).radius;
              }
            }
            out["label"] = y;
            out["prediction"] = prediction;
            out["margin"] = margin;
            out["margin_lower"] = margin_lower;
            out["attack_radius"] = attack;
            out["certified_radius"] = certified;
            out["refuted_radius"] = refuted;
            out["region_checks"] = checks;
            out["method"] = affine ? "affine" : "region";
            out["local_radius"] = why_local.empty() ? py::object(py::float_(local)) : py::object(py::none());
            out["local_unavailable"] =
                why_local.empty() ? py::object(py::none()) : py::object(py::str(why_local));
            return out;
          },
          py::arg("image"), py::arg("label"), py::arg("tolerance") = 0.01, py::arg("method") = "affine",
          py::arg("progress") = py::none(), py::arg("compare_local") = false);

  m.def(
      "load_model",
      [](const std::string& path, const std::string& config) {
        ModelCore c;
        {
          py::gil_scoped_release release;
          c = core_of(operators::load_model(path, config));
        }
        c.source = path;
        return c;
      },
      py::arg("path"), py::arg("config") = "");
  m.def(
      "model_from_tensors",
      [](const py::dict& tensors, const std::string& collection, const std::string& config_path,
         const std::string& config_text) {
        auto arrays = tensors_of(tensors, collection);
        ModelCore c;
        {
          py::gil_scoped_release release;
          // The config is read after the layout has been recognised, as for a file: a JSON file when a path
          // is given, otherwise the JSON text the Python layer wrote from a dict.
          const auto read_config = [&]() -> nlohmann::json {
            if (!config_path.empty()) return io::read_json(config_path);
            try {
              return nlohmann::json::parse(config_text);
            } catch (const nlohmann::json::parse_error& e) {
              throw InputError("config", std::string("is not valid JSON: ") + e.what());
            }
          };
          c = core_of(operators::model_from_tensors(std::move(arrays), collection, read_config,
                                                    config_path.empty() ? "config" : config_path));
        }
        c.source = collection;
        return c;
      },
      py::arg("tensors"), py::arg("collection"), py::arg("config_path"), py::arg("config_text"));
}

}  // namespace regatta::python
