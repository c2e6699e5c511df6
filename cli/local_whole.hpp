#pragma once
// regatta local --model M.onnx --input X --whole: the local Lipschitz constant ‖J(x)‖₂ of the whole network
// at its input (graph::local_lipschitz; docs/local.md#the-whole-network-of-an-onnx-model).
#include <string>

namespace regatta::cli {

/// Prints (or, with `json`, writes as one JSON object) the estimate and the certified upper bound of ‖J(x)‖₂
/// of the graph in `model` at the input `input` (the model input's shape, or that shape without a leading
/// 1). InputError, one line, for --node given, an input of the wrong shape or not finite, a model without one
/// input and one output, and a regatta built without ONNX.
void run_whole_model(const std::string& model, const std::string& node, const std::string& input, bool json);

}  // namespace regatta::cli
