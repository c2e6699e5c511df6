#pragma once
// The ViT fixture of the model tests (model_test.cpp, tangent_region_test.cpp, global_bound_test.cpp,
// input_robustness_test.cpp): tests/data/vit_digits holds a ViT trained by train.py there, in timm naming,
// with torch's float64 logits of the 450 held-out images.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/io/safetensors.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_robustness.hpp>
#include <string>

#include "support/model_gradient.hpp"
#include "support/tolerance.hpp"

namespace regatta::operators::vit_fixture {

// The command line's thread setting (core/resources.hpp): Eigen's products on one thread. The passes'
// matrices are small, and on a loaded two-core machine a parallel GEMM's synchronisation made these tests
// several times slower.
inline const ThreadSetting kThreads = configure_threads();

/// |ours − torch| ≤ kTorchTolerance·max(1, ‖torch‖∞) per logit. Both sides evaluate the same float64 network:
/// the patch embedding, two blocks (LayerNorms over 32 features, 17-key softmaxes, MLPs of width 64) and the
/// head are a chain of ≲ 1024 rounded operations; c = 4 for the two sides' different orders (2) and the
/// LayerNorms' cancelling means (2). A wrong weight mapping gives O(1) errors.
inline const double kTorchTolerance = testing::rounding_bound<double>(4, 1024);

inline const std::filesystem::path& fixture() {
  static const std::filesystem::path dir = std::filesystem::path(REGATTA_TEST_DATA_DIR) / "vit_digits";
  return dir;
}

struct TestSet {
  io::Array images, labels, logits;
};

inline TestSet read_test_set() {
  const auto path = fixture() / "test_set.npz";
  return {io::read_npz_member(path, "images"),
          io::read_npz_member(path, "labels", io::default_max_file_bytes, io::NonFloat::integers),
          io::read_npz_member(path, "logits")};
}

inline Vector<double> image(const TestSet& t, std::size_t i) {
  const std::size_t n = t.images.shape[1] * t.images.shape[2];
  return Eigen::Map<const Vector<double>>(t.images.data.data() + i * n, Eigen::Index(n));
}

}  // namespace regatta::operators::vit_fixture
