// The affine-form pass over a graph::Graph (graph_affine.hpp, docs/models.md#the-graph-pass): the input set
// as the first form, the nodes in their topological order through the transfer function of their family
// (operands.hpp), each form freed after its last use, and the output functionals bounded on the output's
// form. What is certified: graph_affine.hpp.
#include <regatta/operators/graph_affine.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>

#include <regatta/core/error.hpp>

#include "slopes.hpp"
#include "walk.hpp"

namespace regatta::operators {

namespace affine::gp {
namespace {

bool is_movement(graph::Op op) {
  using graph::Op;
  return op == Op::transpose || op == Op::reshape || op == Op::identity || op == Op::slice ||
         op == Op::gather || op == Op::expand || op == Op::concat || op == Op::where;
}

/// Empty when the pass supports the node given which of its operands are computed (runtime), else why not.
std::string node_unsupported(const graph::Graph& g, const graph::Node& node,
                             const std::vector<bool>& runtime) {
  using graph::Op;
  bool any = false;
  for (bool r : runtime) any = any || r;
  if (!any) return "";  // constants only: enclosed by the interval64 evaluation
  const auto computed = [&](std::size_t k) { return k < runtime.size() && runtime[k]; };
  switch (node.op) {
    case Op::conv:
      return computed(1) || computed(2) ? "a computed kernel or bias" : "";
    case Op::gemm:
      if (computed(2)) return "a computed bias C";
      return computed(0) && computed(1) ? "a product of two computed operands (gemm)" : "";
    case Op::pow:
      return pow_unsupported(g.values[std::size_t(node.inputs[1])].data);
    case Op::where:
      return computed(0) ? "a computed condition" : "";
    case Op::layer_norm:
      return computed(1) || computed(2) ? "a computed scale or bias" : "";
    case Op::batch_norm:
      for (std::size_t k = 1; k < 5; ++k)
        if (computed(k)) return "computed statistics or scale";
      return "";
    default:
      return "";
  }
}

/// The first form of the pass: the input set in the graph input's coordinates (graph_affine.hpp).
Form input_form(const graph::Graph& g, const InputSet& set, Pass& p) {
  const graph::Value& in = g.values[std::size_t(g.inputs.front())];
  const Index N = Index(graph::element_count(in.shape));
  const std::string subject = "the input set of " + g.source;
  if (set.centre.size() != N)
    throw InputError(subject, "a centre of " + std::to_string(set.centre.size()) + " values, the input " +
                                  in.name + " has " + std::to_string(N));
  if (!(set.radius >= 0) || !std::isfinite(set.radius)) throw InputError(subject, "the radius is not >= 0");
  if (set.scale.size() != 0 && set.scale.size() != N) throw InputError(subject, "scale of the wrong size");
  const bool bounded = set.lower.size() != 0 || set.upper.size() != 0;
  if (bounded && (set.lower.size() != N || set.upper.size() != N))
    throw InputError(subject, "lower and upper must both have one value per input entry");
  Form F{Vector<double>(N), Matrix<double>::Zero(N, N), Vector<double>::Zero(N)};
  p.box = set.norm == InputNorm::linf;
  for (Index j = 0; j < N; ++j) {
    if (!std::isfinite(set.centre(j))) throw InputError(subject, "a centre value is not finite");
    if (!p.box) {  // the ball as it is: x = centre + r·ε, ‖ε‖₂ ≤ 1 (valid range not used: still sound)
      F.c(j) = set.centre(j);
      F.A(j, j) = set.radius;
      continue;
    }
    const double scale = set.scale.size() != 0 ? set.scale(j) : 1.0;
    if (!(scale >= 0) || !std::isfinite(scale)) throw InputError(subject, "a scale value is not >= 0");
    const I half = I(set.radius) * I(scale);
    double lo = (I(set.centre(j)) - half).lower(), up = (I(set.centre(j)) + half).upper();
    if (bounded) {
      lo = std::max(lo, set.lower(j));
      up = std::min(up, set.upper(j));
    }
    if (!(lo <= up)) throw InputError(subject, "the box is empty at entry " + std::to_string(j));
    // the box [lo, up] ⊆ {m + h·ε : |ε| ≤ 1}: m its rounded midpoint, h rounded up
    F.c(j) = mid(I::hull(lo, up));
    F.A(j, j) = halfwidth(I::hull(lo, up), F.c(j));
  }
  p.q = p.next = N;
  return F;
}

}  // namespace

WalkState start_walk(const graph::Graph& g, const InputSet& set, Pass& p) {
  WalkState w;
  const std::size_t V = g.values.size();
  w.forms.resize(V);
  w.stochastic.assign(V, 0);
  w.uses.assign(V, 0);
  for (const graph::Node& node : g.nodes)
    for (int id : node.inputs) ++w.uses[std::size_t(id)];
  ++w.uses[std::size_t(g.outputs.front())];
  auto first = std::make_shared<const Form>(input_form(g, set, p));
  w.bytes = form_bytes(*first);
  w.forms[std::size_t(g.inputs.front())] = std::move(first);
  w.q = p.q;
  w.box = p.box;
  w.next = p.next;
  return w;
}

void resume(const WalkState& w, Pass& p) {
  p.q = w.q;
  p.box = w.box;
  p.next = w.next;
}

void advance(const graph::Graph& g, WalkState& w, Pass& p, const GraphAffineOptions& options,
             std::size_t until, const NodeOverride* replace,
             const std::function<void(const WalkState&)>* before) {
  p.poll = [&options] {
    if (options.stop && options.stop->load()) throw Stopped{};
  };
  for (; w.node < until; ++w.node) {
    const graph::Node& node = g.nodes[w.node];
    p.tick();
    if (before) {
      w.next = p.next;
      (*before)(w);
    }
    std::vector<Operand> in;
    bool constants_only = true;
    for (int id : node.inputs) {
      const graph::Value& v = g.values[std::size_t(id)];
      Operand x{&v.shape};
      if (w.forms[std::size_t(id)]) {
        x.form = w.forms[std::size_t(id)].get();
        x.stochastic = w.stochastic[std::size_t(id)] != 0;
        constants_only = false;
      } else {
        x.data = &v.data;
        x.radius = v.radius;
      }
      in.push_back(x);
    }
    const Shape& out = g.values[std::size_t(node.output)].shape;
    Result r;
    std::shared_ptr<const Form> kept;  // an operand's form that the node leaves unchanged (a reshape)
    using graph::Op;
    const bool one_constant = !constants_only && (in[0].constant() || (in.size() > 1 && in[1].constant()));
    if (constants_only) {
      r.form = constant_node(g, node, in);
    } else if (replace && (*replace)(w.node, node, in, p, r.form)) {
      // the caller's transfer function (the phase-split ReLU of graph_affine_branch.hpp)
    } else if (is_movement(node.op)) {
      const Form* same = nullptr;
      r.form = movement(g, node, in, &same);
      for (int id : node.inputs)
        if (same && w.forms[std::size_t(id)].get() == same) kept = w.forms[std::size_t(id)];
      r.stochastic = node.op == Op::identity && in[0].stochastic;
    } else if (node.op == Op::conv || node.op == Op::batch_norm || node.op == Op::reduce_mean ||
               node.op == Op::neg || node.op == Op::gemm ||
               ((node.op == Op::matmul || node.op == Op::add || node.op == Op::sub || node.op == Op::mul) &&
                one_constant) ||
               (node.op == Op::div && in[1].constant())) {
      r.form = linear_node(node, in, out, p);
    } else if (node.op == Op::matmul || node.op == Op::softmax || node.op == Op::layer_norm) {
      r = contraction_node(node, in, out, p);
    } else {
      r.form = elementwise_node(node, in, out, p);
    }
    const Form& made = kept ? *kept : r.form;
    if (made.size() != Index(graph::element_count(out)))
      throw std::logic_error("graph affine pass: node " + node.name + " gave a form of the wrong size");
    w.bytes += form_bytes(made);  // counted as a copy, though a kept form is shared, not copied
    if (w.bytes > options.max_bytes)
      throw InputError(g.source, "the affine forms need more than " + std::to_string(options.max_bytes) +
                                     " bytes at node '" + node.name + "' (GraphAffineOptions::max_bytes)");
    w.forms[std::size_t(node.output)] = kept ? kept : std::make_shared<const Form>(std::move(r.form));
    w.stochastic[std::size_t(node.output)] = r.stochastic ? 1 : 0;
    for (int id : node.inputs)
      if (--w.uses[std::size_t(id)] == 0 && w.forms[std::size_t(id)]) {
        w.bytes -= form_bytes(*w.forms[std::size_t(id)]);
        w.forms[std::size_t(id)].reset();
      }
  }
  w.next = p.next;
}

Form final_form(const graph::Graph& g, const WalkState& w) {
  const int y = g.outputs.front();
  if (!w.forms[std::size_t(y)])
    return constant_form(g.values[std::size_t(y)].data, g.values[std::size_t(y)].radius);
  return *w.forms[std::size_t(y)];
}

namespace {

/// The form of the graph's output over the set: every node in order, each form freed after its last use.
Form output_form(const graph::Graph& g, const InputSet& set, const GraphAffineOptions& options, Pass& p) {
  WalkState w = start_walk(g, set, p);
  advance(g, w, p, options, g.nodes.size());
  return final_form(g, w);
}

/// Throws InputError naming the graph and the first unsupported node.
void require_supported(const graph::Graph& g) {
  const std::string why = graph_affine_unsupported(g);
  if (!why.empty()) throw InputError(g.source, why);
}

/// Lower bounds of C·y + d from the output's form Y: the rows of C·A exactly on the symbols, then
/// c − (‖a_{<q}‖ + ‖a_{≥q}‖₁ + s) rounded down, with the rounding of C·A (γ_N per row sum) in s.
std::vector<double> functional_bounds(const Form& Y, const Matrix<double>& C, const Vector<double>& d,
                                      const Pass& p) {
  const Index K = Y.A.cols(), q = std::min(p.q, K);
  const Vector<double>& rs = row_sums(Y, p);
  const Matrix<double> A = C * Y.A;
  std::vector<double> out;
  for (Index k = 0; k < C.rows(); ++k) {
    const FunctionalCentre f = functional_centre(Y, rs, C, d, k);
    const double dual = input_norm(A.row(k).head(q), p);
    const double rest = sum_up(A.row(k).tail(K - q).cwiseAbs().sum(), double(K - q));
    const I width = I(dual) + I(rest) + f.slack;
    const I low = f.centre - width;
    out.push_back(isfinite(low) ? low.lower() : -std::numeric_limits<double>::infinity());
  }
  return out;
}

}  // namespace

FunctionalCentre functional_centre(const Form& Y, const Vector<double>& row_sums, const Matrix<double>& C,
                                   const Vector<double>& d, Index k) {
  const Index N = Y.size(), K = Y.A.cols();
  I centre(d.size() != 0 ? d(k) : 0.0), s(0.0), magnitude(0.0);
  for (Index e = 0; e < N; ++e) {
    if (C(k, e) == 0) continue;
    centre += I(C(k, e)) * I(Y.c(e));
    s += I(std::fabs(C(k, e))) * I(Y.s(e));
    magnitude += I(std::fabs(C(k, e))) * I(row_sums(e));
  }
  return {centre, s + I(gamma_of(double(N))) * magnitude + I(double(N) * double(K)) * I(underflow_unit)};
}

}  // namespace affine::gp

std::string graph_affine_unsupported(const graph::Graph& graph) {
  using namespace affine::gp;
  if (graph.inputs.size() != 1)
    return "the graph has " + std::to_string(graph.inputs.size()) + " runtime inputs (the pass takes one)";
  if (graph.outputs.size() != 1)
    return "the graph has " + std::to_string(graph.outputs.size()) + " outputs (the pass takes one)";
  std::vector<bool> runtime(graph.values.size(), false), masked(graph.values.size(), false);
  runtime[std::size_t(graph.inputs.front())] = true;
  for (std::size_t v = 0; v < graph.values.size(); ++v)
    for (double x : graph.values[v].data)
      masked[v] = masked[v] || x == -std::numeric_limits<double>::infinity();
  for (const graph::Node& node : graph.nodes) {
    std::vector<bool> r;
    for (int id : node.inputs) r.push_back(runtime[std::size_t(id)]);
    const std::string name = "node '" + node.name + "' (" + std::string(graph::op_name(node.op)) + "): ";
    const std::string why = node_unsupported(graph, node, r);
    if (!why.empty()) return name + "the affine-form pass " + "does not support " + why;
    // A −inf attention mask (docs/graph.md#non-finite-constants) reaches the softmax as constant −inf
    // entries through data movement and an add of a computed value and a constant; any other way in
    // (both operands computed, or constants only, enclosed by interval64) is not handled.
    bool any = false, all_constant = true;
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      any = any || masked[std::size_t(node.inputs[k])];
      all_constant = all_constant && !r[k];
    }
    if (any) {
      const bool one_constant = node.inputs.size() == 2 && r[0] != r[1];
      if (all_constant || !(is_movement(node.op) || node.op == graph::Op::softmax ||
                            (node.op == graph::Op::add && one_constant)))
        return name +
               "reads a -inf attention mask: the affine-form pass takes it into a softmax through data "
               "movement and an add of a computed value and a constant only";
      masked[std::size_t(node.output)] = node.op != graph::Op::softmax;
    }
    runtime[std::size_t(node.output)] = true;  // constants-only nodes too: they become forms
  }
  return "";
}

