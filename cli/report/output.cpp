// The report's output directory (see output.hpp).
#include "output.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <set>
#include <span>
#include <system_error>

#include <regatta/core/error.hpp>
#include <regatta/core/io/file_bytes.hpp>
#include "interrupt.hpp"

namespace regatta::cli::report {

namespace {

void ensure_directory(const std::filesystem::path& dir, const std::filesystem::path& shown) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw InputError("--out",
                     "cannot create directory " + regatta::quoted(shown.string()) + ": " + ec.message());
}

/// What a previous report leaves in its directory (output.hpp's layout).
bool report_entry(const std::string& name) {
  static const std::set<std::string> names{"summary.md", "index.html", "report.json",
                                           "tables",     "plots",      "proofs-check"};
  return names.count(name) != 0;
}

/// Throws unless `target` is absent, or an empty directory, or a previous report's directory.
void check_target(const std::filesystem::path& target) {
  std::error_code ec;
  const auto status = std::filesystem::symlink_status(target, ec);
  if (!std::filesystem::exists(status)) return;
  if (!std::filesystem::is_directory(status))
    throw InputError("--out", regatta::quoted(target.string()) + " exists and is not a directory");
  for (const auto& entry : std::filesystem::directory_iterator(target, ec)) {
    const std::string name = entry.path().filename().string();
    if (!report_entry(name))
      throw InputError("--out", regatta::quoted(target.string()) + " holds " + regatta::quoted(name) +
                                    ", which is not part of a regatta report; give a new or empty directory, "
                                    "or a previous report's (it is replaced as a whole)");
  }
  if (ec)
    throw InputError("--out",
                     "cannot read directory " + regatta::quoted(target.string()) + ": " + ec.message());
}

}  // namespace

OutputDir::OutputDir(std::filesystem::path target) : target_(std::move(target)) {
  if (target_.empty()) throw InputError("--out", "is empty");
  while (!target_.empty() && !target_.has_filename()) target_ = target_.parent_path();  // "dir/" -> "dir"
  if (target_.empty() || target_.filename() == "." || target_.filename() == "..")
    throw InputError("--out", "must name a directory, e.g. regatta-report");
  check_target(target_);
  const std::filesystem::path parent = target_.parent_path();
  if (!parent.empty()) ensure_directory(parent, parent);
  staging_ = (parent.empty() ? std::filesystem::path(".") : parent) /
             (io::temporary_prefix(target_) + "partial-" + std::to_string(::getpid()));
  std::error_code ec;
  std::filesystem::remove_all(staging_, ec);  // a stale one of a crashed run that had this process id
  guard_ = std::make_unique<InterruptGuard>(staging_);
  ensure_directory(staging_ / "tables", target_);
  ensure_directory(staging_ / "plots", target_);
}

OutputDir::~OutputDir() {
  if (!committed_) {
    std::error_code ec;
    std::filesystem::remove_all(staging_, ec);
  }
  guard_.reset();
}

void OutputDir::write(const std::string& relative, const std::string& text) {
  const auto* data = reinterpret_cast<const std::byte*>(text.data());
  io::write_file_atomic(staging_ / relative, std::span<const std::byte>(data, text.size()));
  record(relative);
}

void OutputDir::record(const std::string& relative) {
  if (std::find(files_.begin(), files_.end(), relative) == files_.end()) files_.push_back(relative);
}

void OutputDir::commit() {
  const std::lock_guard<std::mutex> lock(guard_->swap_mutex());
  check_target(target_);  // nothing foreign appeared meanwhile
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(target_, ec))) {
    std::filesystem::rename(staging_, target_, ec);
    if (ec)
      throw InputError(
          "--out", "cannot move the report into " + regatta::quoted(target_.string()) + ": " + ec.message());
    committed_ = true;
    return;
  }
  // One atomic exchange: the target is the new report at every instant; the old one lands at staging_.
  if (::renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS)
      throw InputError("--out",
                       "cannot replace " + regatta::quoted(target_.string()) + ": " + std::strerror(errno));
    // No exchange on this file system: move the old report aside, then the new one in.
    const std::filesystem::path old = staging_.string() + ".old";
    std::filesystem::rename(target_, old, ec);
    if (!ec) std::filesystem::rename(staging_, target_, ec);
    if (ec)
      throw InputError("--out", "cannot replace " + regatta::quoted(target_.string()) + ": " + ec.message());
    std::filesystem::remove_all(old, ec);
    committed_ = true;
    return;
  }
  committed_ = true;
  std::filesystem::remove_all(staging_, ec);  // the previous report
}

}  // namespace regatta::cli::report
