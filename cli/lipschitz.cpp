// regatta lipschitz (--layer FILE --heads H | --random SPEC | --kim-unit) --n N (--box R | --ball R)
// [--norm 2|inf] [--gap G] [--symmetry all|none|LIST] [--batch B] [--max-boxes M] [--time-limit S]
// [--max-steps K] [--checkpoint FILE] [--checkpoint-every S] [--resume FILE] [--json]:
// the certified Lipschitz constant of one self-attention block on a bounded domain, to a relative gap, by
// best-first branch and bound (operators/lipschitz/branch_bound.hpp); under `mpirun -n K` the batches are
// evaluated by K processes (lipschitz_mpi.hpp) with the same result.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include <boost/crc.hpp>
#include <nlohmann/json.hpp>

#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/io/file_bytes.hpp>
#include <regatta/core/io/json_file.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/operators/lipschitz/bracket.hpp>
#include <regatta/operators/lipschitz/branch_bound.hpp>
#include "command.hpp"
#include "json_output.hpp"
#include "layer_options.hpp"
#include "lipschitz_mpi.hpp"
#include "numbers.hpp"
#include "report/progress.hpp"
#include "task_runner.hpp"
#include "validate.hpp"

namespace regatta::cli {

namespace mpi {

int launched_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"}) {
    const char* v = std::getenv(name);
    if (v == nullptr) continue;
    char* end = nullptr;
    const long size = std::strtol(v, &end, 10);
    if (end != v && size >= 1) return int(size);
  }
  return 1;
}

#ifndef REGATTA_HAVE_MPI
bool available() { return false; }
#endif

}  // namespace mpi

namespace {

constexpr const char* checkpoint_format = "regatta-lipschitz-checkpoint-2";

struct LipschitzArgs {
  LayerArgs layer;
  bool kim_unit = false;
  std::int64_t n = 0;
  std::optional<double> box, ball;
  std::string norm = "2";
  double gap = 1e-2;
  std::string symmetry = "all";
  int batch = 64;
  std::int64_t max_boxes = 0;
  double time_limit = 0;
  std::int64_t max_steps = 0;
  std::string checkpoint, resume;
  double checkpoint_every = 60;
  bool json = false;
};

lip::Symmetries parse_symmetries(const std::string& text) {
  lip::Symmetries s{false, false, false, false};
  if (text == "all") return lip::Symmetries{};
  if (text == "none") return s;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item == "permutation")
      s.permutation = true;
    else if (item == "translation")
      s.translation = true;
    else if (item == "sign")
      s.sign = true;
    else if (item == "rotation")
      s.rotation = true;
    else
      throw InputError("--symmetry",
                       "unknown reduction '" + item +
                           "' (all, none, or a list of permutation, translation, sign, rotation)");
  }
  return s;
}

std::string describe(const lip::Symmetries& s) {
  std::string out;
  for (const auto& [on, name] :
       {std::pair{s.permutation, "permutation"}, std::pair{s.translation, "translation"},
        std::pair{s.sign, "sign"}, std::pair{s.rotation, "rotation"}})
    if (on) out += (out.empty() ? "" : ", ") + std::string(name);
  return out.empty() ? "none" : out;
}

/// CRC-32 of the state's compact text: catches a checkpoint edited or damaged after it was written (not a
/// forgery that recomputes it; docs/branch-and-bound.md, "Checkpoints").
std::uint32_t state_checksum(const nlohmann::json& state) {
  const std::string text = state.dump();
  boost::crc_32_type crc;
  crc.process_bytes(text.data(), text.size());
  return crc.checksum();
}

nlohmann::json checkpoint_json(const lip::BranchBound& problem, const lip::BnbState& state) {
  nlohmann::json j = {{"format", checkpoint_format},
                      {"problem", problem.problem_json()},
                      {"state", lip::state_to_json(state)}};
  j["checksum"] = state_checksum(j.at("state"));
  return j;
}

lip::BnbState read_resume(const lip::BranchBound& problem, const std::string& file) {
  const nlohmann::json j = io::read_json(file);
  if (!j.is_object() || !j.contains("format") || j.at("format") != checkpoint_format)
    throw InputError(file,
                     std::string("is not a regatta lipschitz checkpoint (format ") + checkpoint_format + ")");
  if (const auto why =
          lip::BranchBound::describe_mismatch(problem.problem_json(), j.value("problem", nlohmann::json())))
    throw InputError(file, "was written for another problem: " + *why);
  if (!j.contains("state")) throw InputError(file, "has no 'state'");
  if (!j.contains("checksum") || !j.at("checksum").is_number_unsigned() ||
      j.at("checksum").get<std::uint64_t>() != state_checksum(j.at("state")))
    throw InputError(file,
                     "its 'state' does not match its checksum: the file was changed after it was written");
  lip::BnbState state = lip::state_from_json(j.at("state"), problem.dimension(), file);
  problem.check_resumed(state, file);
  return state;
}

