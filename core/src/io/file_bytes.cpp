#include <regatta/core/io/file_bytes.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include <regatta/core/error.hpp>
#include <regatta/core/io/detail/bytes.hpp>

namespace regatta::io {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& problem) {
  throw InputError(detail::printable(path.string(), 4096), problem);
}

/// Closes a file descriptor on scope exit.
struct FdGuard {
  int fd = -1;
  ~FdGuard() {
    if (fd >= 0) ::close(fd);
  }
};

/// What a non-regular file is, for "is a FIFO (named pipe), not a regular file".
std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

}  // namespace

std::vector<std::byte> read_file_bytes(const std::filesystem::path& path, std::size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO without a writer (or a device that waits for carrier) returns at once instead
  // of blocking, and the fstat below then refuses it. The type is checked on the open descriptor, so a file
  // swapped for a FIFO between a stat and the open is still caught. O_NOCTTY: a terminal never becomes the
  // controlling one.
  FdGuard file;
  do file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  while (file.fd < 0 && errno == EINTR);
  if (file.fd < 0) {
    const int err = errno;
    struct stat info {};
    if (err == ENXIO && ::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode))  // a socket
      fail(path, "is " + file_kind(info.st_mode) + ", not a regular file");
    fail(path, err == ENOENT ? std::string("no such file") : "cannot open: " + errno_text(err));
  }
  struct stat info {};
  if (::fstat(file.fd, &info) != 0) fail(path, "cannot stat: " + errno_text(errno));
  if (!S_ISREG(info.st_mode)) fail(path, "is " + file_kind(info.st_mode) + ", not a regular file");
  // Regular files never block; clear O_NONBLOCK anyway so reads behave as documented for them.
  if (const int flags = ::fcntl(file.fd, F_GETFL); flags >= 0) ::fcntl(file.fd, F_SETFL, flags & ~O_NONBLOCK);
  const auto size_hint = static_cast<std::size_t>(info.st_size);
  if (size_hint > max_bytes)
    fail(path, "file is " + std::to_string(size_hint) + " bytes, larger than the limit of " +
                   std::to_string(max_bytes) + " bytes");

  std::vector<std::byte> bytes(size_hint);
  std::size_t filled = 0;
  for (;;) {
    if (filled == bytes.size()) {
      // The file may have grown since fstat: keep reading in bounded steps, never beyond max_bytes + 1.
      if (bytes.size() > max_bytes)
        fail(path, "file is larger than the limit of " + std::to_string(max_bytes) + " bytes");
      bytes.resize(bytes.size() + std::min<std::size_t>(1 << 16, max_bytes + 1 - bytes.size()));
    }
    const ssize_t got = ::read(file.fd, bytes.data() + filled, bytes.size() - filled);
    if (got < 0) {
      if (errno == EINTR) continue;
      fail(path, "cannot read: " + errno_text(errno));
    }
    if (got == 0) break;
    filled += static_cast<std::size_t>(got);
  }
  if (filled > max_bytes)
    fail(path, "file is larger than the limit of " + std::to_string(max_bytes) + " bytes");
  bytes.resize(filled);
  return bytes;
}

void write_file_atomic(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  const std::filesystem::path directory = path.has_parent_path() ? path.parent_path() : ".";
  if (path.filename().empty()) fail(path, "is not a file name");
  std::string temp_name = path.filename().string();  // ".name.tmp-XXXXXX", appended (see GCC PR 105651)
  temp_name.insert(0, 1, '.');
  temp_name += ".tmp-XXXXXX";
  std::string temp = (directory / temp_name).string();

  FdGuard file;
  file.fd = ::mkstemp(temp.data());
  if (file.fd < 0)
    fail(path, "cannot create a temporary file in '" + directory.string() + "': " + errno_text(errno));

  // From here on, any failure removes the temporary file before throwing.
  auto abandon = [&](const std::string& problem) {
    ::close(file.fd);
    file.fd = -1;
    ::unlink(temp.c_str());
    fail(path, problem);
  };

  struct stat existing {};
  const mode_t mode = ::stat(path.c_str(), &existing) == 0 ? (existing.st_mode & 07777) : 0644;
  if (::fchmod(file.fd, mode) != 0) abandon("cannot set permissions: " + errno_text(errno));

  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(file.fd, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      abandon("cannot write: " + errno_text(errno));
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(file.fd) != 0) abandon("cannot flush to disk: " + errno_text(errno));
  const int fd = file.fd;
  file.fd = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    fail(path, "cannot write: " + errno_text(err));
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp.c_str());
    fail(path, "cannot replace the file: " + errno_text(err));
  }
}

}  // namespace regatta::io
