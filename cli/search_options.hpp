#pragma once
// The options bracket and measure-lipschitz share: certification, the adversarial search's limits and seed,
// the witness file(s) and JSON output.
#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "validate.hpp"

namespace regatta::cli {

struct SearchArgs {
  bool certify = false;
  unsigned precision = 128;
  double budget = 10;
  std::int64_t evaluations = 0;
  int restarts = 4;
  std::uint64_t seed = 0;
  std::string witness;
  bool json = false;
};

/// Registers --certify, --precision, --budget, --evaluations, --restarts, --seed, --witness and --json;
/// `args` holds the defaults (shown in the help through the given texts).
inline void add_search_options(CLI::App* cmd, SearchArgs& args, const std::string& certify_help,
                               const std::string& evaluations_help, const std::string& witness_help) {
  cmd->add_flag("--certify", args.certify, certify_help);
  cmd->add_option("--precision", args.precision, "Bits of the interval evaluations (default 128)")
      ->check(CLI::Range(53u, 65536u));
  cmd->add_option("--budget", args.budget, "Search time limit in seconds (default 10; 0: none)")
      ->check(nonnegative(1e6));
  cmd->add_option("--evaluations", args.evaluations, evaluations_help)
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 40));
  cmd->add_option("--restarts", args.restarts, "Random starts after the structured seeds (default 4)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--seed", args.seed, "Seed of the search (default 0)")->check(seed_value());
  cmd->add_option("--witness", args.witness, witness_help);
  cmd->add_flag("--json", args.json, "Machine-readable output");
}

}  // namespace regatta::cli
