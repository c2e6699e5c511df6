#pragma once
// A wall-clock deadline as a stop flag: `passed` becomes true once `seconds` have elapsed, or as soon as the
// caller's own stop flag `outer` (may be null; polled every 20 ms) is set. Long computations that take a
// `const std::atomic<bool>*` stop flag (graph::verify, the affine passes) check it between steps, so a step
// in flight at the deadline ends there. A thread waits on a condition variable; the destructor wakes and
// joins it.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace regatta {

class Deadline {
 public:
  explicit Deadline(double seconds, const std::atomic<bool>* outer = nullptr)
      : thread_([this, seconds, outer] {
          using Clock = std::chrono::steady_clock;
          const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(std::max(0.0, seconds)));
          std::unique_lock lock(mutex_);
          while (!done_) {
            const auto now = Clock::now();
            if (now >= end || (outer != nullptr && outer->load(std::memory_order_relaxed))) {
              passed = true;
              return;
            }
            wake_.wait_for(lock, std::min<Clock::duration>(end - now, std::chrono::milliseconds(20)));
          }
        }) {}
  ~Deadline() {
    {
      const std::lock_guard lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

  std::atomic<bool> passed{false};

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace regatta
