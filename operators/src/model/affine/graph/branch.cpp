// Branch and bound on ReLU phases with the graph's affine forms (graph_affine_branch.hpp,
// docs/verify.md#phase-splitting): the root walk keeps its state before every ReLU node; a branch resumes
// from the state before its first split node, with the split elements' relaxations replaced by the identity
// or zero, records each split element's pre-activation form, and bounds the functionals by Lagrangian
// relaxation of the phase constraints with rounding accounted for as graph_affine_lower_bounds does.
#include <regatta/operators/graph_affine_branch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>

#include <regatta/core/error.hpp>

#include "../nonlinear.hpp"
#include "walk.hpp"

namespace regatta::operators {

namespace affine::gp {
namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
using Row = Eigen::Matrix<double, 1, Eigen::Dynamic>;

/// A split element's pre-activation: x ∈ c + r·(ε, η) + [−s, s] (the form's invariant), and its phase as
/// the sign σ of the constraint σ·x ≥ 0.
struct SplitRow {
  Row r;
  double c = 0, s = 0, sign = 1;
  bool seen = false;
};

/// One functional of the output form with the rounding of its coefficients in the slack:
/// f ∈ centre + a·(ε, η) + [−slack, slack] (functional_bounds of walk.cpp has the same terms).
struct Objective {
  I centre;
  Row a;
  I slack;
};

std::vector<Objective> objectives(const Form& Y, const Matrix<double>& C, const Vector<double>& d,
                                  Index width, const Pass& p) {
  const Index K = Y.A.cols();
  const Vector<double>& rs = row_sums(Y, p);
  const Matrix<double> CA = C * Y.A;
  std::vector<Objective> out;
  for (Index k = 0; k < C.rows(); ++k) {
    const FunctionalCentre f = functional_centre(Y, rs, C, d, k);
    Row a = Row::Zero(width);
    a.head(K) = CA.row(k);
    out.push_back({f.centre, std::move(a), f.slack});
  }
  return out;
}

/// v = a − Σ β_i·σ_i·r_i in binary64.
Row combined(const Objective& o, const std::vector<SplitRow>& rows, const std::vector<double>& beta) {
  Row v = o.a;
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (beta[i] != 0) v.head(rows[i].r.size()) -= (beta[i] * rows[i].sign) * rows[i].r;
  return v;
}

/// The Lagrangian dual g(β) = min over the symbols of f − Σ β_i·σ_i·x_i in binary64 (only to choose β), and
/// a supergradient of it.
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
    g -= beta[i] * (rows[i].sign * rows[i].c + rows[i].s);
    grad[i] = -rows[i].sign * rows[i].c - rows[i].s + rows[i].sign * u.head(rows[i].r.size()).dot(rows[i].r);
  }
  return g;
}

/// CERTIFIED: a lower bound of f over the points where every σ_i·x_i ≥ 0, for β ≥ 0: the form of
/// f − Σ β_i·σ_i·x_i bounded below as functional_bounds does, with the rounding of v (γ_{n+1} of the
/// magnitudes, n the multipliers used) and the splits' slacks β_i·s_i added.
double certified_bound(const Objective& o, const std::vector<SplitRow>& rows, const std::vector<double>& beta,
                       const Pass& p) {
  const Row v = combined(o, rows, beta);
  const Index K = v.size(), q = std::min(p.q, K);
  I centre = o.centre, slack = o.slack, magnitude(sum_up(o.a.cwiseAbs().sum(), double(K)));
  double terms = 1;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (beta[i] == 0) continue;
    if (!(beta[i] > 0)) throw std::logic_error("certified_bound: a negative multiplier");
    terms += 1;
    centre -= I(beta[i]) * I(rows[i].sign) * I(rows[i].c);
    slack += I(beta[i]) * I(rows[i].s);
    magnitude += I(beta[i]) * I(sum_up(rows[i].r.cwiseAbs().sum(), double(rows[i].r.size())));
  }
  const double dual = input_norm(v.head(q), p);
  const double rest = sum_up(v.tail(K - q).cwiseAbs().sum(), double(K - q));
  const I width =
      I(dual) + I(rest) + slack + I(gamma_of(terms)) * magnitude + I(terms * double(K)) * I(underflow_unit);
  const I low = centre - width;
  return isfinite(low) ? low.lower() : -inf;
}

/// Whether the split element's own range contradicts its phase (no point of the set has it).
bool contradicts(const SplitRow& row, const Pass& p) {
  const Index K = row.r.size(), q = std::min(p.q, K);
  const I radius = I(input_norm(row.r.head(q), p)) +
                   I(sum_up(row.r.tail(K - q).cwiseAbs().sum(), double(K - q))) + I(row.s);
  const I range = I(row.c) + I::hull(-radius.upper(), radius.upper());
  return row.sign > 0 ? range.upper() < 0 : range.lower() > 0;
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

}  // namespace
}  // namespace affine::gp

struct GraphAffineBranching::Impl {
  const graph::Graph& g;
  InputSet set;
  Matrix<double> C;
  Vector<double> d;
  GraphAffineOptions options;
  int steps;
  std::map<std::size_t, affine::gp::WalkState> kept;  ///< the root walk's state before each relu node
  std::vector<std::size_t> root_owner;                ///< per column: the relu element it relaxes (encoded)
  graph::PhaseBranchBounds root;