std::vector<double> graph_affine_lower_bounds(const graph::Graph& graph, const InputSet& set,
                                              const Matrix<double>& C, const Vector<double>& d,
                                              const GraphAffineOptions& options) {
  using namespace affine;
  using namespace affine::gp;
  require_supported(graph);
  const Index N = Index(graph::element_count(graph.values[std::size_t(graph.outputs.at(0))].shape));
  if (C.cols() != N || (d.size() != 0 && d.size() != C.rows()))
    throw InputError(graph.source, "the functionals have " + std::to_string(C.cols()) +
                                       " columns (the output has " + std::to_string(N) + " entries) and " +
                                       std::to_string(d.size()) + " offsets for " + std::to_string(C.rows()));
  Pass p;
  try {
    // Each relu node's relaxation is recorded as the pass computes it, for the optimised slopes.
    std::vector<ReluRelaxation> relu;
    const NodeOverride record = [&](std::size_t index, const graph::Node& node,
                                    const std::vector<Operand>& in, Pass& pass, Form& out) {
      if (node.op != graph::Op::relu || options.slope_steps <= 0 || in[0].constant()) return false;
      std::vector<Index> fresh;
      out = split_transfer(node, *in[0].form, pass, nullptr, &fresh);
      relu.push_back(relu_relaxation(index, *in[0].form, fresh, pass, nullptr));
      return true;
    };
    WalkState w = start_walk(graph, set, p);
    advance(graph, w, p, options, graph.nodes.size(), &record);
    const Form Y = final_form(graph, w);
    std::vector<double> out = functional_bounds(Y, C, d, p);
    if (!relu.empty()) {
      std::vector<const ReluRelaxation*> nodes;
      for (const ReluRelaxation& r : relu) nodes.push_back(&r);
      const std::vector<Objective> objs = objectives(Y, C, d, Y.A.cols(), p);
      for (std::size_t k = 0; k < out.size(); ++k) {
        std::vector<SplitRow> none;
        try {
          const Objective o = optimise_slopes(objs[k], nodes, none, {}, p, options.slope_steps, 0);
          out[k] = std::max(out[k], certified_bound(o, {}, {}, p));
        } catch (const Vacuous&) {  // an unbounded re-expression: the fixed slopes' bound stands
        }
      }
    }
    return out;
  } catch (const Vacuous&) {
  } catch (const Stopped&) {
  }
  return std::vector<double>(std::size_t(C.rows()), -std::numeric_limits<double>::infinity());
}

