// regatta — REGularity of ATTention Analysis. Entry point: parses the command line with CLI11, dispatches to
// one subcommand, and turns every failure into one line on stderr with the documented exit code.
#include <malloc.h>

#include <iostream>
#include <new>
#include <set>
#include <string>
#include <vector>

#include <regatta/core/error.hpp>
#include <regatta/core/io/file_bytes.hpp>
#include <regatta/core/resources.hpp>
#include "command.hpp"

namespace {

/// Without files read, the options given that set the size of the numbers (a random layer's scale, a
/// radius, a step): what a non-finite quantity was computed from.
std::vector<std::string> scale_options_given(const CLI::App& app) {
  static const char* const names[] = {"--random", "--init",   "--radius",  "--query-radius", "--ball",
                                      "--box",    "--beta",   "--step",    "--horizon",      "--epsilon",
                                      "--p",      "--margin", "--perturb", "--norm-eps",     "--rope"};
  std::vector<std::string> given;
  for (const CLI::App* sub : app.get_subcommands())
    for (const char* name : names)
      if (const CLI::Option* o = sub->get_option_no_throw(name); o != nullptr && o->count() > 0)
        given.emplace_back(name);
  return given;
}

/// The layer on the command line: the file of --layer, or the option that built one (--random, --kim-unit).
std::string layer_given(const CLI::App& app) {
  for (const CLI::App* sub : app.get_subcommands()) {
    if (const CLI::Option* o = sub->get_option_no_throw("--layer"); o != nullptr && o->count() > 0)
      return o->as<std::string>();
    for (const char* name : {"--random", "--kim-unit"})
      if (const CLI::Option* o = sub->get_option_no_throw(name); o != nullptr && o->count() > 0) return name;
  }
  return "the layer";
}

/// The line printed for an InputError. The library's checks of computed matrices and vectors name their
/// parameter ("M: entry (0, 0) is NaN", "pairwise queries: entry (1, 1) is infinite"), which means nothing
/// on the command line: there a non-finite value computed from finite inputs is an overflow of the double
/// range, and the line names the files read (or, with none, the options that set the scale).
std::string input_error_line(const regatta::InputError& e, const CLI::App& app) {
  static const std::set<std::string> internal = {"M", "v", "X", "Y", "J", "cost", "atoms"};
  const bool internal_subject = internal.contains(e.subject()) || e.subject().starts_with("pairwise ");
  const std::string& p = e.problem();
  const bool non_finite = p.find("NaN") != std::string::npos || p.find("infinite") != std::string::npos ||
                          p.find("non-finite") != std::string::npos;
  if (e.subject() == "layer") {  // the library's checks of a layer (untied L2, an overflowing Jacobian)
    std::string problem = p;
    const std::string library_flag = "allow_untied_l2";
    if (const auto at = problem.find(library_flag); at != std::string::npos)
      problem.replace(at, library_flag.size(), "--allow-untied-l2");
    return layer_given(app) + ": " + problem;
  }
  if (!internal_subject || !non_finite) return e.what();
  std::vector<std::string> read = regatta::io::inputs_read();
  if (read.empty()) read = scale_options_given(app);
  std::string files;
  for (const std::string& f : read) files += (files.empty() ? "" : ", ") + f;
  return (files.empty() ? std::string("the input") : files) + ": a quantity computed from " +
         (read.size() > 1 ? "them" : "it") + " is not a finite double (" + e.what() +
         "): the input or the weights are too large for the double range; rescale them";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace regatta::cli;
  // Blocks up to 32 MiB (glibc's largest mmap threshold; the affine forms' coefficient matrices are a few
  // MB each, allocated and freed at every step) come from the heap and are reused, not mapped and unmapped
  // each time: with two threads the page faults and the kernel's mapping lock took a third of `certify`'s
  // wall time (bench/RESULTS.md). Freed memory is kept up to 1 GiB above the heap's top.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 64 << 20);
  // No output of a run replaces one of its inputs (a --witness or --out naming the layer file, a --checkpoint
  // naming the layer): refused with exit 2 before anything is written.
  regatta::io::protect_inputs(true);
  CLI::App app{
      "regatta: REGularity of ATTention Analysis.\n"
      "Every number printed says whether it is an estimate or certified.\n"
      "Exit codes: 0 ok, 1 a check failed, 2 bad input or usage, 3 internal error."};
  app.name("regatta");
  app.set_version_flag("--version", std::string("regatta ") + REGATTA_VERSION);
  app.require_subcommand(1);
  int result = exit_ok;
  add_inspect_command(app, result);
  add_norm_command(app, result);
  add_wasserstein_command(app, result);
  add_attend_command(app, result);
  add_bound_command(app, result);
  add_proofs_check_command(app, result);
  add_report_command(app, result);
  add_bracket_command(app, result);
  add_measure_lipschitz_command(app, result);
  add_local_command(app, result);
  add_flow_command(app, result);
  add_certify_command(app, result);
  add_lipschitz_command(app, result);
  add_verify_command(app, result);
  // Threads: the cores this process may use, or OMP_NUM_THREADS within them, until --threads says otherwise
  // (its callback runs while the command line is parsed, before the subcommand's).
  const regatta::ThreadSetting threads = regatta::configure_threads();
  if (!threads.note.empty()) std::cerr << "regatta: " << threads.note << "\n";
  for (CLI::App* sub : app.get_subcommands({}))  // flow registers its own --threads
    if (sub->get_name() != "inspect" && sub->get_option_no_throw("--threads") == nullptr)
      add_threads_option(sub);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "regatta: " << e.what() << " (run 'regatta --help')\n";
    return exit_bad_input;
  } catch (const regatta::InputError& e) {
    std::cerr << "regatta: " << input_error_line(e, app) << "\n";
    return exit_bad_input;
  } catch (const std::bad_alloc&) {
    std::cerr << "regatta: out of memory\n";
    return exit_internal_error;
  } catch (const std::exception& e) {
    std::cerr << "regatta: internal error: " << e.what() << "\n";
    return exit_internal_error;
  }
  return result;
}

namespace regatta::cli {

void add_threads_option(CLI::App* cmd) {
  const int cores = available_cores();
  cmd->add_option_function<int>(
         "--threads",
         [](int n) {
           const ThreadSetting s = configure_threads(n);
           if (!s.note.empty()) std::cerr << "regatta: " << s.note << "\n";
         },
         "Threads of the parallel computations (default: the " + std::to_string(cores) +
             " cores this process may use)")
      ->check(CLI::Range(1, 1 << 20));
}

}  // namespace regatta::cli
