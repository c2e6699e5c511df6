// Section 9: certified robustness of a trained ViT — `regatta certify` on the first images of a labelled test
// set (by default the committed digits fixture, tests/data/vit_digits): per image the certified radius from
// region enclosures, the attack radius, the naive product certificate, and the accuracy curves against the
// radius. What limits the certified radius: docs/models.md.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include <regatta/operators/model.hpp>
#include <regatta/operators/model_robustness.hpp>
#include "../numbers.hpp"
#include "../test_set.hpp"
#include "accuracy_figure.hpp"
#include "common.hpp"
#include "sections.hpp"

namespace regatta::cli::report {

Section section_robustness(const Context& ctx) {
  Section s;
  s.title = "Certified robustness of a trained ViT";
  const ReportOptions& o = ctx.options();
  if (o.model.empty() || !std::filesystem::exists(o.model) || !std::filesystem::exists(o.data)) {
    s.produced = false;
    s.not_produced =
        "no model: give --model FILE.safetensors --data TEST.npz (the default, the digits fixture "
        "tests/data/vit_digits of the source tree, is not at " +
        (o.model.empty() ? std::string("(none)") : o.model.string()) + ")";
    return s;
  }
  const operators::Model model = operators::load_model(o.model.string(), "");
  const long count = ctx.size(1L, 12L);
  const TestSet data = read_test_set(o.data.string(), model, count);
  std::string why_naive;
  const auto factors = operators::global_lipschitz_factors(model, why_naive);
  const double denominator = factors ? operators::naive_denominator(*factors) : NAN;
  const double tolerance = ctx.size(0.5, 0.05);

  const operators::ConvertedModel<double> md(model);
  const operators::ConvertedModel<interval64> mi(model);
  const long n = long(data.images.size());
  std::vector<operators::InputRobustness> rows(std::size_t(n), operators::InputRobustness{});
  {
    auto bar = ctx.progress("9 robustness of the ViT", n);
    std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1)
    for (long i = 0; i < n; ++i) {
      try {
        rows[std::size_t(i)] = operators::input_robustness(
            md, mi, data.images[std::size_t(i)], data.labels[std::size_t(i)], denominator, tolerance);
      } catch (...) {
#pragma omp critical(regatta_report_robustness_failure)
        if (!failure) failure = std::current_exception();
      }
#pragma omp critical(regatta_report_robustness_progress)
      bar->advance();
    }
    if (failure) std::rethrow_exception(failure);
    bar->finish();
  }

  s.configuration.push_back(
      "model " + o.model.string() + " (" + std::to_string(model.blocks.size()) + " blocks, width " +
      std::to_string(model.width) + ", " + std::to_string(model.heads) + " heads" + "), data " +
      o.data.string() +
      (n == 1 ? std::string(", the first image") : ", the first " + std::to_string(n) + " images"));
  s.configuration.push_back("certified radius: affine forms, bisection to relative tolerance " +
                            format_number(tolerance, Kind::input) +
                            "; attack: DeepFool, boundary bisection and l2 PGD (operators::attack)");
  s.text.push_back(
      "The ℓ₂ robustness radius of a whole network around an input x is the distance to the nearest input "
      "with another prediction. `regatta certify` brackets it per image: from below by the **certified "
      "radius** (affine forms carried through every block — patch embedding, LayerNorms, attention, MLP, "
      "pooling, head — whose first-order dependence on the input is exact and whose second-order remainders "
      "are bounded, so that the margin stays positive on the whole ball; docs/models.md), from above by the "
      "**attack radius** (the smallest perturbation regatta's "
      "attack finds that flips the prediction, an estimate). The **naive** certificate divides the margin by "
      "√2 times the product of certified per-stage global Lipschitz bounds.");

