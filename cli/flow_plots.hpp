#pragma once
// gnuplot figures of a flow (regatta flow --plot, and the report section "Attention dynamics and
// clustering"): particles on S¹ / S² (orthographic view from (1, 1, 1)/√3: front hemisphere filled, back
// hemisphere open grey) at four recorded times, energy and cluster count against time, W₂(μ_t, μ_0) against
// time. Data (.dat) and scripts (.gp) are written into DIR/plots and rendered to PNG and SVG when gnuplot is
// installed; every value plotted is an estimate and the titles say so.
#include <filesystem>
#include <string>
#include <vector>

#include <regatta/core/eigen.hpp>

namespace regatta::cli {

struct FlowPlotData {
  std::vector<double> times;
  std::vector<Matrix<double>> states;
  std::vector<double> energy, clusters, w2_initial;
  std::string model;
  double beta = 0;
};

/// Writes and renders the figures; returns "" or why they were not rendered (scripts and data stay).
std::string write_flow_plots(const std::filesystem::path& dir, const FlowPlotData& data);

}  // namespace regatta::cli
