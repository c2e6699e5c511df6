#pragma once
// Local regularity of an attention layer at one input X: norms of the Jacobian J = DF(X) computed matrix-free
// from JVPs / VJPs (shared/math/attention.md §4.8), and the local sensitivity of Havens, Araujo, Zhang, Hu
// (2024) as reconstructed in shared/math/bounds.md §6 (claims havens.* of shared/math/claims.md).
//
// Norms (shared/math/README.md): inputs and outputs in Frobenius norm (the flattened ℓ₂ norm), ‖J‖₂ the
// spectral norm of the n·e × n·d Jacobian with the row-major vectorisation (i, a) ↦ i·d + a, ‖J‖∞ its
// maximum absolute row sum, ‖J‖₁ its maximum absolute column sum.
//
// What each number is (design.md, "Certified means outward-rounded"):
//   ESTIMATE   a double computation: the Lanczos / power-iteration value ‖J w‖_F/‖w‖_F (from below in exact
//              arithmetic, claim havens.power_iteration), or a floating-point evaluation of an exact
//              formula (‖J‖∞ as a maximum of row sums, δ with estimated spectral norms).
//   CERTIFIED  the endpoint of an outward-rounded interval evaluation on the exact binary64 inputs: a
//              certified lower bound on ‖J‖₂ from an interval JVP at the Lanczos witness, a certified upper
//              bound from the dense interval Jacobian (small sizes), interval enclosures of ‖J‖∞, of the
//              Havens ingredients and of δ.
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/layer.hpp>

