// regatta proofs-check: runs the claims catalogue (docs/math/claims.md) through the checker engine
// (proofs-check/): search in double, re-evaluation in mpfr, verdict certified in interval arithmetic. One
// table row per claim; exit 1 when a verdict differs from the catalogue's expectation.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <sstream>

#include <regatta/core/decimal.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/io/file_bytes.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/proofs/engine.hpp>
#include <regatta/proofs/registry.hpp>
#include "command.hpp"
#include "json_output.hpp"
#include "numbers.hpp"
#include "validate.hpp"

namespace regatta::cli {

namespace {

struct ProofsCheckArgs {
  std::vector<std::string> claims;
  std::vector<std::string> families;
  unsigned precision = 128;
  double budget = 0;  // opt-in budget mode (0: the fixed sample counts)
  unsigned long long seed = 0;
  long samples = 0;
  bool json = false;
  bool list = false;
  std::string out = "proofs-check-out";
  std::string docs;
  std::string command_line;
};

std::string value_column(const proofs::Claim& claim, const proofs::ClaimResult& r) {
  const proofs::ClaimInfo& info = claim.info();
  if (r.verdict == proofs::Verdict::refuted && r.counterexample)
    return "ratio " + nearest_decimal(r.counterexample->ratio, 4);
  switch (info.kind) {
    case proofs::StatementKind::identity: {
      double e2 = 0;
      for (const auto& o : r.parts)
        if (o.kind == proofs::PartKind::equal) e2 = std::max(e2, o.error_2p);
      return "err " + nearest_decimal(r.max_ratio, 4) + " (2p " + nearest_decimal(e2, 4) + ")";
    }
    case proofs::StatementKind::unbounded:
      return "reached " + nearest_decimal(r.max_ratio, 4);
    default:
      return "ratio " + nearest_decimal(r.max_ratio, 4);
  }
}

std::vector<const proofs::Claim*> select(const ProofsCheckArgs& args) {
  std::vector<const proofs::Claim*> chosen;
  if (args.claims.empty()) {
    for (const auto& c : proofs::registry()) chosen.push_back(c.get());
  } else {
    for (const std::string& id : args.claims) {
      const proofs::Claim* c = proofs::find_claim(id);
      if (c == nullptr) {
        for (const auto& m : proofs::missing_claims())
          if (m.id == id) throw InputError("--claim", "'" + id + "' is not checkable yet: " + m.reason);
        throw InputError("--claim", "unknown claim ID '" + id + "' (run 'regatta proofs-check --list')");
      }
      if (std::find(chosen.begin(), chosen.end(), c) == chosen.end()) chosen.push_back(c);
    }
  }
  if (!args.families.empty()) {
    std::set<std::string> known;
    for (const auto& c : proofs::registry())
      for (const std::string& f : c->info().families) known.insert(f);
    for (const std::string& f : args.families)
      if (!known.count(f))
        throw InputError("--family", "unknown family '" + f + "' (run 'regatta proofs-check --list')");
    std::vector<const proofs::Claim*> kept;
    for (const proofs::Claim* c : chosen)
      for (const std::string& f : c->info().families)
        if (std::find(args.families.begin(), args.families.end(), f) != args.families.end()) {
          kept.push_back(c);
          break;
        }
    if (kept.empty()) throw InputError("--family", "none of the selected claims has the named families");
    chosen = kept;
  }
  return chosen;
}

void list_claims() {
  std::cout << "registered claims (ID, expected, default samples, families):\n";
  for (const auto& c : proofs::registry()) {
    std::cout << "  " << c->info().id << "  " << to_string(c->info().expected) << "  "
              << c->info().default_samples << "  ";
    for (const std::string& f : c->info().families) std::cout << f << " ";
    std::cout << "\n";
  }
  std::cout << "missing claims (not checkable yet):\n";
  for (const auto& m : proofs::missing_claims()) std::cout << "  " << m.id << ": " << m.reason << "\n";
}

void run(const ProofsCheckArgs& args, int& result) {
  if (args.list) {
    list_claims();
    result = exit_ok;
    return;
  }
  proofs::EngineOptions options;
  if (args.samples > 0 && args.budget > 0)
    throw InputError("--budget", "cannot be combined with --samples (the budget replaces the fixed counts)");
  options.budget_seconds = args.budget;
  options.precision = args.precision;
  options.seed = args.seed;
  options.samples = args.samples;
  options.families = args.families;
  options.out_dir = args.out;
  options.validate();
  // Where the results go is checked before the claims run (minutes), not when they are written.
  if (!args.docs.empty()) {
    check_output_folder("--docs", args.docs);
    io::check_replaceable(args.docs);
  }
  if (!args.out.empty()) {
    std::error_code ec;
    const std::filesystem::file_status st = std::filesystem::status(args.out, ec);
    if (std::filesystem::exists(st) && !std::filesystem::is_directory(st))
      throw InputError("--out", regatta::quoted(args.out) + " exists and is not a folder");
    check_name_length("--out", args.out);
  }
  const std::vector<const proofs::Claim*> chosen = select(args);

  std::vector<proofs::ClaimResult> results;
  bool all_match = true;
  if (!args.json)
    std::printf("%-34s %-10s %-12s %-30s %-10s %s\n", "ID", "expected", "verdict",
                "max ratio / error (estimate)", "certified", "time");
  std::size_t index = 0;
  for (const proofs::Claim* c : chosen) {
    ++index;
    std::cerr << "[" << index << "/" << chosen.size() << "] " << c->info().id << "\n";
    proofs::ClaimResult r = proofs::check_claim(*c, options);
    all_match = all_match && r.matches();
    if (!args.json) {
      std::printf("%-34s %-10s %-12s %-30s %-10s %.1fs%s\n", r.id.c_str(), to_string(r.expected).c_str(),
                  (to_string(r.verdict) + (r.matches() ? "" : " (!)")).c_str(), value_column(*c, r).c_str(),
                  r.certified ? "yes" : "no", r.seconds, r.note.empty() ? "" : ("  " + r.note).c_str());
      if (r.counterexample && !r.counterexample->file.empty())
        std::printf("%-34s counterexample (%s): %s\n", "",
                    r.counterexample->certified ? "certified" : "not certified",
                    r.counterexample->file.c_str());
      std::fflush(stdout);
    }
    results.push_back(std::move(r));
  }
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : results) out.push_back(proofs::to_json(r));
    std::cout << json_text(out) << "\n";
  } else {
    std::size_t matching = 0;
    for (const auto& r : results) matching += r.matches() ? 1 : 0;
    std::printf(
        "%zu of %zu verdicts as expected; %zu catalogue claims not checkable yet "
        "('regatta proofs-check --list')\n",
        matching, results.size(), proofs::missing_claims().size());
  }
  if (!args.docs.empty()) {
    std::ostringstream docs;
    proofs::write_claims_markdown(docs, results, args.command_line);
    const std::string text = docs.str();
    io::write_file_atomic(args.docs, std::as_bytes(std::span<const char>(text.data(), text.size())));
  }
  result = all_match ? exit_ok : exit_check_failed;
}

}  // namespace

