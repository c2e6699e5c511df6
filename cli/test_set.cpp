// Labelled test sets for whole models (see test_set.hpp).
#include "test_set.hpp"

#include <cmath>
#include <regatta/core/error.hpp>
#include <regatta/core/io/npz.hpp>

#include "numbers.hpp"

namespace regatta::cli {

namespace {

/// Integer labels of shape (n,) within the model's classes.
void check_labels(const io::Array& labels, std::size_t n, const std::string& what,
                  const operators::Model& m) {
  if (labels.shape != std::vector<std::size_t>{n})
    throw InputError(labels.source, "shape " + io::shape_repr(labels.shape) + " does not match the " +
                                        std::to_string(n) + " " + what);
  for (std::size_t i = 0; i < n; ++i) {
    const double y = labels.data[i];
    if (!(y >= 0 && y < m.classes && y == std::floor(y)))
      throw InputError(labels.source, "label " + number(y) + " at index " + std::to_string(i) +
                                          " is not a class of the model (0.." +
                                          std::to_string(m.classes - 1) + ")");
  }
}

/// Text models: `tokens` (N, n) integer ids, 1 <= n <= context, each in [0, vocab).
TestSet read_token_set(const std::string& path, const operators::Model& m, long limit) {
  const io::Array tokens =
      io::read_npz_member(path, "tokens", io::default_max_file_bytes, io::NonFloat::integers);
  const io::Array labels =
      io::read_npz_member(path, "labels", io::default_max_file_bytes, io::NonFloat::integers);
  io::require_converted(tokens);
  io::require_converted(labels);
  if (tokens.shape.size() != 2 || tokens.shape[1] < 1 || tokens.shape[1] > std::size_t(m.context))
    throw InputError(tokens.source, "shape " + io::shape_repr(tokens.shape) +
                                        " is not a batch (N, n) of token sequences with 1 <= n <= " +
                                        std::to_string(m.context) + " (the model's positions)");
  const std::size_t n = tokens.shape[0], length = tokens.shape[1];
  if (n == 0) throw InputError(tokens.source, "the batch is empty");
  io::require_finite(tokens);
  for (std::size_t k = 0; k < tokens.data.size(); ++k) {
    const double id = tokens.data[k];
    if (!(id >= 0 && id < m.vocab && id == std::floor(id)))
      throw InputError(tokens.source, "token " + number(id) + " at (" + std::to_string(k / length) + ", " +
                                          std::to_string(k % length) + ") is not in the vocabulary (0.." +
                                          std::to_string(m.vocab - 1) + ")");
  }
  check_labels(labels, n, "token sequences", m);
  TestSet t;
  const std::size_t count = limit > 0 ? std::min<std::size_t>(n, std::size_t(limit)) : n;
  for (std::size_t i = 0; i < count; ++i) {
    std::vector<int> ids(length);
    for (std::size_t k = 0; k < length; ++k) ids[k] = int(tokens.data[i * length + k]);
    t.images.push_back(m.embed_tokens(ids));
    t.labels.push_back(int(labels.data[i]));
  }
  return t;
}

}  // namespace

TestSet read_test_set(const std::string& path, const operators::Model& m, long limit) {
  if (m.text()) return read_token_set(path, m, limit);
  const io::Array images = io::read_npz_member(path, "images");
  const io::Array labels =
      io::read_npz_member(path, "labels", io::default_max_file_bytes, io::NonFloat::integers);
  io::require_converted(images);
  io::require_converted(labels);
  const std::size_t n = images.shape.empty() ? 0 : images.shape[0];
  const std::vector<std::size_t> per(images.shape.begin() + (images.shape.empty() ? 0 : 1),
                                     images.shape.end());
  const std::size_t S = std::size_t(m.image_size), C = std::size_t(m.channels);
  const bool ok = (per.size() == 2 && C == 1 && per[0] == S && per[1] == S) ||
                  (per.size() == 3 && per[0] == C && per[1] == S && per[2] == S);
  if (!ok)
    throw InputError(images.source, "shape " + io::shape_repr(images.shape) + " is not a batch of " +
                                        (C == 1 ? "(N, " : "(N, " + std::to_string(C) + ", ") +
                                        std::to_string(S) + ", " + std::to_string(S) +
                                        ") images for this model");
  if (n == 0) throw InputError(images.source, "the batch is empty");
  io::require_finite(images);
  check_labels(labels, n, "images", m);
  TestSet t;
  const std::size_t count = limit > 0 ? std::min<std::size_t>(n, std::size_t(limit)) : n;
  const std::size_t size = std::size_t(m.input_size());
  for (std::size_t i = 0; i < count; ++i) {
    t.images.emplace_back(
        Eigen::Map<const Vector<double>>(images.data.data() + i * size, Eigen::Index(size)));
    t.labels.push_back(int(labels.data[i]));
  }
  return t;
}

}  // namespace regatta::cli
