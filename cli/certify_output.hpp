#pragma once
// What `regatta certify` computes, prints and writes for every model file: a model of the safetensors layouts
// (read in cli/certify.cpp) and an ONNX graph (cli/certify_graph.cpp), both certified by one row function.
// The per-input rows, the medians, the accuracies at the radii (exact counts), the --out JSON or CSV with the
// kind of every number, and the --plot figure (docs/models.md).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <regatta/graph/graph.hpp>
#include <regatta/operators/graph_transformer.hpp>
#include <regatta/operators/model_robustness.hpp>

#include "report/output.hpp"
#include "report/progress.hpp"
#include "task_runner.hpp"

namespace regatta::cli {

struct CertifyOutput {
  std::string model, data;
  std::string norm = "2";  ///< the perturbation's norm: "2" or "inf" (ONNX graphs only)
  /// The token whose logits are certified when the model's logits are per token (--position); -1: none.
  std::int64_t position = -1, positions = 0;
  std::vector<operators::InputRobustness> rows;
  /// The naive certificate's factors, or nullopt and why_naive.
  std::optional<std::vector<operators::LipschitzFactor>> factors;
  std::string why_naive;
  bool compare_local = false, local = false;  ///< asked for / computed
  std::string why_local;
  std::string method_line;  ///< "certified radius by ..." (how the certified radius was found)
  std::string attack_kind;  ///< the JSON kind of attack_radius
  std::string attack_line;  ///< one line on the attack, printed after the medians ("" for none)
  double tolerance = 0.01;
  double budget = 0;  ///< --budget-per-input (0: none; the rows then have no bab columns)
  std::vector<double> radii;
  std::string out, plot;
  report::OutputDir* plot_dir = nullptr;
};

/// Prints the table and summary on stdout, writes --out (atomically) and the --plot figure.
void write_certify_output(const CertifyOutput& o);

/// The rows one(i) for i in [0, count) with the "certify" progress line (certify_rows.cpp): in one process
/// on the OpenMP threads (one input per task; the first exception of any thread is rethrown after the loop),
/// under mpirun over the ranks (rank 0 gets the rows bit for bit as computed; nullopt on the other ranks,
/// which write nothing); with a checkpoint, the rows it holds are not recomputed and each new one is added.
std::optional<std::vector<operators::InputRobustness>> certify_rows(
    long count, const std::function<operators::InputRobustness(long)>& one, const TaskCheckpoint& checkpoint);

/// What a certify checkpoint depends on besides the model and data files: the options that change a row.
nlohmann::json certify_fingerprint(const std::vector<std::string>& files, const nlohmann::json& options);

/// A model file read by `regatta certify` (docs/models.md#certifying-a-model-file): the graph of its function
/// (an ONNX import, or model_graph of a safetensors layout), the labelled inputs in the graph's input
/// coordinates, and the Model the rows come from: the transformer recognised in the graph, or for LLaMA the
/// Model read from safetensors (its rotary attention is not recognised; no graph is built).
struct CertifySource {
  std::string model_path, data_path;
  std::optional<graph::Graph> graph;
  std::vector<std::vector<double>> inputs;
  std::vector<int> labels;
  std::optional<operators::RecognisedTransformer> model;
  /// With logits per token (output_token_count > 0): the token selected by --position (its row is the
  /// graph's output now) and the token count; -1 and 0 otherwise.
  std::int64_t position = -1, positions = 0;
  std::string model_origin;  ///< how `model` was obtained (for the method line)
  std::string why_not;       ///< why no transformer was recognised in the graph (model empty)
};

/// certify's options that change what is computed or written (certify.cpp checks them). `norm` is "2" or
/// "inf"; `input_range` holds LO,HI or nothing.
struct CertifyOptions {
  std::string out, plot, norm = "2";
  std::vector<double> radii, input_range;
  double tolerance = 0.01;
  std::string method = "affine";  ///< affine forms, or region enclosures
  bool compare_local = false;     ///< --compare local
  double budget = 0;              ///< --budget-per-input seconds (graph_bab_radius.hpp); 0: none
  std::string position;           ///< --position: "last", a 0-based index, or "" (the default: last)
};

/// "the graph's recognised transformer (the block pipeline; <summary>)", for the method line.
std::string recognised_origin(const operators::RecognisedTransformer& transformer);

/// Refuses (InputError) rows over the graph of `s` that cannot run: a node the chosen method does not cover
/// (naming the model file), or an input outside --input-range (naming the data file).
void check_graph_rows(const CertifySource& s, const CertifyOptions& options);

/// The ONNX front end (certify_graph.cpp): the graph (with logits per token, cut to the row of the token
/// options.position selects, the last by default), its recognised transformer (on the l2 ball without a
/// box: the only set the Model's certificates cover) and the test set's first `limit` inputs.
CertifySource read_onnx_source(const std::string& model, const std::string& data, long limit,
                               const CertifyOptions& options);

/// The rows of every model file and the output (certify_graph.cpp): with a Model on the l2 ball without a
/// box, the Model's rows (input_robustness: affine forms or region enclosures, the naive product
/// certificate, with --compare local the composition of local bounds); otherwise the graph's
/// (graph_input_robustness), without the naive and local columns.
void run_certify(const CertifySource& source, const CertifyOptions& options, const TaskCheckpoint& checkpoint,
                 report::OutputDir* plot_dir);

}  // namespace regatta::cli
