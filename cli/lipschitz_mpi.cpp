// The MPI driver of `regatta lipschitz` (see lipschitz_mpi.hpp).
#include "lipschitz_mpi.hpp"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <list>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace regatta::cli::mpi {

namespace {

// Messages are arrays of doubles (every integer sent is below 2^53, so it is exact).
constexpr int tag_work = 1;  // rank 0 → worker: [threshold, first index, count, (lo, hi) per box]
constexpr int tag_result =
    2;  // worker → rank 0: [first index, count, (feasible, upper, lower, point) per box]
constexpr int tag_stop = 3;  // rank 0 → worker: empty

/// Boxes per work message: a share of what is left of the batch (guided scheduling). Early messages carry
/// many boxes (few messages, few polls), the last ones a single box, so that at the end of a batch, where
/// every rank must wait for the slowest, no rank holds more than a box or two of work (measured with two
/// ranks: rank 0 waited 0.3 s of a 9 s run for the last chunks; bench/RESULTS.md).
std::size_t chunk_size(std::size_t remaining, int ranks) {
  constexpr std::size_t largest = 32;
  return std::clamp<std::size_t>(remaining / (2 * std::size_t(ranks)), 1, largest);
}

void check(int code, const char* what) {
  if (code != MPI_SUCCESS) throw std::runtime_error(std::string("MPI error in ") + what);
}

/// Waits for a message without spinning: MPI_Probe busy-polls in OpenMPI, taking a core from the rank that
/// computes (on a machine with as many cores as ranks, or a shared one). A box takes about a millisecond,
/// so sleeping 20 µs between polls costs little latency.
MPI_Status wait_for(int source, int tag) {
  for (;;) {
    int flag = 0;
    MPI_Status status;
    check(MPI_Iprobe(source, tag, MPI_COMM_WORLD, &flag, &status), "MPI_Iprobe");
    if (flag) return status;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

/// Messages sent without waiting for the receiver. A blocking MPI_Send of even a few hundred bytes returned
/// here (OpenMPI 4.1, ob1/vader) only once the receiving rank next entered MPI, i.e. after it had finished
/// its current chunk: rank 0 then waited a chunk's time per message and the workers did all the work. Each
/// message keeps its buffer until its request completes (completed ones are reaped at every send).
class Outbox {
 public:
  Outbox() = default;
  Outbox(const Outbox&) = delete;
  Outbox& operator=(const Outbox&) = delete;
  ~Outbox() { wait_all(); }

  void send(std::vector<double> data, int rank, int tag) {
    reap();
    pending_.push_back({std::move(data), MPI_REQUEST_NULL});
    Pending& p = pending_.back();
    check(MPI_Isend(p.data.data(), int(p.data.size()), MPI_DOUBLE, rank, tag, MPI_COMM_WORLD, &p.request),
          "MPI_Isend");
  }
  void wait_all() {
    for (Pending& p : pending_) MPI_Wait(&p.request, MPI_STATUS_IGNORE);
    pending_.clear();
  }

 private:
  struct Pending {
    std::vector<double> data;
    MPI_Request request;
  };
  void reap() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      int done = 0;
      check(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      it = done ? pending_.erase(it) : std::next(it);
    }
  }
  std::list<Pending> pending_;  // a list: a buffer never moves while its send is in flight
};

}  // namespace

bool available() { return true; }

Session::Session() {
  int initialised = 0;
  check(MPI_Initialized(&initialised), "MPI_Initialized");
  if (!initialised) check(MPI_Init(nullptr, nullptr), "MPI_Init");
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
}

Session::~Session() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised) MPI_Finalize();
}

void stop_workers(int size) {
  for (int r = 1; r < size; ++r) MPI_Send(nullptr, 0, MPI_DOUBLE, r, tag_stop, MPI_COMM_WORLD);
}

