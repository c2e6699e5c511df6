// Helpers of the adversarial searches (search_support.hpp).
#include "search_support.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>

#include <limits>
#include <string>
#include <vector>

#include <mpfr.h>
#include <Eigen/Eigenvalues>

#include <regatta/core/convert.hpp>
#include <regatta/core/dense_svd.hpp>
#include <regatta/core/detail/scalar_math.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>

namespace regatta::lip::detail {

Matrix<double> score_matrix(const operators::AttentionLayer& layer, int h) {
  return Matrix<double>(layer.WQ[h] * layer.WK[h].transpose()) / std::sqrt(double(layer.head_dim));
}

double length_scale(const operators::AttentionLayer& layer, const operators::AttentionOptions& options,
                    std::optional<double> radius) {
  double ell = 1;
  if (options.prenorm == operators::Prenorm::none) {
    double a = 0;
    for (int h = 0; h < layer.heads; ++h) {
      a = std::max(a, largest_singular_value(Eigen::MatrixXd(score_matrix(layer, h))));
    }
    if (a > 0 && std::isfinite(a)) ell = 1 / std::sqrt(a);
  }
  if (radius) ell = std::min(ell, *radius);
  return ell;
}

ExtremeEigen extreme_eigen(const Matrix<double>& A) {
  ExtremeEigen e;
  const Eigen::MatrixXd Ad = A;
  Eigen::EigenSolver<Eigen::MatrixXd> solver(Ad, true);
  const double scale = std::max(Ad.norm(), 1e-300);
  bool found = false;
  if (solver.info() == Eigen::Success) {
    for (Eigen::Index k = 0; k < Ad.rows(); ++k) {
      const std::complex<double> lambda = solver.eigenvalues()(k);
      if (std::abs(lambda.imag()) > 1e-12 * scale) continue;
      Vector<double> u = solver.eigenvectors().col(k).real();
      u /= u.norm();
      if (!found || lambda.real() > e.lambda_max) {
        e.lambda_max = lambda.real();
        e.u_max = u;
      }
      if (!found || lambda.real() < e.lambda_min) {
        e.lambda_min = lambda.real();
        e.u_min = u;
      }
      found = true;
    }
  }
  if (!found) {
    const Eigen::MatrixXd sym = (Ad + Ad.transpose()) / 2;
    const SymmetricEigen s = symmetric_eigen(sym, true);
    const Eigen::Index last = sym.rows() - 1;
    e.lambda_min = s.values(0);
    e.lambda_max = s.values(last);
    e.u_min = s.vectors.col(0);
    e.u_max = s.vectors.col(last);
  }
  return e;
}

Vector<double> top_right_singular_vector(const Matrix<double>& M) {
  Vector<double> v = dense_svd(Eigen::MatrixXd(M), false, true).V.col(0);
  return v / v.norm();
}

Eigen::Index first_row_outside_ball(const Matrix<double>& X, double radius) {
  const interval r2 = regatta::detail::square<interval>(scalar_cast<interval>(radius));
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    interval norm2(0);
    for (Eigen::Index a = 0; a < X.cols(); ++a)
      norm2 += regatta::detail::square<interval>(scalar_cast<interval>(X(i, a)));
    if (!certainly_less_equal(norm2, r2)) return i;
  }
  return -1;
}

void project_rows_to_ball(Matrix<double>& X, double radius) {
  const double limit = radius * ball_margin;
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    const double norm = X.row(i).norm();
    if (norm > limit) X.row(i) *= limit / norm;
  }
}

std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t k) {
  std::uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (k + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

ScalarMax maximize_log_scale(const std::function<double(double)>& f, double low, double high, int scan,
                             int golden, const std::function<bool()>& stop) {
  ScalarMax best{low, -std::numeric_limits<double>::infinity()};
  auto at = [&](double log_theta) {
    if (stop && stop()) return -std::numeric_limits<double>::infinity();
    const double theta = std::exp(log_theta);
    const double value = f(theta);
    if (value > best.value) best = {theta, value};
    return value;
  };
  const double lo = std::log(low), hi = std::log(high);
  const int points = hi > lo ? std::max(scan, 2) : 1;
  std::vector<double> values(static_cast<std::size_t>(points));
  for (int k = 0; k < points; ++k) values[k] = at(points == 1 ? lo : lo + (hi - lo) * k / (points - 1));
  if (points == 1) return best;
  const int k = int(std::max_element(values.begin(), values.end()) - values.begin());
  const double step = (hi - lo) / (points - 1);
  double a = lo + step * std::max(k - 1, 0), b = lo + step * std::min(k + 1, points - 1);
  const double shrink = (std::sqrt(5.0) - 1) / 2;
  double c = b - shrink * (b - a), e = a + shrink * (b - a);
  double fc = at(c), fe = at(e);
  for (int it = 0; it < golden; ++it) {
    if (fc >= fe) {
      b = e, e = c, fe = fc;
      c = b - shrink * (b - a);
      fc = at(c);
    } else {
      a = c, c = e, fc = fe;
      e = a + shrink * (b - a);
      fe = at(e);
    }
  }
  return best;
}

void adaptive_ascent(double step, double min_step, int max_steps, const std::function<bool()>& next_direction,
                     const std::function<bool(double)>& climb, const std::function<bool()>& stop) {
  constexpr double growth = 1.5, shrink = 3.0;
  const auto stopped = [&] { return stop && stop(); };
  int steps = 0;
  while (steps < max_steps && !stopped()) {
    if (!next_direction()) return;
    bool accepted = false;
    while (steps < max_steps && !stopped() && step > min_step) {
      ++steps;
      if (climb(step)) {
        step *= growth;
        accepted = true;
        break;
      }
      step /= shrink;
    }
    if (!accepted) return;
  }
}

double round_down(const mpfr& x) { return mpfr_get_d(x.backend().data(), MPFR_RNDD); }
double round_up(const mpfr& x) { return mpfr_get_d(x.backend().data(), MPFR_RNDU); }

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void check_precision(unsigned bits) {
  if (bits < 53 || bits > max_precision_bits)
    throw InputError("precision", "must be between 53 and " + std::to_string(max_precision_bits) +
                                      " bits, got " + std::to_string(bits));
}

}  // namespace regatta::lip::detail
