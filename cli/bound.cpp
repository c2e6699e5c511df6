// regatta bound (--layer FILE --heads H | --random SPEC) [--n N] [--radius R] [--norm 2|inf] [--json]: every
// theoretical Lipschitz upper bound of docs/math/bounds.md for the layer, each with its claim ID, as a
// double estimate and a certified (interval) upper bound, or the reason it does not apply. A 3-D --input
// (B x n x d) gives the bounds at each input of the batch (JSON: {"batch": B, "inputs": [{index, bounds}]}).
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>
#include "command.hpp"
#include "json_output.hpp"
#include "layer_options.hpp"
#include "numbers.hpp"
#include "validate.hpp"

namespace regatta::cli {

namespace {

struct BoundArgs {
  LayerArgs layer;
  std::int64_t n = 0;  // 0: not given
  double radius = 0;   // 0: not given (checked positive when given)
  double query_radius = 0;
  int depth = 1;
  std::string input;
  std::string norm;
  bool json = false;
  bool radius_given = false, query_radius_given = false;
};

void print_table(const std::vector<lip::BoundReport>& reports) {
  std::cout << std::left << std::setw(25) << "claim" << std::setw(14) << "norm" << std::setw(18) << "estimate"
            << std::setw(18) << "certified upper" << std::setw(12) << "provenance"
            << "bound\n";
  for (const lip::BoundReport& r : reports) {
    const lip::BoundInfo& i = lip::info(r.bound);
    std::cout << std::left << std::setw(25) << i.id << std::setw(14) << i.norm;
    if (!r.applies) {
      std::cout << "refused: " << r.reason << "\n";
      continue;
    }
    std::cout << std::setw(18) << number(r.value) << std::setw(18) << upper_number(r.certified_upper)
              << std::setw(12) << i.provenance << i.name << "\n";
    if (!r.note.empty())
      std::cout << std::setw(39) << ""
                << "(" << r.note << ")\n";
  }
}

nlohmann::json to_json(const lip::BoundReport& r) {
  const lip::BoundInfo& i = lip::info(r.bound);
  return {{"id", i.id},
          {"name", i.name},
          {"norm", i.norm},
          {"applies", r.applies},
          {"value", r.applies ? number_or_null(r.value) : nlohmann::json(nullptr)},
          {"value_kind", "estimate (double, uncertified spectral norms)"},
          {"certified_upper", r.applies ? number_or_null(r.certified_upper) : nlohmann::json(nullptr)},
          {"certified", r.applies},
          {"reason", r.reason},
          {"note", r.note},
          {"provenance", i.provenance},
          {"hypotheses", i.hypotheses},
          {"source", i.source}};
}

void run(const BoundArgs& args, int& result) {
  const ResolvedLayer resolved = resolve_layer(args.layer);
  lip::BoundSetting setting;
  if (args.n != 0) setting.n = args.n;
  if (args.radius_given) {
    check_positive("--radius", args.radius);
    setting.radius = args.radius;
  }
  if (args.query_radius_given) {
    check_positive("--query-radius", args.query_radius);
    setting.query_radius = args.query_radius;
  }
  setting.depth = args.depth;
  std::optional<lip::Norm> norm;
  if (!args.norm.empty()) norm = lip::parse_norm(args.norm, "--norm");
  // Without --input: one evaluation. With a 2-D --input: the bounds at those tokens; with a 3-D one (a batch,
  // B x n x d), the bounds at every input in order, each checked before any bound is computed.
  std::vector<lip::BoundSetting> settings;
  bool batched = false;
  if (args.input.empty()) {
    settings.push_back(setting);
  } else {
    TokenBatch inputs = load_token_batch(args.input, "--input", resolved.layer.d);
    batched = inputs.batched;
    for (std::size_t b = 0; b < inputs.inputs.size(); ++b) {
      lip::BoundSetting one = setting;
      one.input = std::move(inputs.inputs[b]);
      const std::string name = batched ? args.input + " [input " + std::to_string(b) + "]" : args.input;
      check_nonempty(args.input, one.input.rows());
      if (one.n && *one.n != one.input.rows())
        throw InputError("--n", "is " + std::to_string(*one.n) + " but --input has " +
                                    std::to_string(one.input.rows()) + " tokens");
      one.n = one.input.rows();  // --input gives the sequence length
      if (one.radius)
        for (Eigen::Index i = 0; i < one.input.rows(); ++i)
          if (const double r = one.input.row(i).norm(); !(r <= *one.radius))
            throw InputError(name, "token " + std::to_string(i) + " has norm " + number(r, 17) +
                                       ", outside the ball of --radius " + number(*one.radius, 17));
      settings.push_back(std::move(one));
    }
  }

  nlohmann::json batch_json = nlohmann::json::array();
  for (std::size_t b = 0; b < settings.size(); ++b) {
    const lip::BoundSetting& one = settings[b];
    const std::vector<lip::BoundReport> reports =
        lip::theoretical_bounds(resolved.layer, resolved.options, one, norm);
    if (args.json) {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& r : reports) out.push_back(to_json(r));
      if (batched)
        batch_json.push_back({{"index", b}, {"bounds", std::move(out)}});
      else
        std::cout << json_text(out) << "\n";
      continue;
    }
    if (batched)
      std::cout << (b ? "\n" : "") << "input " << b << " (index into the batch of " << settings.size()
                << ")\n";
    std::cout << "layer     " << describe(resolved) << "\n"
              << "setting   n = " << (one.n ? std::to_string(*one.n) : std::string("(not given)"))
              << ", R = " << (one.radius ? number(*one.radius) : std::string("(not given)"))
              << (one.query_radius ? ", R' = " + number(*one.query_radius) : std::string())
              << (one.depth > 1 ? ", depth = " + std::to_string(one.depth) : std::string()) << ", norm "
              << (norm ? lip::to_string(*norm) : std::string("2 and inf")) << "\n"
              << "estimate: the formula in double with accurate but uncertified spectral norms; certified "
                 "upper: interval evaluation, upper end rounded up\n\n";
    print_table(reports);
  }
  // A batch: one object holding each input's array of bounds (the array the command prints for it alone).
  if (args.json && batched)
    std::cout << json_text(nlohmann::json{{"batch", settings.size()}, {"inputs", batch_json}}) << "\n";
  result = exit_ok;
}

}  // namespace

