// Branch and bound on ReLU phases and other nonlinearities' input ranges with the graph's affine forms
// (graph_affine_branch.hpp, docs/verify.md#general-splits): the root walk keeps its state before every node
// of a split kind; a branch resumes from the state before its first constrained node, with the constrained
// elements' relaxations computed on their ranges cut by the constraints (split_transfer), records each
// constrained element's input form, and bounds the functionals by Lagrangian relaxation of the constraints
// with rounding accounted for as graph_affine_lower_bounds does.
#include <regatta/operators/graph_affine_branch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>

#include <regatta/core/error.hpp>

#include "objective.hpp"
#include "operands.hpp"
#include "slopes.hpp"
#include "walk.hpp"
#include "width_shares.hpp"

namespace regatta::operators {

namespace affine::gp {
constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
/// The Lagrangian dual g(β) = min over the symbols of f − Σ β_i·σ_i·(x_i − t_i) in binary64 (only to choose
/// β), and a supergradient of it.
double dual_value(const Objective& o, const std::vector<SplitRow>& rows, const std::vector<double>& beta,
                  const Pass& p, std::vector<double>& grad) {
  const Row v = combined(o, rows, beta);
  const Index K = v.size(), q = std::min(p.q, K);
  double g = mid(o.centre);
  Row u(K);
  for (Index j = 0; j < K; ++j) u(j) = v(j) > 0 ? 1.0 : v(j) < 0 ? -1.0 : 0.0;
  if (p.box) {
    g -= v.head(q).cwiseAbs().sum();
  } else {
    const double n = v.head(q).norm();
    g -= n;
    u.head(q) = n > 0 ? Row(v.head(q) / n) : Row(Row::Zero(q));
  }
  g -= v.tail(K - q).cwiseAbs().sum();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double offset = rows[i].c - rows[i].t;
    g -= beta[i] * (rows[i].sign * offset + rows[i].s);
    grad[i] = -rows[i].sign * offset - rows[i].s + rows[i].sign * u.head(rows[i].r.size()).dot(rows[i].r);
  }
  return g;
}

/// Whether the split element's own range contradicts its constraint (no point of the set meets it).
bool contradicts(const SplitRow& row, const Pass& p) {
  const Index K = row.r.size(), q = std::min(p.q, K);
  const I radius = I(input_norm(row.r.head(q), p)) +
                   I(sum_up(row.r.tail(K - q).cwiseAbs().sum(), double(K - q))) + I(row.s);
  const I range = I(row.c) + I::hull(-radius.upper(), radius.upper());
  return row.sign > 0 ? range.upper() < row.t : range.lower() > row.t;
}

/// β maximising the bound by projected supergradient steps of the binary64 dual from `beta`: Polyak's step
/// towards a target above the best bound so far (half its magnitude higher), at most 1 + max β per
/// coordinate, its scale shrunk by 0.95 after each step that does not improve. The best β by the CERTIFIED
/// bound (the binary64 dual only steers: with large β it can cancel), which is returned with it. Starts
/// from `beta` or from 0, whichever is better.
std::vector<double> optimise(const Objective& o, const std::vector<SplitRow>& rows, std::vector<double> beta,
                             const Pass& p, int steps, double& best_value) {
  std::vector<double> grad(rows.size()), best = beta;
  best_value = -inf;
  double rho = 1;
  const std::vector<double> cold(rows.size(), 0.0);  // a warm start worse than β = 0 is dropped
  if (certified_bound(o, rows, cold, p) > certified_bound(o, rows, beta, p)) beta = cold;
  for (int t = 0; t <= steps; ++t) {
    const double g = dual_value(o, rows, beta, p, grad);
    const double certified = certified_bound(o, rows, beta, p);
    if (certified > best_value) {
      best_value = certified;
      best = beta;
    } else {
      rho *= 0.95;
    }
    if (t == steps || !std::isfinite(g)) break;
    double norm2 = 0, top = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (beta[i] > 0 || grad[i] > 0) norm2 += grad[i] * grad[i];  // the projected direction
      top = std::max(top, beta[i]);
    }
    if (!(norm2 > 0)) break;
    const double target = std::max(best_value, g) + std::max(0.5 * std::fabs(std::max(best_value, g)), 1e-6);
    double step = rho * (target - g) / norm2;
    const double cap = (1 + top) / std::sqrt(norm2);
    if (!(step <= cap)) step = cap;
    for (std::size_t i = 0; i < rows.size(); ++i) beta[i] = std::max(0.0, beta[i] + step * grad[i]);
  }
  return best;
}

