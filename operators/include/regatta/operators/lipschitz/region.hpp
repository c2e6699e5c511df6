#pragma once
// Certified Jacobian norms of one self-attention block over a region of inputs, and the robustness radius
// that follows from them.
//
// Regions around tokens X (n×d):
//   ball  B(X, ε) = {X' : ‖X' − X‖_F ≤ ε}            (the perturbation set of a robustness certificate)
//   box   {X' : |X'_ia − X_ia| ≤ r for every i, a}   (a bounded domain; it contains B(X, r))
//
// Method. The box of half-width r (r = ε for the ball, which it contains) is an interval64 matrix; the
// structured rows of the Jacobian (local.hpp, block_dense_jacobian_on_box) evaluated on it give an interval
// matrix [J] with J(X') ∈ [J] for every X' in the box: every operation is an outward-rounded interval
// operation on enclosures of its arguments, so by inclusion isotonicity each entry encloses its range over
// the box. The softmax rows use a point shift, exp(s − c)/Σ exp(s − c) (exact for every c), so no interval is
// subtracted from itself there. The width of [J] is first order in r (each entry is a composition of
// Lipschitz functions of the box), which is what the tightness benchmark measures. Then
//   sup over the region of ‖J(X')‖∞ ≤ max_row Σ_col mag([J]_rc)   (rounded up; equal to the maximum over
//                                                                    the interval matrix itself)
//   sup over the region of ‖J(X')‖₂ ≤ certified upper bound on ‖·‖₂ for every matrix in [J]
//                                     (core/spectral_norm.hpp on the interval64 matrix)
// and a point of the region gives the lower ends: sup ≥ ‖J(X')‖ for any X' in the region — the centre
// (certified lower bounds from local_jacobian_norms) or a point found by ascent (region_witness).
//
// Second-order form (docs/local.md; softmax attention without rotary embeddings): for X' in the region,
// ‖J(X')‖ ≤ ‖J(X)‖ (certified at the centre) + ρ·slope, ρ ≥ ‖X' − X‖_F, slope a certified bound on the second
// derivative over the box (forward-mode interval64 enclosures of ∂J/∂x_k, the mean-value theorem per entry,
// Cauchy–Schwarz over k). Spectral-gap form (same scope, ‖·‖₂ only): the same enclosures of ∂J/∂x_k in a
// 2 × 2 bound on J(X')ᵀJ(X') split along the top right singular vector of J(X), whose excess is first order
// in the rate of σ_max itself. The report keeps the smallest upper end and says which form gave it.
//
// Honest outcomes: an enclosure with a non-finite entry, or an upper end no smaller than the best certified
// closed-form bound that applies on the region (bounds.hpp; tokens in B_R with R = max‖x_i‖ + ε for the
// ball, + r√d for the box), is reported as "not certified: enclosure too wide" with that closed-form bound
// beside it — never as a certified region constant.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>
#include <regatta/operators/lipschitz/local.hpp>

