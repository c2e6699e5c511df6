// Section 5 — proofs-check: every registered claim of docs/math/claims.md through the checker engine
// (proofs-check/engine.hpp) with a small fixed budget: search in double, re-evaluation in MPFR, verdict in
// interval arithmetic. The run does not depend on the clock (a fixed number of random points and climb steps
// per claim), so the table is reproducible from the recorded seed.
#include <filesystem>

#include <regatta/proofs/engine.hpp>
#include <regatta/proofs/registry.hpp>

#include "common.hpp"
#include "sections.hpp"

namespace regatta::cli::report {

Section section_proofs(const Context& ctx) {
  Section s;
  s.title = "proofs-check: the claims catalogue";
  s.text.push_back(
      "Every numerically checkable claim of the catalogue (docs/math/claims.md), checked by the engine of "
      "`regatta proofs-check`: near-extremal families and seeded random points searched in double, the best "
      "points "
      "re-evaluated in MPFR and decided in interval arithmetic. 'holds' and 'identity' are verdicts on the "
      "tested "
      "points (certified when every candidate is), 'refuted' comes with a certified counterexample, "
      "'unbounded' "
      "with a certified growing sequence. A run of the full command with a larger budget: "
      "`regatta proofs-check --budget 10`.");
  proofs::EngineOptions options;
  options.samples = ctx.size(12L, 48L);
  options.min_samples = 1;
  options.seed = ctx.seed(5, 1);
  options.precision = 128;
  options.out_dir = ctx.options().out / "proofs-check";
  options.validate();
  s.configuration.push_back(
      "engine: " + std::to_string(options.samples) + " random points and " + std::to_string(options.samples) +
      " climb steps per claim (clock-independent), seed " + std::to_string(options.seed) +
      ", MPFR/MPFI at 128 bits; counterexamples in proofs-check/");
  const auto& claims = proofs::registry();
  Table t("proofs_check", "Verdicts of the claims catalogue");
  t.column("id", "claim", Kind::text)
      .column("expected", "expected", Kind::text)
      .column("verdict", "verdict", Kind::text)
      .column("as_expected", "as expected", Kind::text)
      .column("certified", "verdict certified", Kind::text,
              "yes: proved by interval arithmetic at every candidate")
      .column("max_ratio", "max ratio / error / reached", Kind::estimate,
              "inequalities: largest lhs/rhs (MPFR); identities: largest relative error; unbounded: largest "
              "certified lower bound along the growth family")
      .column("counterexample", "counterexample", Kind::text)
      .column("seconds", "time (s)", Kind::estimate)
      .column("note", "note", Kind::text);
  auto bar =
      ctx.progress("5 proofs-check: " + std::to_string(claims.size()) + " claims", long(claims.size()));
  std::size_t matching = 0, certified = 0;
  std::vector<std::string> mismatches;
  for (const auto& claim : claims) {
    const proofs::ClaimResult r = proofs::check_claim(*claim, options);
    std::string cx;
    if (r.counterexample)
      cx = std::string(r.counterexample->certified ? "certified" : "not certified") +
           (r.counterexample->file.empty()  // relative to the report (written in its staging directory)
                ? ""
                : ", proofs-check/" + std::filesystem::path(r.counterexample->file).filename().string());
    t.add_row({r.id, proofs::to_string(r.expected), proofs::to_string(r.verdict),
               std::string(r.matches() ? "yes" : "NO"), std::string(r.certified ? "yes" : "no"), r.max_ratio,
               cx, r.seconds, r.note});
    matching += r.matches() ? 1 : 0;
    certified += r.certified ? 1 : 0;
    if (!r.matches()) mismatches.push_back(r.id + " (" + proofs::to_string(r.verdict) + ")");
    bar->advance();
  }
  bar->finish();
  t.caption =
      "The catalogue also lists claims that cannot be checked yet; they are never given a made-up verdict: " +
      std::to_string(proofs::missing_claims().size()) +
      (proofs::missing_claims().size() == 1 ? " such claim" : " such claims") +
      " (`regatta proofs-check --list`).";
  std::string f = std::to_string(matching) + " of " + std::to_string(claims.size()) +
                  " verdicts as the catalogue expects; " + std::to_string(certified) + " verdicts certified.";
  if (!mismatches.empty()) {
    f += " Different from the expectation (with this small budget):";
    for (const auto& m : mismatches) f += " " + m;
    f += ".";
  }
  s.findings.push_back(f);
  s.tables.push_back(std::move(t));
  return s;
}

}  // namespace regatta::cli::report
