#pragma once
// Estimates from below of the Lipschitz constant of an attention block by adversarial search over inputs
// (docs/math/bounds.md#dot-product-unbounded, docs/math/bounds.md#kim-tightness,
// docs/math/bounds.md#castin-adversarial; docs/math/jacobian.md#matrix-free-norms).
//
// For a differentiable F, every ‖J_F(X)‖ is a lower bound on Lip(F) over any convex set containing X
// (README.md, "Norms"). The search maximises, over token matrices X (n×d),
//   norm 2    ‖J(X) v‖_F for a unit v, v from power iteration on JᵀJ (one JVP and one VJP per step): ≤ ‖J‖₂;
//   norm inf  one absolute row sum Σ_k |J_rk(X)| (row r of J is one VJP): ≤ ‖J‖∞,
// on the domain: every token in the closed Euclidean ball B_R (the `radius` of BoundSetting) when a radius
// is given, else all of R^{n×d}.
//
// Method (multistart projected ascent).
//  1. Seeds: the near-extremal constructions of docs/math/bounds.md, each a one-parameter family X(θ) whose
//     scale θ
//     is optimised first (a log-spaced scan, then golden section):
//       kim       (docs/math/bounds.md#kim-tightness) a designated token at 0, ⌈(n−1)/2⌉ tokens at +s·u,
//                 ⌊(n−1)/2⌋ at −s·u, with u the
//                 top left singular vector of W^Q_h (and one seeded Gaussian u) and s = √(t/uᵀA_h u), so that
//                 the pairs meet at scaled squared distance t — for d = H = 1 exactly the tightness family;
//       thm31     (docs/math/bounds.md#dot-product-unbounded) the same balanced layout and the single spike
//                 (one token at c·u, the rest at 0), u the
//                 top right singular vector of A_h and a Gaussian u, scale c;
//       castin    (docs/math/bounds.md#castin-adversarial) u a real unit eigenvector of A_h for λ_max or
//       λ_min: x_1 = r u, x_2..n = (r/2) u
//       when
//                 λ_max > −8λ_min, else x_1 = −r u, x_2..n = r u, scale r;
//     for every head (the first 8), with the designated token last when the layer is causal (it then sees
//     every token). Then `random_starts` seeded Gaussian inputs.
//  2. From the best point of each family and from each random start: ascent along the gradient of the
//     objective, normalised steps of adaptive length (×1.5 after an accepted step, ÷3 after a rejected one),
//     projection onto the domain after every step, a step accepted only if the probed value increases.
//     Gradient: at a probed (X, v) the objective is ⟨u, J(X)v⟩ with u = Jv/‖Jv‖ (2-norm) or ⟨e_r, J(X)s⟩
//     with s the signs of row r (∞-norm); its X-gradient is the second-order term d/dh VJP(X + hv; u),
//     approximated by the central difference of two VJPs (symmetry of D²F). The approximation only chooses
//     directions; every reported value is a probe at the returned point.
//  3. The best point is polished: power iteration to convergence (2-norm), every row examined (∞-norm,
//     see full_row_limit below; the largest row is then re-evaluated by one VJP, so the reported value and
//     its signs come from the same computation as every other probe). Every family's best point competes even
//     when the budget ends before its ascent; the polish (and the certification of bracket.hpp) run after the
//     budget.
//
// Projection: a token outside B_R is scaled to norm R(1 − 2^-50), so that the witness lies in the ball with
// a margin that the certification (bracket.hpp) can verify in interval arithmetic.
// Cost per probe: one linearisation (O(H n² (d_h + d)) for the materialised kernels) plus ~6 JVP/VJP pairs
// (2-norm) or d VJPs per tracked token (∞-norm). Reproducible: all randomness comes from `seed`; a run cut
// short by budget_seconds depends on the machine's speed (the evaluation cap does not).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>

