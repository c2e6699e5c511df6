// Primal network simplex for the transportation problem (see network_simplex.hpp for the contract).
//
// Graph: sources 0..n-1 (supply a_i), sinks n..n+m-1 (demand b_j), root R = n+m. Real arcs i -> n+j with
// id i*m + j; artificial arcs, id n*m + k: k -> R for a source k, R -> k for a sink k, cost M = max C (any
// M > max C / 2 works: on the complete bipartite graph a route i -> R -> j costs 2M > C_ij, so an optimal
// flow of the enlarged problem uses no artificial arc when the masses balance). All arcs are uncapacitated,
// so a non-tree arc carries no flow and the basis is described by the tree alone: every non-root node w
// stores its parent, the id of the tree arc joining them, whether that arc points up (w -> parent), and its
// flow. Potentials pi satisfy C_e + pi(tail) - pi(head) = 0 on tree arcs; the reduced cost of any arc is
// C_e + pi(tail) - pi(head), and the duals of the transport LP are u_i = -pi(i), v_j = pi(n+j).
//
// Strong feasibility (every zero-flow tree arc points away from the root) holds initially because zero
// weights are removed first, and is preserved by Cunningham's leaving-arc rule: traverse the pivot cycle in
// the direction of the entering arc starting at the apex, and leave by the last blocking arc met.
#include <regatta/measures/network_simplex.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include <regatta/core/checks.hpp>
#include <regatta/core/compensated_sum.hpp>

namespace regatta::measures {

const char* to_string(TransportStatus status) {
  switch (status) {
    case TransportStatus::optimal:
      return "optimal";
    case TransportStatus::max_iterations:
      return "max_iterations";
    case TransportStatus::infeasible:
      return "infeasible";
  }
  return "unknown";
}

namespace {

using Index = Eigen::Index;

// ---- cost functors: double operator()(i, j) on the ORIGINAL indices -------------------------------------
struct DenseCost {
  const double* c;
  Index m;
  double operator()(Index i, Index j) const { return c[i * m + j]; }
};

template <int Power>  // 1: ||x - y||, 2: ||x - y||^2, 0: ||x - y||^p
struct CloudCost {
  const double* x;
  const double* y;
  Index d;
  double half_p;
  double operator()(Index i, Index j) const {
    const double* xi = x + i * d;
    const double* yj = y + j * d;
    double s = 0;
    for (Index k = 0; k < d; ++k) {
      const double t = xi[k] - yj[k];
      s += t * t;
    }
    if constexpr (Power == 2)
      return s;
    else if constexpr (Power == 1)
      return std::sqrt(s);
    else
      return std::pow(s, half_p);
  }
};

struct CallableCost {
  const std::function<double(Index, Index)>* f;
  double operator()(Index i, Index j) const { return (*f)(i, j); }
};

// The solver on the reduced problem (positive weights only); `rows`, `cols` map reduced to original indices.
template <class Cost>
class Solver {
 public:
  Solver(const Cost& cost, std::vector<Index> rows, std::vector<Index> cols, std::vector<double> a,
         std::vector<double> b, double max_cost, const NetworkSimplexOptions& options)
      : cost_(cost),
        rows_(std::move(rows)),
        cols_(std::move(cols)),
        n_(Index(rows_.size())),
        m_(Index(cols_.size())),
        root_(int(n_ + m_)),
        nm_(std::int64_t(n_) * m_),
        total_arcs_(nm_ + n_ + m_) {
    big_ = max_cost > 0 ? max_cost : 1.0;
    tolerance_ = 16 * std::numeric_limits<double>::epsilon() * big_;
    block_ = std::max<std::int64_t>(16, std::int64_t(options.block_factor * std::sqrt(double(nm_))));
    block_ = std::min(block_, total_arcs_);
    poll_ = options.poll;
    max_iterations_ = options.max_iterations > 0 ? options.max_iterations
                                                 : std::int64_t(1000000) + 1000 * std::int64_t(n_ + m_);
    // Dense reduced cost rows are needed by the pricing loop; cache the sink-column map once.
    const int nodes = root_ + 1;
    parent_.assign(nodes, -1);
    arc_.assign(nodes, -1);
    up_.assign(nodes, 0);
    flow_.assign(nodes, 0.0);
    pot_.assign(nodes, 0.0);
    depth_.assign(nodes, 0);
    first_child_.assign(nodes, -1);
    next_.assign(nodes, -1);
    prev_.assign(nodes, -1);
    for (int k = 0; k < root_; ++k) {
      parent_[k] = root_;
      arc_[k] = nm_ + k;
      depth_[k] = 1;
      if (k < n_) {
        up_[k] = 1;
        flow_[k] = a[k];
        pot_[k] = -big_;
      } else {
        up_[k] = 0;
        flow_[k] = b[k - n_];
        pot_[k] = big_;
      }
      add_child(root_, k);
    }
  }

