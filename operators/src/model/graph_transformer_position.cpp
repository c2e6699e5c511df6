// One token's row of a graph whose logits are per token (graph_transformer.hpp,
// docs/models.md#per-token-logits-one-position): a causal language model exported from torch applies its
// head to every position; certifying it means certifying the prediction at one position.
#include <stdexcept>
#include <string>

#include <regatta/operators/graph_transformer.hpp>

namespace regatta::operators {

std::int64_t output_token_count(const graph::Graph& g) {
  if (g.outputs.size() != 1) return 0;
  const graph::Shape& s = g.values[std::size_t(g.outputs[0])].shape;
  const bool token_axis = (s.size() == 3 && s[0] == 1) || s.size() == 2;
  return token_axis && s[s.size() - 2] > 1 ? s[s.size() - 2] : 0;
}

void select_output_token(graph::Graph& g, std::int64_t position) {
  const std::int64_t n = output_token_count(g);
  if (n == 0 || position < 0 || position >= n)
    throw std::invalid_argument("select_output_token: position " + std::to_string(position) +
                                " of an output with " + std::to_string(n) + " tokens");
  const int out = g.outputs[0];
  graph::Shape shape = g.values[std::size_t(out)].shape;
  const std::int64_t axis = std::int64_t(shape.size()) - 2;
  shape.erase(shape.begin() + axis);  // a scalar index: the token axis goes
  graph::Value row;
  row.name = g.values[std::size_t(out)].name + "[position " + std::to_string(position) + "]";
  row.shape = shape;
  g.values.push_back(std::move(row));
  graph::Node gather;
  gather.op = graph::Op::gather;
  gather.name = "certify_position";
  gather.source_op = "Gather";
  gather.inputs = {out};
  gather.output = int(g.values.size()) - 1;
  gather.attributes = graph::GatherAttrs{axis, {position}, {}};
  g.nodes.push_back(std::move(gather));
  g.outputs[0] = int(g.values.size()) - 1;
  g.validate();
}

}  // namespace regatta::operators