namespace regatta::lip {

/// Rows examined at the final point of an ∞-norm search: for softmax blocks every row, through the
/// structured rows of local.hpp (block_jacobian_norm_inf, O(H n² d²)); otherwise (Sinkhorn) every row when
/// n·d ≤ full_row_limit and n·d·n² ≤ full_row_work (n·d VJPs of O(n²) each: about 10^8 multiply-adds per
/// head; n ≤ 464 for d = 1), else the rows of the tokens tracked during the search.
inline constexpr Eigen::Index full_row_limit = 4096;
inline constexpr double full_row_work = 1e8;

struct SearchOptions {
  Norm norm = Norm::two;
  /// Every token in the closed Euclidean ball B_R; unset: unconstrained.
  std::optional<double> radius;
  int random_starts = 4;  ///< random starts after the structured seeds (>= 0)
  int ascent_steps = 40;  ///< steps (accepted or rejected) of each local ascent (>= 0)
  /// Linearisations at most (each probe, and each of the two sides of a gradient, is one); >= 1.
  std::int64_t max_evaluations = 20000;
  double budget_seconds = 0;  ///< wall-clock limit of the search; 0: none
  std::uint64_t seed = 0;
  bool structured_seeds = true;  ///< false: random starts only
  /// Called with one line of progress (e.g. written to stderr by the CLI); may be empty.
  std::function<void(const std::string&)> progress;
  /// Called often (at every budget check: between power steps, ascent steps and probes) with the number of
  /// linearisations so far; may be empty. It may throw to abandon the search (the Python module throws on a
  /// pending Ctrl-C); the exception propagates out of search_jacobian_norm and compute_bracket unchanged.
  std::function<void(std::int64_t evaluations)> poll;
};

/// A point X with what makes its value checkable (see bracket.hpp for the interval re-evaluation).
struct JacobianWitness {
  Matrix<double> input;  ///< X (n×d), inside the domain
  /// 2-norm: the unit direction v (n×d); ∞-norm: the signs s of row `row` (entries in {−1, 0, 1}).
  Matrix<double> direction;
  Eigen::Index row = -1;  ///< ∞-norm: flat row index i·d + a of J
  /// ESTIMATE (double): ‖J(X)v‖_F (2) or Σ_k |J_row,k(X)| (∞); each ≤ ‖J(X)‖ ≤ Lip(F) up to rounding.
  double value = 0;
  std::string origin;  ///< the seed it came from, e.g. "kim head 0 (top singular vector)", "random 2"
};

struct SeedValue {
  std::string origin;
  double value = 0;  ///< best probed value reached from this seed (estimate)
};

struct SearchResult {
  JacobianWitness best;
  /// ∞-norm: true when every row was examined at the returned point, so best.value is ‖J(X)‖∞ there.
  bool all_rows = false;
  std::int64_t evaluations = 0;         ///< linearisations performed
  bool stopped_by_budget = false;       ///< the time budget (budget_seconds) ended the search early
  bool stopped_by_evaluations = false;  ///< the evaluation cap (max_evaluations) ended the search early
  std::vector<SeedValue> seeds;         ///< every seed tried, in order
};

/// Runs the search for the block (layer, options) on sequences of length n. Throws InputError for an
/// invalid layer or options (as operators::Block), n < 1, a non-positive radius, or invalid SearchOptions.
SearchResult search_jacobian_norm(const operators::AttentionLayer& layer,
                                  const operators::AttentionOptions& options, Eigen::Index n,
                                  const SearchOptions& search);

/// One near-extremal construction of docs/math/bounds.md as a one-parameter family X(θ), θ in [low, high].
struct SeedFamily {
  std::string name;
  std::function<Matrix<double>(double)> input;
  double low = 0, high = 0;
  std::vector<Eigen::Index> tokens;  ///< tokens whose rows are tracked for the ∞-norm
};

/// The structured seeds of the search (step 1 of the file comment) for sequences of length n ≥ 1; with a
/// radius every family stays in the domain. `seed` draws the Gaussian directions.
std::vector<SeedFamily> near_extremal_families(const operators::AttentionLayer& layer,
                                               const operators::AttentionOptions& options, Eigen::Index n,
                                               std::optional<double> radius, std::uint64_t seed);

/// The balanced layout of docs/math/bounds.md#dot-product-unbounded and docs/math/bounds.md#kim-tightness:
/// token `zero` at 0, then alternately +scale·u and −scale·u
/// over the other tokens in increasing order (so ⌈(n−1)/2⌉ at +, ⌊(n−1)/2⌋ at −). u has length d.
Matrix<double> balanced_input(Eigen::Index n, const Vector<double>& u, double scale, Eigen::Index zero);

}  // namespace regatta::lip
