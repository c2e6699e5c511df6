// regatta report [--out DIR] [--quick] [--seed N] [--layer FILE --heads H --kind K | --random SPEC]: the
// default study (the README's main job). Runs the sections of cli/report/ on built-in seeded configurations
// (and on the user's layer when one is given) and writes DIR/summary.md, DIR/index.html, DIR/report.json, a
// CSV and a JSON file per table and an SVG and a PNG per plot. What each section shows: docs/report.md.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include <regatta/core/error.hpp>
#include "command.hpp"
#include "layer_options.hpp"
#include "numbers.hpp"
#include "report/sections.hpp"
#include "validate.hpp"

namespace regatta::cli {

namespace {

struct ReportArgs {
  LayerArgs layer;
  std::string out = "regatta-report";
  bool quick = false;
  unsigned long long seed = 1;
  bool no_progress = false;
  std::string model = REGATTA_FIXTURE_DIR "/vit_digits.safetensors";
  std::string data = REGATTA_FIXTURE_DIR "/test_set.npz";
};

std::string command_line(const ReportArgs& a) {
  std::string line =
      "regatta report --out " + a.out + (a.quick ? " --quick" : "") + " --seed " + std::to_string(a.seed);
  if (!a.layer.layer.empty())
    line += " --layer " + a.layer.layer + " --heads " + std::to_string(a.layer.heads);
  if (!a.layer.random.empty()) line += " --random " + a.layer.random;
  if (a.model != ReportArgs{}.model) line += " --model " + a.model;
  if (a.data != ReportArgs{}.data) line += " --data " + a.data;
  if (!a.layer.layer.empty() || !a.layer.random.empty()) {
    line += " --kind " + a.layer.kind;
    if (!a.layer.prefix.empty()) line += " --prefix " + a.layer.prefix;
    if (a.layer.causal) line += " --causal";
    if (a.layer.residual) line += " --residual";
    if (a.layer.prenorm != "none") line += " --prenorm " + a.layer.prenorm;
    if (a.layer.sinkhorn != 1) line += " --sinkhorn " + std::to_string(a.layer.sinkhorn);
    if (!a.layer.rope.empty()) line += " --rope " + a.layer.rope;
  }
  return line;
}

void run(const ReportArgs& args, int& result) {
  // A name longer than the file system allows failed only at the end, when the finished report was moved
  // into place (minutes later): refused now.
  std::filesystem::path out(args.out);
  while (!out.has_filename() && out.has_parent_path() && out != out.parent_path()) out = out.parent_path();
  check_name_length("--out", out.string());
  // A --model or --data given and missing was reported only in section 9 as "no model" (and a name too
  // long for the file system exited 3 there); the default fixture may be absent (an installed binary).
  const ReportArgs defaults;
  for (const auto& [option, given, fallback] :
       {std::tuple{"--model", args.model, defaults.model}, std::tuple{"--data", args.data, defaults.data}}) {
    std::error_code ec;
    if (given != fallback && !std::filesystem::is_regular_file(given, ec))
      throw InputError(
          option, "no such file: " + given +
                      (ec && ec != std::errc::no_such_file_or_directory ? " (" + ec.message() + ")" : ""));
  }
  report::ReportOptions options;
  options.out = args.out;
  options.quick = args.quick;
  options.seed = args.seed;
  options.progress = !args.no_progress;
  options.model = args.model;
  options.data = args.data;
  options.command_line = command_line(args);
  const LayerArgs& l = args.layer;
  if (!l.layer.empty() || !l.random.empty()) {
    options.user = resolve_layer(l);
    if (options.user->layer.rotary)
      throw InputError("--rope",
                       "the report's sections compare the published bounds and measure-level "
                       "quantities, none of which covers rotary position embeddings; analyse a RoPE "
                       "layer with attend, local or bracket");
  } else {
    // Without a user layer the layer options would be silently ignored: refuse them.
    const std::pair<bool, const char*> unused[] = {
        {l.heads != 0, "--heads"},       {l.kind != "dot", "--kind"},
        {!l.prefix.empty(), "--prefix"}, {l.causal, "--causal"},
        {l.residual, "--residual"},      {l.prenorm != "none", "--prenorm"},
        {l.sinkhorn != 1, "--sinkhorn"}, {l.allow_untied_l2, "--allow-untied-l2"},
        {!l.rope.empty(), "--rope"}};
    for (const auto& [given, name] : unused)
      if (given) throw InputError(name, "applies to a user layer only (give --layer FILE or --random SPEC)");
  }
  const std::vector<report::Section> sections = report::run_report(options, REGATTA_VERSION);
  std::printf("regatta report written to %s (summary.md, index.html, tables/, plots/)\n", args.out.c_str());
  for (const report::Section& s : sections) {
    if (s.produced)
      std::printf("  %d. %-48s %zu tables, %zu figures, %.1f s\n", s.number, s.title.c_str(), s.tables.size(),
                  s.figures.size(), s.seconds);
    else
      std::printf("  %d. %-48s not produced: %s\n", s.number, s.title.c_str(), s.not_produced.c_str());
  }
  result = exit_ok;
}

}  // namespace

void add_report_command(CLI::App& app, int& result) {
  auto args = std::make_shared<ReportArgs>();
  auto* cmd = app.add_subcommand(
      "report",
      "The default study: bounds, certified brackets, measure-level and local sensitivity, "
      "proofs-check, mean field; tables (CSV/JSON), plots (SVG/PNG), summary.md and index.html");
  cmd->add_option("--out", args->out, "Output directory (created; files replaced atomically)");
  cmd->add_flag("--quick", args->quick, "Small sizes (about a minute on 2 cores)");
  cmd->add_option("--seed", args->seed, "Base seed of every random configuration (recorded in the summary)")
      ->check(seed_value());
  cmd->add_flag("--no-progress", args->no_progress, "No progress bars on stderr");
  cmd->add_option("--model", args->model,
                  "Trained ViT for section 9 (.safetensors, timm naming; default: the digits fixture of the "
                  "source tree)");
  cmd->add_option("--data", args->data,
                  "Labelled test set .npz for section 9 (default: the digits fixture's)");
  add_layer_options(cmd, args->layer);
  cmd->callback([args, &result] { run(*args, result); });
}

}  // namespace regatta::cli
