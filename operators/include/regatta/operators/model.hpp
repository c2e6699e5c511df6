#pragma once
// Whole vision transformers (timm VisionTransformer layout) as one map image ↦ logits, generic over the
// scalar type (double: the estimate; interval64: an enclosure of the exact forward pass of the binary64
// weights on a binary64 or interval image).
//
//   tokens   X₀ = [cls; patches(x)·W_E + 1·b_Eᵀ] + P        (the patch convolution, kernel = stride = p,
//            is the linear map W_E on each flattened patch (c, ky, kx); without a class token X₀ has no
//            first row)
//   blocks   pre-norm:  X ← X + MHA(LN₁(X)),  X ← X + MLP(LN₂(X))
//            post-norm: X ← LN₁(X + MHA(X)),  X ← LN₂(X + MLP(X))
//            MHA: multi-head dot-product softmax attention with the biases of the fused qkv projection and
//            the output projection (AttentionLayer); MLP(Y) = σ(Y·W₁ + 1b₁ᵀ)·W₂ + 1b₂ᵀ with σ the exact
//            (erf) GELU, the tanh GELU or ReLU
//   pooling  cls: LN_f(X)₀ (final norm, then the class token); mean: LN_f(mean of the patch tokens)
//   head     z = pooled·W_H + b_H
// LayerNorm is row-wise with the learned γ, β and one ε (normalization.hpp). Vectors are rows, weights act
// from the right (torch's out×in Linear weights transposed), as in layer.hpp.
#include <filesystem>
#include <string>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/normalization.hpp>

namespace regatta::operators {

enum class Activation { gelu_erf, gelu_tanh, relu };
enum class Pooling { cls, mean };

std::string to_string(Activation activation);
std::string to_string(Pooling pooling);

/// y = x·W + b for a row x (W: in×out; b empty means 0).
struct Affine {
  Matrix<double> W;
  Vector<double> b;
};

/// LayerNorm parameters (γ, β of length width; ε is the model's).
struct NormParameters {
  Vector<double> gamma, beta;
};

struct TransformerBlock {
  AttentionLayer attention;  ///< its norm_gamma/beta/eps are norm1 (used as the pre-norm when prenorm)
  NormParameters norm1, norm2;
  Affine fc1, fc2;  ///< width×mlp_width, mlp_width×width
};

struct Model {
  int image_size = 0, patch_size = 0, channels = 0;  ///< square images, square patches
  int width = 0, heads = 0, mlp_width = 0, classes = 0;
  bool prenorm = true;
  bool class_token = true;
  double eps = 1e-6;  ///< LayerNorm ε (every norm of the model)
  Activation activation = Activation::gelu_erf;
  Pooling pooling = Pooling::cls;
  Affine patch;              ///< (channels·p²)×width
  Vector<double> cls_token;  ///< width (when class_token)
  Matrix<double> pos_embed;  ///< tokens()×width
  std::vector<TransformerBlock> blocks;
  NormParameters final_norm;
  Affine head;  ///< width×classes

  int grid() const { return image_size / patch_size; }  ///< patches per side
  int patch_count() const { return grid() * grid(); }
  int tokens() const { return patch_count() + (class_token ? 1 : 0); }
  /// channels·image_size²: the length of a flattened (C, H, W) row-major image.
  int input_size() const { return channels * image_size * image_size; }
  /// The flat input index of entry k = (c·p + ky)·p + kx of patch `patch` (row-major over the grid).
  int pixel_of(int patch, int k) const;
  /// The options of every attention sub-block: residual, and the LayerNorm pre-norm when prenorm.
  AttentionOptions attention_options() const;
  /// Throws InputError naming the member for every inconsistent size or non-finite entry.
  void validate() const;
};

/// Reads a model from a safetensors file in timm naming (patch_embed.proj.{weight,bias}, cls_token,
/// pos_embed, blocks.N.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2}.{weight,bias}, norm or fc_norm,
/// head), with a JSON config for what names cannot say: "heads" (required), "layernorm_eps" (default 1e-6),
/// "mlp_activation" (gelu_erf | gelu_tanh | relu; default gelu_erf), "norm" (pre | post; default pre),
/// "pooling" (cls | mean; default cls with a class token), and optionally "layout" (must be "timm-vit"),
/// "image_size", "patch_size", "channels", "classes", "depth", checked against the tensors. `config` empty
/// means config.json next to the model. The layout is detected from the names; a file in another layout
/// throws InputError saying what was found and what was expected. A tensor of the wrong shape throws
/// InputError naming the tensor, its shape and the shape expected; missing tensors and files, non-finite
/// weights and a bad config also throw InputError (one line).
Model load_model(const std::filesystem::path& path, const std::filesystem::path& config = {});

/// X₀ (tokens × width) for a flattened image of input_size() entries (asserted).
template <class S>
Matrix<S> embed(const Model& model, const Vector<S>& image);
/// The logits (classes) of a flattened image. double: a binary64 evaluation (an estimate); interval64: an
/// enclosure of the exact value.
template <class S>
Vector<S> forward(const Model& model, const Vector<S>& image);

/// σ applied entrywise, and its derivative σ′ entrywise (ReLU′(0) taken as [0, 1] for enclosures, 0 for
/// double). For interval64, enclosures: erf and exp endpoints from MPFR with directed rounding; GELU′ is
/// evaluated at the endpoints on its monotone pieces (−∞, −√2], [−√2, √2], [√2, ∞) and by the naive interval
/// formula on a piece boundary.
template <class S>
Matrix<S> activate(Activation activation, const Matrix<S>& H);
template <class S>
Matrix<S> activation_derivative(Activation activation, const Matrix<S>& H);

}  // namespace regatta::operators
