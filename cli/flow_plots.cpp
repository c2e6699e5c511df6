// gnuplot figures of a flow (flow_plots.hpp).
#include "flow_plots.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <regatta/core/decimal.hpp>
#include "report/figure.hpp"

namespace regatta::cli {

namespace {

/// Indices of four recorded times: first, ⅓, ⅔, last.
std::vector<std::size_t> snapshot_indices(std::size_t count) {
  std::vector<std::size_t> k{0, (count - 1) / 3, 2 * (count - 1) / 3, count - 1};
  k.erase(std::unique(k.begin(), k.end()), k.end());
  return k;
}

/// The terminal lines of a script rendering to <stem>.png and <stem>.svg.
std::string both_terminals(const std::string& stem, const std::string& size, const std::string& body) {
  std::ostringstream s;
  s << "set terminal pngcairo size " << size << " font ',10'\nset output '" << stem << ".png'\n"
    << body << "set terminal svg size " << size << " font ',10'\nset output '" << stem << ".svg'\nreplot\n";
  return s.str();
}

void write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream f(p);
  f << text;
}

constexpr std::size_t max_frames = 150;
constexpr Eigen::Index max_frame_points = 4000;

/// particles.gif (gnuplot's gif terminal, animate): the particles at every recorded time (evenly thinned
/// to max_frames; the first max_frame_points particles when there are more), the same view as
/// particles.png. Returns the script's name.
std::string write_animation(const std::filesystem::path& plots, const FlowPlotData& data,
                            const std::string& header) {
  const std::size_t count = data.times.size();
  std::vector<std::size_t> frames;
  for (std::size_t f = 0; f < std::min(count, max_frames); ++f)
    frames.push_back(count <= max_frames ? f : f * (count - 1) / (max_frames - 1));
  const Eigen::Index d = data.states.front().cols();
  const Eigen::Index shown = std::min(data.states.front().rows(), max_frame_points);
  const Eigen::Vector3d view = Eigen::Vector3d(1, 1, 1).normalized();
  const Eigen::Vector3d e1 = Eigen::Vector3d(1, -1, 0).normalized(),
                        e2 = Eigen::Vector3d(1, 1, -2).normalized();
  std::ofstream dat(plots / "frames.dat");
  dat << std::setprecision(6) << "# one block per frame (gnuplot index): u v front(1)/back(0); estimates\n";
  for (std::size_t f : frames) {
    const Matrix<double>& X = data.states[f];
    for (Eigen::Index i = 0; i < shown; ++i) {
      if (d == 2) {
        dat << X(i, 0) << " " << X(i, 1) << " 1\n";
      } else {
        const Eigen::Vector3d x(X(i, 0), X(i, 1), X(i, 2));
        dat << x.dot(e1) << " " << x.dot(e2) << " " << (x.dot(view) >= 0 ? 1 : 0) << "\n";
      }
    }
    dat << "\n\n";
  }
  std::ostringstream gp;
  gp << "set terminal gif animate delay 10 loop 0 size 600,640 font ',10'\nset output 'particles.gif'\n"
     << "set size ratio -1\nunset key\nset xrange [-1.1:1.1]\nset yrange [-1.1:1.1]\nunset xtics\n"
     << "unset ytics\nset parametric\nset trange [0:2*pi]\n";
  const std::string what = (d == 3 ? "S^2 seen from (1,1,1) (filled: front, grey: back)" : "S^1") +
                           std::string(shown < data.states.front().rows()
                                           ? ", " + std::to_string(shown) + " of " +
                                                 std::to_string(data.states.front().rows()) + " particles"
                                           : "");
  for (std::size_t k = 0; k < frames.size(); ++k) {
    gp << "set title \"" << header << "\\n"
       << what << "\\nt = " << data.times[frames[k]] << " [positions: estimates]\"\n"
       << "plot cos(t), sin(t) with lines lc rgb '#999999', 'frames.dat' index " << k
       << " using ($3 == 0 ? $1 : 1/0):2 with points pt 6 ps 0.5 lc rgb '#bbbbbb', '' index " << k
       << " using ($3 == 1 ? $1 : 1/0):2 with points pt 7 ps 0.5 lc rgb '#1f77b4'\n";
  }
  write(plots / "animation.gp", gp.str());
  return "animation.gp";
}

}  // namespace

