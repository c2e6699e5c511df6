#pragma once
// The second-order (mean-value on the Jacobian) bound on the sup of ‖J‖ over a region: the certified norm at
// the centre plus the radius times a certified bound on the second derivative over the region, so that the
// enclosure widths enter only at second order. Internal header (region/region.cpp). Derivation:
// docs/local.md, "Second-order form".
//
// For X' = X + δ in a convex region R ∋ X with ‖δ‖_F ≤ ρ, contained in the box B:
//   J_rc(X') − J_rc(X) = Σ_k δ_k ∂_k J_rc(X + θ_rc δ)          (mean-value theorem on t ↦ J_rc(X + tδ))
// with X + θ_rc δ ∈ R ⊆ B, so J(X') − J(X) = Σ_k δ_k T'_k with every T'_k in the interval matrix [T_k] that
// encloses ∂_k J over B (forward-mode closed form, closed_form_jacobian.hpp). With m radius pieces, the
// integral form Σ_j ∫_{(j−1)/m}^{j/m} Σ_k δ_k ∂_k J_rc(X + tδ) dt gives instead T'_k ∈ [T_k] = (1/m) Σ_j
// [T_k]_j, [T_k]_j enclosing ∂_k J over X + (j/m)(R − X) (narrower: widths grow with the radius).
// Then for A = Σ_k δ_k T'_k:
//   ‖A‖₂ ≤ Σ_k |δ_k| ‖T'_k‖₂ ≤ ρ (Σ_k u_k²)^{1/2},   u_k ≥ ‖T'_k‖₂ for every T'_k ∈ [T_k] (Cauchy–Schwarz)
//   ‖A‖∞ ≤ max_r Σ_k |δ_k| ρ_k(r) ≤ ρ max_r (Σ_k ρ_k(r)²)^{1/2},   ρ_k(r) = Σ_c mag([T_k]_rc)
//   ‖A‖₁ ≤ ρ max_c (Σ_k γ_k(c)²)^{1/2},                           γ_k(c) = Σ_r mag([T_k]_rc)
//   ‖A‖₂ ≤ (‖A‖₁ ‖A‖∞)^{1/2}
//   ‖A‖₂ = ‖M'(δ ⊗ I)‖₂ ≤ ρ ‖M'‖₂ ≤ ρ (‖mid M‖₂ + ‖rad M‖₂),  M' = [T'_1 ⋯ T'_K] ∈ [M] = [[T_1] ⋯ [T_K]]
//                                                      (the flattening, n·d × (n·d)², when it is stored)
// and sup over R of ‖J(X')‖ ≤ ‖J(X)‖ (certified upper end at the centre) + ρ·slope, every step rounded up.
//
// The spectral-gap form (docs/local.md, "Spectral-gap form") refines the ‖·‖₂ bound with the same [T_k]: for
// a unit v (approximate top right singular vector of J(X)), w = J(X)v, Q = I − vvᵀ and E = J(X') − J(X),
//   ‖J(X')‖₂² ≤ λ_max([[a, c], [c, b]]),  a ≥ ‖(J + E)v‖², b ≥ ‖(J + E)Q‖², c ≥ ‖Q(J + E)ᵀ(J + E)v‖,
//   a = ‖w‖² + 2ρ‖g‖ + ρ²t_v²,   g_k ≥ sup |wᵀ T'_k v|,  t_v ≥ ‖[[T_1]v ⋯ [T_K]v]‖₂
//   b = (σ₂ + ρ·slope_two)²,      σ₂ ≥ ‖J(X)Q‖₂
//   c = r + ρ(σ₂t_v + t_w) + ρ²·slope_two·t_v,  r ≥ ‖QJᵀw‖,  t_w ≥ ‖[Q[T_1]ᵀw ⋯ Q[T_K]ᵀw]‖₂
// so that, where σ₁² − σ₂² is large against c, the excess over ‖J(X)‖₂ is ρ‖g‖/‖J(X)‖₂ to first order (the
// rate of σ_max along the worst direction) instead of ρ·slope_two (the norm of the whole tensor).
//
// The Taylor form (docs/local.md, "Taylor form") bounds the same parts by Taylor's formula with integral
// remainder along the segment, ψ(1) = ψ(0) + ψ'(0) + ∫₀¹ (1 − t) ψ''(t) dt, for ψ(t) = wᵀJ(X + tδ)v̂, the
// entries of J(X + tδ)v̂, of J(X + tδ)ᵀw and of J(X + tδ): the first-order parts use ∂_kJ at the centre (point
// enclosures, no width), the remainders an enclosure of the third derivative over the region
// (hessian_sweep.hpp), e.g. |wᵀEv̂| ≤ ρ‖g(X)‖ + ρ² Σ_i ω_i ‖[∇²φ]_i‖₂ (ω_i = ∫ over piece i of 1 − t).
// Each part is the smaller of the two forms' bounds.
#include <cstddef>
#include <limits>
#include <optional>
#include <string>

