#include <regatta/core/io/npz.hpp>

#include <zip.h>

#include <algorithm>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include <regatta/core/error.hpp>
#include <regatta/core/io/detail/bytes.hpp>
#include <regatta/core/io/detail/memory.hpp>
#include <regatta/core/io/npy.hpp>

namespace regatta::io {

namespace {

constexpr std::string_view npy_suffix = ".npy";

std::string zip_problem(zip_error_t* error) { return detail::printable(zip_error_strerror(error)); }

/// A read-only libzip archive over an in-memory copy of the file; the member list is validated on opening.
class NpzArchive {
 public:
  struct Member {
    std::string name;  // as stored, without ".npy"
    zip_uint64_t index = 0;
    zip_uint64_t size = 0;  // uncompressed size recorded in the archive
  };

  NpzArchive(const std::filesystem::path& path, std::size_t max_member_bytes)
      : NpzArchive(read_file_bytes(path), detail::printable(path.string(), 4096), max_member_bytes) {}

  NpzArchive(std::vector<std::byte> bytes, std::string source, std::size_t max_member_bytes)
      : source_(std::move(source)), bytes_(std::move(bytes)), max_member_bytes_(max_member_bytes) {
    if (bytes_.empty()) throw InputError(source_, "file is empty; expected an .npz (zip) archive");
    zip_error_t error;
    zip_error_init(&error);
    zip_source_t* src = zip_source_buffer_create(bytes_.data(), bytes_.size(), /*freep=*/0, &error);
    if (src == nullptr) fail_with(error, "cannot open the archive");
    archive_.reset(zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &error));
    if (!archive_) {
      zip_source_free(src);
      fail_with(error, "cannot open the archive");
    }
    zip_error_fini(&error);
    list_members();
  }

  const std::vector<Member>& members() const { return members_; }
  const std::string& source() const { return source_; }

  /// Decompresses `m` and parses it as .npy with source "file.npz:name".
  Array read(const Member& m, NonFloat non_float = NonFloat::list) {
    const std::string member_source = source_ + ":" + detail::printable(m.name);
    // The member's bytes, then its values as float64 (as many bytes again for float64 data, four times as
    // many for float16): refused before decompressing when that cannot fit.
    detail::require_memory(static_cast<std::size_t>(std::min<zip_uint64_t>(m.size, SIZE_MAX / 5)) * 5,
                           member_source, "the member and its values");
    zip_file_t* file = zip_fopen_index(archive_.get(), m.index, 0);
    if (file == nullptr)
      throw InputError(member_source,
                       "cannot open the member: " + zip_problem(zip_get_error(archive_.get())));
    std::vector<std::byte> data;
    std::size_t filled = 0;
    try {
      // Grow with what was actually decompressed (at most doubling), reading one byte past the recorded
      // size so a member longer than recorded is caught.
      for (;;) {
        if (filled == data.size()) {
          if (filled > m.size)
            throw InputError(member_source, "member decompresses to more than the " + std::to_string(m.size) +
                                                " bytes the archive records (corrupt archive)");
          const std::size_t target = std::max<std::size_t>(2 * filled, std::size_t{1} << 20);
          data.resize(std::min<std::size_t>(target, static_cast<std::size_t>(m.size) + 1));
        }
        const zip_int64_t got = zip_fread(file, data.data() + filled, data.size() - filled);
        if (got < 0)
          throw InputError(member_source, "member is corrupt: " + zip_problem(zip_file_get_error(file)));
        if (got == 0) break;
        filled += static_cast<std::size_t>(got);
      }
    } catch (...) {
      zip_fclose(file);
      throw;
    }
    zip_fclose(file);
    if (filled != m.size)
      throw InputError(member_source, "member decompresses to " + std::to_string(filled) +
                                          " bytes but the archive records " + std::to_string(m.size) +
                                          " (corrupt archive)");
    data.resize(filled);
    return parse_npy(data, member_source, non_float);
  }

 private:
  std::string source_;
  std::vector<std::byte> bytes_;  // must outlive archive_, which reads from it without copying
  std::size_t max_member_bytes_;
  std::unique_ptr<zip_t, decltype(&zip_discard)> archive_{nullptr, &zip_discard};
  std::vector<Member> members_;

  [[noreturn]] void fail_with(zip_error_t& error, const std::string& what) {
    const int code = zip_error_code_zip(&error);
    const std::string problem =
        code == ZIP_ER_NOZIP    ? "not a zip archive (an .npz file is a zip of .npy files)"
        : code == ZIP_ER_EXISTS ? "duplicate member name (the archive lists the same member twice)"
        : code == ZIP_ER_INCONS ? "corrupt zip archive (its directory is inconsistent)"
                                : what + ": " + zip_problem(&error);
    zip_error_fini(&error);
    throw InputError(source_, problem);
  }

