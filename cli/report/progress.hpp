#pragma once
// Progress bars on stderr. On a terminal the bar is redrawn in place (at most ten times a second); otherwise
// (a log file, a pipe) one line is printed when a task starts and one when it ends, so logs stay short.
#include <chrono>
#include <string>

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

}  // namespace regatta::cli::report