namespace regatta::lip {

enum class RegionShape { ball, box };

std::string to_string(RegionShape shape);

struct Region {
  RegionShape shape = RegionShape::ball;
  double radius = 0;  ///< ε of the Frobenius ball, or the half-width r of the box; finite, > 0
};

/// A certified closed-form upper bound on the Lipschitz constant that holds on the region (every token in
/// B_R), for comparison with the enclosure.
struct ClosedFormBound {
  std::string id;     ///< the claim ID of the bound (bounds.hpp, info(bound).id)
  double upper = 0;   ///< CERTIFIED upper bound, rounded up
  double radius = 0;  ///< R used (every token of every X' in the region lies in B_R)
};

/// The second-order form (docs/local.md, "Second-order form"): for X' in the region, ‖X' − X‖_F ≤ radius and
///   ‖J(X')‖ ≤ ‖J(X)‖ + ‖X' − X‖_F · slope,
/// slope a certified bound on the second derivative over the box that contains the region (the mean-value
/// theorem applied to each entry of J along the segment [X, X'], and Cauchy–Schwarz over the coordinates).
/// Every number is CERTIFIED and rounded up.
struct SecondOrderSummary {
  double centre_two = 0;  ///< ‖J(X)‖₂ ≤ centre_two
  double centre_inf = 0;  ///< ‖J(X)‖∞ ≤ centre_inf
  double slope_two = 0;  ///< ‖J(X') − J(X)‖₂ ≤ ‖X' − X‖_F · slope_two (+inf: enclosure not finite)
  double slope_inf = 0;  ///< ‖J(X') − J(X)‖∞ ≤ ‖X' − X‖_F · slope_inf
  double two_upper = 0;  ///< centre_two + radius · slope_two
  double inf_upper = 0;  ///< centre_inf + radius · slope_inf
  double radius = 0;     ///< ε for the ball, r·√(n·d) for the box
  /// The spectral-gap form (docs/local.md, "Spectral-gap form"): ‖J(X')‖₂² ≤ λ_max([[a, c], [c, b]]) with v
  /// the top right singular vector of J(X), a ≥ ‖J(X')v‖², b ≥ ‖J(X')(I − vvᵀ)‖₂², c the coupling;
  /// first-order rate gap_rate/‖J(X)‖₂. gap_two = +inf when it was not formed.
  double gap_two = std::numeric_limits<double>::infinity();
  double gap_rate = 0;       ///< ‖g‖, g_k ≥ sup |wᵀ ∂_kJ v| over the region (w = J(X)v)
  double gap_sigma_two = 0;  ///< ‖J(X)(I − vvᵀ)‖₂ ≤ gap_sigma_two
  double gap_coupling = 0;   ///< c
  /// The segment pieces used (docs/local.md, "Radius pieces" and "Taylor form"); taylor_pieces = 0 when
  /// the Taylor form was not formed.
  int radius_pieces = 1;
  int taylor_pieces = 0;
};

/// A certified lower end of the supremum over the region: ‖J(X')‖ at one point X' of the region (the sup is
/// at least that), found by projected ascent from the centre (region_witness).
struct RegionWitness {
  /// CERTIFIED lower bound (rounded down) on ‖J(X')‖ (this norm), and so on the sup over the region; unset
  /// when the witness could not be verified (`reason`).
  std::optional<double> lower;
  double estimate = 0;   ///< ESTIMATE: the witness value in double (‖J(X')v‖ for a unit v, or a row sum)
  Matrix<double> input;  ///< X' (certainly in the region when `lower` is set)
  /// CERTIFIED upper bound (rounded up) on ‖X' − X‖_F (ball) or max |X'_ia − X_ia| (box), never above the
  /// region's radius when `lower` is set.
  double distance = 0;
  std::string origin;  ///< the start: "centre", "centre, against the gradient" or "random k"
  std::string reason;  ///< why `lower` is unset
};

struct RegionNormReport {
  Region region;
  /// "certified", or "not certified: enclosure too wide (...)" with the reason.
  std::string status;
  bool certified = false;
  double two_upper = 0;  ///< CERTIFIED (when certified): sup over the region of ‖J(X')‖₂ ≤ two_upper
  std::string two_upper_method;  ///< how two_upper was obtained (the form and the spectral-norm certificate)
  /// Which bound gave two_upper / inf_upper: "first-order enclosure" (the interval Jacobian over the box),
  /// "second-order form" or (two_upper only) "spectral-gap form" (the smallest is kept).
  std::string two_upper_form, inf_upper_form;
  double inf_upper = 0;  ///< CERTIFIED (when certified): sup over the region of ‖J(X')‖∞ ≤ inf_upper
  /// Largest entry width of [J] relative to the largest entry magnitude (a diagnostic of the enclosure).
  double relative_width = 0;
  std::optional<ClosedFormBound> closed_form_two, closed_form_inf;  ///< best certified bound, if any applies
  std::optional<SecondOrderSummary> second_order;  ///< when the second-order form applies and was run
  /// With RegionOptions::lower_witness: the certified lower ends of sup ‖J‖₂ and sup ‖J‖∞ over the region.
  std::optional<RegionWitness> two_witness, inf_witness;
};

/// The projected ascent of region_witness: from the centre, from the boundary point against the gradient at
/// the centre, and from `random_starts` seeded random points of the region's boundary, at most `ascent_steps`
/// steps each (accepted or rejected).
struct RegionWitnessOptions {
  int random_starts = 2;
  int ascent_steps = 30;
  std::uint64_t seed = 0;
  unsigned precision_bits = 128;  ///< of the interval re-evaluation at the witness (certify_witness)
};

struct RegionOptions {
  /// Largest n·d for the dense enclosure (n·d × n·d interval64 entries, 16 bytes each).
  Eigen::Index dense_limit = 4096;
  /// Compare with the closed-form bounds of bounds.hpp (their certified evaluation costs a few spectral
  /// norms per head); false skips them (the bisection of region_certified_radius does not need them).
  bool closed_form = true;
  /// Also run the second-order form (it needs the closed-form Jacobian: softmax attention without rotary
  /// embeddings) and keep the smaller bound. Its cost is about n·d/8 forward-mode interval evaluations of the
  /// Jacobian (about 200 s of one core at n·d = 544, its passes on OpenMP threads), so callers opt in
  /// (regatta local --ball/--box does).
  bool second_order = false;
  /// Largest n·d at which the second-order form also certifies ‖∂_k J‖₂ by the binary64 spectral certificate
  /// for each coordinate k (else the norm products of second_order.hpp).
  Eigen::Index second_order_spectral_limit = 256;
  /// Segment pieces of the second-order forms (docs/local.md, "Radius pieces"): every enclosure over the
  /// region is the average of M enclosures over the nested regions X + (j/M)(region − X), M times the
  /// passes, and the tighter the larger the radius. 0: automatic (region_pieces below, with pieces_budget);
  /// M ≥ 1: M radius pieces and, where the Taylor form runs (n·d ≤ 128), M Taylor pieces, at any n·d.
  int pieces = 0;
  /// The automatic choice's budget of second-order passes (region_pieces); 0 gives its smallest choice (4
  /// radius pieces and 2 Taylor pieces where n·d ≤ 128), which the radius bisection uses because it
  /// evaluates the region at every step.
  Eigen::Index pieces_budget = 64;
  /// Also look for the certified lower ends (region_witness, both norms): a few dozen double linearisations
  /// and one interval re-evaluation per norm.
  bool lower_witness = false;
  RegionWitnessOptions witness{};
  Progress progress{};
};

/// The automatic segment pieces at n·d = nd: {radius pieces, Taylor pieces}. The Taylor pieces are the
/// largest power of two up to 16 whose second-order passes (⌈n·d/8⌉(⌈n·d/8⌉ + 1)/2 per piece) number at most
/// `budget` in all, and at least 2; the radius pieces are max(4, Taylor pieces) where n·d ≤ 128, else 1.
std::pair<int, int> region_pieces(Eigen::Index nd, Eigen::Index budget = 64);

/// The box of half-width r around X as an interval64 matrix: entry (i, a) contains [X_ia − r, X_ia + r]
/// (endpoints rounded outward).
Matrix<interval64> region_box(const Matrix<double>& X, double r);

/// Why the region enclosure does not apply to (layer, options) (it needs the structured rows: softmax
/// attention), or nullopt.
std::optional<std::string> region_refusal(const operators::AttentionLayer& layer,
                                          const operators::AttentionOptions& options);

/// Certified sup over the region of ‖J‖₂ and ‖J‖∞ for one self-attention block (see the file comment).
/// Throws InputError for a refused configuration, a radius that is not finite and > 0, n·d above
/// options.dense_limit, or a bad X.
RegionNormReport region_jacobian_norms(const operators::AttentionLayer& layer,
                                       const operators::AttentionOptions& options, const Matrix<double>& X,
                                       const Region& region, const RegionOptions& options_region = {});

/// A point X' of the region with a large ‖J(X')‖ (`norm`: 2 or ∞), and the certified lower bound it gives
/// on the sup over the region. Projected ascent (the method of search.hpp, confined to the region): the
/// objective is ‖J(X')v‖ for the unit v of a warm-started power iteration (2-norm) or the largest absolute
/// row sum of J(X') (∞-norm: every row, from the structured rows); its X'-gradient, the bilinear form's
/// d/dh VJP(X' + hv; u) by central differences, only chooses the step's direction. The first step from the
/// centre goes to the boundary along that gradient (the first-order maximiser over the ball; over the box,
/// along its signs); later steps are projected back onto the region, with a margin that interval
/// arithmetic verifies (‖X' − X‖_F ≤ ε, or |X'_ia − X_ia| ≤ r, outward-rounded in interval64); a step is kept
/// only when the probed value increases. The best point is polished by a converged power iteration and
/// re-evaluated by certify_witness (interval arithmetic at options.precision_bits at the exact binary64
/// point). Throws what region_jacobian_norms throws for bad input.
RegionWitness region_witness(const operators::AttentionLayer& layer,
                             const operators::AttentionOptions& options, const Matrix<double>& X,
                             const Region& region, Norm norm,
                             const RegionWitnessOptions& options_witness = {});

/// The certified robustness radius from the region enclosure: with logits g = readout ∘ F, a readout of
/// Lipschitz constant L_out (in ℓ₂) and margin m = g_y − max_{j≠y} g_j at X, for X' in B(X, ρ):
///   |g(X') − g(X)|₂ ≤ L_out·‖F(X') − F(X)‖_F ≤ L_out·ρ·sup over B(X, ρ) of ‖J‖₂   (mean-value inequality on
///   the segment, which lies in the ball),
/// and the argmax cannot change when m > √2·L_out·ρ·sup ‖J‖₂ (the √2 of Tsuzuku et al. 2018: a logit
/// difference moves by at most √2 times the ℓ₂ change). The radius is the largest ρ found by bisection with
/// that inequality CERTIFIED (outward-rounded) by region_jacobian_norms on B(X, L_in·ρ) (embedding_lipschitz
/// L_in maps the input ball into the token ball). Bisection runs on [0, ρ₀], ρ₀ = m/(√2·L_out·‖J(X)‖₂
/// estimate) (no larger radius can pass, since the sup is ≥ ‖J(X)‖₂), until hi − lo ≤ relative_tolerance·ρ₀.
/// Every accepted ρ is certified by its own evaluation (the sup bound need not be monotone in ρ).
struct RegionRadiusOptions {
  double relative_tolerance = 1e-3;
  int max_steps = 40;
  RegionOptions region{};
};

struct RegionRadiusResult {
  double radius = 0;             ///< CERTIFIED: the largest ρ whose check passed (0: none)
  double sup_two_at_radius = 0;  ///< the certified sup ‖J‖₂ over B(X, L_in·radius) used by that check
  double first_order_limit = 0;  ///< ρ₀ (an ESTIMATE: no radius above it can be certified this way)
  double first_failure = 0;      ///< smallest ρ tested that failed (+inf: none failed)
  int steps = 0;                 ///< region evaluations
};

/// Throws InputError for margin ≤ 0, non-finite or negative Lipschitz constants, and what
/// region_jacobian_norms refuses.
RegionRadiusResult region_certified_radius(const operators::AttentionLayer& layer,
                                           const operators::AttentionOptions& options,
                                           const Matrix<double>& X, const MarginSetting& setting,
                                           double jacobian_norm_estimate,
                                           const RegionRadiusOptions& options_radius = {});

}  // namespace regatta::lip
