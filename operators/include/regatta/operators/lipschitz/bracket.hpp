#pragma once
// Brackets [lower, upper] for the Lipschitz constant of an attention block on sequences of length n
// (docs/conventions.md#what-a-number-means; docs/math/bounds.md#dot-product-unbounded,
// docs/math/bounds.md#kim-tightness).
//
//   lower  the best witness of the adversarial search (search.hpp): ‖J(X)v‖_F (2-norm) or one absolute row
//          sum of J(X) (∞-norm) at a point X of the domain — a lower bound on Lip(F) over the domain;
//   upper  the smallest applicable sequence-level bound of bounds.hpp in the chosen norm: kim.thm32_inf,
//          kim.thm32_2 or castin.sqrt_n (component bounds such as softmax.half, the local castin.local and
//          the measure-level mf.* are not bounds on this constant and are never used);
//   ratio  lower / upper (0 when no bound applies: upper = +inf).
// Domain: every token in the closed Euclidean ball B_R when a radius is given, else R^{n×d}.
//
// Estimates and certification. Without `certify`, lower is the double value of the witness and upper the
// double value of the bound (both ESTIMATES). With `certify` both are re-evaluated at `precision_bits` in
// interval arithmetic: lower becomes the lower endpoint of an enclosure of ‖J(X)v‖_F/‖v‖_F (resp. of
// Σ_k |J_rk(X)|) computed by the interval Block at the exact binary64 witness (X, v), after checking in
// interval arithmetic that every token of X lies in B_R; upper becomes BoundReport::certified_upper.
// `certified` is true only when both ends are certified (an inapplicable bound or a witness that cannot be
// verified leaves it false, with the reason in `note`).
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>
#include <regatta/operators/lipschitz/search.hpp>

