// regatta certify: robustness of a whole trained model (a safetensors layout, image or text, or an ONNX
// graph) on a labelled test set (docs/models.md#certifying-a-model-file): the options, their checks and the
// safetensors front end. Every model file then takes one route (certify_graph.cpp): per input the certified
// radius (affine forms or region enclosures), the attack radius (an estimate), the naive product certificate
// and, with --compare local, the composition of per-stage local bounds; certified and attack accuracy at a
// list of radii, and with --plot DIR their curves against the radius.
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
#include <regatta/operators/graph_transformer.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_graph.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "certify_output.hpp"
#include "command.hpp"
#include "numbers.hpp"
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
  std::string norm = "2";            ///< "2" or "inf" (inf: over the graph)
  std::vector<double> input_range;   ///< LO,HI (over the graph)
  std::string checkpoint;            ///< finished rows kept here (task_runner.hpp)
  double budget = 0;                 ///< --budget-per-input seconds (0: none)
  std::string position;              ///< --position last|K ("": last, for logits per token)
};

// --checkpoint: what the rows depend on (the model, its config, the data, the options that change a row).
TaskCheckpoint rows_checkpoint(const CertifyArgs& args, const std::string& config) {
  if (args.checkpoint.empty()) return {};
  check_checkpoint_path("--checkpoint", args.checkpoint);
  std::vector<std::string> files{args.model, args.data};
  if (!config.empty()) files.push_back(config);
  nlohmann::json options{{"limit", args.limit},   {"tolerance", args.tolerance},
                         {"method", args.method}, {"compare", args.compare},
                         {"norm", args.norm},     {"input_range", args.input_range}};
  if (args.budget > 0) options["budget_per_input"] = args.budget;  // absent without: older files still match
  if (!args.position.empty()) options["position"] = args.position;
  return {args.checkpoint, "regatta-certify-checkpoint-1", certify_fingerprint(files, options)};
}

/// The safetensors front end: the Model read, its test set (text: tokens looked up in the embedding table),
/// the graph of the Model on that input length (model_graph, fused) and the transformer recognised in it: the
/// rows are the recognised Model's, as for an ONNX file (LLaMA's too: rotary attention, docs/graph.md#fusion;
/// docs/models.md#certifying-a-model-file).
CertifySource read_safetensors_source(const CertifyArgs& args) {
  Model m = operators::load_model(args.model, args.config);
  TestSet data = read_test_set(args.data, m, args.limit);
  CertifySource s;
  s.model_path = args.model;
  s.data_path = args.data;
  s.labels = std::move(data.labels);
  for (const Vector<double>& x : data.images) s.inputs.emplace_back(x.data(), x.data() + x.size());
  data.images.clear();
  s.graph = operators::model_graph(m, Eigen::Index(s.inputs.front().size()), args.model);
  s.model = operators::recognise_transformer(*s.graph, &s.why_not);
  // Every safetensors layout is recognised: a refusal is a defect of the recognition, not of the file.
  if (!s.model)
    throw std::logic_error("certify: the graph of the " + m.layout +
                           " model is not recognised: " + s.why_not);
  // One token: a causal model's graph has no mask to read (one key), so the graph cannot tell its causal
  // last-token attention from an unmasked one, the same function; the file's flags say which it is. Nor can
  // it tell the rotary θ (every angle is 0): the file's.
  if (m.text() && s.model->model.context == 1) {
    s.model->model.causal = m.causal;
    s.model->model.pooling = m.pooling;
    s.model->model.layout = m.layout;
    for (std::size_t b = 0; b < m.blocks.size(); ++b)
      s.model->model.blocks[b].attention.rotary = m.blocks[b].attention.rotary;
  }
  s.model_origin = recognised_origin(*s.model);
  return s;
}