  Table t("robustness_vit", "Per-image robustness radii of the digits ViT");
  t.column("index", "image", Kind::input)
      .column("label", "label", Kind::input)
      .column("prediction", "prediction", Kind::estimate)
      .column("margin", "margin z_y − max z_c", Kind::estimate)
      .column("margin_lower", "margin", Kind::certified_lower)
      .column("naive", "naive radius", Kind::certified_lower)
      .column("certified", "certified radius", Kind::certified_lower)
      .column("attack", "attack radius", Kind::estimate)
      .column("ratio", "certified / attack", Kind::estimate);
  for (long i = 0; i < n; ++i) {
    const operators::InputRobustness& r = rows[std::size_t(i)];
    t.add_row({double(i), double(r.label), double(r.prediction), r.margin, r.margin_lower, r.naive,
               r.certified, r.attack, std::isfinite(r.attack) ? r.certified / r.attack : NAN});
  }
  t.caption =
      "Certified radii are rounded down; the attack radius is an upper bound on the true radius "
      "(inf: the attack found nothing). Naive: " +
      (factors ? std::string("margin / (√2·Π L_k), L_k certified per-stage global bounds")
               : "not available (" + why_naive + ")") +
      ".";
  // Accuracy at a few radii (those of bench/RESULTS.md): k of the n images, a fraction printed exactly.
  Table acc("robustness_vit_accuracy_at", "Certified and attack accuracy of the digits ViT at fixed radii");
  acc.column("radius", "radius r", Kind::input)
      .column(
          "certified_count", "correct, certified margin > 0 and radius ≥ r", Kind::certified_lower,
          "images predicted correctly whose certified radius is at least r: a lower bound on the robust ones")
      .column("attack_count", "correct, not broken within r", Kind::estimate,
              "images predicted correctly that the attack did not break within r: an upper bound")
      .column("inputs", "images", Kind::input)
      .column(
          "certified_accuracy", "certified accuracy", Kind::text,
          "certified_count / images, exactly (the decimal rounded down, and said so, when it does not end)")
      .column("attack_accuracy", "attack accuracy", Kind::text, "attack_count / images, exactly");
  long at_two_percent = -1;
  for (double radius : {0.0, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1}) {
    std::int64_t certified = 0, unbroken = 0;
    for (const operators::InputRobustness& r : rows) {
      certified += operators::certified_at(r, radius);
      unbroken += r.prediction == r.label && r.attack > radius;
    }
    acc.add_row({radius, certified, unbroken, std::int64_t(n), fraction_text(certified, n),
                 fraction_text(unbroken, n)});
    if (radius == 0.02) at_two_percent = long(certified);
  }
  acc.caption =
      "An accuracy is a count of images, so it is printed as the exact fraction k/n. The certified accuracy "
      "is a lower bound on the robust accuracy at r, the attack accuracy an upper bound on it.";
  Figure fig = accuracy_figure(rows);
  fig.id = "robustness_vit_accuracy";
  const operators::RobustnessSummary summary = operators::summarize(rows);
  const double med_c = summary.median_certified, med_a = summary.median_attack, med_n = summary.median_naive;
  s.findings.push_back("median certified radius " + format_number(med_c, Kind::certified_lower) +
                       " (certified), median attack radius " + format_number(med_a, Kind::estimate) +
                       " (estimate): ratio " + format_number(med_c / med_a, Kind::estimate) +
                       " (estimate; 1 would mean the certificate is tight)");
  s.findings.push_back("certified accuracy at r = 0.02: " + fraction_text(at_two_percent, n) +
                       " of the images (certified lower bound on the robust accuracy)");
  if (med_n > 0)
    s.findings.push_back("median certified radius / median naive radius " +
                         format_number(med_c / med_n, Kind::estimate) + " (estimate)");
  s.omissions.push_back(
      "What limits the certified radius (docs/models.md, 'What limits the certified radius'): the "
      "second-order remainders of the softmax and of the LayerNorms (ε = 1e-6), each a worst case over its "
      "range; the gap to the attack radius is the certificate's, not necessarily the network's.");
  s.add(std::move(fig), std::move(t));
  s.tables.push_back(std::move(acc));
  return s;
}

}  // namespace regatta::cli::report
