// .npy reading and writing: round trips through our encoder, files written by numpy (tests/data/valid,
// made by tests/data/make_io_fixtures.py), byte-for-byte agreement with np.save, and targeted rejections.
#include <regatta/core/io/npy.hpp>

#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include <regatta/core/error.hpp>
#include <regatta/core/io/file_bytes.hpp>

#include "test_files.hpp"

namespace regatta::io {
namespace {

using test::arange;
using test::valid_file;

Array make(std::vector<std::size_t> shape, std::vector<double> data) { return test::make_array(shape, data); }

std::string header_text(const std::vector<std::byte>& file) {
  const std::size_t length = std::to_integer<std::size_t>(file[8]) | std::to_integer<std::size_t>(file[9])
                                                                         << 8;
  return std::string(reinterpret_cast<const char*>(file.data()) + 10, length);
}

std::vector<std::byte> with_header(const std::string& header, std::size_t data_bytes) {
  std::vector<std::byte> out;
  for (char c : std::string("\x93NUMPY\x01\x00", 8)) out.push_back(std::byte(c));
  out.push_back(std::byte(header.size() & 0xFF));
  out.push_back(std::byte(header.size() >> 8));
  for (char c : header) out.push_back(std::byte(c));
  out.resize(out.size() + data_bytes);
  return out;
}

std::string error_of(const std::vector<std::byte>& bytes) {
  try {
    parse_npy(bytes, "x.npy");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ioNpy, RoundTripFloat64KeepsEveryBit) {
  const double tiny = std::numeric_limits<double>::denorm_min();
  const Array a = make({2, 3}, {1.0 / 3.0, -0.0, tiny, 1e308, -2.5, std::numeric_limits<double>::infinity()});
  const Array b = parse_npy(encode_npy(a), "mem.npy");
  EXPECT_EQ(b.shape, a.shape);
  ASSERT_EQ(b.data.size(), a.data.size());
  for (std::size_t i = 0; i < a.data.size(); ++i)
    EXPECT_EQ(std::bit_cast<std::uint64_t>(b.data[i]), std::bit_cast<std::uint64_t>(a.data[i]));
  EXPECT_EQ(b.source_dtype, DType::f64);
  EXPECT_EQ(b.source, "mem.npy");
}

TEST(ioNpy, RoundTripFloat32RoundsToNearestFloat) {
  const Array a = make({4}, {1.0 / 3.0, 0.1, 16777217.0, -7.0});
  const Array b = parse_npy(encode_npy(a, DType::f32), "mem.npy");
  EXPECT_EQ(b.source_dtype, DType::f32);
  for (std::size_t i = 0; i < a.data.size(); ++i)
    EXPECT_EQ(b.data[i], static_cast<double>(static_cast<float>(a.data[i])));
}

TEST(ioNpy, RoundTripsAnyRankIncludingScalarsAndEmpty) {
  for (const auto& shape :
       std::vector<std::vector<std::size_t>>{{}, {7}, {2, 3, 4}, {0}, {0, 3}, {3, 0, 2}, {1, 1, 1, 1, 2}}) {
    std::size_t n = 1;
    for (auto d : shape) n *= d;
    const Array a = make(shape, arange(n));
    const Array b = parse_npy(encode_npy(a), "mem.npy");
    EXPECT_EQ(b.shape, shape) << shape_repr(shape);
    EXPECT_EQ(b.data, a.data) << shape_repr(shape);
  }
}

TEST(ioNpy, HeaderIsPaddedToSixtyFourBytesWithTrailingNewline) {
  for (const auto& shape :
       std::vector<std::vector<std::size_t>>{{}, {5}, {3, 4}, {123456789, 0}, {1, 2, 3, 4, 5, 6, 7, 8, 9}}) {
    std::size_t n = 1;
    for (auto d : shape) n *= d;
    const auto file = encode_npy(make(shape, arange(n)));
    const std::string header = header_text(file);
    EXPECT_EQ((10 + header.size()) % 64, 0u) << shape_repr(shape);
    EXPECT_EQ(header.back(), '\n');
    EXPECT_EQ(file.size(), 10 + header.size() + 8 * n);
  }
}

TEST(ioNpy, HugeHeadersUseFormatVersion2) {
  // A rank-22000 shape of ones has a header longer than 65535 bytes: numpy then writes version 2.0.
  const Array a = make(std::vector<std::size_t>(22000, 1), {4.0});
  const auto file = encode_npy(a);
  EXPECT_EQ(std::to_integer<int>(file[6]), 2);
  const std::size_t length = std::to_integer<std::size_t>(file[8]) |
                             std::to_integer<std::size_t>(file[9]) << 8 |
                             std::to_integer<std::size_t>(file[10]) << 16;
  EXPECT_GT(length, 0xFFFFu);
  EXPECT_EQ((12 + length) % 64, 0u);
  const Array b = parse_npy(file, "big_header.npy");
  EXPECT_EQ(b.shape, a.shape);
  EXPECT_EQ(b.data, a.data);
}

TEST(ioNpy, EncoderMatchesNumpyByteForByte) {
  // valid/arange_3x4_f64.npy and _f32.npy were written by np.save(np.arange(12.).reshape(3, 4)[.astype(f4)]).
  const Array a = make({3, 4}, arange(12));
  EXPECT_EQ(encode_npy(a, DType::f64), test::raw_bytes(valid_file("arange_3x4_f64.npy")));
  EXPECT_EQ(encode_npy(a, DType::f32), test::raw_bytes(valid_file("arange_3x4_f32.npy")));
  EXPECT_EQ(encode_npy(make({5}, arange(5))), test::raw_bytes(valid_file("vector_5_f64.npy")));
  EXPECT_EQ(encode_npy(make({}, {3.5})), test::raw_bytes(valid_file("scalar_f64.npy")));
  EXPECT_EQ(encode_npy(make({0, 3}, {})), test::raw_bytes(valid_file("empty_0x3_f64.npy")));
}

TEST(ioNpy, ReadsFilesWrittenByNumpy) {
  const Array a = read_npy(valid_file("arange_3x4_f64.npy"));
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{3, 4}));
  EXPECT_EQ(a.data, arange(12));
  EXPECT_EQ(a.source_dtype, DType::f64);
  EXPECT_NE(a.source.find("arange_3x4_f64.npy"), std::string::npos);

