// The naive certificate of a graph (graph_naive.hpp, docs/models.md#certifying-a-model-file): global ℓ2
// Lipschitz bounds composed node by node, every operation rounded up in interval64. A constant with an
// enclosure radius (docs/graph.md#enclosure-radii-of-constants) enters as the intervals [v − r, v + r].
#include <regatta/operators/graph_naive.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include <regatta/core/interval64.hpp>
#include <regatta/core/interval_norms.hpp>

namespace regatta::operators {

// A named namespace, not an anonymous one: the unity build puts other files' helpers in this translation
// unit.
namespace graph_naive_detail {

using graph::Node;
using graph::Op;
using I = interval64;

struct NoBound {
  std::string reason;
};

double up(const I& x) { return x.upper(); }

class Composer {
 public:
  explicit Composer(const graph::Graph& g) : g_(g), lip_(g.values.size(), 0.0) {
    lip_[std::size_t(g.inputs[0])] = 1;
  }

  double run() {
    for (const Node& n : g_.nodes) lip_[std::size_t(n.output)] = node(n);
    return lip_[std::size_t(g_.outputs[0])];
  }

 private:
  const graph::Value& value(int v) const { return g_.values[std::size_t(v)]; }
  double lip(int v) const { return lip_[std::size_t(v)]; }
  bool runtime(int v) const { return lip(v) > 0; }

  [[noreturn]] void refuse(const Node& n, const std::string& why) const {
    throw NoBound{"node '" + n.name + "' (" + std::string(graph::op_name(n.op)) + "): " + why};
  }

  /// √(output size / operand size): an operand broadcast to the output repeats each entry that many times.
  double spread(const Node& n, int v) const {
    const double k = double(graph::element_count(value(n.output).shape)) /
                     double(std::max<std::int64_t>(1, graph::element_count(value(v).shape)));
    return k <= 1 ? 1.0 : up(sqrt(I(k)));
  }

  const std::vector<double>& constant(const Node& n, int v) const {
    if (!value(v).constant) refuse(n, "an operand is computed without the input but is not a constant");
    return value(v).data;
  }

  /// Element e of the constant v as an interval (its value widened by its enclosure radius).
  I element(const Node& n, int v, std::size_t e) const {
    const I x(constant(n, v)[e]);
    const double r = value(v).radius;
    return r == 0 ? x : x + I::hull(-r, r);
  }

  /// The certified ‖W‖₂ of a constant matrix (= ‖Wᵀ‖₂; a vector as one row: its ℓ2 norm, either way).
  double matrix_norm(const Node& n, int v) const {
    const graph::Shape& s = value(v).shape;
    constant(n, v);
    if (s.size() > 2)
      refuse(n, "a constant operand of rank " + std::to_string(s.size()) + " (batched weights)");
    const Eigen::Index rows = s.size() == 2 ? s[0] : 1, cols = s.empty() ? 1 : s.back();
    Matrix<I> m(rows, cols);
    for (Eigen::Index i = 0; i < rows; ++i)
      for (Eigen::Index j = 0; j < cols; ++j) m(i, j) = element(n, v, std::size_t(i * cols + j));
    return spectral_norm_upper(m);
  }

  double max_abs(const Node& n, int v) const {
    double m = 0;
    for (double c : constant(n, v)) m = std::max(m, std::fabs(c));
    return value(v).radius == 0 ? m : up(I(m) + I(value(v).radius));
  }

  /// The one operand that depends on the input (throws when two do).
  int only_runtime(const Node& n) const {
    int found = -1;
    for (int v : n.inputs)
      if (runtime(v)) {
        if (found >= 0 && found != v) refuse(n, "a product of two values that depend on the input");
        found = v;
      }
    return found;
  }

