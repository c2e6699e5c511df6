#include <regatta/core/dense_svd.hpp>

#include <Eigen/Eigenvalues>
#include <Eigen/SVD>

namespace regatta {

DenseSvd dense_svd(const Eigen::MatrixXd& M, bool want_u, bool want_v, SvdMethod method) {
  const unsigned options = (want_u ? Eigen::ComputeThinU : 0) | (want_v ? Eigen::ComputeThinV : 0);
  DenseSvd out;
  const auto take = [&](const auto& svd) {
    out.singular_values = svd.singularValues();
    if (want_u) out.U = svd.matrixU();
    if (want_v) out.V = svd.matrixV();
  };
  if (method == SvdMethod::jacobi)
    take(Eigen::JacobiSVD<Eigen::MatrixXd>(M, options));
  else
    take(Eigen::BDCSVD<Eigen::MatrixXd>(M, options));
  return out;
}

Eigen::VectorXd singular_values(const Eigen::MatrixXd& M, SvdMethod method) {
  return dense_svd(M, false, false, method).singular_values;
}

double largest_singular_value(const Eigen::MatrixXd& M, SvdMethod method) {
  if (M.size() == 0) return 0;
  return singular_values(M, method)(0);
}

SymmetricEigen symmetric_eigen(const Eigen::MatrixXd& S, bool want_vectors) {
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> solver(
      S, want_vectors ? Eigen::ComputeEigenvectors : Eigen::EigenvaluesOnly);
  SymmetricEigen out;
  out.converged = solver.info() == Eigen::Success;
  out.values = solver.eigenvalues();
  if (want_vectors) out.vectors = solver.eigenvectors();
  return out;
}

}  // namespace regatta
