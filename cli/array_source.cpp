#include "array_source.hpp"

#include <filesystem>
#include <regatta/core/error.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/io/safetensors.hpp>
#include <vector>

namespace regatta::cli {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_container(const std::string& path) {
  return ends_with(path, ".npz") || ends_with(path, ".safetensors");
}

}  // namespace

std::map<std::string, io::Array> load_arrays(const std::string& path) {
  if (ends_with(path, ".npy")) return {{std::filesystem::path(path).stem().string(), io::read_npy(path)}};
  if (ends_with(path, ".npz")) return io::read_npz(path);
  if (ends_with(path, ".safetensors")) return io::read_safetensors(path);
  throw InputError(path, "unknown file type (expected .npy, .npz or .safetensors)");
}

namespace {

/// The array `spec` names, before the checks common to every option (load_array).
io::Array select_array(const std::string& spec) {
  std::string path = spec, name;
  const auto colon = spec.rfind(':');
  if (colon != std::string::npos && is_container(spec.substr(0, colon))) {
    path = spec.substr(0, colon);
    name = spec.substr(colon + 1);
  }
  auto arrays = load_arrays(path);
  // Integer, boolean and 8-bit float tensors are listed by the readers but hold no usable values: they are
  // skipped when choosing the one array of a file, and selecting one by name is an error naming its type.
  std::vector<std::string> usable, all;
  for (const auto& [k, v] : arrays) {
    all.push_back(k);
    if (v.converted()) usable.push_back(k);
  }
  if (name.empty()) {
    if (usable.size() == 1) return std::move(arrays.at(usable.front()));
    if (usable.empty()) throw InputError(path, "holds no float arrays (only " + name_list(all) + ")");
    throw InputError(path, "holds " + std::to_string(usable.size()) + " float arrays; name one as " + path +
                               ":NAME (arrays: " + name_list(usable) + ")");
  }
  const auto it = arrays.find(name);
  if (it == arrays.end())
    throw InputError(path, "has no array " + regatta::quoted(name) + " (arrays: " + name_list(all) + ")");
  io::require_converted(it->second);
  return std::move(it->second);
}

}  // namespace

io::Array load_array(const std::string& spec) {
  io::Array a = select_array(spec);
  // No option takes an empty array, and one with a zero dimension among large ones ((2^40, 0, 2^40) holds no
  // values) must not size anything by its other dimensions: a batch of 2^40 empty matrices.
  if (!a.shape.empty() && a.data.empty())
    throw InputError(a.source,
                     "shape " + io::shape_repr(a.shape) + " has a zero dimension: the array is empty");
  return a;
}

}  // namespace regatta::cli
