#pragma once
// ONNX models into a Graph (docs/graph.md, "ONNX import"). Available when regatta is built with
// REGATTA_ONNX (Debian: libonnx-dev); REGATTA_HAVE_ONNX is then defined for users of regatta::graph.
//
// The file is read with hard limits, refused when it uses external data, checked by the ONNX checker and
// its shape inference, and translated node by node: everything computed from constants alone (shapes,
// Shape/Gather/ConstantOfShape chains, reshapes and casts of weights) is folded, so every remaining tensor
// has a static shape. Every problem is an InputError whose one-line message names the file (and the node and
// operator where there is one); the CLI exits 2 with it.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

#include <regatta/graph/graph.hpp>

namespace regatta::graph {

struct OnnxLimits {
  std::size_t max_file_bytes = std::size_t{1} << 30;  // 1 GiB
  std::size_t max_nodes = 100000;
  std::int64_t max_tensor_elements = std::int64_t{1} << 27;  // one tensor: 1 GiB of binary64
  std::int64_t max_total_elements = std::int64_t{1} << 28;   // constants and values together: 2 GiB
};

/// Opsets of the default domain the importer reads.
inline constexpr std::int64_t min_onnx_opset = 9, max_onnx_opset = 17;

/// Reads and translates an .onnx file.
Graph import_onnx(const std::filesystem::path& file, const OnnxLimits& limits = {});
/// The same from the bytes of a model; `source` names them in messages.
Graph import_onnx_bytes(std::span<const std::byte> bytes, const std::string& source,
                        const OnnxLimits& limits = {});

}  // namespace regatta::graph