/// No point of the set meets the branch's constraints on some element (run() makes the branch empty).
struct EmptyBranch {};

/// Where to split an element of a node of kind `op` whose input range in the branch is [a, b]
/// (docs/verify.md#general-splits): 0 for relu; for gelu, erf, tanh and sigmoid 0 when it lies in the middle
/// 80 % of the range (their curvature is largest near 0), else the midpoint; for 1/x and √x on a range of
/// one sign the geometric mean (their curvature varies by powers of x), √x on a range from 0 at b/4. NaN
/// when that point is not strictly inside (a, b): nothing to split.
double split_point(graph::Op op, double a, double b) {
  using graph::Op;
  double t = 0.5 * a + 0.5 * b;
  if (op == Op::relu) {
    t = 0;
  } else if (op == Op::reciprocal || op == Op::sqrt) {
    if (a > 0)
      t = std::sqrt(a) * std::sqrt(b);
    else if (b < 0)
      t = -(std::sqrt(-a) * std::sqrt(-b));
    else if (op == Op::sqrt)
      t = 0.25 * b;
  } else if (a + 0.1 * (b - a) < 0 && 0 < b - 0.1 * (b - a)) {
    t = 0;
  }
  return std::isfinite(t) && a < t && t < b ? t : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace
}  // namespace affine::gp

struct GraphAffineBranching::Impl {
  const graph::Graph& g;
  InputSet set;
  Matrix<double> C;
  Vector<double> d;
  GraphAffineOptions options;
  int steps;
  std::vector<graph::Op> kinds;                       ///< the node kinds whose elements are split
  std::map<std::size_t, affine::gp::WalkState> kept;  ///< the root walk's state before each such node
  std::vector<std::size_t> root_owner;  ///< per column: the element whose remainder it is (encoded)
  std::vector<double> root_at;          ///< per column: where that element would be split
  /// The root pass's relaxation of each relu node (slopes.hpp), when relu is a split kind and slopes are
  /// optimised: a branch recomputes those from its first split node on.
  std::map<std::size_t, std::shared_ptr<const affine::gp::ReluRelaxation>> root_relu;
  graph::PhaseBranchBounds root;

  Impl(const graph::Graph& graph, const InputSet& s, Matrix<double> c, Vector<double> dd,
       const GraphAffineOptions& o, int st, std::vector<graph::Op> k)
      : g(graph), set(s), C(std::move(c)), d(std::move(dd)), options(o), steps(st), kinds(std::move(k)) {}

  bool enabled(graph::Op op) const { return std::find(kinds.begin(), kinds.end(), op) != kinds.end(); }

  std::size_t encode(std::size_t node, Eigen::Index element) const {
    return (node << 32) | std::size_t(element);
  }

  graph::PhaseBranchBounds run(const std::vector<graph::Phase>& phases,
                               const std::vector<std::vector<double>>& warm, bool at_root);
};

