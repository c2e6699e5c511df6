#pragma once
// Internal: independent forward-mode passes of the region forms (second_order.cpp, hessian_sweep.hpp) on
// OpenMP threads.
#include <omp.h>

#include <atomic>
#include <cstddef>
#include <exception>
#include <functional>

#include <regatta/core/eigen.hpp>

namespace regatta::lip::detail {

/// Runs task(q) for q = 0 … count − 1 on OpenMP threads (dynamic schedule, one task at a time). Each task
/// must write only its own outputs; the caller combines them in the order of q, so that results do not depend
/// on the number of threads. `on_calling_thread(q)`, when set, runs before task q on the calling thread only
/// (team thread 0), for progress reports and polls that must stay there (the Python module's interrupt
/// check). The first exception thrown by either is rethrown once every thread has stopped; after it (or once
/// `stop` returns true, polled between tasks) no new task starts.
inline void parallel_passes(Eigen::Index count, const std::function<void(Eigen::Index)>& task,
                            const std::function<void(Eigen::Index)>& on_calling_thread = {},
                            const std::function<bool()>& stop = {}) {
  std::atomic<bool> halted{false};
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1)
  for (std::ptrdiff_t q = 0; q < std::ptrdiff_t(count); ++q) {
    if (halted.load()) continue;
    try {
      if (on_calling_thread && omp_get_thread_num() == 0) on_calling_thread(Eigen::Index(q));
      task(Eigen::Index(q));
      if (stop && stop()) halted = true;
    } catch (...) {
#pragma omp critical(regatta_parallel_passes_failure)
      if (!failure) failure = std::current_exception();
      halted = true;
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace regatta::lip::detail
