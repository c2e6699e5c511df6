#pragma once
// What `regatta certify` prints and writes, for both of its inputs: a model of the safetensors layouts
// (cli/certify.cpp) and an ONNX graph (cli/certify_graph.cpp). The per-input rows, the medians, the
// accuracies at the radii (exact counts), the --out JSON or CSV with the kind of every number, and the --plot
// figure (docs/models.md).
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include <regatta/operators/model_robustness.hpp>

#include "report/output.hpp"
#include "report/progress.hpp"

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
  std::vector<double> radii;
  std::string out, plot;
  report::OutputDir* plot_dir = nullptr;
};

/// Prints the table and summary on stdout, writes --out (atomically) and the --plot figure.
void write_certify_output(const CertifyOutput& o);

/// The rows one(i) for i in [0, count), on the OpenMP threads (one input per task), with the "certify"
/// progress line; the first exception of any thread is rethrown after the loop.
template <class One>
std::vector<operators::InputRobustness> certify_rows(long count, One one) {
  std::vector<operators::InputRobustness> rows(static_cast<std::size_t>(count));
  report::Progress progress("certify", count, true);
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1)
  for (long i = 0; i < count; ++i) {
    try {
      rows[std::size_t(i)] = one(i);
    } catch (...) {
#pragma omp critical(regatta_certify_failure)
      if (!failure) failure = std::current_exception();
    }
#pragma omp critical(regatta_certify_progress)
    progress.advance();
  }
  if (failure) std::rethrow_exception(failure);
  return rows;
}

/// The ".onnx" dispatch of `regatta certify` (certify_graph.cpp). `norm` is "2" or "inf"; `input_range`
/// holds LO,HI or nothing.
struct GraphCertifyArgs {
  std::string model, data, out, plot, norm = "2";
  std::vector<double> radii, input_range;
  long limit = 0;
  double tolerance = 0.01;
  std::string method = "affine";  ///< affine forms, or region enclosures of the gradient (graph_region.hpp)
};
void run_graph_certify(const GraphCertifyArgs& args, report::OutputDir* plot_dir);

}  // namespace regatta::cli
