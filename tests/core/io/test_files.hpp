#pragma once
// Shared helpers for the I/O tests: fixture paths, a scratch directory, raw file bytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <regatta/core/io/array.hpp>

namespace regatta::io::test {

/// An Array with the given shape and row-major data (source "test").
inline Array make_array(std::vector<std::size_t> shape, std::vector<double> data) {
  Array a;
  a.shape = std::move(shape);
  a.data = std::move(data);
  a.source = "test";
  return a;
}

inline std::filesystem::path data_dir() { return std::filesystem::path(REGATTA_TEST_DATA_DIR); }
inline std::filesystem::path valid_file(const std::string& name) { return data_dir() / "valid" / name; }

/// A fresh directory under the system temp dir, removed on destruction.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() / ("regatta_io_" + std::string(info->test_suite_name()) +
                                                      "_" + info->name() + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

inline std::vector<std::byte> raw_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  for (std::size_t i = 0; i < chars.size(); ++i) out[i] = static_cast<std::byte>(chars[i]);
  return out;
}

inline std::vector<double> arange(std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<double>(i);
  return v;
}

}  // namespace regatta::io::test