#include <regatta/core/eigen.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/progress.hpp>

namespace regatta::lip::detail {

/// Why the second-order bound does not apply (Sinkhorn with t ≥ 2, rotary position embeddings, untied L2
/// without allow_untied_l2), or nullopt.
std::optional<std::string> second_order_refusal(const operators::AttentionLayer& layer,
                                                const operators::AttentionOptions& options);

/// The closed-form Jacobian (pre-normalisation included) at a point, in double: an ESTIMATE, for tests
/// against the generic engine.
Matrix<double> closed_form_block_jacobian(const operators::AttentionLayer& layer,
                                          const operators::AttentionOptions& options,
                                          const Matrix<double>& X);

struct SecondOrderOptions {
  /// Largest n·d at which each ‖[T_k]‖₂ is also bounded by the binary64 spectral certificate (one per input
  /// coordinate, O((n·d)³) each); above it u_k = min(‖mag T_k‖_F, (‖T_k‖₁‖T_k‖∞)^{1/2}).
  Eigen::Index spectral_limit = 256;
  /// Largest n·d at which the flattening [T_1 ⋯ T_K] is stored (16·(n·d)³ bytes) and its ‖·‖₂ certified.
  Eigen::Index flatten_limit = 128;
  /// Sweeps that tighten the closed form's intermediate values over the region before [T_k] is formed
  /// (second_order.cpp, BallTightening; each costs about a third of the [T_k] passes). 0: the box's naive
  /// interval values.
  int tightening_sweeps = 2;
  /// Radius pieces m: [T_k] is the average of the enclosures of ∂_k J over X + (j/m)(region − X), j = 1 … m
  /// (docs/local.md, "Radius pieces"); m times the passes. Used where n·d ≤ pieces_limit, else m = 1.
  int radius_pieces = 4;
  Eigen::Index pieces_limit = 128;
  /// Also form the spectral-gap bound (gap_two below): per coordinate two interval matrix–vector products
  /// with [T_k], and four spectral certificates of n·d × n·d interval matrices.
  bool spectral_gap = true;
  /// Also form the Taylor form (taylor_two below; docs/local.md, "Taylor form"): the first-order terms at
  /// the centre and remainders from an enclosure of the third derivative over the region, by second-order
  /// forward mode ((n·d/8)(n·d/8 + 1)/2 passes per piece). Used where n·d ≤ taylor_limit; taylor_pieces
  /// splits the segment for the remainder's integral (a divisor of the radius pieces in use, else 1).
  bool taylor = true;
  Eigen::Index taylor_limit = 128;
  int taylor_pieces = 2;
  /// The unit vector v̂ of the spectral-gap form; empty: the top right singular vector of J(X) (double SVD).
  Eigen::VectorXd top{};
  /// Also bound the coupling's first-order part as one map (gap_t_c; one (n·d)³ interval product).
  bool coupling_map = false;
  Progress progress{};
};

struct SecondOrderBound {
  double centre_two = 0;          ///< CERTIFIED: ‖J(X)‖₂ ≤ centre_two
  std::string centre_two_method;  ///< the spectral-norm certificate used at the centre
  double centre_inf = 0;          ///< CERTIFIED: ‖J(X)‖∞ ≤ centre_inf
  double slope_two = 0;  ///< CERTIFIED: ‖J(X') − J(X)‖₂ ≤ ‖X' − X‖_F · slope_two on the region
  double slope_inf = 0;  ///< CERTIFIED: ‖J(X') − J(X)‖∞ ≤ ‖X' − X‖_F · slope_inf on the region
  double slope_flat = 0;  ///< CERTIFIED: the flattening's bound alone (+inf when not stored)
  double two_upper = std::numeric_limits<double>::infinity();  ///< CERTIFIED: centre_two + ρ·slope_two
  double inf_upper = std::numeric_limits<double>::infinity();  ///< CERTIFIED: centre_inf + ρ·slope_inf
  bool finite = false;  ///< false: an enclosure of the second derivative was not finite (bounds are +inf)
  // The spectral-gap form (file comment): +inf / 0 when it was not formed.
  double gap_two = std::numeric_limits<double>::infinity();  ///< CERTIFIED: sup over R of ‖J(X')‖₂ ≤ gap_two
  double gap_rate = 0;  ///< CERTIFIED: ‖g‖₂ (≥ sup over R of |d/dt wᵀJ(X + tu)v| for unit u)
  double gap_sigma_two = 0;  ///< CERTIFIED: ‖J(X)(I − vvᵀ)‖₂ ≤ gap_sigma_two (σ₂ of J(X), up to v's error)
  double gap_a = 0, gap_b = 0, gap_c = 0;  ///< CERTIFIED: the upper ends a, b, c of the 2 × 2 matrix
  // Parts of the spectral-gap form (CERTIFIED upper ends): ‖w‖², t_v, t_w, r; and the vector v̂ used.
  double gap_ww = 0, gap_t_v = 0, gap_t_w = 0, gap_r = 0;
  double gap_t_c =
      std::numeric_limits<double>::infinity();  ///< CERTIFIED (coupling_map): see second_order.cpp
  Eigen::VectorXd gap_top{};
  // The Taylor form (file comment): +inf / 0 when it was not formed. gap_two and two_upper are already the
  // smaller of the two.
  double taylor_two = std::numeric_limits<double>::infinity();  ///< CERTIFIED: sup over R of ‖J(X')‖₂
  double taylor_rate = 0;  ///< CERTIFIED: |wᵀ(J(X') − J(X))v̂| ≤ ρ·taylor_rate on R (linear + remainder)
  double taylor_slope = 0;  ///< CERTIFIED: ‖J(X') − J(X)‖₂ ≤ ρ·taylor_slope on R
  int radius_pieces = 1;    ///< the radius pieces used
  int taylor_pieces = 0;    ///< the Taylor form's pieces (0: not formed)
};

/// Radius piece j of m (1 ≤ j ≤ m) of a convex region R ∋ X that lies in `box` and has ‖X' − X‖_F ≤
/// l2_radius: the region X + (j/m)(R − X), given by a box that contains X + (j/m)(box − X) and X, and an
/// upper bound of its ℓ₂ radius (j/m)·l2_radius (docs/local.md, "Radius pieces"; both rounded outward).
struct RegionPiece {
  Matrix<interval64> box;
  double l2_radius = 0;
};
RegionPiece region_piece(const Matrix<double>& X, const Matrix<interval64>& box, double l2_radius, int j,
                         int m);

/// The Taylor form's weight of piece i of m: an enclosure of ω_i = ∫ over [(i − 1)/m, i/m] of (1 − t) dt.
interval64 taylor_piece_weight(int i, int m);

/// The 0-based index, among `pieces` radius pieces, of the region X + (i/m)(R − X) (Taylor piece i of m,
/// 1 ≤ i ≤ m, m a divisor of pieces).
std::size_t taylor_piece_region(int i, int m, int pieces);

/// The bound above for a convex region that contains X, lies in `box` and has ‖X' − X‖_F ≤ l2_radius for
/// all its points. Throws InputError when second_order_refusal gives a reason.
SecondOrderBound second_order_bound(const operators::AttentionLayer& layer,
                                    const operators::AttentionOptions& options, const Matrix<double>& X,
                                    const Matrix<interval64>& box, double l2_radius,
                                    const SecondOrderOptions& so_options = {});

}  // namespace regatta::lip::detail