  const Array f = read_npy(valid_file("arange_3x4_f32.npy"));
  EXPECT_EQ(f.data, arange(12));
  EXPECT_EQ(f.source_dtype, DType::f32);

  const Array s = read_npy(valid_file("scalar_f64.npy"));
  EXPECT_TRUE(s.shape.empty());
  EXPECT_EQ(s.data, std::vector<double>{3.5});
  EXPECT_EQ(s.size(), 1u);

  const Array e = read_npy(valid_file("empty_0x3_f64.npy"));
  EXPECT_EQ(e.shape, (std::vector<std::size_t>{0, 3}));
  EXPECT_TRUE(e.data.empty());
  EXPECT_EQ(e.matrix().rows(), 0);
  EXPECT_EQ(e.matrix().cols(), 3);
}

TEST(ioNpy, FortranOrderIsConvertedToCOrder) {
  // np.asfortranarray(np.arange(24.).reshape(2, 3, 4)): element (i, j, k) equals 12 i + 4 j + k.
  const Array a = read_npy(valid_file("fortran_2x3x4_f64.npy"));
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{2, 3, 4}));
  EXPECT_EQ(a.data, arange(24));
  const Array b = read_npy(valid_file("fortran_3x2_f32.npy"));
  EXPECT_EQ(b.shape, (std::vector<std::size_t>{3, 2}));
  EXPECT_EQ(b.data, arange(6));
  const Matrix<double> m = b.matrix();
  EXPECT_EQ(m(2, 1), 5.0);
  EXPECT_EQ(m(1, 0), 2.0);
}

TEST(ioNpy, ReadsFormatVersions2And3AndOldHeaders) {
  const Array v2 = read_npy(valid_file("version2_arange_5_f64.npy"));
  EXPECT_EQ(v2.data, arange(5));
  const Array v3 = read_npy(valid_file("version3_arange_5_f32.npy"));
  EXPECT_EQ(v3.data, arange(5));
  EXPECT_EQ(read_npy(valid_file("python2_long_shape.npy")).data, arange(3));
  const Array compact = read_npy(valid_file("compact_header.npy"));
  EXPECT_EQ(compact.data, arange(2));
  EXPECT_EQ(compact.source_dtype, DType::f32);
}

TEST(ioNpy, Float16IsConvertedExactly) {
  // np.array([[0, 2**-24, 65504], [-1.5, 1/3, 2**-14]], dtype=float16); float16(1/3) = 0x3555 = 1365 * 2^-12.
  const Array a = read_npy(valid_file("specials_2x3_f16.npy"));
  EXPECT_EQ(a.source_dtype, DType::f16);
  EXPECT_EQ(a.data, (std::vector<double>{0.0, std::ldexp(1.0, -24), 65504.0, -1.5, 1365.0 / 4096.0,
                                         std::ldexp(1.0, -14)}));
}

TEST(ioNpy, NativeByteOrderIsAccepted) {
  const std::string header = "{'descr': '=f8', 'fortran_order': False, 'shape': (1,), }\n";
  auto bytes = with_header(header, 8);
  const double one = 1.0;
  std::memcpy(bytes.data() + bytes.size() - 8, &one, 8);
  EXPECT_EQ(parse_npy(bytes, "x.npy").data, std::vector<double>{1.0});
}

TEST(ioNpy, MessagesSayWhatIsWrong) {
  EXPECT_EQ(error_of(with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }\n", 80)),
            "x.npy: shape (3, 4) of float64 needs 96 bytes of data but the file has 80");
  EXPECT_EQ(error_of(with_header("{'descr': '>f8', 'fortran_order': False, 'shape': (1,), }\n", 8)),
            "x.npy: big-endian dtype '>f8' is not supported; convert with arr.astype('<f8')");
  EXPECT_NE(
      error_of(with_header("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }\n", 8)).find("int64"),
      std::string::npos);
  EXPECT_NE(error_of(with_header("{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }\n", 16))
                .find("complex"),
            std::string::npos);
  EXPECT_NE(error_of(with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (-3, 4), }\n", 8))
                .find("negative dimension -3"),
            std::string::npos);
  EXPECT_NE(error_of(with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (3,) } x\n", 24))
                .find("Python literal"),
            std::string::npos);
  EXPECT_EQ(error_of({}), "x.npy: file is empty; expected an .npy array");
}

