// Reverse-mode derivatives of a Graph in binary64 (docs/graph.md, "Derivatives"): a forward that keeps every
// value, then one sweep over the nodes in reverse topological order applying each node's adjoint rule
// (vjp_rules.cpp). Only the values the graph input reaches carry an adjoint.
#include <regatta/graph/attack.hpp>

#include <string>

#include <regatta/core/error.hpp>
#include <regatta/graph/evaluate.hpp>

#include "gradient.hpp"
#include "vjp_rules.hpp"

namespace regatta::graph {

namespace detail {

ValueAndGradient value_and_gradient(
    const Graph& g, const std::vector<double>& input,
    const std::function<bool(const std::vector<double>&, std::vector<double>&)>& weights) {
  if (g.inputs.size() != 1 || g.outputs.size() != 1)
    throw InputError(g.source, "the model has " + std::to_string(g.inputs.size()) + " inputs and " +
                                   std::to_string(g.outputs.size()) +
                                   " outputs; derivatives need one of each");
  const int in_id = g.inputs[0], out_id = g.outputs[0];
  const Shape& in_shape = g.values[static_cast<std::size_t>(in_id)].shape;
  if (static_cast<std::int64_t>(input.size()) != element_count(in_shape))
    throw InputError(g.source, "a point of " + std::to_string(input.size()) +
                                   " values for an input of shape " + shape_text(in_shape));
  const auto v = evaluate_all<double>(g, {Tensor<double>{in_shape, input}});
  ValueAndGradient r;
  r.output = v[static_cast<std::size_t>(out_id)].data;
  std::vector<double> w(r.output.size(), 0.0);
  if (!weights(r.output, w)) return r;
  if (w.size() != r.output.size())
    throw InputError(g.source, std::to_string(w.size()) + " weights for an output of " +
                                   std::to_string(r.output.size()) + " values");

  // The values the input reaches (the others are constants of the derivative).
  std::vector<char> active(g.values.size(), 0);
  active[static_cast<std::size_t>(in_id)] = 1;
  for (const Node& n : g.nodes)
    for (int id : n.inputs)
      if (active[static_cast<std::size_t>(id)]) active[static_cast<std::size_t>(n.output)] = 1;

  std::vector<std::vector<double>> adj(g.values.size());
  r.gradient.assign(input.size(), 0.0);
  if (!active[static_cast<std::size_t>(out_id)]) return r;  // the output does not depend on the input
  adj[static_cast<std::size_t>(out_id)] = std::move(w);
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
    const Node& n = *it;
    auto& g_out = adj[static_cast<std::size_t>(n.output)];
    if (g_out.empty()) continue;  // nothing downstream reads it (or it is not active)
    std::vector<const Tensor<double>*> in;
    std::vector<std::vector<double>*> g_in;
    for (int id : n.inputs) {
      const auto k = static_cast<std::size_t>(id);
      in.push_back(&v[k]);
      if (active[k] && adj[k].empty()) adj[k].assign(v[k].data.size(), 0.0);
      g_in.push_back(active[k] ? &adj[k] : nullptr);
    }
    detail::node_vjp(g, n, in, v[static_cast<std::size_t>(n.output)], g_out, g_in);
    std::vector<double>().swap(g_out);  // every reader of it came later: no longer needed
  }
  if (!adj[static_cast<std::size_t>(in_id)].empty())
    r.gradient = std::move(adj[static_cast<std::size_t>(in_id)]);
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

}  // namespace regatta::graph
