#pragma once
// The driver shared by `verify --instances` and `certify`: a list of independent tasks (instances, rows)
// whose results are strings, computed in one process or over the ranks of `mpirun -n K` (mpi_tasks.hpp),
// with an optional checkpoint file of the finished ones (docs/verify.md#several-processes-mpi,
// docs/verify.md#checkpoints).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mpi_tasks.hpp"

namespace regatta::cli {

/// How one process computes the tasks `pending` (the default: one after the other, in order). done() must be
/// called on one thread at a time.
using LocalRunner =
    std::function<void(const std::vector<long>& pending, const mpi::Task& task, const mpi::Done& done)>;
void run_in_order(const std::vector<long>& pending, const mpi::Task& task, const mpi::Done& done);

/// --checkpoint FILE: the results of the finished tasks, rewritten atomically (temporary file and rename)
/// after each. `format` names the command's kind of checkpoint; `fingerprint` describes everything the
/// results depend on (the inputs' contents, the options): a file with another format or fingerprint is
/// refused (InputError naming the file) rather than mixed into this run's results.
struct TaskCheckpoint {
  std::string path;  ///< empty: none
  std::string format;
  nlohmann::json fingerprint;
};

/// CRC-32 and size of a file's bytes, for a fingerprint: {"file": path, "bytes": N, "crc32": C}.
nlohmann::json file_fingerprint(const std::string& path);

/// Throws InputError naming `option` when FILE cannot be a checkpoint (its folder missing, a directory, an
/// input of the run): checked before anything is computed.
void check_checkpoint_path(const std::string& option, const std::string& file);

/// Under mpirun on a rank > 0: computes the tasks rank 0 sends and returns false (the rank writes nothing).
/// Otherwise (rank 0, or one process) returns true once done(i, result) has run for every i in [0, count):
/// first, in index order, for the results the checkpoint already holds; then for the others as they finish
/// (each written to the checkpoint before done sees it), over the ranks, or by `local` in one process.
/// The first failing task's exception is rethrown on rank 0 (mpi::distribute).
bool run_tasks(long count, const mpi::Task& task, const mpi::Done& done, const TaskCheckpoint& checkpoint,
               const LocalRunner& local = run_in_order);

/// The number of processes this run has (1 when not under mpirun); refuses (InputError "mpirun") to run
/// under mpirun when built without MPI.
int process_count();

#ifdef REGATTA_HAVE_MPI
namespace mpi {
class Session;
}
/// For `processes` > 1 (process_count()): MPI initialised for this run, and one thread per process (the
/// ranks are the parallelism); nullptr for one process. The caller's rank > 0 serves rank 0.
std::unique_ptr<mpi::Session> open_mpi_session(int processes);
#endif

}  // namespace regatta::cli
