#pragma once
// Theoretical Lipschitz upper bounds for attention layers (docs/math/bounds.md; claim IDs from
// docs/math/claims.md). Every formula is written once, generic over the scalar type S:
//
//   double    the ESTIMATE reported to users: the formula in binary64 with accurate but uncertified
//             spectral norms (spectral_norm_reference); it may fall below the exact value of the formula
//             by rounding, so it is never called certified.
//   mpfr      the same formula at the working precision (reference values for tests).
//   interval  a CERTIFIED enclosure of the formula: weights are exact binary64 numbers, every operation is
//             rounded outward, Λ_n comes from the interval Lambert W, and spectral norms are enclosed by
//             [certified lower, certified upper] of spectral_norm_upper_certified (core/spectral_norm.hpp).
//             The upper endpoint is a certified upper bound on the bound's formula (hence on the Lipschitz
//             constant whenever the hypotheses hold).
//
// Notation (docs/math/README.md#notation): head h has W^Q_h, W^K_h (d×d_h), W^V_h (d×d_v), output block W^O_h
// (rows h·d_v .. of W^O), A_h = W^Q_h W^K_hᵀ/√d_h, V_h = (W^V_h W^O_h)ᵀ. Token-matrix norms: "2" is the
// Frobenius norm of the flattened matrix (Lip₂), "inf" the max-entry norm (Lip∞). Measure-level bounds are
// in W_p with Euclidean ground cost.
//
// Composition (docs/math/bounds.md#composition, docs/math/attention.md#residual-prenorm,
//   docs/math/attention.md#normalisation), applied by every layer-level bound:
//   residual  F = id + G: Lip(F) ≤ 1 + Lip(G) in either norm (Theorem B: the identity does not depend on
//             the context, so its constant is unchanged);
//   pre-norm  F = [id +] G∘N: Lip(G∘N) ≤ Lip(G)·Lip(N) with Lip(N) the row-wise LayerNorm/RMSNorm constant in
//             the bound's norm; N maps every token into B_R with R = √d‖γ‖∞ (+‖β‖ for LayerNorm), so the
//             bounded-domain bounds use that radius and need no --radius.
// Anything else outside a bound's hypotheses is refused with InputError(claim ID, reason).
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>

