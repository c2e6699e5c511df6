// The spectral norm of a matrix-free linear map: Lanczos and power iteration on MᵀM (see matrix_free.hpp).
#include <regatta/operators/lipschitz/matrix_free.hpp>

#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <regatta/core/error.hpp>

#include "../local/local_support.hpp"

namespace regatta::lip {

void detail::check_spectral_options(const SpectralOptions& options) {
  if (!(options.relative_tolerance > 0 && options.relative_tolerance < 1))
    throw InputError("relative_tolerance",
                     "must lie in (0, 1), got " + std::to_string(options.relative_tolerance));
  if (options.max_iterations < 1)
    throw InputError("max_iterations", "must be at least 1, got " + std::to_string(options.max_iterations));
}

namespace {

using detail::check_spectral_options;
using detail::flat;
using detail::shaped;
using Eigen::Index;

Vector<double> start_vector(Index size, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  Vector<double> v(size);
  for (Index i = 0; i < size; ++i) v(i) = 2.0 * std::ldexp(double(gen() >> 11), -53) - 1.0;
  const double norm = v.norm();
  if (norm > 0) v /= norm;
  return v;
}

/// Lanczos on MᵀM with full reorthogonalisation (twice, "twice is enough"; Parlett). T_k is the
/// tridiagonal matrix of the α's and β's; its largest eigenvalue θ with unit eigenvector s gives the Ritz
/// pair (θ, y = Q_k s) and the residual ‖MᵀMy − θy‖ = β_k|s_k| in exact arithmetic.
SpectralEstimate lanczos(const std::function<Vector<double>(const Vector<double>&)>& gram,
                         const std::function<double(const Vector<double>&)>& image_norm, Index size,
                         const SpectralOptions& options) {
  SpectralEstimate out;
  out.method = SpectralMethod::lanczos;
  std::vector<Vector<double>> basis;
  std::vector<double> alpha, beta;
  Vector<double> q = start_vector(size, options.seed);
  Vector<double> ritz_coefficients;
  double theta = 0;
  const double unit_roundoff = std::ldexp(1.0, -53);
  for (int k = 0; k < options.max_iterations; ++k) {
    basis.push_back(q);
    Vector<double> w = gram(q);
    ++out.iterations;
    const double a = q.dot(w);
    w -= a * q;
    if (k > 0) w -= beta.back() * basis[basis.size() - 2];
    for (int pass = 0; pass < 2; ++pass)
      for (const Vector<double>& qj : basis) w -= qj.dot(w) * qj;
    alpha.push_back(a);
    const double b = w.norm();

    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig;
    const Eigen::VectorXd diag = Eigen::Map<const Eigen::VectorXd>(alpha.data(), Index(alpha.size()));
    const Eigen::VectorXd sub = Eigen::Map<const Eigen::VectorXd>(beta.data(), Index(beta.size()));
    eig.computeFromTridiagonal(diag, sub, Eigen::ComputeEigenvectors);
    const Index top = Index(alpha.size()) - 1;
    theta = std::max(0.0, eig.eigenvalues()(top));
    ritz_coefficients = eig.eigenvectors().col(top);
    const double residual = b * std::abs(ritz_coefficients(top));
    out.relative_error = theta > 0 ? residual / (2 * theta) : 0.0;
    // An invariant subspace (β ≈ 0 relative to the spectrum seen so far) makes the Ritz values exact.
    const double scale = std::max({theta, std::abs(a), eig.eigenvalues().cwiseAbs().maxCoeff()});
    const bool breakdown = b <= double(size) * unit_roundoff * scale;
    if (breakdown || residual <= 2 * options.relative_tolerance * theta || Index(basis.size()) == size) {
      out.converged = true;
      break;
    }
    beta.push_back(b);
    q = w / b;
  }
  Vector<double> y = Vector<double>::Zero(size);
  for (std::size_t j = 0; j < basis.size(); ++j) y += ritz_coefficients(Index(j)) * basis[j];
  const double ny = y.norm();
  if (ny > 0) {
    y /= ny;
  } else {
    y = basis.front();
  }
  out.witness = y;  // reshaped by the caller
  out.estimate = image_norm(y);
  return out;
}

/// Power iteration v ← MᵀMv/‖MᵀMv‖; the estimate is ‖Mv‖ for the returned v.
SpectralEstimate power(const LinearMap& apply, const LinearMap& apply_transpose, Index rows, Index cols,
                       const SpectralOptions& options) {
  SpectralEstimate out;
  out.method = SpectralMethod::power;
  Matrix<double> v = shaped(start_vector(rows * cols, options.seed), rows, cols);
  double previous = 0;
  for (int k = 0; k < options.max_iterations; ++k) {
    const Matrix<double> u = apply(v);
    const double rho = u.norm();
    ++out.iterations;
    out.estimate = rho;
    out.witness = v;
    if (rho == 0) {
      out.converged = true;
      out.relative_error = 0;
      break;
    }
    out.relative_error = std::abs(rho - previous) / rho;
    if (k > 0 && out.relative_error <= options.relative_tolerance) {
      out.converged = true;
      break;
    }
    previous = rho;
    Matrix<double> w = apply_transpose(u);
    const double nw = w.norm();
    if (nw == 0) {
      out.converged = true;
      break;
    }
    v = w / nw;
  }
  return out;
}

}  // namespace

std::string to_string(SpectralMethod method) {
  return method == SpectralMethod::lanczos ? "lanczos" : "power";
}

SpectralMethod parse_spectral_method(const std::string& text, const std::string& subject) {
  if (text == "lanczos") return SpectralMethod::lanczos;
  if (text == "power") return SpectralMethod::power;
  throw InputError(subject, "unknown method '" + text + "' (expected lanczos or power)");
}

SpectralEstimate matrix_free_norm_2(const LinearMap& apply, const LinearMap& apply_transpose, Index rows,
                                    Index cols, const SpectralOptions& options) {
  check_spectral_options(options);
  if (rows * cols <= 0) throw InputError("matrix_free_norm_2", "the input space is empty");
  if (options.method == SpectralMethod::power) return power(apply, apply_transpose, rows, cols, options);
  const auto gram = [&](const Vector<double>& v) {
    return flat(apply_transpose(apply(shaped(v, rows, cols))));
  };
  const auto image_norm = [&](const Vector<double>& v) { return apply(shaped(v, rows, cols)).norm(); };
  SpectralEstimate out = lanczos(gram, image_norm, rows * cols, options);
  out.witness = shaped(Vector<double>(out.witness), rows, cols);
  return out;
}

}  // namespace regatta::lip
