#pragma once
// NumPy .npz archives (np.savez, np.savez_compressed): a zip file whose members are .npy files.
//
// Members may be stored or deflate-compressed. Array names are member names without the ".npy" suffix
// (np.savez(f, W=...) stores "W.npy"). Each member is parsed with parse_npy, with source "file.npz:name";
// integer and boolean members are listed unconverted (NonFloat::list), so the float arrays beside them
// stay readable.
// The archive is rejected with InputError (one line, naming the file and the problem) when it is not a zip
// file or is corrupt (including CRC mismatches), a member is not an .npy file, a member's uncompressed size
// exceeds `max_member_bytes`, a member's recorded sizes claim a compression ratio above
// npz_max_compression_ratio, the bytes decompressed differ from the size the archive records, two members
// have the same name, it has more than npz_max_members members, or it contains no arrays. Decompression
// stops one byte past the recorded size, and buffers grow with the bytes actually decompressed; a recorded
// size is never trusted for allocation. The member checks take time linear in the number of members.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>

#include <regatta/core/io/array.hpp>
#include <regatta/core/io/file_bytes.hpp>
#include <regatta/core/io/npy.hpp>

namespace regatta::io {

/// Archives with more members are rejected before any member is read.
inline constexpr std::size_t npz_max_members = 65'536;
/// A member's recorded uncompressed size may be at most this many times its compressed size (plus
/// npz_ratio_slack_bytes). Deflate, the only compression numpy writes, cannot exceed 1032:1.
inline constexpr std::uint64_t npz_max_compression_ratio = 1100;
inline constexpr std::uint64_t npz_ratio_slack_bytes = 4096;

/// Every array in the archive, by name.
std::map<std::string, Array> read_npz(const std::filesystem::path& path,
                                      std::size_t max_member_bytes = default_max_file_bytes);

/// read_npz on the complete contents of an archive already in memory; `source` names it in messages.
std::map<std::string, Array> parse_npz(std::span<const std::byte> bytes, std::string_view source,
                                       std::size_t max_member_bytes = default_max_file_bytes);

/// The array called `name` (without ".npy"). The archive's member list is validated as for read_npz but
/// only this member is decompressed. When it is missing, the InputError lists the names available.
/// With NonFloat::integers an integer member is converted exactly (npy.hpp); otherwise it is listed.
Array read_npz_member(const std::filesystem::path& path, std::string_view name,
                      std::size_t max_member_bytes = default_max_file_bytes,
                      NonFloat non_float = NonFloat::list);

}  // namespace regatta::io
