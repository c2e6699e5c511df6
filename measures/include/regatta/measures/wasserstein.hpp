#pragma once
// Wasserstein distances between discrete measures (docs/math/transport.md#wasserstein,
// docs/math/transport.md#sliced, docs/math/transport.md#certified-bracket).
//
//   wasserstein_exact      W_p by the network simplex (exact up to the pivots' rounding; status reported)
//   wasserstein_1d         d = 1 only: the quantile formula (monotone coupling), O((n + m) log(n + m)),
//                          generic in the scalar (double, mpfr, interval)
//   sliced_wasserstein     Monte-Carlo estimate of SW_p over seeded uniform directions (an estimate)
//   certify_wasserstein    a rigorous bracket lower <= W_p(mu, nu) <= upper from any plan and potentials
//
// Every function requires p >= 1 (for p < 1, W_p is not the metric used here: InputError "p") and measures of
// the same dimension (InputError "nu").
#include <cstdint>

#include <regatta/measures/discrete_measure.hpp>
#include <regatta/measures/network_simplex.hpp>

namespace regatta::measures {

struct WassersteinResult {
  double value = 0;  ///< W_p = cost^(1/p)
  double cost = 0;   ///< W_p^p = <P, C> of the returned plan
  TransportPlan plan;
  TransportStatus status = TransportStatus::max_iterations;
};

/// Above this many pairs n*m the cost matrix is not materialised (costs computed on the fly).
inline constexpr std::int64_t dense_cost_limit = std::int64_t(9) * 1000 * 1000;

/// W_p(mu, nu) with the network simplex on C_ij = ||x_i - y_j||^p. Result contract: network_simplex.hpp.
WassersteinResult wasserstein_exact(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu,
                                    double p, const NetworkSimplexOptions& options = {});

/// W_p^p for d = 1 by the quantile formula W_p^p = int_0^1 |F^-1(t) - G^-1(t)|^p dt: atoms sorted, the
/// merged cumulative weights walked with two pointers (the monotone coupling, optimal for convex costs).
/// For mpfr the result is exact up to the final rounding when the working precision holds the cumulative
/// sums of the weights exactly; for interval it encloses W_p^p whenever those sums are computed exactly (the
/// ordering of breakpoints is then decided exactly). InputError when the dimension is not 1.
template <class S>
S wasserstein_1d_cost(const DiscreteMeasure<S>& mu, const DiscreteMeasure<S>& nu, double p);
/// (wasserstein_1d_cost)^(1/p).
template <class S>
S wasserstein_1d(const DiscreteMeasure<S>& mu, const DiscreteMeasure<S>& nu, double p);

struct SlicedResult {
  double value = 0;  ///< estimate of SW_p = (mean over directions of W_p^p(theta_# mu, theta_# nu))^(1/p)
  double cost = 0;   ///< the mean of the slices' W_p^p (unbiased for SW_p^p)
  double standard_error = 0;  ///< standard error of `cost` (sample standard deviation / sqrt(L))
  int n_directions = 0;
  bool is_estimate = true;  ///< always true: a Monte-Carlo estimate, not a bound
};

/// Sliced Wasserstein over n_directions >= 1 directions theta = g / ||g||, g standard normal from the
/// portable seeded generator (core/random_matrix.hpp); each slice exact by the 1-D formula.
SlicedResult sliced_wasserstein(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu,
                                double p, int n_directions, std::uint64_t seed);

struct CertifiedBracket {
  double lower = 0;           ///< certified: lower <= W_p(mu, nu)
  double upper = 0;           ///< certified: W_p(mu, nu) <= upper
  double cost_lower = 0;      ///< certified lower bound on W_p^p (L of docs/math/transport.md#cert-lower)
  double cost_upper = 0;      ///< certified upper bound on W_p^p (U of docs/math/transport.md#cert-upper)
  double relative_width = 0;  ///< (upper - lower) / upper (0 when both are 0)
  bool certified = false;     ///< both ends finite and lower <= upper
};

/// Certified bracket of W_p(mu, nu) from `plan` (any entries with mass >= 0, any finite u; v is not used)
/// following docs/math/transport.md#certified-bracket: the weights are normalised as intervals a_i / sum a;
/// the plan is scaled down
/// into an exact sub-coupling F'' and completed (U = <F'', C^hi> + (1 - sum F'') max C^hi); the potentials
/// are made exactly feasible by a c-transform rounded down (g_j = min_i (C^lo_ij - u_i)), optionally followed
/// by f_i = min_j (C^lo_ij - g_j) (`improve`), and L is the dual value rounded down. All roundings are
/// directed (MPFR); the result does not depend on the plan being optimal (a poor plan only widens it).
/// Costs O(n m d) MPFR operations for the c-transform(s).
CertifiedBracket certify_wasserstein(const DiscreteMeasure<double>& mu, const DiscreteMeasure<double>& nu,
                                     double p, const TransportPlan& plan, bool improve = false);

}  // namespace regatta::measures
