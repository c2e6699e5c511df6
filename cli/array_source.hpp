#pragma once
// Loading arrays named on the command line: "data.npy", "weights.npz:W",
// "model.safetensors:layer.0.q.weight". A container file (.npz, .safetensors) with exactly one array may omit
// the name.
#include <map>
#include <string>

#include <regatta/core/io/array.hpp>

namespace regatta::cli {

/// Every array of a .npy (named after the file), .npz or .safetensors file; other extensions are rejected.
std::map<std::string, io::Array> load_arrays(const std::string& path);

/// One array from "FILE" or "FILE:NAME"; errors name the file and list the arrays it holds. An empty array
/// (a zero dimension) is refused naming the file: no option takes one.
io::Array load_array(const std::string& spec);

}  // namespace regatta::cli
