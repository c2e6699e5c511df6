#pragma once
// The Lipschitz constant of one self-attention block on a bounded domain D, certified to a requested
// relative gap by best-first branch and bound (docs/branch-and-bound.md).
//
// Mathematics (docs/math/region.md#mean-value, mean-value inequality): for D convex, Lip(F; D) = sup over D
// of
// ‖J(X)‖ in the induced norm (2: the spectral norm of the n·d × n·d Jacobian, token matrices in Frobenius
// norm; inf: the maximum absolute row sum, token matrices in max-entry norm). Domains, centred at 0:
//   box   [−R, R]^{n×d}                     (every entry of X in [−R, R])
//   ball  {X : ‖x_i‖₂ ≤ R for every token}  (a product of Euclidean balls; covered by boxes; with the
//         rotation reduction (d = 2) the boxes are in polar coordinates (r_i, θ_i), r_i ∈ [0, R])
//
// Bracket. The frontier is a set of boxes covering the part of D that the symmetry reductions keep. For each
// box B the upper end u(B) ≥ sup over B of ‖J‖ comes from the interval64 Jacobian enclosure over B
// (block_dense_jacobian_on_box) and a certified norm of the interval matrix (region.hpp); the lower end is
// the certified ‖J(c)‖ at one point c of B ∩ D (an interval evaluation at the exact point). Then
//   lower = max over evaluated points of the certified ‖J(c)‖        (≤ sup over D: c ∈ D)
//   upper = max(lower, max over the frontier of u(B), max over pruned boxes of u(B))
// is a CERTIFIED bracket of Lip(F; D) at every step: every point of the reduced domain lies in a frontier
// box or in a pruned box, and the reduced domain has the same sup (symmetry.hpp in the docs). Best-first:
// the boxes with the largest u(B) are split in halves along their widest free coordinate, in batches of
// `batch` boxes (the batch is the unit of parallel work; results are applied in a fixed order, so the
// bracket does not depend on how many processes evaluated the batch).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>

namespace regatta::lip {

enum class DomainShape { box, ball };
std::string to_string(DomainShape shape);

struct BnbDomain {
  DomainShape shape = DomainShape::box;
  double radius = 0;   ///< R, finite and > 0
  Eigen::Index n = 0;  ///< tokens
};

/// Symmetry reductions (each is used only where it is valid; see symmetry_refusal):
///   permutation  F(ΠX) = ΠF(X) without a causal mask: keep x_{1,1} ≤ x_{2,1} ≤ … ≤ x_{n,1}
///   translation  J(X + 1tᵀ) = J(X) for tied L2 attention without pre-norm, box domain: keep x_{1,1} = −R
///                (needs permutation: then token 1 holds the smallest first coordinate)
///   sign         J(−X) = J(X) when the scores are even and the values odd up to a constant (no query or
///                key bias for dot, tied L2; no pre-norm): keep x_{1,1} + x_{n,1} ≥ 0 with permutation
///                (x_{1,1} ≥ 0 without), or, with translation, x_{2,1} − x_{1,1} ≤ x_{n,1} − x_{n−1,1}
///   rotation     F(XQ) = F(X)Q + const for every rotation Q of the plane (d = 2 ball domain, polar
///                coordinates; no pre-norm, no query or key bias, and per head WQ_h, WK_h, WV_h, WO_h all
///                2×2 of the form aI + bJ,
///                J the quarter turn, checked exactly; the 2-norm only): keep θ_1 = 0; it contains the
///                sign reduction (−I is a rotation), which is then not used
struct Symmetries {
  bool permutation = true;
  bool translation = true;
  bool sign = true;
  bool rotation = true;
};

/// The reductions that apply to (layer, options, domain) among those requested; the others are dropped.
/// BranchBound further drops rotation unless its boxes are polar and the norm is 2 (symmetries()).
Symmetries applicable_symmetries(const operators::AttentionLayer& layer,
                                 const operators::AttentionOptions& options, const BnbDomain& domain,
                                 const Symmetries& requested);

/// Largest n·d the search accepts. Why: with first-order enclosures the excess width of u(B) is
/// proportional to the box width, so reaching a relative gap g needs boxes of width ∝ g around the near-
/// maximisers; their number grows like (1/g)^k in k = n·d free coordinates. At k = 12 and g = 1e-2 that is
/// beyond any machine; the targets (L2 d = 1, n ≤ 6; dot d ≤ 2, n ≤ 3) have k ≤ 6.
inline constexpr Eigen::Index bnb_max_dimension = 12;

struct BnbOptions {
  Norm norm = Norm::two;
  double gap = 1e-2;  ///< stop when upper − lower ≤ gap·lower (finite, > 0)
  Symmetries symmetries{};
  int batch = 64;  ///< boxes split per step (≥ 1); part of the problem's identity for resume
  /// Allow polar coordinates, which the rotation reduction needs (false: Cartesian boxes and no rotation
  /// reduction; for comparisons).
  bool polar = true;
};

/// One box of the frontier: entry k = i·d + a of lo/hi bounds x_{i,a} (row-major, as the Jacobian); in
/// polar coordinates (BranchBound::polar()) entries 2i and 2i + 1 bound r_i and θ_i, x_i = r_i(cos θ_i,
/// sin θ_i).
struct BnbBox {
  std::vector<double> lo, hi;
  double upper = 0;      ///< CERTIFIED: sup over the box of ‖J‖ ≤ upper
  std::uint64_t id = 0;  ///< creation order: the tie-break of the best-first order
};

/// What evaluating one box gives (a pure function of the box: the unit of work of the parallel drivers).
struct BnbEvaluation {
  bool feasible = false;  ///< false: the box misses the reduced domain (dropped)
  double upper = 0;  ///< CERTIFIED upper bound on sup over the box of ‖J‖ (+inf: enclosure not finite)
  double lower = 0;  ///< CERTIFIED lower bound on ‖J(point)‖, point ∈ D
  std::vector<double> point;
};

/// The whole state of a run; with the problem it determines the rest of the run.
struct BnbState {
  std::vector<BnbBox> frontier;
  double lower = 0;             ///< CERTIFIED
  std::vector<double> witness;  ///< the point of `lower` (n·d, row-major)
  double pruned_upper = 0;      ///< CERTIFIED: max u(B) over pruned boxes
  std::uint64_t next_id = 0;
  std::uint64_t evaluated = 0;  ///< boxes evaluated
  std::uint64_t steps = 0;      ///< batches done
};

struct BnbBracket {
  double lower = 0;  ///< CERTIFIED lower bound on Lip(F; D)
  double upper = 0;  ///< CERTIFIED upper bound on Lip(F; D) (+inf while an enclosure is not finite)
  bool gap_reached = false;
};

/// The problem: layer, options, domain and options, validated; creates, advances and reads states.
class BranchBound {
 public:
  /// Throws InputError for a bad layer, an unsupported configuration (region_refusal, rotary embeddings), a
  /// radius or gap that is not finite and > 0, n < 1, batch < 1, or n·d > bnb_max_dimension (the message says
  /// why).
  BranchBound(operators::AttentionLayer layer, operators::AttentionOptions options, BnbDomain domain,
              BnbOptions bnb);

