#pragma once
// Whole-file reads with a size limit, and writes that never leave a half-written file.
#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace regatta::io {

/// Files larger than this are refused before anything is allocated for them (16 GiB).
inline constexpr std::size_t default_max_file_bytes = 16ull << 30;

/// The complete contents of the regular file `path`. Throws InputError naming the path when it does not
/// exist, is a directory or otherwise not a regular file, cannot be opened or read, or holds more than
/// `max_bytes` bytes (checked while reading, so a file that grows meanwhile is still bounded).
std::vector<std::byte> read_file_bytes(const std::filesystem::path& path,
                                       std::size_t max_bytes = default_max_file_bytes);

/// Input protection, for a process that must never overwrite what it read (the command-line tool turns it
/// on; off by default, so that a long-lived Python session may rewrite a file it read earlier). While on,
/// read_file_bytes remembers the identity (device, inode) of every regular file it reads, and
/// write_file_atomic and check_not_input refuse a target that is one of them — also through another name or
/// a hard link — with an InputError naming it, before anything is written.
void protect_inputs(bool on);
/// Forgets `path` as an input: a file that the run is meant to replace (a checkpoint resumed and rewritten).
void release_input(const std::filesystem::path& path);
/// The paths of the regular files read while input protection was on, in the order first read.
std::vector<std::string> inputs_read();
/// Throws InputError naming `path` when input protection is on and `path` is a file this process read.
void check_not_input(const std::filesystem::path& path);

/// Throws the InputError that write_file_atomic would throw for what is at `path` now (a directory, a
/// symbolic link to a regular file, a socket, an input of this run …), so that a command writing several
/// files checks them all before it writes the first.
void check_replaceable(const std::filesystem::path& path);

/// The start of the name of a temporary sibling of `path` (a file or directory made in the same directory,
/// then renamed over `path`): "." + the first bytes of path's file name (at most 32, cut at a UTF-8
/// character boundary) + ".". A caller appends a short suffix ("tmp-XXXXXX", "partial-1234"); the result
/// fits the file-name limit (255 bytes) whatever the length of the final name, where the whole name plus a
/// suffix would not.
std::string temporary_prefix(const std::filesystem::path& path);

/// Replaces (or creates) the regular file `path` with exactly `bytes`: writes a temporary file in the same
/// directory, flushes it to disk and renames it over `path`, so readers see either the old file or the
/// complete new one, never a partial write (the temporary file is named temporary_prefix(path) + "tmp-"
/// and six random characters). A new file gets mode 0644; an existing file keeps its mode.
///
/// Only regular files are replaced. A character device or FIFO at `path`, directly or through a symbolic
/// link (/dev/null, /dev/stdout, /dev/fd/N), is written through in place without a temporary file (not
/// atomic; a FIFO nobody reads is refused at once rather than waited on). Any other symbolic link, a
/// directory, a block device or a socket is refused and left untouched. Throws InputError naming the path
/// on any failure, after removing the temporary file; a reader that closes a pipe early gives an InputError,
/// not SIGPIPE.
void write_file_atomic(const std::filesystem::path& path, std::span<const std::byte> bytes);

}  // namespace regatta::io
