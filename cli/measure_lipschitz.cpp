// regatta measure-lipschitz (--layer FILE --heads H | --random SPEC) --n N [--m M] [--radius R]
// [--query-radius R'] [--cross query|context] [--p P] [--certify] [--precision BITS] [--budget SECONDS]
// [--evaluations N] [--restarts K] [--seed S] [--witness PREFIX] [--json]: the largest measure-level ratio
// W_p(F mu, F nu) / W_p(mu, nu) found on empirical measures (self-attention, or cross-attention in the query
// or in the context), bracketed by the matching mean-field bound (operators/lipschitz/measure_ratio.hpp).
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/io/file_bytes.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/operators/lipschitz/measure_ratio.hpp>
#include "command.hpp"
#include "json_output.hpp"
#include "layer_options.hpp"
#include "numbers.hpp"
#include "report/progress.hpp"
#include "search_options.hpp"
#include "validate.hpp"

namespace regatta::cli {

namespace {

struct MeasureArgs {
  LayerArgs layer;
  std::int64_t n = 0;
  std::int64_t m = 0;
  double radius = 0, query_radius = 0;
  bool radius_given = false, query_radius_given = false;
  std::string cross;
  double p = 1;
  SearchArgs search{.evaluations = 4000, .witness = "measure_witness"};
};

void run(const MeasureArgs& args, int& result) {
  const ResolvedLayer resolved = resolve_layer(args.layer);
  if (args.n < 1) throw InputError("--n", "is required (atoms per measure >= 1)");
  lip::MeasureSearchOptions s;
  if (args.cross == "self")
    throw InputError("--cross", "must be query or context (omit it for self-attention)");
  s.argument = args.cross.empty() ? lip::MeasureArgument::self : lip::parse_measure_argument(args.cross);
  s.n = args.n;
  s.m = args.m;
  if (args.m != 0 && s.argument == lip::MeasureArgument::self)
    throw InputError("--m", "applies to cross-attention only (--cross query|context)");
  check_sequence_memory(args.m != 0 ? "--n/--m" : "--n", resolved, double(args.n),
                        double(args.m != 0 ? args.m : args.n));
  if (args.radius_given) {
    check_positive("--radius", args.radius);
    s.radius = args.radius;
  }
  if (args.query_radius_given) {
    check_positive("--query-radius", args.query_radius);
    if (s.argument != lip::MeasureArgument::context)
      throw InputError("--query-radius", "applies to --cross context only");
    s.query_radius = args.query_radius;
  }
  s.p = args.p;
  s.budget_seconds = args.search.budget;
  s.max_evaluations = args.search.evaluations;
  s.random_starts = args.search.restarts;
  s.seed = args.search.seed;
  s.progress = [](const std::string& line) { report::progress_line("measure-lipschitz", line); };
  check_output_folder("--witness", args.search.witness);
  // Every witness file checked before the search, so that a failure leaves none written (the shared
  // measure is written in cross-attention only).
  for (const char* suffix : {"_mu.npy", "_nu.npy", "_shared.npy"}) {
    if (std::string(suffix) == "_shared.npy" && args.cross.empty()) continue;
    check_name_length("--witness", args.search.witness + suffix);
    io::check_replaceable(args.search.witness + suffix);
  }

  const lip::MeasureBracket b = lip::compute_measure_bracket(resolved.layer, resolved.options, s,
                                                             args.search.certify, args.search.precision);
  nlohmann::json files = nullptr;
  if (b.witness.mu.size() != 0) {
    files = {{"mu", args.search.witness + "_mu.npy"}, {"nu", args.search.witness + "_nu.npy"}};
    io::write_npy(args.search.witness + "_mu.npy", b.witness.mu);
    io::write_npy(args.search.witness + "_nu.npy", b.witness.nu);
    if (b.witness.shared.size() != 0) {
      files["shared"] = args.search.witness + "_shared.npy";
      io::write_npy(args.search.witness + "_shared.npy", b.witness.shared);
    }
  }
  const char* lower_kind = b.lower_certified ? "certified" : "estimate";
  const char* upper_kind = !std::isfinite(b.upper) ? "none" : b.upper_certified ? "certified" : "estimate";
  const std::string argument = lip::to_string(s.argument);

  if (args.search.json) {
    const nlohmann::json out = {{"lower", b.lower},
                                {"lower_kind", lower_kind},
                                {"upper", number_or_null(b.upper)},
                                {"upper_kind", upper_kind},
                                {"ratio", b.ratio},
                                {"certified", b.certified},
                                {"lower_estimate", b.lower_estimate},
                                {"upper_estimate", number_or_null(b.upper_estimate)},
                                {"lower_certified", optional_number(b.lower_certified)},
                                {"upper_certified", optional_number(b.upper_certified)},
                                {"argument", argument},
                                {"p", s.p},
                                {"n", s.n},
                                {"m", s.argument == lip::MeasureArgument::self ? 0 : (s.m > 0 ? s.m : s.n)},
                                {"radius", optional_number(s.radius)},
                                {"query_radius", optional_number(s.query_radius)},
                                {"bound_name", b.bound_name},
                                {"bound_description", b.bound_description},
                                {"refused", b.refused},
                                {"witness", files},
                                {"witness_origin", b.witness.origin},
                                {"numerator", b.witness.numerator},
                                {"denominator", b.witness.denominator},
                                {"evaluations", b.evaluations},
                                {"stopped_by_budget", b.stopped_by_budget},
                                {"stopped_by_evaluations", b.stopped_by_evaluations},
                                {"seed", args.search.seed},
                                {"precision_bits", args.search.precision},
                                {"note", b.note}};
    std::cout << json_text(out) << "\n";
  } else {
    std::cout << "layer      " << describe(resolved) << "\n"
              << "ratio of   W_" << number(s.p) << " (" << argument
              << (argument == "self" ? "-attention" : "") << "), n = " << s.n
              << ", R = " << (s.radius ? number(*s.radius) : std::string("(none)")) << "\n"
              << "lower      " << lower_number(b.lower, b.lower_certified.has_value()) << "  (" << lower_kind
              << "; W_p(F mu, F nu) = " << number(b.witness.numerator)
              << ", W_p(mu, nu) = " << number(b.witness.denominator) << ", from " << b.witness.origin << ")\n"
              << "upper      " << upper_number(b.upper, b.upper_certified.has_value()) << "  ("
              << (std::isfinite(b.upper) ? std::string(upper_kind) + ", " + b.bound_name
                                         : b.bound_name + " refused: " + b.refused)
              << ")\n"
              << "ratio      " << number(b.ratio) << "\n"
              << "certified  " << (b.certified ? "yes" : "no") << "\n";
    if (!files.is_null()) {
      std::cout << "witness    " << files["mu"].get<std::string>() << ", " << files["nu"].get<std::string>();
      if (files.contains("shared")) std::cout << ", " << files["shared"].get<std::string>();
      std::cout << "\n";
    }
    if (!b.note.empty()) std::cout << "note       " << b.note << "\n";
    if (b.stopped_by_budget) std::cout << "search     stopped by --budget\n";
    if (b.stopped_by_evaluations) std::cout << "search     stopped by --evaluations\n";
  }
  if (b.refused.empty() && !std::isfinite(b.upper)) {
    // Named as given: the layer's file (or --random) and --radius, the scales the bound grows with.
    std::cerr << "regatta: " << layer_name(args.layer) << (args.radius_given ? ", --radius" : "")
              << ": the bound " << b.bound_name
              << " is not a finite double (the layer's weights or the radius are too large for the double "
                 "range)\n";
    result = exit_check_failed;
    return;
  }
  result = exit_ok;
}

}  // namespace

void add_measure_lipschitz_command(CLI::App& app, int& result) {
  auto args = std::make_shared<MeasureArgs>();
  auto* cmd = app.add_subcommand(
      "measure-lipschitz", "Measure-level Lipschitz ratio search W_p(F mu, F nu)/W_p(mu, nu), self or cross");
  add_layer_options(cmd, args->layer);
  cmd->add_option("--n", args->n, "Atoms of each varied measure (required)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 16));
  cmd->add_option("--m", args->m, "Atoms of the shared measure in cross-attention (default: --n)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 16));
  cmd->add_option_function<double>(
         "--radius",
         [args](double v) {
           args->radius = v;
           args->radius_given = true;
         },
         "Atoms (context atoms for --cross query) in the ball B_R")
      ->check(positive());
  cmd->add_option_function<double>(
         "--query-radius",
         [args](double v) {
           args->query_radius = v;
           args->query_radius_given = true;
         },
         "--cross context: queries in B_R' (default: --radius)")
      ->check(positive());
  cmd->add_option("--cross", args->cross,
                  "Cross-attention, varying the query or the context measure (default: self-attention)");
  cmd->add_option("--p", args->p, "Wasserstein exponent p >= 1 (default 1)")->check(finite_in(1, 1e6));
  add_search_options(
      cmd, args->search, "Certify the witness ratio and the bound in interval arithmetic",
      "Ratio evaluations at most (default 4000; reproducible, unlike --budget)",
      "Prefix of the witness files PREFIX_mu.npy, PREFIX_nu.npy [, PREFIX_shared.npy]; default "
      "measure_witness");
  cmd->callback([args, &result] { run(*args, result); });
}

}  // namespace regatta::cli
