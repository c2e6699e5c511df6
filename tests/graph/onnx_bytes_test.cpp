// The ONNX import from memory (import_onnx_bytes, what the Python module's torch export uses): the same graph
// as the file import, bit for bit in its constants and outputs, and the same one-line refusals, named by the
// caller's source instead of a path (docs/graph.md, "ONNX import").
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <regatta/core/error.hpp>
#include <regatta/core/io/file_bytes.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/onnx_import.hpp>

namespace {

using namespace regatta;
using namespace regatta::graph;

const std::string dir = std::string(REGATTA_TEST_DATA_DIR) + "/onnx/";

std::vector<std::byte> bytes_of(const std::string& file) { return io::read_file_bytes(dir + file); }

Tensor<double> input_of(const std::string& name) {
  const io::Array x = io::read_npy(dir + name + ".input.npy");
  return Tensor<double>{Shape(x.shape.begin(), x.shape.end()), x.data};
}

class BytesImport : public ::testing::TestWithParam<std::string> {};

// Two independent routes to the graph: the file reader, and the caller's own read of the file handed over as
// bytes. Everything but the source name agrees exactly.
TEST_P(BytesImport, SameGraphAsTheFile) {
  const std::string name = GetParam();
  const Graph from_file = import_onnx(dir + name + ".onnx");
  const Graph from_bytes = import_onnx_bytes(bytes_of(name + ".onnx"), "<bytes of " + name + ">");
  EXPECT_EQ(from_bytes.source, "<bytes of " + name + ">");
  EXPECT_EQ(from_file.source, dir + name + ".onnx");
  EXPECT_EQ(from_bytes.opset, from_file.opset);
  EXPECT_EQ(from_bytes.inputs, from_file.inputs);
  EXPECT_EQ(from_bytes.outputs, from_file.outputs);
  EXPECT_EQ(from_bytes.folded, from_file.folded);
  ASSERT_EQ(from_bytes.nodes.size(), from_file.nodes.size());
  for (std::size_t k = 0; k < from_file.nodes.size(); ++k) {
    EXPECT_EQ(from_bytes.nodes[k].op, from_file.nodes[k].op);
    EXPECT_EQ(from_bytes.nodes[k].inputs, from_file.nodes[k].inputs);
    EXPECT_EQ(from_bytes.nodes[k].output, from_file.nodes[k].output);
  }
  ASSERT_EQ(from_bytes.values.size(), from_file.values.size());
  for (std::size_t k = 0; k < from_file.values.size(); ++k) {
    EXPECT_EQ(from_bytes.values[k].shape, from_file.values[k].shape);
    EXPECT_EQ(from_bytes.values[k].data, from_file.values[k].data);  // constants bit for bit
  }
  const std::vector<Tensor<double>> x{input_of(name)};
  EXPECT_EQ(evaluate(from_bytes, x)[0].data, evaluate(from_file, x)[0].data);
  // ... and the logits are torch's (the file route is checked against them in onnx_models_test.cpp).
  const io::Array logits = io::read_npy(dir + name + ".logits.npy");
  const auto out = evaluate(from_bytes, x)[0].data;
  ASSERT_EQ(out.size(), logits.data.size());
  for (std::size_t k = 0; k < out.size(); ++k) EXPECT_NEAR(out[k], logits.data[k], 1e-12) << k;
}

INSTANTIATE_TEST_SUITE_P(Torch, BytesImport,
                         ::testing::Values("encoder_postnorm_gelu", "gpt_causal", "vit_vnncomp_like",
                                           "vit_torchvision"));

// The refusals of the file route, one line each, named by the source the caller gave.
void expect_refused(const std::vector<std::byte>& bytes, const std::string& part,
                    const OnnxLimits& limits = {}) {
  const std::string source = "<torch export of Thing>";
  try {
    import_onnx_bytes(bytes, source, limits);
    ADD_FAILURE() << part << ": accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(source, 0), 0u) << what;  // the message starts with the source
    EXPECT_NE(what.find(part), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_EQ(what.find(dir), std::string::npos) << what;  // no path: the bytes have none
  }
}

TEST(OnnxBytes, RefusalsNameTheSource) {
  expect_refused(bytes_of("unsupported_cos.onnx"), "Cos (node 'weird_cos')");
  expect_refused(bytes_of("nan_initializer.onnx"), "NaN");
  expect_refused(bytes_of("external_data.onnx"), "external data");
  expect_refused(bytes_of("opset8.onnx"), "opset 8");
  expect_refused(bytes_of("symbolic_inner.onnx"), "symbolic or empty dimension 'n'");
  expect_refused(bytes_of("truncated.onnx"), "protobuf");
  expect_refused(bytes_of("garbage.onnx"), "protobuf");
  expect_refused({}, "protobuf");  // no bytes at all
  OnnxLimits small;
  small.max_file_bytes = 1000;
  expect_refused(bytes_of("gpt_causal.onnx"), "over the limit of 1000", small);
}

TEST(OnnxBytes, TheCallersBufferIsOnlyRead) {
  const std::vector<std::byte> bytes = bytes_of("mlp_tiny.onnx");
  const std::vector<std::byte> copy = bytes;
  const Graph g = import_onnx_bytes(bytes, "<mlp>");
  EXPECT_EQ(bytes, copy);
  const auto out = evaluate<double>(g, {Tensor<double>{{1, 2}, {0.5, -0.25}}});
  // fc1: (0.25, 1.25, -0.375) -> relu (0.25, 1.25, 0) -> fc2: (0.25 - 1.25, -0.125 + 1.25 + 0.25)
  EXPECT_EQ(out[0].data, (std::vector<double>{-1.0, 1.375}));
}

}  // namespace
