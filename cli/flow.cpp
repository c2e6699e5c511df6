// regatta flow: evolve an empirical (or weighted) measure under attention dynamics (docs/flow.md) and print
// the observables along the trajectory, each labelled estimate:
//   regatta flow --model sphere --beta 9 --init sphere,n=512,d=3,seed=0 --horizon 30 --step 0.1
//                [--integrator rk4|dopri5|layers] [--record-every 1] [--w2 auto] [--out DIR [--plot]]
// Everything is validated before the integration starts; --out DIR is written only after the run succeeded
// (into a temporary folder beside it, then renamed), so bad input leaves nothing behind.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include <regatta/core/error.hpp>
#include <regatta/core/io/file_bytes.hpp>
#include <regatta/core/io/json_file.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/measures/sampling.hpp>
#include <regatta/measures/sinkhorn_attention.hpp>
#include <regatta/measures/wasserstein.hpp>
#include <regatta/operators/flow.hpp>
#include "array_source.hpp"
#include "command.hpp"
#include "flow_plots.hpp"
#include "flow_stability.hpp"
#include "json_output.hpp"
#include "layer_options.hpp"
#include "numbers.hpp"
#include "spec.hpp"
#include "validate.hpp"

namespace regatta::cli {

namespace {

namespace fl = operators::flow;

struct FlowArgs {
  std::string model = "sphere";
  double beta = 1;
  std::string particles, weights, init, context;
  LayerArgs layer;
  std::string integrator = "rk4";
  double step = 0.1, horizon = 1, rtol = 1e-6, atol = 1e-9;
  long long max_steps = 100000;
  double record_every = 0;
  double cluster_radius = 1e-2;
  std::string w2 = "auto";
  long long exact_limit = 1000;
  double w2_epsilon = 1e-3;
  int threads = 0;
  std::string out;
  bool plot = false;
  bool json = false;
  double perturb = 0;  ///< 0: one flow; > 0: a second flow from particles moved by this much (a-weighted l2)
  std::uint64_t perturb_seed = 1;
  bool perturb_given = false;
};

fl::Model parse_model(const std::string& s) {
  for (fl::Model m : {fl::Model::sphere, fl::Model::sphere_unnormalized, fl::Model::sphere_sinkhorn,
                      fl::Model::self_attention, fl::Model::cross_attention})
    if (fl::to_string(m) == s) return m;
  throw InputError("--model",
                   "unknown model " + regatta::quoted(s) +
                       " (sphere, sphere-unnormalized, sphere-sinkhorn, self-attention, cross-attention)");
}

fl::Integrator parse_integrator(const std::string& s) {
  for (fl::Integrator i : {fl::Integrator::rk4, fl::Integrator::dopri5, fl::Integrator::layers})
    if (fl::to_string(i) == s) return i;
  throw InputError("--integrator", "unknown integrator " + regatta::quoted(s) + " (rk4, dopri5, layers)");
}

/// --init sphere,n=N,d=D,seed=S (uniform on S^{d−1}), circle,n=N (equally spaced on S¹, the grid measure),
/// gaussian,n=N,d=D,sigma=σ,seed=S.
Matrix<double> initial_particles(const std::string& text) {
  const Spec spec("--init", text, {"n", "d", "seed", "sigma"});
  const std::string kind = spec.positional().value_or("");
  const auto n = Eigen::Index(spec.get_int("n", 512, 1, 10'000'000));
  if (kind == "sphere") {
    const auto d = Eigen::Index(spec.get_int("d", 3, 2, 100000));
    return measures::sample_sphere(d, 1.0, n, spec.get_seed("seed", 0));
  }
  if (kind == "circle") {
    if (spec.has("d") || spec.has("seed") || spec.has("sigma"))
      throw InputError("--init", "circle takes only n (n equally spaced points of S^1)");
    Matrix<double> x(n, 2);
    for (Eigen::Index i = 0; i < n; ++i) {
      const double angle = 2 * M_PI * (double(i) + 0.5) / double(n);
      x(i, 0) = std::cos(angle);
      x(i, 1) = std::sin(angle);
    }
    return x;
  }
  if (kind == "gaussian") {
    const auto d = Eigen::Index(spec.get_int("d", 3, 1, 100000));
    return measures::sample_gaussian(Vector<double>::Zero(d), spec.get_double("sigma", 1, 1e-300, 1e300), n,
                                     spec.get_seed("seed", 0));
  }
  throw InputError("--init",
                   "unknown initial measure " + regatta::quoted(kind) + " (sphere, circle, gaussian)");
}

struct Observation {
  double time = 0, energy = 0, min_inner = 0, max_inner = 0;
  Eigen::Index clusters = 0;
  double w2_initial = NAN, w2_previous = NAN;
};

/// The Sinkhorn options of the W₂ estimate (--w2-epsilon).
measures::AttentionSinkhornOptions w2_sinkhorn_options(double epsilon, int threads) {
  measures::AttentionSinkhornOptions o;
  o.sinkhorn.epsilon = epsilon;
  o.sinkhorn.tolerance = 1e-6;
  o.sinkhorn.reduce_options.threads = threads;
  return o;
}

/// W₂ between two states with the same weights: exact network simplex (floating point) or √ of the debiased
/// Sinkhorn divergence S_ε (an estimate; S_ε → W₂² as ε → 0).
double w2(const Matrix<double>& X, const Matrix<double>& Y, const Vector<double>& w, bool exact,
          double epsilon, int threads) {
  const auto mu = measures::DiscreteMeasure<double>::from_weights(X, w);
  const auto nu = measures::DiscreteMeasure<double>::from_weights(Y, w);
  if (exact) return measures::wasserstein_exact(mu, nu, 2).value;
  const auto d = measures::sinkhorn_divergence_sq_euclidean(mu, nu, w2_sinkhorn_options(epsilon, threads));
  // Not converged (a tiny --w2-epsilon: the potentials leave the double range or the schedule runs out of
  // iterations): no estimate, printed "none" (null in JSON), never a number from an unfinished iteration.
  if (!d.converged() || !std::isfinite(d.value)) return NAN;
  return std::sqrt(std::max(d.value, 0.0));
}

void check_out_dir(const std::string& dir) {
  if (dir.empty()) return;
  const std::filesystem::path p(dir);
  std::error_code ec;  // the non-throwing overloads: a name too long is bad input, not exit 3
  if (std::filesystem::exists(std::filesystem::symlink_status(p, ec)))
    throw InputError("--out", "the folder " + regatta::quoted(dir) + " already exists");
  const std::filesystem::path parent = p.parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec))
    throw InputError("--out", "the folder " + regatta::quoted(parent.string()) + " does not exist");
  check_name_length("--out", dir);
}

