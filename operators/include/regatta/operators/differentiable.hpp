#pragma once
// Attention blocks as differentiable maps on token matrices, generic over the scalar type (double, mpfr,
// interval): forward pass, JVP, VJP and dense Jacobians (docs/math/jacobian.md).
//
// A Block is one layer with its options:  F(X) = [X] + MHA(N(X))  (self)  or  F(X, Y) = [X] + CA(N(X), N(Y))
// (cross), with N the optional pre-norm, [X] present when residual, MHA/CA multi-head dot-product, L2 (tied
// or, when allowed, untied) or Sinkhorn attention with the layer's biases, its rotary position embeddings
// (queries and keys rotated by their row index, layer.hpp) and the optional causal mask.
// Kernels are materialised (n×m per head): O(H·n·m) memory, O(H·n·m·(d_h + d)) work per JVP/VJP — the form
// used for derivatives, certification (interval) and high precision (mpfr). The streamed double path for
// large n is attend()/attend_cross() (attention.hpp); the two agree to rounding (tested).
//
// Vectorisation follows docs/math/README.md#vectorisation: index (i, a) of an n×d matrix is i·d + a
// (row-major), so the
// dense Jacobian J has J(i·d + a, j·d + b) = ∂F_ia/∂X_jb.
#include <memory>
#include <optional>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>

namespace regatta::operators {

template <class S>
struct BlockState;  // the point-dependent quantities of one block (defined in the implementation)

/// The derivative of X ↦ F(X) (a block or a stack of blocks) at one point. It holds a copy of the blocks'
/// weights, so it stays valid after the Block or Stack it came from is destroyed.
template <class S>
class Linearization {
 public:
  /// F(X) at the point.
  const Matrix<S>& value() const { return value_; }
  /// DF(X)[Ẋ]; Ẋ has the shape of X.
  Matrix<S> jvp(MatrixRef<S> Xdot) const;
  /// DF(X)[Ẋ_p] for every tangent Ẋ_p at once: each product by a matrix shared by all tangents is one
  /// product of the stacked tangents (interval64: midpoint–radius, core/interval64_product.hpp), so the
  /// results are enclosures of the same quantities as jvp(Ẋ_p), equal up to the products' rounding terms.
  std::vector<Matrix<S>> jvp_all(const std::vector<Matrix<S>>& tangents) const;
  /// DF(X)ᵀ[F̄]; F̄ has the shape of F(X).
  Matrix<S> vjp(MatrixRef<S> Fbar) const;

  Eigen::Index rows() const { return value_.rows(); }
  Eigen::Index input_cols() const;

 private:
  template <class>
  friend class Block;
  template <class>
  friend class Stack;
  std::vector<std::shared_ptr<const BlockState<S>>> states_;  // first block first
  Matrix<S> value_;
};

/// The derivative of (X, Y) ↦ F(X, Y) (cross-attention) at one point, in the queries and in the context.
template <class S>
class CrossLinearization {
 public:
  const Matrix<S>& value() const { return value_; }
  Matrix<S> jvp_query(MatrixRef<S> Xdot) const;    ///< ∂F/∂X [Ẋ]
  Matrix<S> jvp_context(MatrixRef<S> Ydot) const;  ///< ∂F/∂Y [Ẏ]
  Matrix<S> vjp_query(MatrixRef<S> Fbar) const;    ///< (∂F/∂X)ᵀ[F̄], n×d
  Matrix<S> vjp_context(MatrixRef<S> Fbar) const;  ///< (∂F/∂Y)ᵀ[F̄], m×d

 private:
  template <class>
  friend class Block;
  std::shared_ptr<const BlockState<S>> state_;
  Matrix<S> value_;
};

/// One attention layer with its options, converted to S (see the file comment).
template <class S>
class Block {
 public:
  /// Validates the layer and options; throws InputError for an invalid layer, sinkhorn_iterations < 1, or an
  /// untied l2 layer unless options.allow_untied_l2.
  explicit Block(const AttentionLayer& layer, const AttentionOptions& options = {});

  int d() const { return d_; }
  const AttentionOptions& options() const { return options_; }

  /// Self-attention of X (n×d). Throws InputError for a wrong width, an empty or a non-finite X.
  Matrix<S> forward(const Matrix<S>& X) const;
  /// Cross-attention of queries X (n×d) to the context Y (m×d); causal requires n = m.
  Matrix<S> forward_cross(const Matrix<S>& X, const Matrix<S>& Y) const;
  /// The attention kernels (one n×m matrix per head: P_h, or the Sinkhorn kernel K_h^(t)).
  std::vector<Matrix<S>> kernels(const Matrix<S>& X) const;
  std::vector<Matrix<S>> kernels_cross(const Matrix<S>& X, const Matrix<S>& Y) const;

  /// The linearisation keeps its own copy of the point (at working precision); X may be a view (MatrixRef).
  Linearization<S> linearize(MatrixRef<S> X) const;
  CrossLinearization<S> linearize_cross(MatrixRef<S> X, MatrixRef<S> Y) const;

  /// The converted weights (for bounds and tests).
  const std::vector<Matrix<S>>& WQ() const { return WQ_; }
  const std::vector<Matrix<S>>& WK() const { return WK_; }
  /// Per head the d×d value-output map: WV_h·WO_h (dot), A_h·WV_h·WO_h (l2).
  const std::vector<Matrix<S>>& WVO() const { return WVO_; }

 private:
  std::shared_ptr<const BlockState<S>> state(MatrixRef<S> X, MatrixRef<S> Y, bool self) const;
  friend struct BlockState<S>;
  template <class>
  friend class Stack;

  int d_, heads_, head_dim_, value_dim_;
  AttentionKind kind_;
  AttentionOptions options_;
  std::vector<Matrix<S>> WQ_, WK_, WV_, WVO_;
  Matrix<S> WO_;
  std::vector<Vector<S>> bQ_, bK_, bV_;
  Vector<S> bO_, gamma_, beta_, bVO_;  // bVO_ = Σ_h bV_hᵀ WO_h + bO (the constant output offset)
  S inv_sqrt_dh_, norm_eps_;
  std::optional<Rotary> rotary_;  // RoPE of queries and keys (layer.hpp)
};

/// F_L ∘ … ∘ F_1 (self-attention blocks, all of the same width d). Weight sharing is passing the same block
/// L times.
template <class S>
class Stack {
 public:
  /// Throws InputError for an empty list or blocks of different widths.
  explicit Stack(std::vector<Block<S>> blocks);
  Matrix<S> forward(const Matrix<S>& X) const;
  Linearization<S> linearize(MatrixRef<S> X) const;
  std::size_t depth() const { return blocks_.size(); }

 private:
  std::vector<Block<S>> blocks_;
};

/// Dense Jacobians from unit JVPs (column j·d + b is DF[E_jb]); intended for small sizes.
template <class S>
Matrix<S> dense_jacobian(const Linearization<S>& lin);
template <class S>
Matrix<S> dense_jacobian_query(const CrossLinearization<S>& lin, Eigen::Index n, Eigen::Index d);
template <class S>
Matrix<S> dense_jacobian_context(const CrossLinearization<S>& lin, Eigen::Index m, Eigen::Index d);

}  // namespace regatta::operators