namespace regatta::lip {

struct BracketOptions {
  Norm norm = Norm::two;
  std::int64_t n = 0;            ///< sequence length, >= 1 (the L2 bounds need n >= 2)
  std::optional<double> radius;  ///< tokens in the closed Euclidean ball B_R (domain and bounds)
  bool certify = false;
  unsigned precision_bits = 128;  ///< interval precision of the certification and of the bounds (>= 53)
  SearchOptions search;           ///< search settings; its norm and radius are replaced by the ones above
  /// Largest n·d for the region enclosure of the upper end (certify with a radius); 0 switches it off.
  std::int64_t region_limit = 512;
};

struct Bracket {
  double lower = 0;  ///< ESTIMATE, or with certify the CERTIFIED lower bound (rounded down)
  double upper = std::numeric_limits<double>::infinity();           ///< ESTIMATE, or CERTIFIED with certify
  double ratio = 0;                                                 ///< lower / upper
  bool certified = false;                                           ///< both ends certified
  double lower_estimate = 0;                                        ///< the witness value in double
  double upper_estimate = std::numeric_limits<double>::infinity();  ///< the bound in double
  std::optional<double> lower_certified, upper_certified;  ///< set when certify succeeded for that end
  Norm norm = Norm::two;
  std::int64_t n = 0;
  std::optional<double> radius;
  std::string bound_name;            ///< claim ID of the bound giving `upper`; empty when none applies
  std::string bound_description;     ///< its name in bounds.hpp's catalogue
  std::vector<std::string> refused;  ///< "claim: reason" for each sequence-level bound that does not apply
  JacobianWitness witness;
  bool all_rows = false;  ///< ∞-norm: the witness value is ‖J(X)‖∞ (every row examined)
  std::int64_t evaluations = 0;
  bool stopped_by_budget = false;       ///< the time budget ended the search early
  bool stopped_by_evaluations = false;  ///< the evaluation cap ended the search early
  std::string note;                     ///< what limited the certification, if anything
  /// With certify and a radius: the CERTIFIED sup of ‖J‖ (this norm) over the box [−R, R]^{n×d}, which
  /// contains every input with tokens in B_R (region.hpp); it becomes the upper end (bound_name
  /// "region.box_enclosure") when it is below the best formula bound. Unset when the enclosure was not
  /// computed (no radius, n·d above region_limit, a refused configuration) or was too wide.
  std::optional<double> region_upper;
  std::string region_note;  ///< why region_upper is unset, or what it was compared with
};

/// The bracket for (layer, options) (see the file comment). Throws InputError for bad input (an invalid
/// layer, n < 1, a non-positive radius, precision_bits < 53 or above max_precision_bits, invalid search
/// options).
Bracket compute_bracket(const operators::AttentionLayer& layer, const operators::AttentionOptions& options,
                        const BracketOptions& bracket);

struct WitnessCertificate {
  std::optional<double> lower;  ///< CERTIFIED lower bound on ‖J(X)‖ (rounded down); unset when not verified
  std::string reason;           ///< why it is unset
};

/// Re-evaluates a witness in interval arithmetic at `precision_bits` (see the file comment). With a radius,
/// every token must certainly lie in B_R. Cost: one interval linearisation plus one interval JVP (2-norm)
/// or VJP (∞-norm).
WitnessCertificate certify_witness(const operators::AttentionLayer& layer,
                                   const operators::AttentionOptions& options, const JacobianWitness& witness,
                                   Norm norm, std::optional<double> radius, unsigned precision_bits);

// ---- the Kim et al. tightness family (docs/math/bounds.md#kim-tightness, claim kim.lower_family_inf) ----

/// The layer of the tightness experiment: d = H = d_h = d_v = 1, tied L2, every weight 1, no bias.
operators::AttentionLayer kim_unit_layer();

/// Closed form of the first-row absolute sum of J at the family input x = (0, ±√t, …) for odd n ≥ 3 and
/// t ≥ 1/2 (docs/math/bounds.md#kim-tightness): 4(1 − p)t + 2p − 1 with p = 1/(1 + (n − 1)e^{−t}). Derived,
/// not computed from
/// a Jacobian; used to test the Jacobian path.
double kim_family_row_sum(std::int64_t n, double t);

struct TightnessPoint {
  std::int64_t n = 0;
  double t = 0;      ///< the maximising squared distance (estimate)
  double lower = 0;  ///< ESTIMATE: max over t of the first-row absolute sum of J (a VJP of the Block)
  double upper = 0;  ///< ESTIMATE: kim.thm32_inf = 4Λ_n + 1 for the unit layer
  double ratio = 0;
  Matrix<double> witness;  ///< the family input at t
};

/// The tightness family for the unit layer at length n ≥ 2: maximises the first row's absolute sum over
/// t ∈ [0.5, 40] (12 log-spaced points, then 40 golden-section steps: ~55 linearisations and VJPs of size
/// n, O(n²) each; about a second at n = 1000).
TightnessPoint kim_tightness(std::int64_t n);

// ---- Kim et al. Theorem 3.1: dot-product attention is not Lipschitz (claim kim.thm31_dp_unbounded) ----

struct GrowthPoint {
  double scale = 0;  ///< c of the construction
  double value =
      0;  ///< ‖J(X_c)v‖/‖v‖ (2) or the first token's largest row sum (∞) in mpfr, rounded to double
  std::optional<double> certified_lower;  ///< interval lower endpoint of the same quantity (rounded down)
  Matrix<double> input;                   ///< X_c
};

/// The balanced construction of docs/math/bounds.md#dot-product-unbounded at each scale c: X_c =
/// balanced_input(n, u, c, 0) with u a
/// seeded Gaussian unit vector (u = 1 for d = 1), so ‖J(X_c)‖ grows like c² for every dot-product layer with
/// A_h ≠ 0 ≠ W^V_h. The direction (2-norm: power iteration in double; ∞: the row of token 0 with the largest
/// sum in double) is fixed in double, then the value is evaluated in mpfr and certified in interval
/// arithmetic, both at precision_bits. Throws InputError for bad input or a non-positive scale.
std::vector<GrowthPoint> theorem31_growth(const operators::AttentionLayer& layer,
                                          const operators::AttentionOptions& options, Eigen::Index n,
                                          std::span<const double> scales, Norm norm,
                                          unsigned precision_bits = 256, std::uint64_t seed = 0);

}  // namespace regatta::lip
