#pragma once
// The machine resources a computation may use: the cores of this process (its CPU affinity mask) and the
// threads regatta runs on them, and the memory a request may need before it is allocated.
//
// Threads: configure_threads is the one place that sets the number of OpenMP threads. Nothing else in regatta
// calls omp_set_num_threads outside a parallel region. Parallel regions are coarse: regatta's own loops over
// blocks of queries or rows, each entered only with at least min_parallel_work per thread (threads_for).
// Eigen's products run on one thread (Eigen::setNbThreads(1)): Eigen opens a parallel region for every
// product above ~10^5 multiply-adds, and on a loaded machine each such region waits for a descheduled
// thread — the cause of `local` running 1.5–45x slower on two threads than on one (bench/RESULTS.md).
#include <cstdint>
#include <string>
#include <string_view>

namespace regatta {

/// The cores this process may run on: the size of its affinity mask (sched_getaffinity), at least 1.
int available_cores();

/// What configure_threads decided, and why, for one line of diagnostics.
struct ThreadSetting {
  int threads = 1;   ///< the OpenMP threads regatta now uses
  std::string note;  ///< empty, or why the request was changed (e.g. OMP_NUM_THREADS above the cores)
};

/// Sets the OpenMP thread count once for the process. `requested` > 0 (e.g. --threads N) is used up to
/// available_cores() (more threads than cores only slow a computation down; `note` says so); otherwise the
/// value of OMP_NUM_THREADS when it is a number in [1, available_cores()], otherwise available_cores(). An
/// OMP_NUM_THREADS that is not a positive number, or more than the cores, is replaced by available_cores()
/// and `note` says so.
ThreadSetting configure_threads(int requested = 0);

/// The OpenMP threads a parallel region started now would use (omp_get_max_threads()).
int current_threads();

/// Multiply-adds (or comparable operations) below which a thread is not worth its start-up and
/// synchronisation: about a millisecond of work, so that a parallel region costs little even when one of its
/// threads waits for a core on a loaded machine.
inline constexpr double min_parallel_work = 2e6;

/// Threads for a parallel region doing `work` operations: current_threads() at most, one per
/// min_parallel_work, at least 1.
int threads_for(double work);

/// Bytes of memory a single computation may allocate: the physical memory of the machine, capped by the
/// address-space limit (RLIMIT_AS) and the cgroup memory limit where they are set.
std::uint64_t available_memory_bytes();

/// Throws InputError(subject, ...) when `bytes` (an estimate of what `what` needs, e.g. "the attention
/// matrices") exceeds available_memory_bytes(); the message gives both sizes. Call before allocating.
void check_memory(std::string_view subject, double bytes, std::string_view what);

/// `bytes` as a short human text ("3.2 GiB").
std::string format_bytes(double bytes);

/// Keeps freed heap memory in the process instead of returning it to the system (glibc: M_TRIM_THRESHOLD
/// 1 GiB and M_MMAP_THRESHOLD 32 MiB, fixed; elsewhere nothing). For commands that allocate and free
/// the same large temporaries many times per second (the region passes of `certify`, megabytes each):
/// otherwise every allocation is mapped afresh and faulted in page by page, about 15 % of their time.
void retain_freed_memory();

}  // namespace regatta
