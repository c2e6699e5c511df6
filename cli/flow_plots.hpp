#pragma once
// gnuplot figures of a flow (regatta flow --plot, and the report section "Attention dynamics and
// clustering"): particles on S¹ / S² (orthographic view from (1, 1, 1)/√3: front hemisphere filled, back
// hemisphere open grey) at four recorded times, energy and cluster count against time, W₂(μ_t, μ_0) against
// time; an animation of the particles over every recorded time (particles.gif, gnuplot's gif terminal); with
// --perturb, the distance between the two flows [estimate] against the Grönwall bound [certified upper]
// (stability.png/.svg, log scale; the bound's data written rounded up). Data (.dat) and scripts (.gp) are
// written into DIR/plots and rendered when gnuplot is installed; every title says which values are estimates.
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
  /// --perturb: times, ‖X_t − Y_t‖_a (estimates) and the certified bound (NaN: none); empty otherwise
  std::vector<double> stability_times, stability_distance, stability_bound;
};

/// Writes and renders the figures; returns "" or why they were not rendered (scripts and data stay).
std::string write_flow_plots(const std::filesystem::path& dir, const FlowPlotData& data);

}  // namespace regatta::cli
