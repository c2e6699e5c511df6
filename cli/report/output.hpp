#pragma once
// The report's output directory: every file is written atomically (a temporary file in the same directory,
// flushed, then renamed over the target: io::write_file_atomic), so a reader — or a second run — never sees a
// half-written table, page or plot. The directory keeps a list of what this run wrote, for the summary.
//
// Layout:  DIR/summary.md, DIR/index.html, DIR/report.json
//          DIR/tables/<id>.csv, DIR/tables/<id>.json
//          DIR/plots/<id>.svg, .png (rendered by gnuplot), .gp (the script), .dat (the data)
#include <filesystem>
#include <string>
#include <vector>

namespace regatta::cli::report {

class OutputDir {
 public:
  /// Creates `root`, root/tables and root/plots when missing. Throws InputError("--out", …) when `root` (or
  /// one of the subdirectories) exists but is not a directory, or cannot be created or written.
  explicit OutputDir(std::filesystem::path root);

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path path(const std::string& relative) const { return root_ / relative; }

  /// Atomically replaces root/relative with `text` and records it. Throws InputError naming the file.
  void write(const std::string& relative, const std::string& text);
  /// Records a file that another program produced under root (already in place).
  void record(const std::string& relative);

  /// Files written in this run, relative to root, in order.
  const std::vector<std::string>& files() const { return files_; }

 private:
  std::filesystem::path root_;
  std::vector<std::string> files_;
};

}  // namespace regatta::cli::report