namespace regatta::lip {

/// Reports progress of long loops: `stage` names the loop, `done` of `total` steps are finished. Called at
/// most a few hundred times per loop; may be empty.
using Progress = std::function<void(std::string_view stage, Eigen::Index done, Eigen::Index total)>;

// =========================================================================================================
// Spectral norm of a linear map given by its action (matrix-free)
// =========================================================================================================

enum class SpectralMethod {
  lanczos,  ///< Lanczos on MᵀM with full reorthogonalisation (the default: far fewer steps)
  power,    ///< power iteration v ← MᵀMv/‖MᵀMv‖
};
std::string to_string(SpectralMethod method);
/// "lanczos" or "power"; anything else throws InputError naming `subject`.
SpectralMethod parse_spectral_method(const std::string& text, const std::string& subject = "--method");

struct SpectralOptions {
  SpectralMethod method = SpectralMethod::lanczos;
  /// Target relative accuracy τ of σ_max (> 0, < 1). Lanczos stops when the residual bound r = β_k|s_k| of
  /// the top Ritz pair (θ, y) of MᵀM satisfies r ≤ 2τθ: some eigenvalue λ of MᵀM has |λ − θ| ≤ r, hence
  /// |√λ − √θ| = |λ − θ|/(√λ + √θ) ≤ 2τθ/(√λ + √θ) ≈ τ√θ, and θ ≤ λ_max always (interlacing); once θ is
  /// the top Ritz value of a converged pair the Kato–Temple bound r²/gap is far smaller still. Power
  /// iteration stops when the relative change of its estimate falls below τ (a weaker criterion: its error
  /// is about τ/(1 − ρ⁴) for the gap ratio ρ = σ₂/σ₁).
  double relative_tolerance = 1e-10;
  /// MᵀM applications at most (≥ 1); Lanczos also stops at the dimension of the input space.
  int max_iterations = 500;
  /// Start vector: entries uniform in [−1, 1) from std::mt19937_64(seed) (same on every platform).
  std::uint64_t seed = 0x10ca1ULL;
};

/// The estimate of ‖M‖₂ and how it was obtained.
struct SpectralEstimate {
  /// ESTIMATE FROM BELOW: ‖M w‖_F for the unit witness w (exact arithmetic: ≤ σ_max(M); the double
  /// evaluation may exceed it by rounding, about n·eps relative).
  double estimate = 0;
  Matrix<double> witness;  ///< w, unit Frobenius norm, the shape of the map's input
  int iterations = 0;      ///< MᵀM applications (each: one application of M and one of Mᵀ)
  bool converged = false;  ///< the stopping criterion of SpectralOptions was met
  /// Lanczos: r/(2θ), an estimate of the relative error of estimate (see SpectralOptions); power: the last
  /// relative change of the estimate.
  double relative_error = 0;
  SpectralMethod method = SpectralMethod::lanczos;
};

/// A linear map between n×d-shaped matrices (rows and columns fixed by the caller).
using LinearMap = std::function<Matrix<double>(const Matrix<double>&)>;

/// σ_max(M) for M: R^{rows×cols} → R^{out_rows×out_cols} given by `apply` (V ↦ M V) and `apply_transpose`
/// (U ↦ Mᵀ U), never formed. Cost per iteration: one apply and one apply_transpose, plus O(k·rows·cols) for
/// the reorthogonalisation against the k previous Lanczos vectors (memory k·rows·cols doubles). The zero map
/// gives estimate 0, converged. Throws InputError for rows·cols = 0 or invalid options
/// ("relative_tolerance", "max_iterations").
SpectralEstimate matrix_free_norm_2(const LinearMap& apply, const LinearMap& apply_transpose,
                                    Eigen::Index rows, Eigen::Index cols,
                                    const SpectralOptions& options = {});

// =========================================================================================================
// Norms of the Jacobian J = DF(X) of a block or stack (attention.md §4.8)
// =========================================================================================================

/// ‖J‖₂ by matrix_free_norm_2 with apply = lin.jvp, apply_transpose = lin.vjp (one JVP and one VJP per step).
/// An ESTIMATE FROM BELOW (claim havens.power_iteration); see jacobian_ratio_enclosure for the certified
/// lower bound at the returned witness.
SpectralEstimate jacobian_norm_2(const operators::Linearization<double>& lin,
                                 const SpectralOptions& options = {});

/// Interval enclosure of ‖J w‖_F/‖w‖_F, computed at the working precision from an interval linearisation of
/// the same layer at the same X (Block<interval>(layer, options).linearize(X)) and the exact double witness
/// w. Its lower endpoint is a CERTIFIED lower bound on ‖J‖₂ (‖J w‖/‖w‖ ≤ ‖J‖₂ for every w ≠ 0). Cost: one
/// interval JVP. Throws InputError for a wrong shape or w = 0.
interval jacobian_ratio_enclosure(const operators::Linearization<interval>& lin, const Matrix<double>& w);

/// An induced norm with the row (or column) that attains it.
template <class S>
struct InducedNorm {
  /// double / mpfr: the floating-point evaluation of the exact maximum of absolute row (column) sums;
  /// interval: an enclosure [max of lower ends, max of upper ends] of the exact value.
  S value{};
  Eigen::Index index = 0;  ///< row (column) i·d + a of the maximum (interval: largest upper end)
};

/// ‖J‖∞ = max over rows (i, a) of ‖VJP(E_ia)‖₁ (attention.md §4.8): n·e VJPs, O(n·e) memory beyond one VJP.
/// For S = interval the value encloses ‖J‖∞ (certified). Instantiated for double, mpfr and interval.
template <class S>
InducedNorm<S> jacobian_norm_inf(const operators::Linearization<S>& lin, const Progress& progress = {});

/// ‖J‖₁ = max over columns (j, b) of ‖JVP(E_jb)‖₁: n·d JVPs. Same guarantees as jacobian_norm_inf.
template <class S>
InducedNorm<S> jacobian_norm_one(const operators::Linearization<S>& lin, const Progress& progress = {});

// ---- one softmax block: rows of J from their rank-one structure ----

/// Why the structured row path does not apply to (layer, options), or nullopt: it needs softmax attention
/// (sinkhorn_iterations = 1); dot or l2, masks, biases, residual and pre-norm are all handled.
std::optional<std::string> structured_rows_refusal(const operators::AttentionLayer& layer,
                                                   const operators::AttentionOptions& options);

/// ‖J‖∞ of one self-attention block at X from the structure of its rows: with Fbar = E_ia only row i of the
/// score cotangent is non-zero, S̄_i· = P_i· ⊙ (V_·a − F_ia), so every row of J is a sum of 2H rank-one terms,
/// a term in row i and the row-wise pre-norm VJP (attention.md §4.1–§4.6). Cost O(H·n²·d²) for all rows
/// instead of n·d generic VJPs of O(H·(n²d + nd²)) each; the same numbers up to rounding (tested against
/// jacobian_norm_inf and the dense Jacobian). S = double (ESTIMATE: floating-point evaluation) or interval
/// (CERTIFIED enclosure at the working precision). Throws InputError(refusal) when structured_rows_refusal
/// gives a reason, and for a bad X.
template <class S>
InducedNorm<S> block_jacobian_norm_inf(const operators::AttentionLayer& layer,
                                       const operators::AttentionOptions& options, const Matrix<double>& X,
                                       const Progress& progress = {});

/// The dense Jacobian (n·d × n·d) of one self-attention block from the same structured rows; for the
/// certified upper bound on ‖J‖₂ at small sizes. Same refusals as block_jacobian_norm_inf.
template <class S>
Matrix<S> block_dense_jacobian(const operators::AttentionLayer& layer,
                               const operators::AttentionOptions& options, const Matrix<double>& X,
                               const Progress& progress = {});

/// The same rows evaluated on a box: X is an interval matrix (S = interval or interval64) and entry (r, c)
/// of the result encloses J(X')_rc for EVERY X' in X (a CERTIFIED enclosure of the Jacobian over the box;
/// see region.hpp for the norms over balls and boxes). For a point X it is block_dense_jacobian.
template <class S>
Matrix<S> block_dense_jacobian_on_box(const operators::AttentionLayer& layer,
                                      const operators::AttentionOptions& options, const Matrix<S>& X,
                                      const Progress& progress = {});

// ---- everything about ‖J(X)‖ for one block (what `regatta local` reports) ----

/// Largest n·d for which the certified upper bound on ‖J‖₂ is computed by default: the dense interval
/// Jacobian (O(H·n²·d²) interval operations) and the interval Cholesky of θ²I − JᵀJ (O((n·d)³) at 106 bits;
/// measured 2 s at n·d = 256 on a loaded 2-core VM, about 8× per doubling of n·d).
inline constexpr Eigen::Index dense_certification_limit = 256;

struct LocalNormOptions {
  SpectralOptions spectral{};
  /// Working precision (bits, ≥ 64) of every interval evaluation.
  unsigned precision_bits = 128;
  /// Compute the certified lower bound on ‖J‖₂ (one interval linearisation and JVP: O(H·(n²d + nd²))
  /// interval operations, the dominant cost at large n). false is refused together with `certify`.
  bool certified_lower = true;
  /// Also compute the certified enclosure of ‖J‖∞ (n·d interval rows) and, for n·d ≤ dense_limit, the
  /// certified upper bound on ‖J‖₂ from the dense interval Jacobian.
  bool certify = false;
  Eigen::Index dense_limit = dense_certification_limit;
  Progress progress{};
};

struct LocalNormReport {
  SpectralEstimate two;  ///< ESTIMATE of ‖J‖₂ (from below), with witness and convergence
  double two_lower = 0;  ///< CERTIFIED lower bound on ‖J‖₂ (interval JVP at the witness, rounded down)
  bool has_two_lower = false;  ///< false when options.certified_lower is false
  double two_upper = 0;        ///< CERTIFIED upper bound on ‖J‖₂ when has_two_upper
  bool has_two_upper = false;
  std::string two_upper_method;  ///< spectral_norm_upper_certified's method ("interval-cholesky", ...)
  std::string two_upper_note;    ///< why there is no certified upper bound (when !has_two_upper)
  InducedNorm<double> inf;       ///< ‖J‖∞: floating-point evaluation of the exact formula (ESTIMATE)
  bool inf_structured = false;   ///< ‖J‖∞ came from the structured rows (else from n·d generic VJPs)
  double inf_lower = 0, inf_upper = 0;  ///< CERTIFIED enclosure of ‖J‖∞ when has_inf_enclosure
  bool has_inf_enclosure = false;
  /// The scalar that enclosed the dense Jacobian behind two_upper and the ‖J‖∞ enclosure (when
  /// has_two_upper): "interval64" (binary64 endpoints, tried first), or "interval (MPFI, b bits)" when the
  /// interval64 enclosure was not finite or wider than dense_jacobian_width_limit relative to its entries.
  std::string jacobian_scalar;
};

/// Largest entry width of an interval64 dense Jacobian, relative to max(1, its largest entry), that
/// local_jacobian_norms accepts before redoing the Jacobian in MPFI: 2^-26 (about 1.5e-8). The certified
/// upper bound on ‖J‖₂ then carries at most about n·d·2^-26 relative slack from the widths.
inline constexpr double dense_jacobian_width_limit = 0x1p-26;

/// ‖J(X)‖₂ (Lanczos or power iteration, certified lower bound, certified upper bound for small n·d) and
/// ‖J(X)‖∞ (structured rows when they apply, else generic VJPs; certified enclosure with options.certify) of
/// the self-attention block (layer, options) at X. Throws InputError for a bad layer, X or options
/// ("precision" below 64 bits, "certified_lower" false with certify).
LocalNormReport local_jacobian_norms(const operators::AttentionLayer& layer,
                                     const operators::AttentionOptions& options, const Matrix<double>& X,
                                     const LocalNormOptions& local = {});

// =========================================================================================================
// Local sensitivity (Havens et al. 2024; bounds.md §6)
// =========================================================================================================
//
// Setting: F(X) = X W^skip + Σ_h P_h(X) X W^VO_h (+ constant value/output biases), X' = X + E, ‖E‖_F ≤ ε.
// Hypotheses (bounds.md §6.3): dot-product softmax attention (Sinkhorn t = 1), no pre-normalisation; any
// W^skip (I with residual, else 0), H ≥ 1, masks (causal) allowed; a key bias drops out, a query bias adds
// 1 b_Q,hᵀ(W^K_h)ᵀEᵀ/√d_h to the score perturbation (§6.2). L2 attention, pre-norm and Sinkhorn t ≥ 2 are
// outside the reconstruction and refused.

/// Why the Havens quantities do not apply, or nullopt.
std::optional<std::string> havens_refusal(const operators::AttentionLayer& layer,
                                          const operators::AttentionOptions& options);

/// The ingredients of δ and of its comparators at X, in S: double = ESTIMATES (ξ, κ_h by matrix-free
/// Lanczos, from below; the other spectral norms by spectral_norm_reference), interval = CERTIFIED
/// enclosures (every norm enclosed; see havens_certified).
template <class S>
struct HavensIngredients {
  Eigen::Index n = 0;
  int heads = 0;
  S skip{};  ///< ‖W^skip‖₂ (1 with residual, else 0)
  /// ξ(X) = ‖I_n ⊗ (W^skip)ᵀ + Σ_h P_h(X) ⊗ (W^VO_h)ᵀ‖₂ (claim havens.xi_exact): max_{‖E‖≤ε}‖T₁‖_F = εξ.
  S xi{};
  /// κ_h(X) = ‖E ↦ E A_h Xᵀ + B_h Eᵀ‖_{F→F}, B_h = X A_h + 1 b_Q,hᵀ(W^K_h)ᵀ/√d_h (claim
  /// havens.score_identity; B_h = X A_h without query bias).
  std::vector<S> kappa;
  std::vector<S> score;         ///< ‖A_h‖₂, A_h = W^Q_h (W^K_h)ᵀ/√d_h
  std::vector<S> values;        ///< ‖W^VO_h‖₂
  std::vector<S> input_values;  ///< ‖X W^VO_h‖₂
  // ---- naive ingredients (bounds.md §6.4) and the gradient-norm comparator (§6.6) ----
  std::vector<S> kernel;         ///< ‖P_h(X)‖₂ (≤ √n)
  std::vector<S> value_factors;  ///< ‖W^V_h‖₂·‖W^O_h‖₂ (≥ ‖W^VO_h‖₂)
  std::vector<S> kappa_split;    ///< ‖X A_hᵀ‖₂ + ‖B_h‖₂ (≥ κ_h)
  std::vector<S> query_bias;     ///< ‖W^K_h b_Q,h‖₂/√d_h (0 without query bias)
  std::vector<S> query_key;      ///< ‖W^Q_h‖₂·‖W^K_h‖₂/√d_h (≥ ‖A_h‖₂)
  S input_two{};                 ///< ‖X‖₂
  S input_frobenius{};           ///< ‖X‖_F
  /// Estimates: the Lanczos results for ξ and κ_h (witnesses for the certified lower ends).
  std::optional<SpectralEstimate> xi_estimate;
  std::vector<SpectralEstimate> kappa_estimates;
  /// Certified: how the upper ends of ξ and κ_h were obtained ("dense interval Cholesky" for n·d ≤ limit,
  /// else the first naive bound of §6.4, itself certified).
  std::string certificate;
};

/// ESTIMATES of every ingredient at X (ξ and κ_h matrix-free: O(H·(n²d + nd²)) per Lanczos step for ξ,
/// O(n²d) for κ_h). Throws InputError(havens.local_delta, reason) when havens_refusal gives a reason, and
/// for a bad layer or X.
HavensIngredients<double> havens_estimates(const operators::AttentionLayer& layer,
                                           const operators::AttentionOptions& options,
                                           const Matrix<double>& X, const SpectralOptions& spectral = {});

/// CERTIFIED enclosures of every ingredient at the working precision: matrices formed in interval arithmetic
/// from the exact binary64 layer and X (P_h from Block<interval>); each spectral norm enclosed by
/// [certified lower, certified upper] of spectral_norm_upper_certified; ξ and κ_h enclosed by [interval
/// evaluation of ‖M w‖/‖w‖ at the estimates' witnesses, upper end from the explicit Kronecker matrix's
/// interval Cholesky when n·d ≤ dense_limit, else from ξ ≤ ‖W^skip‖ + Σ_h‖P_h‖₂‖W^VO_h‖₂ and
/// κ_h ≤ ‖X A_hᵀ‖₂ + ‖B_h‖₂ (§6.4, triangle inequality)]. Same refusals as havens_estimates.
HavensIngredients<interval> havens_certified(const operators::AttentionLayer& layer,
                                             const operators::AttentionOptions& options,
                                             const Matrix<double>& X,
                                             const HavensIngredients<double>& estimates,
                                             Eigen::Index dense_limit = dense_certification_limit);

/// δ(X, ε) = c₁ε + c₂ε² + c₃ε³ (claim havens.local_delta, bounds.md §6.3; derived, a reconstruction — not the
/// paper's Theorem 1 verbatim):
///   c₁ = ξ + ½ Σ_h κ_h ‖X W^VO_h‖₂,  c₂ = ½ Σ_h (κ_h ‖W^VO_h‖₂ + ‖A_h‖₂ ‖X W^VO_h‖₂),  c₃ = ½ Σ_h
///   ‖A_h‖₂‖W^VO_h‖₂;
/// ‖F(X') − F(X)‖_F ≤ δ(X, ε) on the ball, and c₁ ≥ ‖DF(X)‖₂. With double ingredients an ESTIMATE (ξ, κ_h
/// from below); with interval ingredients the upper end is a CERTIFIED upper bound.
template <class S>
std::array<S, 3> havens_delta_coefficients(const HavensIngredients<S>& q);
template <class S>
S havens_delta(const HavensIngredients<S>& q, double epsilon);

/// The naive variants (claim havens.naive_ordering, bounds.md §6.4): δ with
///   kernel level: ξ → ‖W^skip‖ + Σ_h‖P_h‖₂‖W^VO_h‖₂, κ_h → ‖X A_hᵀ‖₂ + ‖B_h‖₂, ‖XW‖ + ε‖W‖ → ‖W‖(‖X‖₂ + ε);
///   weight level: ξ → ‖W^skip‖ + √n Σ_h‖W^V_h‖₂‖W^O_h‖₂, κ_h → 2‖X‖₂‖A_h‖₂ + √n‖W^K_h b_Q,h‖/√d_h, and the
///   same ‖W‖(‖X‖₂ + ε). Holds: δ ≤ kernel level ≤ weight level.
template <class S>
S havens_delta_naive_kernel(const HavensIngredients<S>& q, double epsilon);
template <class S>
S havens_delta_naive_weights(const HavensIngredients<S>& q, double epsilon);

/// L_GN(X, ε) of the gradient-norm comparator (claim havens.gradnorm_comparator, bounds.md §6.6), with
/// B = ‖X‖_F + ε: ‖F(X') − F(X)‖_F ≤ ε·L_GN,
///   L_GN = ‖W^skip‖₂ + Σ_h ‖W^VO_h‖₂ (√n + ‖W^Q_h‖₂‖W^K_h‖₂B²/√d_h + ½√n‖W^K_h b_Q,h‖₂B/√d_h).
/// The last term carries the query-bias part of §6.2 through the same derivation (‖J_h[·]‖ ≤ ½,
/// ‖1bᵀ‖₂ = √n‖b‖); it vanishes without query bias, where L_GN is §6.6 verbatim.
template <class S>
S havens_gradnorm_lipschitz(const HavensIngredients<S>& q, double epsilon);

/// Certified-robustness radius from a classification margin (claim havens.certified_radius, bounds.md §6.7;
/// Tsuzuku et al. 2018): logits g = readout ∘ F ∘ embedding with globally Lipschitz embedding and readout, so
/// δ_g(ε) = L_out·δ(X, L_in·ε) with X the embedded input; the prediction cannot change on the ε-ball when
/// m > √2·δ_g(ε). Bisection on ε (valid since δ_g increases with ε) for the largest such ε.
struct MarginSetting {
  double margin = 0;                  ///< m(X) = g_y − max_{j≠y} g_j > 0 (exact, as given)
  double readout_lipschitz = 1;       ///< L_out ≥ 0 (1: the layer output read as logits)
  double embedding_lipschitz = 1;     ///< L_in ≥ 0 (1: X is the input)
  double relative_tolerance = 1e-12;  ///< bisection stops when (hi − lo) ≤ τ·lo
};

struct RadiusResult {
  /// The largest ε found with √2·δ_g(ε) < m (0 when none; +inf when δ_g stays below m/√2 up to 2^1000).
  /// With double ingredients an ESTIMATE; with interval ingredients CERTIFIED: √2·δ_g(radius) < m holds for
  /// the interval evaluation, so no X' in the ball of this radius changes the argmax.
  double radius = 0;
  double first_failure = 0;  ///< the smallest ε tested where the condition failed (+inf: none)
  int steps = 0;             ///< evaluations of δ_g
};

/// Throws InputError for margin ≤ 0, negative or non-finite Lipschitz constants, or a tolerance ∉ (0, 1).
template <class S>
RadiusResult havens_certified_radius(const HavensIngredients<S>& q, const MarginSetting& setting);

}  // namespace regatta::lip
