// Interrupting a report (see interrupt.hpp).
#include "interrupt.hpp"

#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <system_error>

namespace regatta::cli::report {

namespace {

std::atomic<pid_t> running_child{0};
sigset_t child_mask;  // the mask before the first guard; written once, before any child is forked
std::atomic<bool> child_mask_set{false};

sigset_t interrupt_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

}  // namespace

void set_running_child(pid_t pid) { running_child.store(pid); }

void restore_child_signal_mask() {
  if (child_mask_set.load()) sigprocmask(SIG_SETMASK, &child_mask, nullptr);
}

InterruptGuard::InterruptGuard(std::filesystem::path staging) : staging_(std::move(staging)) {
  const sigset_t set = interrupt_signals();
  pthread_sigmask(SIG_BLOCK, &set, &previous_);
  if (!child_mask_set.exchange(true)) child_mask = previous_;
  watcher_ = std::thread([this] { watch(); });
}

InterruptGuard::~InterruptGuard() {
  stop_.store(true);
  watcher_.join();
  pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

void InterruptGuard::watch() {
  const sigset_t set = interrupt_signals();
  const timespec tick{0, 50 * 1000 * 1000};  // 50 ms: how soon the destructor's stop is seen
  while (!stop_.load()) {
    const int sig = sigtimedwait(&set, nullptr, &tick);
    if (sig < 0) continue;  // timeout or EINTR
    if (const pid_t child = running_child.load(); child > 0) ::kill(child, SIGTERM);
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      // The main thread may still be writing into the directory: retry until it is gone.
      for (int attempt = 0; attempt < 20; ++attempt) {
        std::error_code ec;
        std::filesystem::remove_all(staging_, ec);
        if (!std::filesystem::exists(staging_, ec)) break;
      }
    }
    std::_Exit(128 + sig);
  }
}

}  // namespace regatta::cli::report
