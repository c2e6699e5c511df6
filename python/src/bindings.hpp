#pragma once
// The pieces of the extension module `regatta._regatta` (module.cpp calls each once).
#include <string>

#include <pybind11/pybind11.h>

#include <regatta/graph/graph.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>

namespace regatta::python {

namespace py = pybind11;

/// One attention layer with its options, as the Python Layer holds it.
struct LayerCore {
  operators::AttentionLayer layer;
  operators::AttentionOptions options;
  std::string source;  ///< where it came from ("random d=4 ...", "mha.safetensors prefix 'x.'", ...)
};

void bind_layer(py::module_& m);
void bind_lipschitz(py::module_& m);
void bind_transport(py::module_& m);
void bind_proofs(py::module_& m);
void bind_model(py::module_& m);
void bind_measure(py::module_& m);
void bind_graph(py::module_& m);

/// A graph with one input and one output as the GraphCore that regatta.GraphModel wraps (bind_graph.cpp);
/// InputError naming the graph's source otherwise.
py::object graph_core(graph::Graph g);

}  // namespace regatta::python
