#include <Eigen/QR>
#include <cassert>
#include <cmath>
#include <numbers>
#include <random>
#include <regatta/core/random_matrix.hpp>

namespace regatta {

namespace {

class PortableNormal {
 public:
  explicit PortableNormal(std::uint64_t seed) : rng_(seed) {}
  double operator()() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    // Two uniforms in (0, 1] built from 53 random bits each.
    const double u1 = (static_cast<double>(rng_() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2 * std::numbers::pi * u2);
    has_spare_ = true;
    return r * std::cos(2 * std::numbers::pi * u2);
  }

 private:
  std::mt19937_64 rng_;
  double spare_ = 0;
  bool has_spare_ = false;
};

Matrix<double> gaussian(Eigen::Index rows, Eigen::Index cols, PortableNormal& normal) {
  Matrix<double> m(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j) m(i, j) = normal();
  return m;
}

Matrix<double> orthonormal_columns(Eigen::Index rows, Eigen::Index cols, PortableNormal& normal) {
  const Matrix<double> g = gaussian(rows, cols, normal);
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(g);
  return qr.householderQ() * Eigen::MatrixXd::Identity(rows, cols);
}

}  // namespace

Vector<double> standard_normal(Eigen::Index n, std::uint64_t seed) {
  PortableNormal normal(seed);
  Vector<double> v(n);
  for (Eigen::Index k = 0; k < n; ++k) v(k) = normal();
  return v;
}

Matrix<double> random_matrix(const RandomMatrixSpec& spec) {
  assert(spec.rows >= 0 && spec.cols >= 0);
  PortableNormal normal(spec.seed);
  switch (spec.kind) {
    case RandomMatrixKind::gaussian:
      return gaussian(spec.rows, spec.cols, normal);
    case RandomMatrixKind::low_rank: {
      const Matrix<double> left = gaussian(spec.rows, spec.rank, normal);
      const Matrix<double> right = gaussian(spec.rank, spec.cols, normal);
      return left * right;
    }
    case RandomMatrixKind::ill_conditioned: {
      const Eigen::Index k = std::min(spec.rows, spec.cols);
      const Matrix<double> u = orthonormal_columns(spec.rows, k, normal);
      const Matrix<double> v = orthonormal_columns(spec.cols, k, normal);
      Vector<double> s(k);
      for (Eigen::Index i = 0; i < k; ++i)
        s(i) = k == 1 ? 1.0 : std::pow(spec.condition, -static_cast<double>(i) / static_cast<double>(k - 1));
      return u * s.asDiagonal() * v.transpose();
    }
  }
  return {};
}

std::string to_string(RandomMatrixKind kind) {
  switch (kind) {
    case RandomMatrixKind::gaussian:
      return "gaussian";
    case RandomMatrixKind::low_rank:
      return "lowrank";
    case RandomMatrixKind::ill_conditioned:
      return "illcond";
  }
  return "?";
}

}  // namespace regatta
