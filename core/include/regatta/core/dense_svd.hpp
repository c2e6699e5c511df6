#pragma once
// Dense singular value and symmetric eigenvalue decompositions in double, compiled once.
//
// Eigen's JacobiSVD, BDCSVD and SelfAdjointEigenSolver are header templates: each file that used them
// instantiated them again (about 9 s of GCC's time per file and matrix layout at -O1, more at -O2), and the
// library's sources and the tests used them in some thirty files. These wrappers are compiled once in
// core/src/dense_svd.cpp; every double decomposition goes through them. They are ESTIMATES (floating
// point, not certified): the certified norms are in spectral_norm.hpp.
#include <Eigen/Core>

namespace regatta {

/// Which of Eigen's SVDs: one-sided Jacobi (accurate to a few ulps per rotation sweep; the tests' error
/// analyses assume it) or divide and conquer (the faster one above a few dozen rows; Eigen switches to
/// Jacobi itself below 16 columns).
enum class SvdMethod { jacobi, divide_and_conquer };

/// Singular values (descending) and, if asked for, the thin factors U (rows × k) and V (cols × k),
/// k = min(rows, cols).
struct DenseSvd {
  Eigen::VectorXd singular_values;
  Eigen::MatrixXd U;  ///< empty unless asked for
  Eigen::MatrixXd V;  ///< empty unless asked for
};

DenseSvd dense_svd(const Eigen::MatrixXd& M, bool want_u, bool want_v, SvdMethod method = SvdMethod::jacobi);

/// Singular values in descending order.
Eigen::VectorXd singular_values(const Eigen::MatrixXd& M, SvdMethod method = SvdMethod::jacobi);

/// The largest singular value (‖M‖₂ in floating point); 0 for an empty matrix.
double largest_singular_value(const Eigen::MatrixXd& M, SvdMethod method = SvdMethod::jacobi);

/// Eigenvalues (ascending) and, if asked for, orthonormal eigenvectors (columns, same order) of the
/// symmetric matrix S (only its lower triangle is read). `converged` is Eigen's report.
struct SymmetricEigen {
  Eigen::VectorXd values;
  Eigen::MatrixXd vectors;  ///< empty unless asked for
  bool converged = false;
};

SymmetricEigen symmetric_eigen(const Eigen::MatrixXd& S, bool want_vectors);

}  // namespace regatta
