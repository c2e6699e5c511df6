// The one place where a graph holds an infinite constant: −inf as an attention mask
// (docs/graph.md#non-finite-constants). torch writes a causal mask as Where(cond, −inf, scores) or as
// scores + M with M holding −inf above the diagonal; in both the −inf entries reach a Softmax, whose weight
// there is exactly 0. Anywhere else an infinite value would give ∞ − ∞, 0·∞ or an infinite output.
#include "masks.hpp"

#include <algorithm>
#include <cmath>

#include <regatta/core/error.hpp>
#include <regatta/graph/evaluate.hpp>

#include "evaluate_node.hpp"
#include "shapes.hpp"

namespace regatta::graph::detail {

namespace {

bool moves_data(Op op) {
  return op == Op::identity || op == Op::transpose || op == Op::reshape || op == Op::slice ||
         op == Op::gather || op == Op::expand || op == Op::concat;
}

// May `node` read a value with −inf entries as its input `k`? Data movement, Add, a value operand of
// Where, and the Softmax that ends the mask.
bool mask_reader(const Node& node, std::size_t k) {
  return moves_data(node.op) || node.op == Op::add || node.op == Op::softmax ||
         (node.op == Op::where && k != 0);
}

}  // namespace

void check_infinite_masks(const Graph& g) {
  const auto fail = [&g](const Node* node, const std::string& problem) {
    throw InputError(
        g.source,
        (node ? "node " + regatta::quoted(node->name) + " (" + node->source_op + "): " : "") + problem);
  };
  const std::size_t nv = g.values.size();
  // flag[v]: for a value that may hold −inf, 1 where it is −inf whatever the input, 0 elsewhere; empty for a
  // value with no infinite entry.
  std::vector<std::vector<double>> flag(nv);
  for (std::size_t v = 0; v < nv; ++v) {
    const Value& c = g.values[v];
    if (!c.constant) continue;
    bool any = false;
    for (double x : c.data) {
      if (std::isnan(x) || x == HUGE_VAL)
        fail(nullptr, "tensor " + regatta::quoted(c.name) + " holds NaN or +Inf (refused)");
      any = any || x == -HUGE_VAL;
    }
    if (!any) continue;
    flag[v].reserve(c.data.size());
    for (double x : c.data) flag[v].push_back(x == -HUGE_VAL ? 1.0 : 0.0);
  }
  for (const Node& node : g.nodes) {
    bool reads_inf = false;
    for (std::size_t k = 0; k < node.inputs.size(); ++k) {
      const auto v = static_cast<std::size_t>(node.inputs[k]);
      if (flag[v].empty()) continue;
      reads_inf = true;
      if (!mask_reader(node, k))
        fail(&node,
             "reads " + regatta::quoted(g.values[v].name) +
                 ", which holds -inf: -inf is accepted only as an attention mask (a Where or Add whose "
                 "result reaches a Softmax through data movement only)");
    }
    if (!reads_inf) continue;
    const auto out = static_cast<std::size_t>(node.output);
    const Value& x = g.values[static_cast<std::size_t>(node.inputs[0])];
    if (node.op == Op::softmax) {
      // A row of −inf only would be 0/0.
      const auto& a = std::get<SoftmaxAttrs>(node.attributes);
      const Blocks b = blocks(x.shape, a.first_axis, a.end_axis);
      const auto& f = flag[static_cast<std::size_t>(node.inputs[0])];
      for (std::int64_t o = 0; o < b.outer; ++o)
        for (std::int64_t i = 0; i < b.inner; ++i) {
          bool all = true;
          for (std::int64_t l = 0; l < b.len && all; ++l)
            all = f[static_cast<std::size_t>((o * b.len + l) * b.inner + i)] != 0;
          if (all) fail(&node, "every entry of a softmax row is masked with -inf (the softmax would be 0/0)");
        }
      continue;
    }
    // The flags of the output: the node itself applied to the flags (0 for an input without −inf). Add sums
    // them (nonzero where an operand is −inf), Where selects them, data movement moves them.
    std::vector<Tensor<double>> t;
    for (int in : node.inputs) {
      const Value& v = g.values[static_cast<std::size_t>(in)];
      const auto& f = flag[static_cast<std::size_t>(in)];
      t.push_back({v.shape, f.empty()
                                ? std::vector<double>(static_cast<std::size_t>(element_count(v.shape)), 0.0)
                                : f});
    }
    std::vector<const Tensor<double>*> ptr;
    for (const auto& e : t) ptr.push_back(&e);
    std::vector<double> y = evaluate_node(g, node, ptr, g.values[out].shape);
    if (std::none_of(y.begin(), y.end(), [](double e) { return e != 0; })) continue;
    for (double& e : y) e = e != 0 ? 1.0 : 0.0;
    if (std::find(g.outputs.begin(), g.outputs.end(), node.output) != g.outputs.end())
      fail(&node, "its output " + regatta::quoted(g.values[out].name) +
                      " holds -inf and is a graph output: -inf is accepted only as an attention mask");
    flag[out] = std::move(y);
  }
}

}  // namespace regatta::graph::detail
