// safetensors: round trips through our writer, the exact float16/bfloat16 conversions (against values
// computed by hand from the IEEE formats), and files written by tests/data/make_io_fixtures.py.
#include <regatta/core/io/safetensors.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include <regatta/core/error.hpp>
#include <regatta/core/io/detail/half.hpp>

#include "test_files.hpp"

namespace regatta::io {
namespace {

using detail::bfloat16_to_double;
using detail::half_to_double;
using test::arange;
using test::valid_file;

Array make(std::vector<std::size_t> shape, std::vector<double> data) { return test::make_array(shape, data); }

TEST(ioHalf, ExactValuesOfIeeeBinary16) {
  EXPECT_EQ(half_to_double(0x3C00), 1.0);
  EXPECT_EQ(half_to_double(0x0001), std::ldexp(1.0, -24));         // smallest subnormal
  EXPECT_EQ(half_to_double(0x03FF), 1023 * std::ldexp(1.0, -24));  // largest subnormal
  EXPECT_EQ(half_to_double(0x0400), std::ldexp(1.0, -14));         // smallest normal
  EXPECT_EQ(half_to_double(0x7BFF), 65504.0);                      // largest finite
  EXPECT_EQ(half_to_double(0xC000), -2.0);
  EXPECT_EQ(half_to_double(0x3555), 1365.0 / 4096.0);  // float16(1/3)
  EXPECT_EQ(half_to_double(0x7C00), std::numeric_limits<double>::infinity());
  EXPECT_EQ(half_to_double(0xFC00), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(half_to_double(0x7E00)));
  EXPECT_TRUE(std::isnan(half_to_double(0x7C01)));
  EXPECT_TRUE(std::signbit(half_to_double(0x8000)));
  EXPECT_EQ(half_to_double(0x8000), 0.0);
}

TEST(ioHalf, EveryBinary16ValueAgreesWithTheFormula) {
  // (-1)^s * 2^(e-15) * (1 + m/1024) for normals, (-1)^s * 2^-14 * m/1024 for subnormals.
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const unsigned e = (bits >> 10) & 31, m = bits & 1023;
    if (e == 31) continue;
    const double magnitude = e == 0 ? std::ldexp(m / 1024.0, -14) : std::ldexp(1.0 + m / 1024.0, int(e) - 15);
    ASSERT_EQ(half_to_double(static_cast<std::uint16_t>(bits)), (bits & 0x8000) ? -magnitude : magnitude)
        << bits;
  }
}

TEST(ioHalf, ExactValuesOfBfloat16) {
  EXPECT_EQ(bfloat16_to_double(0x3F80), 1.0);
  EXPECT_EQ(bfloat16_to_double(0xC040), -3.0);
  EXPECT_EQ(bfloat16_to_double(0x0001), std::ldexp(1.0, -133));   // float32 subnormal 2^-149 * 2^16
  EXPECT_EQ(bfloat16_to_double(0x7F7F), std::ldexp(255.0, 120));  // largest finite: (2 - 2^-7) * 2^127
  EXPECT_EQ(bfloat16_to_double(0x7F80), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(bfloat16_to_double(0x7FC0)));
}

TEST(ioSafetensors, RoundTripFloat64AndFloat32) {
  std::map<std::string, Array> arrays{{"W", make({2, 3}, {0.1, -2, 3, 4, 5, 1e300})},
                                      {"b", make({3}, arange(3))},
                                      {"s", make({}, {7.25})},
                                      {"z", make({0, 5}, {})}};
  const auto back = parse_safetensors(encode_safetensors(arrays), "mem.safetensors");
  ASSERT_EQ(back.size(), arrays.size());
  for (const auto& [name, a] : arrays) {
    EXPECT_EQ(back.at(name).shape, a.shape) << name;
    EXPECT_EQ(back.at(name).data, a.data) << name;
    EXPECT_EQ(back.at(name).source, "mem.safetensors:" + name);
  }
  const auto f32 = parse_safetensors(encode_safetensors(arrays, DType::f32), "mem.safetensors");
  EXPECT_EQ(f32.at("W").source_dtype, DType::f32);
  EXPECT_EQ(f32.at("W").data[0], static_cast<double>(0.1f));
  EXPECT_TRUE(std::isinf(f32.at("W").data[5]));  // 1e300 overflows float32
}

TEST(ioSafetensors, HeaderIsPaddedToEightBytes) {
  const auto bytes = encode_safetensors({{"a", make({1}, {1.0})}});
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = n << 8 | std::to_integer<std::uint64_t>(bytes[static_cast<std::size_t>(i)]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 8);
}

TEST(ioSafetensors, WriteThenRead) {
  test::ScratchDir dir;
  write_safetensors(dir / "t.safetensors", {{"x", make({2}, {1, 2})}});
  EXPECT_EQ(read_safetensors(dir / "t.safetensors").at("x").data, (std::vector<double>{1, 2}));
  EXPECT_THROW(encode_safetensors({{"x", make({1}, {1})}}, DType::bf16), InputError);
  EXPECT_THROW(encode_safetensors({{"__metadata__", make({1}, {1})}}), InputError);
}

TEST(ioSafetensors, ReadsGeneratorFileWithEveryDtype) {
  const auto arrays = read_safetensors(valid_file("mixed.safetensors"));
  ASSERT_EQ(arrays.size(), 4u);  // __metadata__ is skipped
  EXPECT_EQ(arrays.at("W").shape, (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(arrays.at("W").data, arange(6));
  EXPECT_EQ(arrays.at("b").data, arange(3));
  EXPECT_EQ(arrays.at("b").source_dtype, DType::f32);
  // F16 bits 0x3C00 0x0001 0x7BFF 0xC000 0x0400 0x8000.
  const Array& h = arrays.at("h");
  EXPECT_EQ(h.source_dtype, DType::f16);
  EXPECT_EQ(h.shape, (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(h.data,
            (std::vector<double>{1.0, std::ldexp(1.0, -24), 65504.0, -2.0, std::ldexp(1.0, -14), -0.0}));
  EXPECT_TRUE(std::signbit(h.data[5]));
  // BF16 bits 0x3F80 0xC040 0x0001.
  EXPECT_EQ(arrays.at("g").data, (std::vector<double>{1.0, -3.0, std::ldexp(1.0, -133)}));
  EXPECT_EQ(arrays.at("g").source_dtype, DType::bf16);
}

TEST(ioSafetensors, ZeroSizeAndScalarTensors) {
  const auto arrays = read_safetensors(valid_file("edge_shapes.safetensors"));
  EXPECT_EQ(arrays.at("empty").shape, (std::vector<std::size_t>{0, 4}));
  EXPECT_TRUE(arrays.at("empty").data.empty());
  EXPECT_TRUE(arrays.at("scalar").shape.empty());
  EXPECT_EQ(arrays.at("scalar").data, std::vector<double>{2.5});
}

TEST(ioSafetensors, IntegerBooleanAndFloat8TensorsAreListedAndTheRestIsRead) {
  const auto arrays = read_safetensors(valid_file("int64_beside_float.safetensors"));
  ASSERT_EQ(arrays.size(), 4u);
  EXPECT_EQ(arrays.at("W").data, arange(6));
  const Array& ids = arrays.at("position_ids");  // as in BERT checkpoints
  EXPECT_EQ(ids.unconverted_dtype, "int64");
  EXPECT_EQ(ids.shape, (std::vector<std::size_t>{1, 4}));
  EXPECT_TRUE(ids.data.empty());
  EXPECT_EQ(arrays.at("mask").unconverted_dtype, "bool");
  EXPECT_EQ(arrays.at("q").unconverted_dtype, "float8_e4m3fn");
  try {
    (void)ids.matrix();
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("int64_beside_float.safetensors:position_ids: is a tensor of int64"),
              std::string::npos)
        << e.what();
  }
}

TEST(ioSafetensors, MessagesNameTensorAndProblem) {
  auto error_of = [](const std::string& name) -> std::string {
    try {
      read_safetensors(test::data_dir() / "malformed" / name);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error_of("dtype_unknown.safetensors")
                .find("tensor 'W' has dtype Q7, which is not a known safetensors dtype"),
            std::string::npos);
  EXPECT_NE(
      error_of("dtype_i64_size_mismatch.safetensors").find("has shape (2, 2) of I64, which needs 32 bytes"),
      std::string::npos);
  EXPECT_NE(
      error_of("offsets_shape_mismatch.safetensors").find("needs 32 bytes, but data_offsets [0, 48] span 48"),
      std::string::npos);
  EXPECT_NE(error_of("overlapping.safetensors").find("tensor 'B' (bytes [16, 48]) overlaps tensor 'A'"),
            std::string::npos);
  EXPECT_NE(error_of("hole.safetensors").find("bytes [16, 32) of the data buffer belong to no tensor"),
            std::string::npos);
  EXPECT_NE(error_of("duplicate_tensor.safetensors").find("names tensor 'W' twice"), std::string::npos);
  EXPECT_NE(error_of("dtype_newline_name.safetensors").find("tensor 'a\\x0ab'"), std::string::npos);
}

/// A safetensors file from a header text and a data buffer (the header padded to 8 bytes).
std::vector<std::byte> file_of(std::string header, const std::vector<double>& values = {}) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::vector<std::byte> out;
  for (std::size_t i = 0; i < 8; ++i)
    out.push_back(static_cast<std::byte>((header.size() >> (8 * i)) & 0xFF));
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  for (double v : values) {
    const auto bits = std::bit_cast<std::uint64_t>(v);
    for (std::size_t i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((bits >> (8 * i)) & 0xFF));
  }
  return out;
}

std::string parse_error(const std::vector<std::byte>& bytes) {
  try {
    parse_safetensors(bytes, "h.safetensors");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

/// n one-element F64 tensors "t0", "t1", ... holding 0, 1, ...; `duplicate` renames the last one "t0".
std::vector<std::byte> many_tensors(std::size_t n, bool duplicate = false) {
  std::string header = "{";
  for (std::size_t i = 0; i < n; ++i) {
    const std::string name = duplicate && i + 1 == n ? "t0" : "t" + std::to_string(i);
    header += (i ? ",\"" : "\"") + name + "\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[" +
              std::to_string(8 * i) + "," + std::to_string(8 * i + 8) + "]}";
  }
  return file_of(header + "}", arange(n));
}

TEST(ioSafetensors, NestingIsLimitedWhileParsing) {
  // A million levels: a recursive parser, printer or destructor would overflow the stack long before.
  const std::size_t deep = 1'000'000;
  const std::string arrays = std::string(deep, '[') + "0" + std::string(deep, ']');
  for (const std::string& header :
       {"{\"W\":{\"dtype\":\"F64\",\"shape\":" + arrays + ",\"data_offsets\":[0,8]}}",
        "{\"W\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":" + arrays + "}}",
        "{\"W\":" + arrays + "}"}) {
    const std::string message = parse_error(file_of(header, {1.0}));
    EXPECT_NE(message.find("h.safetensors: header nests arrays or objects more than 16 levels deep"),
              std::string::npos)
        << message.substr(0, 200);
  }
  // The limit leaves room: 16 levels parse (and fail on the shape's content, not the depth).
  const std::string innermost_at_16 = std::string(14, '[') + "1" + std::string(14, ']');
  const std::string message = parse_error(
      file_of("{\"W\":{\"dtype\":\"F64\",\"shape\":" + innermost_at_16 + ",\"data_offsets\":[0,8]}}", {1.0}));
  EXPECT_NE(message.find("tensor 'W' has 'shape' holding"), std::string::npos) << message;
}

TEST(ioSafetensors, ManyTensorsLoadAndTooManyAreRejected) {
  // Linear-time checks: 60,000 tensors load (a quadratic duplicate check took minutes at 10^5).
  const std::size_t n = 60'000;
  const auto arrays = parse_safetensors(many_tensors(n), "many.safetensors");
  ASSERT_EQ(arrays.size(), n);
  EXPECT_EQ(arrays.at("t0").data, std::vector<double>{0.0});
  EXPECT_EQ(arrays.at("t59999").data, std::vector<double>{59999.0});
  EXPECT_NE(parse_error(many_tensors(n, true)).find("names tensor 't0' twice"), std::string::npos);
  EXPECT_NE(parse_error(many_tensors(100'000)).find("header lists more than the limit of 65536 tensors"),
            std::string::npos);
}

TEST(ioSafetensors, RankIsLimited) {
  std::string shape = "[1";
  for (int i = 1; i < 65; ++i) shape += ",1";
  const std::string message = parse_error(
      file_of("{\"W\":{\"dtype\":\"F64\",\"shape\":" + shape + "],\"data_offsets\":[0,8]}}", {1.0}));
  EXPECT_NE(message.find("tensor 'W' has a shape of 65 dimensions, more than the limit of 64"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace regatta::io
