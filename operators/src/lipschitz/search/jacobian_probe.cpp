// Matrix-free Jacobian probes (jacobian_probe.hpp).
#include "jacobian_probe.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace regatta::lip::detail {

Matrix<double> unit_matrix(Eigen::Index n, Eigen::Index d, Eigen::Index r) {
  Matrix<double> E = Matrix<double>::Zero(n, d);
  E(r / d, r % d) = 1.0;
  return E;
}

Probe power_probe(const operators::Linearization<double>& lin, const Matrix<double>& start, int iterations,
                  double tolerance, const std::function<bool()>& stop) {
  Probe p;
  Matrix<double> v = start;
  double nv = v.norm();
  if (!(nv > 0)) throw std::logic_error("power_probe: the start vector is zero or not finite");
  v /= nv;
  double previous = 0;
  for (int k = 0; k < iterations; ++k) {
    const Matrix<double> Jv = lin.jvp(v);
    const double sigma = Jv.norm();
    if (sigma > p.value || p.direction.size() == 0) {
      p.value = sigma;
      p.direction = v;
      p.left = sigma > 0 ? Matrix<double>(Jv / sigma) : Matrix<double>();
    }
    if (!(sigma > 0) || !std::isfinite(sigma)) break;
    Matrix<double> w = lin.vjp(Jv / sigma);
    nv = w.norm();
    if (!(nv > 0) || !std::isfinite(nv)) break;
    v = w / nv;
    if (k > 0 && std::abs(sigma - previous) <= tolerance * sigma) break;
    if (stop && stop()) break;
    previous = sigma;
  }
  // The last iterate is the better direction whenever it is evaluated: one more JVP.
  const Matrix<double> Jv = lin.jvp(v);
  const double last = Jv.norm();
  if (last > p.value) {
    p.value = last;
    p.direction = v;
    p.left = Jv / last;
  }
  return p;
}

Probe row_probe(const operators::Linearization<double>& lin, std::span<const Eigen::Index> tokens) {
  const Eigen::Index n = lin.rows(), d = lin.value().cols();
  Probe p;
  p.value = -1;
  for (const Eigen::Index i : tokens)
    for (Eigen::Index a = 0; a < d; ++a) {
      const Eigen::Index r = i * d + a;
      const Matrix<double> row = lin.vjp(unit_matrix(n, d, r));
      const double sum = row.cwiseAbs().sum();
      if (sum > p.value) {
        p.value = sum;
        p.row = r;
        p.direction = row.unaryExpr([](double x) { return double((x > 0) - (x < 0)); });
      }
    }
  if (p.value < 0) p.value = 0;
  return p;
}

Probe all_rows_probe(const operators::Linearization<double>& lin) {
  std::vector<Eigen::Index> tokens(static_cast<std::size_t>(lin.rows()));
  for (Eigen::Index i = 0; i < lin.rows(); ++i) tokens[static_cast<std::size_t>(i)] = i;
  return row_probe(lin, tokens);
}

Matrix<double> bilinear_gradient(const operators::Block<double>& block, const Matrix<double>& X,
                                 const Matrix<double>& U, const Matrix<double>& V, double length) {
  const double vmax = V.cwiseAbs().maxCoeff();
  if (!(vmax > 0)) return Matrix<double>::Zero(X.rows(), X.cols());
  const double h = std::cbrt(std::numeric_limits<double>::epsilon()) * length / vmax;
  const Matrix<double> plus = block.linearize(X + h * V).vjp(U);
  const Matrix<double> minus = block.linearize(X - h * V).vjp(U);
  return (plus - minus) / (2 * h);
}

Matrix<double> probe_gradient(const operators::Block<double>& block, const Matrix<double>& X,
                              const Probe& probe, double length) {
  if (probe.row >= 0)
    return bilinear_gradient(block, X, unit_matrix(X.rows(), X.cols(), probe.row), probe.direction, length);
  if (probe.left.size() == 0) return Matrix<double>();
  return bilinear_gradient(block, X, probe.left, probe.direction, length);
}

}  // namespace regatta::lip::detail