graph::PhaseBranchBounds GraphAffineBranching::Impl::run(const std::vector<graph::Phase>& phases,
                                                         const std::vector<std::vector<double>>& warm,
                                                         bool at_root) {
  using namespace affine;
  using namespace affine::gp;
  const std::size_t m = std::size_t(C.rows()), n = phases.size();
  graph::PhaseBranchBounds out;
  out.lower.assign(m, -inf);
  out.multipliers.assign(m, std::vector<double>(n, 0.0));
  out.branch_on.assign(m, {none, 0});
  out.branch_at.assign(m, 0.0);
  std::size_t first = g.nodes.size();
  std::map<std::size_t, std::vector<std::pair<std::size_t, std::size_t>>> by_node;  // node → (element, row)
  for (std::size_t i = 0; i < n; ++i) {
    const graph::Phase& ph = phases[i];
    if (ph.node >= g.nodes.size() || !enabled(g.nodes[ph.node].op) || !std::isfinite(ph.threshold) ||
        ph.element >= std::size_t(graph::element_count(g.values[std::size_t(g.nodes[ph.node].output)].shape)))
      throw std::invalid_argument("GraphAffineBranching: a constraint that names no element of a split node");
    first = std::min(first, ph.node);
    by_node[ph.node].emplace_back(ph.element, i);
  }
  std::vector<SplitRow> rows(n);
  for (std::size_t i = 0; i < n; ++i) {
    rows[i].sign = phases[i].active ? 1.0 : -1.0;
    rows[i].t = phases[i].threshold;
  }
  Pass p;
  WalkState w;
  std::vector<std::size_t> owner;
  std::vector<double> at;
  std::map<std::size_t, std::shared_ptr<const ReluRelaxation>> relu = root_relu;  // per relu node
  std::vector<std::pair<std::size_t, Index>> starts;  // (node, its first column): the diagnostic's
  const bool diagnose = at_root && width_shares_wanted();
  if (at_root) {
    w = start_walk(g, set, p);
  } else {
    const auto it = kept.find(first);
    if (it == kept.end())
      throw std::invalid_argument("GraphAffineBranching: a split node whose input is constant");
    w = it->second;
    resume(w, p);
    const std::size_t kept_columns = std::min<std::size_t>(root_owner.size(), std::size_t(w.next));
    owner.assign(root_owner.begin(), root_owner.begin() + std::ptrdiff_t(kept_columns));
    at.assign(root_at.begin(), root_at.begin() + std::ptrdiff_t(kept_columns));
  }
  owner.resize(std::size_t(p.next), none);
  at.resize(std::size_t(p.next), 0.0);
  // A split node's transfer function with each constrained element's range cut by its constraints (their
  // intersection: constraints on one element nest), recording the constrained elements' input forms, and
  // per remainder column the element it belongs to and where that element would be split.
  const NodeOverride split = [&](std::size_t index, const graph::Node& node, const std::vector<Operand>& in,
                                 Pass& pass, Form& result) {
    if (!enabled(node.op) || in[0].constant()) return false;
    const Form& F = *in[0].form;
    std::vector<I> within;
    const auto found = by_node.find(index);
    if (found != by_node.end()) {
      within.assign(std::size_t(F.size()), I::hull(-inf, inf));
      const Vector<double>& rad = radius(F, pass);
      for (const auto& [e, i] : found->second) {
        const Index k = Index(e);
        rows[i].r = F.A.row(k);
        rows[i].c = F.c(k);
        rows[i].s = F.s(k);
        rows[i].seen = true;
        I& cut = within[e];
        const double t = phases[i].threshold;
        cut = phases[i].active ? I::hull(std::max(cut.lower(), t), cut.upper())
                               : I::hull(cut.lower(), std::min(cut.upper(), t));
        const I range = I(F.c(k)) + I::hull(-rad(k), rad(k));
        if (!(std::max(cut.lower(), range.lower()) <= std::min(cut.upper(), range.upper())))
          throw EmptyBranch{};
      }
    }
    std::vector<Index> fresh;
    std::vector<I> range;
    result = split_transfer(node, F, pass, within.empty() ? nullptr : &within, &fresh, &range);
    if (node.op == graph::Op::relu && options.slope_steps > 0)
      relu[index] = std::make_shared<const ReluRelaxation>(
          relu_relaxation(index, F, fresh, pass, within.empty() ? nullptr : &within));
    owner.resize(std::size_t(pass.next), none);
    at.resize(std::size_t(pass.next), 0.0);
    for (Index e = 0; e < F.size(); ++e) {
      const Index col = fresh[std::size_t(e)];
      if (col < 0) continue;
      const double t = split_point(node.op, range[std::size_t(e)].lower(), range[std::size_t(e)].upper());
      if (!std::isfinite(t)) continue;
      owner[std::size_t(col)] = encode(index, e);
      at[std::size_t(col)] = t;
    }
    return true;
  };
  const std::function<void(const WalkState&)> keep = [&](const WalkState& state) {
    if (enabled(g.nodes[state.node].op)) kept.emplace(state.node, state);
    if (diagnose) starts.emplace_back(state.node, state.next);
  };
  try {
    advance(g, w, p, options, g.nodes.size(), &split, at_root ? &keep : nullptr);
    for (const SplitRow& r : rows)
      if (!r.seen) throw std::invalid_argument("GraphAffineBranching: a split node whose input is constant");
    if (at_root) {
      root_owner = owner;
      root_at = at;
    }
    for (const SplitRow& r : rows)
      if (contradicts(r, p)) throw EmptyBranch{};
    const Form Y = final_form(g, w);
    Index width = Y.A.cols();
    for (const SplitRow& r : rows) width = std::max(width, Index(r.r.size()));
    const std::vector<Objective> objs = objectives(Y, C, d, width, p);
    if (at_root) root_relu = relu;
    std::vector<const ReluRelaxation*> nodes;
    for (const auto& [index, r] : relu) nodes.push_back(r.get());
    for (std::size_t k = 0; k < m; ++k) {
      std::vector<double> beta(n, 0.0);
      if (k < warm.size())
        for (std::size_t i = 0; i < std::min(n, warm[k].size()); ++i) beta[i] = std::max(0.0, warm[k][i]);
      if (n > 0) {
        beta = optimise(objs[k], rows, beta, p, steps, out.lower[k]);
      } else {
        out.lower[k] = certified_bound(objs[k], rows, beta, p);
      }
      // Optimised slopes of every relu node, the last first: the functional re-expressed (slopes.hpp), its
      // multipliers re-optimised from β; kept when its certified bound is better.
      Row v = combined(objs[k], rows, beta);
      std::vector<std::pair<Index, Index>> moved;
      if (diagnose)
        print_width_shares(g, starts, v, mid(objs[k].slack), p,
                           "functional " + std::to_string(k) + ", fixed slopes");
      if (!nodes.empty()) {
        std::vector<std::pair<Index, Index>> moving;
        std::vector<SplitRow> same = rows;  // re-expressed with the functional
        Objective o;
        double value = -inf;
        std::vector<double> tuned = beta;
        try {
          o = optimise_slopes(objs[k], nodes, same, beta, p, options.slope_steps, p.next, &moving);
          if (n > 0)
            tuned = optimise(o, same, beta, p, steps, value);
          else
            value = certified_bound(o, same, beta, p);
        } catch (const Vacuous&) {  // an unbounded re-expression: the fixed slopes' bound stands
          value = -inf;
        }
        if (diagnose)
          std::fprintf(stderr, "functional %zu: root bound %.6g, with optimised slopes %.6g\n", k,
                       out.lower[k], value);
        if (value > out.lower[k]) {
          out.lower[k] = value;
          beta = std::move(tuned);
          v = combined(o, same, beta);
          moved = std::move(moving);
        }
      }
      if (diagnose && !moved.empty())
        print_width_shares(g, starts, v, mid(objs[k].slack), p,
                           "functional " + std::to_string(k) + ", optimised slopes");
      // A new column stands for the remainder column it replaced (new columns lie beyond p.next, which the
      // loop below does not read).
      for (const auto& [now, was] : moved) v(was) = std::fabs(v(now));
      // The element with the largest share of the bound's width per node its children must recompute
      // (those from the earlier of its node and this branch's first split node to the end).
      double top = 0;
      for (Index j = std::min(p.q, v.size()); j < v.size(); ++j) {
        if (std::size_t(j) >= owner.size() || owner[std::size_t(j)] == none) continue;
        const std::size_t node = owner[std::size_t(j)] >> 32;
        const double share = std::fabs(v(j)) / double(g.nodes.size() - std::min(node, first));
        if (share > top) {
          top = share;
          out.branch_on[k] = {node, owner[std::size_t(j)] & 0xffffffffu};
          out.branch_at[k] = at[std::size_t(j)];
        }
      }
      out.multipliers[k] = std::move(beta);
    }
  } catch (const EmptyBranch&) {
    out.empty = true;
    out.lower.assign(m, inf);
  } catch (const Vacuous&) {
    out.lower.assign(m, -inf);
  } catch (const Stopped&) {
    out.lower.assign(m, -inf);
  }
  return out;
}

