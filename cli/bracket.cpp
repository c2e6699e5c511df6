// regatta bracket (--layer FILE --heads H | --random SPEC) --n N [--radius R] [--norm 2|inf] [--certify]
// [--precision BITS] [--budget SECONDS] [--evaluations N] [--restarts K] [--seed S] [--witness FILE]
// [--json]: [lower, upper] for the Lipschitz constant of a layer on sequences of length n — lower from the
// adversarial search (a witness input saved as .npy), upper the best applicable theoretical bound — and their
// ratio; with --certify both ends re-evaluated in interval arithmetic (operators/lipschitz/bracket.hpp).
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
#include <regatta/operators/lipschitz/bracket.hpp>
#include "command.hpp"
#include "json_output.hpp"
#include "layer_options.hpp"
#include "numbers.hpp"
#include "report/progress.hpp"
#include "search_options.hpp"
#include "validate.hpp"

namespace regatta::cli {

namespace {

struct BracketArgs {
  LayerArgs layer;
  std::int64_t n = 0;
  double radius = 0;
  bool radius_given = false;
  std::string norm = "2";
  SearchArgs search{.evaluations = 20000, .witness = "bracket_witness.npy"};
};

/// FILE.npy -> FILE_direction.npy (any other name: name + "_direction.npy").
std::string direction_path(const std::string& witness) {
  const std::string suffix = ".npy";
  const bool npy = witness.size() > suffix.size() && witness.ends_with(suffix);
  return (npy ? witness.substr(0, witness.size() - suffix.size()) : witness) + "_direction.npy";
}

void run(const BracketArgs& args, int& result) {
  const ResolvedLayer resolved = resolve_layer(args.layer);
  if (args.n < 1) throw InputError("--n", "is required (sequence length >= 1)");
  check_sequence_memory("--n", resolved, double(args.n), double(args.n));
  lip::BracketOptions options;
  options.norm = lip::parse_norm(args.norm, "--norm");
  options.n = args.n;
  if (args.radius_given) {
    check_positive("--radius", args.radius);
    options.radius = args.radius;
  }
  options.certify = args.search.certify;
  options.precision_bits = args.search.precision;
  options.search.budget_seconds = args.search.budget;
  options.search.max_evaluations = args.search.evaluations;
  options.search.random_starts = args.search.restarts;
  options.search.seed = args.search.seed;
  options.search.progress = [](const std::string& line) { report::progress_line("bracket", line); };
  check_output_folder("--witness", args.search.witness);
  // Both files checked before the search, so that a failure leaves neither written.
  io::check_replaceable(args.search.witness);
  check_name_length("--witness", direction_path(args.search.witness));
  io::check_replaceable(direction_path(args.search.witness));

  const lip::Bracket b = lip::compute_bracket(resolved.layer, resolved.options, options);
  std::string witness_file, direction_file;
  if (b.witness.input.size() != 0) {
    witness_file = args.search.witness;
    direction_file = direction_path(args.search.witness);
    io::write_npy(witness_file, b.witness.input);
    io::write_npy(direction_file, b.witness.direction);
  }
  const auto kind = [&](bool certified) { return certified ? "certified" : "estimate"; };
  const char* lower_kind = kind(b.lower_certified.has_value());
  const char* upper_kind = kind(b.upper_certified.has_value());

  if (args.search.json) {
    nlohmann::json refused = nlohmann::json::array();
    for (const auto& r : b.refused) refused.push_back(r);
    const nlohmann::json out = {
        {"lower", b.lower},
        {"lower_kind", lower_kind},
        {"upper", number_or_null(b.upper)},
        {"upper_kind", std::isfinite(b.upper) ? upper_kind : "none"},
        {"ratio", b.ratio},
        {"certified", b.certified},
        {"lower_estimate", b.lower_estimate},
        {"upper_estimate", number_or_null(b.upper_estimate)},
        {"lower_certified", optional_number(b.lower_certified)},
        {"upper_certified", optional_number(b.upper_certified)},
        {"norm", lip::to_string(b.norm)},
        {"n", b.n},
        {"radius", optional_number(b.radius)},
        {"bound_name", b.bound_name.empty() ? nlohmann::json(nullptr) : nlohmann::json(b.bound_name)},
        {"bound_description", b.bound_description},
        {"refused", refused},
        {"witness", witness_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(witness_file)},
        {"witness_direction",
         direction_file.empty() ? nlohmann::json(nullptr) : nlohmann::json(direction_file)},
        {"witness_row", b.witness.row >= 0 ? nlohmann::json(b.witness.row) : nlohmann::json(nullptr)},
        {"witness_origin", b.witness.origin},
        {"all_rows", b.all_rows},
        {"evaluations", b.evaluations},
        {"stopped_by_budget", b.stopped_by_budget},
        {"stopped_by_evaluations", b.stopped_by_evaluations},
        {"seed", args.search.seed},
        {"precision_bits", args.search.precision},
        {"note", b.note},
        {"region_upper_certified", optional_number(b.region_upper)},
        {"region_note", b.region_note}};
    std::cout << json_text(out) << "\n";
  } else {
    const std::string norm = lip::to_string(b.norm);
    std::cout << "layer      " << describe(resolved) << "\n"
              << "setting    n = " << b.n
              << ", R = " << (b.radius ? number(*b.radius) : std::string("(none)")) << ", norm " << norm
              << "\n"
              << "lower      " << lower_number(b.lower, b.lower_certified.has_value()) << "  (" << lower_kind
              << "; witness from " << b.witness.origin << ")\n"
              << "upper      " << upper_number(b.upper, b.upper_certified.has_value()) << "  ("
              << (std::isfinite(b.upper) ? std::string(upper_kind) + ", " + b.bound_name
                                         : std::string("no applicable bound"))
              << ")\n"
              << "ratio      " << number(b.ratio) << "\n"
              << "certified  " << (b.certified ? "yes" : "no") << "\n";
    if (args.search.certify)
      std::cout << "estimates  lower " << number(b.lower_estimate) << ", upper " << number(b.upper_estimate)
                << " (double)\n";
    if (!witness_file.empty())
      std::cout << "witness    " << witness_file << " (X), " << direction_file
                << (b.norm == lip::Norm::two ? " (unit direction v)"
                                             : " (signs of row " + std::to_string(b.witness.row) + ")")
                << "\n";
    for (const auto& r : b.refused) std::cout << "refused    " << r << "\n";
    if (!b.note.empty()) std::cout << "note       " << b.note << "\n";
    if (!b.region_note.empty()) std::cout << "region     " << b.region_note << "\n";
    if (b.stopped_by_budget) std::cout << "search     stopped by --budget\n";
    if (b.stopped_by_evaluations) std::cout << "search     stopped by --evaluations\n";
  }
  // An applicable bound whose value left the double range bounds nothing: exit 1 with the reason.
  if (!b.bound_name.empty() && !std::isfinite(b.upper)) {
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

void add_bracket_command(CLI::App& app, int& result) {
  auto args = std::make_shared<BracketArgs>();
  auto* cmd = app.add_subcommand(
      "bracket", "[lower, upper] for a layer's Lipschitz constant: adversarial witness and best bound");
  add_layer_options(cmd, args->layer);
  cmd->add_option("--n", args->n, "Sequence length (required)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 20));
  cmd->add_option_function<double>(
         "--radius",
         [args](double v) {
           args->radius = v;
           args->radius_given = true;
         },
         "Every token in the Euclidean ball B_R (search domain and bounds); default: unconstrained")
      ->check(positive());
  cmd->add_option("--norm", args->norm, "2 (Frobenius, default) or inf (max entry)");
  add_search_options(cmd, args->search, "Re-evaluate both ends in interval arithmetic",
                     "Linearisations at most (default 20000; reproducible, unlike --budget)",
                     "Where to save the witness X (.npy; the direction goes to *_direction.npy); default "
                     "bracket_witness.npy");
  cmd->callback([args, &result] { run(*args, result); });
}

}  // namespace regatta::cli
