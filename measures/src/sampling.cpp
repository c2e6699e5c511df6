#include <regatta/measures/sampling.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/random_matrix.hpp>

namespace regatta::measures {

namespace {

/// Portable uniform on [0, 1): the top 53 bits of mt19937_64.
class PortableUniform {
 public:
  explicit PortableUniform(std::uint64_t seed) : gen_(seed) {}
  double operator()() { return double(gen_() >> 11) * 0x1.0p-53; }

 private:
  std::mt19937_64 gen_;
};

/// A seed for the uniform stream independent of the normal stream that uses `seed` itself (splitmix64 step).
std::uint64_t derived_seed(std::uint64_t seed) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

void check_count(Eigen::Index n) {
  if (n < 0) throw InputError("n", "the number of samples must be >= 0, got " + std::to_string(n));
}

void check_dimension(Eigen::Index d) {
  if (d < 1) throw InputError("d", "the dimension must be >= 1, got " + std::to_string(d));
}

/// n × d standard normal matrix (row-major fill from the portable stream).
Matrix<double> normals(Eigen::Index n, Eigen::Index d, std::uint64_t seed) {
  const Vector<double> z = standard_normal(n * d, seed);
  return Eigen::Map<const Matrix<double>>(z.data(), n, d);
}

/// Rows of z scaled to norm R; a zero row (probability 0) is redrawn deterministically as e_1.
void project_to_sphere(Matrix<double>& z, double radius) {
  for (Eigen::Index i = 0; i < z.rows(); ++i) {
    const double norm = z.row(i).norm();
    if (norm > 0) {
      z.row(i) *= radius / norm;
    } else {
      z.row(i).setZero();
      z(i, 0) = radius;
    }
  }
}

}  // namespace

std::vector<Eigen::Index> sample_indices(const DiscreteMeasure<double>& mu, Eigen::Index n,
                                         std::uint64_t seed) {
  check_count(n);
  std::vector<double> cumulative(std::size_t(mu.size()));
  double total = 0;
  for (Eigen::Index i = 0; i < mu.size(); ++i) cumulative[std::size_t(i)] = total += mu.weights()(i);
  PortableUniform uniform(seed);
  std::vector<Eigen::Index> out(static_cast<std::size_t>(n));
  for (auto& index : out) {
    // First i with cumulative_i > u: a zero-weight atom repeats its predecessor's value and is never chosen.
    const double u = uniform() * total;
    const auto it = std::upper_bound(cumulative.begin(), cumulative.end(), u);
    if (it != cumulative.end()) {
      index = Eigen::Index(it - cumulative.begin());
    } else {  // u rounded up to total: take the last atom of positive weight
      index = mu.size() - 1;
      while (index > 0 && !(mu.weights()(index) > 0)) --index;
    }
  }
  return out;
}

Matrix<double> sample(const DiscreteMeasure<double>& mu, Eigen::Index n, std::uint64_t seed) {
  const std::vector<Eigen::Index> idx = sample_indices(mu, n, seed);
  Matrix<double> out(n, mu.dim());
  for (Eigen::Index k = 0; k < n; ++k) out.row(k) = mu.atoms().row(idx[std::size_t(k)]);
  return out;
}

Matrix<double> sample_gaussian(const Vector<double>& mean, double sigma, Eigen::Index n, std::uint64_t seed) {
  check_count(n);
  check_dimension(mean.size());
  check_finite("mean", mean);
  check_positive("sigma", sigma);
  Matrix<double> x = sigma * normals(n, mean.size(), seed);
  x.rowwise() += mean.transpose();
  return x;
}

Matrix<double> sample_ball(Eigen::Index d, double radius, Eigen::Index n, std::uint64_t seed) {
  check_count(n);
  check_dimension(d);
  check_positive("radius", radius);
  Matrix<double> x = normals(n, d, seed);
  project_to_sphere(x, 1.0);
  PortableUniform uniform(derived_seed(seed));
  for (Eigen::Index i = 0; i < n; ++i) x.row(i) *= radius * std::pow(uniform(), 1.0 / double(d));
  return x;
}

Matrix<double> sample_sphere(Eigen::Index d, double radius, Eigen::Index n, std::uint64_t seed) {
  check_count(n);
  check_dimension(d);
  check_positive("radius", radius);
  Matrix<double> x = normals(n, d, seed);
  project_to_sphere(x, radius);
  return x;
}

DiscreteMeasure<double> lift_causal(const Matrix<double>& tokens) {
  check_nonempty("tokens", tokens.rows());
  check_nonempty("tokens", tokens.cols());
  check_finite("tokens", tokens);
  const Eigen::Index n = tokens.rows(), d = tokens.cols();
  Matrix<double> lifted(n, d + 1);
  lifted.leftCols(d) = tokens;
  for (Eigen::Index i = 0; i < n; ++i) lifted(i, d) = double(i + 1) / double(n);
  return DiscreteMeasure<double>::empirical(std::move(lifted));
}

}  // namespace regatta::measures
