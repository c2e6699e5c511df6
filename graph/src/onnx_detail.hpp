#pragma once
// Internals of the ONNX importer shared by its files (docs/graph.md, "ONNX import").
#include <cstdint>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include <regatta/graph/graph.hpp>
#include <regatta/graph/onnx_import.hpp>

namespace regatta::graph::onnx_detail {

/// A constant tensor during import: floating-point data in `f` (binary64, exact for float32 and float64
/// sources), integer and boolean data in `i`. `dtype` is the ONNX element type (TensorProto::DataType).
struct Const {
  Shape shape;
  int dtype = 0;
  std::vector<double> f;
  std::vector<std::int64_t> i;
  bool is_float() const { return dtype == onnx::TensorProto::FLOAT || dtype == onnx::TensorProto::DOUBLE; }
  std::int64_t size() const { return element_count(shape); }
};

/// The message context of one node: "file: node 'name' (Op): ".
struct Where {
  std::string source;
  std::string node;
  std::string op;
  [[noreturn]] void fail(const std::string& problem) const;
};

/// A TensorProto as a Const: float, double, int32, int64 and bool; refuses external data, segments,
/// sizes that do not match the dims, counts over the limit, NaN and +Inf (−inf is held to attention
/// masks by Graph::validate).
Const read_tensor(const onnx::TensorProto& t, const Where& where, const OnnxLimits& limits);

/// Checked element count of dims (each >= 0, product <= limit).
std::int64_t checked_count(const Shape& shape, const Where& where, const OnnxLimits& limits);

/// The ONNX ops folded when all their inputs are constants, and only then (Shape, Constant,
/// ConstantOfShape, Equal, Less, Greater, Not, Cast of integers, Range).
bool fold_only(const std::string& op);
/// Evaluates a node whose inputs are all constants, for the data-movement and integer ops (Shape is handled
/// by the caller). `inputs` may hold empty Consts for omitted optional inputs.
Const fold(const onnx::NodeProto& node, const std::vector<const Const*>& inputs, std::int64_t opset,
           const Where& where, const OnnxLimits& limits);

/// Attribute accessors that refuse the wrong type.
const onnx::AttributeProto* attribute(const onnx::NodeProto& node, const std::string& name);
std::int64_t int_attribute(const onnx::NodeProto& node, const std::string& name, std::int64_t fallback,
                           const Where& where);
double float_attribute(const onnx::NodeProto& node, const std::string& name, double fallback,
                       const Where& where);
std::vector<std::int64_t> ints_attribute(const onnx::NodeProto& node, const std::string& name,
                                         const Where& where);
/// Refuses attributes outside `known`.
void only_attributes(const onnx::NodeProto& node, std::initializer_list<const char*> known,
                     const Where& where);

/// Normalises an axis against a rank (negative counts from the end); refuses out-of-range axes.
std::int64_t normal_axis(std::int64_t axis, std::int64_t rank, const Where& where);

/// The integer values of a constant (int64/int32 data, or integral floats); refuses non-integers.
std::vector<std::int64_t> integers(const Const& c, const Where& where);

}  // namespace regatta::graph::onnx_detail

namespace regatta::graph::onnx_detail {

/// A data-movement node (Identity, Dropout, Cast to float, Reshape, Flatten, Squeeze, Unsqueeze,
/// Transpose, Slice, Gather, Expand, Concat) resolved against its input shapes and constant operands: the
/// typed kind, its attributes and the output shape. `consts[k]` is the constant value of input k, or null
/// when it is computed at run time (shape operands must be constants).
struct Movement {
  Op op;
  Attributes attributes;
  Shape out;
};
bool is_movement(const std::string& op);
Movement movement(const onnx::NodeProto& node, const std::vector<Shape>& shapes,
                  const std::vector<const Const*>& consts, std::int64_t opset, const Where& where);
/// Applies a movement to constant data (any element type).
Const apply(const Movement& m, const std::vector<const Const*>& inputs);

}  // namespace regatta::graph::onnx_detail
