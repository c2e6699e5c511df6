// Section 8 — the true constant on a bounded domain by branch and bound (docs/branch-and-bound.md), against
// every published bound that applies to the same layer and domain.
//
// For a convex domain D, Lip(F; D) = sup over D of ‖J(X)‖₂ (docs/branch-and-bound.md, "What is computed"). lip::BranchBound
// brackets it to a relative gap: the lower end is a certified ‖J(c)‖₂ at a point of D, the upper end the
// largest certified region enclosure over the boxes that remain. Two settings with n·d ≤ 4:
//   Kim et al.'s L2 layer, d = 1, W^Q = W^V = W^O = 1, on [−R, R]^N: kim.thm32_2 does not depend on R;
//   dot-product attention, d = 1, A = V = 1, tokens in B_R = [−R, R]: castin.sqrt_n grows like R².
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <regatta/operators/lipschitz/bounds.hpp>
#include <regatta/operators/lipschitz/bracket.hpp>
#include <regatta/operators/lipschitz/branch_bound.hpp>

#include "common.hpp"
#include "sections.hpp"

namespace regatta::cli::report {

namespace {

using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;

struct BnbRun {
  lip::BnbBracket bracket;
  std::uint64_t boxes = 0;
  double seconds = 0;
};

/// Branch and bound to `gap` or until `limit` seconds have passed (the bracket is certified either way).
BnbRun true_constant(const AttentionLayer& layer, Eigen::Index n, lip::DomainShape shape, double radius,
                     double gap, double limit) {
  lip::BnbDomain domain;
  domain.shape = shape;
  domain.radius = radius;
  domain.n = n;
  lip::BnbOptions options;
  options.gap = gap;
  const lip::BranchBound problem(layer, AttentionOptions{}, domain, options);
  lip::BnbState state = problem.initial_state();
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(clock::now() - start).count(); };
  lip::run_branch_bound(problem, state, [&](const lip::BnbState&) { return elapsed() > limit; }, {});
  return {problem.bracket(state), state.evaluated, elapsed()};
}

/// The published sequence-level 2-norm bounds that apply to (layer, n, R), each with its certified value.
struct Published {
  std::vector<std::string> ids;
  std::vector<double> values;  ///< certified upper ends (rounded up)
};

Published published_bounds(const AttentionLayer& layer, std::int64_t n, double radius) {
  lip::BoundSetting setting;
  setting.n = n;
  setting.radius = radius;
  Published p;
  for (const lip::BoundReport& r :
       lip::theoretical_bounds(layer, AttentionOptions{}, setting, lip::Norm::two)) {
    if (!r.applies || !lip::is_sequence_bound(r.bound)) continue;
    p.ids.push_back(lip::info(r.bound).id);
    p.values.push_back(r.certified_upper);
  }
  return p;
}

struct Setting {
  const char* key;
  const char* name;
  AttentionLayer layer;
  lip::DomainShape shape;
  std::vector<std::int64_t> ns;
  std::vector<double> radii;
};

}  // namespace

