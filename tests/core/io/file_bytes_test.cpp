// read_file_bytes is the one place every reader (.npy, .npz, .safetensors, JSON) opens a file: inputs that
// are not regular files are refused at once with one line, whatever they are, and never block.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <regatta/core/error.hpp>
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

}  // namespace
}  // namespace regatta::io
