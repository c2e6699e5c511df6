#pragma once
// What `regatta certify` prints and writes, for both of its inputs: a model of the safetensors layouts
// (cli/certify.cpp) and an ONNX graph (cli/certify_graph.cpp). The per-input rows, the medians, the
// accuracies at the radii (exact counts), the --out JSON or CSV with the kind of every number, and the --plot
// figure (docs/models.md).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <regatta/operators/model_robustness.hpp>

#include "report/output.hpp"
#include "report/progress.hpp"
#include "task_runner.hpp"

namespace regatta::cli {

struct CertifyOutput {
  std::string model, data;
  std::string norm = "2";  ///< the perturbation's norm: "2" or "inf" (ONNX graphs only)
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

/// The ".onnx" dispatch of `regatta certify` (certify_graph.cpp). `norm` is "2" or "inf"; `input_range`
/// holds LO,HI or nothing.
struct GraphCertifyArgs {
  std::string model, data, out, plot, norm = "2", checkpoint;
  std::vector<double> radii, input_range;
  long limit = 0;
  double tolerance = 0.01;
  std::string method = "affine";  ///< affine forms, or region enclosures of the gradient (graph_region.hpp)
  double budget = 0;              ///< --budget-per-input seconds (graph_bab_radius.hpp); 0: none
};
void run_graph_certify(const GraphCertifyArgs& args, const TaskCheckpoint& checkpoint,
                       report::OutputDir* plot_dir);

}  // namespace regatta::cli
