#pragma once
// Internal: linear steps applied to many tangents at once (Linearization<S>::jvp_all, the region pass of
// model/tangent_region.cpp). Tangents of equal shape n×d are stacked row-wise (rows [p·n, (p+1)·n) hold
// tangent p), so that a product by a matrix that is the same for every tangent is ONE product of the stacked
// matrix: for interval64 a midpoint–radius product (core/interval64_product.hpp: an enclosure of every
// member's product), for double Eigen's GEMM, for the multiprecision types the scalar triple loop.
// Elementwise and row-wise steps run the same operations per entry as the per-tangent code they replace.
#include <cstddef>
#include <type_traits>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/interval64_product.hpp>
#include <regatta/operators/normalization.hpp>

namespace regatta::operators::detail {

/// The tangents stacked row-wise (all of the same shape; empty for none).
template <class S>
Matrix<S> stack_tangents(const std::vector<Matrix<S>>& T) {
  if (T.empty()) return {};
  const Eigen::Index n = T.front().rows();
  Matrix<S> out(n * Eigen::Index(T.size()), T.front().cols());
  for (std::size_t p = 0; p < T.size(); ++p) out.middleRows(Eigen::Index(p) * n, n) = T[p];
  return out;
}

/// The inverse of stack_tangents: `count` tangents of equal height.
template <class S>
std::vector<Matrix<S>> unstack_tangents(const Matrix<S>& stacked, std::size_t count) {
  std::vector<Matrix<S>> T(count);
  if (count == 0) return T;
  const Eigen::Index n = stacked.rows() / Eigen::Index(count);
  for (std::size_t p = 0; p < count; ++p) T[p] = stacked.middleRows(Eigen::Index(p) * n, n);
  return T;
}

/// A·W for a point matrix W (weights): midrad_product for interval64, GEMM for IEEE types, the triple loop
/// otherwise.
template <class S>
Matrix<S> times_point(const Matrix<S>& A, const Matrix<double>& W) {
  if constexpr (std::is_same_v<S, interval64>)
    return midrad_product(A, W);
  else
    return fast_product<S>(A, Matrix<S>(W.cast<S>()));
}

/// T[p]·W for every p, as one product of the stacked tangents.
template <class S>
std::vector<Matrix<S>> tangents_times(const std::vector<Matrix<S>>& T, const Matrix<double>& W) {
  return unstack_tangents(times_point(stack_tangents(T), W), T.size());
}

/// The rows of M repeated `count` times (per-row data aligned with stacked tangents).
template <class S>
Matrix<S> tile_rows(const Matrix<S>& M, Eigen::Index count) {
  return M.replicate(count, 1);
}

/// DN(X)[G_p] for each of the `count` stacked tangents G (in place): the normalised rows of X are computed
/// once and the bracket runs over all rows of G — per entry the operations of normalize_rows_jvp.
template <class S>
void normalize_rows_jvp_stacked(Prenorm norm, const Matrix<S>& X, const Vector<S>& gamma, const S& eps,
                                Matrix<S>& G, Eigen::Index count) {
  if (norm == Prenorm::none || count == 0) return;
  Matrix<S> U;
  Vector<S> inv;
  operators::detail::normalized_rows(norm, X, eps, U, inv);
  operators::detail::apply_bracket(norm, tile_rows(U, count), Vector<S>(inv.replicate(count, 1)), G);
  if (gamma.size() != 0) G = G * gamma.asDiagonal();
}

/// normalize_rows_jvp(norm, X, gamma, eps, T[p]) for every p.
template <class S>
std::vector<Matrix<S>> normalize_rows_jvp_all(Prenorm norm, const Matrix<S>& X, const Vector<S>& gamma,
                                              const S& eps, const std::vector<Matrix<S>>& T) {
  if (norm == Prenorm::none || T.empty()) return T;
  Matrix<S> G = stack_tangents(T);
  normalize_rows_jvp_stacked(norm, X, gamma, eps, G, Eigen::Index(T.size()));
  return unstack_tangents(G, T.size());
}

/// (D ⊙ T[p])·W for every p (the MLP's second layer), as one product.
template <class S>
std::vector<Matrix<S>> masked_tangents_times(const Matrix<S>& D, const std::vector<Matrix<S>>& T,
                                             const Matrix<double>& W) {
  const Matrix<S> masked = tile_rows(D, Eigen::Index(T.size())).cwiseProduct(stack_tangents(T));
  return unstack_tangents(times_point(masked, W), T.size());
}

}  // namespace regatta::operators::detail
