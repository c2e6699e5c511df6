// Lipschitz analysis: every theoretical bound with its claim ID, local Jacobian norms (and their certified
// sup over a ball or box, and the region robustness radius), and brackets from adversarial search. Results
// are dicts of plain numbers; the Python layer (_results.py) turns them into objects whose certified numbers
// know which way they round.
#include <cmath>
#include <optional>

#include <pybind11/eigen.h>
#include <pybind11/stl.h>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>
#include <regatta/operators/lipschitz/bracket.hpp>
#include <regatta/operators/lipschitz/local.hpp>
#include <regatta/operators/lipschitz/region.hpp>
#include "bindings.hpp"
#include "convert.hpp"
#include "interrupt.hpp"

namespace regatta::python {

namespace {

/// The CLI's memory check for one linearisation on n queries and m keys (cli/layer_options.cpp).
void check_sequence_memory(const std::string& name, const LayerCore& l, double n, double m) {
  const double heads = l.layer.heads, d = l.layer.d;
  const double matrices = 3 + double(l.options.sinkhorn_iterations);
  check_memory(name, 8 * (matrices * heads * n * m + 8 * (n + m) * d),
               "the attention matrices of " + std::to_string(long(n)) + " x " + std::to_string(long(m)) +
                   " tokens with " + std::to_string(l.layer.heads) + " heads");
}

py::list bounds(const LayerCore& l, std::optional<std::int64_t> n, std::optional<double> radius,
                std::optional<double> query_radius, int depth, const py::object& X,
                std::optional<std::string> norm, unsigned interval_bits) {
  lip::BoundSetting setting;
  if (n) {
    if (*n < 1 || *n > (std::int64_t(1) << 53)) throw InputError("n", "must lie in [1, 2^53]");
    setting.n = *n;
  }
  if (radius) {
    check_positive("radius", *radius);
    setting.radius = *radius;
  }
  if (query_radius) {
    check_positive("query_radius", *query_radius);
    setting.query_radius = *query_radius;
  }
  if (depth < 1 || depth > 1000000) throw InputError("depth", "must lie in [1, 1000000]");
  setting.depth = depth;
  if (!X.is_none()) {
    setting.input = matrix_arg(X, "X", l.layer.d);
    if (setting.n && *setting.n != setting.input.rows())
      throw InputError("n", "is " + std::to_string(*setting.n) + " but X has " +
                                std::to_string(setting.input.rows()) + " tokens");
    setting.n = setting.input.rows();
    if (setting.radius)
      for (Eigen::Index i = 0; i < setting.input.rows(); ++i)
        if (const double r = setting.input.row(i).norm(); !(r <= *setting.radius))
          throw InputError("X", "token " + std::to_string(i) + " has norm " + std::to_string(r) +
                                    ", outside the ball of radius " + std::to_string(*setting.radius));
  }
  std::optional<lip::Norm> which;
  if (norm) which = lip::parse_norm(*norm, "norm");
  std::vector<lip::BoundReport> reports;
  {
    py::gil_scoped_release release;
    reports = lip::theoretical_bounds(l.layer, l.options, setting, which, interval_bits);
  }
  py::list out;
  for (const lip::BoundReport& r : reports) {
    const lip::BoundInfo& i = lip::info(r.bound);
    py::dict b;
    b["id"] = i.id;
    b["name"] = i.name;
    b["norm"] = i.norm;
    b["applies"] = r.applies;
    b["value"] = r.applies ? py::object(py::float_(r.value)) : py::object(py::none());
    b["certified_upper"] = r.applies ? py::object(py::float_(r.certified_upper)) : py::object(py::none());
    b["reason"] = r.reason;
    b["note"] = r.note;
    b["provenance"] = i.provenance;
    b["hypotheses"] = i.hypotheses;
    b["source"] = i.source;
    out.append(b);
  }
  return out;
}

py::dict local(const LayerCore& l, const py::handle& X, bool certify, unsigned precision,
               const std::string& method, double tolerance, int max_iterations, Eigen::Index dense_limit,
               std::optional<double> ball, std::optional<double> box, std::optional<double> margin,
               double readout_lipschitz, Eigen::Index region_limit, int region_pieces,
               const py::object& progress) {
  const Matrix<double> x = matrix_arg(X, "X", l.layer.d);
  check_sequence_memory("X", l, double(x.rows()), double(x.rows()));
  lip::LocalNormOptions options;
  options.spectral.method = lip::parse_spectral_method(method, "method");
  if (!(tolerance > 0 && tolerance < 1)) throw InputError("tolerance", "must lie in (0, 1)");
  options.spectral.relative_tolerance = tolerance;
  if (max_iterations < 1) throw InputError("max_iterations", "must be >= 1");
  options.spectral.max_iterations = max_iterations;
  options.precision_bits = precision;
  options.certify = certify;
  if (dense_limit < 0) throw InputError("dense_limit", "must be >= 0");
  options.dense_limit = dense_limit;
  if (ball && box) throw InputError("ball/box", "give at most one of ball and box");
  if (ball) check_positive("ball", *ball);
  if (box) check_positive("box", *box);
  if (margin) {
    check_positive("margin", *margin);
    if (!certify) throw InputError("margin", "needs certify=True (the radius is a certified quantity)");
  }
  if (!(std::isfinite(readout_lipschitz) && readout_lipschitz >= 0))
    throw InputError("readout_lipschitz", "must be finite and >= 0");
  if (region_limit < 1) throw InputError("region_limit", "must be >= 1");
  if (region_pieces < 0 || region_pieces > 256)
    throw InputError("region_pieces", "must lie in [1, 256], or 0 for automatic");

  Interrupter interrupter(progress);
  const lip::Progress hook = [&](std::string_view stage, Eigen::Index done, Eigen::Index total) {
    interrupter.poll(stage, done, total);
  };
  options.progress = hook;
  py::dict out;
  lip::LocalNormReport norms;
  std::optional<std::string> refusal;
  std::optional<lip::RegionNormReport> region;
  std::optional<lip::RegionRadiusResult> radius;
  {
    py::gil_scoped_release release;
    norms = lip::local_jacobian_norms(l.layer, l.options, x, options);
    if (ball || box || margin) {
      refusal = lip::region_refusal(l.layer, l.options);
      if (!refusal) {
        lip::RegionOptions region_options;
        region_options.dense_limit = region_limit;
        region_options.pieces = region_pieces;
        region_options.progress = hook;
        // As `regatta local`: the second-order form for ball/box, and in the radius bisection only where one
        // evaluation is cheap (n·d ≤ 128).
        region_options.second_order = true;
        if (ball || box) {
          lip::RegionOptions with_lower = region_options;
          with_lower.lower_witness = true;  // the certified lower ends: a point of the region found by ascent
          region = lip::region_jacobian_norms(
              l.layer, l.options, x,
              lip::Region{ball ? lip::RegionShape::ball : lip::RegionShape::box, ball ? *ball : *box},
              with_lower);
        }
        if (margin) {
          lip::MarginSetting setting;
          setting.margin = *margin;
          setting.readout_lipschitz = readout_lipschitz;
          lip::RegionRadiusOptions radius_options;
          radius_options.region = region_options;
          radius_options.region.second_order = x.size() <= 128;
          radius_options.region.pieces_budget = 0;  // the smallest automatic pieces: one region per step
          radius = lip::region_certified_radius(l.layer, l.options, x, setting, norms.two.estimate,
                                                radius_options);
        }
      }
    }
  }
  out["n"] = x.rows();
  out["two_estimate"] = norms.two.estimate;
  out["two_method"] = lip::to_string(norms.two.method);
  out["two_iterations"] = norms.two.iterations;
  out["two_converged"] = norms.two.converged;
  out["two_relative_error"] = norms.two.relative_error;
  out["two_witness"] = norms.two.witness;
  out["two_lower"] = norms.has_two_lower ? py::object(py::float_(norms.two_lower)) : py::object(py::none());
  out["two_upper"] = norms.has_two_upper ? py::object(py::float_(norms.two_upper)) : py::object(py::none());
  out["two_upper_method"] = norms.has_two_upper ? norms.two_upper_method : std::string();
  out["two_upper_note"] = norms.two_upper_note;
  out["jacobian_scalar"] = norms.jacobian_scalar;
  out["inf_estimate"] = norms.inf.value;
  out["inf_row"] = py::make_tuple(norms.inf.index / l.layer.d, norms.inf.index % l.layer.d);
  out["inf_structured"] = norms.inf_structured;
  out["inf_lower"] =
      norms.has_inf_enclosure ? py::object(py::float_(norms.inf_lower)) : py::object(py::none());
  out["inf_upper"] =
      norms.has_inf_enclosure ? py::object(py::float_(norms.inf_upper)) : py::object(py::none());
  out["region_refused"] = refusal ? py::object(py::str(*refusal)) : py::object(py::none());
  if (region) {
    py::dict g;
    g["shape"] = lip::to_string(region->region.shape);
    g["radius"] = region->region.radius;
    g["status"] = region->status;
    g["certified"] = region->certified;
    g["two_upper"] = region->certified ? py::object(py::float_(region->two_upper)) : py::object(py::none());
    g["two_upper_method"] = region->two_upper_method;
    g["inf_upper"] = region->certified ? py::object(py::float_(region->inf_upper)) : py::object(py::none());
    g["relative_width"] = region->relative_width;
    g["radius_pieces"] = region->second_order ? region->second_order->radius_pieces : 0;
    g["taylor_pieces"] = region->second_order ? region->second_order->taylor_pieces : 0;
    // The certified lower ends: the larger of the centre's certified norm and the witness's.
    for (const auto& [key, witness, centre] :
         {std::tuple{"two", &region->two_witness,
                     norms.has_two_lower ? std::optional<double>(norms.two_lower) : std::nullopt},
          std::tuple{"inf", &region->inf_witness,
                     norms.has_inf_enclosure ? std::optional<double>(norms.inf_lower) : std::nullopt}}) {
      std::optional<double> lower = centre;
      py::dict w;
      if (*witness) {
        const lip::RegionWitness& rw = **witness;
        if (rw.lower && (!lower || *rw.lower > *lower)) lower = rw.lower;
        w["lower"] = rw.lower ? py::object(py::float_(*rw.lower)) : py::object(py::none());
        w["estimate"] = rw.estimate;
        w["distance"] = rw.distance;
        w["origin"] = rw.origin;
        w["reason"] = rw.reason;
        w["input"] = rw.input;
      }
      g[(std::string(key) + "_lower").c_str()] =
          lower ? py::object(py::float_(*lower)) : py::object(py::none());
      g[(std::string(key) + "_witness").c_str()] = *witness ? py::object(w) : py::object(py::none());
    }
    for (const auto& [key, bound] : {std::pair{"closed_form_2", &region->closed_form_two},
                                     std::pair{"closed_form_inf", &region->closed_form_inf}}) {
      if (*bound) {
        py::dict c;
        c["id"] = (*bound)->id;
        c["upper"] = (*bound)->upper;
        c["token_radius"] = (*bound)->radius;
        g[key] = c;
      } else {
        g[key] = py::none();
      }
    }
    out["region"] = g;
  } else {
    out["region"] = py::none();
  }
  if (radius) {
    py::dict r;
    r["radius"] = radius->radius;
    r["sup_two_at_radius"] = radius->sup_two_at_radius;
    r["first_order_limit"] = radius->first_order_limit;
    r["first_failure"] = radius->first_failure;
    r["steps"] = radius->steps;
    out["robustness"] = r;
  } else {
    out["robustness"] = py::none();
  }
  return out;
}

py::dict bracket(const LayerCore& l, std::int64_t n, std::optional<double> radius, const std::string& norm,
                 bool certify, unsigned precision, double budget, std::int64_t evaluations, int restarts,
                 std::uint64_t seed, std::int64_t region_limit, const py::object& progress) {
  if (n < 1 || n > (std::int64_t(1) << 20)) throw InputError("n", "must lie in [1, 2^20]");
  check_sequence_memory("n", l, double(n), double(n));
  lip::BracketOptions options;
  options.norm = lip::parse_norm(norm, "norm");
  options.n = n;
  if (radius) {
    check_positive("radius", *radius);
    options.radius = *radius;
  }
  options.certify = certify;
  options.precision_bits = precision;
  options.search.budget_seconds = budget;
  options.search.max_evaluations = evaluations;
  if (restarts < 0) throw InputError("restarts", "must be >= 0");
  options.search.random_starts = restarts;
  options.search.seed = seed;
  if (region_limit < 0) throw InputError("region_limit", "must be >= 0");
  options.region_limit = region_limit;
  Interrupter interrupter(progress);
  options.search.poll = [&](std::int64_t done) { interrupter.poll("search", done, evaluations); };
  lip::Bracket b;
  {
    py::gil_scoped_release release;
    b = lip::compute_bracket(l.layer, l.options, options);
  }
  interrupter.report("search", b.evaluations, b.evaluations);
  py::dict out;
  put_bracket_ends(out, b);
  out["norm"] = lip::to_string(b.norm);
  out["n"] = b.n;
  out["radius"] = optional_number(b.radius);
  out["bound_name"] = b.bound_name;
  out["bound_description"] = b.bound_description;
  out["refused"] = b.refused;
  out["witness"] = b.witness.input;
  out["witness_direction"] = b.witness.direction;
  out["witness_row"] = b.witness.row;
  out["witness_origin"] = b.witness.origin;
  out["all_rows"] = b.all_rows;
  out["evaluations"] = b.evaluations;
  out["stopped_by_budget"] = b.stopped_by_budget;
  out["stopped_by_evaluations"] = b.stopped_by_evaluations;
  out["note"] = b.note;
  out["region_upper"] = optional_number(b.region_upper);
  out["region_note"] = b.region_note;
  return out;
}

}  // namespace

void bind_lipschitz(py::module_& m) {
  m.def("bounds", &bounds, py::arg("layer"), py::arg("n") = py::none(), py::arg("radius") = py::none(),
        py::arg("query_radius") = py::none(), py::arg("depth") = 1, py::arg("X") = py::none(),
        py::arg("norm") = py::none(), py::arg("interval_bits") = 128u);
  m.def("local", &local, py::arg("layer"), py::arg("X"), py::arg("certify") = false,
        py::arg("precision") = 128u, py::arg("method") = "lanczos", py::arg("tolerance") = 1e-10,
        py::arg("max_iterations") = 500, py::arg("dense_limit") = lip::dense_certification_limit,
        py::arg("ball") = py::none(), py::arg("box") = py::none(), py::arg("margin") = py::none(),
        py::arg("readout_lipschitz") = 1.0, py::arg("region_limit") = 4096, py::arg("region_pieces") = 0,
        py::arg("progress") = py::none());
  m.def("bracket", &bracket, py::arg("layer"), py::arg("n"), py::arg("radius") = py::none(),
        py::arg("norm") = "2", py::arg("certify") = false, py::arg("precision") = 128u,
        py::arg("budget") = 0.0, py::arg("evaluations") = 20000, py::arg("restarts") = 4, py::arg("seed") = 0,
        py::arg("region_limit") = 512, py::arg("progress") = py::none());
}

}  // namespace regatta::python