std::vector<interval64> graph_affine_output_ranges(const graph::Graph& graph, const InputSet& set,
                                                   const GraphAffineOptions& options) {
  using namespace affine;
  using namespace affine::gp;
  require_supported(graph);
  Pass p;
  try {
    const Form Y = output_form(graph, set, options, p);
    const Vector<double>& rad = radius(Y, p);
    std::vector<interval64> out;
    for (Index e = 0; e < Y.size(); ++e) out.push_back(I(Y.c(e)) + I::hull(-rad(e), rad(e)));
    return out;
  } catch (const Vacuous&) {
  } catch (const Stopped&) {
  }
  const double inf = std::numeric_limits<double>::infinity();
  const Index N = Index(graph::element_count(graph.values[std::size_t(graph.outputs.at(0))].shape));
  return std::vector<interval64>(std::size_t(N), interval64::hull(-inf, inf));
}

double graph_affine_margin(const graph::Graph& graph, const InputSet& set, int label,
                           const GraphAffineOptions& options) {
  using affine::Index;
  affine::gp::require_supported(graph);
  const Index N = Index(graph::element_count(graph.values[std::size_t(graph.outputs.at(0))].shape));
  if (label < 0 || label >= N)
    throw InputError(graph.source, "the label " + std::to_string(label) + " is not one of the " +
                                       std::to_string(N) + " outputs");
  if (N < 2) throw InputError(graph.source, "a margin needs at least two outputs");
  Matrix<double> C = Matrix<double>::Zero(N - 1, N);
  for (Index c = 0, k = 0; c < N; ++c)
    if (c != label) {
      C(k, label) = 1;
      C(k++, c) = -1;
    }
  const std::vector<double> lows = graph_affine_lower_bounds(graph, set, C, Vector<double>(), options);
  return *std::min_element(lows.begin(), lows.end());
}

}  // namespace regatta::operators
