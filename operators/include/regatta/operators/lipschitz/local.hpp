#pragma once
// Local regularity of an attention layer at one input X: norms of the Jacobian J = DF(X) computed matrix-free
// from JVPs / VJPs (docs/math/jacobian.md#matrix-free-norms), and the local sensitivity of Havens, Araujo,
// Zhang, Hu
// (2024) as reconstructed in docs/math/bounds.md#havens-local (claims havens.* of docs/math/claims.md).
//
// Norms (docs/math/README.md#norms): inputs and outputs in Frobenius norm (the flattened ℓ₂ norm), ‖J‖₂ the
// spectral norm of the n·e × n·d Jacobian with the row-major vectorisation (i, a) ↦ i·d + a, ‖J‖∞ its
// maximum absolute row sum, ‖J‖₁ its maximum absolute column sum.
//
// What each number is (docs/conventions.md#what-a-number-means):
//   ESTIMATE   a double computation: the Lanczos / power-iteration value ‖J w‖_F/‖w‖_F (from below in exact
//              arithmetic, claim havens.power_iteration), or a floating-point evaluation of an exact
//              formula (‖J‖∞ as a maximum of row sums, δ with estimated spectral norms).
//   CERTIFIED  the endpoint of an outward-rounded interval evaluation on the exact binary64 inputs: a
//              certified lower bound on ‖J‖₂ from an interval JVP at the Lanczos witness, a certified upper
//              bound from the dense interval Jacobian (small sizes), interval enclosures of ‖J‖∞, of the
//              Havens ingredients and of δ.
//
// This header gathers the local-regularity interface; each concept has its own header, included here:
//   matrix_free.hpp      spectral norm of a matrix-free linear map (Lanczos, power iteration)
//   jacobian_norms.hpp   ‖J‖₂ estimate and certified lower end, ‖J‖∞ and ‖J‖₁ from VJPs / JVPs
//   structured_rows.hpp  rows of one softmax block's Jacobian (‖J‖∞, dense Jacobian, box enclosure)
//   havens.hpp           Havens et al. local sensitivity δ and its ingredients
// and declares local_jacobian_norms, everything about ‖J(X)‖ for one block.
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
#include <regatta/operators/lipschitz/havens.hpp>
#include <regatta/operators/lipschitz/jacobian_norms.hpp>
#include <regatta/operators/lipschitz/matrix_free.hpp>
#include <regatta/operators/lipschitz/progress.hpp>
#include <regatta/operators/lipschitz/structured_rows.hpp>

namespace regatta::lip {

// ---- everything about ‖J(X)‖ for one block (what `regatta local` reports) ----

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
  /// Compute the ‖J‖∞ estimate (structured rows, O(H·n²·d²): minutes at BERT size, n = 128, d = 768). false
  /// leaves LocalNormReport::inf unset (has_inf false) and is refused together with `certify`.
  bool inf_norm = true;
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
  /// The interval64 JVP behind two_lower: "midpoint-radius products" (fast_jvp.hpp) or "generic block".
  std::string two_lower_jvp;
  InducedNorm<double> inf;      ///< ‖J‖∞: floating-point evaluation of the exact formula (ESTIMATE)
  bool has_inf = false;         ///< false when options.inf_norm is false
  bool inf_structured = false;  ///< ‖J‖∞ came from the structured rows (else from n·d generic VJPs)
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
/// the self-attention block (layer, options) at X. The certified lower bound uses the interval64 JVP by
/// midpoint–radius products (fast_jvp.hpp) where it applies, the generic Block<interval64> JVP elsewhere,
/// and the MPFI one when either is not finite. Throws InputError for a bad layer, X or options
/// ("precision" below 64 bits, "certified_lower" false with certify, "inf_norm" false with certify).
LocalNormReport local_jacobian_norms(const operators::AttentionLayer& layer,
                                     const operators::AttentionOptions& options, const Matrix<double>& X,
                                     const LocalNormOptions& local = {});

}  // namespace regatta::lip
