// regatta local (--layer F --heads H | --random SPEC) --input X [--epsilon E] [--certify] [--precision BITS]
// [--margin M] [--json]: the local regularity of a self-attention layer at the tokens X —
//   ‖J(X)‖₂  Lanczos (or power iteration) on JᵀJ from JVPs/VJPs: an estimate from below, a certified lower
//            bound (interval JVP at the witness) and, with --certify and n·d ≤ --dense-limit, a certified
//            upper bound (dense interval Jacobian, interval Cholesky);
//   ‖J(X)‖∞  the exact maximum row sum evaluated in double (certified enclosure with --certify);
//   δ(X, ε)  the Havens et al. local sensitivity (docs/math/bounds.md#havens-local, claims havens.*) with its
//            naive variants, the gradient-norm comparator and, with --margin, the certified radius.
// A 3-D --input (B x n x d) is a batch: every input is analysed on its own, in order (the JSON output is then
// {"batch": B, "inputs": [...]}, one object per input as for that input alone, with its "index").
// Progress goes to stderr once the command has run for more than a second.
#include <mpfr.h>

#include <cmath>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <utility>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/operators/lipschitz/local.hpp>
#include <regatta/operators/lipschitz/region.hpp>
#include "command.hpp"
#include "json_output.hpp"
#include "layer_options.hpp"
#include "local_args.hpp"
#include "local_model.hpp"
#include "local_whole.hpp"
#include "numbers.hpp"
#include "report/progress.hpp"
#include "validate.hpp"

