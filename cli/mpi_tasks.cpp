// Independent tasks over MPI ranks (see mpi_tasks.hpp).
#include "mpi_tasks.hpp"

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <regatta/core/error.hpp>
#include <regatta/core/resources.hpp>

namespace regatta::cli::mpi {

namespace {

constexpr int tag_task = 11;          // rank 0 → worker: one long, the task index
constexpr int tag_answer = 12;        // worker → rank 0: an encoded Answer (chars)
constexpr int tag_stop_serving = 13;  // rank 0 → worker: empty

void check_call(int code, const char* what) {
  if (code != MPI_SUCCESS) throw std::runtime_error(std::string("MPI error in ") + what);
}

/// One task's outcome: 'k' (ok: text is the result), 'i' (an InputError: subject and text its problem) or
/// 'e' (any other exception: text is its message).
struct Answer {
  long index = -1;
  char kind = 'k';
  std::string subject, text;
};

Answer compute(const Task& task, long index) {
  Answer a;
  a.index = index;
  try {
    a.text = task(index);
  } catch (const InputError& e) {
    a.kind = 'i';
    a.subject = e.subject();
    a.text = e.problem();
  } catch (const std::exception& e) {
    a.kind = 'e';
    a.text = e.what();
  } catch (...) {
    a.kind = 'e';
    a.text = "unknown exception";
  }
  return a;
}

// Wire format: kind, index, '\n', subject's length, '\n', subject, text.
std::string encode(const Answer& a) {
  return std::string(1, a.kind) + std::to_string(a.index) + "\n" + std::to_string(a.subject.size()) + "\n" +
         a.subject + a.text;
}

Answer decode(const std::string& s) {
  Answer a;
  a.kind = s.at(0);
  const std::size_t first = s.find('\n'), second = s.find('\n', first + 1);
  if (first == std::string::npos || second == std::string::npos)
    throw std::logic_error("MPI tasks: a malformed answer");
  a.index = std::stol(s.substr(1, first - 1));
  const std::size_t length = std::stoul(s.substr(first + 1, second - first - 1));
  a.subject = s.substr(second + 1, length);
  a.text = s.substr(second + 1 + length);
  return a;
}

/// Polls for a message, sleeping a millisecond between polls: MPI_Probe busy-polls in OpenMPI and would take
/// a core from the computing thread; a task takes far longer than the delay.
bool poll(int source, int tag, MPI_Status& status) {
  int flag = 0;
  check_call(MPI_Iprobe(source, tag, MPI_COMM_WORLD, &flag, &status), "MPI_Iprobe");
  return flag != 0;
}

void pause() { std::this_thread::sleep_for(std::chrono::milliseconds(1)); }

void send_task(long index, int rank) {
  check_call(MPI_Send(&index, 1, MPI_LONG, rank, tag_task, MPI_COMM_WORLD), "MPI_Send");
}

}  // namespace

void serve(const Task& task) {
  for (;;) {
    MPI_Status status;
    while (!poll(0, MPI_ANY_TAG, status)) pause();
    if (status.MPI_TAG == tag_stop_serving) {
      check_call(MPI_Recv(nullptr, 0, MPI_LONG, 0, tag_stop_serving, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                 "MPI_Recv");
      return;
    }
    long index = 0;
    check_call(MPI_Recv(&index, 1, MPI_LONG, 0, tag_task, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
    const std::string message = encode(compute(task, index));
    check_call(MPI_Send(message.data(), int(message.size()), MPI_CHAR, 0, tag_answer, MPI_COMM_WORLD),
               "MPI_Send");
  }
}

void stop_serving(int size) {
  for (int r = 1; r < size; ++r) MPI_Send(nullptr, 0, MPI_LONG, r, tag_stop_serving, MPI_COMM_WORLD);
}

void distribute(const std::vector<long>& pending, const Task& task, const Done& done, int size) {
  std::mutex mutex;  // guards next, stopped and finished_here
  std::size_t next = 0;
  bool stopped = false;
  std::deque<Answer> finished_here;  // rank 0's own results, for the main thread
  const auto take = [&]() -> long {
    const std::lock_guard lock(mutex);
    if (stopped || next == pending.size()) return -1;
    return pending[next++];
  };
  std::atomic<bool> computing{true};
  std::thread local([&] {
    configure_threads(1);  // a new thread starts with OpenMP's defaults, not its creator's setting
    for (long i = take(); i >= 0; i = take()) {
      Answer a = compute(task, i);
      const std::lock_guard lock(mutex);
      finished_here.push_back(std::move(a));
    }
    computing = false;
  });

  std::exception_ptr failure;  // done() threw, or MPI failed: rethrown first
  Answer first_failed;         // the failed task of the lowest index
  const auto handle = [&](const Answer& a) {
    if (a.kind == 'k') {
      if (failure) return;
      try {
        done(a.index, a.text);
      } catch (...) {
        failure = std::current_exception();
        const std::lock_guard lock(mutex);
        stopped = true;
      }
      return;
    }
    if (first_failed.index < 0 || a.index < first_failed.index) first_failed = a;
    const std::lock_guard lock(mutex);
    stopped = true;
  };

  int in_flight = 0;
  try {
    for (int r = 1; r < size; ++r) {
      const long i = take();
      if (i < 0) break;
      send_task(i, r);
      ++in_flight;
    }
    std::string buffer;
    for (;;) {
      bool any = false;
      MPI_Status status;
      while (in_flight > 0 && poll(MPI_ANY_SOURCE, tag_answer, status)) {
        int count = 0;
        check_call(MPI_Get_count(&status, MPI_CHAR, &count), "MPI_Get_count");
        buffer.resize(std::size_t(count));
        check_call(MPI_Recv(buffer.data(), count, MPI_CHAR, status.MPI_SOURCE, tag_answer, MPI_COMM_WORLD,
                            MPI_STATUS_IGNORE),
                   "MPI_Recv");
        --in_flight;
        handle(decode(buffer));
        const long i = take();
        if (i >= 0) {
          send_task(i, status.MPI_SOURCE);
          ++in_flight;
        }
        any = true;
      }
      std::deque<Answer> mine;
      {
        const std::lock_guard lock(mutex);
        mine.swap(finished_here);
      }
      for (const Answer& a : mine) handle(a);
      if (!computing && in_flight == 0) {
        const std::lock_guard lock(mutex);
        if (finished_here.empty()) break;
        continue;
      }
      if (!any && mine.empty()) pause();
    }
  } catch (...) {
    {
      const std::lock_guard lock(mutex);
      stopped = true;
    }
    local.join();
    stop_serving(size);
    throw;
  }
  local.join();
  for (int r = 1; r < size; ++r)
    check_call(MPI_Send(nullptr, 0, MPI_LONG, r, tag_stop_serving, MPI_COMM_WORLD), "MPI_Send");
  if (failure) std::rethrow_exception(failure);
  if (first_failed.index >= 0) {
    if (first_failed.kind == 'i') throw InputError(first_failed.subject, first_failed.text);
    throw std::runtime_error(first_failed.text);
  }
}

}  // namespace regatta::cli::mpi