  TransportStatus run() {
    const std::int64_t period = std::max<std::int64_t>(1000, root_);
    for (;;) {
      if (iterations_ >= max_iterations_) return TransportStatus::max_iterations;
      std::int64_t e = find_entering();
      if (e < 0) {
        recompute_potentials();
        e = find_entering();
        if (e < 0) return TransportStatus::optimal;
      }
      if (!pivot(e)) return TransportStatus::infeasible;
      ++iterations_;
      if (iterations_ % period == 0) recompute_potentials();
      if (poll_ && iterations_ % 1024 == 0) poll_(iterations_, max_iterations_);
    }
  }

  std::int64_t iterations() const { return iterations_; }
  double tolerance() const { return tolerance_; }

  // Positive-flow real tree arcs, in original indices, and the artificial mass.
  void extract(std::vector<Coupling>& entries, double& artificial) const {
    artificial = 0;
    for (int w = 0; w < root_; ++w) {
      if (arc_[w] >= nm_) {
        artificial += flow_[w];
      } else if (flow_[w] > 0) {
        const Index i = Index(arc_[w] / m_), j = Index(arc_[w] % m_);
        entries.push_back({rows_[i], cols_[j], flow_[w]});
      }
    }
  }
  double u(Index i) const { return -pot_[i]; }
  double v(Index j) const { return pot_[n_ + j]; }

 private:
  double arc_cost(std::int64_t e) const {
    return e < nm_ ? cost_(rows_[Index(e / m_)], cols_[Index(e % m_)]) : big_;
  }
  int tail(std::int64_t e) const {
    if (e < nm_) return int(e / m_);
    const int k = int(e - nm_);
    return k < n_ ? k : root_;
  }
  int head(std::int64_t e) const {
    if (e < nm_) return int(n_ + e % m_);
    const int k = int(e - nm_);
    return k < n_ ? root_ : k;
  }

  void add_child(int p, int c) {
    next_[c] = first_child_[p];
    prev_[c] = -1;
    if (first_child_[p] >= 0) prev_[first_child_[p]] = c;
    first_child_[p] = c;
  }
  void remove_child(int p, int c) {
    if (prev_[c] >= 0)
      next_[prev_[c]] = next_[c];
    else
      first_child_[p] = next_[c];
    if (next_[c] >= 0) prev_[next_[c]] = prev_[c];
  }

