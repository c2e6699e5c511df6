#pragma once
// Independent tasks spread over the ranks of `mpirun -n K regatta ...` (cli/mpi_tasks.cpp, built only when
// CMake finds MPI: REGATTA_HAVE_MPI): the instances of `verify --instances` and the rows of `certify`
// (docs/verify.md#several-processes-mpi). Scheduling is dynamic: rank 0 hands out the next task index to
// whichever rank is free, rank 0 itself computing on a second thread while its main thread answers the
// workers; every result (a string the caller encodes) comes back to rank 0, which alone writes output.
#include <functional>
#include <string>
#include <vector>

namespace regatta::cli::mpi {

/// Computes task `index` on any rank and returns its result, encoded; an exception is carried to rank 0.
using Task = std::function<std::string(long index)>;
/// Rank 0, main thread: one finished task, in the order they finish.
using Done = std::function<void(long index, const std::string& result)>;

#ifdef REGATTA_HAVE_MPI
/// Rank 0 of `size` ranks: runs task(i) for every i of `pending` (each exactly once, over all ranks), calling
/// done(i, result) for each on this thread. When a task throws, no further task is handed out; the tasks in
/// flight finish (and are passed to done), and then the failure of the lowest index is rethrown (an
/// InputError as an InputError, anything else as std::runtime_error with its message). The workers are told
/// to stop in every case.
void distribute(const std::vector<long>& pending, const Task& task, const Done& done, int size);
/// Ranks > 0: compute the tasks rank 0 sends until it says stop.
void serve(const Task& task);
/// Rank 0, when it fails before distribute(): tells the workers to stop.
void stop_serving(int size);
#endif

}  // namespace regatta::cli::mpi
