#include <regatta/core/io/file_bytes.hpp>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include <regatta/core/error.hpp>
#include <regatta/core/io/detail/bytes.hpp>
#include <regatta/core/io/detail/memory.hpp>

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

namespace {

/// The inputs read while protect_inputs is on, by (device, inode).
struct InputRegistry {
  std::mutex mutex;
  bool on = false;
  std::set<std::pair<dev_t, ino_t>> files;
  std::vector<std::string> paths;  // as given, in the order first read
};

InputRegistry& inputs() {
  static InputRegistry registry;
  return registry;
}

bool is_input(const struct stat& info) {
  InputRegistry& r = inputs();
  const std::lock_guard lock(r.mutex);
  return r.on && r.files.contains({info.st_dev, info.st_ino});
}

[[noreturn]] void refuse_input(const std::filesystem::path& path) {
  fail(path, "is also an input of this run; it is not overwritten (choose another output name)");
}

}  // namespace

void protect_inputs(bool on) {
  InputRegistry& r = inputs();
  const std::lock_guard lock(r.mutex);
  r.on = on;
  if (!on) {
    r.files.clear();
    r.paths.clear();
  }
}

std::vector<std::string> inputs_read() {
  InputRegistry& r = inputs();
  const std::lock_guard lock(r.mutex);
  return r.paths;
}

void release_input(const std::filesystem::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return;
  InputRegistry& r = inputs();
  const std::lock_guard lock(r.mutex);
  r.files.erase({info.st_dev, info.st_ino});
}

void check_not_input(const std::filesystem::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && is_input(info)) refuse_input(path);
}

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
  {
    InputRegistry& r = inputs();
    const std::lock_guard lock(r.mutex);
    if (r.on && r.files.insert({info.st_dev, info.st_ino}).second) r.paths.push_back(path.string());
  }
  // Regular files never block; clear O_NONBLOCK anyway so reads behave as documented for them.
  if (const int flags = ::fcntl(file.fd, F_GETFL); flags >= 0) ::fcntl(file.fd, F_SETFL, flags & ~O_NONBLOCK);
  const auto size_hint = static_cast<std::size_t>(info.st_size);
  if (size_hint > max_bytes)
    fail(path, "file is " + std::to_string(size_hint) + " bytes, larger than the limit of " +
                   std::to_string(max_bytes) + " bytes");

  detail::require_memory(size_hint, detail::printable(path.string(), 4096), "the file's contents");
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

namespace {

/// Writes all of `bytes` to `fd`. A reader that closed its end of a pipe gives EPIPE instead of killing the
/// process with SIGPIPE: the signal is blocked in this thread during the write and a pending one consumed.
void write_all(int fd, std::span<const std::byte> bytes, const std::filesystem::path& path) {
  sigset_t pipe_signal, previous;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, &previous);
  int error = 0;
  for (std::size_t written = 0; written < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error = errno;
      break;
    }
    written += static_cast<std::size_t>(n);
  }
  if (error == EPIPE && !sigismember(&previous, SIGPIPE)) {
    const timespec no_wait{0, 0};
    while (::sigtimedwait(&pipe_signal, nullptr, &no_wait) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (error == EPIPE) fail(path, "cannot write: the reading end of the pipe was closed");
  if (error != 0) fail(path, "cannot write: " + errno_text(error));
}

/// Writes `bytes` into the existing character device or FIFO `path` (no temporary file, no rename: the node
/// itself must stay). The type is checked again on the open descriptor, so a path swapped for a regular file
/// meanwhile is refused rather than overwritten in place. A FIFO without a reader is refused at once.
void write_through(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  FdGuard file;
  do file.fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  while (file.fd < 0 && errno == EINTR);
  if (file.fd < 0) {
    const int err = errno;
    fail(path, err == ENXIO ? std::string("is a FIFO (named pipe) that no process is reading")
                            : "cannot open for writing: " + errno_text(err));
  }
  struct stat info {};
  if (::fstat(file.fd, &info) != 0) fail(path, "cannot stat: " + errno_text(errno));
  if (!S_ISCHR(info.st_mode) && !S_ISFIFO(info.st_mode))
    fail(path, "changed into " + file_kind(info.st_mode) + " while it was being opened; nothing was written");
  if (const int flags = ::fcntl(file.fd, F_GETFL); flags >= 0) ::fcntl(file.fd, F_SETFL, flags & ~O_NONBLOCK);
  write_all(file.fd, bytes, path);
  const int fd = file.fd;
  file.fd = -1;
  if (::close(fd) != 0) fail(path, "cannot write: " + errno_text(errno));
}

}  // namespace

