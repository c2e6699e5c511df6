#pragma once
// The shape rule of every node kind and the index maps of the data-movement and broadcasting operations,
// shared by the importer (folding constants), Graph::validate and the evaluation (docs/graph.md).
#include <cstdint>
#include <string>
#include <vector>

#include <regatta/graph/graph.hpp>

namespace regatta::graph::detail {

/// Numpy broadcasting of two shapes; throws std::invalid_argument when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b);
/// For each element of `out` (row-major), the index of the element of `in` it reads when `in` is broadcast
/// to `out`.
std::vector<std::int64_t> broadcast_map(const Shape& in, const Shape& out);
std::vector<std::int64_t> transpose_map(const Shape& in, const std::vector<std::int64_t>& perm);
std::vector<std::int64_t> slice_map(const Shape& in, const Shape& out, const SliceAttrs& a);
std::vector<std::int64_t> gather_map(const Shape& in, const GatherAttrs& a);
/// Row-major strides.
std::vector<std::int64_t> strides_of(const Shape& shape);

/// `shape` split at the axes [first, end): outer × len × inner elements (softmax, the reductions and the
/// norms act along len for each (outer, inner) pair).
struct Blocks {
  std::int64_t outer = 1, len = 1, inner = 1;
};
Blocks blocks(const Shape& shape, std::int64_t first, std::int64_t end);

/// The output shape of a node of kind `op` with these attributes and input shapes. Reshape and Expand take
/// their output shape as `target` (a folded constant) and check it. Throws std::invalid_argument with a
/// short reason when the inputs do not fit the kind.
Shape output_shape(Op op, const Attributes& attributes, const std::vector<Shape>& inputs,
                   const Shape& target);

/// Number of inputs a kind takes: [min, max].
std::pair<int, int> arity(Op op);

}  // namespace regatta::graph::detail
