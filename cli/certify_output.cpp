// What `regatta certify` prints and writes (certify_output.hpp), shared by the model and the ONNX-graph path.
#include "certify_output.hpp"

#include <cmath>
#include <filesystem>
#include <iostream>
#include <regatta/core/interval64.hpp>
#include <regatta/core/io/file_bytes.hpp>
#include <regatta/core/io/json_file.hpp>
#include <sstream>

#include "numbers.hpp"
#include "report/accuracy_figure.hpp"

namespace regatta::cli {
namespace {

using Row = operators::InputRobustness;

std::string csv_number(double v, const char* kind) {
  if (std::isnan(v)) return "";
  if (std::isinf(v)) return "inf";
  if (std::string(kind) == "lower") return lower_number(v, 10);
  return number(v, 10);
}

// The rows with the branch and bound's radius as their certified radius (for its medians and accuracies).
std::vector<Row> bab_rows(const std::vector<Row>& rows) {
  std::vector<Row> b = rows;
  for (Row& r : b) r.certified = r.bab;
  return b;
}

}  // namespace

void write_certify_output(const CertifyOutput& o) {
  const std::vector<Row>& rows = o.rows;
  const long count = long(rows.size());
  const bool json_out = !o.out.empty() && std::filesystem::path(o.out).extension() == ".json";
  const operators::RobustnessSummary summary = operators::summarize(rows);
  const double med_c = summary.median_certified, med_a = summary.median_attack, med_n = summary.median_naive;
  // An accuracy is a count of inputs: k of the n inputs, exact (printed as the fraction, fraction_text).
  const bool bab = o.budget > 0;
  const std::vector<Row> with_bab = bab ? bab_rows(rows) : std::vector<Row>{};
  const double med_b = bab ? operators::summarize(with_bab).median_certified : 0;
  auto count_at = [&](double radius, bool certified) {
    long k = 0;
    for (const Row& r : rows)
      k += certified ? operators::certified_at(r, radius) : r.prediction == r.label && r.attack > radius;
    return k;
  };
  auto bab_count_at = [&](double radius) {
    long k = 0;
    for (const Row& r : with_bab) k += operators::certified_at(r, radius);
    return k;
  };
  long correct = 0;
  for (const Row& r : rows) correct += r.prediction == r.label;
  const bool l2 = o.norm == "2";
  std::cout << "regatta certify: " << o.model << " on " << o.data << " (" << count << " inputs"
            << (l2 ? ")\n" : ", l-inf perturbations)\n");
  if (o.position >= 0)
    std::cout << "position: the logits of token " << o.position << " of " << o.positions
              << (o.position == o.positions - 1 ? " (the last)" : "")
              << " (the model's logits are per token; --position)\n";
  std::cout << "clean accuracy (estimate: predictions of the double forward pass): "
            << fraction_text(correct, count) << "\n";
  if (o.factors) {
    std::cout << "naive certificate margin/(sqrt2 * prod L_k), certified per-stage global bounds:\n";
    for (const auto& f : *o.factors)
      std::cout << "  " << f.stage << "  <= " << upper_number(f.upper, 6) << "  (" << f.how << ")\n";
  } else {
    std::cout << "naive certificate: not available (" << o.why_naive << ")\n";
  }
  std::cout << "\n  index label pred  margin(est)  naive(cert)" << (o.local ? "  local(cert)" : "")
            << "      attack(est)  certified(cert)"
            << (bab ? "  bab(cert)  bab_seconds  bab_tests  bab_branches" : "") << "\n";
  for (long i = 0; i < count; ++i) {
    const Row& r = rows[std::size_t(i)];
    std::cout << "  " << i << "  " << r.label << "  " << r.prediction << "  " << number(r.margin, 6) << "  "
              << (o.factors ? lower_number(r.naive, 4) : std::string("n/a")) << "  "
              << (o.local ? lower_number(r.local, 4) + "  " : "") << number(r.attack, 6) << "  "
              << lower_number(r.certified, 6);
    if (bab)
      std::cout << "  " << lower_number(r.bab, 6) << "  " << number(r.bab_seconds, 3) << "  " << r.bab_tests
                << "  " << r.bab_branches << (r.bab_note.empty() ? "" : "  (" + r.bab_note + ")");
    std::cout << "\n";
  }
  std::cout << "\nmedian certified radius (certified, rounded down): " << lower_number(med_c, 6) << "\n";
  std::cout << "median attack radius (estimate, upper bound on the true radius): " << number(med_a, 6)
            << "\n";
  if (bab) {
    double seconds = 0;
    long tests = 0, branches = 0;
    for (const Row& r : rows) seconds += r.bab_seconds, tests += r.bab_tests, branches += r.bab_branches;
    std::cout << "median certified radius with branch and bound (certified, rounded down; "
              << number(o.budget) << " s per input): " << lower_number(med_b, 6) << "\n"
              << "branch and bound: " << tests << " radii tested, " << branches << " branches, "
              << number(seconds, 4) << " s in all\n";
  }
  if (o.factors) std::cout << "median naive radius (certified): " << lower_number(med_n, 4) << "\n";
  if (o.local)
    std::cout << "median local-composition radius (certified, rounded down): "
              << lower_number(summary.median_local, 4) << "\n";
  else
    std::cout << "local composition of per-stage bounds: "
              << (o.compare_local ? "not available (" + o.why_local + ")"
                                  : std::string("not computed (--compare local)"))
              << "\n";
  if (med_a > 0) std::cout << "median certified / median attack: " << number(med_c / med_a, 4) << "\n";
  if (med_n > 0) std::cout << "median certified / median naive: " << number(med_c / med_n, 4) << "\n";
  if (o.local && summary.median_local > 0)
    std::cout << "median certified / median local: " << number(med_c / summary.median_local, 4) << "\n";
  std::cout << "bisection: relative tolerance " << number(o.tolerance) << " on the certified radius\n";
  std::cout << o.method_line << "\n";
  if (!o.attack_line.empty()) std::cout << o.attack_line << "\n";
  if (!o.radii.empty()) {
    std::cout << "\n  radius  certified accuracy  attack accuracy (estimate, an upper bound)  [k of the "
              << count << " inputs, exact]\n";
    for (double r : o.radii)
      std::cout << "  " << number(r) << "  " << fraction_text(count_at(r, true), count) << "  "
                << fraction_text(count_at(r, false), count)
                << (bab ? "  with branch and bound: " + fraction_text(bab_count_at(r), count) : "") << "\n";
  }

  if (!o.out.empty()) {
    if (json_out) {
      nlohmann::json j;
      j["model"] = o.model;
      j["data"] = o.data;
      j["norm"] = o.norm;
      if (o.position >= 0) j["position"] = o.position;
      j["kinds"] = {
          {"margin", "estimate"},
          {"margin_lower", "certified lower bound"},
          {"naive_radius", "certified lower bound on the robustness radius (null: no naive certificate)"},
          {"attack_radius", o.attack_kind},
          {"certified_radius", "certified lower bound on the robustness radius"},
          {"refuted_radius", "smallest radius the test failed at (a limit of the test; null: not recorded)"},
          {"method", "how the certified radius was found: affine (forms) or region (enclosures)"},
          {"local_radius",
           "certified lower bound on the robustness radius from the composition of per-stage local "
           "Lipschitz bounds (null: not computed, see local_unavailable)"},
          {"certified_accuracy",
           "certified lower bound on the robust accuracy: certified_count / inputs, the double "
           "rounded down (the counts are exact)"},
          {"certified_count",
           "inputs predicted correctly with margin_lower > 0 and certified_radius >= radius (exact)"},
          {"attack_accuracy",
           "estimate (upper bound on the robust accuracy): attack_count / inputs, the nearest double"},
          {"attack_count", "inputs predicted correctly that no attack broke within radius (exact)"},
          {"clean_accuracy", "clean_count / inputs, the nearest double"},
          {"clean_count", "inputs predicted correctly by the double forward pass (exact)"}};
      if (bab) {
        j["kinds"]["bab_radius"] =
            "certified lower bound on the robustness radius by branch and bound (>= certified_radius)";
        j["kinds"]["bab_seconds"] = "wall-clock seconds the branch and bound used (a measurement)";
        j["kinds"]["bab_branches"] = "phase branches bounded and input boxes split, over its tests";
        j["kinds"]["bab_tests"] = "radii the branch and bound tested";
        j["kinds"]["bab_certified_count"] = "as certified_count, with bab_radius (exact)";
        j["budget_per_input"] = o.budget;
      }
      j["bisection_relative_tolerance"] = o.tolerance;
      if (o.factors) {
        for (const auto& f : *o.factors)
          j["naive_factors"].push_back({{"stage", f.stage}, {"upper", f.upper}, {"how", f.how}});
      } else {
        j["naive_factors"] = nullptr;
        j["naive_unavailable"] = o.why_naive;
      }
      if (!o.local)
        j["local_unavailable"] =
            o.compare_local ? o.why_local : std::string("not computed (--compare local)");
      for (long i = 0; i < count; ++i) {
        const Row& r = rows[std::size_t(i)];
        j["inputs"].push_back({{"index", i},
                               {"label", r.label},
                               {"prediction", r.prediction},
                               {"margin", r.margin},
                               {"margin_lower", r.margin_lower},
                               {"naive_radius", o.factors ? nlohmann::json(r.naive) : nlohmann::json()},
                               {"attack_radius", number_or_null(r.attack)},
                               {"certified_radius", r.certified},
                               {"refuted_radius", number_or_null(r.refuted)},
                               {"method", operators::to_string(r.method)},
                               {"region_checks", r.checks},
                               {"local_radius", r.has_local ? nlohmann::json(r.local) : nlohmann::json()},
                               {"local_checks", r.local_checks}});
        if (bab) {
          nlohmann::json& row = j["inputs"].back();
          row["bab_radius"] = r.bab;
          row["bab_seconds"] = r.bab_seconds;
          row["bab_branches"] = r.bab_branches;
          row["bab_tests"] = r.bab_tests;
          row["bab_note"] = r.bab_note.empty() ? nlohmann::json() : nlohmann::json(r.bab_note);
        }
      }
      j["summary"] = {
          {"inputs", count},
          {"clean_count", correct},
          {"clean_accuracy", summary.clean_accuracy},
          {"median_certified_radius", med_c},
          {"median_attack_radius", number_or_null(med_a)},
          {"median_naive_radius", o.factors ? nlohmann::json(med_n) : nlohmann::json()},
          {"median_local_radius", o.local ? nlohmann::json(summary.median_local) : nlohmann::json()}};
      if (bab) j["summary"]["median_bab_radius"] = med_b;
      for (double r : o.radii) {
        const long certified = count_at(r, true), attacked = count_at(r, false);
        j["accuracy"].push_back(
            {{"radius", r},
             {"inputs", count},
             {"certified_count", certified},
             {"certified_accuracy", (interval64(double(certified)) / interval64(double(count))).lower()},
             {"attack_count", attacked},
             {"attack_accuracy", double(attacked) / double(count)}});
        if (bab) j["accuracy"].back()["bab_certified_count"] = bab_count_at(r);
      }
      io::write_json(o.out, j);
    } else {
      std::ostringstream os;
      os << "index,label,prediction,margin_estimate,margin_lower_certified,naive_radius_certified,"
            "attack_radius_estimate,certified_radius_certified,refuted_radius,region_checks,method,"
            "local_radius_certified"
         << (bab ? ",bab_radius_certified,bab_seconds,bab_tests,bab_branches" : "") << "\n";
      for (long i = 0; i < count; ++i) {
        const Row& r = rows[std::size_t(i)];
        os << i << "," << r.label << "," << r.prediction << "," << csv_number(r.margin, "") << ","
           << csv_number(r.margin_lower, "lower") << ","
           << (o.factors ? csv_number(r.naive, "lower") : std::string()) << "," << csv_number(r.attack, "")
           << "," << csv_number(r.certified, "lower") << "," << csv_number(r.refuted, "") << "," << r.checks
           << "," << operators::to_string(r.method) << ","
           << (r.has_local ? csv_number(r.local, "lower") : std::string());
        if (bab)
          os << "," << csv_number(r.bab, "lower") << "," << csv_number(r.bab_seconds, "") << ","
             << r.bab_tests << "," << r.bab_branches;
        os << "\n";
      }
      const std::string text = os.str();
      io::write_file_atomic(o.out, std::as_bytes(std::span(text.data(), text.size())));
    }
  }
  if (o.plot_dir) {
    const report::RenderResult rendered = report::render(report::accuracy_figure(rows), *o.plot_dir);
    o.plot_dir->commit();
    std::cout << "plot: " << (std::filesystem::path(o.plot) / "plots" / "certified_accuracy").string()
              << (rendered.rendered ? ".svg/.png" : ".dat/.gp (not rendered: " + rendered.problem + ")")
              << "\n";
  }
}

}  // namespace regatta::cli