namespace regatta::lip {

/// Token-matrix norm of a bound: Frobenius ("2") or max-entry ("inf").
enum class Norm { two, inf };
std::string to_string(Norm norm);
/// "2" or "inf"; anything else throws InputError naming `subject`.
Norm parse_norm(const std::string& text, const std::string& subject = "--norm");

/// Where a bound is evaluated, besides the layer and its options.
struct BoundSetting {
  std::optional<std::int64_t> n;  ///< sequence length (kim.*, castin.sqrt_n*); 1 ≤ n ≤ 2^53
  /// R: every token (every atom of a context measure) lies in the closed ball B_R. Needed by the
  /// bounded-domain and measure-level bounds unless a pre-norm fixes it.
  std::optional<double> radius;
  std::optional<double> query_radius;  ///< R′ of Theorem B (queries in B_R′); unset: R
  /// Input tokens X (n×d) for the data-dependent castin.local; empty: none. When set, n must be unset or
  /// equal X.rows().
  Matrix<double> input;
  /// A mask that hides some token from itself. No AttentionOptions produces one (the causal mask keeps the
  /// diagonal); it describes experiments such as kim.l2_necessity_masked_diag, and the L2 bounds refuse it.
  bool diagonal_masked = false;
  int depth = 1;  ///< number of weight-shared copies for mf.depth (1 ≤ depth ≤ 10^6)
};

/// The bounds offered as valid upper bounds (claims under test are separate functions below). Each is one
/// row of the bound table; `count` is not a bound.
enum class Bound {
  softmax_half,   ///< softmax.half
  layernorm_two,  ///< layernorm.lip2
  layernorm_inf,  ///< layernorm.lipinf_sqrt_d
  rmsnorm_two,    ///< rmsnorm.lip2 (2-norm, exact)
  rmsnorm_inf,  ///< rmsnorm.lipinf_sqrt_d (the ∞-norm bracket of docs/math/bounds.md#rmsnorm, upper end √d)
  kim_inf,      ///< kim.thm32_inf
  kim_two,      ///< kim.thm32_2 (scaling-consistent form)
  castin_sqrt_n,            ///< castin.sqrt_n
  castin_sqrt_n_augmented,  ///< castin.sqrt_n_augmented (biased dot-product layers, docs/bounds.md)
  castin_local,             ///< castin.local
  mf_query,                 ///< mf.query_lipschitz (Theorem A)
  mf_context,               ///< mf.context_lipschitz (Theorem B)
  mf_self,                  ///< mf.self_lipschitz (Theorem C)
  mf_depth,                 ///< mf.depth (weight-shared stack)
  count,                    ///< not a bound: the number of bounds (the table's completeness check)
};

/// Every Bound, in the order of docs/bounds.md (each one row of the bound table, operators/src/lipschitz/
/// bound_table.cpp; docs/adding-a-bound.md).
std::span<const Bound> all_bounds();

/// What a bound is: claim ID, name, norm, provenance tag (README.md: derived / published / quoted),
/// hypotheses, and where the statement and its proof are.
struct BoundInfo {
  std::string id;
  std::string name;
  std::string norm;
  std::string provenance;
  std::string hypotheses;
  std::string source;
};
const BoundInfo& info(Bound bound);
/// Whether the bound covers the norm (W_p bounds count as Euclidean, 2).
bool covers(Bound bound, Norm norm);
/// True for the bounds on the sequence-level constant Lip(F) of the n-token map itself (compared by the
/// bracket).
bool is_sequence_bound(Bound bound);

/// Why `bound` does not apply to this configuration, or nullopt when it does. Bad input (an invalid layer,
/// a non-positive radius, n < 1, an input of the wrong width) throws InputError instead.
std::optional<std::string> refusal(Bound bound, const operators::AttentionLayer& layer,
                                   const operators::AttentionOptions& options, const BoundSetting& setting);

/// The bound's value for the layer, options and setting (see the file comment for what each S guarantees).
/// Throws InputError(info(bound).id, reason) when refusal() gives a reason, and for bad input.
/// Formulas (single head: A = A_h, V = V_h; multi-head as stated; then the composition of the file comment):
///   softmax_half   ½ in ℓ₂ and ℓ∞ (row-wise softmax)
///   layernorm_two  max|γ|/√ε;   layernorm_inf  √d·max|γ|/√ε;   rmsnorm_two  max|γ|/√ε (exact);
///   rmsnorm_inf    √d·max|γ|/√ε                                               (pre-norm required)
///   kim_inf        (4Λ_n + d_h^{-1/2})·‖W^O‖₁·max_h(‖W^Q_h‖∞‖W^Q_h‖₁)·max_h‖W^V_h‖₁,  Λ_n = W₀((n−1)/e)
///   kim_two        √(n/d_h)·(4Λ_n + 1)·(Σ_h ‖W^Q_h‖₂⁴‖W^V_h‖₂²)^{1/2}·‖W^O‖₂
///                  (tied L2, diagonal kept, causal allowed, n ≥ 2)
///   castin_sqrt_n  Σ_h √3‖V_h‖(‖A_h‖²R⁴(4n+1) + n)^{1/2}          (dot, tokens in B_R, Frobenius)
///   castin_sqrt_n_augmented
///                  Σ_h min_t √3‖V_h‖(‖[A_h; c_hᵀ/t]‖²(R² + t²)²(4n+1) + n)^{1/2}, c_h = W^K_h b_Q,h/√d_h,
///                  t = 2^k, |k| ≤ 8 chosen in double (dot with a query bias, tokens in B_R, Frobenius;
///                  docs/bounds.md#augmented-castin)
///   castin_local   Σ_h √3‖V_h‖(c_max(1 + r²ρ′²) + r²ρ²)^{1/2} ≥ ‖DF(X)‖₂ at X = setting.input, with
///                  r = max‖x_i − x_j‖, ρ = max‖A_h x_i‖, ρ′ = max‖A_hᵀx_i‖, c_max = max_j Σ_i P_h,ij
///   mf_query       Σ_h ‖V_h‖‖A_h‖R²                                   (W_p, context in P(B_R))
///   mf_context     Σ_h ‖V_h‖(1 + 2‖A_h‖RR′)e^{2‖A_h‖RR′}              (W₁ → sup over queries in B_R′)
///   mf_self        Σ_h ‖V_h‖(1 + 3‖A_h‖R²)e^{2‖A_h‖R²}               (W_p on P(B_R))
///   mf_depth       Π_ℓ (per-layer mf_self constant at R_ℓ), R_{ℓ+1} = [R_ℓ +] Σ_h‖V_h‖R_ℓ + ‖b‖ (b the
///                  constant output of the value and output biases; with a pre-norm R_ℓ → its radius)
/// Cost: a few spectral norms per head. Certified ones (interval) cost O(N²K + N³) for an N×K matrix (N the
/// smaller side; interval Cholesky, skipped above N = 512 for a looser cheap bound); the low-rank products
/// W^Q_h W^K_hᵀ and W^V_h W^O_h (d×k factors, k < d) are certified through the k×k Cholesky factors of their
/// Gram matrices in O(k²d + k³) (docs/bounds.md, "Values"). castin.local adds O(H n² d).
/// Instantiated for double, mpfr and interval.
template <class S>
S evaluate(Bound bound, const operators::AttentionLayer& layer, const operators::AttentionOptions& options,
           const BoundSetting& setting);

/// Λ_n = W₀((n − 1)/e) (claim kim.phi_lambert), n ≥ 1.
template <class S>
S kim_lambda(std::int64_t n);

/// The radius R = √d‖γ‖∞ (+ ‖β‖ for LayerNorm) of every token after the layer's pre-norm
/// (docs/math/attention.md#normalisation);
/// throws InputError for Prenorm::none.
template <class S>
S prenorm_radius(const operators::AttentionLayer& layer, operators::Prenorm prenorm);

// ---- claims under test: never valid bounds, never listed by theoretical_bounds ----

/// QUOTED AND REFUTED (claim kim.thm32_2_quoted): the commonly quoted 2-norm form of Kim et al.'s
/// Theorem 3.2,
///   √(n/d_h)·(4Λ_n + 1)·(Σ_h ‖W^Q_h‖₂²‖W^V_h‖₂²)^{1/2}·‖W^O‖₂,
/// which is FALSE (Lipschitz constants scale like ‖W^Q‖², docs/math/bounds.md#kim-thm32; counterexample n =
/// 3, W^Q = 5).
/// Exposed only so that the claims checker can exhibit the violation. Same hypotheses as kim_two, for the
/// bare attention map (residual and pre-norm are refused).
template <class S>
S kim_thm32_2_quoted_claim(const operators::AttentionLayer& layer, const operators::AttentionOptions& options,
                           const BoundSetting& setting);

/// PUBLISHED IN CODE, UNPROVEN (claim castin.local, "code form"): Σ_h ‖V_h‖₂·(ρ_h² r² (n + 1) + n)^{1/2} with
/// ρ_h = max(ρ, ρ′) at X = setting.input (docs/math/bounds.md#castin-local). A claim to test, never a bound;
/// bare dot-product
/// attention only.
template <class S>
S castin_local_code_form_claim(const operators::AttentionLayer& layer,
                               const operators::AttentionOptions& options, const BoundSetting& setting);

// ---- every bound for one configuration ----

struct BoundReport {
  Bound bound{};
  bool applies = false;
  double value = 0;            ///< ESTIMATE: evaluate<double> (0 when refused; +inf on overflow)
  double certified_upper = 0;  ///< CERTIFIED: upper end of evaluate<interval>, rounded up (0 when refused)
  std::string reason;          ///< why the bound is refused (empty when it applies)
  std::string note;            ///< the parameters used (n, R, Λ_n, the certification route)
};

/// Every Bound for the configuration, in the order of all_bounds(): applicable ones with their value and
/// certified upper bound, the others with the reason. With `norm` set, bounds in another norm are refused
/// ("covers ... only"); W_p bounds count as Euclidean (2). The interval evaluation runs at
/// `interval_bits` (≥ 53). Throws InputError for bad input (see refusal()).
std::vector<BoundReport> theoretical_bounds(const operators::AttentionLayer& layer,
                                            const operators::AttentionOptions& options,
                                            const BoundSetting& setting, std::optional<Norm> norm = {},
                                            unsigned interval_bits = 128);

}  // namespace regatta::lip