Section section_true_constant(const Context& ctx) {
  Section s;
  s.title = "The true constant (branch and bound)";
  s.text.push_back(
      "Every other section brackets a Lipschitz constant between a searched lower bound and a formula. "
      "On a bounded convex domain D the constant is sup over D of ‖J(X)‖₂, and `regatta lipschitz` "
      "certifies it to a relative gap by best-first branch and bound: the upper end is the largest "
      "certified Jacobian enclosure over the boxes that remain, the lower end a certified ‖J(c)‖₂ at a point "
      "of D (docs/branch-and-bound.md). The tables put that bracket next to every published bound that "
      "applies to the same layer and domain, certified too; their ratio is what the formula gives away.");
  const double gap = 1e-2;
  const double limit = ctx.size(10.0, 120.0);
  std::vector<Setting> settings;
  settings.push_back({"l2", "Kim et al.'s L2 layer (d = 1, W^Q = W^V = W^O = 1) on [−R, R]^N",
                      lip::kim_unit_layer(), lip::DomainShape::box,
                      ctx.quick() ? std::vector<std::int64_t>{2, 3} : std::vector<std::int64_t>{2, 3, 4},
                      ctx.quick() ? std::vector<double>{1, 3} : std::vector<double>{0.5, 1, 1.5, 2, 3}});
  settings.push_back({"dot", "dot-product attention (d = 1, A = V = 1) on tokens in B_R",
                      scalar_layer(AttentionKind::dot, 1, 1, 1, 1), lip::DomainShape::ball,
                      std::vector<std::int64_t>{2, 3},
                      ctx.quick() ? std::vector<double>{0.5, 1.5} : std::vector<double>{0.5, 1, 1.5, 2}});
  long total = 0;
  for (const Setting& st : settings) total += long(st.ns.size() * st.radii.size());
  auto bar = ctx.progress("8 true constant: branch and bound", total);
  for (const Setting& st : settings) {
    s.configuration.push_back(std::string("8") + (st.key[0] == 'l' ? "a" : "b") + ": " + st.name +
                              "; N in {" +
                              [&] {
                                std::string t;
                                for (auto n : st.ns) t += (t.empty() ? "" : ", ") + std::to_string(n);
                                return t;
                              }() +
                              "}, relative gap " + format_number(gap, Kind::input) + ", at most " +
                              format_number(limit, Kind::input) + " s per run (deterministic: no seed)");
    Table t(std::string("true_constant_") + st.key, std::string("True constant: ") + st.name);
    t.column("n", "N", Kind::input)
        .column("R", "R", Kind::input)
        .column("lower", "Lip(F; D) ≥", Kind::certified_lower, "certified ‖J(c)‖₂ at the best point found")
        .column("upper", "Lip(F; D) ≤", Kind::certified_upper, "largest enclosure over the remaining boxes")
        .column("gap", "gap reached", Kind::text, "upper − lower ≤ gap·lower, or the time limit")
        .column("boxes", "boxes", Kind::input, "boxes evaluated")
        .column("seconds", "seconds", Kind::estimate, "wall time of the search")
        .column("bound", "best published bound", Kind::text,
                "smallest applicable sequence-level 2-norm bound")
        .column("bound_value", "its value", Kind::certified_upper)
        .column("ratio", "bound / upper", Kind::estimate, "how far the formula is above the true constant");
    Figure fig(std::string("true_constant_") + st.key,
               std::string("True constant against the published bound: ") + st.name, "R",
               "Lipschitz constant in the 2-norm");
    fig.logy = true;
    fig.key = "below";
    int colour = 0;
    for (auto n : st.ns) {
      Series upper{"N = " + std::to_string(n) + ", true constant ≤",
                   Kind::certified_upper,
                   {},
                   {},
                   true,
                   true,
                   colour};
      Series lower{"N = " + std::to_string(n) + ", true constant ≥",
                   Kind::certified_lower,
                   {},
                   {},
                   true,
                   true,
                   colour};
      Series bound{"N = " + std::to_string(n) + ", best published bound",
                   Kind::certified_upper,
                   {},
                   {},
                   true,
                   false,
                   colour};
      std::string bound_id;
      for (double R : st.radii) {
        const BnbRun run = true_constant(st.layer, n, st.shape, R, gap, limit);
        const Published p = published_bounds(st.layer, n, R);
        std::size_t best = 0;
        for (std::size_t k = 1; k < p.values.size(); ++k)
          if (p.values[k] < p.values[best]) best = k;
        const bool have = !p.values.empty();
        const double bound_value = have ? p.values[best] : std::nan("");
        bound_id = have ? p.ids[best] : "none applies";
        t.add_row({n, R, run.bracket.lower, run.bracket.upper,
                   std::string(run.bracket.gap_reached ? "yes" : "no: time limit"), std::int64_t(run.boxes),
                   run.seconds, bound_id, bound_value, bound_value / run.bracket.upper});
        upper.x.push_back(R);
        upper.y.push_back(run.bracket.upper);
        lower.x.push_back(R);
        lower.y.push_back(run.bracket.lower);
        bound.x.push_back(R);
        bound.y.push_back(bound_value);
        if (R == st.radii.back())
          s.findings.push_back(
              std::string(st.key) + ", N = " + std::to_string(n) + ", R = " + format_number(R, Kind::input) +
              ": the true constant lies in [" + format_number(run.bracket.lower, Kind::certified_lower) +
              ", " + format_number(run.bracket.upper, Kind::certified_upper) + "] (certified" +
              (run.bracket.gap_reached ? "" : ", gap not reached in the time limit") + "); " + bound_id +
              " gives " + said(bound_value, Kind::certified_upper, 4) + ", " +
              format_number(bound_value / run.bracket.upper, Kind::estimate, 3) + " times the upper end");
        bar->advance();
      }
      fig.add(upper).add(lower).add(bound);
      ++colour;
    }
    fig.caption = std::string(
                      "Certified brackets of the true constant sup_D ‖J‖₂ (solid, the two ends) and "
                      "the smallest published bound that applies (") +
                  (st.shape == lip::DomainShape::box ? "kim.thm32_2 does not depend on R"
                                                     : "castin.sqrt_n grows like R²") +
                  "), against the radius R of the domain.";
    s.tables.push_back(std::move(t));
    s.figures.push_back(std::move(fig));
  }
  bar->finish();
  s.omissions.push_back(
      "N = 5 and 6 (L2) and n·d > 4 are left to `regatta lipschitz` (minutes to hours; bench/RESULTS.md): "
      "the "
      "number of boxes grows like (1/gap)^(n·d).");
  return s;
}

}  // namespace regatta::cli::report