TEST(ioNpy, IntegersConvertExactlyWhenAsked) {
  // int8 [−128, −1, 0, 127] little-endian, and big-endian int16 [−2, 300]: the values numpy would print.
  std::vector<std::byte> i8 = with_header("{'descr': '|i1', 'fortran_order': False, 'shape': (4,), }", 4);
  const unsigned char v8[] = {0x80, 0xFF, 0x00, 0x7F};
  for (int k = 0; k < 4; ++k) i8[i8.size() - 4 + std::size_t(k)] = std::byte(v8[k]);
  const Array a = parse_npy(i8, "x.npy", NonFloat::integers);
  EXPECT_EQ(a.data, (std::vector<double>{-128, -1, 0, 127}));
  EXPECT_FALSE(parse_npy(i8, "x.npy", NonFloat::list).converted());
  std::vector<std::byte> i16 = with_header("{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }", 4);
  const unsigned char v16[] = {0xFF, 0xFE, 0x01, 0x2C};
  for (int k = 0; k < 4; ++k) i16[i16.size() - 4 + std::size_t(k)] = std::byte(v16[k]);
  EXPECT_EQ(parse_npy(i16, "x.npy", NonFloat::integers).data, (std::vector<double>{-2, 300}));
  // 2^53 + 1 has no float64: refused, naming the entry.
  std::vector<std::byte> big = with_header("{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", 8);
  const std::uint64_t v = (std::uint64_t{1} << 53) + 1;
  for (int k = 0; k < 8; ++k) big[big.size() - 8 + std::size_t(k)] = std::byte((v >> (8 * k)) & 0xFF);
  try {
    parse_npy(big, "x.npy", NonFloat::integers);
    ADD_FAILURE() << "2^53 + 1 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("entry 0"), std::string::npos) << e.what();
  }
}

TEST(ioNpy, NeverReadsPastTheBufferForAnyTruncation) {
  // Every prefix of a valid file is rejected (ASan checks that no byte beyond the prefix is touched).
  const auto file = encode_npy(make({2, 3}, arange(6)));
  for (std::size_t n = 0; n < file.size(); ++n) {
    std::vector<std::byte> prefix(file.begin(), file.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(parse_npy(prefix, "cut.npy"), InputError) << n;
  }
}

TEST(ioNpy, WriteIsAtomicAndReadable) {
  test::ScratchDir dir;
  const Matrix<double> m = (Matrix<double>(2, 2) << 1, 2, 3, 4).finished();
  write_npy(dir / "m.npy", m);
  const Array a = read_npy(dir / "m.npy");
  EXPECT_EQ(a.matrix(), m);
  write_npy(dir / "m.npy", m * 2, DType::f32);  // replaces the file
  EXPECT_EQ(read_npy(dir / "m.npy").matrix(), m * 2);
  std::size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1u);  // no temporary left behind
  EXPECT_THROW(write_npy(dir / "missing_dir" / "m.npy", m), InputError);
  EXPECT_THROW(encode_npy(from_matrix(m), DType::f16), InputError);
}

TEST(ioNpy, ReadFileErrorsNameThePath) {
  test::ScratchDir dir;
  try {
    read_npy(dir / "nope.npy");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("nope.npy: no such file"), std::string::npos);
  }
  EXPECT_THROW(read_npy(dir.path()), InputError);
  write_npy(dir / "big.npy", make({100}, arange(100)));
  EXPECT_THROW(read_file_bytes(dir / "big.npy", 100), InputError);
  EXPECT_EQ(read_file_bytes(dir / "big.npy").size(), 128u + 800u);
}

TEST(ioArray, MatrixVectorAndFiniteChecks) {
  const Array v = make({3}, {1, 2, 3});
  EXPECT_EQ(v.matrix().rows(), 3);
  EXPECT_EQ(v.matrix().cols(), 1);
  EXPECT_EQ(v.vector().size(), 3);
  EXPECT_EQ(make({1, 3}, {1, 2, 3}).vector()[2], 3.0);
  EXPECT_THROW(make({2, 2}, {1, 2, 3, 4}).vector(), InputError);
  EXPECT_THROW(make({1, 1, 2}, {1, 2}).matrix(), InputError);
  EXPECT_THROW(make({}, {1}).matrix(), InputError);
  EXPECT_NO_THROW(require_finite(v));
  Array bad = make({2, 2}, {1, 2, std::numeric_limits<double>::infinity(), 4});
  try {
    require_finite(bad);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "test: entry 2 (index (1, 0)) is infinite; all values must be finite");
  }
}

}  // namespace
}  // namespace regatta::io
