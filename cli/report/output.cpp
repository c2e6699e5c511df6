// The report's output directory (see output.hpp).
#include "output.hpp"

#include <algorithm>
#include <cstddef>
#include <span>
#include <system_error>

#include <regatta/core/error.hpp>
#include <regatta/core/io/file_bytes.hpp>

namespace regatta::cli::report {

namespace {

void ensure_directory(const std::filesystem::path& dir) {
  std::error_code ec;
  const auto status = std::filesystem::status(dir, ec);
  if (std::filesystem::exists(status)) {
    if (!std::filesystem::is_directory(status))
      throw InputError("--out", "'" + dir.string() + "' exists and is not a directory");
    return;
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError("--out", "cannot create directory '" + dir.string() + "': " + ec.message());
}

}  // namespace

OutputDir::OutputDir(std::filesystem::path root) : root_(std::move(root)) {
  if (root_.empty()) throw InputError("--out", "is empty");
  ensure_directory(root_);
  ensure_directory(root_ / "tables");
  ensure_directory(root_ / "plots");
}

void OutputDir::write(const std::string& relative, const std::string& text) {
  const auto* data = reinterpret_cast<const std::byte*>(text.data());
  io::write_file_atomic(root_ / relative, std::span<const std::byte>(data, text.size()));
  record(relative);
}

void OutputDir::record(const std::string& relative) {
  if (std::find(files_.begin(), files_.end(), relative) == files_.end()) files_.push_back(relative);
}

}  // namespace regatta::cli::report