void add_proofs_check_command(CLI::App& app, int& result) {
  auto args = std::make_shared<ProofsCheckArgs>();
  auto* cmd = app.add_subcommand(
      "proofs-check", "Check the claims catalogue: verdict per claim, certified by interval arithmetic");
  cmd->add_option("--claim", args->claims, "Claim ID to check (repeatable; default: every registered claim)");
  cmd->add_option("--family", args->families,
                  "Only these near-extremal families (repeatable); no random sampling");
  cmd->add_option("--precision", args->precision,
                  "Bits of the mpfr re-evaluation and interval certification (identities also at 2x)")
      ->check(CLI::Range(53u, 65536u));
  cmd->add_option("--budget", args->budget,
                  "Opt-in: search time per claim in seconds instead of the fixed counts (the points then "
                  "depend on the machine's speed; default 0: off)")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_option("--seed", args->seed, "Seed of the random and adversarial search")->check(seed_value());
  cmd->add_option("--samples", args->samples,
                  "Exactly N random points and N climb steps per claim (default 0: each claim's fixed count, "
                  "listed by --list)")
      ->check(CLI::Range(0l, 100000000l));
  cmd->add_flag("--json", args->json, "Machine-readable output");
  cmd->add_option("--out", args->out, "Directory for counterexample files (default proofs-check-out)");
  cmd->add_option("--docs", args->docs, "Also write the claims page (docs/claims.md) to FILE");
  cmd->add_flag("--list", args->list, "List the registered and the missing claims");
  cmd->callback([args, cmd, &result] {
    std::string line = "regatta proofs-check";
    for (const std::string& c : args->claims) line += " --claim " + c;
    for (const std::string& f : args->families) line += " --family " + f;
    line += " --precision " + std::to_string(args->precision) + " --seed " + std::to_string(args->seed);
    if (args->samples > 0) line += " --samples " + std::to_string(args->samples);
    if (args->budget > 0) line += " --budget " + nearest_decimal(args->budget, 4);
    line += " --docs " + (args->docs.empty() ? std::string("FILE") : std::string("docs/claims.md"));
    args->command_line = line;
    (void)cmd;
    run(*args, result);
  });
}

}  // namespace regatta::cli
