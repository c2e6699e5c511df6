#pragma once
// What every subcommand file provides, and the exit-code contract of the `regatta` executable.
#include <CLI/CLI.hpp>

namespace regatta::cli {

/// Exit codes (docs/cli.md#exit-codes).
enum ExitCode : int {
  exit_ok = 0,              ///< success
  exit_check_failed = 1,    ///< the program ran, and a claim or check it was asked about failed
  exit_bad_input = 2,       ///< bad input or usage (one line on stderr)
  exit_internal_error = 3,  ///< a bug or an exhausted resource: please report it
};

/// Each subcommand registers itself on the root app; its callback stores the exit code in `result`.
void add_inspect_command(CLI::App& app, int& result);
void add_norm_command(CLI::App& app, int& result);
void add_attend_command(CLI::App& app, int& result);
void add_bound_command(CLI::App& app, int& result);
void add_wasserstein_command(CLI::App& app, int& result);
void add_proofs_check_command(CLI::App& app, int& result);
void add_report_command(CLI::App& app, int& result);
void add_bracket_command(CLI::App& app, int& result);
void add_measure_lipschitz_command(CLI::App& app, int& result);
void add_local_command(CLI::App& app, int& result);
void add_flow_command(CLI::App& app, int& result);
void add_certify_command(CLI::App& app, int& result);
void add_lipschitz_command(CLI::App& app, int& result);
void add_verify_command(CLI::App& app, int& result);

/// --threads N (default: the cores this process may use, see regatta::configure_threads) on a computing
/// subcommand; N above the cores is reduced to them with a note on stderr.
void add_threads_option(CLI::App* cmd);

}  // namespace regatta::cli