void add_bound_command(CLI::App& app, int& result) {
  auto args = std::make_shared<BoundArgs>();
  auto* cmd =
      app.add_subcommand("bound", "Every theoretical Lipschitz upper bound for a layer, with claim IDs");
  add_layer_options(cmd, args->layer);
  cmd->add_option("--n", args->n,
                  "Sequence length (Kim et al. L2 bounds, the sqrt(n) bound; default: the tokens of --input)")
      ->check(CLI::Range(std::int64_t(1), std::int64_t(1) << 53));
  cmd->add_option_function<double>(
         "--radius",
         [args](double v) {
           args->radius = v;
           args->radius_given = true;
         },
         "Every token (context atom) in the ball B_R (dot-product and measure-level bounds)")
      ->check(positive());
  cmd->add_option_function<double>(
         "--query-radius",
         [args](double v) {
           args->query_radius = v;
           args->query_radius_given = true;
         },
         "Queries in B_R' for the context-Lipschitz bound (default: --radius)")
      ->check(positive());
  cmd->add_option("--depth", args->depth, "Layers of a weight-shared stack for mf.depth (>= 2 to apply)")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option(
      "--input", args->input,
      "Tokens X (n x d, inside B_R with --radius) for the local bound castin.local, or a batch "
      "(B x n x d: the bounds at each input): FILE.npy, FILE.npz[:NAME], FILE.safetensors[:NAME]");
  cmd->add_option("--norm", args->norm,
                  "Only bounds in this norm: 2 (Frobenius, and W_p) or inf (max entry)");
  cmd->add_flag("--json", args->json, "Machine-readable output");
  cmd->callback([args, &result] { run(*args, result); });
}

}  // namespace regatta::cli
