#pragma once
// A labelled test set for a whole model (regatta certify, the report's robustness section): TEST.npz with
// `images` (N, H, W) or (N, C, H, W) matching the model and integer (or integral float) `labels` (N,).
#include <string>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/model.hpp>

namespace regatta::cli {

struct TestSet {
  std::vector<Vector<double>> images;  ///< flattened in the model's input order
  std::vector<int> labels;
};

/// The first `limit` inputs (all when limit <= 0). Throws InputError naming the member for a wrong image
/// shape, an empty batch, a non-finite pixel, labels of the wrong shape or out of the model's classes.
TestSet read_test_set(const std::string& path, const operators::Model& m, long limit);

}  // namespace regatta::cli
