// The task driver of `verify --instances` and `certify` (see task_runner.hpp).
#include "task_runner.hpp"

#include <boost/crc.hpp>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include <regatta/core/error.hpp>
#include <regatta/core/io/file_bytes.hpp>
#include <regatta/core/io/json_file.hpp>
#include <regatta/core/resources.hpp>

#include "lipschitz_mpi.hpp"
#include "numbers.hpp"
#include "report/interrupt.hpp"

namespace regatta::cli {

namespace {

/// The finished results a checkpoint holds, index → result; an absent file holds none.
std::map<long, std::string> read_checkpoint(const TaskCheckpoint& c, long count) {
  std::map<long, std::string> done;
  std::error_code ec;
  if (c.path.empty() || !std::filesystem::exists(c.path, ec)) return done;
  const nlohmann::json j = io::read_json(c.path);
  io::release_input(c.path);  // rewritten below
  if (!j.is_object() || !j.contains("format") || j.at("format") != c.format)
    throw InputError(c.path, "is not a checkpoint of this command (format " + c.format + ")");
  if (!j.contains("fingerprint") || j.at("fingerprint") != c.fingerprint) {
    std::string what;
    if (j.contains("fingerprint") && j.at("fingerprint").is_object())
      for (const auto& [key, value] : c.fingerprint.items())
        if (!j.at("fingerprint").contains(key) || j.at("fingerprint").at(key) != value)
          what += (what.empty() ? "" : " and ") + key;
    throw InputError(c.path, "was written for another run (its " + (what.empty() ? "inputs" : what) +
                                 " differ): use another --checkpoint file, or remove this one");
  }
  if (!j.contains("results") || !j.at("results").is_object())
    throw InputError(c.path, "has no 'results' object");
  for (const auto& [key, value] : j.at("results").items()) {
    long index = -1;
    try {
      std::size_t used = 0;
      index = std::stol(key, &used);
      if (used != key.size()) index = -1;
    } catch (const std::exception&) {
      index = -1;
    }
    if (index < 0 || index >= count || !value.is_string())
      throw InputError(c.path, "result " + regatta::quoted(key) + " is not a task of this run");
    done[index] = value.get<std::string>();
  }
  return done;
}

void write_checkpoint(const TaskCheckpoint& c, const std::map<long, std::string>& done) {
  nlohmann::json results = nlohmann::json::object();
  for (const auto& [index, result] : done) results[std::to_string(index)] = result;
  io::write_json(c.path, {{"format", c.format}, {"fingerprint", c.fingerprint}, {"results", results}});
}

}  // namespace

void run_in_order(const std::vector<long>& pending, const mpi::Task& task, const mpi::Done& done) {
  for (long i : pending) done(i, task(i));
}

nlohmann::json file_fingerprint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "cannot be read");
  boost::crc_32_type crc;
  std::vector<char> buffer(std::size_t{1} << 20);
  std::uint64_t bytes = 0;
  while (in) {
    in.read(buffer.data(), std::streamsize(buffer.size()));
    const std::streamsize got = in.gcount();
    crc.process_bytes(buffer.data(), std::size_t(got));
    bytes += std::uint64_t(got);
  }
  return {{"file", path}, {"bytes", bytes}, {"crc32", crc.checksum()}};
}

void check_checkpoint_path(const std::string& option, const std::string& file) {
  check_output_folder(option, file);
  io::check_replaceable(file);
}

int process_count() {
  const int launched = mpi::launched_size();
  if (launched > 1 && !mpi::available())
    throw InputError("mpirun", "this regatta was built without MPI (REGATTA_MPI): run it as one process");
  return launched;
}

#ifdef REGATTA_HAVE_MPI
std::unique_ptr<mpi::Session> open_mpi_session(int processes) {
  if (processes <= 1) return nullptr;
  auto session = std::make_unique<mpi::Session>();
  configure_threads(1);
  return session;
}
#endif

bool run_tasks(long count, const mpi::Task& task, const mpi::Done& done, const TaskCheckpoint& checkpoint,
               const LocalRunner& local) {
  const int launched = process_count();
#ifdef REGATTA_HAVE_MPI
  const std::unique_ptr<mpi::Session> session = open_mpi_session(launched);
  if (session && session->rank() != 0) {
    mpi::serve(task);
    return false;
  }
  const int ranks = session ? session->size() : 1;
#else
  (void)launched;
  [[maybe_unused]] const int ranks = 1;
#endif
  std::map<long, std::string> finished;
  try {
    finished = read_checkpoint(checkpoint, count);
  } catch (...) {
#ifdef REGATTA_HAVE_MPI
    if (ranks > 1) mpi::stop_serving(ranks);
#endif
    throw;
  }
  for (const auto& [index, result] : finished) done(index, result);
  std::vector<long> pending;
  for (long i = 0; i < count; ++i)
    if (!finished.count(i)) pending.push_back(i);
  // Ctrl-C (SIGINT, SIGTERM, SIGHUP) is taken by a watcher thread, which ends the process only between two
  // checkpoint writes: the checkpoint is complete and no temporary file of it is left behind. (The guard
  // has nothing of its own to remove: an empty path.)
  std::optional<report::InterruptGuard> interrupts;
  if (!checkpoint.path.empty()) interrupts.emplace(std::filesystem::path());
  const mpi::Done record = [&](long index, const std::string& result) {
    if (!checkpoint.path.empty()) {
      finished[index] = result;
      const std::lock_guard lock(interrupts->swap_mutex());
      write_checkpoint(checkpoint, finished);
    }
    done(index, result);
  };
#ifdef REGATTA_HAVE_MPI
  if (ranks > 1) {
    mpi::distribute(pending, task, record, ranks);
    return true;
  }
#endif
  local(pending, task, record);
  return true;
}

}  // namespace regatta::cli
