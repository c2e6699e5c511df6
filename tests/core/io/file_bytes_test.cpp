// read_file_bytes is the one place every reader (.npy, .npz, .safetensors, JSON) opens a file: inputs that
// are not regular files are refused at once with one line, whatever they are, and never block.
// write_file_atomic is the one place every writer (npy, safetensors, JSON, the report) creates one: it
// replaces only regular files, writes through devices and FIFOs, and refuses everything else untouched.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>

#include <regatta/core/error.hpp>
#include <regatta/core/io/detail/memory.hpp>
#include <regatta/core/io/file_bytes.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/io/safetensors.hpp>

#include "test_files.hpp"

namespace regatta::io {
namespace {

/// The one-line message read_file_bytes throws for `path`, or "" when it reads the file.
std::string read_error(const std::filesystem::path& path) {
  try {
    read_file_bytes(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

void expect_refused(const std::filesystem::path& path, const std::string& kind) {
  const std::string message = read_error(path);
  EXPECT_NE(message.find(path.string()), std::string::npos) << message;
  EXPECT_NE(message.find("is " + kind + ", not a regular file"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  // Every reader goes through read_file_bytes, so each refuses it the same way.
  EXPECT_THROW(read_npy(path), InputError);
  EXPECT_THROW(read_npz(path), InputError);
  EXPECT_THROW(read_safetensors(path), InputError);
}

TEST(ioReadFile, FifoWithoutWriterIsRefusedWithoutBlocking) {
  test::ScratchDir dir;
  const auto fifo = dir / "weights.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  expect_refused(fifo, "a FIFO (named pipe)");  // a blocking open() would hang here until ctest's timeout
}

TEST(ioReadFile, CharacterDeviceIsRefused) {
  expect_refused("/dev/null", "a character device");  // /dev/null would read as an empty file
  expect_refused("/dev/zero", "a character device");  // /dev/zero would never end
}

TEST(ioReadFile, DirectoryIsRefused) {
  test::ScratchDir dir;
  std::filesystem::create_directory(dir / "model.safetensors");
  expect_refused(dir / "model.safetensors", "a directory");
}

TEST(ioReadFile, SocketIsRefused) {
  test::ScratchDir dir;
  const auto path = dir / "s.npz";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(path.string().size(), sizeof(address.sun_path));
  std::strcpy(address.sun_path, path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0)
      << std::strerror(errno);
  expect_refused(path, "a socket");
  ::close(fd);
}

TEST(ioReadFile, SymlinkToARegularFileIsRead) {
  test::ScratchDir dir;
  const auto target = test::valid_file("arange_3x4_f64.npy");
  std::filesystem::create_symlink(target, dir / "link.npy");
  EXPECT_EQ(read_file_bytes(dir / "link.npy"), test::raw_bytes(target));
  std::filesystem::create_symlink("/dev/null", dir / "null.npy");
  EXPECT_NE(read_error(dir / "null.npy").find("is a character device"), std::string::npos);
}

TEST(ioReadFile, MissingFileSaysSo) {
  test::ScratchDir dir;
  EXPECT_NE(read_error(dir / "absent.npy").find("absent.npy: no such file"), std::string::npos);
}

// --- allocation checks ------------------------------------------------------------------------------------

TEST(ioMemory, AbsurdSizesAreRefusedBeforeAllocation) {
  const std::size_t available = detail::available_memory_bytes();
  EXPECT_GT(available, std::size_t{1} << 20);  // the machine running the tests has a megabyte to spare
  // 2^40 float64 values (8 TiB): more than any test machine has, refused with one line naming the source.
  try {
    detail::require_memory(std::size_t{8} << 40, "huge.npy", "the array as float64");
    if (available >= (std::size_t{8} << 40)) GTEST_SKIP() << "this machine has 8 TiB available";
    FAIL() << "8 TiB accepted with " << available << " bytes available";
  } catch (const InputError& e) {
    EXPECT_NE(
        std::string(e.what()).find("huge.npy: needs 8796093022208 bytes of memory for the array as float64"),
        std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(detail::require_memory(1 << 20, "small.npy", "the array"));
}

// --- write_file_atomic: only regular files are replaced -------------------------------------------------

std::span<const std::byte> as_bytes(const std::string& text) {
  return std::as_bytes(std::span(text.data(), text.size()));
}

std::string write_error(const std::filesystem::path& path, const std::string& text) {
  try {
    write_file_atomic(path, as_bytes(text));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string contents(const std::filesystem::path& path) {
  const auto bytes = test::raw_bytes(path);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

bool no_temporary_left(const std::filesystem::path& dir) {
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.path().filename().string().find(".tmp-") != std::string::npos) return false;
  return true;
}

TEST(ioWriteFile, RegularFileIsReplacedAndKeepsItsMode) {
  test::ScratchDir dir;
  write_file_atomic(dir / "out.npy", as_bytes("first"));
  std::filesystem::permissions(dir / "out.npy", std::filesystem::perms(0600));
  write_file_atomic(dir / "out.npy", as_bytes("second"));
  EXPECT_EQ(contents(dir / "out.npy"), "second");
  EXPECT_EQ(std::filesystem::status(dir / "out.npy").permissions(), std::filesystem::perms(0600));
  EXPECT_TRUE(no_temporary_left(dir.path()));
}

// The temporary file was ".NAME.tmp-XXXXXX": 16 bytes more than NAME, so a name of 240 bytes or more (up to
// the 255 the file system accepts) could not be written at all.
TEST(ioWriteFile, NamesUpToTheFileSystemLimitAreWritten) {
  test::ScratchDir dir;
  for (const std::size_t length : {std::size_t{240}, std::size_t{250}, std::size_t{255}}) {
    const std::string name = std::string(length - 4, 'a') + ".npy";
    write_file_atomic(dir / name, as_bytes("long"));
    EXPECT_EQ(contents(dir / name), "long") << length;
  }
  EXPECT_TRUE(no_temporary_left(dir.path()));
  const std::string too_long = std::string(252, 'a') + ".npy";  // 256 bytes: the rename itself fails
  EXPECT_THROW(write_file_atomic(dir / too_long, as_bytes("x")), InputError);
  EXPECT_TRUE(no_temporary_left(dir.path()));
}

TEST(ioWriteFile, TemporaryPrefixIsShortAndCutsNoCharacter) {
  EXPECT_EQ(temporary_prefix("dir/out.npy"), ".out.npy.");
  EXPECT_EQ(temporary_prefix(std::string(300, 'b')), "." + std::string(32, 'b') + ".");
  // "é" is two bytes (C3 A9): 31 ASCII bytes and then "é" would be cut after byte 32, inside it.
  const std::string accented = std::string(31, 'c') + "\xC3\xA9" + "tail";
  EXPECT_EQ(temporary_prefix(accented), "." + std::string(31, 'c') + ".");
}

TEST(ioWriteFile, CharacterDeviceIsWrittenThroughNotReplaced) {
  // As root, a rename over /dev/null would replace the real node with a regular file.
  const std::string message = write_error("/dev/null", "discarded");
  EXPECT_EQ(message, "");
  struct stat info {};
  ASSERT_EQ(::lstat("/dev/null", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode));
  // Through a symbolic link (as /dev/stdout is one) too: the link stays.
  test::ScratchDir dir;
  std::filesystem::create_symlink("/dev/null", dir / "null.npy");
  EXPECT_EQ(write_error(dir / "null.npy", "discarded"), "");
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "null.npy"));
}

TEST(ioWriteFile, SymbolicLinkToAFileIsRefusedAndBothAreUntouched) {
  test::ScratchDir dir;
  write_file_atomic(dir / "target.npy", as_bytes("precious"));
  std::filesystem::create_symlink(dir / "target.npy", dir / "link.npy");
  const std::string message = write_error(dir / "link.npy", "new");
  EXPECT_NE(message.find("link.npy: is a symbolic link; only regular files are replaced"), std::string::npos)
      << message;
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "link.npy"));
  EXPECT_EQ(contents(dir / "target.npy"), "precious");
  // A dangling link is refused as well (writing would create a file wherever it points).
  std::filesystem::create_symlink(dir / "nowhere.npy", dir / "dangling.npy");
  EXPECT_NE(write_error(dir / "dangling.npy", "new").find("is a symbolic link"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "nowhere.npy"));
  EXPECT_TRUE(no_temporary_left(dir.path()));
}

// With input protection on (the command-line tool), a file read is not replaced: not by its own name, not
// through a hard link, not through check_not_input; after release_input it is, and with protection off
// (the default, as in the Python module) every file is.
TEST(ioWriteFile, AnInputReadIsNotReplacedWhileProtectionIsOn) {
  test::ScratchDir dir;
  write_file_atomic(dir / "layer.npy", as_bytes("weights"));
  write_file_atomic(dir / "other.npy", as_bytes("other"));
  std::filesystem::create_hard_link(dir / "layer.npy", dir / "alias.npy");
  protect_inputs(true);
  (void)read_file_bytes(dir / "layer.npy");
  EXPECT_NE(write_error(dir / "layer.npy", "results").find("layer.npy: is also an input of this run"),
            std::string::npos);
  EXPECT_NE(write_error(dir / "alias.npy", "results").find("is also an input"), std::string::npos);
  EXPECT_THROW(check_not_input(dir / "alias.npy"), InputError);
  EXPECT_NO_THROW(check_not_input(dir / "other.npy"));
  EXPECT_EQ(contents(dir / "layer.npy"), "weights");
  EXPECT_TRUE(no_temporary_left(dir.path()));
  write_file_atomic(dir / "other.npy", as_bytes("replaced"));  // not read: replaced as before
  EXPECT_EQ(contents(dir / "other.npy"), "replaced");
  release_input(dir / "layer.npy");
  write_file_atomic(dir / "layer.npy", as_bytes("checkpoint"));
  EXPECT_EQ(contents(dir / "layer.npy"), "checkpoint");
  (void)read_file_bytes(dir / "other.npy");
  protect_inputs(false);
  write_file_atomic(dir / "other.npy", as_bytes("again"));
  EXPECT_EQ(contents(dir / "other.npy"), "again");
}

// check_replaceable says in advance what write_file_atomic would refuse, and writes nothing.
TEST(ioWriteFile, CheckReplaceableRefusesWhatTheWriterRefuses) {
  test::ScratchDir dir;
  EXPECT_NO_THROW(check_replaceable(dir / "absent.npy"));
  EXPECT_FALSE(std::filesystem::exists(dir / "absent.npy"));
  write_file_atomic(dir / "file.npy", as_bytes("x"));
  EXPECT_NO_THROW(check_replaceable(dir / "file.npy"));
  EXPECT_NO_THROW(check_replaceable("/dev/null"));
  std::filesystem::create_directory(dir / "folder.npy");
  EXPECT_THROW(check_replaceable(dir / "folder.npy"), InputError);
  std::filesystem::create_symlink(dir / "file.npy", dir / "link.npy");
  EXPECT_THROW(check_replaceable(dir / "link.npy"), InputError);
  EXPECT_EQ(contents(dir / "file.npy"), "x");
  EXPECT_TRUE(no_temporary_left(dir.path()));
}

TEST(ioWriteFile, DirectoryIsRefused) {
  test::ScratchDir dir;
  std::filesystem::create_directory(dir / "out.npy");
  EXPECT_NE(
      write_error(dir / "out.npy", "x").find("out.npy: is a directory; only a regular file is replaced"),
      std::string::npos);
  EXPECT_TRUE(std::filesystem::is_directory(dir / "out.npy"));
}

TEST(ioWriteFile, FifoIsWrittenToWhenReadAndRefusedAtOnceWhenNot) {
  test::ScratchDir dir;
  const auto fifo = dir / "out.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Nobody reads it: refused without blocking, and it stays a FIFO.
  EXPECT_NE(write_error(fifo, "x").find("is a FIFO (named pipe) that no process is reading"),
            std::string::npos);
  // A reader is waiting: the bytes go through the FIFO.
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  EXPECT_EQ(write_error(fifo, "through the pipe"), "");
  char buffer[64] = {};
  EXPECT_EQ(::read(reader, buffer, sizeof buffer), 16);
  EXPECT_EQ(std::string(buffer), "through the pipe");
  ::close(reader);
  struct stat info {};
  ASSERT_EQ(::lstat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));
  EXPECT_TRUE(no_temporary_left(dir.path()));
}

TEST(ioWriteFile, ReaderClosingThePipeGivesAnErrorNotSigpipe) {
  int ends[2];
  ASSERT_EQ(::pipe(ends), 0);
  const std::string path = "/proc/self/fd/" + std::to_string(ends[1]);  // a symbolic link to the pipe
  const std::string big(1 << 20, 'x');                                  // more than the pipe's buffer
  std::string message;
  std::thread writer([&] { message = write_error(path, big); });
  char first = 0;
  ASSERT_EQ(::read(ends[0], &first, 1), 1);  // the writer is writing; the buffer cannot hold the rest
  ::close(ends[0]);
  writer.join();  // without the SIGPIPE handling the whole test process would have been killed
  ::close(ends[1]);
  EXPECT_NE(message.find("the reading end of the pipe was closed"), std::string::npos) << message;
}

}  // namespace
}  // namespace regatta::io