/// fl::validate, its messages naming what the command line gave: the files of --particles, --weights and
/// --context, and the options (the library names its arguments: "particles", "weights", "max_steps").
void validate_flow(const fl::ModelSpec& spec, const Matrix<double>& X0, const Vector<double>& w,
                   const fl::IntegratorOptions& o, const FlowArgs& args) {
  try {
    fl::validate(spec, X0, w, o);
  } catch (const InputError& e) {
    const std::map<std::string, std::string> names = {
        {"particles", args.particles.empty() ? "--init" : args.particles},
        {"weights", args.weights},
        {"context", args.context},
        {"max_steps", "--max-steps"},
        {"output_times", "--record-every"},
        {"sinkhorn_iterations", "--sinkhorn"},
        {"layer", "--layer/--random"}};
    const auto it = names.find(e.subject());
    throw InputError(it != names.end() ? it->second : "--" + e.subject(),  // beta, step, horizon, rtol, ...
                     e.problem());
  }
}

void run(const FlowArgs& args, int& result) {
  // Everything is parsed and validated before any work.
  fl::ModelSpec spec;
  spec.model = parse_model(args.model);
  spec.beta = args.beta;
  spec.reduce.threads = args.threads;
  fl::IntegratorOptions o;
  o.method = parse_integrator(args.integrator);
  o.step = args.step;
  o.horizon = args.horizon;
  o.rtol = args.rtol;
  o.atol = args.atol;
  o.max_steps = args.max_steps;
  if (!std::isfinite(args.record_every) || args.record_every < 0)
    throw InputError("--record-every", "must be a finite number >= 0");
  if (!(args.cluster_radius > 0) || !std::isfinite(args.cluster_radius))
    throw InputError("--cluster-radius", "must be a finite number > 0");
  measures::check_sinkhorn_options(w2_sinkhorn_options(args.w2_epsilon, args.threads).sinkhorn,
                                   [](const std::string& m) { return option_flag(m, "w2-"); });
  if (args.w2 != "auto" && args.w2 != "exact" && args.w2 != "sinkhorn" && args.w2 != "none")
    throw InputError("--w2", "must be auto, exact, sinkhorn or none");
  if (args.particles.empty() == args.init.empty())
    throw InputError("--particles", "give exactly one of --particles FILE and --init SPEC");
  if (args.perturb_given && (!std::isfinite(args.perturb) || !(args.perturb > 0)))
    throw InputError("--perturb", "must be a finite number > 0");
  check_out_dir(args.out);
  if (args.plot && args.out.empty()) throw InputError("--plot", "needs --out DIR");
  if (std::isfinite(args.horizon) && std::isfinite(args.record_every) && args.record_every > 0) {
    const double count = args.horizon / args.record_every;
    if (count > 100000) throw InputError("--record-every", "would record more than 100000 states");
    for (long long k = 1; double(k) * args.record_every < args.horizon; ++k)
      o.output_times.push_back(double(k) * args.record_every);
  }
  std::unique_ptr<ResolvedLayer> layer;
  if (!fl::is_sphere_model(spec.model)) {
    layer = std::make_unique<ResolvedLayer>(resolve_layer(args.layer));
    if (layer->layer.rotary)
      throw InputError("--rope",
                       "the flow evolves a measure of particles, which have no positions: rotary "
                       "position embeddings are not defined on it");
    spec.layer = &layer->layer;
    spec.attention = layer->options;
    // The layers integrator's Euler step is the residual: X + step·MHA(N(X)).
    if (o.method == fl::Integrator::layers) spec.attention.residual = false;
  } else {
    // The sphere models have no layer: its options would be ignored, so they are refused (--sinkhorn
    // sets the Sinkformer model's updates).
    const LayerArgs& l = args.layer;
    const std::pair<bool, const char*> layer_options[] = {
        {!l.layer.empty(), "--layer"},
        {!l.random.empty(), "--random"},
        {l.causal, "--causal"},
        {l.residual, "--residual"},
        {l.prenorm != "none", "--prenorm"},
        {l.sinkhorn > 1 && spec.model != fl::Model::sphere_sinkhorn, "--sinkhorn"}};
    for (const auto& [given, name] : layer_options)
      if (given)
        throw InputError(name,
                         "is an option of the layer models (self-attention, cross-attention); the "
                         "sphere models have no layer");
    if (spec.model == fl::Model::sphere_sinkhorn)
      spec.sinkhorn_iterations = args.layer.sinkhorn > 1 ? args.layer.sinkhorn : 20;
  }
  const Matrix<double> X0 =
      args.particles.empty() ? initial_particles(args.init) : load_tokens(args.particles, "--particles");
  Vector<double> w;
  if (!args.weights.empty()) {
    // A vector of n weights: 1-D (as --help says and as wasserstein's weights are), or n x 1 / 1 x n.
    const io::Array a = load_array(args.weights);
    if (a.shape.size() != 1 && !(a.shape.size() == 2 && (a.shape[0] == 1 || a.shape[1] == 1)))
      throw InputError(a.source,
                       "weights must be a vector (n, n x 1 or 1 x n), got shape " + io::shape_repr(a.shape));
    io::require_finite(a);
    w = a.vector();
  }
  if (spec.model == fl::Model::cross_attention) {
    if (args.context.empty()) throw InputError("--context", "is needed for the cross-attention model");
    spec.context = load_tokens(args.context, "--context", X0.cols());
  } else if (!args.context.empty()) {
    throw InputError("--context", "is used only by the cross-attention model");
  }
  validate_flow(spec, X0, w, o, args);
  const Vector<double> weights = w.size() ? w : Vector<double>::Constant(X0.rows(), 1.0 / double(X0.rows()));
  const bool exact = args.w2 == "exact" || (args.w2 == "auto" && X0.rows() <= args.exact_limit);
  const bool want_w2 = args.w2 != "none";

  // The second initial measure is built (and its errors reported) before either flow runs.
  const Matrix<double> Y0 = args.perturb_given ? perturbed_particles(X0, w, args.perturb, args.perturb_seed,
                                                                     fl::is_sphere_model(spec.model))
                                               : Matrix<double>();
  const fl::Trajectory tr = fl::integrate(spec, X0, w, o);
  std::vector<Observation> obs;
  for (std::size_t k = 0; k < tr.times.size(); ++k) {
    Observation ob;
    ob.time = tr.times[k];
    ob.energy = fl::interaction_energy(tr.states[k], weights, spec.beta, spec.reduce);
    const fl::PairStatistics ps = fl::pair_statistics(tr.states[k], args.cluster_radius, args.threads);
    ob.clusters = ps.clusters;
    ob.min_inner = ps.min_inner;
    ob.max_inner = ps.max_inner;
    if (want_w2 && k > 0) {
      ob.w2_initial = w2(tr.states[k], tr.states[0], weights, exact, args.w2_epsilon, args.threads);
      ob.w2_previous =
          k == 1 ? ob.w2_initial
                 : w2(tr.states[k], tr.states[k - 1], weights, exact, args.w2_epsilon, args.threads);
    } else if (want_w2) {
      ob.w2_initial = ob.w2_previous = 0;
    }
    obs.push_back(ob);
  }
  // A non-finite observable comes from the input (particles or --beta too large for the double range):
  // refused before anything is written.
  for (const Observation& ob : obs)
    if (!std::isfinite(ob.energy) || !std::isfinite(ob.min_inner) || !std::isfinite(ob.max_inner))
      throw InputError(fl::is_sphere_model(spec.model) ? "--beta"  // unit particles: beta is the cause
                       : args.particles.empty()        ? "--init"
                                                       : args.particles,
                       "the interaction energy or the inner products at t = " + number(ob.time) +
                           " are not finite doubles (beta <x_i, x_j> leaves the double range): rescale "
                           "the particles or lower --beta");
  std::unique_ptr<Stability> stability;
  if (args.perturb_given) {
    const fl::Trajectory ty = fl::integrate(spec, Y0, w, o);
    std::function<double(const Matrix<double>&, const Matrix<double>&)> w2_between;
    if (want_w2)
      w2_between = [&](const Matrix<double>& X, const Matrix<double>& Y) {
        return w2(X, Y, weights, exact, args.w2_epsilon, args.threads);
      };
    stability = std::make_unique<Stability>(
        compare_trajectories(spec, tr, ty, w, args.perturb, args.perturb_seed, w2_between));
  }
  const std::string w2_label = !want_w2 ? "not computed"
                               : exact  ? "estimate (exact network simplex in floating point)"
                                        : "estimate (sqrt of the debiased Sinkhorn divergence, epsilon " +
                                             number(args.w2_epsilon) + ")";

  nlohmann::json j{{"model", fl::to_string(spec.model)},
                   {"beta", spec.beta},
                   {"n", X0.rows()},
                   {"d", X0.cols()},
                   {"integrator", fl::to_string(o.method)},
                   {"step", o.step},
                   {"horizon", o.horizon},
                   {"status", fl::to_string(tr.status)},
                   {"steps", tr.steps},
                   {"rejected_steps", tr.rejected},
                   {"field_evaluations", tr.field_evaluations},
                   {"cluster_radius", args.cluster_radius},
                   {"certified", false},
                   {"labels",
                    {{"energy", "estimate (double precision)"},
                     {"clusters", "estimate (threshold graph on computed distances)"},
                     {"inner_products", "estimate (double precision)"},
                     {"w2", w2_label}}}};
  if (o.method == fl::Integrator::dopri5) {
    j["rtol"] = o.rtol;
    j["atol"] = o.atol;
    j["max_error_ratio"] = tr.max_error_ratio;
  }
  if (layer) j["layer"] = describe(*layer);
  nlohmann::json rows = nlohmann::json::array();
  for (const Observation& ob : obs)
    rows.push_back({{"t", ob.time},
                    {"energy", number_or_null(ob.energy)},
                    {"clusters", ob.clusters},
                    {"min_inner", ob.min_inner},
                    {"max_inner", ob.max_inner},
                    {"w2_to_initial", number_or_null(ob.w2_initial)},
                    {"w2_to_previous", number_or_null(ob.w2_previous)}});
  j["observables"] = rows;
  if (stability) {
    j["stability"] = to_json(*stability, w2_label);
    j["certified_keys"] =
        "the observables are estimates; the keys of stability whose names contain 'certified' are certified";
  }

  if (!args.out.empty()) {
    // Staged beside DIR under a short name (DIR + ".partial" would exceed the file-name limit for a name of
    // 248 bytes or more), and removed if anything fails before the rename.
    const std::filesystem::path dir(args.out);
    const std::filesystem::path partial =
        (dir.has_parent_path() ? dir.parent_path() : ".") /
        (io::temporary_prefix(dir) + "partial-" + std::to_string(::getpid()));
    struct Staging {
      std::filesystem::path path;
      bool renamed = false;
      ~Staging() {
        std::error_code ec;
        if (!renamed) std::filesystem::remove_all(path, ec);
      }
    } staging{partial};
    std::error_code ec;
    std::filesystem::remove_all(partial, ec);  // a stale one of a crashed run that had this process id
    std::filesystem::create_directories(partial / "states", ec);
    if (ec)
      throw InputError("--out", "cannot create " + regatta::quoted(partial.string()) + ": " + ec.message());
    io::write_json(partial / "flow.json", j);
    std::ofstream csv(partial / "observables.csv");
    csv << "t,energy,clusters,min_inner,max_inner,w2_to_initial,w2_to_previous\n" << std::setprecision(17);
    for (const Observation& ob : obs)
      csv << ob.time << "," << ob.energy << "," << ob.clusters << "," << ob.min_inner << "," << ob.max_inner
          << "," << ob.w2_initial << "," << ob.w2_previous << "\n";
    csv.close();
    for (std::size_t k = 0; k < tr.states.size(); ++k) {
      std::ostringstream name;
      name << "state_" << std::setw(5) << std::setfill('0') << k << ".npy";
      io::write_npy(partial / "states" / name.str(), tr.states[k]);
    }
    io::write_npy(partial / "final.npy", tr.states.back());
    if (stability) write_csv((partial / "stability.csv").string(), *stability);
    if (args.plot) {
      FlowPlotData data;
      data.times = tr.times;
      data.states = tr.states;
      data.model = fl::to_string(spec.model);
      data.beta = spec.beta;
      for (const Observation& ob : obs) {
        data.energy.push_back(ob.energy);
        data.clusters.push_back(double(ob.clusters));
        data.w2_initial.push_back(ob.w2_initial);
      }
      if (stability)
        for (const StabilityRow& row : stability->rows) {
          data.stability_times.push_back(row.time);
          data.stability_distance.push_back(row.index_distance);
          data.stability_bound.push_back(row.bound);
        }
      const std::string problem = write_flow_plots(partial, data);
      if (!problem.empty()) std::cerr << "regatta flow: plots not rendered: " << problem << "\n";
    }
    std::filesystem::rename(partial, dir, ec);
    if (ec)
      throw InputError("--out",
                       "cannot move the results into " + regatta::quoted(dir.string()) + ": " + ec.message());
    staging.renamed = true;
  }

  if (args.json) {
    std::cout << json_text(j) << "\n";
  } else {
    std::cout << "model      " << fl::to_string(spec.model) << ", beta " << number(spec.beta) << ", n "
              << X0.rows() << ", d " << X0.cols() << (layer ? ", layer " + describe(*layer) : "") << "\n"
              << "integrator " << fl::to_string(o.method) << ", step " << number(o.step) << ", horizon "
              << number(o.horizon) << ": " << fl::to_string(tr.status) << ", " << tr.steps << " steps";
    if (o.method == fl::Integrator::dopri5)
      std::cout << " (" << tr.rejected << " rejected; local error per step <= atol + rtol |x|, largest ratio "
                << number(tr.max_error_ratio, 3) << ")";
    std::cout << "\nall numbers below are estimates (double precision); W2: " << w2_label << "\n\n"
              << std::setw(10) << "t" << std::setw(18) << "energy" << std::setw(10) << "clusters"
              << std::setw(14) << "min <xi,xj>" << std::setw(14) << "max <xi,xj>" << std::setw(14)
              << "W2(mu_t,mu_0)" << std::setw(14) << "W2(mu_t,prev)\n";
    for (const Observation& ob : obs)
      std::cout << std::setw(10) << number(ob.time, 6) << std::setw(18) << number(ob.energy, 12)
                << std::setw(10) << ob.clusters << std::setw(14) << number(ob.min_inner, 6) << std::setw(14)
                << number(ob.max_inner, 6) << std::setw(14) << number(ob.w2_initial, 6) << std::setw(14)
                << number(ob.w2_previous, 6) << "\n";
    const bool w2_missing =
        want_w2 && !exact && std::any_of(obs.begin(), obs.end(), [](const Observation& ob) {
          return std::isnan(ob.w2_initial) || std::isnan(ob.w2_previous);
        });
    if (w2_missing)
      std::cout << "\nW2 none: the Sinkhorn iteration did not converge within its iterations at --w2-epsilon "
                << number(args.w2_epsilon) << " (raise it)\n";
    if (stability) print_table(std::cout, *stability, w2_label);
    if (!args.out.empty()) std::cout << "\nwritten    " << args.out << "\n";
  }
  result = tr.status == fl::FlowStatus::completed ? exit_ok : exit_check_failed;
  // A certified bound that overflowed is printed as it is (inf, null in JSON) and is no success.
  if (stability && stability->lipschitz.available) {
    bool finite = std::isfinite(stability->lipschitz.constant.upper());
    for (const StabilityRow& row : stability->rows) finite = finite && !(std::isinf(row.bound));
    if (!finite) {
      std::cerr
          << "regatta flow: the certified Gronwall bound is not a finite double (the Lipschitz constant "
             "of the field, "
          << stability->lipschitz.formula << ", overflows at this --beta)\n";
      result = exit_check_failed;
    }
  }
}

}  // namespace

