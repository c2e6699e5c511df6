#pragma once
// Exact optimal transport between discrete measures by a primal network simplex
// (docs/math/transport.md#wasserstein, docs/math/transport.md#network-simplex).
//
// Problem: min <P, C> over P >= 0 with P 1 = a, P^T 1 = b (n supplies a, m demands b, any n, m >= 1).
// It is solved as an uncapacitated min-cost flow on the complete bipartite graph plus an artificial root
// joined to every node by an arc of cost M = max |C| (for point clouds an upper bound of it): a route
// i -> root -> j costs 2M > C_ij, so no optimal flow uses the root when the masses balance.
// The basis is a strongly feasible spanning tree; the entering arc is chosen by block search (blocks of
// ~sqrt(nm) arcs, the most negative reduced cost of the first block that has one), the leaving arc by
// Cunningham's rule (last blocking arc on the cycle traversed from its apex), which excludes cycling in
// exact arithmetic; potentials are updated on the moved subtree only and recomputed from the tree
// periodically and at the end, where optimality is re-checked on every arc. Memory is O(n + m) beyond the
// costs: with a cost callable or point clouds, costs are computed on the fly (no n x m array).
//
// Zero-weight atoms are removed before solving and get c-transformed potentials afterwards, so u, v stay
// dual feasible. Weights are used as given (they should sum to the same value; any imbalance is absorbed by
// the root and reported as `imbalance`).
//
// Result contract: status == optimal means the final tree has every reduced cost >= -tolerance, with
// tolerance = 16 eps M; then cost is the value of a coupling whose marginals equal a
// and b up to rounding of the pivots, and u_i + v_j <= C_ij + tolerance. The certified statement is
// certify_wasserstein (wasserstein.hpp), which needs no trust in this solver.
#include <cstdint>
#include <functional>
#include <vector>

#include <Eigen/Core>

#include <regatta/core/eigen.hpp>
#include <regatta/core/error.hpp>

namespace regatta::measures {

enum class TransportStatus {
  optimal,         ///< every reduced cost >= -tolerance on the final basis
  max_iterations,  ///< stopped after max_iterations pivots; plan feasible, not proved optimal
  infeasible       ///< the artificial arcs still carry mass beyond the weights' imbalance
};

const char* to_string(TransportStatus status);

struct Coupling {
  Eigen::Index i;  ///< source atom (row of mu)
  Eigen::Index j;  ///< target atom (row of nu)
  double mass;     ///< P_ij > 0
};

struct TransportPlan {
  double cost = 0;                ///< sum of mass * C_ij over `entries` (compensated sum)
  std::vector<Coupling> entries;  ///< the positive entries of the basic plan (at most n + m - 1)
  Eigen::VectorXd u;              ///< source potentials (size n)
  Eigen::VectorXd v;              ///< target potentials (size m)
  TransportStatus status = TransportStatus::max_iterations;
  std::int64_t iterations = 0;  ///< pivots performed
  double imbalance = 0;         ///< sum a - sum b as given
  double artificial_mass = 0;   ///< mass left on artificial arcs at the end
};

struct NetworkSimplexOptions {
  std::int64_t max_iterations = 0;  ///< 0: automatic, 10^6 + 1000 (n + m)
  double block_factor = 1.0;        ///< block size = max(16, block_factor * sqrt(n m))
  /// Called with (pivots so far, the pivot limit) every 1024 pivots when set; it may throw to abandon the
  /// solve (the exception propagates unchanged; nothing is left behind). The Python module runs signal
  /// handlers here, so that Ctrl-C stops a long exact or certified Wasserstein computation.
  std::function<void(std::int64_t, std::int64_t)> poll;
};

/// Cost given as a dense n x m matrix (row-major; entries finite, checked).
TransportPlan network_simplex(const Eigen::Ref<const Eigen::VectorXd>& a,
                              const Eigen::Ref<const Eigen::VectorXd>& b, const Matrix<double>& cost,
                              const NetworkSimplexOptions& options = {});

/// Cost C_ij = ||x_i - y_j||^p computed on the fly from the point clouds (rows of x, y; same dimension).
/// p >= 1 (p = 1 and p = 2 have fast paths).
TransportPlan network_simplex(const Eigen::Ref<const Eigen::VectorXd>& a,
                              const Eigen::Ref<const Eigen::VectorXd>& b, const Matrix<double>& x,
                              const Matrix<double>& y, double p, const NetworkSimplexOptions& options = {});

/// Cost given by a callable cost(i, j) (finite, evaluated many times: keep it cheap and deterministic).
TransportPlan network_simplex(const Eigen::Ref<const Eigen::VectorXd>& a,
                              const Eigen::Ref<const Eigen::VectorXd>& b,
                              const std::function<double(Eigen::Index, Eigen::Index)>& cost,
                              const NetworkSimplexOptions& options = {});

}  // namespace regatta::measures
