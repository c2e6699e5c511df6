#pragma once
// The committed safetensors models that the model-graph tests (model_graph_test.cpp,
// graph_transformer_layouts_test.cpp) write as graphs: the digits ViT of tests/data/vit_digits (train.py
// there) and the GPT-2, BERT and LLaMA models of tests/data/text_models (generate.py there).
#include <filesystem>
#include <regatta/operators/model.hpp>
#include <string>

namespace regatta::operators::model_files {

inline const std::filesystem::path data = REGATTA_TEST_DATA_DIR;

inline Model digits() { return load_model(data / "vit_digits" / "vit_digits.safetensors"); }

/// name: gpt2, bert or llama.
inline Model text(const std::string& name) {
  return load_model(data / "text_models" / name / "model.safetensors");
}

}  // namespace regatta::operators::model_files