  void list_members() {
    const zip_int64_t count = zip_get_num_entries(archive_.get(), 0);
    if (count < 0)
      throw InputError(source_, "cannot list the archive: " + zip_problem(zip_get_error(archive_.get())));
    if (static_cast<zip_uint64_t>(count) > npz_max_members)
      throw InputError(source_, "archive has " + std::to_string(count) + " members, more than the limit of " +
                                    std::to_string(npz_max_members));
    members_.reserve(static_cast<std::size_t>(count));
    std::unordered_set<std::string> names;
    names.reserve(static_cast<std::size_t>(count));
    for (zip_int64_t i = 0; i < count; ++i) {
      zip_stat_t st;
      zip_stat_init(&st);
      if (zip_stat_index(archive_.get(), static_cast<zip_uint64_t>(i), 0, &st) != 0)
        throw InputError(source_, "cannot read entry " + std::to_string(i) + ": " +
                                      zip_problem(zip_get_error(archive_.get())));
      if (!(st.valid & ZIP_STAT_NAME) || st.name == nullptr || !(st.valid & ZIP_STAT_SIZE) ||
          !(st.valid & ZIP_STAT_COMP_SIZE))
        throw InputError(source_, "entry " + std::to_string(i) + " has no name or size (corrupt archive)");
      const std::string_view name = st.name;
      if (name.size() <= npy_suffix.size() || !name.ends_with(npy_suffix))
        throw InputError(source_, "member '" + detail::printable(name) +
                                      "' is not an .npy array (an .npz file holds only .npy members)");
      Member m{std::string(name.substr(0, name.size() - npy_suffix.size())), static_cast<zip_uint64_t>(i),
               st.size};
      if (st.size > max_member_bytes_)
        throw InputError(source_ + ":" + detail::printable(m.name),
                         "member is " + std::to_string(st.size) +
                             " bytes uncompressed, larger than the limit of " +
                             std::to_string(max_member_bytes_) + " bytes");
      // A member may inflate to at most npz_max_compression_ratio times its compressed size: deflate (what
      // numpy writes) cannot exceed 1032:1, while a bzip2 bomb of 999 bytes can claim gigabytes. Checked on
      // the recorded sizes before anything is decompressed; read() then stops at the recorded size.
      if (st.size > npz_max_compression_ratio * st.comp_size + npz_ratio_slack_bytes)
        throw InputError(source_ + ":" + detail::printable(m.name),
                         "member claims " + std::to_string(st.size) + " bytes uncompressed from " +
                             std::to_string(st.comp_size) + " compressed, a ratio above the limit of " +
                             std::to_string(npz_max_compression_ratio) + ":1 (a decompression bomb?)");
      if (!names.insert(m.name).second)
        throw InputError(source_, "duplicate member '" + detail::printable(name) + "'");
      members_.push_back(std::move(m));
    }
    if (members_.empty()) throw InputError(source_, "archive contains no arrays");
  }
};

}  // namespace

std::map<std::string, Array> read_npz(const std::filesystem::path& path, std::size_t max_member_bytes) {
  NpzArchive archive(path, max_member_bytes);
  std::map<std::string, Array> arrays;
  for (const auto& m : archive.members()) arrays.emplace(m.name, archive.read(m));
  return arrays;
}

std::map<std::string, Array> parse_npz(std::span<const std::byte> bytes, std::string_view source,
                                       std::size_t max_member_bytes) {
  NpzArchive archive(std::vector<std::byte>(bytes.begin(), bytes.end()), std::string(source),
                     max_member_bytes);
  std::map<std::string, Array> arrays;
  for (const auto& m : archive.members()) arrays.emplace(m.name, archive.read(m));
  return arrays;
}

Array read_npz_member(const std::filesystem::path& path, std::string_view name, std::size_t max_member_bytes,
                      NonFloat non_float) {
  NpzArchive archive(path, max_member_bytes);
  for (const auto& m : archive.members())
    if (m.name == name) return archive.read(m, non_float == NonFloat::reject ? NonFloat::list : non_float);
  std::string available;
  constexpr std::size_t max_listed = 20;
  for (std::size_t i = 0; i < archive.members().size() && i < max_listed; ++i)
    available += (i > 0 ? ", " : "") + detail::printable(archive.members()[i].name, 60);
  if (archive.members().size() > max_listed)
    available += ", ... (" + std::to_string(archive.members().size() - max_listed) + " more)";
  throw InputError(archive.source(),
                   "no array named '" + detail::printable(name) + "'; the archive contains: " + available);
}

}  // namespace regatta::io
