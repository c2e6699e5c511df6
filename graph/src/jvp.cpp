// Forward-mode derivatives of a Graph (docs/graph.md#forward-mode-and-jacobian-enclosures): a forward that
// keeps every value, then per tangent one sweep over the nodes in topological order applying each node's
// tangent rule (jvp_rules.cpp). Only the values the graph input reaches carry a tangent; a tangent is
// dropped after its last reader.
#include <string>

#include <regatta/core/error.hpp>
#include <regatta/graph/derivatives.hpp>
#include <regatta/graph/evaluate.hpp>

#include "gradient.hpp"
#include "jvp_rules.hpp"

namespace regatta::graph {

template <class S>
std::vector<std::vector<S>> jvps(const Graph& g, const std::vector<S>& x,
                                 const std::vector<std::vector<S>>& vs) {
  detail::require_one_input_output(g, x.size());
  for (const std::vector<S>& v : vs)
    if (v.size() != x.size())
      throw InputError(g.source, "a tangent of " + std::to_string(v.size()) + " values for an input of " +
                                     std::to_string(x.size()));
  const int in_id = g.inputs[0], out_id = g.outputs[0];
  const Shape& in_shape = g.values[static_cast<std::size_t>(in_id)].shape;
  const std::vector<Tensor<S>> values = evaluate_all<S>(g, {Tensor<S>{in_shape, x}});
  const std::vector<char> active = detail::active_values(g);
  std::vector<std::size_t> last(g.values.size(), g.nodes.size());  // the last node reading each value
  for (std::size_t k = 0; k < g.nodes.size(); ++k)
    for (int id : g.nodes[k].inputs) last[static_cast<std::size_t>(id)] = k;

  const std::size_t out_size = values[static_cast<std::size_t>(out_id)].data.size();
  std::vector<std::vector<S>> result;
  result.reserve(vs.size());
  for (const std::vector<S>& v : vs) {
    if (!active[static_cast<std::size_t>(out_id)]) {  // the output does not depend on the input
      result.emplace_back(out_size, S(0.0));
      continue;
    }
    std::vector<Tensor<S>> t(g.values.size());
    t[static_cast<std::size_t>(in_id)] = Tensor<S>{in_shape, v};
    for (std::size_t k = 0; k < g.nodes.size(); ++k) {
      const Node& n = g.nodes[k];
      const auto o = static_cast<std::size_t>(n.output);
      if (!active[o]) continue;
      std::vector<const Tensor<S>*> in, t_in;
      for (int id : n.inputs) {
        in.push_back(&values[static_cast<std::size_t>(id)]);
        t_in.push_back(active[static_cast<std::size_t>(id)] ? &t[static_cast<std::size_t>(id)] : nullptr);
      }
      t[o] = Tensor<S>{values[o].shape, detail::node_jvp(g, n, in, values[o], t_in)};
      for (int id : n.inputs)
        if (last[static_cast<std::size_t>(id)] == k && id != out_id)
          std::vector<S>().swap(t[static_cast<std::size_t>(id)].data);  // no later reader
    }
    result.push_back(std::move(t[static_cast<std::size_t>(out_id)].data));
  }
  return result;
}

template <class S>
std::vector<S> jvp(const Graph& g, const std::vector<S>& x, const std::vector<S>& v) {
  return std::move(jvps(g, x, std::vector<std::vector<S>>{v})[0]);
}

#define REGATTA_GRAPH_JVP(S)                                                                  \
  template std::vector<S> jvp<S>(const Graph&, const std::vector<S>&, const std::vector<S>&); \
  template std::vector<std::vector<S>> jvps<S>(const Graph&, const std::vector<S>&,           \
                                               const std::vector<std::vector<S>>&);
REGATTA_GRAPH_JVP(double)
REGATTA_GRAPH_JVP(::regatta::interval64)
REGATTA_GRAPH_JVP(::regatta::interval)
#undef REGATTA_GRAPH_JVP

}  // namespace regatta::graph
