// regatta inspect FILE... : what a .npy / .npz / .safetensors file holds (names, dtypes, shapes, ranges,
// non-finite entries), after the same validation every other subcommand applies; for an .onnx model, its
// graph after import and folding, and for a .safetensors model with its config.json, the arrays and then the
// graph of its layout (inspect_graph.cpp).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include <regatta/core/error.hpp>

#include "array_source.hpp"
#include "command.hpp"
#include "inspect_graph.hpp"
#include "json_output.hpp"

namespace regatta::cli {

namespace {

struct Summary {
  std::size_t nonfinite = 0;
  double min = 0, max = 0;  // over the finite entries
  bool any_finite = false;
};

Summary summarise(const io::Array& a) {
  Summary s;
  for (double v : a.data) {
    if (!std::isfinite(v)) {
      ++s.nonfinite;
      continue;
    }
    s.min = s.any_finite ? std::min(s.min, v) : v;
    s.max = s.any_finite ? std::max(s.max, v) : v;
    s.any_finite = true;
  }
  return s;
}

bool is_safetensors_path(const std::string& path) {
  return path.size() >= 12 && path.compare(path.size() - 12, 12, ".safetensors") == 0;
}

std::string shape_string(const std::vector<std::size_t>& shape) {
  std::string s = "(";
  for (std::size_t k = 0; k < shape.size(); ++k) s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

}  // namespace

void add_inspect_command(CLI::App& app, int& result) {
  auto* cmd = app.add_subcommand(
      "inspect",
      "List the arrays of .npy/.npz/.safetensors files, or the graph of an .onnx model (validated)");
  auto files = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<bool>(false);
  auto tokens = std::make_shared<std::optional<int>>();
  cmd->add_option("files", *files, "Files to inspect")->required();
  cmd->add_flag("--json", *json, "Machine-readable output");
  cmd->add_option("--tokens", *tokens,
                  "A text model in safetensors: the input length (rows) of the graph shown (default: the "
                  "context)");
  cmd->callback([files, json, tokens, &result] {
    if (tokens->has_value() && std::none_of(files->begin(), files->end(), is_safetensors_path))
      throw InputError("--tokens", "applies to a text model in safetensors; no .safetensors file was given");
    nlohmann::json out = nlohmann::json::array();
    for (const auto& file : *files) {
      if (is_onnx_path(file)) {  // a model graph rather than arrays
        out.push_back(inspect_onnx(file, *json));
        continue;
      }
      // A whole model (timm ViT, GPT-2, BERT, LLaMA with its config.json): read before anything is printed,
      // its graph shown after the arrays.
      const SafetensorsModel model =
          is_safetensors_path(file) ? read_safetensors_model(file, *tokens) : SafetensorsModel{};
      nlohmann::json entry{{"file", file}, {"arrays", nlohmann::json::array()}};
      for (const auto& [name, array] : load_arrays(file)) {
        if (!array.converted()) {  // an integer, boolean or 8-bit float tensor: listed, not read
          entry["arrays"].push_back({{"name", name},
                                     {"dtype", array.unconverted_dtype},
                                     {"shape", array.shape},
                                     {"loaded", false}});
          if (!*json)
            std::cout << file << "  " << name << "  " << array.unconverted_dtype << "  "
                      << shape_string(array.shape) << "  not loaded (only float arrays are used)\n";
          continue;
        }
        const Summary s = summarise(array);
        nlohmann::json a{{"name", name},
                         {"dtype", std::string(io::dtype_name(array.source_dtype))},
                         {"shape", array.shape},
                         {"nonfinite", s.nonfinite},
                         {"loaded", true}};
        if (s.any_finite) a["min"] = s.min, a["max"] = s.max;
        entry["arrays"].push_back(a);
        if (!*json) {
          std::cout << file << "  " << name << "  " << io::dtype_name(array.source_dtype) << "  "
                    << shape_string(array.shape);
          if (s.any_finite) std::cout << "  min " << s.min << "  max " << s.max;
          if (s.nonfinite) std::cout << "  NON-FINITE ENTRIES: " << s.nonfinite;
          std::cout << "\n";
        }
      }
      nlohmann::json graph = describe_safetensors_model(file, model, *json);
      if (!graph.is_null()) entry["graph"] = std::move(graph);
      out.push_back(entry);
    }
    if (*json) std::cout << json_text(out) << "\n";
    result = exit_ok;
  });
}

}  // namespace regatta::cli