void run(const CertifyArgs& args, int& result) {
  for (double r : args.radii)
    if (!(std::isfinite(r) && r >= 0)) throw InputError("--radii", "every radius must be finite and >= 0");
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
  const CertifyOptions options{
      args.out,         args.plot,
      args.norm,        args.radii,
      args.input_range, args.tolerance,
      args.method,      std::find(args.compare.begin(), args.compare.end(), "local") != args.compare.end(),
      args.budget,      args.position};
  if (!args.input_range.empty() &&
      !(args.input_range.size() == 2 && std::isfinite(args.input_range[0]) &&
        std::isfinite(args.input_range[1]) && args.input_range[0] < args.input_range[1]))
    throw InputError("--input-range", "must be LO,HI with finite LO < HI");
  if (args.budget > 0 && args.method == "region")
    throw InputError("--budget-per-input", "applies to --method affine (branch and bound on affine forms)");
  report::OutputDir* plot = plot_dir ? &*plot_dir : nullptr;
  if (std::filesystem::path(args.model).extension() == ".onnx") {  // any graph: certify_graph.cpp
    if (!args.config.empty())
      throw InputError("--config", "applies to safetensors models, not to an .onnx graph");
    const CertifySource source = read_onnx_source(args.model, args.data, args.limit, options);
    run_certify(source, options, rows_checkpoint(args, ""), plot);
    result = exit_ok;
    return;
  }
  // l-inf, a box or a budget: the rows walk the layout's graph (certify_graph.cpp), as an ONNX file's would.
  const char* graph_option = args.norm != "2"            ? "--norm"
                             : !args.input_range.empty() ? "--input-range"
                             : args.budget > 0           ? "--budget-per-input"
                                                         : nullptr;
  if (!args.position.empty())
    throw InputError("--position",
                     "applies to an ONNX graph whose logits are per token; a safetensors model's logits are "
                     "one row (its pooling)");
  std::string config = args.config;  // load_model's default: config.json beside the model, when there
  if (config.empty()) {
    const std::filesystem::path beside = std::filesystem::path(args.model).parent_path() / "config.json";
    if (std::filesystem::is_regular_file(beside, ec)) config = beside.string();
  }
  CertifySource source = read_safetensors_source(args);
  if (graph_option) {
    // A rotary layout's graph holds binary64 cos and sin tables with the enclosure radius that covers the
    // Model's exact rotation (docs/graph.md#enclosure-radii-of-constants): rows on the graph certify the
    // file's Model.
    if (args.norm != "2" || !args.input_range.empty()) {
      source.why_not = args.norm != "2" ? "--norm inf" : "--input-range";
      source.model.reset();  // the recognised Model's certificates cover the l2 ball without a box only
      check_graph_rows(source, options);
    }
  }
  run_certify(source, options, rows_checkpoint(args, config), plot);
  result = exit_ok;
}

}  // namespace

void add_certify_command(CLI::App& app, int& result) {
  auto args = std::make_shared<CertifyArgs>();
  auto* cmd = app.add_subcommand(
      "certify",
      "Certified l2 robustness radius of a whole trained model (timm ViT on images; GPT-2 or BERT on "
      "text, in the token-embedding space) on a labelled test set");
  cmd->add_option(
         "--model", args->model,
         "Model weights (.safetensors in timm ViT, GPT-2, BERT or LLaMA naming, recognised from the names), "
         "or any ONNX graph (.onnx: one input, logits out); a transformer recognised in the graph is "
         "certified by the block pipeline, any other graph by affine forms over the graph")
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
                  "on the digits ViT; a recognised transformer's, not an unrecognised graph's)")
      ->delimiter(',')
      ->check(CLI::IsMember({"local"}));
  cmd->add_option("--norm", args->norm,
                  "The perturbation's norm: 2 (the default) or inf (l-infinity: over the graph)")
      ->check(CLI::IsMember({"2", "inf"}));
  cmd->add_option("--input-range", args->input_range,
                  "LO,HI: the valid range of every input coordinate (over the graph): the certificate and "
                  "the attack are over the ball intersected with this box")
      ->delimiter(',')
      ->expected(2);
  cmd->add_option("--tolerance", args->tolerance,
                  "Relative tolerance of the bisection on the certified radius (default 0.01)")
      ->check(finite_in(0, 1, Ends::open));
  cmd->add_option("--budget-per-input", args->budget,
                  "S seconds (> 0) of branch and bound per input after the affine forms' radius (over the "
                  "graph, --method affine): the bisection goes on above it, each radius tested by verify's "
                  "search (ReLU phase splitting; input splitting for l-inf); default: none")
      ->check(positive(1e7));
  cmd->add_option("--position", args->position,
                  "last or K: for an ONNX model whose logits are per token ([1, n, C] or [n, C], n > 1: a "
                  "language model's head over every position), certify the prediction at token K (0-based; "
                  "default: last, the next-token prediction); refused for any other model");
  cmd->add_option("--checkpoint", args->checkpoint,
                  "Keep each finished input's row in this file (rewritten atomically); a rerun with the same "
                  "file and inputs skips them")
      ->check(file_name());
  cmd->callback([args, &result] { run(*args, result); });
}

}  // namespace regatta::cli
