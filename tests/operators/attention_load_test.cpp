// A PyTorch / Hugging Face weight round trip through load_layer (in_proj and separate projections, a prefix
// selecting one layer, BERT and Llama names, an npz archive) and the InputError cases of the layer loader.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <regatta/core/error.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/core/io/safetensors.hpp>
#include <regatta/operators/layer.hpp>
#include <string>
#include <vector>

#include "attention_naive.hpp"

namespace regatta::operators {
namespace {

using namespace attention_test;

struct TorchTensors {
  Matrix<double> Wq, Wk, Wv, Wo;  // out×in
  Vector<double> bq, bk, bv, bo;
};

/// The inverse of the README mapping: W_q[h·d_h:(h+1)·d_h, :] = WQ[h]ᵀ, out_proj.weight = WOᵀ.
TorchTensors to_torch(const AttentionLayer& L) {
  const Eigen::Index dh = L.head_dim, dv = L.value_dim;
  TorchTensors t;
  t.Wq.resize(L.heads * dh, L.d);
  t.Wk.resize(L.heads * dh, L.d);
  t.Wv.resize(L.heads * dv, L.d);
  t.bq.resize(L.heads * dh);
  t.bk.resize(L.heads * dh);
  t.bv.resize(L.heads * dv);
  for (int h = 0; h < L.heads; ++h) {
    t.Wq.middleRows(h * dh, dh) = L.WQ[h].transpose();
    t.Wk.middleRows(h * dh, dh) = L.WK[h].transpose();
    t.Wv.middleRows(h * dv, dv) = L.WV[h].transpose();
    t.bq.segment(h * dh, dh) = L.bQ[h];
    t.bk.segment(h * dh, dh) = L.bK[h];
    t.bv.segment(h * dv, dv) = L.bV[h];
  }
  t.Wo = L.WO.transpose();
  t.bo = L.bO;
  return t;
}

io::Array vec_array(const Vector<double>& v, const std::string& name) {
  io::Array a;
  a.shape = {std::size_t(v.size())};
  a.data.assign(v.data(), v.data() + v.size());
  a.source = name;
  return a;
}

/// CRC-32 (IEEE, reflected 0xEDB88320) of a byte range, as zip members carry.
std::uint32_t crc32(const std::vector<std::byte>& bytes) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::byte b : bytes) {
    c ^= std::uint32_t(b);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

/// A minimal np.savez equivalent: a zip archive of stored (uncompressed) NAME.npy members.
void write_npz(const std::filesystem::path& path, const std::map<std::string, io::Array>& arrays) {
  std::vector<std::byte> out, central;
  const auto put = [](std::vector<std::byte>& v, std::uint64_t x, int bytes) {
    for (int k = 0; k < bytes; ++k) v.push_back(std::byte((x >> (8 * k)) & 0xFF));
  };
  const auto put_name = [](std::vector<std::byte>& v, const std::string& name) {
    for (char ch : name) v.push_back(std::byte(ch));
  };
  for (const auto& [name, array] : arrays) {
    const std::vector<std::byte> npy = io::encode_npy(array);
    const std::string member = name + ".npy";
    const std::uint32_t crc = crc32(npy), offset = std::uint32_t(out.size()),
                        size = std::uint32_t(npy.size());
    put(out, 0x04034b50, 4), put(out, 20, 2), put(out, 0, 2), put(out, 0, 2), put(out, 0, 2), put(out, 0, 2);
    put(out, crc, 4), put(out, size, 4), put(out, size, 4), put(out, member.size(), 2), put(out, 0, 2);
    put_name(out, member);
    out.insert(out.end(), npy.begin(), npy.end());
    put(central, 0x02014b50, 4), put(central, 20, 2), put(central, 20, 2), put(central, 0, 2),
        put(central, 0, 2);
    put(central, 0, 2), put(central, 0, 2), put(central, crc, 4), put(central, size, 4),
        put(central, size, 4);
    put(central, member.size(), 2), put(central, 0, 2), put(central, 0, 2), put(central, 0, 2),
        put(central, 0, 2);
    put(central, 0, 4), put(central, offset, 4);
    put_name(central, member);
  }
  const std::uint32_t central_offset = std::uint32_t(out.size());
  out.insert(out.end(), central.begin(), central.end());
  put(out, 0x06054b50, 4), put(out, 0, 2), put(out, 0, 2), put(out, arrays.size(), 2),
      put(out, arrays.size(), 2);
  put(out, central.size(), 4), put(out, central_offset, 4), put(out, 0, 2);
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(out.data()), std::streamsize(out.size()));
}

class LoadLayer : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("regatta_attention_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    RandomLayerSpec spec;
    spec.d = 8;
    spec.heads = 2;
    spec.seed = 21;
    spec.biases = true;
    layer_ = random_layer(spec);
    torch_ = to_torch(layer_);
    X_ = gaussian(6, 8, 22);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::map<std::string, io::Array> in_proj_tensors(const std::string& prefix) const {
    Matrix<double> in_proj(3 * torch_.Wq.rows(), torch_.Wq.cols());
    in_proj << torch_.Wq, torch_.Wk, torch_.Wv;
    Vector<double> in_bias(3 * torch_.bq.size());
    in_bias << torch_.bq, torch_.bk, torch_.bv;
    return {{prefix + "in_proj_weight", io::from_matrix(in_proj)},
            {prefix + "in_proj_bias", vec_array(in_bias, "in_proj_bias")},
            {prefix + "out_proj.weight", io::from_matrix(torch_.Wo)},
            {prefix + "out_proj.bias", vec_array(torch_.bo, "out_proj.bias")}};
  }

  std::map<std::string, io::Array> hf_bert_tensors(const std::string& prefix) const {
    return {{prefix + "self.query.weight", io::from_matrix(torch_.Wq)},
            {prefix + "self.query.bias", vec_array(torch_.bq, "q")},
            {prefix + "self.key.weight", io::from_matrix(torch_.Wk)},
            {prefix + "self.key.bias", vec_array(torch_.bk, "k")},
            {prefix + "self.value.weight", io::from_matrix(torch_.Wv)},
            {prefix + "self.value.bias", vec_array(torch_.bv, "v")},
            {prefix + "output.dense.weight", io::from_matrix(torch_.Wo)},
            {prefix + "output.dense.bias", vec_array(torch_.bo, "o")}};
  }

  std::filesystem::path write(const std::string& name,
                              const std::map<std::string, io::Array>& tensors) const {
    const std::filesystem::path p = dir_ / name;
    io::write_safetensors(p, tensors);
    return p;
  }

  void expect_same_output(const AttentionLayer& loaded) const {
    for (bool causal : {false, true}) {
      const AttentionOptions o{causal, false};
      const Matrix<double> expected = attend(layer_, X_, o);
      EXPECT_LE(max_abs_diff(attend(loaded, X_, o), expected), tolerance(expected));
    }
  }

  std::filesystem::path dir_;
  AttentionLayer layer_;
  TorchTensors torch_;
  Matrix<double> X_;
};

TEST_F(LoadLayer, PyTorchInProjRoundTripReproducesTheLayer) {
  const AttentionLayer loaded = load_layer(write("mha.safetensors", in_proj_tensors("")), 2);
  EXPECT_EQ(loaded.d, 8);
  EXPECT_EQ(loaded.head_dim, 4);
  for (int h = 0; h < 2; ++h) EXPECT_EQ(loaded.WQ[h], layer_.WQ[h]);
  EXPECT_EQ(loaded.WO, layer_.WO);
  expect_same_output(loaded);
}

TEST_F(LoadLayer, PyTorchSeparateProjectionsAndPrefixSelectsOneLayer) {
  auto tensors = in_proj_tensors("decoder.layers.1.self_attn.");
  for (auto& [name, a] :
       in_proj_tensors("decoder.layers.0.self_attn.")) {  // a decoy layer with other weights
    for (double& x : a.data) x *= 2;
    tensors.emplace(name, a);
  }
  const auto path = write("stack.safetensors", tensors);
  expect_same_output(load_layer(path, 2, AttentionKind::dot, "decoder.layers.1."));
  EXPECT_THROW(load_layer(path, 2), InputError);  // ambiguous without a prefix

  std::map<std::string, io::Array> separate = {
      {"q_proj_weight", io::from_matrix(torch_.Wq)}, {"k_proj_weight", io::from_matrix(torch_.Wk)},
      {"v_proj_weight", io::from_matrix(torch_.Wv)}, {"out_proj.weight", io::from_matrix(torch_.Wo)},
      {"out_proj.bias", vec_array(torch_.bo, "bo")}, {"in_proj_bias", in_proj_tensors("")["in_proj_bias"]}};
  expect_same_output(load_layer(write("separate.safetensors", separate), 2));
}

TEST_F(LoadLayer, HuggingFaceBertAndLlamaNames) {
  auto bert = hf_bert_tensors("encoder.layer.3.attention.");
  auto other = hf_bert_tensors("encoder.layer.4.attention.");
  for (auto& [name, a] : other) {
    for (double& x : a.data) x = -x;
    bert.emplace(name, a);
  }
  expect_same_output(
      load_layer(write("bert.safetensors", bert), 2, AttentionKind::dot, "encoder.layer.3.attention."));

  const std::map<std::string, io::Array> llama = {
      {"model.layers.0.self_attn.q_proj.weight", io::from_matrix(torch_.Wq)},
      {"model.layers.0.self_attn.q_proj.bias", vec_array(torch_.bq, "q")},
      {"model.layers.0.self_attn.k_proj.weight", io::from_matrix(torch_.Wk)},
      {"model.layers.0.self_attn.k_proj.bias", vec_array(torch_.bk, "k")},
      {"model.layers.0.self_attn.v_proj.weight", io::from_matrix(torch_.Wv)},
      {"model.layers.0.self_attn.v_proj.bias", vec_array(torch_.bv, "v")},
      {"model.layers.0.self_attn.o_proj.weight", io::from_matrix(torch_.Wo)},
      {"model.layers.0.self_attn.o_proj.bias", vec_array(torch_.bo, "o")}};
  expect_same_output(load_layer(write("llama.safetensors", llama), 2, AttentionKind::dot, "model.layers.0.",
                                OutputProjection::from_file, RotaryStatement::none()));
}

TEST_F(LoadLayer, InputErrorsNameFileAndTensor) {
  auto missing = in_proj_tensors("");
  missing.erase("out_proj.weight");
  const auto p1 = write("missing.safetensors", missing);
  expect_input_error([&] { load_layer(p1, 2); }, {"missing.safetensors", "out_proj.weight", "missing"});

  auto wrong = in_proj_tensors("");
  wrong["out_proj.weight"] = io::from_matrix(Matrix<double>::Zero(8, 7));
  const auto p2 = write("wrong.safetensors", wrong);
  expect_input_error([&] { load_layer(p2, 2); }, {"wrong.safetensors", "out_proj.weight", "(8, 7)"});

  auto bad_bias = in_proj_tensors("");
  bad_bias["in_proj_bias"] = vec_array(Vector<double>::Zero(5), "b");
  const auto p3 = write("bias.safetensors", bad_bias);
  expect_input_error([&] { load_layer(p3, 2); }, {"bias.safetensors", "in_proj_bias"});

  const auto p4 = write("heads.safetensors", in_proj_tensors(""));
  expect_input_error([&] { load_layer(p4, 3); }, {"heads.safetensors", "does not divide"});

  auto nan = in_proj_tensors("");
  nan["in_proj_weight"].data[5] = std::numeric_limits<double>::quiet_NaN();
  const auto p5 = write("nan.safetensors", nan);
  expect_input_error([&] { load_layer(p5, 2); }, {"nan.safetensors", "in_proj_weight", "NaN"});

  expect_input_error([&] { load_layer(p4, 2, AttentionKind::dot, "nothing."); },
                     {"heads.safetensors", "prefix"});
  const auto p6 =
      write("empty_roles.safetensors", {{"unrelated.weight", io::from_matrix(Matrix<double>::Ones(2, 2))}});
  expect_input_error([&] { load_layer(p6, 2); }, {"empty_roles.safetensors", "missing"});
  expect_input_error([&] { load_layer(dir_ / "layer.pt", 2); }, {"layer.pt"});

  expect_input_error([&] { random_layer({.d = 10, .heads = 3}); }, {"heads", "does not divide"});
  AttentionLayer nan_layer = layer_;
  nan_layer.WV[1](2, 3) = std::numeric_limits<double>::quiet_NaN();
  expect_input_error([&] { attend(nan_layer, X_); }, {"WV[1]"});
  expect_input_error([&] { attend(layer_, Matrix<double>::Zero(4, 7)); }, {"X"});
}

TEST_F(LoadLayer, NpzArchiveInPyTorchNaming) {
  const std::filesystem::path p = dir_ / "mha.npz";
  write_npz(p, in_proj_tensors("attn."));
  expect_same_output(load_layer(p, 2, AttentionKind::dot, "attn."));
  auto missing = in_proj_tensors("");
  missing.erase("in_proj_weight");
  const std::filesystem::path q = dir_ / "missing.npz";
  write_npz(q, missing);
  expect_input_error([&] { load_layer(q, 2); }, {"missing.npz", "missing"});
}

}  // namespace
}  // namespace regatta::operators
