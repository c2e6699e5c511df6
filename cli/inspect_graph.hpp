#pragma once
// regatta inspect M.onnx | M.safetensors: the graph after import and folding (docs/graph.md, "Inspecting a
// model"), or the graph of a safetensors layout (docs/graph.md#front-ends-safetensors-layouts).
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include <regatta/graph/graph.hpp>

namespace regatta::cli {

/// True for a path that names an ONNX model (".onnx").
bool is_onnx_path(const std::string& path);
/// Imports the model and describes it: printed as text unless `json`, and returned as JSON. Throws
/// InputError (one line) when the import refuses the file, or when regatta was built without ONNX.
nlohmann::json inspect_onnx(const std::string& path, bool json);
/// A .safetensors file read as a whole model: its graph (operators::model_graph) on an input of `tokens`
/// rows for a text model (default: the context) or the whole image; no graph and an empty error when there
/// is no config.json beside it (a plain weights file); no graph and the reason when the file is not a model
/// in a known layout.
struct SafetensorsModel {
  std::optional<graph::Graph> graph;
  std::string layout, error;
  int tokens = 0;  ///< text models: the input rows
};
/// Reads it before anything is printed. Throws InputError (one line) for --tokens out of range, on an image
/// model, or on a file that is not a model.
SafetensorsModel read_safetensors_model(const std::string& path, std::optional<int> tokens);
/// Prints (unless `json`) and returns its graph view as for an ONNX model, with "layout" and "tokens"; null
/// for a plain weights file, {"error": why} after one printed line for a file that is not a model.
nlohmann::json describe_safetensors_model(const std::string& path, const SafetensorsModel& model, bool json);

}  // namespace regatta::cli
