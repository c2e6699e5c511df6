// The affine-form pass over an ONNX model on VNN-COMP local-robustness properties
// (docs/models.md#the-graph-pass): for each VNNLIB file, the input box it states (its outer enclosure) as an
// l-infinity set, the label it protects (the Y_label that every disjunct compares against), and the certified
// margin min_{c != label} (Y_label - Y_c) over the box by graph_affine_margin; with the wall time of the pass
// and the process's peak resident memory so far. A positive margin verifies the property (unsat).
//
//     build/bench/regatta_graph_affine_vnnlib MODEL.onnx PROPERTY.vnnlib...
//
// Prints one CSV line per property: file,label,margin,seconds,peak_rss_mib. Needs REGATTA_ONNX.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

#include <regatta/core/error.hpp>
#include <regatta/graph/onnx_import.hpp>
#include <regatta/graph/vnnlib.hpp>
#include <regatta/operators/graph_affine.hpp>

namespace {

using namespace regatta;

/// The label a robustness property protects: the output on the smaller side of every atom.
int protected_label(const graph::Property& p) {
  int label = -1;
  for (const auto& disjunct : p.disjuncts)
    for (const graph::Atom& atom : disjunct) {
      const int y = atom.smaller.output;
      if (y < 0 || (label >= 0 && y != label))
        throw InputError(p.source, "not a local-robustness property (Y_i >= Y_label for one label)");
      label = y;
    }
  if (label < 0) throw InputError(p.source, "no output condition");
  return label;
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) / 1024.0;  // kilobytes on Linux
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 0, first = 1;
  if (argc > 2 && std::string(argv[1]) == "--search") {
    steps = std::atoi(argv[2]);
    first = 3;
  }
  if (argc < first + 2 || steps < 0) {
    std::fprintf(stderr, "usage: %s [--search STEPS] MODEL.onnx PROPERTY.vnnlib...\n", argv[0]);
    return 2;
  }
  try {
    const graph::Graph g = graph::import_onnx(argv[first]);
    const std::string why = operators::graph_affine_unsupported(g);
    if (!why.empty()) throw InputError(argv[first], why);
    const auto inputs = std::size_t(graph::element_count(g.values[std::size_t(g.inputs.front())].shape));
    const auto outputs = std::size_t(graph::element_count(g.values[std::size_t(g.outputs.front())].shape));
    std::printf("file,label,margin,seconds,peak_rss_mib,fraction\n");
    for (int k = first + 1; k < argc; ++k) {
      const graph::Property p = graph::read_vnnlib(argv[k]);
      graph::check_property_size(p, inputs, outputs);
      const int label = protected_label(p);
      operators::InputSet set;
      set.norm = operators::InputNorm::linf;
      const auto n = Eigen::Index(inputs);
      set.centre.resize(n);
      set.scale.resize(n);
      set.lower = Eigen::Map<const Eigen::VectorXd>(p.outer_lower.data(), n);
      set.upper = Eigen::Map<const Eigen::VectorXd>(p.outer_upper.data(), n);
      for (Eigen::Index j = 0; j < n; ++j) {
        // centre ± scale covers [lower, upper] (scale rounded up); the pass intersects it with the box
        set.centre(j) = set.lower(j) / 2 + set.upper(j) / 2;
        set.scale(j) = std::max(std::nextafter(set.upper(j) - set.centre(j), INFINITY),
                                std::nextafter(set.centre(j) - set.lower(j), INFINITY));
      }
      set.radius = 1;
      const auto start = std::chrono::steady_clock::now();
      const double margin = operators::graph_affine_margin(g, set, label);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      double lo = margin > 0 ? 1 : 0, up = 1;
      for (int s = 0; s < steps && lo < 1; ++s) {
        set.radius = (lo + up) / 2;
        (operators::graph_affine_margin(g, set, label) > 0 ? lo : up) = set.radius;
      }
      std::printf("%s,%d,%.6g,%.2f,%.0f,%.4g\n", std::filesystem::path(argv[k]).filename().c_str(), label,
                  margin, seconds, peak_rss_mib(), lo);
      std::fflush(stdout);
    }
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  return 0;
}
