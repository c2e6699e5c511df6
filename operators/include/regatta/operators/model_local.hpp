#pragma once
// The certified ℓ₂ radius of a whole Model (model.hpp) from the COMPOSITION OF PER-STAGE LOCAL LIPSCHITZ
// BOUNDS: the comparison column between the naive product of global bounds (model_robustness.hpp) and the
// certificates through the whole network (affine forms, region enclosures). docs/models.md, "The
// composition of per-stage local bounds", has the argument.
//
// Stages (the same cut as the naive certificate): the patch embedding (text: the identity on the embedding
// matrix), BERT's embedding LayerNorm, per block the attention sub-block X ↦ X + MHA(N(X)) and the MLP
// sub-block X ↦ X + σ(N(X)W₁ + b₁)W₂ + b₂ (post-norm: N = identity, followed by the LayerNorm stages),
// mean pooling, the final LayerNorm, BERT's tanh pooler. With cls or last pooling the last block's attention
// stage keeps only the pooled row (the rest of the network is row-wise), so its later stages act on one
// token.
//
// Chain. Let f_k map the input to stage k's input and c_k = f_k(x) (exact real arithmetic), enclosed by
// the interval64 forward V_k ∋ c_k. For a trial radius r, with r₀ = r, every x′ ∈ B(x, r) has
// ‖f_k(x′) − c_k‖_F ≤ r_k, and
//     L_k = a certified upper bound of sup ‖J_k(ξ)‖₂ over the box V_k ± r_k (⊇ the ball B(c_k, r_k)),
//     r_{k+1} = L_k·r_k  (rounded up),
// by the mean-value inequality on the segment [c_k, f_k(x′)] ⊆ B(c_k, r_k). J_k is enclosed over the box by
// interval arithmetic: the structured rows of the attention Jacobian (lip::block_dense_jacobian_on_box,
// structured_rows.hpp), and for the row-wise stages the d×d Jacobian of each token over its own box
// (LayerNorm's bracket, GELU′ / ReLU′ / tanh′ over the hidden pre-activations' interval); the norm is
// spectral_norm_upper_fast of the interval matrix (row-wise stages: the largest over tokens, since their
// Jacobian is block diagonal). Linear stages use their exact norm: ‖W_E‖₂ certified, 1/√m for a mean of m
// rows, 1 for selecting a row.
//
// Certificate. With h the head's input (pooled features), z_y − z_c = h·(w_y − w_c) + b_y − b_c, so over
// the ball z_y − z_c ≥ M_c − ‖w_y − w_c‖₂·r_K, with M_c the lower end of the interval64 margin at x and r_K
// the last radius. The ball is certified when M_c > ‖w_y − w_c‖₂·r_K (rounded up) for every c ≠ y.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_robustness.hpp>

namespace regatta::operators {

/// Empty when the local composition applies to the model, otherwise why not (models other than the
/// timm-vit, gpt2 and bert layouts, e.g. LLaMA; RMSNorm, L2 attention, rotary embeddings, gated MLPs).
std::string local_composition_unsupported(const Model& model);

/// One stage of the chain at a trial radius.
struct LocalStage {
  std::string stage;  ///< "patch_embed", "token_embed", "embed_norm", "blocks.0.attn", "blocks.0.mlp", ...
  double radius = 0;  ///< CERTIFIED upper: every input x′ of the ball maps to within this ℓ₂ (Frobenius)
                      ///< distance of the stage's exact input at x
  double lipschitz = 0;  ///< CERTIFIED upper: sup of the stage's ‖J‖₂ over that ball (∞: not enclosed)
};

struct LocalChain {
  std::vector<LocalStage> stages;
  double features_radius = 0;  ///< CERTIFIED upper: ‖h(x′) − h(x)‖₂ for the head's input h (∞: unbounded)
  double product = 1;          ///< Π L_k rounded up (the chain's constant at this radius)
};

/// The chain of one input: the stage inputs' enclosures at x are computed once, each trial radius then
/// only encloses Jacobians. Requires local_composition_unsupported(model) empty and model.accepts(x.size())
/// (std::logic_error otherwise). `model` must outlive the object.
class LocalComposition {
 public:
  LocalComposition(const ConvertedModel<interval64>& model, const Vector<double>& x);
  ~LocalComposition();
  LocalComposition(LocalComposition&&) noexcept;

  /// The chain at radius r ≥ 0 (r = 0: the constants over the enclosures of the stage inputs at x).
  LocalChain chain(double r) const;
  /// The interval64 logits at x (an enclosure of the exact logits of the binary64 weights).
  const Vector<interval64>& logits() const;
  /// CERTIFIED upper bound of ‖w_y − w_c‖₂ for head columns y, c.
  double head_difference(int y, int c) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The largest radius in (0, upper] whose chain certifies label y (the condition in the file comment),
/// within a factor 1 + tolerance of the smallest failing radius tried; radius 0 when y is not the certified
/// prediction at x. CertifiedRadius::checks counts the chains evaluated. `poll` (may be empty) is called
/// before every chain and may throw to abandon the search.
CertifiedRadius local_composition_radius(const ConvertedModel<interval64>& model, const Vector<double>& x,
                                         int y, double upper, double tolerance = 0.01,
                                         const std::function<void()>& poll = {});

}  // namespace regatta::operators
