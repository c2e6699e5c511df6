#pragma once
// ℓ₂ robustness of a whole Model (model.hpp) around one input x with label y: a certified radius from
// region enclosures, an attack radius (an estimate, an upper bound on the true radius), and the naive
// certificate from a product of per-layer global Lipschitz bounds. docs/models.md has the argument.
//
// Region pass (propagate, S = interval64). For the ball B = {x′ : ‖x′ − x‖₂ ≤ r}, the network is a chain of
// stages (embedding, with BERT's embedding LayerNorm; per block the attention sub-block, the MLP sub-block,
// and for post-norm the two LayerNorms; pooling with the final norm or BERT's tanh pooler; head). The input
// coordinates are the pixels, or for a text model the n·d entries of the token-embedding matrix. Forward mode
// carries, per stage k, the value enclosure V_k ∋ f_k(x) at the centre and the tangent enclosure T_k ∋
// Df_k(ξ) for every ξ ∈ B (f_k: input ↦ stage-k activations; T_k has one n×d matrix per input coordinate).
// The region of stage k is the centred form
//     R_k = V_k ± r·‖|T_k|‖₂ (entrywise: the ℓ₂ norm over input coordinates of the magnitudes),
// which holds f_k(B) by the mean-value theorem applied to each entry along the segment [x, x′] ⊆ B. The next
// tangent is T_{k+1} = J_{k+1}(R_k)·T_k with J_{k+1}(R_k) the interval derivative of stage k+1 over R_k
// (Block<interval64>::linearize(R_k).jvp for attention; normalize_rows_jvp; σ′ over the hidden region,
// itself the centred form of the hidden pre-activations intersected with their direct evaluation), which
// encloses Df_{k+1}(ξ) by the chain rule and inclusion isotonicity. The last stage gives the logits z and the
// Jacobian enclosure J over B.
//
// Certificate. With M_c the lower end of z_y(x) − z_c(x) and G_c the upper end of ‖|J_y − J_c|‖₂ (the sup of
// ‖∇(z_y − z_c)‖₂ over B), z_y − z_c ≥ M_c − r·G_c > 0 on B for every c ≠ y when M_c > r·G_c: the ball is
// certified (no input within ℓ₂ distance r changes the prediction, whatever its pixel range).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/model.hpp>