namespace regatta::cli {

namespace {

using namespace local_command;

Sensitivity sensitivity(const ResolvedLayer& r, const Matrix<double>& X, const LocalArgs& args,
                        const lip::SpectralOptions& spectral, const lip::Progress& progress) {
  Sensitivity s;
  if (args.norms_only || args.lower_bound_only) {
    s.refusal = args.lower_bound_only ? "not computed (--lower-bound-only)" : "not computed (--norms-only)";
    return s;
  }
  s.refusal = lip::havens_refusal(r.layer, r.options);
  if (s.refusal) return s;
  progress("local sensitivity (xi, kappa)", 0, 1);
  s.estimates = lip::havens_estimates(r.layer, r.options, X, spectral);
  progress("local sensitivity (xi, kappa)", 1, 1);
  s.delta = lip::havens_delta(s.estimates, args.epsilon);
  s.naive_kernel = lip::havens_delta_naive_kernel(s.estimates, args.epsilon);
  s.naive_weights = lip::havens_delta_naive_weights(s.estimates, args.epsilon);
  s.gradnorm_lipschitz = lip::havens_gradnorm_lipschitz(s.estimates, args.epsilon);
  s.coefficients = lip::havens_delta_coefficients(s.estimates);
  lip::MarginSetting margin;
  if (args.margin) {
    margin.margin = *args.margin;
    margin.readout_lipschitz = args.readout_lipschitz;
    s.radius = lip::havens_certified_radius(s.estimates, margin);
  }
  if (args.certify) {
    progress("certified local sensitivity", 0, 1);
    const PrecisionGuard guard(args.precision);
    s.certified = lip::havens_certified(r.layer, r.options, X, s.estimates, args.dense_limit);
    const auto up = [](const interval& x) { return mpfr_get_d(upper_bound(x).backend().data(), MPFR_RNDU); };
    s.delta_upper = up(lip::havens_delta(*s.certified, args.epsilon));
    s.naive_weights_upper = up(lip::havens_delta_naive_weights(*s.certified, args.epsilon));
    s.gradnorm_upper =
        up(lip::havens_gradnorm_lipschitz(*s.certified, args.epsilon) * interval(args.epsilon));
    if (args.margin) s.radius_certified = lip::havens_certified_radius(*s.certified, margin);
    progress("certified local sensitivity", 1, 1);
  }
  return s;
}

RegionResults region_results(const ResolvedLayer& r, const Matrix<double>& X, const LocalArgs& args,
                             const lip::LocalNormReport& local, const lip::Progress& progress) {
  RegionResults out;
  const bool wanted = args.ball || args.box || (args.certify && args.margin);
  if (!wanted) return out;
  out.refusal = lip::region_refusal(r.layer, r.options);
  if (out.refusal) return out;
  lip::RegionOptions options;
  options.dense_limit = args.region_limit;
  options.pieces = args.region_pieces;
  options.progress = progress;
  // The second-order form for --ball/--box (docs/local.md); in the bisection of the radius only where one
  // evaluation is cheap (n·d ≤ 128: at most 16 forward-mode passes per step).
  options.second_order = true;
  if (args.ball || args.box) {
    const lip::Region region{args.ball ? lip::RegionShape::ball : lip::RegionShape::box,
                             args.ball ? *args.ball : *args.box};
    lip::RegionOptions with_lower = options;
    with_lower.lower_witness = true;  // the certified lower ends: a point of the region found by ascent
    out.norms = lip::region_jacobian_norms(r.layer, r.options, X, region, with_lower);
  }
  if (args.certify && args.margin) {
    lip::MarginSetting margin;
    margin.margin = *args.margin;
    margin.readout_lipschitz = args.readout_lipschitz;
    lip::RegionRadiusOptions radius;
    radius.region = options;
    radius.region.progress = {};
    radius.region.second_order = X.size() <= 128;
    radius.region.pieces_budget = 0;  // the smallest automatic pieces: one region per bisection step
    progress("region robustness radius (bisection)", 0, 1);
    out.radius = lip::region_certified_radius(r.layer, r.options, X, margin, local.two.estimate, radius);
    progress("region robustness radius (bisection)", 1, 1);
  }
  return out;
}

void check_options(const LocalArgs& args) {
  check_positive("--epsilon", args.epsilon);
  check_in_range("--precision", args.precision, 64, max_precision_bits);
  if (!(args.tolerance > 0 && args.tolerance < 1))
    throw InputError("--tolerance", "must lie in (0, 1), got " + number(args.tolerance));
  if (args.margin) check_positive("--margin", *args.margin);
  if (args.ball) check_positive("--ball", *args.ball);
  if (args.box) check_positive("--box", *args.box);
  if (args.estimate_only && args.certify)
    throw InputError("--estimate-only", "cannot be combined with --certify");
  if (args.estimate_only && (args.ball || args.box))
    throw InputError("--estimate-only", std::string("cannot be combined with ") +
                                            (args.ball ? "--ball" : "--box") +
                                            " (the region's sup is certified in interval arithmetic)");
  if (args.lower_bound_only) {
    const std::pair<bool, const char*> conflicts[] = {{args.certify, "--certify"},
                                                      {args.estimate_only, "--estimate-only"},
                                                      {args.ball.has_value(), "--ball"},
                                                      {args.box.has_value(), "--box"},
                                                      {args.margin.has_value(), "--margin"}};
    for (const auto& [given, name] : conflicts)
      if (given) throw InputError("--lower-bound-only", std::string("cannot be combined with ") + name);
  }
  if (args.norms_only && args.margin && !args.ball && !args.box)
    throw InputError("--margin",
                     "needs --ball or --box with --norms-only (its radius comes from delta otherwise)");
  if (args.norms_only && args.margin && !args.certify)
    throw InputError("--margin",
                     "with --norms-only needs --certify: delta is not computed, and the region "
                     "robustness radius is certified");
  if (!(std::isfinite(args.readout_lipschitz) && args.readout_lipschitz > 0))
    throw InputError("--readout-lipschitz", "must be finite and > 0");
  if (args.region_pieces > 0 && !args.ball && !args.box && !(args.certify && args.margin))
    throw InputError("--region-pieces", "needs a region: --ball, --box, or --certify with --margin");
}

/// The size checks before any work on tokens of X's size (every input of a batch has the same size).
void check_sizes(const ResolvedLayer& resolved, const Matrix<double>& first, const std::string& name,
                 const LocalArgs& args) {
  check_nonempty(name, first.rows());
  check_sequence_memory(name, resolved, double(first.rows()), double(first.rows()));
  if (const double nd = double(first.rows()) * double(first.cols());
      args.certify && nd <= double(args.dense_limit))
    // The dense interval Jacobian and its Gram matrix: two (n d)^2 MPFI intervals of two MPFR numbers each.
    check_memory("--dense-limit", 2 * nd * nd * 2 * (32 + double(args.precision) / 8),
                 "the dense interval Jacobian of n*d = " + std::to_string(long(nd)) + " rows");
}

lip::LocalNormOptions norm_options(const LocalArgs& args) {
  lip::LocalNormOptions options;
  options.spectral.method = lip::parse_spectral_method(args.method, "--method");
  options.spectral.relative_tolerance = args.tolerance;
  options.spectral.max_iterations = args.max_iterations;
  options.precision_bits = args.precision;
  options.certify = args.certify;
  options.certified_lower = !args.estimate_only;
  options.inf_norm = !args.lower_bound_only;
  options.dense_limit = args.dense_limit;
  return options;
}

/// Everything `local` computes for one input.
struct Analysis {
  lip::LocalNormReport norms;
  Sensitivity s;
  RegionResults g;
  std::map<std::string, double> seconds;
};

Analysis analyse(const ResolvedLayer& resolved, const Matrix<double>& X, const std::string& name,
                 const LocalArgs& args, lip::LocalNormOptions options) {
  auto progress_state = std::make_shared<report::StageProgress>("regatta local");
  const lip::Progress progress = [progress_state](std::string_view stage, Eigen::Index done,
                                                  Eigen::Index total) {
    (*progress_state)(stage, done, total);
  };
  options.progress = progress;
  Analysis a;
  a.norms = lip::local_jacobian_norms(resolved.layer, resolved.options, X, options);
  if (!std::isfinite(a.norms.two.estimate) || (a.norms.has_inf && !std::isfinite(a.norms.inf.value)))
    throw InputError(name,
                     "the Jacobian norms of the layer at these tokens are not finite doubles "
                     "(the scores leave the double range): rescale the tokens or the layer");
  a.s = sensitivity(resolved, X, args, options.spectral, progress);
  a.g = region_results(resolved, X, args, a.norms, progress);
  a.seconds = progress_state->seconds();
  return a;
}

/// One line per layer for --node all (Castin et al.'s experiment: every attention layer of a network at
/// one input).
void print_layer_line(const ModelLayer& m, const Analysis& a) {
  std::cout << printable(m.node) << "  " << m.X.rows() << " x " << m.X.cols() << ", heads "
            << m.resolved.layer.heads << (m.resolved.options.causal ? ", causal" : "")
            << "  ||J||_2 estimate " << number(a.norms.two.estimate);
  if (a.norms.has_two_lower) std::cout << ", certified >= " << lower_number(a.norms.two_lower);
  if (a.norms.has_two_upper) std::cout << ", certified <= " << upper_number(a.norms.two_upper);
  if (a.norms.has_inf) std::cout << "  ||J||_inf " << number(a.norms.inf.value);
  if (a.norms.has_inf_enclosure)
    std::cout << " in [" << lower_number(a.norms.inf_lower) << ", " << upper_number(a.norms.inf_upper) << "]";
  if (!a.s.refusal) std::cout << "  delta " << number(a.s.delta);
  std::cout << "\n";
}

void run_model(const LocalArgs& args, int& result) {
  check_options(args);
  const std::vector<ModelLayer> layers = model_layers(args.layer, args.input, true, false);
  for (const ModelLayer& m : layers) check_sizes(m.resolved, m.X, args.input, args);
  const bool all = args.layer.node == "all";
  if (all && !args.json)
    std::cout << args.layer.model << " at " << args.input << ": " << layers.size()
              << " attention layer(s), the local Lipschitz constant of each at its input tokens\n";
  nlohmann::json list = nlohmann::json::array();
  for (const ModelLayer& m : layers) {
    const Analysis a = analyse(m.resolved, m.X, args.input, args, norm_options(args));
    if (args.json) {
      nlohmann::json one = local_json(m.resolved, m.X, args, a.norms, a.s, a.g, a.seconds);
      one["model"] = args.layer.model;
      one["node"] = m.node;
      if (!all) std::cout << json_text(one) << "\n";
      list.push_back(std::move(one));
    } else if (all) {
      print_layer_line(m, a);
    } else {
      print_human(m.resolved, m.X, args, a.norms, a.s);
      print_region(a.g, a.norms);
    }
  }
  if (args.json && all)
    std::cout << json_text(
                     nlohmann::json{{"model", args.layer.model}, {"input", args.input}, {"layers", list}})
              << "\n";
  result = exit_ok;
}

void run(const LocalArgs& args, int& result) {
  if (args.whole) {
    if (args.layer.model.empty()) throw InputError("--whole", "needs --model");
    run_whole_model(args.layer.model, args.layer.node, args.input, args.json);
    result = exit_ok;
    return;
  }
  if (!args.layer.model.empty()) return run_model(args, result);
  if (!args.layer.node.empty()) throw InputError("--node", "needs --model");
  const ResolvedLayer resolved = resolve_layer(args.layer);
  check_options(args);
  const TokenBatch inputs = load_token_batch(args.input, "--input", resolved.layer.d);
  check_sizes(resolved, inputs.inputs.front(), args.input, args);
  const lip::LocalNormOptions options = norm_options(args);
  nlohmann::json batch_json = nlohmann::json::array();
  const std::size_t count = inputs.inputs.size();
  for (std::size_t b = 0; b < count; ++b) {
    const Matrix<double>& X = inputs.inputs[b];
    const std::string name = inputs.batched ? args.input + " [input " + std::to_string(b) + "]" : args.input;
    const Analysis a = analyse(resolved, X, name, args, options);
    if (args.json) {
      nlohmann::json one = local_json(resolved, X, args, a.norms, a.s, a.g, a.seconds);
      if (!inputs.batched) {
        std::cout << json_text(one) << "\n";
      } else {
        one["index"] = b;
        batch_json.push_back(std::move(one));
      }
    } else {
      if (inputs.batched) std::cout << "input " << b << " (index into the batch of " << count << ")\n";
      print_human(resolved, X, args, a.norms, a.s);
      print_region(a.g, a.norms);
    }
  }
  // A batch: one object holding the inputs' objects in order (each the same as for that input alone).
  if (args.json && inputs.batched)
    std::cout << json_text(nlohmann::json{{"batch", count}, {"inputs", batch_json}}) << "\n";
  result = exit_ok;
}

}  // namespace

void add_local_command(CLI::App& app, int& result) {
  auto args = std::make_shared<LocalArgs>();
  auto* cmd = app.add_subcommand(
      "local",
      "Local Lipschitz constant ||J(X)|| (2 and inf norm) and local sensitivity delta(X, eps) at an input");
  add_layer_options(cmd, args->layer);
  add_model_options(cmd, args->layer);
  cmd->add_flag("--whole", args->whole,
                "With --model: the local Lipschitz constant ||J(x)||_2 of the whole network at --input (an "
                "estimate by power iteration and a certified upper bound), instead of one attention layer");
  cmd->add_option("--input", args->input,
                  "Tokens X (n x d), or a batch (B x n x d: each input analysed on its own): FILE.npy, "
                  "FILE.npz[:NAME], FILE.safetensors[:NAME]; with --model, the model's input")
      ->required();
  cmd->add_option("--epsilon", args->epsilon,
                  "Radius of the Frobenius ball of perturbations for delta (default 0.1)")
      ->check(positive());
  cmd->add_flag("--certify", args->certify,
                "Also certify ||J||_inf (enclosure), ||J||_2 from above (n*d <= --dense-limit) and delta");
  cmd->add_flag("--estimate-only", args->estimate_only,
                "Skip every interval evaluation (no certified lower bound on ||J||_2; faster at large n)");
  cmd->add_flag("--norms-only", args->norms_only,
                "Only the Jacobian norms (and --ball/--box regions): skip the local sensitivity delta, whose "
                "certification dominates at large n*d");
  cmd->add_flag(
      "--lower-bound-only", args->lower_bound_only,
      "Only ||J||_2: the Lanczos estimate and its CERTIFIED lower bound (interval JVP at the witness, "
      "rounded down); skips ||J||_inf and delta, whose costs dominate at large n*d");
  cmd->add_option("--precision", args->precision, "Bits of every interval evaluation (>= 64, default 128)");
  cmd->add_option("--method", args->method, "Spectral method: lanczos (default) or power");
  cmd->add_option("--tolerance", args->tolerance,
                  "Relative accuracy target of the spectral norms (default 1e-10)")
      ->check(finite_in(0, 1, Ends::open));
  cmd->add_option("--max-iterations", args->max_iterations, "Lanczos / power steps at most (default 500)")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--dense-limit", args->dense_limit,
                  "Largest n*d for the dense certified upper bound on ||J||_2 (default 256)")
      ->check(CLI::Range(0LL, 1LL << 20));
  CLI::Option* margin = cmd->add_option_function<double>(
                               "--margin", [args](double v) { args->margin = v; },
                               "Classification margin m: report the radius with sqrt(2) L delta(X, eps) < m "
                               "(havens.certified_radius)")
                            ->check(positive());
  cmd->add_option("--readout-lipschitz", args->readout_lipschitz,
                  "Lipschitz constant L > 0 of the readout from the layer output to the logits, for --margin "
                  "(default 1)")
      ->check(positive())
      ->needs(margin);
  CLI::Option* ball = cmd->add_option_function<double>(
                             "--ball", [args](double v) { args->ball = v; },
                             "Certified sup of ||J||_2 and ||J||_inf over the Frobenius ball B(X, EPS)")
                          ->check(positive());
  cmd->add_option_function<double>(
         "--box", [args](double v) { args->box = v; },
         "Certified sup of ||J||_2 and ||J||_inf over the box |X' - X| <= R (every entry)")
      ->check(positive())
      ->excludes(ball);
  cmd->add_option("--region-limit", args->region_limit,
                  "Largest n*d for the region enclosure (dense interval64 Jacobian; default 4096)")
      ->check(CLI::Range(1LL, 1LL << 16));
  cmd->add_option("--region-pieces", args->region_pieces,
                  "Segment pieces M of the region's second-order forms: tighter at large radii, M times the "
                  "passes (default: automatic by n*d, 4 to 16 where n*d <= 128, else 1)")
      ->check(CLI::Range(1, 256));
  cmd->add_flag("--json", args->json, "Machine-readable output");
  cmd->callback([args, &result] { run(*args, result); });
}

}  // namespace regatta::cli