  Impl(const graph::Graph& graph, const InputSet& s, Matrix<double> c, Vector<double> dd,
       const GraphAffineOptions& o, int st)
      : g(graph), set(s), C(std::move(c)), d(std::move(dd)), options(o), steps(st) {}

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
  std::size_t first = g.nodes.size();
  std::map<std::size_t, std::vector<std::pair<std::size_t, std::size_t>>> by_node;  // node → (element, row)
  for (std::size_t i = 0; i < n; ++i) {
    const graph::Phase& ph = phases[i];
    if (ph.node >= g.nodes.size() || g.nodes[ph.node].op != graph::Op::relu ||
        ph.element >= std::size_t(graph::element_count(g.values[std::size_t(g.nodes[ph.node].output)].shape)))
      throw std::invalid_argument("GraphAffineBranching: a phase that names no relu element");
    first = std::min(first, ph.node);
    by_node[ph.node].emplace_back(ph.element, i);
  }
  std::vector<SplitRow> rows(n);
  for (std::size_t i = 0; i < n; ++i) rows[i].sign = phases[i].active ? 1.0 : -1.0;
  Pass p;
  WalkState w;
  std::vector<std::size_t> owner;
  if (at_root) {
    w = start_walk(g, set, p);
  } else {
    const auto it = kept.find(first);
    if (it == kept.end()) throw std::invalid_argument("GraphAffineBranching: a relu whose input is constant");
    w = it->second;
    resume(w, p);
    owner.assign(root_owner.begin(), root_owner.begin() + std::ptrdiff_t(std::min<std::size_t>(
                                                              root_owner.size(), std::size_t(w.next))));
  }
  owner.resize(std::size_t(p.next), none);
  const NodeOverride relu = [&](std::size_t index, const graph::Node& node, const std::vector<Operand>& in,
                                Pass& pass, Form& result) {
    if (node.op != graph::Op::relu || in[0].constant()) return false;
    const Form& F = *in[0].form;
    Linearisation l = linearise(F, Function::relu, pass);
    const auto found = by_node.find(index);
    if (found != by_node.end())
      for (const auto& [e, i] : found->second) {
        const Index k = Index(e);
        rows[i].r = F.A.row(k);
        rows[i].c = F.c(k);
        rows[i].s = F.s(k);
        rows[i].seen = true;
        l.lambda[e] = I(phases[i].active ? 1.0 : 0.0);  // relu(x) = x, or 0, on the branch
        l.M[e] = I(0.0);
        l.beta(k) = 0;
      }
    result = affine_entries(F, l.lambda, l.M, pass, fresh_count(l.beta));
    owner.resize(std::size_t(pass.next + fresh_count(l.beta)), none);
    Index col = pass.next;  // add_fresh's numbering
    for (Index e = 0; e < F.size(); ++e)
      if (l.beta(e) > 0) owner[std::size_t(col++)] = encode(index, e);
    add_fresh(result, l.beta, pass);
    return true;
  };
  const std::function<void(const WalkState&)> keep = [&](const WalkState& state) {
    if (g.nodes[state.node].op == graph::Op::relu) kept.emplace(state.node, state);
  };
  try {
    advance(g, w, p, options, g.nodes.size(), &relu, at_root ? &keep : nullptr);
    for (const SplitRow& r : rows)
      if (!r.seen) throw std::invalid_argument("GraphAffineBranching: a relu whose input is constant");
    if (at_root) root_owner = owner;
    for (const SplitRow& r : rows)
      if (contradicts(r, p)) {
        out.empty = true;
        out.lower.assign(m, inf);
        return out;
      }
    const Form Y = final_form(g, w);
    Index width = Y.A.cols();
    for (const SplitRow& r : rows) width = std::max(width, Index(r.r.size()));
    const std::vector<Objective> objs = objectives(Y, C, d, width, p);
    for (std::size_t k = 0; k < m; ++k) {
      std::vector<double> beta(n, 0.0);
      if (k < warm.size())
        for (std::size_t i = 0; i < std::min(n, warm[k].size()); ++i) beta[i] = std::max(0.0, warm[k][i]);
      if (n > 0) {
        beta = optimise(objs[k], rows, beta, p, steps, out.lower[k]);
      } else {
        out.lower[k] = certified_bound(objs[k], rows, beta, p);
      }
      const Row v = combined(objs[k], rows, beta);
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
        }
      }
      out.multipliers[k] = std::move(beta);
    }
  } catch (const Vacuous&) {
    out.lower.assign(m, -inf);
  } catch (const Stopped&) {
    out.lower.assign(m, -inf);
  }
  return out;
}

GraphAffineBranching::GraphAffineBranching(const graph::Graph& graph, const InputSet& set, Matrix<double> C,
                                           Vector<double> d, const GraphAffineOptions& options,
                                           int multiplier_steps)
    : impl_(std::make_unique<Impl>(graph, set, std::move(C), std::move(d), options, multiplier_steps)) {
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

bool GraphAffineBranching::has_relu(const graph::Graph& graph) {
  std::vector<bool> computed(graph.values.size(), false);
  for (int id : graph.inputs) computed[std::size_t(id)] = true;
  bool any = false;
  for (const graph::Node& node : graph.nodes) {
    bool c = false;
    for (int id : node.inputs) c = c || computed[std::size_t(id)];
    computed[std::size_t(node.output)] = c;
    any = any || (node.op == graph::Op::relu && c);
  }
  return any;
}

}  // namespace regatta::operators
