#pragma once
// Interrupting a report: while an InterruptGuard lives, SIGINT, SIGTERM and SIGHUP are blocked in every
// thread started afterwards (OpenMP's included) and taken by a watcher thread (sigtimedwait), which
// terminates the helper program that is running (gnuplot), removes the staging directory and ends the
// process with 128 + signal. Construct it before any other thread exists (the report does so first thing).
#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

namespace regatta::cli::report {

class InterruptGuard {
 public:
  explicit InterruptGuard(std::filesystem::path staging);
  /// Stops the watcher and restores the signal mask (a signal received meanwhile then acts as usual).
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

  /// Held while the staging directory is being swapped in, so that the watcher never removes it halfway.
  std::mutex& swap_mutex() { return mutex_; }

 private:
  void watch();
  std::filesystem::path staging_;
  std::mutex mutex_;
  std::atomic<bool> stop_{false};
  std::thread watcher_;
  sigset_t previous_{};
};

/// The helper program running now (0: none); an interrupt terminates it first. Set by run_program.
void set_running_child(pid_t pid);

/// The signal mask a child process should start with (what was in force before any InterruptGuard), applied
/// in the child between fork and exec so that gnuplot stays interruptible.
void restore_child_signal_mask();

}  // namespace regatta::cli::report