GraphAffineBranching::GraphAffineBranching(const graph::Graph& graph, const InputSet& set, Matrix<double> C,
                                           Vector<double> d, const GraphAffineOptions& options,
                                           int multiplier_steps, std::vector<graph::Op> split_kinds)
    : impl_(std::make_unique<Impl>(graph, set, std::move(C), std::move(d), options, multiplier_steps,
                                   split_kinds.empty() ? splittable_kinds() : std::move(split_kinds))) {
  for (graph::Op op : impl_->kinds)
    if (!affine::gp::splittable(op))
      throw std::invalid_argument("GraphAffineBranching: " + std::string(graph::op_name(op)) +
                                  " is not a kind of node it splits");
  const std::string why = graph_affine_unsupported(graph);
  if (!why.empty()) throw InputError(graph.source, why);
  const Eigen::Index N =
      Eigen::Index(graph::element_count(graph.values[std::size_t(graph.outputs.at(0))].shape));
  if (impl_->C.cols() != N || (impl_->d.size() != 0 && impl_->d.size() != impl_->C.rows()))
    throw InputError(graph.source,
                     "the functionals do not match the graph's " + std::to_string(N) + " outputs");
  impl_->root = impl_->run({}, {}, true);
}

GraphAffineBranching::~GraphAffineBranching() = default;

