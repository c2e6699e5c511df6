// regatta wasserstein A B : W_p between two discrete measures given as atom files (docs/math/transport.md).
//   --method exact     network simplex (a floating-point value; --certify adds a rigorous bracket,
//                      docs/math/transport.md#certified-bracket)
//   --method sinkhorn  entropic estimate <P_ε, C>^(1/p) by Sinkhorn with ε-scaling
//                      (docs/math/transport.md#entropic); --sinkhorn-kernel auto (default) runs the dense
//                      scaling iteration on the materialised n x m kernel for p = 2 when it fits in memory,
//                      else the streamed log-domain iteration; the output says which ran
//   --method sliced    Monte-Carlo estimate of the sliced distance SW_p over L seeded directions
//                      (docs/math/transport.md#sliced)
//   --method 1d        the exact quantile formula (d = 1 only, docs/math/transport.md#one-dimensional)
// A and B hold atoms (n × d; a 1-D file is d = 1); weights are uniform unless --weights-a/--weights-b give
// vectors (nonnegative, finite, right length, summing to 1 within tolerance unless --normalize). Exit codes:
// 0 ok; 1 the solver did not converge / the bracket is not certified (the number is printed, marked so);
// 2 bad input or usage (one line).
#include <cmath>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include <regatta/core/checks.hpp>
#include <regatta/core/decimal.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/io/array.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/measures/sinkhorn.hpp>
#include <regatta/measures/wasserstein.hpp>
#include "array_source.hpp"
#include "command.hpp"
#include "json_output.hpp"
#include "validate.hpp"

