// The self-attention JVP of one block for many tangents at once (BlockState::self_jvp_stacked, used by
// Linearization<S>::jvp_all). The formulas are those of block_derivatives.cpp (block_state.hpp); every
// product by a matrix shared by all tangents is one product over the stacked tangents (tangent_stack.hpp),
// the score and kernel steps run tangent by tangent with the same operations as attention_jvp.
#include <cstddef>

#include <regatta/core/interval64_product.hpp>
#include <regatta/core/scalar.hpp>

#include "block_state.hpp"
#include "tangent_stack.hpp"

namespace regatta::operators {

namespace {
using detail::Mat;
using regatta::fast_product;

/// Rows [p·n, (p+1)·n) of M as a matrix.
template <class S>
Mat<S> block_of(const Mat<S>& M, Eigen::Index p, Eigen::Index n) {
  return M.middleRows(p * n, n);
}
}  // namespace

template <class S>
Mat<S> BlockState<S>::self_jvp_stacked(const Mat<S>& T, Eigen::Index count) const {
  const Block<S>& b = *block;
  const Eigen::Index n = X.rows(), d = b.d_;
  Mat<S> Tn = T;
  detail::normalize_rows_jvp_stacked(b.options_.prenorm, X, b.gamma_, b.norm_eps_, Tn, count);
  Mat<S> Fdot = b.options().residual ? T : Mat<S>(Mat<S>::Zero(T.rows(), d));
  for (std::size_t h = 0; h < heads.size(); ++h) {
    const Head& hd = heads[h];
    const Eigen::Index m = hd.K.rows();
    Mat<S> Qdot = fast_product<S>(Tn, b.WQ_[h]), Kdot = fast_product<S>(Tn, b.WK_[h]);
    for (Eigen::Index p = 0; p < count; ++p) {  // RoPE rotates by the row index within each tangent
      Qdot.middleRows(p * n, n) = rotated(block_of(Qdot, p, n));
      Kdot.middleRows(p * n, n) = rotated(block_of(Kdot, p, n));
    }
    // Ṡ_p = (Q̇_p Kᵀ + Q K̇_pᵀ)/√d_h (dot): Q̇ Kᵀ and K̇ Qᵀ for all p in two products.
    Mat<S> QdotK, KdotQ;
    if (b.kind_ == AttentionKind::dot) {
      QdotK = fast_product<S>(Qdot, Mat<S>(hd.K.transpose()));
      KdotQ = fast_product<S>(Kdot, Mat<S>(hd.Q.transpose()));
    }
    Mat<S> Kd(count * n, m);
    for (Eigen::Index p = 0; p < count; ++p) {
      Mat<S> Sdot;
      if (b.kind_ == AttentionKind::dot) {
        Sdot = block_of(QdotK, p, n);
        Sdot += block_of(KdotQ, p, n).transpose();
        Sdot *= b.inv_sqrt_dh_;
      } else {
        Sdot = score_jvp(hd, block_of(Qdot, p, n), block_of(Kdot, p, n));
      }
      Kd.middleRows(p * n, n) = kernel_jvp(hd, Sdot);
    }
    Fdot += fast_product<S>(Kd, hd.V);
    // kernel · (Ṫn_p · WVO) for all p: the n×d blocks side by side, one product by the kernel.
    const Mat<S> Z = fast_product<S>(Tn, b.WVO_[h]);
    Mat<S> wide(n, count * d);
    for (Eigen::Index p = 0; p < count; ++p) wide.middleCols(p * d, d) = block_of(Z, p, n);
    const Mat<S> KZ = fast_product<S>(hd.kernel, wide);
    for (Eigen::Index p = 0; p < count; ++p) Fdot.middleRows(p * n, n) += KZ.middleCols(p * d, d);
  }
  return Fdot;
}

#define REGATTA_INSTANTIATE(S) \
  template Mat<S> BlockState<S>::self_jvp_stacked(const Mat<S>&, Eigen::Index) const;
REGATTA_FOR_EACH_EXACT64_SCALAR(REGATTA_INSTANTIATE)
#undef REGATTA_INSTANTIATE

}  // namespace regatta::operators