  // Block search: scan blocks of arcs cyclically from next_arc_; return the most negative reduced cost of
  // the first block that contains one below -tolerance, or -1 after a full cycle without any.
  std::int64_t find_entering() {
    std::int64_t best = -1;
    double best_rc = -tolerance_;
    std::int64_t in_block = 0;
    std::int64_t pos = next_arc_;
    const double* psink = pot_.data() + n_;
    for (std::int64_t scanned = 0; scanned < total_arcs_;) {
      std::int64_t chunk;
      if (pos < nm_) {
        const Index i = Index(pos / m_);
        const Index j0 = Index(pos % m_);
        const Index j1 = Index(std::min<std::int64_t>(m_, j0 + (block_ - in_block)));
        const double pi = pot_[i];
        const Index oi = rows_[i];
        for (Index j = j0; j < j1; ++j) {
          const double rc = cost_(oi, cols_[j]) + pi - psink[j];
          if (rc < best_rc) {
            best_rc = rc;
            best = std::int64_t(i) * m_ + j;
          }
        }
        chunk = j1 - j0;
      } else {
        const std::int64_t k0 = pos - nm_;
        const std::int64_t k1 = std::min<std::int64_t>(n_ + m_, k0 + (block_ - in_block));
        for (std::int64_t k = k0; k < k1; ++k) {
          const double rc = k < n_ ? big_ + pot_[k] - pot_[root_] : big_ + pot_[root_] - pot_[k];
          if (rc < best_rc) {
            best_rc = rc;
            best = nm_ + k;
          }
        }
        chunk = k1 - k0;
      }
      pos += chunk;
      if (pos >= total_arcs_) pos = 0;
      scanned += chunk;
      in_block += chunk;
      if (in_block >= block_) {
        if (best >= 0) break;
        in_block = 0;
      }
    }
    next_arc_ = pos;
    return best;
  }

  // One pivot on entering arc e; false when the cycle has no blocking arc (cannot happen with costs of a
  // transport problem; reported as infeasible rather than trusted).
  bool pivot(std::int64_t e) {
    const int s = tail(e), t = head(e);
    if (arc_[s] == e || arc_[t] == e) {  // a tree arc priced negative: potentials drifted
      recompute_potentials();
      return true;
    }
    const double c = arc_cost(e);
    const double rc = c + pot_[s] - pot_[t];
    int x = s, y = t;
    while (x != y) {
      if (depth_[x] > depth_[y])
        x = parent_[x];
      else if (depth_[y] > depth_[x])
        y = parent_[y];
      else {
        x = parent_[x];
        y = parent_[y];
      }
    }
    const int apex = x;
    double delta = std::numeric_limits<double>::infinity();
    int out = -1;
    bool out_on_source_side = false;
    for (int w = s; w != apex; w = parent_[w])  // traversed parent -> w: backward when the arc points up
      if (up_[w] && flow_[w] < delta) {
        delta = flow_[w];
        out = w;
        out_on_source_side = true;
      }
    for (int w = t; w != apex; w = parent_[w])  // traversed w -> parent: backward when the arc points down
      if (!up_[w] && flow_[w] <= delta) {
        delta = flow_[w];
        out = w;
        out_on_source_side = false;
      }
    if (out < 0) return false;
    if (delta > 0) {
      for (int w = s; w != apex; w = parent_[w]) flow_[w] += up_[w] ? -delta : delta;
      for (int w = t; w != apex; w = parent_[w]) flow_[w] += up_[w] ? delta : -delta;
      flow_[out] = 0;
    }
    // Re-hang the subtree cut off by the leaving arc from the entering arc, reversing the path q .. out.
    const int q = out_on_source_side ? s : t;
    const int p = out_on_source_side ? t : s;
    int cur = q, new_parent = p;
    std::int64_t new_arc = e;
    char new_up = q == s ? 1 : 0;
    double new_flow = delta;
    for (;;) {
      const int old_parent = parent_[cur];
      const std::int64_t old_arc = arc_[cur];
      const char old_up = up_[cur];
      const double old_flow = flow_[cur];
      remove_child(old_parent, cur);
      parent_[cur] = new_parent;
      arc_[cur] = new_arc;
      up_[cur] = new_up;
      flow_[cur] = new_flow;
      add_child(new_parent, cur);
      if (cur == out) break;
      new_parent = cur;
      new_arc = old_arc;
      new_up = old_up ? 0 : 1;
      new_flow = old_flow;
      cur = old_parent;
    }
    // Potentials and depths of the moved subtree: make the entering arc's reduced cost zero.
    const double shift = q == t ? rc : -rc;
    depth_[q] = depth_[p] + 1;
    stack_.clear();
    stack_.push_back(q);
    while (!stack_.empty()) {
      const int w = stack_.back();
      stack_.pop_back();
      pot_[w] += shift;
      for (int ch = first_child_[w]; ch >= 0; ch = next_[ch]) {
        depth_[ch] = depth_[w] + 1;
        stack_.push_back(ch);
      }
    }
    return true;
  }

