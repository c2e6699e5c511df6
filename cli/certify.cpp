// regatta certify: ℓ₂ robustness of a whole trained model (image or text) on a labelled test set
// (docs/models.md): per input the certified radius (affine forms or region enclosures), the attack radius (an
// estimate), the naive product certificate and, with --compare local, the composition of per-stage local
// bounds; certified and attack accuracy at a list of radii, and with --plot DIR their curves against the
// radius.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/io/file_bytes.hpp>
#include <regatta/core/io/json_file.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_affine.hpp>
#include <regatta/operators/model_local.hpp>
#include <regatta/operators/model_robustness.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "command.hpp"
#include "numbers.hpp"
#include "report/accuracy_figure.hpp"
#include "report/output.hpp"
#include "report/progress.hpp"
#include "test_set.hpp"
#include "validate.hpp"

namespace regatta::cli {
namespace {

using operators::Model;

struct CertifyArgs {
  std::string model, data, config, out, plot;
  std::vector<double> radii;
  long limit = 0;
  double tolerance = 0.01;
  std::string method = "affine";
  std::vector<std::string> compare;  ///< extra comparison columns: "local"
};

using Row = operators::InputRobustness;

std::string csv_number(double v, const char* kind) {
  if (std::isinf(v)) return "inf";
  if (std::string(kind) == "lower") return lower_number(v, 10);
  return number(v, 10);
}

void run(const CertifyArgs& args, int& result) {
  for (double r : args.radii)
    if (!(std::isfinite(r) && r >= 0)) throw InputError("--radii", "every radius must be finite and >= 0");
  const bool json_out = !args.out.empty() && std::filesystem::path(args.out).extension() == ".json";
  if (!args.out.empty()) {
    const auto ext = std::filesystem::path(args.out).extension();
    if (ext != ".json" && ext != ".csv") throw InputError("--out", "must end in .json or .csv");
    check_output_folder("--out", args.out);
    io::check_replaceable(args.out);  // a directory or link there: refused now, not after the whole run
  }
  // The plot directory is checked (and its staging folder made) before any work; it replaces DIR only once
  // the figure is written.
  std::optional<report::OutputDir> plot_dir;
  if (!args.plot.empty()) {
    check_name_length("--plot", args.plot);
    try {
      plot_dir.emplace(args.plot);
    } catch (const InputError& e) {
      throw InputError("--plot", e.problem());
    }
  }
  std::error_code ec;  // the non-throwing overloads: a name too long is bad input, not exit 3
  if (!std::filesystem::exists(args.model, ec))
    throw InputError("--model", "no such file: " + args.model + (ec ? " (" + ec.message() + ")" : ""));
  if (!std::filesystem::exists(args.data, ec))
    throw InputError("--data", "no such file: " + args.data + (ec ? " (" + ec.message() + ")" : ""));
  if (!args.config.empty() && !std::filesystem::exists(args.config, ec))
    throw InputError("--config", "no such file: " + args.config + (ec ? " (" + ec.message() + ")" : ""));
  const Model m = operators::load_model(args.model, args.config);
  const TestSet data = read_test_set(args.data, m, args.limit);

  std::string why_naive;
  const auto factors = operators::global_lipschitz_factors(m, why_naive);
  const double product = factors ? operators::naive_denominator(*factors) : NAN;  // √2·Π L_k rounded up
  const bool compare_local =
      std::find(args.compare.begin(), args.compare.end(), "local") != args.compare.end();
  const std::string why_local = operators::local_composition_unsupported(m);
  const bool local = compare_local && why_local.empty();

  const operators::ConvertedModel<double> md(m);
  const operators::ConvertedModel<interval64> mi(m);
  retain_freed_memory();  // the region passes free and reallocate megabyte temporaries many times a second
  const long count = long(data.images.size());
  std::vector<Row> rows(static_cast<std::size_t>(count));
  {
    report::Progress progress("certify", count, true);
    std::exception_ptr failure;  // the first exception of any thread, rethrown after the loop
#pragma omp parallel for schedule(dynamic, 1)
    for (long i = 0; i < count; ++i) {
      try {
        rows[std::size_t(i)] = operators::input_robustness(
            md, mi, data.images[std::size_t(i)], data.labels[std::size_t(i)], product, args.tolerance,
            args.method == "region" ? operators::RadiusMethod::region : operators::RadiusMethod::affine,
            local);
      } catch (...) {
#pragma omp critical(regatta_certify_failure)
        if (!failure) failure = std::current_exception();
      }
#pragma omp critical(regatta_certify_progress)
      progress.advance();
    }
    if (failure) std::rethrow_exception(failure);
  }

  const operators::RobustnessSummary summary = operators::summarize(rows);
  const double med_c = summary.median_certified, med_a = summary.median_attack, med_n = summary.median_naive;
  // An accuracy is a count of inputs: k of the n inputs, exact (printed as the fraction, fraction_text).
  auto count_at = [&](double radius, bool certified) {
    long k = 0;
    for (const Row& r : rows)
      k += certified ? operators::certified_at(r, radius) : r.prediction == r.label && r.attack > radius;
    return k;
  };
  long correct = 0;
  for (const Row& r : rows) correct += r.prediction == r.label;

  std::cout << "regatta certify: " << args.model << " on " << args.data << " (" << count << " inputs)\n";
  std::cout << "clean accuracy (estimate: predictions of the double forward pass): "
            << fraction_text(correct, count) << "\n";
  if (factors) {
    std::cout << "naive certificate margin/(sqrt2 * prod L_k), certified per-stage global bounds:\n";
    for (const auto& f : *factors)
      std::cout << "  " << f.stage << "  <= " << upper_number(f.upper, 6) << "  (" << f.how << ")\n";
  } else {
    std::cout << "naive certificate: not available (" << why_naive << ")\n";
  }
  std::cout << "\n  index label pred  margin(est)  naive(cert)" << (local ? "  local(cert)" : "")
            << "      attack(est)  certified(cert)\n";
  for (long i = 0; i < count; ++i) {
    const Row& r = rows[std::size_t(i)];
    std::cout << "  " << i << "  " << r.label << "  " << r.prediction << "  " << number(r.margin, 6) << "  "
              << lower_number(r.naive, 4) << "  " << (local ? lower_number(r.local, 4) + "  " : "")
              << number(r.attack, 6) << "  " << lower_number(r.certified, 6) << "\n";
  }
  std::cout << "\nmedian certified radius (certified, rounded down): " << lower_number(med_c, 6) << "\n";
  std::cout << "median attack radius (estimate, upper bound on the true radius): " << number(med_a, 6)
            << "\n";
  std::cout << "median naive radius (certified): " << lower_number(med_n, 4) << "\n";
  if (local)
    std::cout << "median local-composition radius (certified, rounded down): "
              << lower_number(summary.median_local, 4) << "\n";
  else
    std::cout << "local composition of per-stage bounds: "
              << (compare_local ? "not available (" + why_local + ")"
                                : std::string("not computed (--compare local)"))
              << "\n";
  if (med_a > 0) std::cout << "median certified / median attack: " << number(med_c / med_a, 4) << "\n";
  if (med_n > 0) std::cout << "median certified / median naive: " << number(med_c / med_n, 4) << "\n";
  if (local && summary.median_local > 0)
    std::cout << "median certified / median local: " << number(med_c / summary.median_local, 4) << "\n";
  std::cout << "bisection: relative tolerance " << number(args.tolerance) << " on the certified radius\n";
  {
    long affine = 0;
    for (long i = 0; i < count; ++i) affine += rows[std::size_t(i)].method == operators::RadiusMethod::affine;
    std::cout << "certified radius by "
              << (affine == count ? "affine forms"
                  : affine == 0   ? "region enclosures"
                                  : "affine forms and region enclosures")
              << (args.method == "affine" && affine < count
                      ? " (affine forms do not apply: " + operators::affine_unsupported(m) + ")"
                      : std::string())
              << "\n";
  }
  if (!args.radii.empty()) {
    std::cout << "\n  radius  certified accuracy  attack accuracy (estimate, an upper bound)  [k of the "
              << count << " inputs, exact]\n";
    for (double r : args.radii)
      std::cout << "  " << number(r) << "  " << fraction_text(count_at(r, true), count) << "  "
                << fraction_text(count_at(r, false), count) << "\n";
  }

  if (!args.out.empty()) {
    if (json_out) {
      nlohmann::json j;
      j["model"] = args.model;
      j["data"] = args.data;
      j["kinds"] = {
          {"margin", "estimate"},
          {"margin_lower", "certified lower bound"},
          {"naive_radius", "certified lower bound on the robustness radius"},
          {"attack_radius", "estimate (upper bound on the true radius; null: no attack succeeded)"},
          {"certified_radius", "certified lower bound on the robustness radius"},
          {"refuted_radius", "smallest radius the test failed at (a limit of the test)"},
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
      j["bisection_relative_tolerance"] = args.tolerance;
      if (factors) {
        for (const auto& f : *factors)
          j["naive_factors"].push_back({{"stage", f.stage}, {"upper", f.upper}, {"how", f.how}});
      } else {
        j["naive_factors"] = nullptr;
        j["naive_unavailable"] = why_naive;
      }
      if (!local)
        j["local_unavailable"] = compare_local ? why_local : std::string("not computed (--compare local)");
      for (long i = 0; i < count; ++i) {
        const Row& r = rows[std::size_t(i)];
        j["inputs"].push_back({{"index", i},
                               {"label", r.label},
                               {"prediction", r.prediction},
                               {"margin", r.margin},
                               {"margin_lower", r.margin_lower},
                               {"naive_radius", r.naive},
                               {"attack_radius", number_or_null(r.attack)},
                               {"certified_radius", r.certified},
                               {"refuted_radius", r.refuted},
                               {"method", operators::to_string(r.method)},
                               {"region_checks", r.checks},
                               {"local_radius", r.has_local ? nlohmann::json(r.local) : nlohmann::json()},
                               {"local_checks", r.local_checks}});
      }
      j["summary"] = {
          {"inputs", count},
          {"clean_count", correct},
          {"clean_accuracy", summary.clean_accuracy},
          {"median_certified_radius", med_c},
          {"median_attack_radius", number_or_null(med_a)},
          {"median_naive_radius", med_n},
          {"median_local_radius", local ? nlohmann::json(summary.median_local) : nlohmann::json()}};
      for (double r : args.radii) {
        const long certified = count_at(r, true), attacked = count_at(r, false);
        j["accuracy"].push_back(
            {{"radius", r},
             {"inputs", count},
             {"certified_count", certified},
             {"certified_accuracy", (interval64(double(certified)) / interval64(double(count))).lower()},
             {"attack_count", attacked},
             {"attack_accuracy", double(attacked) / double(count)}});
      }
      io::write_json(args.out, j);
    } else {
      std::ostringstream os;
      os << "index,label,prediction,margin_estimate,margin_lower_certified,naive_radius_certified,"
            "attack_radius_estimate,certified_radius_certified,refuted_radius,region_checks,method,"
            "local_radius_certified\n";
      for (long i = 0; i < count; ++i) {
        const Row& r = rows[std::size_t(i)];
        os << i << "," << r.label << "," << r.prediction << "," << csv_number(r.margin, "") << ","
           << csv_number(r.margin_lower, "lower") << "," << csv_number(r.naive, "lower") << ","
           << csv_number(r.attack, "") << "," << csv_number(r.certified, "lower") << ","
           << csv_number(r.refuted, "") << "," << r.checks << "," << operators::to_string(r.method) << ","
           << (r.has_local ? csv_number(r.local, "lower") : std::string()) << "\n";
      }
      const std::string text = os.str();
      io::write_file_atomic(args.out, std::as_bytes(std::span(text.data(), text.size())));
    }
  }
  if (plot_dir) {
    const report::RenderResult rendered = report::render(report::accuracy_figure(rows), *plot_dir);
    plot_dir->commit();
    std::cout << "plot: " << (std::filesystem::path(args.plot) / "plots" / "certified_accuracy").string()
              << (rendered.rendered ? ".svg/.png" : ".dat/.gp (not rendered: " + rendered.problem + ")")
              << "\n";
  }
  result = exit_ok;
}

}  // namespace

void add_certify_command(CLI::App& app, int& result) {
  auto args = std::make_shared<CertifyArgs>();
  auto* cmd = app.add_subcommand(
      "certify",
      "Certified l2 robustness radius of a whole trained model (timm ViT on images; GPT-2 or BERT on "
      "text, in the token-embedding space) on a labelled test set");
  cmd->add_option("--model", args->model,
                  "Model weights (.safetensors in timm ViT, GPT-2 or BERT naming, recognised from the names)")
      ->required();
  cmd->add_option("--data", args->data,
                  "Test set .npz: labels (N,) and images (N, H, W) or (N, C, H, W), or for a text model "
                  "tokens (N, n) (the perturbation is of the n x d token-embedding matrix, l2 = Frobenius)")
      ->required();
  cmd->add_option("--config", args->config, "Model config JSON (default: config.json next to the model)");
  cmd->add_option("--radii", args->radii, "Radii for certified / attack accuracy, comma separated")
      ->delimiter(',')
      ->check(nonnegative());
  cmd->add_option("--out", args->out,
                  "Write every number, labelled certified / estimate: FILE.json or FILE.csv")
      ->check(file_name());
  cmd->add_option("--plot", args->plot,
                  "Directory for the figure of certified, naive and attack accuracy against the radius "
                  "(DIR/plots/certified_accuracy.svg, .png, .dat; replaced atomically)")
      ->check(file_name());
  cmd->add_option("--limit", args->limit, "Only the first N inputs")->check(CLI::Range(1L, 1L << 40));
  cmd->add_option("--method", args->method,
                  "How the certified radius is searched: affine (affine forms through the whole network, "
                  "the default; region where they do not apply) or region (interval enclosures of the "
                  "logits' Jacobian: faster, far looser)")
      ->check(CLI::IsMember({"affine", "region"}));
  cmd->add_option("--compare", args->compare,
                  "Extra comparison columns (comma separated): local = the certified radius from the "
                  "composition of per-stage local Lipschitz bounds (opt-in: about 5 s of one core per input "
                  "on the digits ViT)")
      ->delimiter(',')
      ->check(CLI::IsMember({"local"}));
  cmd->add_option("--tolerance", args->tolerance,
                  "Relative tolerance of the bisection on the certified radius (default 0.01)")
      ->check(finite_in(0, 1, Ends::open));
  cmd->callback([args, &result] { run(*args, result); });
}

}  // namespace regatta::cli
