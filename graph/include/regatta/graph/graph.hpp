#pragma once
// A model as a graph of typed nodes (docs/graph.md): the one representation that importers (ONNX now, the
// safetensors layout readers later) produce and that every analysis walks.
//
// Every tensor of the graph is a Value with a static shape. A Value is either a graph input, a constant
// (initializers and everything folded from them: weights, masks, exponents; stored in binary64, exact for
// float32/float64/small-integer sources), or the output of exactly one Node. Nodes are stored in a
// topological order (every input of a node is defined before it). The node kinds are the closed enum Op,
// each with its own typed attribute struct in the variant Attributes; a node's semantics is fixed by
// (op, attributes, input shapes, output shape) alone, so transfer functions (intervals, affine forms,
// derivatives) can be written per node family without knowing where the graph came from.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <regatta/graph/patterns.hpp>

namespace regatta::graph {

using Shape = std::vector<std::int64_t>;

/// Product of the dimensions (1 for a scalar).
std::int64_t element_count(const Shape& shape);
/// "[1, 3, 32, 32]".
std::string shape_text(const Shape& shape);

enum class Op : std::uint8_t {
  // linear maps with constant or runtime operands
  conv,
  matmul,
  gemm,
  // elementwise, numpy broadcasting
  add,
  sub,
  mul,
  div,
  pow,
  where,
  // elementwise, one operand
  neg,
  sqrt,
  reciprocal,
  relu,
  gelu,
  erf,
  tanh,
  sigmoid,
  identity,
  // data movement (exact for every scalar type)
  transpose,
  reshape,
  slice,
  gather,
  expand,
  concat,
  // normalisations and reductions
  softmax,
  layer_norm,
  reduce_mean,
  batch_norm,
};

/// Lower-case name of the node kind ("matmul", "layer_norm").
std::string_view op_name(Op op);

/// Conv: inputs X [1, C, H, W], W [M, C, kh, kw], optional B [M]; groups = 1.
struct ConvAttrs {
  std::array<std::int64_t, 2> strides{1, 1}, dilations{1, 1};
  std::array<std::int64_t, 4> pads{0, 0, 0, 0};  // top, left, bottom, right
};
/// Gemm: alpha·op(A)·op(B) + beta·C, C broadcast to the output (optional input).
struct GemmAttrs {
  double alpha = 1, beta = 1;
  bool trans_a = false, trans_b = false;
};
/// Pow: the exponent is input 1, a constant. Where: the condition is input 0, a constant of 0/1.
struct TransposeAttrs {
  std::vector<std::int64_t> perm;
};
/// Slice: per input axis, the first index and the step; the output shape gives the counts.
struct SliceAttrs {
  std::vector<std::int64_t> starts, steps;
};
/// Gather: out[.., j.., ..] = in[.., indices[j..], ..] along axis; indices are non-negative and in range.
struct GatherAttrs {
  std::int64_t axis = 0;
  std::vector<std::int64_t> indices;
  Shape indices_shape;
};
struct ConcatAttrs {
  std::int64_t axis = 0;
};
/// Softmax over the flattened block of axes [first_axis, end_axis): one axis from opset 13 on, the trailing
/// axes from `axis` before it (the opset-1/11 semantics).
struct SoftmaxAttrs {
  std::int64_t first_axis = 0, end_axis = 0;
};
/// LayerNormalization: normalise over the axes [axis, rank), then scale (input 1) and bias (optional input
/// 2).
struct LayerNormAttrs {
  std::int64_t axis = -1;
  double epsilon = 1e-5;
};
struct ReduceMeanAttrs {
  std::vector<std::int64_t> axes;  // sorted, non-negative
  bool keepdims = true;
};
/// BatchNormalization in inference mode: inputs X, scale, B, mean, var (per channel = axis 1).
struct BatchNormAttrs {
  double epsilon = 1e-5;
};
/// Gelu: x·Φ(x), or its tanh approximation.
struct GeluAttrs {
  bool tanh_approximation = false;
};

using Attributes =
    std::variant<std::monostate, ConvAttrs, GemmAttrs, TransposeAttrs, SliceAttrs, GatherAttrs, ConcatAttrs,
                 SoftmaxAttrs, LayerNormAttrs, ReduceMeanAttrs, BatchNormAttrs, GeluAttrs>;

struct Value {
  std::string name;
  Shape shape;
  bool constant = false;
  std::vector<double> data;  // the values of a constant, row-major; empty otherwise
  /// A constant's enclosure radius (docs/graph.md#enclosure-radii-of-constants), one for the whole tensor:
  /// the true value of every element lies in [data[e] − radius, data[e] + radius]. 0 (every ONNX constant:
  /// its binary64 values are the file's function) means data holds the true values exactly; > 0 when data
  /// holds roundings of values that binary64 cannot hold (a safetensors LLaMA's rotary cos/sin tables).
  /// Certifying consumers take each element as that interval; estimates (the double forward, attacks) use
  /// data as it is.
  double radius = 0;
};

struct Node {
  Op op;
  std::string name;         // the source node's name ("" when it had none)
  std::string source_op;    // the source operator ("Gemm", "Unsqueeze")
  std::vector<int> inputs;  // value ids
  int output = -1;          // value id
  Attributes attributes;
};

struct Graph {
  std::string source;  // the file (or other origin) the graph was read from
  std::int64_t opset = 0;
  std::vector<Value> values;
  std::vector<Node> nodes;   // topological order
  std::vector<int> inputs;   // value ids of the runtime inputs
  std::vector<int> outputs;  // value ids of the outputs
  /// Source nodes that were folded into constants (op name → count), for inspection.
  std::vector<std::pair<std::string, int>> folded;
  /// The attention layers the fusion pass recognised (graph/include/regatta/graph/fuse.hpp), in node order.
  std::vector<AttentionPattern> attention;
  /// The LayerNorm/GELU rewrites and RMSNorm recognitions of the fusion pass.
  FusionReport fusion;

  /// Checks the invariants above (ids in range, topological order, one definition per value, constants
  /// sized by their shapes with a finite radius >= 0, each node's arity, attributes and output shape
  /// consistent with its inputs). Throws InputError naming `source` on the first violation.
  void validate() const;
  /// Whether a constant has an enclosure radius above 0 (Value::radius): a consumer that takes constants
  /// as exact must refuse such a graph.
  bool has_inexact_constants() const;
};

}  // namespace regatta::graph