/// The published bounds that hold on the domain (tokens in B_R: R√d for the box), certified.
std::vector<lip::BoundReport> published_bounds(const ResolvedLayer& r, const lip::BnbDomain& domain,
                                               lip::Norm norm) {
  lip::BoundSetting setting;
  setting.n = domain.n;
  const double token_radius = domain.shape == lip::DomainShape::ball
                                  ? domain.radius
                                  : (interval64(domain.radius) * sqrt(interval64(double(r.layer.d)))).upper();
  setting.radius = token_radius;
  std::vector<lip::BoundReport> out;
  for (const lip::BoundReport& b : lip::theoretical_bounds(r.layer, r.options, setting, norm))
    if (b.applies && lip::is_sequence_bound(b.bound)) out.push_back(b);
  return out;
}

void run(const LipschitzArgs& args, int& result) {
  const auto start = std::chrono::steady_clock::now();
  const int launched = process_count();

  LayerArgs layer_args = args.layer;
  if (args.kim_unit) {
    if (!args.layer.layer.empty() || !args.layer.random.empty())
      throw InputError("--kim-unit", "give one of --kim-unit, --layer or --random");
    layer_args.random = "d=1,heads=1";
    layer_args.kind = "l2";
  }
  ResolvedLayer resolved = resolve_layer(layer_args);
  if (args.kim_unit) {
    resolved.layer = lip::kim_unit_layer();
    resolved.source = "Kim et al. unit layer (W^Q = W^V = W^O = 1)";
  }
  if (args.n < 1) throw InputError("--n", "is required (sequence length >= 1)");
  if (args.box.has_value() == args.ball.has_value())
    throw InputError("--box/--ball",
                     "give exactly one domain: --box R ([-R, R]^(n x d)) or --ball R (||x_i|| <= R)");
  lip::BnbDomain domain;
  domain.shape = args.box ? lip::DomainShape::box : lip::DomainShape::ball;
  domain.radius = args.box ? *args.box : *args.ball;
  domain.n = args.n;
  lip::BnbOptions bnb;
  bnb.norm = lip::parse_norm(args.norm, "--norm");
  bnb.gap = args.gap;
  bnb.symmetries = parse_symmetries(args.symmetry);
  bnb.batch = args.batch;
  if (!args.checkpoint.empty()) check_output_folder("--checkpoint", args.checkpoint);
  // The library names the size limit after its argument ("n*d"): here it is --n.
  const lip::BranchBound problem = [&] {
    try {
      return lip::BranchBound(resolved.layer, resolved.options, domain, bnb);
    } catch (const InputError& e) {
      if (e.subject() != "n*d") throw;
      throw InputError("--n", "n*d " + e.problem());
    }
  }();

#ifdef REGATTA_HAVE_MPI
  const std::unique_ptr<mpi::Session> session = open_mpi_session(launched);
  if (session && session->rank() != 0) {
    mpi::worker(problem);
    result = exit_ok;
    return;
  }
  const int ranks = session ? session->size() : 1;
#else
  (void)launched;
  const int ranks = 1;
#endif

  lip::BnbState state;
  bool resumed = false;
  try {
    if (!args.resume.empty()) {
      state = read_resume(problem, args.resume);
      io::release_input(args.resume);  // --checkpoint may rewrite the file it resumed from
      resumed = true;
    } else {
      state = problem.initial_state();
    }
  } catch (...) {
#ifdef REGATTA_HAVE_MPI
    if (ranks > 1) mpi::stop_workers(ranks);
#endif
    throw;
  }

  auto last_checkpoint = std::chrono::steady_clock::now();
  std::string stopped_by;
  const auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const std::uint64_t first_step = state.steps;
  // The frontier lives in memory: a search that never prunes (enclosures that are not finite) would grow it
  // until the machine runs out, so it stops at half the available memory (about 64 + 16 n·d bytes a box).
  const std::uint64_t frontier_cap =
      available_memory_bytes() / 2 / (64 + 16 * std::uint64_t(problem.dimension()) + sizeof(lip::BnbBox));
  const auto should_stop = [&](const lip::BnbState& s) {
    if (s.frontier.size() >= frontier_cap)
      stopped_by = "memory (a frontier of " + std::to_string(s.frontier.size()) + " boxes)";
    if (args.max_steps > 0 && s.steps - first_step >= std::uint64_t(args.max_steps))
      stopped_by = "--max-steps";
    if (args.max_boxes > 0 && s.evaluated >= std::uint64_t(args.max_boxes)) stopped_by = "--max-boxes";
    if (args.time_limit > 0 && seconds() >= args.time_limit) stopped_by = "--time-limit";
    return !stopped_by.empty();
  };
  auto last_progress = std::chrono::steady_clock::now();
  const auto on_step = [&](const lip::BnbState& s) {
    const auto now = std::chrono::steady_clock::now();
    if (!args.checkpoint.empty() &&
        std::chrono::duration<double>(now - last_checkpoint).count() >= args.checkpoint_every) {
      io::write_json(args.checkpoint, checkpoint_json(problem, s));
      last_checkpoint = now;
    }
    if (std::chrono::duration<double>(now - last_progress).count() >= 5) {
      const lip::BnbBracket b = problem.bracket(s);
      report::progress_line("lipschitz", "[" + lower_number(b.lower, 6) + ", " + upper_number(b.upper, 6) +
                                             "] certified, " + std::to_string(s.evaluated) +
                                             " boxes, frontier " + std::to_string(s.frontier.size()));
      last_progress = now;
    }
  };
#ifdef REGATTA_HAVE_MPI
  if (ranks > 1)
    mpi::master(problem, state, should_stop, on_step, ranks);
  else
#endif
    lip::run_branch_bound(problem, state, should_stop, on_step);
  if (!args.checkpoint.empty()) io::write_json(args.checkpoint, checkpoint_json(problem, state));

  lip::BnbBracket b = problem.bracket(state);
  const std::vector<lip::BoundReport> bounds = published_bounds(resolved, domain, bnb.norm);
  // The upper end: the search's, or a published bound's certified evaluation where that is smaller (where
  // the region enclosures are not finite, e.g. LayerNorm over boxes that reach a token of zero spread).
  std::string upper_from = "largest region enclosure over the remaining boxes";
  for (const auto& r : bounds)
    if (std::isfinite(r.certified_upper) && r.certified_upper < b.upper) {
      b.upper = std::max(r.certified_upper, b.lower);
      upper_from = "published bound " + std::string(lip::info(r.bound).id) + ", certified evaluation";
    }
  const double relative = b.lower > 0 ? (b.upper - b.lower) / b.lower : std::nan("");
  const std::string domain_text =
      domain.shape == lip::DomainShape::box
          ? "box [-" + number(domain.radius) + ", " + number(domain.radius) + "]^(" +
                std::to_string(domain.n) + " x " + std::to_string(resolved.layer.d) + ")"
          : "ball ||x_i|| <= " + number(domain.radius) + " for each of " + std::to_string(domain.n) +
                " tokens" + (problem.polar() ? " (boxes in polar coordinates)" : "");
  if (args.json) {
    nlohmann::json jb = nlohmann::json::array();
    for (const auto& r : bounds)
      jb.push_back({{"id", lip::info(r.bound).id},
                    {"certified_upper", number_or_null(r.certified_upper)},
                    {"ratio_to_upper", number_or_null(r.certified_upper / b.upper)},
                    {"note", r.note}});
    const nlohmann::json out = {
        {"lower", b.lower},
        {"lower_kind", "certified"},
        {"upper", number_or_null(b.upper)},
        {"upper_kind", "certified"},
        {"upper_from", upper_from},
        {"relative_gap", number_or_null(relative)},
        {"requested_gap", args.gap},
        {"gap_reached", b.gap_reached},
        {"stopped_by", stopped_by.empty() ? nlohmann::json() : nlohmann::json(stopped_by)},
        {"norm", lip::to_string(bnb.norm)},
        {"domain", problem.problem_json().at("domain")},
        {"symmetries", describe(problem.symmetries())},
        {"witness", state.witness},
        {"boxes_evaluated", state.evaluated},
        {"frontier", state.frontier.size()},
        {"steps", state.steps},
        {"processes", ranks},
        {"resumed", resumed},
        {"seconds", seconds()},
        {"published_bounds", jb}};
    std::cout << json_text(out) << "\n";
  } else {
    std::cout << "layer      " << describe(resolved) << "\n"
              << "domain     " << domain_text << ", norm " << lip::to_string(bnb.norm) << "\n"
              << "symmetry   " << describe(problem.symmetries()) << "\n"
              << "lower      " << lower_number(b.lower) << "  (certified: ||J(X)|| at the witness)\n"
              << "upper      " << upper_number(b.upper) << "  (certified: " << upper_from << ")\n"
              << "gap        " << number(relative, 4) << " relative (requested " << number(args.gap) << "; "
              << (b.gap_reached ? "reached"
                                : "NOT reached, stopped by " +
                                      (stopped_by.empty() ? std::string("an unsplittable box") : stopped_by))
              << ")\n"
              << "search     " << state.evaluated << " boxes evaluated, " << state.frontier.size()
              << " in the frontier, " << state.steps << " batches, " << ranks << " process(es), "
              << number(seconds(), 4) << " s" << (resumed ? ", resumed from " + args.resume : "") << "\n";
    std::cout << "witness    X = [";
    for (std::size_t i = 0; i < state.witness.size(); ++i)
      std::cout << (i ? ", " : "") << number(state.witness[i], 17);
    std::cout << "] (row-major n x d)\n";
    for (const auto& r : bounds)
      std::cout << "bound      " << lip::info(r.bound).id << " <= " << upper_number(r.certified_upper, 6)
                << " (certified evaluation of the published form; " << number(r.certified_upper / b.upper, 4)
                << " x the certified upper end)\n";
    if (!args.checkpoint.empty()) std::cout << "checkpoint " << args.checkpoint << "\n";
  }
  if (!std::isfinite(b.upper)) {
    std::cerr << "regatta: the certified upper end is not finite: no region enclosure over the remaining "
                 "boxes is bounded and no published bound applies (smaller boxes: a larger --max-boxes or "
                 "--time-limit)\n";
    result = exit_check_failed;
    return;
  }
  result = exit_ok;
}

}  // namespace

