#pragma once
// The checker: search in double, re-evaluation in mpfr, verdict in interval arithmetic.
//
// Per claim:
//  1. Search (double). Every point of the claim's families, then random points (the i-th drawn from a
//     generator seeded by (seed, claim ID, i)), then an adversarial hill climb from the best points
//     (Gaussian perturbations of the continuous coordinates, adaptive step, seeded). The score of a point is
//     its largest ratio lhs/rhs over the at_most parts (its largest quantity for growth parts); the best
//     point of every part is kept besides the overall best ones. The number of random points and of climb
//     steps is fixed, so that two machines check the same points: `samples` each when samples > 0, else
//     the claim's ClaimInfo::default_samples each. Opt-in alternative (samples = 0, budget_seconds > 0): as
//     many as budget/2 seconds allow (random points, then climb steps until the budget), at least
//     min_samples; the points checked then depend on the machine's speed.
//  2. Re-evaluation (mpfr at `precision` bits) of the kept candidates: the reported ratios and errors.
//  3. Verdict (interval arithmetic):
//     at_most  a candidate with lhs.lower > rhs.upper is a certified violation: verdict refuted, the point is
//              written to out_dir/<id>.json. Otherwise "holds" is certified when every candidate has
//              lhs.upper ≤ rhs.lower; candidates where the enclosures overlap are equality points within
//              rounding (reported, certified = false). A violation seen in mpfr by more than 2^(−p+32)
//              relative (2^(−53+32) for parts computed by double solvers, Part::accuracy_bits) that the
//              intervals cannot confirm (also at 2p bits) gives `inconclusive`.
//     equal    the error |value − reference| / max(1, |reference|) at p and at 2p bits (mpfr); the identity
//              fails when the error at 2p exceeds 2^(−α·2p + slack) (Part); the interval enclosure of
//              value − reference at 2p must contain 0 (for exact parts): if it does not, the failure is
//              certified; if it does, its magnitude is a certified bound on the defect.
//     growth   along the growth family, certified lower bounds (interval, p bits) must pass 10^1 … 10^K,
//              and each certified lower bound must exceed the previous point's certified upper bound.
//  A claim whose statement kind is identity gets the verdict `identity` when nothing fails; inequality
//  claims get `holds`; unbounded claims `unbounded` when the growth passes; a claim with no evaluated point
//  (every point skipped, or its families not selected) is `inconclusive`.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <regatta/proofs/claim.hpp>

namespace regatta::proofs {

struct EngineOptions {
  /// > 0: exactly this many random points and climb steps for every claim; 0: the claim's
  /// ClaimInfo::default_samples (or the budget, when budget_seconds > 0). Never depends on the clock.
  long samples = 0;
  /// Opt-in budget mode, used only when samples = 0: search seconds per claim (certification comes on top);
  /// 0: off (fixed counts).
  double budget_seconds = 0;
  long min_samples = 64;  ///< budget mode: random points and climb steps at least, whatever the budget
  std::uint64_t seed = 0;
  unsigned precision = 128;           ///< bits of the mpfr re-evaluation and the interval certification
  std::vector<std::string> families;  ///< non-empty: only these families, no random sampling
  int candidates = 4;                 ///< best points re-evaluated (plus the best point of each part)
  std::filesystem::path out_dir;      ///< counterexample files (created when needed); empty: none written
  /// Throws InputError naming the option for a budget < 0 or not finite, precision < 53 or above the
  /// library maximum, samples < 0, min_samples < 1, candidates < 1.
  void validate() const;
};

struct PartOutcome {
  std::string name;
  PartKind kind = PartKind::at_most;
  long evaluated = 0;                ///< points where the part was active (double search)
  double max_ratio_double = 0;       ///< at_most: largest lhs/rhs in the double search (estimate)
  double max_ratio = 0;              ///< at_most: largest lhs/rhs at the candidates in mpfr (estimate)
  double certified_ratio_upper = 0;  ///< at_most: certified upper bound of lhs/rhs at the candidates
  double error_p = 0;                ///< equal: largest relative error in mpfr at p bits (estimate)
  double error_2p = 0;               ///< equal: the same at 2p bits
  double certified_error = 0;        ///< equal: certified bound on |value − reference| (interval at 2p)
  bool certified = false;            ///< every candidate certified for this part
  bool failed = false;               ///< a certified or uncertified failure of this part
};

struct GrowthStep {
  nlohmann::json point;        ///< the family point
  double certified_lower = 0;  ///< certified lower bound of the quantity (interval)
  double certified_upper = 0;  ///< certified upper bound of the quantity (interval)
};

struct Counterexample {
  nlohmann::json point;                                    ///< Claim::describe of the point
  std::string part;                                        ///< the violated part
  std::string lhs_lower, lhs_upper, rhs_lower, rhs_upper;  ///< interval ends (20 digits, outward)
  double ratio = 0;                                        ///< lhs/rhs in mpfr (estimate)
  bool certified = false;
  std::string file;  ///< where it was written ("" when no --out directory)
};

struct ClaimResult {
  std::string id;
  Expected expected = Expected::holds;
  Verdict verdict = Verdict::inconclusive;
  /// inequality claims: largest lhs/rhs (mpfr, estimate); identity claims: largest relative error at 2p
  /// bits; unbounded claims: the largest certified lower bound along the growth family.
  double max_ratio = 0;
  bool certified = false;  ///< the verdict is proved by interval arithmetic at every candidate
  std::optional<Counterexample> counterexample;
  std::vector<PartOutcome> parts;
  std::vector<GrowthStep> growth;
  long family_points = 0, random_points = 0, climb_steps = 0, skipped_points = 0;
  double seconds = 0;
  std::string note;  ///< one line: what limited the certification, if anything
  bool matches() const { return verdict == matching_verdict(expected); }
};

/// Runs one claim (search, re-evaluation, verdict; see the file comment). Throws InputError for invalid
/// options or an unwritable counterexample directory.
ClaimResult check_claim(const Claim& claim, const EngineOptions& options);

nlohmann::json to_json(const ClaimResult& r);

}  // namespace regatta::proofs
