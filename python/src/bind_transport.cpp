// Wasserstein distances between discrete measures: exact (network simplex, with the certified bracket),
// entropic (Sinkhorn), sliced and 1-D, with the checks of `regatta wasserstein` (cli/wasserstein.cpp) under
// the Python argument names.
#include <cmath>
#include <iomanip>
#include <sstream>

#include <pybind11/eigen.h>
#include <pybind11/stl.h>

#include <regatta/core/checks.hpp>
#include <regatta/core/decimal.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/measures/sinkhorn.hpp>
#include <regatta/measures/wasserstein.hpp>
#include "bindings.hpp"
#include "convert.hpp"
#include "interrupt.hpp"

namespace regatta::python {

namespace {

/// Float32 and float16 weights carry one rounding each: accepted when they sum to 1 within
/// stored_weights_tolerance (as the CLI does for such files); float64 weights within
/// normalisation_tolerance(n).
measures::DiscreteMeasure<double> measure(const py::handle& atoms, const py::handle& weights,
                                          const std::string& name, bool normalize) {
  Matrix<double> x = atoms_arg(atoms, name);
  const Eigen::Index n = x.rows();
  if (weights.is_none()) return measures::DiscreteMeasure<double>::empirical(std::move(x));
  const std::string wname = "weights_" + name;
  Vector<double> w = vector_arg(weights, wname, n);
  check_nonnegative(wname, w);
  if (!(w.sum() > 0)) throw InputError(wname, "weights sum to 0");
  if (!normalize) {
    double roundoff = std::ldexp(1.0, -53);
    if (const py::array a = py::array::ensure(weights); a && a.dtype().kind() == 'f')
      roundoff = a.dtype().itemsize() == 2   ? std::ldexp(1.0, -11)
                 : a.dtype().itemsize() == 4 ? std::ldexp(1.0, -24)
                                             : roundoff;
    PyErr_Clear();
    const double tolerance = stored_weights_tolerance(std::size_t(n), roundoff);
    check_normalized(wname + " (use normalize=True to rescale)", w, tolerance);
  }
  return measures::DiscreteMeasure<double>::from_weights(std::move(x), std::move(w), true);
}

/// The Sinkhorn options of the keyword arguments (the library's defaults for those not given).
measures::SinkhornOptions sinkhorn_options(std::optional<double> epsilon, std::optional<double> tolerance,
                                           std::optional<std::int64_t> max_iterations,
                                           const std::optional<std::string>& kernel) {
  measures::SinkhornOptions o;
  if (epsilon) o.epsilon = *epsilon;
  if (tolerance) o.tolerance = *tolerance;
  if (max_iterations) o.max_iterations = *max_iterations;
  const std::string requested = kernel.value_or("auto");
  o.kernel = requested == "dense"      ? measures::SinkhornKernel::dense
             : requested == "streamed" ? measures::SinkhornKernel::streamed
                                       : measures::SinkhornKernel::automatic;
  return o;
}

py::dict wasserstein(const py::handle& a, const py::handle& b, const py::handle& weights_a,
                     const py::handle& weights_b, double p, const std::string& method, bool certify,
                     std::optional<double> epsilon, std::optional<double> tolerance,
                     std::optional<std::int64_t> max_iterations, std::optional<int> directions,
                     std::optional<std::uint64_t> seed, bool normalize, const py::object& progress,
                     std::optional<std::string> kernel) {
  if (!std::isfinite(p) || p < 1)
    throw InputError("p", "must be a finite number >= 1 (W_p is not a metric for p < 1)");
  if (method != "exact" && method != "sinkhorn" && method != "sliced" && method != "1d")
    throw InputError("method", "must be exact, sinkhorn, sliced or 1d, got '" + method + "'");
  if (certify && method != "exact") throw InputError("certify", "applies to method='exact' only");
  if (method != "sinkhorn" && (epsilon || tolerance || max_iterations || kernel))
    throw InputError(epsilon          ? "epsilon"
                     : tolerance      ? "tolerance"
                     : max_iterations ? "max_iterations"
                                      : "kernel",
                     "applies to method='sinkhorn' only");
  if (kernel && *kernel != "auto" && *kernel != "dense" && *kernel != "streamed")
    throw InputError("kernel", "must be 'auto', 'dense' or 'streamed', got '" + *kernel + "'");
  if (method != "sliced" && (directions || seed))
    throw InputError(directions ? "directions" : "seed", "applies to method='sliced' only");
  const measures::SinkhornOptions sinkhorn = sinkhorn_options(epsilon, tolerance, max_iterations, kernel);
  measures::check_sinkhorn_options(sinkhorn);
  if (directions && (*directions < 1 || *directions > 100000000))
    throw InputError("directions", "must lie in [1, 100000000], got " + std::to_string(*directions));

  const auto mu = measure(a, weights_a, "a", normalize);
  const auto nu = measure(b, weights_b, "b", normalize);
  if (mu.dim() != nu.dim())
    throw InputError(
        "b", "atoms have dimension " + std::to_string(nu.dim()) + ", a has " + std::to_string(mu.dim()));
  if (method == "exact" || method == "sinkhorn") {
    const auto radius = [](const Matrix<double>& x) { return x.rowwise().norm().maxCoeff(); };
    if (!std::isfinite(std::pow(radius(mu.atoms()) + radius(nu.atoms()), p))) {
      double largest = 0;
      for (Eigen::Index i = 0; i < mu.size(); ++i)
        largest = std::max(largest, (nu.atoms().rowwise() - mu.atoms().row(i)).rowwise().norm().maxCoeff());
      if (!std::isfinite(std::pow(largest, p)))
        throw InputError("a, b, p", "the cost ||x - y||^p of the farthest atoms (distance " +
                                        nearest_decimal(largest, 17) + ") is not a finite double at p = " +
                                        nearest_decimal(p, 17) + ": rescale the atoms or lower p");
    }
  }
  if (method == "sliced")
    check_memory(
        "directions", 8.0 * double(directions.value_or(100)) * double(mu.dim() + 1),
        std::to_string(directions.value_or(100)) + " directions in dimension " + std::to_string(mu.dim()));
  if (method == "1d" && mu.dim() != 1)
    throw InputError(
        "method", "1d needs one-dimensional atoms, the measures have dimension " + std::to_string(mu.dim()));

  py::dict out;
  out["n"] = mu.size();
  out["m"] = nu.size();
  out["dim"] = mu.dim();
  out["p"] = p;
  out["method"] = method;
  if (method == "exact") {
    measures::WassersteinResult w;
    std::optional<measures::CertifiedBracket> c;
    {
      // Ctrl-C: the simplex polls every 1024 pivots; the certification (MPFR c-transforms, OpenMP) runs to
      // its end once started, and a pending interrupt is raised right after it.
      Interrupter interrupter(progress);
      measures::NetworkSimplexOptions options;
      options.poll = [&](std::int64_t pivots, std::int64_t limit) {
        interrupter.poll("wasserstein: network simplex pivots", pivots, limit);
      };
      py::gil_scoped_release release;
      w = measures::wasserstein_exact(mu, nu, p, options);
      if (certify) {
        interrupter.report("wasserstein: certifying the bracket", 0, 1);
        c = measures::certify_wasserstein(mu, nu, p, w.plan, true);
        interrupter.report("wasserstein: certifying the bracket", 1, 1);
      }
    }
    out["value"] = w.value;
    out["cost"] = w.cost;
    out["status"] = measures::to_string(w.status);
    out["converged"] = w.status == measures::TransportStatus::optimal;
    out["pivots"] = w.plan.iterations;
    std::vector<Eigen::Index> rows, cols;
    std::vector<double> masses;
    for (const auto& e : w.plan.entries) rows.push_back(e.i), cols.push_back(e.j), masses.push_back(e.mass);
    out["plan"] = py::make_tuple(rows, cols, masses);
    out["estimate_kind"] = "exact (network simplex; value is a floating-point estimate unless certify)";
    if (c) {
      out["lower"] = c->lower;
      out["upper"] = c->upper;
      out["cost_lower"] = c->cost_lower;
      out["cost_upper"] = c->cost_upper;
      out["relative_width"] = c->relative_width;
      out["certified"] = c->certified;
    }
  } else if (method == "sinkhorn") {
    measures::SinkhornOptions o = sinkhorn;
    if (o.kernel == measures::SinkhornKernel::dense)
      if (const std::string refusal = measures::dense_kernel_refusal(mu, nu, p); !refusal.empty())
        throw InputError("kernel", "dense: " + refusal);
    std::optional<measures::SinkhornResult<double>> r;
    {
      // Ctrl-C and progress: polled after every iteration (two streamed reductions over the n x m pairs, or
      // one pass over the dense kernel).
      Interrupter interrupter(progress);
      o.poll = [&](std::int64_t iterations, std::int64_t limit) {
        interrupter.poll("wasserstein: sinkhorn iterations", iterations, limit);
      };
      py::gil_scoped_release release;
      r.emplace(measures::sinkhorn(mu, nu, p, o));
    }
    out["value"] = std::pow(std::max(r->cost, 0.0), 1 / p);
    out["cost"] = r->cost;
    out["objective"] = r->objective;
    out["epsilon"] = o.epsilon;
    out["status"] = measures::to_string(r->status);
    out["converged"] = r->converged();
    out["iterations"] = r->iterations;
    out["marginal_error"] = r->marginal_error;
    out["tolerance"] = o.tolerance;
    out["estimate_kind"] = "entropic estimate (epsilon = " + nearest_decimal(o.epsilon, 17) + ")";
    out["kernel"] = measures::to_string(r->kernel);
    out["kernel_requested"] = kernel.value_or("auto");
    if (r->kernel == measures::SinkhornKernel::dense) out["handed_over"] = r->handed_over;
  } else if (method == "sliced") {
    measures::SlicedResult s;
    {
      py::gil_scoped_release release;
      s = measures::sliced_wasserstein(mu, nu, p, directions.value_or(100), seed.value_or(0));
    }
    out["value"] = s.value;
    out["cost"] = s.cost;
    out["standard_error"] = s.standard_error;
    out["directions"] = s.n_directions;
    out["seed"] = seed.value_or(0);
    out["status"] = "completed";
    out["converged"] = true;
    out["estimate_kind"] = "Monte-Carlo estimate (" + std::to_string(s.n_directions) + " directions)";
  } else {
    double cost = 0;
    {
      py::gil_scoped_release release;
      cost = measures::wasserstein_1d_cost(mu, nu, p);
    }
    out["value"] = std::pow(std::max(cost, 0.0), 1 / p);
    out["cost"] = cost;
    out["status"] = "optimal";
    out["converged"] = true;
    out["estimate_kind"] = "exact formula (1-D quantiles), evaluated in floating point";
  }
  const double value = out["value"].cast<double>(), cost = out["cost"].cast<double>();
  if (!std::isfinite(value) || !std::isfinite(cost))
    throw InputError("a, b, p", "W_p^p = " + nearest_decimal(cost, 17) +
                                    " is not a finite double (||x - y||^p leaves the double range at p = " +
                                    nearest_decimal(p, 17) + "): rescale the atoms or lower p");
  return out;
}

}  // namespace

void bind_transport(py::module_& m) {
  m.def("wasserstein", &wasserstein, py::arg("a"), py::arg("b"), py::arg("weights_a") = py::none(),
        py::arg("weights_b") = py::none(), py::arg("p") = 2.0, py::arg("method") = "exact",
        py::arg("certify") = false, py::arg("epsilon") = py::none(), py::arg("tolerance") = py::none(),
        py::arg("max_iterations") = py::none(), py::arg("directions") = py::none(),
        py::arg("seed") = py::none(), py::arg("normalize") = false, py::arg("progress") = py::none(),
        py::arg("kernel") = py::none());
}

}  // namespace regatta::python