void add_flow_command(CLI::App& app, int& result) {
  auto args = std::make_shared<FlowArgs>();
  auto* cmd = app.add_subcommand("flow", "Attention dynamics of a measure: particles, clusters, energy, W2");
  cmd->add_option(
      "--model", args->model,
      "sphere (normalised, Geshkovski et al.), sphere-unnormalized, sphere-sinkhorn (Sinkformer), "
      "self-attention, cross-attention (the last two need --layer/--random)");
  cmd->add_option("--beta", args->beta, "Inverse temperature of the sphere models (>= 0; default 1)");
  cmd->add_option("--particles", args->particles,
                  "Initial particles (n x d): FILE.npy / .npz[:NAME] / .safetensors");
  cmd->add_option("--init", args->init,
                  "Initial measure instead of --particles: sphere,n=N,d=D,seed=S | circle,n=N | "
                  "gaussian,n=N,d=D,sigma=S,seed=S");
  cmd->add_option("--weights", args->weights, "Particle weights (n; >= 0, sum 1); default uniform");
  cmd->add_option("--context", args->context, "Context measure (m x d) for cross-attention");
  add_layer_options(cmd, args->layer);
  cmd->add_option("--integrator", args->integrator,
                  "rk4 (fixed step), dopri5 (adaptive 5(4), local error control), layers (X + step*V(X))");
  cmd->add_option("--step", args->step, "Step (rk4, layers) or first trial step (dopri5); > 0");
  cmd->add_option("--horizon", args->horizon, "Final time T >= 0");
  cmd->add_option("--max-steps", args->max_steps, "Largest number of steps (default 100000)");
  cmd->add_option("--rtol", args->rtol, "dopri5 relative tolerance (default 1e-6)");
  cmd->add_option("--atol", args->atol, "dopri5 absolute tolerance (default 1e-9)");
  cmd->add_option("--record-every", args->record_every, "Record the state every DT (default: only 0 and T)");
  cmd->add_option("--cluster-radius", args->cluster_radius, "Distance threshold of the cluster graph (1e-2)");
  cmd->add_option("--w2", args->w2,
                  "W2 observables: auto (exact up to 1000 particles), exact, sinkhorn, none");
  cmd->add_option("--w2-epsilon", args->w2_epsilon, "Sinkhorn epsilon for the W2 estimate (default 1e-3)");
  cmd->add_option("--threads", args->threads, "Threads (0: OpenMP default)")->check(CLI::Range(0, 1024));
  cmd->add_option("--out", args->out,
                  "Write flow.json, observables.csv, states/*.npy, final.npy into DIR (new)");
  cmd->add_flag("--plot", args->plot, "With --out: gnuplot figures in DIR/plots");
  cmd->add_flag("--json", args->json, "Machine-readable output");
  cmd->add_option_function<double>(
      "--perturb",
      [args](double v) {
        args->perturb = v;
        args->perturb_given = true;
      },
      "Also run the flow from the initial particles moved by EPS (a-weighted l2, Gaussian direction; "
      "projected back onto the sphere for the sphere models) and print the distance between the two flows "
      "(estimate) next to the certified Gronwall bound e^(L t) d0 (sphere models)");
  cmd->add_option("--perturb-seed", args->perturb_seed, "Seed of the --perturb direction (default 1)")
      ->check(seed_value());
  cmd->callback([args, &result] { run(*args, result); });
}

}  // namespace regatta::cli
