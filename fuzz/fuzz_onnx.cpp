// libFuzzer target: the ONNX importer (protobuf parse, limits, checker, shape inference, folding, graph
// building), then a double evaluation of every small graph it accepts on a zero input.
#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/onnx_import.hpp>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace regatta;
  graph::OnnxLimits limits;
  limits.max_tensor_elements = 1 << 16;  // keep every run small
  limits.max_total_elements = 1 << 18;
  limits.max_nodes = 2000;
  try {
    const graph::Graph g = graph::import_onnx_bytes(fuzz::bytes_of(data, size), "fuzz.onnx", limits);
    std::vector<graph::Tensor<double>> inputs;
    for (int id : g.inputs) {
      const auto& shape = g.values[static_cast<std::size_t>(id)].shape;
      inputs.push_back(
          {shape, std::vector<double>(static_cast<std::size_t>(graph::element_count(shape)), 0.0)});
    }
    const auto outputs = graph::evaluate(g, inputs);
    if (outputs.size() != g.outputs.size()) std::abort();
    for (std::size_t k = 0; k < outputs.size(); ++k)
      if (static_cast<std::int64_t>(outputs[k].data.size()) != graph::element_count(outputs[k].shape))
        std::abort();
  } catch (const InputError& e) {
    fuzz::check_message(e);
  }
  return 0;
}
