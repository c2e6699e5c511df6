#pragma once
// The report's output directory. A run writes into a staging directory beside the target
// (PARENT/.NAME.partial-PID, NAME cut to its first 32 bytes so that any valid target name leaves room for the
// suffix) and commit() swaps it in with one rename at the end, so the target is always one
// whole report of one run: an interrupted or failed run leaves the previous report (or nothing) in place,
// never a mixture of two runs' pieces. Inside the staging directory every file is still written atomically
// (io::write_file_atomic). While the run lasts, SIGINT, SIGTERM and SIGHUP remove the staging directory
// (temporary files included) and end the process with exit code 128 + signal (see interrupt.hpp).
//
// Layout:  DIR/summary.md, DIR/index.html, DIR/report.json
//          DIR/tables/<id>.csv, DIR/tables/<id>.json
//          DIR/plots/<id>.svg, .png (rendered by gnuplot), .gp (the script), .dat (the data)
//          DIR/proofs-check/ (counterexample files of section 5)
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace regatta::cli::report {

class InterruptGuard;

class OutputDir {
 public:
  /// Checks `target` (a directory to create, or an existing directory that is empty or holds a previous
  /// report: only summary.md, index.html, report.json, tables/, plots/ and proofs-check/) and creates the
  /// staging directory
  /// with tables/ and plots/. Throws InputError("--out", …) otherwise, before anything is computed.
  explicit OutputDir(std::filesystem::path target);
  /// Removes the staging directory unless commit() ran.
  ~OutputDir();
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

  /// Where files are written during the run (the staging directory).
  const std::filesystem::path& root() const { return staging_; }
  /// Where the report ends up.
  const std::filesystem::path& target() const { return target_; }
  std::filesystem::path path(const std::string& relative) const { return staging_ / relative; }

  /// Atomically replaces root/relative with `text` and records it. Throws InputError naming the file.
  void write(const std::string& relative, const std::string& text);
  /// Records a file that another program produced under root (already in place).
  void record(const std::string& relative);

  /// Files written in this run, relative to root, in order.
  const std::vector<std::string>& files() const { return files_; }

  /// Replaces the target by the staging directory (an atomic exchange where the file system supports it)
  /// and removes the previous report. Throws InputError("--out", …) when the rename fails.
  void commit();

 private:
  std::filesystem::path target_, staging_;
  std::vector<std::string> files_;
  std::unique_ptr<InterruptGuard> guard_;
  bool committed_ = false;
};

}  // namespace regatta::cli::report
