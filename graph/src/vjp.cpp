// Reverse-mode derivatives of a Graph (docs/graph.md, "Derivatives"): a forward that keeps every value, then
// one sweep over the nodes in reverse topological order applying each node's adjoint rule (vjp_rules.cpp).
// Only the values the graph input reaches carry an adjoint.
#include <regatta/graph/attack.hpp>
#include <regatta/graph/derivatives.hpp>

#include <string>

#include <regatta/core/error.hpp>
#include <regatta/graph/evaluate.hpp>

#include "gradient.hpp"
#include "vjp_rules.hpp"

namespace regatta::graph {

namespace detail {

void require_one_input_output(const Graph& g, std::size_t input_size) {
  if (g.inputs.size() != 1 || g.outputs.size() != 1)
    throw InputError(g.source, "the model has " + std::to_string(g.inputs.size()) + " inputs and " +
                                   std::to_string(g.outputs.size()) +
                                   " outputs; derivatives need one of each");
  const Shape& in_shape = g.values[static_cast<std::size_t>(g.inputs[0])].shape;
  if (static_cast<std::int64_t>(input_size) != element_count(in_shape))
    throw InputError(g.source, "a point of " + std::to_string(input_size) + " values for an input of shape " +
                                   shape_text(in_shape));
}

std::vector<char> active_values(const Graph& g) {
  std::vector<char> active(g.values.size(), 0);
  active[static_cast<std::size_t>(g.inputs[0])] = 1;
  for (const Node& n : g.nodes)
    for (int id : n.inputs)
      if (active[static_cast<std::size_t>(id)]) active[static_cast<std::size_t>(n.output)] = 1;
  return active;
}

template <class S>
std::vector<S> reverse_sweep(const Graph& g, const std::vector<Tensor<S>>& v, const std::vector<char>& active,
                             std::vector<S> w) {
  const int in_id = g.inputs[0], out_id = g.outputs[0];
  std::vector<S> gradient(v[static_cast<std::size_t>(in_id)].data.size(), S(0.0));
  if (!active[static_cast<std::size_t>(out_id)]) return gradient;  // the output does not depend on the input
  std::vector<std::vector<S>> adj(g.values.size());
  adj[static_cast<std::size_t>(out_id)] = std::move(w);
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
    const Node& n = *it;
    auto& g_out = adj[static_cast<std::size_t>(n.output)];
    if (g_out.empty()) continue;  // nothing downstream reads it (or it is not active)
    std::vector<const Tensor<S>*> in;
    std::vector<std::vector<S>*> g_in;
    for (int id : n.inputs) {
      const auto k = static_cast<std::size_t>(id);
      in.push_back(&v[k]);
      if (active[k] && adj[k].empty()) adj[k].assign(v[k].data.size(), S(0.0));
      g_in.push_back(active[k] ? &adj[k] : nullptr);
    }
    node_vjp(g, n, in, v[static_cast<std::size_t>(n.output)], g_out, g_in);
    std::vector<S>().swap(g_out);  // every reader of it came later: no longer needed
  }
  if (!adj[static_cast<std::size_t>(in_id)].empty())
    gradient = std::move(adj[static_cast<std::size_t>(in_id)]);
  return gradient;
}
template std::vector<double> reverse_sweep<double>(const Graph&, const std::vector<Tensor<double>>&,
                                                   const std::vector<char>&, std::vector<double>);
template std::vector<interval64> reverse_sweep<interval64>(const Graph&,
                                                           const std::vector<Tensor<interval64>>&,
                                                           const std::vector<char>&, std::vector<interval64>);
template std::vector<interval> reverse_sweep<interval>(const Graph&, const std::vector<Tensor<interval>>&,
                                                       const std::vector<char>&, std::vector<interval>);

ValueAndGradient value_and_gradient(
    const Graph& g, const std::vector<double>& input,
    const std::function<bool(const std::vector<double>&, std::vector<double>&)>& weights) {
  require_one_input_output(g, input.size());
  const int in_id = g.inputs[0], out_id = g.outputs[0];
  const Shape& in_shape = g.values[static_cast<std::size_t>(in_id)].shape;
  const auto v = evaluate_all<double>(g, {Tensor<double>{in_shape, input}});
  ValueAndGradient r;
  r.output = v[static_cast<std::size_t>(out_id)].data;
  std::vector<double> w(r.output.size(), 0.0);
  if (!weights(r.output, w)) return r;
  if (w.size() != r.output.size())
    throw InputError(g.source, std::to_string(w.size()) + " weights for an output of " +
                                   std::to_string(r.output.size()) + " values");
  r.gradient = reverse_sweep(g, v, active_values(g), std::move(w));
  return r;
}

}  // namespace detail

std::vector<double> vjp(const Graph& graph, const std::vector<double>& input, const std::vector<double>& w) {
  const auto r =
      detail::value_and_gradient(graph, input, [&](const std::vector<double>& y, std::vector<double>& u) {
        if (w.size() != y.size())
          throw InputError(graph.source, std::to_string(w.size()) + " weights for an output of " +
                                             std::to_string(y.size()) + " values");
        u = w;
        return true;
      });
  return r.gradient;
}

template <class S>
std::vector<std::vector<S>> vjps(const Graph& g, const std::vector<S>& x,
                                 const std::vector<std::vector<S>>& ws) {
  detail::require_one_input_output(g, x.size());
  const Shape& in_shape = g.values[static_cast<std::size_t>(g.inputs[0])].shape;
  const std::vector<Tensor<S>> v = evaluate_all<S>(g, {Tensor<S>{in_shape, x}});
  const std::size_t out_size = v[static_cast<std::size_t>(g.outputs[0])].data.size();
  const std::vector<char> active = detail::active_values(g);
  std::vector<std::vector<S>> result;
  result.reserve(ws.size());
  for (const std::vector<S>& w : ws) {
    if (w.size() != out_size)
      throw InputError(g.source, std::to_string(w.size()) + " weights for an output of " +
                                     std::to_string(out_size) + " values");
    result.push_back(detail::reverse_sweep(g, v, active, w));
  }
  return result;
}
template std::vector<std::vector<double>> vjps<double>(const Graph&, const std::vector<double>&,
                                                       const std::vector<std::vector<double>>&);
template std::vector<std::vector<interval64>> vjps<interval64>(const Graph&, const std::vector<interval64>&,
                                                               const std::vector<std::vector<interval64>>&);
template std::vector<std::vector<interval>> vjps<interval>(const Graph&, const std::vector<interval>&,
                                                           const std::vector<std::vector<interval>>&);

}  // namespace regatta::graph
