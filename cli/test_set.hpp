#pragma once
// A labelled test set for a whole model (regatta certify, the report's robustness section): TEST.npz with
// integer (or integral float) `labels` (N,) and, for an image model, `images` (N, H, W) or (N, C, H, W)
// matching it; for a text model, `tokens` (N, n): integer token ids in [0, vocab), 1 <= n <= context.
#include <string>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/operators/model.hpp>

namespace regatta::cli {

struct TestSet {
  /// The model's inputs: flattened images in the model's input order, or for a text model the flattened
  /// n×width token-embedding matrices (the rows of the embedding table for the ids).
  std::vector<Vector<double>> images;
  std::vector<int> labels;
};

/// The first `limit` inputs (all when limit <= 0); every input and label is checked first. Throws InputError
/// naming the member for a wrong image or token shape, an empty batch, a non-finite pixel, a token id that
/// is not an integer of the vocabulary, labels of the wrong shape or out of the model's classes.
TestSet read_test_set(const std::string& path, const operators::Model& m, long limit);

}  // namespace regatta::cli