std::string write_flow_plots(const std::filesystem::path& dir, const FlowPlotData& data) {
  const std::filesystem::path plots = dir / "plots";
  std::filesystem::create_directories(plots);
  const Eigen::Index d = data.states.front().cols();
  std::vector<std::string> scripts;
  std::ostringstream header;
  header << data.model << ", beta = " << data.beta << ", n = " << data.states.front().rows();

  // Time series: energy (left axis) and cluster count (right axis, steps); W2 to the initial measure.
  {
    std::ofstream dat(plots / "observables.dat");
    dat << std::setprecision(12) << "# t energy clusters w2_to_initial (all estimates)\n";
    for (std::size_t k = 0; k < data.times.size(); ++k)
      dat << data.times[k] << " " << data.energy[k] << " " << data.clusters[k] << " "
          << (std::isfinite(data.w2_initial[k]) ? data.w2_initial[k] : NAN) << "\n";
    std::ostringstream body;
    body << "set title '" << header.str() << ": energy and clusters [estimate]'\nset xlabel 't'\n"
         << "set ylabel 'interaction energy E_{/Symbol b}'\nset y2label 'clusters (threshold graph)'\n"
         << "set ytics nomirror\nset y2tics\nset logscale y2\nset key top left\nset grid\n"
         << "plot 'observables.dat' using 1:2 with lines lw 2 dt 2 title 'energy [estimate]', "
         << "'' using 1:3 axes x1y2 with steps lw 2 title 'clusters [estimate]'\n";
    write(plots / "energy_clusters.gp", both_terminals("energy_clusters", "800,500", body.str()));
    scripts.push_back("energy_clusters.gp");
    const bool have_w2 = std::any_of(data.w2_initial.begin() + 1, data.w2_initial.end(),
                                     [](double v) { return std::isfinite(v); });
    if (have_w2) {
      std::ostringstream w2;
      w2 << "set title '" << header.str() << ": W2(mu_t, mu_0) [estimate]'\nset xlabel 't'\n"
         << "set ylabel 'W2(mu_t, mu_0)'\nset grid\nset key top left\n"
         << "plot 'observables.dat' using 1:4 with linespoints dt 2 pt 6 title 'W2 to the initial measure "
            "[estimate]'\n";
      write(plots / "w2.gp", both_terminals("w2", "800,500", w2.str()));
      scripts.push_back("w2.gp");
    }
  }

  // Particles at four times.
  if (d == 2 || d == 3) {
    const std::vector<std::size_t> ks = snapshot_indices(data.times.size());
    const Eigen::Vector3d view = Eigen::Vector3d(1, 1, 1).normalized();
    const Eigen::Vector3d e1 = Eigen::Vector3d(1, -1, 0).normalized(),
                          e2 = Eigen::Vector3d(1, 1, -2).normalized();  // view × e1
    std::ostringstream body;
    body << "set multiplot layout 2,2 title '" << header.str()
         << (d == 3 ? ": particles on S^2, orthographic view (filled: front, grey: back)'\n"
                    : ": particles on S^1'\n")
         << "set size ratio -1\nunset key\nset xrange [-1.1:1.1]\nset yrange [-1.1:1.1]\nunset xtics\nunset "
            "ytics\n"
         << "set parametric\nset trange [0:2*pi]\n";
    for (std::size_t s = 0; s < ks.size(); ++s) {
      const std::string file = "particles_" + std::to_string(s) + ".dat";
      std::ofstream dat(plots / file);
      dat << std::setprecision(8);
      const Matrix<double>& X = data.states[ks[s]];
      for (Eigen::Index i = 0; i < X.rows(); ++i) {
        if (d == 2) {
          dat << X(i, 0) << " " << X(i, 1) << " 1\n";
        } else {
          const Eigen::Vector3d x(X(i, 0), X(i, 1), X(i, 2));
          dat << x.dot(e1) << " " << x.dot(e2) << " " << (x.dot(view) >= 0 ? 1 : 0) << "\n";
        }
      }
      body << "set title 't = " << data.times[ks[s]] << "'\n"
           << "plot cos(t), sin(t) with lines lc rgb '#999999', '" << file
           << "' using ($3 == 0 ? $1 : 1/0):2 with points pt 6 ps 0.5 lc rgb '#bbbbbb', '" << file
           << "' using ($3 == 1 ? $1 : 1/0):2 with points pt 7 ps 0.5 lc rgb '#1f77b4'\n";
    }
    body << "unset multiplot\n";
    // multiplot cannot be replotted: render each terminal explicitly.
    const std::string b = body.str();
    write(plots / "particles.gp",
          "set terminal pngcairo size 900,900 font ',10'\nset output 'particles.png'\n" + b +
              "set terminal svg size 900,900 font ',10'\nset output 'particles.svg'\n" + b);
    scripts.push_back("particles.gp");
  }

  // Stability: the measured distance between the two flows and the certified Grönwall bound.
  if (!data.stability_times.empty()) {
    std::ofstream dat(plots / "stability.dat");
    dat << "# t index_distance(estimate) gronwall_bound(certified upper, rounded up)\n";
    bool any_bound = false;
    for (std::size_t k = 0; k < data.stability_times.size(); ++k) {
      const double b = data.stability_bound[k];
      any_bound = any_bound || std::isfinite(b);
      std::ostringstream line;
      line << std::setprecision(12) << data.stability_times[k] << " " << data.stability_distance[k] << " ";
      dat << line.str() << (std::isfinite(b) ? upper_decimal(b, 10) : std::string("NaN")) << "\n";
    }
    std::ostringstream body;
    body << "set title '" << header.str() << ": two nearby flows'\nset xlabel 't'\n"
         << "set ylabel 'distance (a-weighted l2, index coupling)'\nset logscale y\nset format y '%.0e'\n"
         << "set yrange [*:100]\n"
         << "set grid\nset key top left\n"
         << "plot 'stability.dat' using 1:($2 > 0 ? $2 : 1/0) with linespoints dt 2 pt 6 lw 2 title "
            "'|X_t - Y_t|_a [estimate]'"
         << (any_bound ? ", '' using 1:3 with linespoints dt 1 pt 7 lw 2 title 'Gronwall bound e^{Lt} d_0 "
                         "[certified upper; beyond the top of the plot: off scale]'"
                       : "")
         << "\n";
    write(plots / "stability.gp", both_terminals("stability", "800,500", body.str()));
    scripts.push_back("stability.gp");
  }

  // The animation: every recorded state (at most max_frames, evenly spaced) as one frame of a GIF.
  if (d == 2 || d == 3) {
    scripts.push_back(write_animation(plots, data, header.str()));
  }

  for (const std::string& s : scripts) {
    const int status = report::run_gnuplot({s}, plots, plots / "gnuplot.log");
    if (status == 127 || status == -1)
      return "gnuplot not found (install gnuplot-nox); scripts and data written";
    if (status != 0) return "gnuplot failed on " + s + " (see plots/gnuplot.log)";
  }
  return "";
}

}  // namespace regatta::cli
