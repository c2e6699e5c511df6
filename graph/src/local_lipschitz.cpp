// ‖J(x)‖₂ of a whole graph: a power-iteration estimate from forward- and reverse-mode sweeps, and a certified
// upper bound from the interval Jacobian at the point (local_lipschitz.hpp;
// docs/graph.md#forward-mode-and-jacobian-enclosures).
#include <regatta/graph/local_lipschitz.hpp>

#include <cmath>
#include <limits>
#include <random>

#include <regatta/core/eigen.hpp>
#include <regatta/core/interval_norms.hpp>
#include <regatta/graph/attack.hpp>
#include <regatta/graph/derivatives.hpp>

#include "gradient.hpp"

namespace regatta::graph {

namespace {

double norm2(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e * e;
  return std::sqrt(s);
}

}  // namespace

WholeLipschitz local_lipschitz(const Graph& g, const std::vector<double>& x, int max_iterations,
                               double tolerance) {
  detail::require_one_input_output(g, x.size());
  WholeLipschitz r;
  std::mt19937_64 rng(1);
  std::vector<double> v(x.size());
  for (double& e : v) e = std::normal_distribution<double>()(rng);
  double n = norm2(v);
  for (double& e : v) e /= n;
  for (int k = 0; k < max_iterations; ++k) {
    const std::vector<double> u = jvp(g, x, v);  // J·v
    const double previous = r.estimate;
    r.estimate = norm2(u);
    ++r.iterations;
    std::vector<double> w = vjp(g, x, u);  // Jᵀ·J·v
    n = norm2(w);
    if (!(n > 0) || !std::isfinite(n)) break;  // J·v = 0 (J = 0, or v in its kernel) or overflow
    for (double& e : w) e /= n;
    v = std::move(w);
    if (k > 0 && std::fabs(r.estimate - previous) <= tolerance * r.estimate) break;
  }
  const Jacobian<interval64> J = jacobian_enclosure_at(g, x);
  r.rows = J.rows;
  r.cols = J.cols;
  Matrix<interval64> M(Eigen::Index(J.rows), Eigen::Index(J.cols));
  for (std::size_t i = 0; i < J.rows; ++i)
    for (std::size_t j = 0; j < J.cols; ++j) M(Eigen::Index(i), Eigen::Index(j)) = J(i, j);
  r.certified = all_finite(M) ? spectral_norm_bound(M).upper : std::numeric_limits<double>::infinity();
  return r;
}

}  // namespace regatta::graph