void add_lipschitz_command(CLI::App& app, int& result) {
  auto args = std::make_shared<LipschitzArgs>();
  auto* cmd = app.add_subcommand("lipschitz",
                                 "Certified Lipschitz constant of a layer on a box or ball domain, by branch "
                                 "and bound (MPI with mpirun)");
  add_layer_options(cmd, args->layer);
  cmd->add_flag("--kim-unit", args->kim_unit, "Kim et al.'s setting: L2 attention, d = H = 1, unit weights");
  cmd->add_option("--n", args->n,
                  "Sequence length (required; n*d <= " + std::to_string(lip::bnb_max_dimension) + ")")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 20));
  cmd->add_option_function<double>(
         "--box", [args](double v) { args->box = v; }, "Domain [-R, R]^(n x d): every entry of X in [-R, R]")
      ->check(positive());
  cmd->add_option_function<double>(
         "--ball", [args](double v) { args->ball = v; },
         "Domain: every token in the Euclidean ball ||x_i|| <= R")
      ->check(positive());
  cmd->add_option("--norm", args->norm, "2 (Frobenius, default) or inf (max entry)");
  cmd->add_option("--gap", args->gap, "Stop when (upper - lower) <= GAP * lower (default 1e-2)")
      ->check(finite_in(0, 1e6, Ends::open_low));
  cmd->add_option("--symmetry", args->symmetry,
                  "Reductions to use where valid: all (default), none, or a list of "
                  "permutation,translation,sign,rotation");
  cmd->add_option("--batch", args->batch,
                  "Boxes split per step (default 64; part of the checkpoint's problem)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-boxes", args->max_boxes, "Stop after evaluating this many boxes (0: no limit)")
      ->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 62));
  cmd->add_option("--time-limit", args->time_limit, "Stop after this many seconds (0: no limit)")
      ->check(nonnegative(1e9));
  cmd->add_option("--max-steps", args->max_steps, "Stop after this many batches in this run (0: no limit)")
      ->check(CLI::Range(std::int64_t(0), std::int64_t(1) << 62));
  auto* checkpoint =
      cmd->add_option("--checkpoint", args->checkpoint,
                      "Write the frontier to FILE (JSON, atomically) periodically and at the end")
          ->check(file_name());
  cmd->add_option("--checkpoint-every", args->checkpoint_every, "Seconds between checkpoints (default 60)")
      ->check(nonnegative(1e9))
      ->needs(checkpoint);
  cmd->add_option("--resume", args->resume, "Continue from a checkpoint FILE of the same problem")
      ->check(file_name());
  cmd->add_flag("--json", args->json, "Machine-readable output");
  cmd->callback([args, &result] { run(*args, result); });
}

}  // namespace regatta::cli