namespace {

/// What write_file_atomic does with `path`: replace (or create) a regular file, write through a character
/// device or FIFO (directly or through a symbolic link), or refuse with an InputError naming it.
enum class Target { replace, through };

Target classify_target(const std::filesystem::path& path, mode_t& mode) {
  if (path.filename().empty()) fail(path, "is not a file name");
  // Only a regular file (or nothing) is replaced. A character device or FIFO, named directly or through a
  // symbolic link (/dev/null, /dev/stdout, a shell's process substitution), is written through in place:
  // renaming over it would replace the node with a regular file. Anything else is refused untouched.
  mode = 0644;
  struct stat target {};
  if (::lstat(path.c_str(), &target) == 0) {
    if (S_ISLNK(target.st_mode)) {
      struct stat pointee {};
      if (::stat(path.c_str(), &pointee) == 0 && (S_ISCHR(pointee.st_mode) || S_ISFIFO(pointee.st_mode)))
        return Target::through;
      fail(path,
           "is a symbolic link; only regular files are replaced (name the file it points to, or remove "
           "the link)");
    }
    if (S_ISCHR(target.st_mode) || S_ISFIFO(target.st_mode)) return Target::through;
    if (!S_ISREG(target.st_mode))
      fail(path, "is " + file_kind(target.st_mode) +
                     "; only a regular file is replaced (or a character device or FIFO written to)");
    if (is_input(target)) refuse_input(path);
    mode = target.st_mode & 07777;
  } else if (errno != ENOENT) {
    fail(path, "cannot stat: " + errno_text(errno));
  }
  return Target::replace;
}

}  // namespace

void check_replaceable(const std::filesystem::path& path) {
  mode_t mode = 0;
  (void)classify_target(path, mode);
}

std::string temporary_prefix(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  std::size_t keep = std::min<std::size_t>(name.size(), 32);
  // Back up over UTF-8 continuation bytes (10xxxxxx) so that no character is cut in two.
  while (keep > 0 && keep < name.size() && (static_cast<unsigned char>(name[keep]) & 0xC0) == 0x80) --keep;
  std::string prefix(1, '.');  // built by appending: GCC 12 warns falsely on "." + std::string (PR 105651)
  prefix.append(name, 0, keep);
  prefix += '.';
  return prefix;
}

void write_file_atomic(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  const std::filesystem::path directory = path.has_parent_path() ? path.parent_path() : ".";
  mode_t mode = 0644;
  if (classify_target(path, mode) == Target::through) return write_through(path, bytes);
  std::string temp = (directory / (temporary_prefix(path) + "tmp-XXXXXX")).string();

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

  if (::fchmod(file.fd, mode) != 0) abandon("cannot set permissions: " + errno_text(errno));

  try {
    write_all(file.fd, bytes, path);
  } catch (const InputError& e) {
    abandon(e.problem());
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

namespace detail {

namespace {

/// The number after `key` in /proc/meminfo, in bytes (the file gives kB), or nullopt.
std::optional<std::size_t> meminfo_bytes(const std::string& text, std::string_view key) {
  const auto at = text.find(key);
  if (at == std::string::npos) return std::nullopt;
  unsigned long long kb = 0;
  if (std::sscanf(text.c_str() + at + key.size(), " %llu", &kb) != 1) return std::nullopt;
  return static_cast<std::size_t>(std::min<unsigned long long>(kb, SIZE_MAX / 1024) * 1024);
}

/// A small text file (/proc, /sys) read whole, or "" when it cannot be read.
std::string small_file(const char* path) {
  std::string text;
  if (std::FILE* f = std::fopen(path, "re")) {
    char chunk[4096];
    for (std::size_t got; (got = std::fread(chunk, 1, sizeof chunk, f)) > 0;) text.append(chunk, got);
    std::fclose(f);
  }
  return text;
}

}  // namespace

std::size_t available_memory_bytes() {
  std::size_t available = SIZE_MAX;
  const std::string meminfo = small_file("/proc/meminfo");
  if (const auto mem = meminfo_bytes(meminfo, "MemAvailable:"))
    available = *mem + meminfo_bytes(meminfo, "SwapFree:").value_or(0);
  // cgroup v2: the process's own group (the line "0::/path" of /proc/self/cgroup).
  const std::string groups = small_file("/proc/self/cgroup");
  if (const auto at = groups.find("0::"); at != std::string::npos) {
    std::string group = groups.substr(at + 3);
    group = group.substr(0, group.find('\n'));
    const std::string dir = "/sys/fs/cgroup" + group;
    unsigned long long limit = 0, used = 0;
    const std::string max_text = small_file((dir + "/memory.max").c_str());
    const std::string current_text = small_file((dir + "/memory.current").c_str());
    if (std::sscanf(max_text.c_str(), "%llu", &limit) == 1 &&
        std::sscanf(current_text.c_str(), "%llu", &used) == 1)
      available = std::min<std::size_t>(available, limit > used ? static_cast<std::size_t>(limit - used) : 0);
  }
  return available;
}

void require_memory(std::size_t bytes, std::string_view subject, std::string_view what) {
  if (bytes <= (std::size_t{64} << 20)) return;  // small allocations: not worth reading /proc
  const std::size_t available = available_memory_bytes();
  if (bytes > available)
    throw InputError(std::string(subject), "needs " + std::to_string(bytes) + " bytes of memory for " +
                                               std::string(what) + ", more than the " +
                                               std::to_string(available) + " bytes available");
}

}  // namespace detail

}  // namespace regatta::io