namespace regatta::cli {

namespace {

struct WassersteinArgs {
  std::string a, b, weights_a, weights_b;
  double p = 2;
  std::string method = "exact";
  std::string kernel = "auto";
  double epsilon = 1e-2;
  double tolerance = 1e-9;
  long long max_iterations = 100000;
  int directions = 100;
  std::uint64_t seed = 0;
  bool certify = false, normalize = false, json = false;
  // Which method-specific options were given (to reject them with the wrong method).
  bool epsilon_set = false, tolerance_set = false, max_iterations_set = false, directions_set = false,
       seed_set = false, kernel_set = false;
};

/// Most sliced directions: 10^8 one-dimensional problems already take minutes at small n; more is a typo.
constexpr int max_directions = 100000000;

/// Unit roundoff of the file's storage type: weights stored in single or half precision carry one rounding
/// each, so they are accepted when they sum to 1 within stored_weights_tolerance(n, u) (and renormalised in
/// double).
double storage_roundoff(io::DType dtype) {
  switch (dtype) {
    case io::DType::f16:
      return std::ldexp(1.0, -11);
    case io::DType::bf16:
      return std::ldexp(1.0, -8);
    case io::DType::f32:
      return std::ldexp(1.0, -24);
    case io::DType::f64:
      return std::ldexp(1.0, -53);
  }
  return 0;
}

Matrix<double> load_atoms(const std::string& spec) {
  const io::Array a = load_array(spec);
  if (a.shape.size() != 1 && a.shape.size() != 2)
    throw InputError(a.source, "atoms must be a 1-D or 2-D array (n x d), got " +
                                   std::to_string(a.shape.size()) + " dimensions");
  io::require_finite(a);
  Matrix<double> m = a.matrix();
  if (m.rows() == 0 || m.cols() == 0) throw InputError(a.source, "has no atoms (empty array)");
  return m;
}

measures::DiscreteMeasure<double> load_measure(const std::string& atoms_spec, const std::string& weights_spec,
                                               bool normalize) {
  Matrix<double> atoms = load_atoms(atoms_spec);
  const Eigen::Index n = atoms.rows();
  if (weights_spec.empty()) return measures::DiscreteMeasure<double>::empirical(std::move(atoms));
  const io::Array w = load_array(weights_spec);
  if (w.shape.size() != 1)
    throw InputError(w.source, "weights must be a 1-D array, got shape " + io::shape_repr(w.shape));
  io::require_finite(w);
  Vector<double> weights = w.vector();
  if (weights.size() != n)
    throw InputError(w.source, "has " + std::to_string(weights.size()) + " weights, " + atoms_spec + " has " +
                                   std::to_string(n) + " atoms");
  check_nonnegative(w.source, weights);
  if (!(weights.sum() > 0)) throw InputError(w.source, "weights sum to 0");
  if (normalize && !std::isfinite(weights.sum()))
    throw InputError(w.source,
                     "weights sum to " + std::to_string(weights.sum()) +
                         " in double precision, which --normalize cannot divide by: scale them down "
                         "by a common factor");
  if (!normalize) {
    const double tolerance = stored_weights_tolerance(std::size_t(n), storage_roundoff(w.source_dtype));
    check_normalized(w.source + " (use --normalize to rescale)", weights, tolerance);
  }
  return measures::DiscreteMeasure<double>::from_weights(std::move(atoms), std::move(weights), true);
}

/// The Sinkhorn options of the command line.
measures::SinkhornOptions sinkhorn_options(const WassersteinArgs& args) {
  measures::SinkhornOptions o;
  o.epsilon = args.epsilon;
  o.tolerance = args.tolerance;
  o.max_iterations = args.max_iterations;
  o.kernel = args.kernel == "dense"      ? measures::SinkhornKernel::dense
             : args.kernel == "streamed" ? measures::SinkhornKernel::streamed
                                         : measures::SinkhornKernel::automatic;
  return o;
}

void validate(const WassersteinArgs& args) {
  if (!std::isfinite(args.p) || args.p < 1)
    throw InputError("--p", "must be a finite number >= 1 (W_p is not a metric for p < 1)");
  const std::string& m = args.method;
  if (m != "exact" && m != "sinkhorn" && m != "sliced" && m != "1d")
    throw InputError("--method", "must be exact, sinkhorn, sliced or 1d, got '" + m + "'");
  if (args.certify && m != "exact") throw InputError("--certify", "applies to --method exact only");
  if (m != "sinkhorn" &&
      (args.epsilon_set || args.tolerance_set || args.max_iterations_set || args.kernel_set))
    throw InputError(args.epsilon_set          ? "--epsilon"
                     : args.tolerance_set      ? "--tolerance"
                     : args.max_iterations_set ? "--max-iterations"
                                               : "--sinkhorn-kernel",
                     "applies to --method sinkhorn only");
  if (args.kernel != "auto" && args.kernel != "dense" && args.kernel != "streamed")
    throw InputError("--sinkhorn-kernel", "must be auto, dense or streamed, got '" + args.kernel + "'");
  if (m != "sliced" && (args.directions_set || args.seed_set))
    throw InputError(args.directions_set ? "--directions" : "--seed", "applies to --method sliced only");
  measures::check_sinkhorn_options(sinkhorn_options(args),
                                   [](const std::string& m) { return option_flag(m); });
  if (args.directions < 1 || args.directions > max_directions)
    throw InputError("--directions", "must lie in [1, " + std::to_string(max_directions) + "], got " +
                                         std::to_string(args.directions));
}

void run(const WassersteinArgs& args, int& result) {
  validate(args);
  const auto mu = load_measure(args.a, args.weights_a, args.normalize);
  const auto nu = load_measure(args.b, args.weights_b, args.normalize);
  if (mu.dim() != nu.dim())
    throw InputError(args.b, "atoms have dimension " + std::to_string(nu.dim()) + ", " + args.a + " has " +
                                 std::to_string(mu.dim()));
  if (args.method == "exact" || args.method == "sinkhorn") {
    // Every cost ||x_i - y_j||^p must be a double: checked on the triangle-inequality bound first (O(n + m)),
    // pair by pair only when that bound overflows.
    const auto radius = [](const Matrix<double>& a) { return a.rowwise().norm().maxCoeff(); };
    if (!std::isfinite(std::pow(radius(mu.atoms()) + radius(nu.atoms()), args.p))) {
      double largest = 0;
      for (Eigen::Index i = 0; i < mu.size(); ++i)
        largest = std::max(largest, (nu.atoms().rowwise() - mu.atoms().row(i)).rowwise().norm().maxCoeff());
      if (!std::isfinite(std::pow(largest, args.p)))
        throw InputError(args.a + ", " + args.b + ", --p",
                         "the cost ||x - y||^p of the farthest atoms (distance " +
                             nearest_decimal(largest, 17) + ") is not a finite double at p = " +
                             nearest_decimal(args.p, 17) + ": rescale the atoms or lower --p");
    }
  }
  if (args.method == "sliced")  // the Gaussian directions are drawn at once: L x d doubles
    check_memory("--directions", 8.0 * double(args.directions) * double(mu.dim() + 1),
                 std::to_string(args.directions) + " directions in dimension " + std::to_string(mu.dim()));
  if (args.method == "1d" && mu.dim() != 1)
    throw InputError("--method", "1d needs one-dimensional atoms, the measures have dimension " +
                                     std::to_string(mu.dim()));

  nlohmann::json out{{"a", args.a},     {"b", args.b}, {"n", mu.size()},       {"m", nu.size()},
                     {"dim", mu.dim()}, {"p", args.p}, {"method", args.method}};
  std::ostringstream human;
  human << std::setprecision(17);
  human << "measures          " << args.a << " (" << mu.size() << " atoms) vs " << args.b << " (" << nu.size()
        << " atoms), dimension " << mu.dim() << ", p = " << args.p << "\n";
  bool ok = true;

  if (args.method == "exact") {
    const measures::WassersteinResult w = measures::wasserstein_exact(mu, nu, args.p);
    ok = w.status == measures::TransportStatus::optimal;
    out["value"] = w.value;
    out["cost"] = w.cost;
    out["status"] = measures::to_string(w.status);
    out["pivots"] = w.plan.iterations;
    out["estimate_kind"] = "exact (network simplex; value is a floating-point estimate unless --certify)";
    human << "W_p               " << w.value
          << "   [exact (network simplex; value is a floating-point estimate unless --certify)]\n"
          << "W_p^p             " << w.cost << "\n"
          << "status            " << measures::to_string(w.status) << " after " << w.plan.iterations
          << " pivots" << (ok ? "" : "  -- NOT optimal") << "\n";
    if (args.certify) {
      const measures::CertifiedBracket c = measures::certify_wasserstein(mu, nu, args.p, w.plan, true);
      out["lower"] = c.lower;
      out["upper"] = c.upper;
      out["cost_lower"] = c.cost_lower;
      out["cost_upper"] = c.cost_upper;
      out["relative_width"] = c.relative_width;
      out["certified"] = c.certified;
      human << "certified lower   " << lower_decimal(c.lower, 17)
            << "   [certified: dual potentials, directed rounding]\n"
            << "certified upper   " << upper_decimal(c.upper, 17)
            << "   [certified: completed plan, directed rounding]\n"
            << std::setprecision(3) << "relative width    " << c.relative_width
            << "   (upper - lower) / upper" << (c.certified ? "" : "  -- NOT certified") << "\n"
            << std::setprecision(17);
      ok = ok && c.certified;
    }
  } else if (args.method == "sinkhorn") {
    const measures::SinkhornOptions o = sinkhorn_options(args);
    if (o.kernel == measures::SinkhornKernel::dense)
      if (const std::string refusal = measures::dense_kernel_refusal(mu, nu, args.p); !refusal.empty())
        throw InputError("--sinkhorn-kernel", "dense: " + refusal);
    const measures::SinkhornResult<double> r = measures::sinkhorn(mu, nu, args.p, o);
    ok = r.converged();
    const bool dense = r.kernel == measures::SinkhornKernel::dense;
    const double value = std::pow(std::max(r.cost, 0.0), 1 / args.p);
    out["value"] = value;
    out["cost"] = r.cost;
    out["objective"] = r.objective;
    out["epsilon"] = args.epsilon;
    out["status"] = measures::to_string(r.status);
    out["iterations"] = r.iterations;
    out["marginal_error"] = r.marginal_error;
    out["tolerance"] = args.tolerance;
    out["estimate_kind"] = "entropic estimate (epsilon = " + nearest_decimal(args.epsilon, 17) + ")";
    out["kernel"] = measures::to_string(r.kernel);
    out["kernel_requested"] = args.kernel;
    if (dense) out["handed_over"] = r.handed_over;
    human << "W_p               " << value << "   [entropic estimate (ε = " << args.epsilon
          << "): <P_ε, C>^(1/p), >= W_p when converged]\n"
          << "<P_ε, C>          " << r.cost << "   [entropic estimate of W_p^p]\n"
          << "OT_ε              " << r.objective << "   [regularised objective, KL to a ⊗ b]\n"
          << "status            " << measures::to_string(r.status) << " after " << r.iterations
          << " iterations, marginal error " << std::setprecision(3) << r.marginal_error << " (tolerance "
          << args.tolerance << ")" << std::setprecision(17) << (ok ? "" : "  -- NOT converged") << "\n"
          << "kernel            " << measures::to_string(r.kernel) << " ("
          << (dense
                  ? "scaling iteration on the materialised " + std::to_string(mu.size()) + " x " +
                        std::to_string(nu.size()) + " Gibbs kernel, " +
                        format_bytes(8.0 * double(mu.size()) * double(nu.size())) +
                        (r.handed_over ? "; finished by the streamed log-domain iteration" : "")
                  : std::string("log-domain soft c-transforms streamed over the pairs, O((n + m) d) memory"))
          << "; --sinkhorn-kernel " << args.kernel << ")\n";
  } else if (args.method == "sliced") {
    const measures::SlicedResult s = measures::sliced_wasserstein(mu, nu, args.p, args.directions, args.seed);
    out["value"] = s.value;
    out["cost"] = s.cost;
    out["standard_error"] = s.standard_error;
    out["directions"] = s.n_directions;
    out["seed"] = args.seed;
    out["status"] = "completed";
    out["estimate_kind"] = "Monte-Carlo estimate (" + std::to_string(s.n_directions) + " directions)";
    human << "SW_p              " << s.value << "   [Monte-Carlo estimate (" << s.n_directions
          << " directions, seed " << args.seed << ") of the sliced distance, <= W_p]\n"
          << "SW_p^p            " << s.cost << " ± " << std::setprecision(3) << s.standard_error
          << " (standard error)\n"
          << std::setprecision(17);
  } else {  // 1d
    const double cost = measures::wasserstein_1d_cost(mu, nu, args.p);
    const double value = std::pow(std::max(cost, 0.0), 1 / args.p);
    out["value"] = value;
    out["cost"] = cost;
    out["status"] = "optimal";
    out["estimate_kind"] = "exact formula (1-D quantiles), evaluated in floating point";
    human << "W_p               " << value << "   [exact formula (1-D quantile coupling), floating point]\n"
          << "W_p^p             " << cost << "\n";
  }

  // A headline that is not a finite number is no result: the cost ||x - y||^p left the double range (large
  // atoms or a large --p), which the input caused — exit 2 with the reason, nothing printed as a result.
  const double headline = out["value"].get<double>(), cost = out["cost"].get<double>();
  // Sinkhorn's costs were checked finite above: a non-finite result there comes from cost / --epsilon.
  if ((!std::isfinite(headline) || !std::isfinite(cost)) && args.method == "sinkhorn")
    throw InputError("--epsilon", "Sinkhorn gave W_p^p = " + nearest_decimal(cost, 17) +
                                      ", not a finite double (the costs divided by --epsilon " +
                                      nearest_decimal(args.epsilon, 17) +
                                      " leave the double range): raise --epsilon");
  if (!std::isfinite(headline) || !std::isfinite(cost))
    throw InputError(args.a + ", " + args.b + ", --p",
                     "W_p^p = " + nearest_decimal(cost, 17) +
                         " is not a finite double (||x - y||^p leaves the double range "
                         "at p = " +
                         nearest_decimal(args.p, 17) + "): rescale the atoms or lower --p");
  if (args.json) {
    std::cout << json_text(out) << "\n";
  } else {
    std::cout << human.str();
  }
  result = ok ? exit_ok : exit_check_failed;
}

}  // namespace

void add_wasserstein_command(CLI::App& app, int& result) {
  auto args = std::make_shared<WassersteinArgs>();
  auto* cmd = app.add_subcommand("wasserstein", "W_p between two measures: exact, 1-D, sliced, Sinkhorn");
  cmd->add_option("A", args->a, "Atoms of mu: .npy (n x d, or 1-D for d = 1), or FILE.npz:NAME")->required();
  cmd->add_option("B", args->b, "Atoms of nu (same dimension as A)")->required();
  cmd->add_option("--weights-a", args->weights_a, "Weights of mu (1-D, length n); uniform if omitted");
  cmd->add_option("--weights-b", args->weights_b, "Weights of nu (1-D, length m); uniform if omitted");
  cmd->add_option("--p", args->p, "Exponent p >= 1 of the cost ||x - y||^p (default 2)");
  cmd->add_option("--method", args->method, "exact (default) | sinkhorn | sliced | 1d");
  cmd->add_option_function<double>(
      "--epsilon", [args](double e) { args->epsilon = e, args->epsilon_set = true; },
      "Sinkhorn: entropic regularisation ε > 0 in cost units (default 0.01)");
  cmd->add_option_function<std::string>(
      "--sinkhorn-kernel", [args](const std::string& k) { args->kernel = k, args->kernel_set = true; },
      "Sinkhorn: auto (default: dense for p = 2 when the n x m kernel fits in min(1 GiB, 1/4 of the "
      "available memory), else streamed) | dense | streamed");
  cmd->add_option_function<double>(
      "--tolerance", [args](double t) { args->tolerance = t, args->tolerance_set = true; },
      "Sinkhorn: stop when the L1 marginal error is <= this (default 1e-9)");
  cmd->add_option_function<long long>(
      "--max-iterations", [args](long long k) { args->max_iterations = k, args->max_iterations_set = true; },
      "Sinkhorn: iteration budget over all ε stages (default 100000); exit 1 if it runs out");
  cmd->add_option_function<int>(
      "--directions", [args](int l) { args->directions = l, args->directions_set = true; },
      "Sliced: number of random directions L in [1, 1e8] (default 100)");
  cmd->add_option_function<std::uint64_t>(
         "--seed", [args](std::uint64_t s) { args->seed = s, args->seed_set = true; },
         "Sliced: seed of the directions (default 0)")
      ->check(seed_value());
  cmd->add_flag("--certify", args->certify,
                "Exact only: add a certified bracket [lower, upper] (interval arithmetic)");
  cmd->add_flag("--normalize", args->normalize, "Rescale weights to sum 1 instead of rejecting them");
  cmd->add_flag("--json", args->json, "Machine-readable output");
  cmd->callback([args, &result] { run(*args, result); });
}

}  // namespace regatta::cli
