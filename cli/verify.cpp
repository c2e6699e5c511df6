// regatta verify --onnx M.onnx --vnnlib P.vnnlib: a VNNLIB property of an ONNX model decided soundly
// (unsat / sat with a re-checked counterexample / unknown / timeout), in VNN-COMP's result format or JSON;
// --instances runs a VNN-COMP instances.csv; boxes are bounded by IBP and affine forms over the graph
// (--method), with or without splitting (--no-split) (docs/verify.md).
#include <mpfr.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include <regatta/core/deadline.hpp>
#include <regatta/core/decimal.hpp>
#include <regatta/core/eigen.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/io/file_bytes.hpp>
#include <regatta/graph/graph.hpp>
#include <regatta/graph/verify.hpp>
#include <regatta/graph/vnnlib.hpp>
#include <regatta/operators/graph_affine.hpp>
#include <regatta/operators/graph_affine_branch.hpp>
#include <regatta/operators/graph_verify_bounds.hpp>
#ifdef REGATTA_HAVE_ONNX
#include <regatta/graph/onnx_import.hpp>
#endif

#include "command.hpp"
#include "task_runner.hpp"

namespace regatta::cli {

namespace {

struct Options {
  std::string onnx, vnnlib, out, instances, checkpoint;
  double timeout = 60;
  bool json = false;
  std::uint64_t seed = 1;
  std::string method = "affine";  ///< the bounds of a box: ibp, or affine (IBP and affine forms, the better)
  bool method_given = false;      ///< --method named: a model the affine forms refuse is then an error
  bool no_split = false;          ///< no branch and bound: only the bounds of the whole box
  std::string split = "phase";    ///< phase (ReLU phases, where the affine forms apply), input, or none
  std::string split_kinds = "relu";  ///< the node kinds phase splitting constrains (comma-separated names)
};

// --split-kinds: "all" or op names of GraphAffineBranching::splittable_kinds(), comma-separated.
std::vector<graph::Op> split_kinds(const std::string& text) {
  const std::vector<graph::Op> all = operators::GraphAffineBranching::splittable_kinds();
  if (text == "all") return all;
  std::vector<graph::Op> out;
  std::stringstream in(text);
  for (std::string name; std::getline(in, name, ',');) {
    const auto it =
        std::find_if(all.begin(), all.end(), [&](graph::Op op) { return graph::op_name(op) == name; });
    if (it == all.end()) {
      std::string names = "all";
      for (graph::Op op : all) names += ", " + std::string(graph::op_name(op));
      throw InputError("--split-kinds", regatta::quoted(name) + " is not a kind it splits (" + names + ")");
    }
    if (std::find(out.begin(), out.end(), *it) == out.end()) out.push_back(*it);
  }
  if (out.empty()) throw InputError("--split-kinds", "no kind given");
  return out;
}

graph::Graph load_model(const std::string& path) {
#ifndef REGATTA_HAVE_ONNX
  throw InputError(path, "this regatta was built without ONNX support (REGATTA_ONNX; Debian: libonnx-dev)");
#else
  return graph::import_onnx(path);
#endif
}

// The exact decimal value of v (every binary64 number is a finite decimal; glibc's printf writes it exactly
// with enough digits, 767 significant at most), trailing zeros removed: the counterexample's coordinates, so
// that the real number printed IS the point that was re-checked.
std::string exact_decimal(double v) {
  const bool fixed =
      v == 0 || (std::abs(v) >= 1e-5 && std::abs(v) < 1e15);  // plain digits, as in VNNLIB files
  std::vector<char> buf(1500);
  std::snprintf(buf.data(), buf.size(), fixed ? "%.1074f" : "%.767e", v);
  std::string s(buf.data());
  const std::size_t e = fixed ? s.size() : s.find('e');
  std::string mantissa = s.substr(0, e), exponent = s.substr(e);
  while (!mantissa.empty() && mantissa.back() == '0') mantissa.pop_back();
  if (!mantissa.empty() && mantissa.back() == '.') mantissa.pop_back();
  return mantissa + exponent;
}

// The counterexample as printed, read back by MPFR: each coordinate must be exactly a binary64 number (MPFR's
// ternary value 0), and that number is what the re-check is run on.
std::vector<double> read_back(const std::vector<std::string>& text) {
  std::vector<double> x(text.size());
  mpfr_t v;
  mpfr_init2(v, 53);
  for (std::size_t k = 0; k < text.size(); ++k) {
    char* end = nullptr;
    const int ternary = mpfr_strtofr(v, text[k].c_str(), &end, 10, MPFR_RNDN);
    x[k] = mpfr_get_d(v, MPFR_RNDN);
    if (ternary != 0 || end != text[k].c_str() + text[k].size() || !std::isfinite(x[k])) {
      mpfr_clear(v);
      throw std::logic_error("verify: a printed counterexample coordinate is not exactly a binary64 number");
    }
  }
  mpfr_clear(v);
  return x;
}

struct Outcome {
  graph::VerifyResult result;
  std::vector<std::string> x_text, y_text;
};

// The bounds verify uses on this model: "affine" (IBP and the affine forms) where they apply, else "ibp";
// why_not says why the affine forms were not used when they were asked for by default.
std::string bound_method(const graph::Graph& model, const Options& o, std::string& why_not) {
  if (o.method == "ibp") return "ibp";
  why_not = operators::graph_affine_unsupported(model);
  if (why_not.empty()) return "affine";
  if (o.method_given) throw InputError(model.source, "--method affine: " + why_not);
  return "ibp";
}

Outcome run_one(const graph::Graph& model, const std::string& vnnlib_path, double timeout,
                const Options& args, const std::string& method) {
  const graph::Property property = graph::read_vnnlib(vnnlib_path);
  graph::VerifyOptions options;
  options.timeout_seconds = timeout;
  options.seed = args.seed;
  options.split = !args.no_split && args.split != "none";
  const Deadline deadline(timeout);
  if (method == "affine")
    options.box_lower_bounds = operators::affine_box_lower_bounds(model, &deadline.passed);
  const std::vector<graph::Op> kinds = split_kinds(args.split_kinds);
  if (method == "affine" && args.split == "phase" &&
      operators::GraphAffineBranching::has_split_node(model, kinds))
    options.phase_bounds = operators::affine_phase_bounds(model, &deadline.passed, std::nullopt, kinds);
  Outcome o{graph::verify(model, property, options), {}, {}};
  if (o.result.verdict == graph::Verdict::sat) {
    for (double v : o.result.input) o.x_text.push_back(exact_decimal(v));
    for (double v : o.result.output) o.y_text.push_back(shortest_decimal(v));
    // The re-check on the decimals as printed: a sat is never printed without it.
    if (read_back(o.x_text) != o.result.input ||
        !graph::certainly_satisfies(model, property, read_back(o.x_text)))
      throw std::logic_error("verify: the counterexample failed its re-check at the printed point");
  }
  return o;
}

// VNN-COMP's result file: the verdict, then for sat ((X_0 v) ... (Y_0 v) ...).
std::string result_text(const Outcome& o) {
  std::string s = graph::verdict_name(o.result.verdict) + "\n";
  if (o.result.verdict != graph::Verdict::sat) return s;
  std::vector<std::string> entries;
  for (std::size_t k = 0; k < o.x_text.size(); ++k)
    entries.push_back("(X_" + std::to_string(k) + " " + o.x_text[k] + ")");
  for (std::size_t k = 0; k < o.y_text.size(); ++k)
    entries.push_back("(Y_" + std::to_string(k) + " " + o.y_text[k] + ")");
  for (std::size_t k = 0; k < entries.size(); ++k)
    s += (k == 0 ? "(" : " ") + entries[k] + (k + 1 == entries.size() ? ")\n" : "\n");
  return s;
}

nlohmann::json result_json(const Outcome& o, const std::string& onnx, const std::string& vnnlib,
                           double timeout, const std::string& method, const std::string& why_not,
                           bool split) {
  const auto& r = o.result;
  nlohmann::json j{{"onnx", onnx},
                   {"vnnlib", vnnlib},
                   {"result", graph::verdict_name(r.verdict)},
                   {"reason", r.reason},
                   {"proved_by", r.proved_by.empty() ? nlohmann::json() : nlohmann::json(r.proved_by)},
                   {"method", method},
                   {"splitting", split},
                   {"timeout_seconds", timeout},
                   {"seconds", r.seconds},
                   {"root_ibp_margin_upper", r.root_bound},
                   {"root_margin_upper",
                    std::isnan(r.root_affine_bound) ? nlohmann::json() : nlohmann::json(r.root_affine_bound)},
                   {"statistics",
                    {{"ibp_evaluations", r.ibp_evaluations},
                     {"affine_evaluations", r.affine_evaluations},
                     {"boxes_proved_by_affine", r.boxes_proved_by_affine},
                     {"point_evaluations", r.point_evaluations},
                     {"boxes_split", r.boxes_split},
                     {"boxes_proved", r.boxes_proved},
                     {"max_frontier", r.max_frontier},
                     {"proved_volume_fraction", r.proved_volume_fraction},
                     {"split_method", r.splitting.empty() ? nlohmann::json() : nlohmann::json(r.splitting)},
                     {"phase_branches", r.phase_branches},
                     {"phase_branches_proved", r.phase_branches_proved},
                     {"phase_max_depth", r.phase_max_depth},
                     {"phase_branches_by_kind", r.phase_branches_by_kind}}}};
  if (r.verdict == graph::Verdict::sat) j["counterexample"] = {{"X", o.x_text}, {"Y", o.y_text}};
  if (!why_not.empty() && method == "ibp") j["affine_unavailable"] = why_not;
  // What each number is (docs/conventions.md#what-a-number-means).
  j["kinds"] = {
      {"result", "certified: unsat by interval bounds on every box, sat by an MPFI re-check of the point"},
      {"root_ibp_margin_upper",
       "certified upper bound (interval64) of the property's margin over the whole input box; < 0 proves "
       "unsat (null: no finite bound)"},
      {"root_margin_upper",
       "certified upper bound of the same margin, each inequality bounded by the better of IBP and the "
       "affine "
       "forms (null: method ibp, or no finite bound); < 0 proves unsat"},
      {"proved_by",
       "how unsat was proved: ibp, affine or ibp+affine on the whole box, or splitting (null: not unsat)"},
      {"seconds", "estimate (wall time)"},
      {"proved_volume_fraction", "estimate (the share of the input box's volume refuted so far)"},
      {"counterexample.X", "exact: the decimal value of each binary64 coordinate that was re-checked"},
      {"counterexample.Y", "estimate: the double forward pass at X, for information"}};
  return j;
}

void write_out(const std::string& path, const std::string& text) {
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  io::write_file_atomic(path, std::span<const std::byte>(p, text.size()));
}

struct Instance {
  std::string onnx, vnnlib;
  double timeout = 0;  ///< the file's
};

// instances.csv: onnx,vnnlib,timeout per line, paths relative to the file's folder; every line is checked
// before any instance runs.
std::vector<Instance> read_instances(const std::string& file) {
  const std::vector<std::byte> bytes = io::read_file_bytes(file, std::size_t{64} << 20);
  std::istringstream in(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  const std::filesystem::path base = std::filesystem::path(file).parent_path();
  std::vector<Instance> list;
  std::string line;
  std::size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::stringstream ls(line);
    for (std::string cell; std::getline(ls, cell, ',');) f.push_back(cell);
    auto trim = [](std::string s) {
      while (!s.empty() && s.front() == ' ') s.erase(0, 1);
      while (!s.empty() && s.back() == ' ') s.pop_back();
      return s;
    };
    if (f.size() != 3)
      throw InputError(file, "line " + std::to_string(line_no) + ": expected onnx,vnnlib,timeout");
    Instance i{(base / trim(f[0])).string(), (base / trim(f[1])).string(), 0};
    const std::string t = trim(f[2]);
    const auto r = std::from_chars(t.data(), t.data() + t.size(), i.timeout);
    if (r.ec != std::errc() || r.ptr != t.data() + t.size() || !(i.timeout > 0) || i.timeout > 1e6)
      throw InputError(file, "line " + std::to_string(line_no) + ": timeout " + regatta::quoted(t) +
                                 " is not a number of seconds in (0, 1e6]");
    list.push_back(std::move(i));
  }
  return list;
}

// What the instances' results depend on, for --checkpoint: the list, every model's and property's bytes,
// and the options.
nlohmann::json instances_fingerprint(const std::vector<Instance>& list, const Options& o) {
  nlohmann::json instances = nlohmann::json::array(), files = nlohmann::json::object();
  for (const Instance& i : list) {
    instances.push_back({i.onnx, i.vnnlib, i.timeout});
    for (const std::string& path : {i.onnx, i.vnnlib})
      if (!files.contains(path)) files[path] = file_fingerprint(path)["crc32"];
  }
  return {{"instances", instances},
          {"files", files},
          {"options",
           {{"timeout", o.timeout},
            {"seed", o.seed},
            {"method", o.method},
            {"method_given", o.method_given},
            {"no_split", o.no_split},
            {"split", o.split},
            {"split_kinds", o.split_kinds}}}};
}

// --instances: every instance's csv row and JSON object, in the file's order, from one process or from the
// ranks of mpirun (task_runner.hpp); --checkpoint keeps the finished ones.
int run_instances(const Options& o) {
  const std::vector<Instance> list = read_instances(o.instances);
  TaskCheckpoint checkpoint;
  if (!o.checkpoint.empty()) {
    check_checkpoint_path("--checkpoint", o.checkpoint);
    checkpoint = {o.checkpoint, "regatta-verify-checkpoint-1", instances_fingerprint(list, o)};
  }
  std::map<std::string, std::shared_ptr<graph::Graph>> models;  // this process's, loaded once each
  const mpi::Task task = [&](long index) {
    const Instance& i = list[std::size_t(index)];
    auto& model = models[i.onnx];
    if (!model) model = std::make_shared<graph::Graph>(load_model(i.onnx));
    std::string why_not;
    const std::string method = bound_method(*model, o, why_not);
    const Outcome out =
        run_one(*model, i.vnnlib, std::min(i.timeout, o.timeout > 0 ? o.timeout : i.timeout), o, method);
    const std::string row = i.onnx + "," + i.vnnlib + "," + graph::verdict_name(out.result.verdict) + "," +
                            shortest_decimal(std::round(out.result.seconds * 1000) / 1000);
    return nlohmann::json{
        {"row", row}, {"result", result_json(out, i.onnx, i.vnnlib, i.timeout, method, why_not, !o.no_split)}}
        .dump();
  };
  // Results arrive in any order; each is printed once all before it are.
  std::vector<std::optional<nlohmann::json>> results(list.size());
  std::size_t printed = 0;
  const mpi::Done done = [&](long index, const std::string& text) {
    results[std::size_t(index)] = nlohmann::json::parse(text);
    for (; printed < results.size() && results[printed]; ++printed)
      if (!o.json) std::cout << (*results[printed])["row"].get<std::string>() << std::endl;
  };
  if (!run_tasks(long(list.size()), task, done, checkpoint)) return exit_ok;  // a rank > 0 of mpirun
  std::string table;
  nlohmann::json all = nlohmann::json::array();
  for (const auto& r : results) {
    table += (*r)["row"].get<std::string>() + "\n";
    all.push_back((*r)["result"]);
  }
  if (o.json) std::cout << all.dump(2) << "\n";
  if (!o.out.empty()) write_out(o.out, table);
  return exit_ok;
}

}  // namespace

void add_verify_command(CLI::App& app, int& result) {
  auto* cmd = app.add_subcommand("verify",
                                 "Decide a VNNLIB property of an ONNX model: unsat (verified), sat "
                                 "(counterexample), unknown or timeout");
  auto o = std::make_shared<Options>();
  cmd->add_option("--onnx", o->onnx, "The model (.onnx; a leading symbolic batch axis is bound to 1)");
  cmd->add_option("--vnnlib", o->vnnlib, "The property (.vnnlib)");
  cmd->add_option("--instances", o->instances,
                  "A VNN-COMP instances.csv (onnx,vnnlib,timeout per line): one line per instance")
      ->excludes("--onnx")
      ->excludes("--vnnlib");
  cmd->add_option("--timeout", o->timeout, "Seconds per instance (with --instances: at most the file's)")
      ->check(CLI::Range(0.001, 1e6));
  cmd->add_option("--seed", o->seed, "Seed of the attack's random search");
  cmd->add_option("--out", o->out,
                  "Also write the result (VNN-COMP format; with --instances the table) atomically here");
  cmd->add_flag("--json", o->json, "JSON on stdout");
  cmd->add_option("--checkpoint", o->checkpoint,
                  "With --instances: keep each finished instance's result in this file (rewritten "
                  "atomically); a rerun with the same file skips them")
      ->needs("--instances");
  cmd->add_option("--method", o->method,
                  "The bounds of a box: affine (the default: IBP and affine forms over the graph, the better "
                  "for each inequality; IBP alone where the forms do not apply) or ibp")
      ->check(CLI::IsMember({"ibp", "affine"}));
  cmd->add_option(
         "--split", o->split,
         "Branch and bound by: phase (the default: ReLU phases, and with --split-kinds the input "
         "ranges of other nonlinearities, where the model has a node of those kinds and the affine forms "
         "apply; else input), input (input splitting) or none")
      ->check(CLI::IsMember({"phase", "input", "none"}));
  cmd->add_option("--split-kinds", o->split_kinds,
                  "With --split phase: the kinds of node whose elements are split, comma-separated: relu "
                  "(phases; the default), gelu, erf, tanh, sigmoid, sqrt, reciprocal (input ranges), or all");
  cmd->add_flag("--no-split", o->no_split,
                "No branch and bound: unsat only when the bounds of the whole box refute the property");
  cmd->callback([o, cmd, &result] {
    o->method_given = cmd->count("--method") > 0;
    split_kinds(o->split_kinds);  // checked before any model is read
    if (!o->out.empty()) io::check_replaceable(o->out);
    if (!o->instances.empty()) {
      if (cmd->count("--timeout") == 0) o->timeout = 0;  // the file's
      result = run_instances(*o);
      return;
    }
    if (o->onnx.empty() || o->vnnlib.empty())
      throw InputError("verify", "give --onnx M.onnx and --vnnlib P.vnnlib, or --instances FILE.csv");
    const graph::Graph model = load_model(o->onnx);
    std::string why_not;
    const std::string method = bound_method(model, *o, why_not);
    const Outcome out = run_one(model, o->vnnlib, o->timeout, *o, method);
    const std::string text = result_text(out);
    if (o->json)
      std::cout << result_json(out, o->onnx, o->vnnlib, o->timeout, method, why_not, !o->no_split).dump(2)
                << "\n";
    else
      std::cout << text;
    if (!o->out.empty()) write_out(o->out, text);
    result = exit_ok;
  });
}

}  // namespace regatta::cli
