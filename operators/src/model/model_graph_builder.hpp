#pragma once
// Internal: appends values and nodes to a graph::Graph in topological order (model_graph.cpp). Node output
// shapes are given by the caller; Graph::validate() re-derives every one of them from the inputs at the end.
#include <string>
#include <utility>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/graph/graph.hpp>

namespace regatta::operators::detail {

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string source) { graph_.source = std::move(source); }

  int input(const std::string& name, graph::Shape shape) {
    const int id = value(name, std::move(shape));
    graph_.inputs.push_back(id);
    return id;
  }

  int constant(const std::string& name, graph::Shape shape, std::vector<double> data) {
    const int id = value(name, std::move(shape));
    graph_.values.back().constant = true;
    graph_.values.back().data = std::move(data);
    return id;
  }

  /// Sets a constant's enclosure radius (graph::Value::radius): its true values lie within r of data.
  void enclose(int id, double r) { graph_.values[static_cast<std::size_t>(id)].radius = r; }

  /// A row-major constant from a matrix (shape rows × cols) or a vector (shape [size]).
  int matrix(const std::string& name, const Matrix<double>& m) {
    std::vector<double> data;
    data.reserve(static_cast<std::size_t>(m.size()));
    for (Eigen::Index i = 0; i < m.rows(); ++i)
      for (Eigen::Index j = 0; j < m.cols(); ++j) data.push_back(m(i, j));
    return constant(name, {m.rows(), m.cols()}, std::move(data));
  }
  int vector(const std::string& name, const Vector<double>& v) {
    return constant(name, {v.size()}, std::vector<double>(v.data(), v.data() + v.size()));
  }

  int node(graph::Op op, const std::string& name, std::vector<int> inputs, graph::Shape shape,
           graph::Attributes attributes = {}) {
    const int id = value(name, std::move(shape));
    graph::Node n;
    n.op = op;
    n.name = name;
    n.source_op = std::string(graph::op_name(op));
    n.inputs = std::move(inputs);
    n.output = id;
    n.attributes = std::move(attributes);
    graph_.nodes.push_back(std::move(n));
    return id;
  }

  const graph::Shape& shape(int id) const { return graph_.values[static_cast<std::size_t>(id)].shape; }

  graph::Graph finish(int output) {
    graph_.outputs = {output};
    graph_.validate();
    return std::move(graph_);
  }

 private:
  int value(const std::string& name, graph::Shape shape) {
    graph::Value v;
    v.name = name;
    v.shape = std::move(shape);
    graph_.values.push_back(std::move(v));
    return static_cast<int>(graph_.values.size()) - 1;
  }

  graph::Graph graph_;
};

}  // namespace regatta::operators::detail
