#pragma once
// The claims registry: every claim of docs/math/claims.md that regatta can check today, in ID order, and
// the list of the others with the reason each one is absent. A claim that cannot be checked is never
// registered with a made-up evaluator. Each claim registers itself in its own file
// (proofs-check/src/claims/register.hpp, docs/adding-a-claim.md).
#include <ostream>
#include <string>
#include <vector>

#include <regatta/proofs/claim.hpp>
#include <regatta/proofs/engine.hpp>

namespace regatta::proofs {

struct MissingClaim {
  std::string id;
  Expected expected;
  std::string reason;
};

/// The registered claims (constructed once, in ID order).
const std::vector<ClaimPtr>& registry();
/// The catalogue claims that are not registered, with the reason.
const std::vector<MissingClaim>& missing_claims();
/// The registered claim with this ID, or nullptr.
const Claim* find_claim(const std::string& id);

/// docs/claims.md: an index, one section per registered claim (statement, source, hypotheses, families,
/// parts, the verdict of `results` when it holds one for the claim), and the missing claims with reasons.
/// `command` is the command line that produced the results (written into the page).
void write_claims_markdown(std::ostream& out, const std::vector<ClaimResult>& results,
                           const std::string& command);

}  // namespace regatta::proofs
