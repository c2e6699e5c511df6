#pragma once
// `mpirun -n K regatta lipschitz ...`: the branch-and-bound frontier shared over MPI (cli/lipschitz_mpi.cpp,
// built only when CMake finds MPI: REGATTA_HAVE_MPI). Rank 0 owns the state and the checkpoint and evaluates
// boxes itself; the other ranks evaluate the boxes it sends them. Load balancing is dynamic within each
// batch: a rank that returns a chunk of results gets the next chunk. The results are applied in the batch's
// own order, so the bracket is the same for any number of ranks (and the same as in one process).
#include <functional>

#include <regatta/operators/lipschitz/branch_bound.hpp>

namespace regatta::cli::mpi {

/// The number of processes mpirun (OpenMPI, MPICH/Hydra or PMIx) says it started, read from the
/// environment without initialising MPI (1 when not launched by mpirun).
int launched_size();

/// Whether this executable was built with MPI.
bool available();

#ifdef REGATTA_HAVE_MPI
/// MPI_Init on construction, MPI_Finalize on destruction (also on an exception).
class Session {
 public:
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  int rank_ = 0, size_ = 1;
};

/// Rank 0: runs the search like lip::run_branch_bound, the batches evaluated by every rank; then tells the
/// workers to stop (also when it throws).
void master(const lip::BranchBound& problem, lip::BnbState& state,
            const std::function<bool(const lip::BnbState&)>& should_stop,
            const std::function<void(const lip::BnbState&)>& on_step, int size);
/// Ranks > 0: evaluate chunks until rank 0 says stop.
void worker(const lip::BranchBound& problem);
/// Rank 0, when it fails before master(): tells the workers to stop.
void stop_workers(int size);
#endif

}  // namespace regatta::cli::mpi
