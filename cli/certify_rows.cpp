// certify's row loop (certify_output.hpp): the rows over OpenMP threads or MPI ranks, with a checkpoint.
#include <bit>
#include <cstdint>
#include <exception>
#include <regatta/core/error.hpp>

#include "certify_output.hpp"

namespace regatta::cli {
namespace {

using Row = operators::InputRobustness;

// A row as a string, every double as its bit pattern (NaN and infinities included): the row rank 0 and a
// resumed run read back is the row computed, bit for bit.
std::string encode(const Row& r) {
  const auto bits = [](double v) { return std::bit_cast<std::uint64_t>(v); };
  return nlohmann::json{{"label", r.label},
                        {"prediction", r.prediction},
                        {"margin", bits(r.margin)},
                        {"margin_lower", bits(r.margin_lower)},
                        {"naive", bits(r.naive)},
                        {"attack", bits(r.attack)},
                        {"certified", bits(r.certified)},
                        {"refuted", bits(r.refuted)},
                        {"checks", r.checks},
                        {"method", r.method == operators::RadiusMethod::region ? "region" : "affine"},
                        {"local", bits(r.local)},
                        {"has_local", r.has_local},
                        {"local_checks", r.local_checks},
                        {"has_bab", r.has_bab},
                        {"bab", bits(r.bab)},
                        {"bab_seconds", bits(r.bab_seconds)},
                        {"bab_branches", r.bab_branches},
                        {"bab_tests", r.bab_tests},
                        {"bab_note", r.bab_note}}
      .dump();
}

Row decode(const std::string& text, const std::string& source) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    const auto real = [&](const char* key) { return std::bit_cast<double>(j.at(key).get<std::uint64_t>()); };
    Row r;
    r.label = j.at("label").get<int>();
    r.prediction = j.at("prediction").get<int>();
    r.margin = real("margin");
    r.margin_lower = real("margin_lower");
    r.naive = real("naive");
    r.attack = real("attack");
    r.certified = real("certified");
    r.refuted = real("refuted");
    r.checks = j.at("checks").get<int>();
    const std::string method = j.at("method").get<std::string>();
    if (method != "region" && method != "affine") throw std::invalid_argument("method");
    r.method = method == "region" ? operators::RadiusMethod::region : operators::RadiusMethod::affine;
    r.local = real("local");
    r.has_local = j.at("has_local").get<bool>();
    r.local_checks = j.at("local_checks").get<int>();
    r.has_bab = j.value("has_bab", false);  // rows of a checkpoint written before --budget-per-input
    if (r.has_bab) {
      r.bab = real("bab");
      r.bab_seconds = real("bab_seconds");
      r.bab_branches = j.at("bab_branches").get<long>();
      r.bab_tests = j.at("bab_tests").get<int>();
      r.bab_note = j.at("bab_note").get<std::string>();
    }
    return r;
  } catch (const std::exception&) {
    throw InputError(source, "holds a row that is not a certify row");
  }
}

}  // namespace

nlohmann::json certify_fingerprint(const std::vector<std::string>& files, const nlohmann::json& options) {
  nlohmann::json f = nlohmann::json::object();
  for (const std::string& path : files) f[path] = file_fingerprint(path)["crc32"];
  return {{"files", f}, {"options", options}};
}

std::optional<std::vector<Row>> certify_rows(long count, const std::function<Row(long)>& one,
                                             const TaskCheckpoint& checkpoint) {
  std::vector<Row> rows(static_cast<std::size_t>(count));
  std::optional<report::Progress> progress;
  const std::string source = checkpoint.path.empty() ? std::string("certify") : checkpoint.path;
  const mpi::Task task = [&](long i) { return encode(one(i)); };
  const mpi::Done done = [&](long i, const std::string& text) {
    rows[std::size_t(i)] = decode(text, source);
    if (!progress) progress.emplace("certify", count, true);
    progress->advance();
  };
  // One process: the rows still to compute on the OpenMP threads, one input per task.
  const LocalRunner threads = [&](const std::vector<long>& pending, const mpi::Task& t, const mpi::Done& d) {
    std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1)
    for (long k = 0; k < long(pending.size()); ++k) {
      try {
        const std::string text = t(pending[std::size_t(k)]);
#pragma omp critical(regatta_certify_done)
        {
          try {
            d(pending[std::size_t(k)], text);
          } catch (...) {
            if (!failure) failure = std::current_exception();
          }
        }
      } catch (...) {
#pragma omp critical(regatta_certify_done)
        if (!failure) failure = std::current_exception();
      }
    }
    if (failure) std::rethrow_exception(failure);
  };
  if (!run_tasks(count, task, done, checkpoint, threads)) return std::nullopt;
  return rows;
}

}  // namespace regatta::cli