void worker(const lip::BranchBound& problem) {
  const std::size_t k = std::size_t(problem.dimension());
  std::vector<double> in;
  Outbox outbox;  // results go out while the next chunk is evaluated
  for (;;) {
    const MPI_Status status = wait_for(0, MPI_ANY_TAG);
    int count = 0;
    MPI_Get_count(&status, MPI_DOUBLE, &count);
    in.resize(std::size_t(count));
    check(MPI_Recv(in.data(), count, MPI_DOUBLE, 0, status.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
          "MPI_Recv");
    if (status.MPI_TAG == tag_stop) return;
    const double threshold = in[0];
    const std::size_t first = std::size_t(in[1]), boxes = std::size_t(in[2]);
    std::vector<double> out{double(first), double(boxes)};
    lip::BnbBox box;
    for (std::size_t b = 0; b < boxes; ++b) {
      const double* p = in.data() + 3 + b * 2 * k;
      box.lo.assign(p, p + k);
      box.hi.assign(p + k, p + 2 * k);
      const lip::BnbEvaluation e = problem.evaluate(box, threshold);
      out.push_back(e.feasible ? 1 : 0);
      out.push_back(e.upper);
      out.push_back(e.lower);
      std::vector<double> point = e.point;
      point.resize(k, 0.0);
      out.insert(out.end(), point.begin(), point.end());
    }
    outbox.send(std::move(out), 0, tag_result);
  }
}

void master(const lip::BranchBound& problem, lip::BnbState& state,
            const std::function<bool(const lip::BnbState&)>& should_stop,
            const std::function<void(const lip::BnbState&)>& on_step, int size) {
  const std::size_t k = std::size_t(problem.dimension());
  try {
    std::vector<double> incoming;
    Outbox outbox;
    while (!problem.done(state) && !(should_stop && should_stop(state))) {
      const double threshold = problem.threshold(state);
      std::vector<lip::BnbBox> boxes = problem.split_batch(state);
      std::vector<lip::BnbEvaluation> results(boxes.size());
      std::size_t next = 0, received = 0;
      int busy = 0;
      const auto send_chunk = [&](int rank) {
        const std::size_t count = std::min(chunk_size(boxes.size() - next, size), boxes.size() - next);
        std::vector<double> message{threshold, double(next), double(count)};
        for (std::size_t b = next; b < next + count; ++b) {
          message.insert(message.end(), boxes[b].lo.begin(), boxes[b].lo.end());
          message.insert(message.end(), boxes[b].hi.begin(), boxes[b].hi.end());
        }
        next += count;
        ++busy;
        outbox.send(std::move(message), rank, tag_work);
      };
      const auto take_result = [&](const MPI_Status& status) {
        int count = 0;
        MPI_Get_count(&status, MPI_DOUBLE, &count);
        incoming.resize(std::size_t(count));
        check(MPI_Recv(incoming.data(), count, MPI_DOUBLE, status.MPI_SOURCE, tag_result, MPI_COMM_WORLD,
                       MPI_STATUS_IGNORE),
              "MPI_Recv");
        --busy;
        const std::size_t first = std::size_t(incoming[0]), n = std::size_t(incoming[1]);
        for (std::size_t b = 0; b < n; ++b) {
          const double* p = incoming.data() + 2 + b * (3 + k);
          lip::BnbEvaluation& e = results[first + b];
          e.feasible = p[0] != 0;
          e.upper = p[1];
          e.lower = p[2];
          e.point.assign(p + 3, p + 3 + k);
        }
        received += n;
        if (next < boxes.size()) send_chunk(status.MPI_SOURCE);
      };
      // Two chunks in flight per worker: while rank 0 finishes the box it is evaluating, a worker that
      // returned a chunk already works on its second one instead of waiting for the next message.
      for (int ahead = 0; ahead < 2; ++ahead)
        for (int r = 1; r < size && next < boxes.size(); ++r) send_chunk(r);
      // Rank 0 evaluates one box at a time from the same queue, answering workers in between.
      while (next < boxes.size()) {
        const std::size_t mine = next++;
        results[mine] = problem.evaluate(boxes[mine], threshold);
        ++received;
        for (;;) {
          int flag = 0;
          MPI_Status status;
          check(MPI_Iprobe(MPI_ANY_SOURCE, tag_result, MPI_COMM_WORLD, &flag, &status), "MPI_Iprobe");
          if (!flag) break;
          take_result(status);
        }
      }
      while (busy > 0) {
        take_result(wait_for(MPI_ANY_SOURCE, tag_result));
      }
      if (received != boxes.size()) throw std::logic_error("MPI driver: a batch came back incomplete");
      problem.apply(state, std::move(boxes), results);
      if (on_step) on_step(state);
    }
  } catch (...) {
    stop_workers(size);
    throw;
  }
  stop_workers(size);
}

}  // namespace regatta::cli::mpi
