// PGD lower bound on Δ*(X, ε), certified by interval re-evaluation (see pgd.hpp).
#include <regatta/operators/lipschitz/pgd.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <regatta/core/convert.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/operators/differentiable.hpp>

#include "../local/local_support.hpp"

namespace regatta::lip {

namespace {

/// The ascent stops once its step is below this fraction of ε: the objective then changes by about
/// ‖J‖·1e-6·ε per step, below the digits the report prints.
constexpr double minimum_relative_step = 1e-6;
/// The certified point is X + (1 − 2⁻³⁰)E, a margin inside the ball so that rounding the sum to doubles
/// cannot leave it (the relative rounding of one addition is 2⁻⁵³).
constexpr double ball_margin = 0x1p-30;

}  // namespace

PgdResult pgd_lower_bound(const operators::AttentionLayer& layer, const operators::AttentionOptions& options,
                          const Matrix<double>& X, double eps, const Matrix<double>& direction, int steps,
                          int random_restarts, std::uint64_t seed) {
  const operators::Block<double> block(layer, options);
  const Matrix<double> F0 = block.forward(X);
  std::vector<Matrix<double>> starts;
  if (direction.size() == X.size() && direction.norm() > 0) {
    starts.push_back(direction / direction.norm());
    starts.push_back(-direction / direction.norm());
  }
  std::mt19937_64 rng(seed);
  for (int r = 0; r < random_restarts || starts.empty(); ++r) {
    Matrix<double> v(X.rows(), X.cols());
    for (Eigen::Index k = 0; k < v.size(); ++k) v.data()[k] = double(rng() >> 11) * 0x1p-53 * 2.0 - 1.0;
    starts.push_back(v / v.norm());
  }
  auto value = [&](const Matrix<double>& E) { return (block.forward(X + E) - F0).norm(); };
  auto project = [&](Matrix<double> E) {
    const double norm = E.norm();
    if (norm > eps) E *= eps / norm;
    return E;
  };
  Matrix<double> best_E = project(eps * starts.front());
  double best = value(best_E);
  for (const Matrix<double>& start : starts) {
    Matrix<double> E = project(eps * start);
    double current = value(E);
    double step = 0.5 * eps;
    for (int k = 0; k < steps && step > minimum_relative_step * eps; ++k) {
      const operators::Linearization<double> lin = block.linearize(X + E);
      const Matrix<double> grad = lin.vjp(lin.value() - F0);  // ∇_E ½‖F(X + E) − F(X)‖²
      const double gn = grad.norm();
      if (!(gn > 0)) break;
      const Matrix<double> candidate = project(E + step * grad / gn);
      const double v = value(candidate);
      if (v > current) {
        E = candidate;
        current = v;
        step *= 1.5;
      } else {
        step /= 3;
      }
    }
    if (current > best) {
      best = current;
      best_E = E;
    }
  }
  PgdResult r;
  r.estimate = best;
  r.certified_lower = std::numeric_limits<double>::quiet_NaN();
  const Matrix<double> Y = X + best_E * (1.0 - ball_margin);  // a margin inside the ball
  r.witness = Y;
  PrecisionGuard guard(128);
  const auto to_interval = [](const Matrix<double>& M) {
    return Matrix<interval>(M.unaryExpr([](double v) { return scalar_cast<interval>(v); }));
  };
  const Matrix<interval> Xi = to_interval(X), Yi = to_interval(Y);
  interval e2(0);
  for (Eigen::Index k = 0; k < X.size(); ++k) {
    const interval diff = Yi.data()[k] - Xi.data()[k];
    e2 += diff * diff;
  }
  const interval eps_i = scalar_cast<interval>(eps);
  if (!certainly_less_equal(e2, eps_i * eps_i)) return r;
  const operators::Block<interval> iblock(layer, options);
  const Matrix<interval> D = iblock.forward(Yi) - iblock.forward(Xi);
  interval sum(0);
  for (Eigen::Index k = 0; k < D.size(); ++k) sum += D.data()[k] * D.data()[k];
  const double lower = detail::lower_double(sqrt(sum));
  r.certified_lower = std::isfinite(lower) ? std::max(0.0, lower) : std::numeric_limits<double>::quiet_NaN();
  return r;
}

}  // namespace regatta::lip