  double node(const Node& n) {
    bool any = false;
    for (int v : n.inputs) any = any || runtime(v);
    if (!any) return 0;  // computed from constants only
    switch (n.op) {
      case Op::identity:
      case Op::neg:
      case Op::relu:
      case Op::tanh:
      case Op::transpose:
      case Op::reshape:
      case Op::slice:
      case Op::softmax:      // J = diag(p) − ppᵀ: symmetric, eigenvalues in [0, max p] ⊆ [0, 1]
      case Op::reduce_mean:  // each mean of k entries has |mean| ≤ ‖entries‖₂/√k
        return lip(n.inputs[0]);
      case Op::sigmoid:
        return up(I(lip(n.inputs[0])) * I(0.25));
      case Op::gelu:
        if (std::get<graph::GeluAttrs>(n.attributes).tanh_approximation)
          refuse(n, "no certified bound on the tanh GELU's derivative here");
        return up(I(lip(n.inputs[0])) * I(1.13));
      case Op::expand:
        return up(I(lip(n.inputs[0])) * I(spread(n, n.inputs[0])));
      case Op::gather: {
        std::map<std::int64_t, int> count;
        int most = 1;
        for (std::int64_t k : std::get<graph::GatherAttrs>(n.attributes).indices)
          most = std::max(most, ++count[k]);
        return up(I(lip(n.inputs[0])) * sqrt(I(double(most))));
      }
      case Op::concat: {
        I sum(0.0);
        for (int v : n.inputs) sum = sum + I(lip(v)) * I(lip(v));
        return up(sqrt(sum));
      }
      case Op::add:
      case Op::sub: {
        I sum(0.0);
        for (int v : n.inputs)
          if (runtime(v)) sum = sum + I(lip(v)) * I(spread(n, v));
        return up(sum);
      }
      case Op::mul:
      case Op::div: {
        const int x = only_runtime(n);
        const int c = n.inputs[0] == x ? n.inputs[1] : n.inputs[0];
        const I base = I(lip(x)) * I(spread(n, x));
        if (n.op == Op::mul) return up(base * I(max_abs(n, c)));
        if (n.inputs[1] == x) refuse(n, "a constant divided by a value that depends on the input");
        double smallest = INFINITY;
        for (double d : constant(n, c)) smallest = std::min(smallest, std::fabs(d));
        smallest = (I(smallest) - I(value(c).radius)).lower();  // the enclosure radius, rounded down
        if (!(smallest > 0))
          refuse(n, "a division by a constant with a zero entry (or one within its radius)");
        return up(base / I(smallest));
      }
      case Op::matmul: {
        const int x = only_runtime(n);
        if (n.inputs[0] == n.inputs[1]) refuse(n, "a product of two values that depend on the input");
        const int w = n.inputs[0] == x ? n.inputs[1] : n.inputs[0];
        return up(I(lip(x)) * I(matrix_norm(n, w)));
      }
      case Op::gemm: {
        const auto& a = std::get<graph::GemmAttrs>(n.attributes);
        if (n.inputs.size() > 2 && runtime(n.inputs[2])) refuse(n, "the added C depends on the input");
        const int x = runtime(n.inputs[0]) ? n.inputs[0] : n.inputs[1];
        if (runtime(n.inputs[0]) && runtime(n.inputs[1]))
          refuse(n, "a product of two values that depend on the input");
        const int w = x == n.inputs[0] ? n.inputs[1] : n.inputs[0];
        return up(I(lip(x)) * I(std::fabs(a.alpha)) * I(matrix_norm(n, w)));
      }
      case Op::conv: {
        if (!runtime(n.inputs[0]) || runtime(n.inputs[1]) || (n.inputs.size() > 2 && runtime(n.inputs[2])))
          refuse(n, "the kernel or bias depends on the input");
        const auto& a = std::get<graph::ConvAttrs>(n.attributes);
        const graph::Shape& ws = value(n.inputs[1]).shape;  // [M, C, kh, kw]
        const Eigen::Index M = ws[0], K = ws[1] * ws[2] * ws[3];
        Matrix<I> m(M, K);
        for (Eigen::Index o = 0; o < M; ++o)
          for (Eigen::Index k = 0; k < K; ++k) m(o, k) = element(n, n.inputs[1], std::size_t(o * K + k));
        // An input entry falls in at most ⌈kh/sh⌉·⌈kw/sw⌉ patches (kh·kw with dilation).
        const bool dilated = a.dilations[0] != 1 || a.dilations[1] != 1;
        const std::int64_t patches = dilated ? ws[2] * ws[3]
                                             : ((ws[2] + a.strides[0] - 1) / a.strides[0]) *
                                                   ((ws[3] + a.strides[1] - 1) / a.strides[1]);
        return up(I(lip(n.inputs[0])) * I(spectral_norm_upper(m)) * sqrt(I(double(patches))));
      }
      case Op::layer_norm: {
        // γ ⊙ (x − μ)/√(σ² + ε) + β: the centred, scaled map has ‖J‖₂ ≤ 1/√(σ² + ε) ≤ 1/√ε.
        if (runtime(n.inputs[1]) || (n.inputs.size() > 2 && runtime(n.inputs[2])))
          refuse(n, "the scale or bias depends on the input");
        const double eps = std::get<graph::LayerNormAttrs>(n.attributes).epsilon;
        return up(I(lip(n.inputs[0])) * I(max_abs(n, n.inputs[1])) / sqrt(I(eps)));
      }
      case Op::batch_norm: {
        // Inference: per channel (x − mean)·scale/√(var + ε) + B, an affine map.
        for (std::size_t k = 1; k < n.inputs.size(); ++k)
          if (runtime(n.inputs[k])) refuse(n, "a statistic or parameter depends on the input");
        const std::size_t channels = constant(n, n.inputs[1]).size();
        const double eps = std::get<graph::BatchNormAttrs>(n.attributes).epsilon;
        double most = 0;
        for (std::size_t c = 0; c < channels; ++c) {
          const I var = element(n, n.inputs[4], c) + I(eps);
          if (!(var.lower() > 0)) refuse(n, "a variance + epsilon that is not positive");
          most = std::max(most, up(abs(element(n, n.inputs[1], c)) / sqrt(var)));
        }
        return up(I(lip(n.inputs[0])) * I(most));
      }
      default:
        refuse(n, "no global Lipschitz bound for this kind of node");
    }
  }

  const graph::Graph& g_;
  std::vector<double> lip_;
};

}  // namespace graph_naive_detail

std::optional<std::vector<LipschitzFactor>> graph_lipschitz_factors(const graph::Graph& graph,
                                                                    std::string& why_not) {
  using namespace graph_naive_detail;
  if (graph.inputs.size() != 1 || graph.outputs.size() != 1) {
    why_not = "the graph has not one input and one output";
    return std::nullopt;
  }
  try {
    const double L = Composer(graph).run();
    if (!(L > 0) || !std::isfinite(L)) {
      why_not = L > 0 ? "the composed bound is not finite" : "the logits do not depend on the input";
      return std::nullopt;
    }
    return std::vector<LipschitzFactor>{{"logits", L,
                                         "global l2 bounds composed over the graph's " +
                                             std::to_string(graph.nodes.size()) +
                                             " nodes (products along a path, sums where paths meet)"}};
  } catch (const NoBound& e) {
    why_not = e.reason;
    return std::nullopt;
  }
}

}  // namespace regatta::operators
