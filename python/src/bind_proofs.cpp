// The claims checker (proofs-check): the registered claims, and check_claim per claim with the options of
// `regatta proofs-check`; each result is the JSON document the command prints (proofs::to_json).
#include <algorithm>
#include <set>

#include <pybind11/stl.h>

#include <regatta/core/error.hpp>
#include <regatta/proofs/engine.hpp>
#include <regatta/proofs/registry.hpp>
#include "bindings.hpp"
#include "interrupt.hpp"

namespace regatta::python {

namespace {

std::vector<const proofs::Claim*> select(const std::vector<std::string>& ids,
                                         const std::vector<std::string>& families) {
  std::vector<const proofs::Claim*> chosen;
  if (ids.empty()) {
    for (const auto& c : proofs::registry()) chosen.push_back(c.get());
  } else {
    for (const std::string& id : ids) {
      const proofs::Claim* c = proofs::find_claim(id);
      if (c == nullptr) {
        for (const auto& m : proofs::missing_claims())
          if (m.id == id) throw InputError("claims", "'" + id + "' is not checkable yet: " + m.reason);
        throw InputError("claims", "unknown claim ID '" + id + "' (see regatta.claims())");
      }
      if (std::find(chosen.begin(), chosen.end(), c) == chosen.end()) chosen.push_back(c);
    }
  }
  if (!families.empty()) {
    std::set<std::string> known;
    for (const auto& c : proofs::registry())
      for (const std::string& f : c->info().families) known.insert(f);
    for (const std::string& f : families)
      if (!known.count(f)) throw InputError("families", "unknown family '" + f + "' (see regatta.claims())");
    std::vector<const proofs::Claim*> kept;
    for (const proofs::Claim* c : chosen)
      for (const std::string& f : c->info().families)
        if (std::find(families.begin(), families.end(), f) != families.end()) {
          kept.push_back(c);
          break;
        }
    if (kept.empty()) throw InputError("families", "none of the selected claims has the named families");
    chosen = kept;
  }
  return chosen;
}

}  // namespace

void bind_proofs(py::module_& m) {
  m.def("claims", [] {
    py::list out;
    for (const auto& c : proofs::registry()) {
      py::dict d;
      d["id"] = c->info().id;
      d["expected"] = proofs::to_string(c->info().expected);
      d["families"] = c->info().families;
      d["checkable"] = true;
      out.append(d);
    }
    for (const auto& missing : proofs::missing_claims()) {
      py::dict d;
      d["id"] = missing.id;
      d["checkable"] = false;
      d["reason"] = missing.reason;
      out.append(d);
    }
    return out;
  });
  m.def(
      "proofs_check",
      [](const std::vector<std::string>& ids, const std::vector<std::string>& families, double budget,
         long samples, std::uint64_t seed, unsigned precision, const std::string& out_dir,
         const py::object& progress) {
        proofs::EngineOptions options;
        options.budget_seconds = budget;
        options.samples = samples;
        options.seed = seed;
        options.precision = precision;
        options.families = families;
        options.out_dir = out_dir;
        options.validate();
        const std::vector<const proofs::Claim*> chosen = select(ids, families);
        Interrupter interrupter(progress, std::chrono::milliseconds(0));
        std::vector<std::string> documents;
        for (std::size_t k = 0; k < chosen.size(); ++k) {
          interrupter.report(chosen[k]->info().id, std::int64_t(k), std::int64_t(chosen.size()));
          py::gil_scoped_release release;
          documents.push_back(proofs::to_json(proofs::check_claim(*chosen[k], options)).dump());
        }
        interrupter.report("done", std::int64_t(chosen.size()), std::int64_t(chosen.size()));
        return documents;
      },
      py::arg("claims") = std::vector<std::string>{}, py::arg("families") = std::vector<std::string>{},
      py::arg("budget") = 0.0, py::arg("samples") = 0L, py::arg("seed") = 0, py::arg("precision") = 128u,
      py::arg("out_dir") = "", py::arg("progress") = py::none());
}

}  // namespace regatta::python
