// Observables of a trajectory: interaction energy, threshold-graph clusters, extreme inner products.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <regatta/operators/flow.hpp>
#include <vector>

namespace regatta::operators::flow {

double interaction_energy(const Matrix<double>& X, const Vector<double>& weights, double beta,
                          const pairwise::Options& options) {
  if (beta == 0) return 0.5 * (weights.transpose() * X).squaredNorm();
  Vector<double> omega(weights.size());
  for (Eigen::Index j = 0; j < weights.size(); ++j)
    omega(j) = weights(j) > 0 ? std::log(weights(j)) : -std::numeric_limits<double>::infinity();
  pairwise::Problem<double> problem;
  problem.queries = &X;
  problem.keys = &X;
  problem.log_weights = &omega;
  pairwise::Kernel kernel;
  kernel.score = pairwise::ScoreKind::dot;
  kernel.scale = beta;
  pairwise::Request request;
  request.out = false;
  const Vector<double> lse = pairwise::reduce<double>(problem, kernel, request, options).lse;
  double total = 0;
  for (Eigen::Index i = 0; i < X.rows(); ++i)
    if (weights(i) > 0) total += weights(i) * std::exp(lse(i));
  return total / (2 * beta);
}

namespace {

Eigen::Index find(std::vector<Eigen::Index>& parent, Eigen::Index i) {
  while (parent[std::size_t(i)] != i) {
    parent[std::size_t(i)] = parent[std::size_t(parent[std::size_t(i)])];
    i = parent[std::size_t(i)];
  }
  return i;
}

}  // namespace

PairStatistics pair_statistics(const Matrix<double>& X, double radius, int threads) {
  const Eigen::Index n = X.rows();
  PairStatistics s;
  if (n == 1) {
    s.clusters = 1;
    s.min_inner = s.max_inner = X.row(0).squaredNorm();
    return s;
  }
  const double r2 = radius * radius;
  const Matrix<double> Xt = X.transpose();  // d × n
  const Vector<double> sq = X.rowwise().squaredNorm();
  // Each thread joins the edges of its rows in its own union–find forest (O(n) memory per thread, whatever
  // the number of edges); the forests are merged at the end.
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  const int team = threads > 0 ? threads : omp_get_max_threads();
  std::vector<std::vector<Eigen::Index>> forests(static_cast<std::size_t>(team));
#pragma omp parallel num_threads(team) reduction(min : lo) reduction(max : hi)
  {
    auto& forest = forests[std::size_t(omp_get_thread_num())];
    forest.resize(std::size_t(n));
    std::iota(forest.begin(), forest.end(), Eigen::Index(0));
    Eigen::RowVectorXd dots(n);
#pragma omp for schedule(dynamic, 16)
    for (Eigen::Index i = 0; i < n - 1; ++i) {
      const Eigen::Index rest = n - i - 1;
      dots.tail(rest).noalias() = X.row(i) * Xt.rightCols(rest);
      for (Eigen::Index j = i + 1; j < n; ++j) {
        const double g = dots(j);
        lo = std::min(lo, g);
        hi = std::max(hi, g);
        if (sq(i) + sq(j) - 2 * g <= r2) {
          const Eigen::Index a = find(forest, i), b = find(forest, j);
          if (a != b) forest[std::size_t(std::max(a, b))] = std::min(a, b);
        }
      }
    }
  }
  std::vector<Eigen::Index> parent(static_cast<std::size_t>(n));
  std::iota(parent.begin(), parent.end(), Eigen::Index(0));
  for (auto& forest : forests) {
    if (forest.empty()) continue;
    for (Eigen::Index i = 0; i < n; ++i) {
      const Eigen::Index a = find(parent, i), b = find(parent, find(forest, i));
      if (a != b) parent[std::size_t(std::max(a, b))] = std::min(a, b);
    }
  }
  for (Eigen::Index i = 0; i < n; ++i)
    if (find(parent, i) == i) ++s.clusters;
  s.min_inner = lo;
  s.max_inner = hi;
  return s;
}

}  // namespace regatta::operators::flow