  // Potentials afresh from the tree (root potential 0), removing the drift of incremental updates.
  void recompute_potentials() {
    pot_[root_] = 0;
    depth_[root_] = 0;
    stack_.clear();
    stack_.push_back(root_);
    while (!stack_.empty()) {
      const int w = stack_.back();
      stack_.pop_back();
      for (int ch = first_child_[w]; ch >= 0; ch = next_[ch]) {
        const double c = arc_cost(arc_[ch]);
        pot_[ch] = up_[ch] ? pot_[w] - c : pot_[w] + c;
        depth_[ch] = depth_[w] + 1;
        stack_.push_back(ch);
      }
    }
  }

  Cost cost_;
  std::vector<Index> rows_, cols_;
  Index n_, m_;
  int root_;
  std::int64_t nm_, total_arcs_;
  double big_ = 1, tolerance_ = 0;
  std::int64_t block_ = 16, max_iterations_ = 0, iterations_ = 0, next_arc_ = 0;
  std::function<void(std::int64_t, std::int64_t)> poll_;
  std::vector<int> parent_;
  std::vector<std::int64_t> arc_;
  std::vector<char> up_;
  std::vector<double> flow_, pot_;
  std::vector<int> depth_, first_child_, next_, prev_;
  std::vector<int> stack_;
};

void check_weights(const Eigen::Ref<const Eigen::VectorXd>& a, const Eigen::Ref<const Eigen::VectorXd>& b) {
  check_nonempty("a", a.size());
  check_nonempty("b", b.size());
  check_nonnegative("a", a);
  check_nonnegative("b", b);
  const double sa = a.sum(), sb = b.sum();
  if (!(sa > 0)) throw InputError("a", "has no mass (all weights zero)");
  if (!(sb > 0)) throw InputError("b", "has no mass (all weights zero)");
  const double tol = normalisation_tolerance(std::size_t(a.size() + b.size())) * std::max(sa, sb);
  if (!(std::abs(sa - sb) <= tol))
    throw InputError(
        "b", "total mass " + std::to_string(sb) + " differs from that of a (" + std::to_string(sa) + ")");
}

// Shared driver: remove zero weights, solve, map back, fill potentials of removed atoms by c-transforms.
template <class Cost>
TransportPlan solve(const Eigen::Ref<const Eigen::VectorXd>& a, const Eigen::Ref<const Eigen::VectorXd>& b,
                    const Cost& cost, double max_cost, const NetworkSimplexOptions& options) {
  const Index n = a.size(), m = b.size();
  std::vector<Index> rows, cols;
  std::vector<double> ar, br;
  for (Index i = 0; i < n; ++i)
    if (a(i) > 0) {
      rows.push_back(i);
      ar.push_back(a(i));
    }
  for (Index j = 0; j < m; ++j)
    if (b(j) > 0) {
      cols.push_back(j);
      br.push_back(b(j));
    }
  Solver<Cost> solver(cost, rows, cols, std::move(ar), std::move(br), max_cost, options);
  TransportPlan plan;
  plan.status = solver.run();
  plan.iterations = solver.iterations();
  plan.imbalance = a.sum() - b.sum();
  solver.extract(plan.entries, plan.artificial_mass);
  std::sort(plan.entries.begin(), plan.entries.end(),
            [](const Coupling& x, const Coupling& y) { return x.i != y.i ? x.i < y.i : x.j < y.j; });
  CompensatedSum<double> total;
  for (const Coupling& c : plan.entries) total.add(c.mass * cost(c.i, c.j));
  plan.cost = total.value();

  const double nan = std::numeric_limits<double>::quiet_NaN();
  plan.u = Eigen::VectorXd::Constant(n, nan);
  plan.v = Eigen::VectorXd::Constant(m, nan);
  for (std::size_t k = 0; k < rows.size(); ++k) plan.u(rows[k]) = solver.u(Index(k));
  for (std::size_t k = 0; k < cols.size(); ++k) plan.v(cols[k]) = solver.v(Index(k));
  // Removed sources: u_i = min over kept j of (C_ij - v_j); removed sinks: v_j = min over all i.
  for (Index i = 0; i < n; ++i) {
    if (!std::isnan(plan.u(i))) continue;
    double best = std::numeric_limits<double>::infinity();
    for (Index j : cols) best = std::min(best, cost(i, j) - plan.v(j));
    plan.u(i) = best;
  }
  for (Index j = 0; j < m; ++j) {
    if (!std::isnan(plan.v(j))) continue;
    double best = std::numeric_limits<double>::infinity();
    for (Index i = 0; i < n; ++i) best = std::min(best, cost(i, j) - plan.u(i));
    plan.v(j) = best;
  }
  // Infeasible: mass left on artificial arcs beyond what the given imbalance forces.
  const double mass_tol = normalisation_tolerance(std::size_t(n + m)) * std::max(a.sum(), b.sum());
  if (plan.status == TransportStatus::optimal && plan.artificial_mass > std::abs(plan.imbalance) + mass_tol)
    plan.status = TransportStatus::infeasible;
  return plan;
}

}  // namespace

TransportPlan network_simplex(const Eigen::Ref<const Eigen::VectorXd>& a,
                              const Eigen::Ref<const Eigen::VectorXd>& b, const Matrix<double>& cost,
                              const NetworkSimplexOptions& options) {
  check_weights(a, b);
  check_shape("cost", cost.rows(), cost.cols(), a.size(), b.size());
  check_finite("cost", cost);
  const double max_cost = cost.cwiseAbs().maxCoeff();
  return solve(a, b, DenseCost{cost.data(), cost.cols()}, max_cost, options);
}

TransportPlan network_simplex(const Eigen::Ref<const Eigen::VectorXd>& a,
                              const Eigen::Ref<const Eigen::VectorXd>& b, const Matrix<double>& x,
                              const Matrix<double>& y, double p, const NetworkSimplexOptions& options) {
  check_weights(a, b);
  check_rows("x", x.rows(), a.size());
  check_rows("y", y.rows(), b.size());
  if (x.cols() == 0) throw InputError("x", "has zero columns (dimension 0)");
  check_cols("y", y.cols(), x.cols());
  check_finite("x", x);
  check_finite("y", y);
  if (!(p >= 1) || !std::isfinite(p)) throw InputError("p", "must be a finite number >= 1");
  // Upper bound on max C from any centre c: ||x - y|| <= ||x - c|| + ||y - c|| (c = mean of the atoms of x).
  const Eigen::RowVectorXd centre = x.colwise().mean();
  const double rx = (x.rowwise() - centre).rowwise().norm().maxCoeff();
  const double ry = (y.rowwise() - centre).rowwise().norm().maxCoeff();
  const double max_cost = std::pow(rx + ry, p);
  const Index d = x.cols();
  if (p == 2) return solve(a, b, CloudCost<2>{x.data(), y.data(), d, 1.0}, max_cost, options);
  if (p == 1) return solve(a, b, CloudCost<1>{x.data(), y.data(), d, 0.5}, max_cost, options);
  return solve(a, b, CloudCost<0>{x.data(), y.data(), d, p / 2}, max_cost, options);
}

TransportPlan network_simplex(const Eigen::Ref<const Eigen::VectorXd>& a,
                              const Eigen::Ref<const Eigen::VectorXd>& b,
                              const std::function<double(Eigen::Index, Eigen::Index)>& cost,
                              const NetworkSimplexOptions& options) {
  check_weights(a, b);
  if (!cost) throw InputError("cost", "is an empty callable");
  double max_cost = 0;
  for (Index i = 0; i < a.size(); ++i)
    for (Index j = 0; j < b.size(); ++j) {
      const double c = cost(i, j);
      if (!std::isfinite(c))
        throw InputError("cost", "cost(" + std::to_string(i) + ", " + std::to_string(j) + ") is not finite");
      max_cost = std::max(max_cost, std::abs(c));
    }
  return solve(a, b, CallableCost{&cost}, max_cost, options);
}

}  // namespace regatta::measures
