// docs/claims.md from the registry and the results of one run.
#include <cstdio>
#include <map>

#include <regatta/core/decimal.hpp>
#include <regatta/proofs/registry.hpp>

namespace regatta::proofs {

namespace {

/// Text for a Markdown table cell: '|' would end the cell.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

std::string kind_name(PartKind k) {
  switch (k) {
    case PartKind::at_most:
      return "inequality";
    case PartKind::equal:
      return "identity";
    case PartKind::growth:
      return "growth";
  }
  return "?";
}

void write_result(std::ostream& out, const ClaimResult& r) {
  out << "**Last verdict:** `" << to_string(r.verdict) << "` ("
      << (r.matches() ? "as expected" : "NOT as expected") << "; "
      << (r.certified ? "certified" : "not certified") << "). ";
  out << "Points: " << r.family_points << " family, " << r.random_points << " random, " << r.climb_steps
      << " climb steps; " << nearest_decimal(r.seconds) << " s.";
  if (!r.note.empty()) out << " Note: " << r.note << ".";
  out << "\n\n| part | result |\n|---|---|\n";
  for (const PartOutcome& o : r.parts) {
    out << "| " << cell(o.name) << " | ";
    if (o.kind == PartKind::at_most)
      out << "max ratio " << nearest_decimal(o.max_ratio) << " (mpfr estimate); certified ratio ≤ "
          << upper_decimal(o.certified_ratio_upper, 6)
          << (o.certified ? "; certified at every candidate" : "");
    else if (o.kind == PartKind::equal)
      out << "relative error " << nearest_decimal(o.error_p) << " at p bits, " << nearest_decimal(o.error_2p)
          << " at 2p bits (estimates); certified |defect| ≤ " << upper_decimal(o.certified_error, 6);
    else
      out << (o.certified ? "passed every threshold (certified)" : "did not pass every threshold");
    out << (o.failed ? " — **failed**" : "") << " |\n";
  }
  if (!r.growth.empty()) {
    out << "\nGrowth (certified enclosures):";
    for (const GrowthStep& s : r.growth)
      out << " [" << lower_decimal(s.certified_lower, 6) << ", " << upper_decimal(s.certified_upper, 6)
          << "]";
    out << "\n";
  }
  if (r.counterexample) {
    out << "\nCounterexample (" << (r.counterexample->certified ? "certified" : "not certified")
        << ", part \"" << r.counterexample->part << "\"): lhs ∈ [" << r.counterexample->lhs_lower << ", "
        << r.counterexample->lhs_upper << "], rhs ∈ [" << r.counterexample->rhs_lower << ", "
        << r.counterexample->rhs_upper << "]; point `" << r.counterexample->point.dump() << "`\n";
  }
}

}  // namespace

void write_claims_markdown(std::ostream& out, const std::vector<ClaimResult>& results,
                           const std::string& command) {
  std::map<std::string, const ClaimResult*> by_id;
  for (const ClaimResult& r : results) by_id[r.id] = &r;
  out << "# Claims checked by `regatta proofs-check`\n\n"
      << "Generated from the claims registry (`proofs-check/`) by\n\n```\n"
      << command << "\n```\n\n"
      << "Do not edit by hand: change the registry and regenerate. The statements, expected verdicts and "
         "references come from the catalogue [math/claims.md](math/claims.md); each section below says what "
         "the "
         "checker evaluates and the verdict of the run above. How verdicts are reached: "
         "[cli.md](cli.md#regatta-proofs-check). Ratios and errors marked *estimate* come from the mpfr "
         "re-evaluation; *certified* numbers come from interval arithmetic. The points checked are fixed by "
         "the command: each claim's families, then its fixed number of random points and climb steps "
         "(`--samples N`, or the claim's default count) drawn from `--seed`, so any machine checks the same "
         "points (unless the command has `--budget`).\n\n";
  out << "## Index\n\n| ID | expected | source | last verdict |\n|---|---|---|---|\n";
  for (const ClaimPtr& c : registry()) {
    const ClaimInfo& i = c->info();
    const auto it = by_id.find(i.id);
    out << "| [`" << i.id << "`](#" << i.id.substr(0, i.id.find('.')) << i.id.substr(i.id.find('.') + 1)
        << ") | " << to_string(i.expected) << " | " << i.source << " | "
        << (it == by_id.end()
                ? std::string("not run")
                : to_string(it->second->verdict) + (it->second->certified ? " (certified)" : ""))
        << " |\n";
  }
  for (const MissingClaim& m : missing_claims())
    out << "| `" << m.id << "` | " << to_string(m.expected) << " | — | missing (see below) |\n";
  out << "\n";
  for (const ClaimPtr& c : registry()) {
    const ClaimInfo& i = c->info();
    out << "## " << i.id << "\n\n";
    out << "**Statement.** " << i.statement << "\n\n" << i.latex << "\n\n";
    out << "**Source:** " << i.source << ". **Expected:** `" << to_string(i.expected) << "`.\n\n";
    out << "**Hypotheses:**";
    for (const std::string& h : i.hypotheses) out << "\n- " << h;
    out << "\n\n**Parts checked:**";
    for (const Part& p : i.parts) out << "\n- " << kind_name(p.kind) << ": " << p.name;
    out << "\n\n**Near-extremal families:**";
    for (const std::string& f : i.families) out << " `" << f << "`";
    if (!i.growth_family.empty())
      out << " (growth family `" << i.growth_family << "`, thresholds 10^1 … 10^" << i.growth_decades << ")";
    out << "\n\n";
    out << "**Evaluated at:** "
        << (i.evaluated_at.empty() ? std::string("closed forms of the point's coordinates (no solver)")
                                   : i.evaluated_at)
        << "\n\n";
    if (!i.notes.empty()) out << i.notes << "\n\n";
    const auto it = by_id.find(i.id);
    if (it == by_id.end())
      out << "**Last verdict:** not run.\n\n";
    else {
      write_result(out, *it->second);
      out << "\n";
    }
  }
  out << "## Missing claims\n\nThese catalogue claims are not in the registry; none is reported with a "
         "made-up "
         "value.\n\n| ID | expected | reason |\n|---|---|---|\n";
  for (const MissingClaim& m : missing_claims())
    out << "| `" << m.id << "` | " << to_string(m.expected) << " | " << cell(m.reason) << " |\n";
}

}  // namespace regatta::proofs