const graph::PhaseBranchBounds& GraphAffineBranching::root() const { return impl_->root; }

graph::PhaseBranchBounds GraphAffineBranching::bound(const std::vector<graph::Phase>& phases,
                                                     const std::vector<std::vector<double>>& warm) {
  if (phases.empty()) return impl_->root;
  return impl_->run(phases, warm, false);
}

std::vector<graph::Op> GraphAffineBranching::splittable_kinds() {
  using graph::Op;
  return {Op::relu, Op::gelu, Op::erf, Op::tanh, Op::sigmoid, Op::sqrt, Op::reciprocal};
}

bool GraphAffineBranching::has_split_node(const graph::Graph& graph, const std::vector<graph::Op>& kinds) {
  const std::vector<graph::Op> all = kinds.empty() ? splittable_kinds() : kinds;
  std::vector<bool> computed(graph.values.size(), false);
  for (int id : graph.inputs) computed[std::size_t(id)] = true;
  bool any = false;
  for (const graph::Node& node : graph.nodes) {
    bool c = false;
    for (int id : node.inputs) c = c || computed[std::size_t(id)];
    computed[std::size_t(node.output)] = c;
    any = any || (c && std::find(all.begin(), all.end(), node.op) != all.end());
  }
  return any;
}

bool GraphAffineBranching::has_relu(const graph::Graph& graph) {
  return has_split_node(graph, {graph::Op::relu});
}

}  // namespace regatta::operators
