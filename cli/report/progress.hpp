#pragma once
// The progress printers of every command, all on stderr:
//   Progress       a bar for a task of known size (report, certify). On a terminal the bar is redrawn in
//   place
//                  (at most ten times a second); otherwise (a log file, a pipe) one line is printed when a
//                  task starts and one when it ends, so logs stay short.
//   StageProgress  named stages of a library call (the lip::Progress hook of regatta local): lines once the
//                  command has run for a second.
//   progress_line  one line "<command>: <text>" (bracket, measure-lipschitz, lipschitz), the form of all of
//                  them.
#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <string_view>

namespace regatta::cli::report {

class Progress {
 public:
  /// A task of `total` ≥ 1 steps; `enabled` = false prints nothing.
  Progress(std::string label, long total, bool enabled);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void advance(long steps = 1);
  /// Marks the task complete (called by the destructor when not called before).
  void finish();

 private:
  void draw(bool final);

  std::string label_;
  long total_, done_ = 0;
  bool enabled_, tty_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

/// Writes "<command>: <text>" and a newline to stderr.
void progress_line(std::string_view command, std::string_view text);

/// Progress lines of named stages once the command has run for a second: the start and end of one-step stages
/// (total = 1; the end only when the stage took a second or its start was shown), and loops (total > 1) at
/// most every two seconds. Each line is progress_line(command, ...). Also keeps the wall-clock seconds of
/// every finished stage.
class StageProgress {
 public:
  explicit StageProgress(std::string command) : command_(std::move(command)) {}
  /// Stage `stage` has done `done` of `total` steps.
  void operator()(std::string_view stage, std::ptrdiff_t done, std::ptrdiff_t total);
  /// Wall-clock seconds of every finished stage.
  const std::map<std::string, double>& seconds() const { return seconds_; }

 private:
  std::string command_;
  std::map<std::string, double> seconds_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now(), stage_start_{}, last_{};
  std::string stage_;
  bool shown_ = false;
};

}  // namespace regatta::cli::report
