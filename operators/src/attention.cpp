// Multi-head attention through pairwise::reduce (attention.md §2).
#include <regatta/operators/attention.hpp>

#include <cmath>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/pairwise.hpp>

namespace regatta::operators {

namespace {

/// Z·W + 1·bᵀ (b may be absent: empty list).
Matrix<double> project(const Matrix<double>& Z, const Matrix<double>& W, const std::vector<Vector<double>>& b,
                       std::size_t h) {
  Matrix<double> out = Z * W;
  if (!b.empty()) out.rowwise() += b[h].transpose();
  return out;
}

}  // namespace

Matrix<double> attend_cross(const AttentionLayer& layer, const Matrix<double>& X, const Matrix<double>& Y,
                            const AttentionOptions& options) {
  layer.validate();
  check_nonempty("X", X.rows());
  check_nonempty("Y", Y.rows());
  check_cols("X", X.cols(), layer.d);
  check_cols("Y", Y.cols(), layer.d);
  check_finite("X", X);
  check_finite("Y", Y);
  if (layer.kind == AttentionKind::l2 && !options.allow_untied_l2 && !layer.tied())
    throw InputError("layer",
                     "untied L2 is outside the L2 theorem (WK must equal WQ; allow_untied_l2 overrides)");

  if (options.prenorm != Prenorm::none || options.sinkhorn_iterations != 1)
    throw InputError("options", "pre-norm and Sinkhorn attention are not available in attend yet");
  const double inv_sqrt_dh = 1.0 / std::sqrt(double(layer.head_dim));
  const pairwise::Kernel kernel{
      layer.kind == AttentionKind::dot ? pairwise::ScoreKind::dot : pairwise::ScoreKind::neg_sq_dist,
      inv_sqrt_dh, 1.0, options.causal ? pairwise::MaskKind::causal : pairwise::MaskKind::none};

  Matrix<double> out = Matrix<double>::Zero(X.rows(), layer.d);
  for (std::size_t h = 0; h < std::size_t(layer.heads); ++h) {
    const Matrix<double> queries = project(X, layer.WQ[h], layer.bQ, h);
    const Matrix<double> keys = project(Y, layer.WK[h], layer.bK, h);
    // l2 value map Y·A_h·WV_h = (Y·WQ_h)·(WQ_hᵀ·WV_h)/√d_h, evaluated without forming the d×d matrix A_h.
    const Matrix<double> value_map =
        layer.kind == AttentionKind::dot
            ? layer.WV[h]
            : Matrix<double>(layer.WQ[h] * (inv_sqrt_dh * (layer.WQ[h].transpose() * layer.WV[h])));
    const Matrix<double> values = project(Y, value_map, layer.bV, h);
    pairwise::Problem<double> problem;
    problem.queries = &queries;
    problem.keys = &keys;
    problem.values = &values;
    const pairwise::Result<double> r = pairwise::reduce<double>(problem, kernel);
    out.noalias() += r.out * layer.WO.middleRows(Eigen::Index(h) * layer.value_dim, layer.value_dim);
  }
  if (layer.bO.size() != 0) out.rowwise() += layer.bO.transpose();
  if (options.residual) out += X;
  return out;
}

Matrix<double> attend(const AttentionLayer& layer, const Matrix<double>& X, const AttentionOptions& options) {
  return attend_cross(layer, X, X, options);
}

}  // namespace regatta::operators
