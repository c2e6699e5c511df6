// .npz archives written by numpy (np.savez: stored members; np.savez_compressed: deflate members), member
// lookup, and the archive-level rejections. Fixtures: tests/data/make_io_fixtures.py.
#include <regatta/core/io/npz.hpp>

#include <gtest/gtest.h>

#include <string>

#include <regatta/core/error.hpp>
#include <regatta/core/io/npy.hpp>

#include "support/error_message.hpp"
#include "test_files.hpp"

namespace regatta::io {
namespace {

using test::arange;
using test::valid_file;

std::string error_of(const std::function<void()>& f) { return regatta::testing::error_message_of(f); }

void expect_savez_contents(const std::map<std::string, Array>& arrays, const std::string& file) {
  // np.savez(f, W=np.arange(6.).reshape(2, 3), b=np.arange(3, dtype=np.float32))
  ASSERT_EQ(arrays.size(), 2u);
  const Array& w = arrays.at("W");
  EXPECT_EQ(w.shape, (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(w.data, arange(6));
  EXPECT_EQ(w.source_dtype, DType::f64);
  EXPECT_NE(w.source.find(file + ":W"), std::string::npos) << w.source;
  const Array& b = arrays.at("b");
  EXPECT_EQ(b.shape, (std::vector<std::size_t>{3}));
  EXPECT_EQ(b.data, arange(3));
  EXPECT_EQ(b.source_dtype, DType::f32);
}

TEST(ioNpz, ReadsStoredMembers) {
  expect_savez_contents(read_npz(valid_file("savez_stored.npz")), "savez_stored.npz");
}

TEST(ioNpz, ReadsCompressedMembers) {
  expect_savez_contents(read_npz(valid_file("savez_compressed.npz")), "savez_compressed.npz");
}

TEST(ioNpz, ReadsOneMemberByName) {
  const Array w = read_npz_member(valid_file("savez_compressed.npz"), "W");
  EXPECT_EQ(w.matrix()(1, 2), 5.0);
  EXPECT_EQ(read_npz_member(valid_file("savez_stored.npz"), "b").vector().size(), 3);
}

TEST(ioNpz, MissingMemberListsTheNamesAvailable) {
  const std::string message = error_of([] { read_npz_member(valid_file("savez_stored.npz"), "X"); });
  EXPECT_NE(message.find("savez_stored.npz: no array named 'X'; the archive contains: W, b"),
            std::string::npos)
      << message;
}

TEST(ioNpz, MessagesNameTheArchiveAndMember) {
  const auto malformed = test::data_dir() / "malformed";
  EXPECT_NE(error_of([&] {
              read_npz(malformed / "member_int64.npz");
            }).find("member_int64.npz:W: integer dtype '<i8' (int64)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              read_npz(malformed / "non_npy_member.npz");
            }).find("member 'readme.txt' is not an .npy"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_npz(malformed / "no_arrays.npz"); }).find("contains no arrays"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_npz(malformed / "not_a_zip.npz"); }).find("not a zip archive"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_npz(malformed / "duplicate_member.npz"); }).find("duplicate member"),
            std::string::npos);
}

TEST(ioNpz, MemberLimitIsEnforcedBeforeDecompressing) {
  // Both members of savez_stored.npz are larger than 100 bytes uncompressed.
  const std::string message = error_of([] { read_npz(valid_file("savez_stored.npz"), 100); });
  EXPECT_NE(message.find("larger than the limit of 100 bytes"), std::string::npos) << message;
}

}  // namespace
}  // namespace regatta::io
