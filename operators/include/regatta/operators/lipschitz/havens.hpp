#pragma once
// Local sensitivity of Havens, Araujo, Zhang, Hu (2024) as reconstructed in docs/math/bounds.md#havens-local
// (claims havens.* of docs/math/claims.md): the ingredients ξ, κ_h and the spectral norms (estimates and
// certified enclosures), δ(X, ε), its naive variants, the gradient-norm comparator and the certified radius.
#include <array>
#include <optional>
#include <string>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/core/scalar.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/jacobian_norms.hpp>
#include <regatta/operators/lipschitz/matrix_free.hpp>

namespace regatta::lip {

// =========================================================================================================
// Local sensitivity (Havens et al. 2024; docs/math/bounds.md#havens-local)
// =========================================================================================================
//
// Setting: F(X) = X W^skip + Σ_h P_h(X) X W^VO_h (+ constant value/output biases), X' = X + E, ‖E‖_F ≤ ε.
// Hypotheses (docs/math/bounds.md#havens-delta): dot-product softmax attention (Sinkhorn t = 1), no
// pre-normalisation; any
// W^skip (I with residual, else 0), H ≥ 1, masks (causal) allowed; a key bias drops out, a query bias adds
// 1 b_Q,hᵀ(W^K_h)ᵀEᵀ/√d_h to the score perturbation (docs/math/bounds.md#havens-kappa). L2 attention,
// pre-norm, Sinkhorn t ≥ 2 and
// rotary position embeddings are outside the reconstruction and refused.

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
  // ---- naive ingredients (docs/math/bounds.md#havens-naive) and the gradient-norm comparator
  // (docs/math/bounds.md#havens-gradnorm) ----
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
  /// else the first naive bound of docs/math/bounds.md#havens-naive, itself certified).
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
/// κ_h ≤ ‖X A_hᵀ‖₂ + ‖B_h‖₂ (docs/math/bounds.md#havens-naive, triangle inequality)]. Same refusals as
/// havens_estimates.
HavensIngredients<interval> havens_certified(const operators::AttentionLayer& layer,
                                             const operators::AttentionOptions& options,
                                             const Matrix<double>& X,
                                             const HavensIngredients<double>& estimates,
                                             Eigen::Index dense_limit = dense_certification_limit);

/// δ(X, ε) = c₁ε + c₂ε² + c₃ε³ (claim havens.local_delta, docs/math/bounds.md#havens-delta; derived, a
/// reconstruction — not the
/// paper's Theorem 1 verbatim):
///   c₁ = ξ + ½ Σ_h κ_h ‖X W^VO_h‖₂,  c₂ = ½ Σ_h (κ_h ‖W^VO_h‖₂ + ‖A_h‖₂ ‖X W^VO_h‖₂),  c₃ = ½ Σ_h
///   ‖A_h‖₂‖W^VO_h‖₂;
/// ‖F(X') − F(X)‖_F ≤ δ(X, ε) on the ball, and c₁ ≥ ‖DF(X)‖₂. With double ingredients an ESTIMATE (ξ, κ_h
/// from below); with interval ingredients the upper end is a CERTIFIED upper bound.
template <class S>
std::array<S, 3> havens_delta_coefficients(const HavensIngredients<S>& q);
template <class S>
S havens_delta(const HavensIngredients<S>& q, double epsilon);

/// The naive variants (claim havens.naive_ordering, docs/math/bounds.md#havens-naive): δ with
///   kernel level: ξ → ‖W^skip‖ + Σ_h‖P_h‖₂‖W^VO_h‖₂, κ_h → ‖X A_hᵀ‖₂ + ‖B_h‖₂, ‖XW‖ + ε‖W‖ → ‖W‖(‖X‖₂ + ε);
///   weight level: ξ → ‖W^skip‖ + √n Σ_h‖W^V_h‖₂‖W^O_h‖₂, κ_h → 2‖X‖₂‖A_h‖₂ + √n‖W^K_h b_Q,h‖/√d_h, and the
///   same ‖W‖(‖X‖₂ + ε). Holds: δ ≤ kernel level ≤ weight level.
template <class S>
S havens_delta_naive_kernel(const HavensIngredients<S>& q, double epsilon);
template <class S>
S havens_delta_naive_weights(const HavensIngredients<S>& q, double epsilon);

/// L_GN(X, ε) of the gradient-norm comparator (claim havens.gradnorm_comparator,
/// docs/math/bounds.md#havens-gradnorm), with
/// B = ‖X‖_F + ε: ‖F(X') − F(X)‖_F ≤ ε·L_GN,
///   L_GN = ‖W^skip‖₂ + Σ_h ‖W^VO_h‖₂ (√n + ‖W^Q_h‖₂‖W^K_h‖₂B²/√d_h + ½√n‖W^K_h b_Q,h‖₂B/√d_h).
/// The last term carries the query-bias part of docs/math/bounds.md#havens-kappa through the same derivation
/// (‖J_h[·]‖ ≤ ½,
/// ‖1bᵀ‖₂ = √n‖b‖); it vanishes without query bias, where L_GN is docs/math/bounds.md#havens-gradnorm
/// verbatim.
template <class S>
S havens_gradnorm_lipschitz(const HavensIngredients<S>& q, double epsilon);

/// Certified-robustness radius from a classification margin (claim havens.certified_radius,
/// docs/math/bounds.md#havens-certified-radius;
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
