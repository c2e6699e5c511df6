#pragma once
// The stabilised Gibbs kernel of the scaling (primal-domain) Sinkhorn iteration, materialised (internal to
// sinkhorn_attention.cpp; docs/flow.md#sinkhorn-attention-row, Schmitzer 2019 "Stabilized sparse scaling
// algorithms for entropy
// regularized transport problems", §3 "absorption").
//
// For potentials (α, β) absorbed at ε, K_ij = exp((α_i + β_j − C_ij)/ε) with C_ij = ‖x_i‖² + ‖y_j‖² −
// 2⟨x_i, y_j⟩ (centred atoms). The plan of the potentials f = α + ε log u, g = β + ε log v is
// P_ij = a_i b_j u_i K_ij v_j, so one Sinkhorn half-step is a matrix–vector product instead of n·m
// exponentials: u_i = 1/Σ_j K_ij b_j v_j, v_j = 1/Σ_i K_ij a_i u_i. The exponentials are paid once per
// build (an ε stage or an absorption), not once per iteration.
//
// Storage: row-major n×m in T (double or float); the exponent is formed in double and rounded once (float:
// each entry carries a relative error ≤ 2^-24 plus the float exp's few ulps); products accumulate in double.
// Memory n·m·sizeof(T). Entries below T's normal range flush to 0: the caller absorbs before the scalings
// reach e^{±absorb_threshold}, so a flushed entry stands for a plan entry < e^{2·threshold}·(min normal of T)
// relative to a_i b_j.
#include <cstddef>

#include <regatta/core/eigen.hpp>

namespace regatta::measures::detail {

template <class T>
class DenseGibbsKernel {
 public:
  /// x (n×d), y (m×d): the centred atoms; threads ≥ 1.
  DenseGibbsKernel(const Matrix<double>& x, const Matrix<double>& y, int threads);

  /// K_ij = exp((alpha_i + beta_j − C_ij)/epsilon).
  void build(const Vector<double>& alpha, const Vector<double>& beta, double epsilon);

  /// out_i = Σ_j K_ij w_j (double accumulation).
  void apply(const Vector<double>& w, Vector<double>& out) const;

  /// out_j = Σ_i K_ij w_i (double accumulation; per-thread partial sums over blocks of rows).
  void apply_transpose(const Vector<double>& w, Vector<double>& out) const;

  /// One pass over K for a row update followed by the next column sums, each row read once:
  ///     row_sums_i = Σ_j K_ij w_j,  u_i ← u_i^{1−ω} (1/row_sums_i)^ω  (ω = 1: u_i = 1/row_sums_i),
  ///     col_sums_j = Σ_i K_ij a_i u_i  (with the updated u).
  /// A row sum that is 0 or not finite leaves a non-finite u_i and column sums; the caller checks.
  void sweep(const Vector<double>& w, double omega, const Vector<double>& a, Vector<double>& u,
             Vector<double>& row_sums, Vector<double>& col_sums) const;

  static std::size_t bytes(Eigen::Index n, Eigen::Index m) {
    return sizeof(T) * static_cast<std::size_t>(n) * static_cast<std::size_t>(m);
  }

 private:
  const Matrix<double>& x_;
  Matrix<double> yk_;  ///< y transposed (d×m): coordinate-major keys
  Vector<double> x_sq_, y_sq_;
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> k_;
  int threads_ = 1;
};

extern template class DenseGibbsKernel<double>;
extern template class DenseGibbsKernel<float>;

}  // namespace regatta::measures::detail
