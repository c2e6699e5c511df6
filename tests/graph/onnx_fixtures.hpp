#pragma once
// The torch-exported ONNX fixtures of tests/data/onnx (make_onnx_models.py, make_inf_mask_models.py) as the
// graph tests read them: a model with its stored input and torch's float64 logits, and the check that a bad
// file is refused with one line naming the file and the problem.
#include <gtest/gtest.h>

#include <string>

#include <regatta/core/error.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/graph/onnx_import.hpp>

namespace regatta::graph::onnx_fixtures {

inline const std::string dir = std::string(REGATTA_TEST_DATA_DIR) + "/onnx/";

/// NAME.onnx imported, NAME.input.npy and torch's NAME.logits.npy beside it.
struct Case {
  Graph graph;
  Tensor<double> input;
  io::Array logits;
};

inline Case load(const std::string& name) {
  Case c{import_onnx(dir + name + ".onnx"), {}, io::read_npy(dir + name + ".logits.npy")};
  const io::Array x = io::read_npy(dir + name + ".input.npy");
  c.input.shape.assign(x.shape.begin(), x.shape.end());
  c.input.data = x.data;
  return c;
}

/// Importing `file` throws one InputError line that names the file and contains `part`.
inline void expect_refused(const std::string& file, const std::string& part) {
  try {
    import_onnx(dir + file);
    ADD_FAILURE() << file << " was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(file), std::string::npos) << what;
    EXPECT_NE(what.find(part), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

}  // namespace regatta::graph::onnx_fixtures
