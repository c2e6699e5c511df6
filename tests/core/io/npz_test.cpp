// .npz archives written by numpy (np.savez: stored members; np.savez_compressed: deflate members), member
// lookup, and the archive-level rejections. Fixtures: tests/data/make_io_fixtures.py.
#include <regatta/core/io/npz.hpp>

#include <gtest/gtest.h>
#include <zip.h>

#include <string>

#include <regatta/core/error.hpp>
#include <regatta/core/io/file_bytes.hpp>
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

TEST(ioNpz, IntegerAndBooleanMembersAreListedAndTheRestIsRead) {
  // np.savez(f, images=np.arange(6.).reshape(2, 3), labels=np.array([3, 7]), mask=np.array([True, False]))
  const auto arrays = read_npz(valid_file("int64_beside_float.npz"));
  ASSERT_EQ(arrays.size(), 3u);
  EXPECT_EQ(arrays.at("images").data, arange(6));
  EXPECT_TRUE(arrays.at("images").converted());
  const Array& labels = arrays.at("labels");
  EXPECT_EQ(labels.unconverted_dtype, "int64");
  EXPECT_EQ(labels.shape, (std::vector<std::size_t>{2}));
  EXPECT_TRUE(labels.data.empty());
  EXPECT_EQ(arrays.at("mask").unconverted_dtype, "bool");
  // Selecting one gives one line naming the member and its type.
  const std::string message =
      error_of([&] { (void)read_npz_member(valid_file("int64_beside_float.npz"), "labels").matrix(); });
  EXPECT_NE(
      message.find("int64_beside_float.npz:labels: is a tensor of int64; only float16, bfloat16, float32 and "
                   "float64 arrays can be used"),
      std::string::npos)
      << message;
  EXPECT_THROW(require_finite(labels), InputError);
  EXPECT_THROW((void)labels.vector(), InputError);
  // The bundled ViT test set: float images and int64 labels in one archive.
  const auto test_set = read_npz(test::data_dir() / "vit_digits" / "test_set.npz");
  EXPECT_EQ(test_set.at("labels").unconverted_dtype, "int64");
  std::size_t converted = 0;
  for (const auto& [name, a] : test_set) converted += a.converted() && a.data.size() == a.size();
  EXPECT_GE(converted, 1u);
}

TEST(ioNpz, MessagesNameTheArchiveAndMember) {
  const auto malformed = test::data_dir() / "malformed";
  EXPECT_NE(error_of([&] { read_npz(malformed / "member_int64_truncated.npz"); })
                .find("member_int64_truncated.npz:labels: shape (3,) of int64 needs 24 bytes of data but the "
                      "file has 20"),
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

/// A zip archive in memory, written by libzip (ZIP64 records where needed), members in order with the given
/// compression method.
std::vector<std::byte> zip_archive(const std::vector<std::pair<std::string, std::vector<std::byte>>>& members,
                                   zip_int32_t method = ZIP_CM_STORE) {
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* buffer = zip_source_buffer_create(nullptr, 0, 0, &error);
  EXPECT_NE(buffer, nullptr);
  zip_source_keep(buffer);
  zip_t* archive = zip_open_from_source(buffer, ZIP_TRUNCATE, &error);
  EXPECT_NE(archive, nullptr);
  for (const auto& [name, data] : members) {
    zip_source_t* member = zip_source_buffer(archive, data.data(), data.size(), 0);
    const zip_int64_t index = zip_file_add(archive, name.c_str(), member, ZIP_FL_ENC_UTF_8);
    EXPECT_GE(index, 0) << name;
    EXPECT_EQ(zip_set_file_compression(archive, static_cast<zip_uint64_t>(index), method, 0), 0);
  }
  EXPECT_EQ(zip_close(archive), 0) << zip_strerror(archive);
  std::vector<std::byte> out;
  EXPECT_EQ(zip_source_open(buffer), 0);
  std::byte chunk[1 << 16];
  for (zip_int64_t got; (got = zip_source_read(buffer, chunk, sizeof chunk)) > 0;)
    out.insert(out.end(), chunk, chunk + got);
  zip_source_close(buffer);
  zip_source_free(buffer);
  return out;
}

/// n one-element members "a0.npy", "a1.npy", ... holding 0, 1, ...
std::vector<std::byte> many_members(std::size_t n) {
  std::vector<std::pair<std::string, std::vector<std::byte>>> members;
  for (std::size_t i = 0; i < n; ++i)
    members.emplace_back("a" + std::to_string(i) + ".npy", encode_npy(test::make_array({1}, {double(i)})));
  return zip_archive(members);
}

TEST(ioNpz, ManyMembersLoadAndTooManyAreRejected) {
  test::ScratchDir dir;
  // Linear-time member checks: 60,000 members load (a quadratic duplicate check took 48 s at 10^5).
  write_file_atomic(dir / "many.npz", many_members(60'000));
  const auto arrays = read_npz(dir / "many.npz");
  ASSERT_EQ(arrays.size(), 60'000u);
  EXPECT_EQ(arrays.at("a0").data, std::vector<double>{0.0});
  EXPECT_EQ(arrays.at("a59999").data, std::vector<double>{59999.0});
  write_file_atomic(dir / "too_many.npz", many_members(100'000));
  const std::string message = error_of([&] { read_npz(dir / "too_many.npz"); });
  EXPECT_NE(message.find("too_many.npz: archive has 100000 members, more than the limit of 65536"),
            std::string::npos)
      << message;
}

TEST(ioNpz, DeflateAtItsBestRatioIsAcceptedAndBombsAreNot) {
  test::ScratchDir dir;
  // 8 MB of zeros: deflate reaches about 1000:1 here, close to its 1032:1 ceiling, and must still load.
  const Array zeros = test::make_array({1000, 1000}, std::vector<double>(1'000'000, 0.0));
  write_file_atomic(dir / "zeros.npz", zip_archive({{"Z.npy", encode_npy(zeros)}}, ZIP_CM_DEFLATE));
  EXPECT_EQ(read_npz_member(dir / "zeros.npz", "Z").data, zeros.data);
  // tests/data/hostile: 200 MiB of zeros bzip2-compressed to a few hundred bytes, with the true size
  // recorded (refused before decompressing) and with 1000 bytes recorded (decompression stops there).
  const std::string bomb = error_of([] { read_npz(test::data_dir() / "hostile" / "bzip2_bomb.npz"); });
  EXPECT_NE(bomb.find("bzip2_bomb.npz:W: member claims 209715328 bytes uncompressed from"), std::string::npos)
      << bomb;
  EXPECT_NE(bomb.find("a ratio above the limit of 1100:1"), std::string::npos) << bomb;
  const std::string lying =
      error_of([] { read_npz(test::data_dir() / "hostile" / "bzip2_bomb_lying_size.npz"); });
  EXPECT_NE(lying.find("member decompresses to more than the 1000 bytes the archive records"),
            std::string::npos)
      << lying;
}

}  // namespace
}  // namespace regatta::io
