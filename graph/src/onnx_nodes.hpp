#pragma once
// The Graph builder of the ONNX importer: one call per node in topological order (docs/graph.md).
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "onnx_detail.hpp"

namespace regatta::graph::onnx_detail {

/// True for the operators of the default domain the importer translates or folds.
bool supported_operator(const onnx::NodeProto& node);

class Builder {
 public:
  /// `inferred`: static shapes from ONNX shape inference, checked against the importer's own; `used`: the
  /// names read by some node or listed as graph outputs.
  Builder(std::string source, std::int64_t opset, const OnnxLimits& limits,
          std::map<std::string, Shape> inferred, std::set<std::string> used);
  void add_constant(const std::string& name, Const c);
  void add_input(const onnx::ValueInfoProto& input);
  void add_node(const onnx::NodeProto& node);
  void add_output(const std::string& name);
  /// The graph: nodes that no output depends on removed, constants nothing reads dropped; refuses runtime
  /// inputs that no output depends on.
  Graph finish();

 private:
  struct Entry {
    Shape shape;
    std::optional<Const> constant;
    int value = -1;  // the Graph value (a constant once materialised)
  };
  int new_value(const std::string& name, const Shape& shape, const Where& where);
  int materialise(const std::string& name, const Where& where);
  void define(const std::string& name, Entry e, const Where& where);
  void split_node(const onnx::NodeProto& node, const std::vector<const Entry*>& in, const Where& where);
  void fold_node(const onnx::NodeProto& node, const std::vector<const Entry*>& in, const Where& where);
  void runtime_node(const onnx::NodeProto& node, const std::vector<const Entry*>& in, const Where& where);
  void unused_outputs(const onnx::NodeProto& node, const Where& where) const;

  std::string source_;
  std::int64_t opset_;
  OnnxLimits limits_;
  std::map<std::string, Shape> inferred_;
  std::set<std::string> used_;
  std::unordered_map<std::string, Entry> entries_;
  Graph g_;
  std::map<std::string, int> folded_;
  std::int64_t total_elements_ = 0;
};

}  // namespace regatta::graph::onnx_detail