  const Symmetries& symmetries() const { return symmetries_; }
  const BnbDomain& domain() const { return domain_; }
  const BnbOptions& options() const { return bnb_; }
  Eigen::Index dimension() const { return domain_.n * layer_.d; }
  /// True when the boxes are in polar coordinates (with the rotation reduction: symmetries().rotation).
  bool polar() const { return polar_; }

  /// The root box of the reduced domain, evaluated.
  BnbState initial_state() const;
  /// Checks a state read from a checkpoint against this problem, so that a corrupt or edited file cannot
  /// make a certified bracket false in the parts that can be checked: every frontier box inside the root
  /// box with a distinct id and a u(B) at least its re-evaluation, the witness in D and `lower` at most the
  /// certified norm there. Throws InputError naming `source`. The pruned part (pruned_upper and the boxes
  /// no longer in the frontier) cannot be checked without redoing the run: docs/branch-and-bound.md.
  void check_resumed(const BnbState& state, const std::string& source) const;
  /// The certified bracket of a state.
  BnbBracket bracket(const BnbState& state) const;
  /// True when the gap is reached or the frontier is empty.
  bool done(const BnbState& state) const;
  /// Removes the `batch` best boxes from the frontier and returns their halves (ids assigned), to be
  /// evaluated (in any order, by any process) and then applied with apply().
  std::vector<BnbBox> split_batch(BnbState& state) const;
  /// The lower end below which evaluate() skips the certified point evaluation (the state's lower end
  /// before the batch; a function of the state, so every process uses the same).
  double threshold(const BnbState& state) const;
  /// Evaluates one box (thread-safe, deterministic): the upper bound over the box, and the certified
  /// lower bound at its point when the double estimate there is >= threshold (else lower = 0).
  BnbEvaluation evaluate(const BnbBox& box, double threshold) const;
  /// Applies the evaluations of the boxes of one split_batch, in the order returned by split_batch.
  void apply(BnbState& state, std::vector<BnbBox> boxes, const std::vector<BnbEvaluation>& results) const;

  /// The problem as JSON (layer weights, options, domain, norm, symmetries, batch): a resume file must
  /// carry the same. describe_mismatch names the first part that differs (nullopt: the same problem).
  nlohmann::json problem_json() const;
  static std::optional<std::string> describe_mismatch(const nlohmann::json& mine,
                                                      const nlohmann::json& theirs);

 private:
  /// The root box of the reduced domain (no id, not evaluated).
  BnbBox root_box() const;
  bool feasible(const BnbBox& box) const;
  std::vector<double> domain_point(const BnbBox& box) const;
  /// The width by which split_batch chooses the coordinate to halve (θ_i counts as r_i's upper end times
  /// its width: the arc length).
  double split_width(const BnbBox& box, std::size_t k) const;

  operators::AttentionLayer layer_;
  operators::AttentionOptions options_;
  BnbDomain domain_;
  BnbOptions bnb_;
  Symmetries symmetries_;
  bool centred_ = false;  ///< the centred enclosure applies (no pre-norm)
  bool polar_ = false;
};

/// Checkpoint files: {"format", "problem", "state"}, doubles written exactly (shortest round-trip text).
nlohmann::json state_to_json(const BnbState& state);
/// Throws InputError naming `source` for a malformed state (wrong sizes, non-finite numbers, lo > hi).
BnbState state_from_json(const nlohmann::json& value, Eigen::Index dimension, const std::string& source);

/// Runs the search in this process until done, `should_stop` says so (checked between batches), or
/// forever. `on_step` is called after every batch (progress, checkpoints). Evaluates each batch with
/// OpenMP threads.
void run_branch_bound(const BranchBound& problem, BnbState& state,
                      const std::function<bool(const BnbState&)>& should_stop,
                      const std::function<void(const BnbState&)>& on_step);

}  // namespace regatta::lip
