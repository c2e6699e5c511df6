#pragma once
// Certified margins of a whole Model over an ℓ₂ ball by affine forms (zonotopes), docs/models.md.
//
// Every quantity of the forward pass on the ball B = {x + δ : ‖δ‖₂ ≤ r} is carried as an affine form
//     v = c + Σ_{j<q} a_j·ε_j + Σ_{j≥q} a_j·η_j + [−s, s],     ‖ε‖₂ ≤ 1, |η_j| ≤ 1,
// with c, a_j binary64 and s ≥ 0 a slack: the input symbols ε (q = the input length; the input is x + r·ε)
// are shared by every form, so linear maps (projections, the patch embedding, residuals, means) act on them
// exactly and never wrap; each nonlinear step replaces f(v) by a line and adds its remainder as one fresh
// symbol η per entry: GELU, tanh, SiLU by the tangent at the centre with the Lagrange remainder
// ½·f″(ξ)·(v − c)² bounded over the form's range; the convex or concave exp, 1/x, 1/√x, √x by the chord over
// the range with the exact deviation of the function from it; ReLU by DeepZ's slope u/(u − l); products keep
// the product of the two deviations (docs/models.md, the node table); the
// fresh symbols are shared by everything computed later, so their dependence is kept too. The slack s holds
// only the binary64 rounding errors (bounded a priori: Higham's γ_k for sums and dot products, one ulp for
// interval64 scalars) and is propagated by |W|. A form's range is c ± (‖a_{<q}‖₂ + ‖a_{≥q}‖₁ + s), rounded
// outward. The margin z_y − z_c is itself such a form, and its lower end over B is a certified lower bound
// of min_{x′∈B} z_y(x′) − z_c(x′).
//
// Compared with tangent_region.cpp's Jacobian enclosures (mean-value forms whose interval tangents wrap at
// every stage), the first-order part here is exact and only the second-order remainders are overestimated, so
// the certified radius is limited by the curvature of the network instead of by the product of the stages'
// entrywise magnitudes.
//
// Supported: patch (timm ViT) and token inputs, the embedding LayerNorm, pre- and post-norm blocks with
// dot-product multi-head attention (biases, causal mask, rotary embeddings: a fixed linear map per position,
// applied to the forms exactly), LayerNorm or RMSNorm, MLPs with the exact or tanh GELU, tanh or ReLU, or
// gated by SiLU (SwiGLU: the gate's SiLU times the up projection, a product of two forms), cls / mean /
// last pooling, the final norm, BERT's tanh pooler, the linear head. The remainders use interval
// enclosures of f″ over each entry's range (intersected with the global bounds |GELU″| ≤ 2φ(0),
// |tanh″| ≤ 4/(3√3) and |SiLU″| ≤ 1/2 where proved). Not supported (affine_unsupported says why; callers
// fall back to tangent_region.cpp): L2 attention.
#include <functional>
#include <limits>
#include <string>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_robustness.hpp>

namespace regatta::operators {

/// Empty when affine_margin applies to the model, otherwise the reason it does not.
std::string affine_unsupported(const Model& model);

/// How affine_margin computes, not what.
struct AffineOptions {
  /// The steps that treat each token on its own (norms, projections, MLPs) run on a copy of the token's
  /// rows that keeps only the columns those rows read (model/affine/per_token.hpp). Off: every column is
  /// kept, which gives the same bound up to the rounding terms' counts, more slowly (the tests compare the
  /// two).
  bool compact_columns = true;
};

/// CERTIFIED lower bound of min over ‖x′ − x‖₂ ≤ r and c ≠ y of z_y(x′) − z_c(x′) (a lower bound: positive
/// means the ball is certified to keep label y). −∞ when a range became unbounded or a denominator's range
/// reached 0 (nothing is certified then). `poll` (may be empty) is called between stages and may throw.
/// Requires affine_unsupported(model) empty and model.accepts(x.size()) (std::logic_error otherwise).
double affine_margin(const Model& model, const Vector<double>& x, int y, double r,
                     const std::function<void()>& poll = {}, const AffineOptions& options = {});

/// The largest radius in (0, upper] found certified by affine_margin > 0, within a factor 1 + tolerance of
/// the smallest failing radius tried (a search on the loss L(0) − L(r) interpolated as a power law in r,
/// safeguarded by geometric bisection; model/affine/margin.cpp). Radius 0 when y is not the certified
/// prediction at x (the interval64 margin at x is not positive) or nothing passed. `upper` > 0 (the attack
/// radius). `at_centre`: that interval64 margin at x, min_{c≠y} of the lower end of z_y − z_c, when the
/// caller has computed it already (certify's centre margins: the same forward pass); NaN: computed here. It
/// steers the search only (its first candidates); the radius is certified by affine_margin alone.
CertifiedRadius affine_certified_radius(const Model& model, const Vector<double>& x, int y, double upper,
                                        double tolerance = 0.01, const std::function<void()>& poll = {},
                                        double at_centre = std::numeric_limits<double>::quiet_NaN());

}  // namespace regatta::operators
