#pragma once
// Internal to the model loaders (load.cpp: timm ViT and the dispatch; load_text.cpp: GPT-2, BERT, LLaMA):
// named tensors with shape-checked access, and the JSON config keys every layout shares.
#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <regatta/core/eigen.hpp>
#include <regatta/core/io/array.hpp>
#include <regatta/operators/model.hpp>

namespace regatta::operators::detail {

using Shape = std::vector<std::size_t>;

class Tensors {
 public:
  Tensors(std::map<std::string, io::Array> arrays, std::string file)
      : arrays_(std::move(arrays)), file_(std::move(file)) {}

  bool has(const std::string& name) const { return arrays_.count(name) != 0; }
  /// The tensor `name` with exactly `shape`, finite; otherwise InputError naming the tensor, its shape and
  /// the shape expected (or that it is missing), with `why` in parentheses.
  const io::Array& get(const std::string& name, const Shape& shape, const std::string& why) const;
  /// The tensor `name` (any shape); InputError when missing.
  const io::Array& find(const std::string& name) const;
  /// torch Linear weight (out×in) as the in×out right-acting matrix.
  Matrix<double> linear(const std::string& name, std::size_t out, std::size_t in,
                        const std::string& why) const;
  /// GPT-2 Conv1D weight, stored in×out: the right-acting matrix as it is.
  Matrix<double> conv1d(const std::string& name, std::size_t in, std::size_t out,
                        const std::string& why) const;
  Vector<double> vector(const std::string& name, std::size_t n, const std::string& why) const;
  /// The tensors whose names start with `prefix` (copies; for one block's layer adapter).
  std::map<std::string, io::Array> under(const std::string& prefix) const;
  /// "name1, name2, ..." of the first few names (for a layout that is not recognised).
  std::string first_names(std::size_t count = 6) const;
  const std::string& file() const { return file_; }

 private:
  std::map<std::string, io::Array> arrays_;
  std::string file_;
};

int config_int(const nlohmann::json& config, const std::string& key, const std::string& source);
/// The string at `key` or `fallback` when absent; InputError when not a string.
std::string config_string(const nlohmann::json& config, const std::string& key, const std::string& fallback,
                          const std::string& source);
/// A config entry that the tensors also determine must agree with them.
void check_agrees(const nlohmann::json& config, const std::string& key, int from_tensors,
                  const std::string& what, const std::string& source);
/// The first of `keys` present in config (our name first, then Hugging Face's), or "" when none is.
std::string first_key(const nlohmann::json& config, const std::vector<std::string>& keys);
/// heads (required; "heads", "n_head" or "num_attention_heads"), dividing `width`.
int config_heads(const nlohmann::json& config, int width, const std::string& source);
/// LayerNorm ε ("layernorm_eps", "layer_norm_epsilon" or "layer_norm_eps"), positive and finite.
double config_eps(const nlohmann::json& config, double fallback, const std::string& source);
/// The MLP activation ("mlp_activation", "activation_function" or "hidden_act"; our names and Hugging
/// Face's).
Activation config_activation(const nlohmann::json& config, Activation fallback, const std::string& source);
/// "layout" and "model_type", when present, must name `layout` (Hugging Face's model_type `hf_type`).
void check_layout(const nlohmann::json& config, const std::string& layout, const std::string& hf_type,
                  const std::string& source);

/// The text-model loaders (load_text.cpp); `prefix` is "" or the wrapper's ("transformer.", "bert.",
/// "model.").
Model gpt2_model(const Tensors& t, const std::string& prefix, const nlohmann::json& config,
                 const std::string& cfg);
Model bert_model(const Tensors& t, const std::string& prefix, const nlohmann::json& config,
                 const std::string& cfg);
Model llama_model(const Tensors& t, const std::string& prefix, const nlohmann::json& config,
                  const std::string& cfg);

}  // namespace regatta::operators::detail
