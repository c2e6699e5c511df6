// Measure-level Lipschitz brackets (`regatta measure-lipschitz`, operators/lipschitz/measure_ratio.hpp): the
// W_p ratio of self-attention, or of cross-attention in the query or the context measure, from adversarial
// search (lower) and the mean-field bound (upper). The search has no poll hook: the GIL is released, but the
// call is not interruptible.
#include <cmath>
#include <optional>

#include <pybind11/eigen.h>
#include <pybind11/stl.h>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/operators/lipschitz/measure_ratio.hpp>
#include "bindings.hpp"
#include "convert.hpp"
#include "interrupt.hpp"

namespace regatta::python {

namespace {

py::dict measure_lipschitz(const LayerCore& l, std::int64_t n, std::optional<std::string> cross,
                           std::int64_t m, std::optional<double> radius, std::optional<double> query_radius,
                           double p, bool certify, unsigned precision, double budget,
                           std::int64_t evaluations, int restarts, std::uint64_t seed,
                           const py::object& progress) {
  if (n < 1 || n > (std::int64_t(1) << 20))
    throw InputError("n", "must lie in [1, 2^20] (atoms per measure)");
  lip::MeasureSearchOptions s;
  if (cross && *cross == "self")
    throw InputError("cross", "must be query or context (omit it for self-attention)");
  s.argument = cross ? lip::parse_measure_argument(*cross, "cross") : lip::MeasureArgument::self;
  s.n = n;
  if (m < 0 || m > (std::int64_t(1) << 16)) throw InputError("m", "must lie in [1, 2^16] (0: n)");
  s.m = m;
  if (m != 0 && s.argument == lip::MeasureArgument::self)
    throw InputError("m", "applies to cross-attention only (cross='query' or 'context')");
  const double heads = l.layer.heads, d = l.layer.d, rows = double(n), cols = double(m != 0 ? m : n);
  check_memory(
      m != 0 ? "n/m" : "n",
      8 * ((3 + double(l.options.sinkhorn_iterations)) * heads * rows * cols + 8 * (rows + cols) * d),
      "the attention matrices of " + std::to_string(long(rows)) + " x " + std::to_string(long(cols)) +
          " tokens with " + std::to_string(l.layer.heads) + " heads");
  if (radius) {
    check_positive("radius", *radius);
    s.radius = *radius;
  }
  if (query_radius) {
    check_positive("query_radius", *query_radius);
    if (s.argument != lip::MeasureArgument::context)
      throw InputError("query_radius", "applies to cross='context' only");
    s.query_radius = *query_radius;
  }
  if (!(std::isfinite(p) && p >= 1 && p <= 1e6)) throw InputError("p", "must be a finite number in [1, 1e6]");
  s.p = p;
  s.budget_seconds = budget;
  s.max_evaluations = evaluations;
  if (restarts < 0) throw InputError("restarts", "must be >= 0");
  s.random_starts = restarts;
  s.seed = seed;
  Interrupter interrupter(progress);
  s.poll = [&](std::int64_t done) { interrupter.poll("search", done, evaluations); };
  lip::MeasureBracket b;
  {
    py::gil_scoped_release release;
    b = lip::compute_measure_bracket(l.layer, l.options, s, certify, precision);
  }
  interrupter.report("search", b.evaluations, b.evaluations);
  py::dict out;
  put_bracket_ends(out, b);
  out["argument"] = lip::to_string(s.argument);
  out["p"] = s.p;
  out["n"] = s.n;
  out["m"] = s.argument == lip::MeasureArgument::self ? 0 : (s.m > 0 ? s.m : s.n);
  out["radius"] = optional_number(s.radius);
  out["bound_name"] = b.bound_name;
  out["bound_description"] = b.bound_description;
  out["refused"] = b.refused;
  out["witness_mu"] = b.witness.mu;
  out["witness_nu"] = b.witness.nu;
  out["witness_shared"] = b.witness.shared;
  out["witness_origin"] = b.witness.origin;
  out["numerator"] = b.witness.numerator;
  out["denominator"] = b.witness.denominator;
  out["evaluations"] = b.evaluations;
  out["stopped_by_budget"] = b.stopped_by_budget;
  out["stopped_by_evaluations"] = b.stopped_by_evaluations;
  out["note"] = b.note;
  return out;
}

}  // namespace

void bind_measure(py::module_& m) {
  m.def("measure_lipschitz", &measure_lipschitz, py::arg("layer"), py::arg("n"),
        py::arg("cross") = py::none(), py::arg("m") = 0, py::arg("radius") = py::none(),
        py::arg("query_radius") = py::none(), py::arg("p") = 1.0, py::arg("certify") = false,
        py::arg("precision") = 128u, py::arg("budget") = 10.0, py::arg("evaluations") = 4000,
        py::arg("restarts") = 4, py::arg("seed") = 0, py::arg("progress") = py::none());
}

}  // namespace regatta::python
