#pragma once
// Measure-level Lipschitz ratios of attention (docs/math/bounds.md#mean-field;
// docs/math/attention.md#empirical-weighted-grid, docs/math/attention.md#measure-cross-attention,
// docs/math/jacobian.md#measure-derivatives):
//
//   self     W_p(F μ, F ν) / W_p(μ, ν)                                   (Theorem C: mf.self_lipschitz)
//   query    W_p(CA(η, μ), CA(η′, μ)) / W_p(η, η′), context μ shared       (Theorem A: mf.query_lipschitz)
//   context  W_p(CA(η, μ), CA(η, ν)) / W_p(μ, ν), queries η shared         (Theorem B: mf.context_lipschitz)
//
// on empirical measures, in token form: F(μ_X) = μ_{F(X)} and CA(μ_Q, μ_C) = μ_{CA(Q, C)} (exact,
// docs/math/attention.md#empirical-weighted-grid), with
// W_p between empirical measures computed exactly (measures::wasserstein_exact). Every ratio is a lower bound
// on the corresponding measure-level Lipschitz constant over the domain.
//
// Domain. The varied measures (μ, ν: the tokens X, Y, each with n atoms) and the shared one (m atoms):
//   self     X, Y in B_R;
//   query    X, Y (queries) unconstrained, the shared context in B_R;
//   context  X, Y (contexts) in B_R, the shared queries in B_R′ (R′ = query_radius, default R);
// with B_R the closed Euclidean ball when a radius is given, else everything unconstrained.
//
// Search: seeded families from docs/math/bounds.md#mean-field (the asymptotically sharp Theorem B family — a
// majority of atoms
// at R u and one atom at −R u moved by t, u a real eigenvector of A_h with A_h u = −a u, the query at R′ u —
// used for the context and the self ratios; its positive-spectrum variant — majority at (R/2) u, small atom
// at R u; for the query ratio the tight Theorem A input — context atoms at ±R u, queries at 0 moved by t
// along A u), each scanned over t ∈ [10⁻³, 1]·R, then random starts; from each, projected ascent on the
// ratio with the gradient of the exact transport cost for the optimal plan (envelope theorem) chained
// through the VJPs of the block (docs/math/jacobian.md#measure-derivatives in token form). Points where
// W_p(μ, ν) falls below
// 10⁻⁶ of the length scale are rejected (the ratio is then dominated by rounding).
//
// Certification (certify): the outputs are recomputed by the interval Block at `precision_bits`; with μ̃ the
// empirical measure of the midpoints and r the largest enclosure radius of an output atom (rounded up),
// W_p(Fμ, Fν) ≥ W_p(μ̃, ν̃) − r_μ − r_ν (triangle inequality; W_p(μ̃, Fμ) ≤ r_μ through the identity coupling),
// W_p(μ̃, ν̃) is bracketed from below and W_p(μ, ν) from above by measures::certify_wasserstein, and the
// certified ratio is the quotient rounded down. The witness atoms are checked to lie in their balls.
// Masked (causal) attention is refused: its measure-level form needs lifted measures
// (docs/math/attention.md#lifted-causal),
// which this search does not implement.
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>

namespace regatta::lip {

enum class MeasureArgument { self, query, context };
std::string to_string(MeasureArgument argument);
/// "self", "query" or "context"; anything else throws InputError naming `subject`.
MeasureArgument parse_measure_argument(const std::string& text, const std::string& subject = "--cross");

struct MeasureSearchOptions {
  MeasureArgument argument = MeasureArgument::self;
  Eigen::Index n = 8;  ///< atoms of each varied measure (>= 1)
  Eigen::Index m = 0;  ///< atoms of the shared measure (cross-attention); 0: n
  std::optional<double> radius;
  std::optional<double> query_radius;  ///< context ratio: queries in B_R′ (default: radius)
  double p = 1;                        ///< the W_p exponent, >= 1
  int random_starts = 4;
  int ascent_steps = 40;
  std::int64_t max_evaluations =
      4000;                   ///< ratio evaluations at most (each: two block linearisations, two W_p)
  double budget_seconds = 0;  ///< 0: none
  std::uint64_t seed = 0;
  std::function<void(const std::string&)> progress;
  /// Called before every ratio evaluation with the number of evaluations so far; may be empty. It may throw
  /// to abandon the search (the Python module throws on a pending Ctrl-C); the exception propagates out of
  /// search_measure_ratio and compute_measure_bracket unchanged.
  std::function<void(std::int64_t evaluations)> poll;
};

struct MeasureWitness {
  Matrix<double> mu, nu;   ///< atoms of the two varied measures (n×d each)
  Matrix<double> shared;   ///< the shared measure's atoms (m×d; empty for self)
  double numerator = 0;    ///< ESTIMATE: W_p of the outputs
  double denominator = 0;  ///< ESTIMATE: W_p(μ, ν)
  double ratio = 0;        ///< ESTIMATE: numerator / denominator
  std::string origin;
};

struct MeasureSearchResult {
  MeasureWitness best;
  std::int64_t evaluations = 0;
  bool stopped_by_budget = false;       ///< the time budget ended the search early
  bool stopped_by_evaluations = false;  ///< the evaluation cap ended the search early
};

/// Runs the search (see the file comment). Throws InputError for an invalid layer or options, a causal
/// layer, a layer with rotary position embeddings (not a map on measures), n < 1, p < 1, a non-positive
/// radius, or invalid search settings.
MeasureSearchResult search_measure_ratio(const operators::AttentionLayer& layer,
                                         const operators::AttentionOptions& options,
                                         const MeasureSearchOptions& search);

/// CERTIFIED lower bound on the ratio at a witness (rounded down), or unset with the reason.
struct MeasureCertificate {
  std::optional<double> lower;
  std::string reason;
};
MeasureCertificate certify_measure_witness(const operators::AttentionLayer& layer,
                                           const operators::AttentionOptions& options,
                                           const MeasureWitness& witness, const MeasureSearchOptions& search,
                                           unsigned precision_bits);

/// The measure-level bracket: lower = the best ratio, upper = the matching bound (mf.self_lipschitz,
/// mf.query_lipschitz or mf.context_lipschitz) when it applies. Same estimate / certified conventions as
/// Bracket (bracket.hpp).
struct MeasureBracket {
  double lower = 0;
  double upper = std::numeric_limits<double>::infinity();
  double ratio = 0;
  bool certified = false;
  double lower_estimate = 0;
  double upper_estimate = std::numeric_limits<double>::infinity();
  std::optional<double> lower_certified, upper_certified;
  std::string bound_name, bound_description;
  std::string refused;  ///< why the bound does not apply (empty when it does)
  MeasureWitness witness;
  std::int64_t evaluations = 0;
  bool stopped_by_budget = false;       ///< the time budget ended the search early
  bool stopped_by_evaluations = false;  ///< the evaluation cap ended the search early
  std::string note;
};

MeasureBracket compute_measure_bracket(const operators::AttentionLayer& layer,
                                       const operators::AttentionOptions& options,
                                       const MeasureSearchOptions& search, bool certify,
                                       unsigned precision_bits = 128);

/// The bound matching a ratio: mf_self, mf_query or mf_context.
Bound measure_bound(MeasureArgument argument);

}  // namespace regatta::lip