namespace regatta::operators {

/// The attention sub-blocks of a model converted to S once (Block construction converts every weight).
template <class S>
struct ConvertedModel {
  explicit ConvertedModel(const Model& model);
  const Model& model;
  std::vector<Block<S>> attention;
};

/// Logits and their Jacobian (classes × input_size) from one forward-mode pass. S = double: at x (radius
/// ignored; an estimate). S = interval64: z encloses the logits at x, J encloses Dz(ξ) for every ξ in the
/// ℓ₂ ball of `radius` around x (see the file comment). Empty logits and Jacobian when a region (or, for
/// double, a value) is not finite: the pass encloses nothing.
template <class S>
struct ModelPass {
  Vector<S> logits;
  Matrix<S> jacobian;
};
/// `poll` (may be empty) is called often (before every block and every tangent's step through a block) and
/// may throw to abandon the pass (the Python module throws on a pending Ctrl-C); the exception propagates.
template <class S>
ModelPass<S> propagate(const ConvertedModel<S>& model, const Vector<double>& x, double radius,
                       const std::function<void()>& poll = {});

/// ESTIMATE (binary64, at x): the logits z and the gradient ∇_x wᵀz for the class weights w = weights(z), by
/// reverse mode: one forward pass that keeps each stage's input, then one backward pass (propagate's forward
/// mode carries one tangent per input coordinate). Empty logits when a value is not finite.
struct LogitGradient {
  Vector<double> logits, gradient;
};
LogitGradient logit_gradient(const ConvertedModel<double>& model, const Vector<double>& x,
                             const std::function<Vector<double>(const Vector<double>&)>& weights,
                             const std::function<void()>& poll = {});

/// Whether the ℓ₂ ball of radius r ≥ 0 around x is certified to keep label y (CERTIFIED when true).
bool certify_ball(const ConvertedModel<interval64>& model, const Vector<double>& x, int y, double r);

struct CertifiedRadius {
  double radius = 0;  ///< CERTIFIED: every x′ with ‖x′ − x‖₂ ≤ radius keeps label y (0 when none is)
  double refuted = 0;  ///< the smallest radius tried that failed the test (the test's own limit, not a
                       ///< property of the network); equal to `upper` when every radius tried passed
  int checks = 0;      ///< region passes run
};

/// A radius in (0, upper] certified by certify_ball, within a factor 1 + tolerance of the smallest failing
/// radius tried (CertifiedRadius::refuted). The test at r passes when r < cap(r) = min_c M_c/G_c(r);
/// candidates start at min(upper, cap(0)), and after a failure at r move to 0.9·cap(r) (r/2 when
/// cap(r) ≥ r, r/64 when G is unbounded), at most max_halvings times; then they interpolate
/// g(r) = log(cap(r)/r) in log r between the passing and the failing radius (inverse quadratic or secant,
/// safeguarded by geometric bisection; model/tangent_region.cpp). The candidates only choose where to test.
/// Returns radius 0 when y is not the certified prediction at x itself. `upper` > 0 (the attack radius:
/// nothing above it can pass). `poll` is handed to every region pass (propagate).
CertifiedRadius certified_radius(const ConvertedModel<interval64>& model, const Vector<double>& x, int y,
                                 double upper, double tolerance = 0.01, int max_halvings = 60,
                                 const std::function<void()>& poll = {});

struct AttackResult {
  bool found = false;    ///< an adversarial point was found and verified by a double forward pass
  double radius = 0;     ///< ESTIMATE: ‖x_adv − x‖₂ (an upper bound on the true robustness radius)
  Vector<double> point;  ///< x_adv (empty when !found)
  int predicted = -1;    ///< argmax of the logits at x_adv
  int gradient_passes = 0;
};

struct AttackOptions {
  int deepfool_steps = 50;  ///< linearised minimal steps towards the nearest boundary (DeepFool)
  double overshoot = 0.02;  ///< relative overshoot of each DeepFool step
  int pgd_rounds = 24;      ///< shrink rounds: PGD on the sphere at a fraction of the best radius so far
  double pgd_shrink = 0.9;  ///< that fraction at first; each failed round moves it halfway to 1
  int pgd_failures = 4;     ///< failed rounds that end the search
  int pgd_steps = 40;       ///< projected ascent steps per round on max_{c≠y} z_c − z_y
  double pgd_step = 0.1;    ///< first step length relative to the radius (down to a tenth by the last)
  /// bisection steps along x → x_adv for the boundary point (24: within 2⁻²⁴ of the segment, far below any
  /// tolerance the radius is compared at)
  int line_bisection = 24;
  /// Called at every forward and gradient pass (and handed to propagate); may be empty; may throw to abandon
  /// the attack, the exception propagating unchanged.
  std::function<void()> poll;
};

/// The smallest ℓ₂ perturbation found that flips the prediction away from y (unconstrained pixel range):
/// DeepFool to reach the other side, bisection along the segment to the boundary, then rounds of ℓ₂ PGD at
/// a smaller radius, each success shrunk again by bisection, each failure followed by a round closer to the
/// best radius. Every accepted point is verified by forward().
AttackResult attack(const ConvertedModel<double>& model, const Vector<double>& x, int y,
                    const AttackOptions& options = {});

/// One factor of the naive certificate: a CERTIFIED upper bound on a stage's global ℓ₂ Lipschitz constant.
struct LipschitzFactor {
  std::string stage;  ///< "patch_embed" or "token_embed", "blocks.0.attn", ...
  double upper = 0;
  std::string how;  ///< the bound used
};

/// Per-stage certified global Lipschitz upper bounds (Frobenius norm on token matrices, ℓ₂ on images and
/// logits): patch embedding ‖W_E‖₂ (text: 1 for the embedding matrix itself, then the embedding LayerNorm's
/// max|γ|/√ε); attention sub-block 1 + Lip(MHA on B_R)·Lip(LN₁) with castin.sqrt_n on
/// the bias-augmented layer (tokens [N(x), 1] ∈ B_√(R²+1), docs/models.md) and Lip(LN) ≤ max|γ|/√ε
/// (layernorm.lip2); MLP sub-block 1 + ‖W₁‖₂‖W₂‖₂·max|σ′|·Lip(LN₂); final LayerNorm; pooler ‖W_P‖₂; head
/// ‖W_H‖₂. Pre-norm, non-causal models only; a post-norm or causal model or a refused bound gives
/// std::nullopt with the reason in `why_not`.
std::optional<std::vector<LipschitzFactor>> global_lipschitz_factors(const Model& model,
                                                                     std::string& why_not);

/// √2·Π_k L_k of the naive certificate, rounded up (CERTIFIED upper), from the factors above.
double naive_denominator(const std::vector<LipschitzFactor>& factors);

/// How the certified radius is searched: affine forms through the whole network (model_affine.hpp; tight,
/// about 1 s per test on the digits ViT) or the region enclosures of the logits' Jacobian above (looser by
/// orders of magnitude, about 10× faster per test). Affine falls back to region where it does not apply
/// (affine_unsupported).
enum class RadiusMethod { affine, region };
std::string to_string(RadiusMethod method);

/// Everything `regatta certify` reports for one labelled input (docs/models.md, the table's kinds).
struct InputRobustness {
  int label = 0, prediction = 0;
  double margin = 0;        ///< ESTIMATE: z_y − max_{c≠y} z_c in double
  double margin_lower = 0;  ///< CERTIFIED: lower end of that margin from the interval64 forward (may be ≤ 0)
  double naive = 0;         ///< CERTIFIED: margin_lower / naive_denominator (0 without a naive certificate)
  double attack = 0;        ///< ESTIMATE: attack radius, an upper bound on the true radius (inf: none found)
  double certified = 0;     ///< CERTIFIED: certified_radius (0 unless the prediction is y and certified)
  double refuted = 0;       ///< the region test's own limit (CertifiedRadius::refuted)
  int checks = 0;           ///< region (or affine) passes run
  RadiusMethod method = RadiusMethod::affine;  ///< the method the certified radius came from
  /// CERTIFIED: the composition of per-stage local Lipschitz bounds (model_local.hpp), rounded down; 0 when
  /// not certified. Only when has_local (input_robustness's compare_local, on a model it covers).
  double local = 0;
  bool has_local = false;
  int local_checks = 0;  ///< chains of local constants evaluated
  /// Branch and bound under a time budget (graph path only, GraphRobustnessOptions::budget_per_input,
  /// graph_bab_radius.hpp): has_bab when it was asked for; bab CERTIFIED, ≥ certified.
  bool has_bab = false;
  double bab = 0;
  double bab_seconds = 0;  ///< wall-clock time it used
  long bab_branches = 0;   ///< phase branches bounded and input boxes split, over its tests
  int bab_tests = 0;       ///< radii tested (each a verify run)
  std::string bab_note;    ///< why it did not run or could not help (empty otherwise)
};

/// Whether the input counts as CERTIFIED robust at `radius` (≥ 0): predicted correctly, a positive certified
/// lower end of the margin at x itself (so radius 0 is not counted for a correct estimate that the interval
/// forward cannot confirm), and a certified radius of at least `radius`.
inline bool certified_at(const InputRobustness& r, double radius) {
  return r.prediction == r.label && r.margin_lower > 0 && r.certified >= radius;
}

/// The forward passes, naive certificate, attack and certified radius of one input x with label y.
/// `naive_denominator` is √2·Π L_k rounded up, or NaN when the model has no naive certificate; `tolerance`
/// is certified_radius's. The certified radius is searched below the attack radius (100 when none was found).
/// With compare_local, also the radius of the composition of local bounds (local_composition_radius, same
/// tolerance and upper end) when local_composition_unsupported(model) is empty.
InputRobustness input_robustness(const ConvertedModel<double>& model_double,
                                 const ConvertedModel<interval64>& model_interval, const Vector<double>& x,
                                 int y, double naive_denominator, double tolerance = 0.01,
                                 RadiusMethod method = RadiusMethod::affine, bool compare_local = false);

/// Medians over a set of inputs (of every input, robust or not: a misclassified input has radius 0).
struct RobustnessSummary {
  double clean_accuracy = 0;    ///< ESTIMATE: fraction predicted correctly by the double forward pass
  double median_certified = 0;  ///< CERTIFIED (a median of certified lower bounds is one)
  double median_attack = 0;     ///< ESTIMATE (inf when the attack failed on at least half of the inputs)
  double median_naive = 0;      ///< CERTIFIED
  double median_local = 0;      ///< CERTIFIED (over the rows with has_local; 0 when none has)
};
/// The summary of a non-empty set of records; a median of an even count is the mean of the two middle
/// values, rounded down for the certified ones.
RobustnessSummary summarize(const std::vector<InputRobustness>& rows);

}  // namespace regatta::operators
