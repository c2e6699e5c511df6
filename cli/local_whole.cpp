// regatta local --model M.onnx --input X --whole (local_whole.hpp): power iteration with forward- and
// reverse-mode sweeps for the estimate, the interval Jacobian at the input for the certified bound.
#include "local_whole.hpp"

#include <iostream>
#include <nlohmann/json.hpp>

#include <regatta/core/error.hpp>
#include <regatta/core/io/array.hpp>
#include <regatta/graph/graph.hpp>
#include <regatta/graph/local_lipschitz.hpp>
#ifdef REGATTA_HAVE_ONNX
#include <regatta/graph/onnx_import.hpp>
#endif
#include "array_source.hpp"
#include "json_output.hpp"
#include "numbers.hpp"

namespace regatta::cli {

void run_whole_model(const std::string& model, const std::string& node, const std::string& input, bool json) {
  if (!node.empty()) throw InputError("--whole", "analyses the whole network: drop --node " + node);
#ifndef REGATTA_HAVE_ONNX
  (void)input;
  (void)json;
  throw InputError(model, "this regatta was built without ONNX support (REGATTA_ONNX; Debian: libonnx-dev)");
#else
  const graph::Graph g = graph::import_onnx(model);
  if (g.inputs.size() != 1 || g.outputs.size() != 1)
    throw InputError(model, "has " + std::to_string(g.inputs.size()) + " inputs and " +
                                std::to_string(g.outputs.size()) + " outputs; --whole needs one of each");
  const graph::Value& in = g.values[static_cast<std::size_t>(g.inputs[0])];
  const io::Array a = load_array(input);
  io::require_finite(a);
  const graph::Shape given(a.shape.begin(), a.shape.end());
  if (!(given == in.shape || (!in.shape.empty() && in.shape[0] == 1 &&
                              given == graph::Shape(in.shape.begin() + 1, in.shape.end()))))
    throw InputError(a.source, "has shape " + graph::shape_text(given) + ", the input " +
                                   regatta::quoted(in.name) + " of " + model + " takes " +
                                   graph::shape_text(in.shape));
  const graph::WholeLipschitz w = graph::local_lipschitz(g, a.data);
  if (json) {
    std::cout << json_text(nlohmann::json{{"model", model},
                                          {"input", input},
                                          {"jacobian_rows", w.rows},
                                          {"jacobian_cols", w.cols},
                                          {"lipschitz_2_estimate", w.estimate},
                                          {"lipschitz_2_certified_upper", w.certified},
                                          {"power_iterations", w.iterations}})
              << "\n";
    return;
  }
  std::cout
      << model << " at " << input << ": the whole network, Jacobian " << w.rows << " x " << w.cols
      << " (output x input elements)\n"
      << "  ||J(x)||_2 estimate " << number(w.estimate) << " (power iteration on J^T J, " << w.iterations
      << " steps)\n"
      << "  ||J(x)||_2 <= " << upper_number(w.certified)
      << " certified (the Jacobian at the input enclosed in MPFI at 128 bits, certified spectral bound)\n";
#endif
}

}  // namespace regatta::cli
