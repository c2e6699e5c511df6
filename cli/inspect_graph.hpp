#pragma once
// regatta inspect M.onnx: the graph after import and folding (docs/graph.md, "Inspecting a model").
#include <string>

#include <nlohmann/json.hpp>

namespace regatta::cli {

/// True for a path that names an ONNX model (".onnx").
bool is_onnx_path(const std::string& path);
/// Imports the model and describes it: printed as text unless `json`, and returned as JSON. Throws
/// InputError (one line) when the import refuses the file, or when regatta was built without ONNX.
nlohmann::json inspect_onnx(const std::string& path, bool json);

}  // namespace regatta::cli
