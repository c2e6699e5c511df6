// Report figures rendered by gnuplot (see figure.hpp).
#include "figure.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <system_error>

#include <regatta/core/decimal.hpp>
#include "interrupt.hpp"

namespace regatta::cli::report {

Figure& Figure::add(Series s) {
  series.push_back(std::move(s));
  return *this;
}

int run_gnuplot(const std::vector<std::string>& arguments, const std::filesystem::path& directory,
                const std::filesystem::path& log) {
  std::string program = "gnuplot";
  std::vector<char*> args{program.data()};
  for (const std::string& a : arguments) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    restore_child_signal_mask();  // the report blocks SIGINT/SIGTERM for its watcher thread (interrupt.hpp)
    const int fd = log.empty() ? ::open("/dev/null", O_WRONLY)
                               : ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    const int in = ::open("/dev/null", O_RDONLY);
    if (in >= 0) {
      ::dup2(in, 0);
      ::close(in);
    }
    if (!directory.empty() && ::chdir(directory.c_str()) != 0) ::_exit(126);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  set_running_child(pid);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      set_running_child(0);
      return -1;
    }
  }
  set_running_child(0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

namespace {

/// A gnuplot double-quoted string (backslash escapes are interpreted inside "…").
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out + "\"";
}

/// A gnuplot single-quoted string (no escapes; '' is a quote).
std::string single_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += '\'';
    out += c;
  }
  return out + "'";
}

const char* const palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                               "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
const int filled_points[] = {7, 5, 9, 13, 11};
const int open_points[] = {6, 4, 8, 12, 10};

std::string legend(const Series& s) {
  switch (s.kind) {
    case Kind::certified_upper:
      return s.label + " [certified upper]";
    case Kind::certified_lower:
      return s.label + " [certified lower]";
    case Kind::estimate:
      return s.label + " [estimate]";
    case Kind::input:
      return s.label + " [exact reference]";
    default:
      return s.label;
  }
}

bool plottable(double v, bool log_axis) { return std::isfinite(v) && (!log_axis || v > 0); }

/// plots/<id>_animation.gif from figure.frames (see Figure::frames); true when it was produced.
bool render_animation(const Figure& figure, OutputDir& out) {
  const std::string stem = "plots/" + figure.id + "_animation";
  std::ostringstream data;
  data << "# " << figure.title << " (one block per curve and frame)\n";
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  std::vector<std::vector<std::pair<std::size_t, int>>> blocks(figure.frames.size());
  int next = 0;
  for (std::size_t k = 0; k < figure.frames.size(); ++k)
    for (std::size_t s = 0; s < figure.frames[k].size(); ++s) {
      const Series& series = figure.frames[k][s];
      std::ostringstream block;
      int points = 0;
      for (std::size_t i = 0; i < series.x.size() && i < series.y.size(); ++i) {
        if (!plottable(series.x[i], figure.logx) || !plottable(series.y[i], figure.logy)) continue;
        block << shortest_decimal(series.x[i]) << " " << shortest_decimal(series.y[i]) << "\n";
        x_lo = std::min(x_lo, series.x[i]);
        x_hi = std::max(x_hi, series.x[i]);
        y_lo = std::min(y_lo, series.y[i]);
        y_hi = std::max(y_hi, series.y[i]);
        ++points;
      }
      if (points == 0) continue;
      data << (next == 0 ? "" : "\n\n") << "# frame " << k << ": " << legend(series) << "\n" << block.str();
      blocks[k].emplace_back(s, next++);
    }
  if (next == 0 || !gnuplot_available()) return false;
  const double mx = 0.05 * std::max(x_hi - x_lo, 1e-12), my = 0.05 * std::max(y_hi - y_lo, 1e-12);
  std::ostringstream gp;
  gp << "# " << figure.title << " (animation)\n"
     << "if (!exists('gifout')) gifout = " << single_quoted(stem + ".gif") << "\n"
     << "set encoding utf8\nset terminal gif animate delay 12 loop 0 size 760,820 noenhanced font "
        "'DejaVu Sans,12'\nset output gifout\n"
     << "set xlabel " << quoted(figure.xlabel) << "\nset ylabel " << quoted(figure.ylabel) << "\n"
     << "set xrange [" << x_lo - mx << ":" << x_hi + mx << "]\nset yrange [" << y_lo - my << ":" << y_hi + my
     << "]\n"
     << (figure.equal_axes ? "set size ratio -1\n" : "")
     << "set key below center\nset grid lc rgb '#e0e0e0'\n";
  for (std::size_t k = 0; k < figure.frames.size(); ++k) {
    if (blocks[k].empty()) continue;
    gp << "set title " << quoted(k < figure.frame_titles.size() ? figure.frame_titles[k] : figure.title)
       << "\nplot ";
    for (std::size_t b = 0; b < blocks[k].size(); ++b) {
      const Series& s = figure.frames[k][blocks[k][b].first];
      const std::size_t colour = std::size_t(s.colour >= 0 ? s.colour : int(blocks[k][b].first)) %
                                 (sizeof palette / sizeof *palette);
      const bool certified = s.kind == Kind::certified_lower || s.kind == Kind::certified_upper;
      gp << single_quoted(figure.id + "_animation.dat") << " index " << blocks[k][b].second
         << " using 1:2 with "
         << (s.lines && !s.markers ? "lines"
             : s.lines             ? "linespoints"
                                   : "points")
         << (s.markers ? " pt " + std::to_string(certified ? 7 : 6) + " ps 0.8" : std::string())
         << " lc rgb '" << (s.kind == Kind::input ? "#444444" : palette[colour]) << "' title "
         << quoted(legend(s)) << (b + 1 < blocks[k].size() ? ", " : "\n");
    }
  }
  out.write(stem + ".dat", data.str());
  out.write(stem + ".gp", gp.str());
  const std::string gif_tmp = stem + ".gif.tmp";
  const std::filesystem::path root = out.root();
  // The script reads its data relative to plots/, so it runs there.
  const int status = run_gnuplot(
      {"-e", "gifout=" + single_quoted(figure.id + "_animation.gif.tmp"), figure.id + "_animation.gp"},
      root / "plots", root / "plots" / "gnuplot.log");
  std::error_code ec;
  if (status != 0 || !std::filesystem::exists(root / gif_tmp)) {
    std::filesystem::remove(root / gif_tmp, ec);
    return false;
  }
  std::filesystem::rename(root / gif_tmp, root / (stem + ".gif"), ec);
  if (ec) return false;
  out.record(stem + ".gif");
  return true;
}

}  // namespace

bool gnuplot_available() {
  static const bool available = run_gnuplot({"--version"}, {}, {}) == 0;
  return available;
}

RenderResult render(const Figure& figure, OutputDir& out) {
  const std::string stem = "plots/" + figure.id;
  // Data: one block per non-empty series, blocks separated by two blank lines (gnuplot's `index`).
  std::ostringstream data;
  data << "# " << figure.title << "\n";
  std::vector<std::pair<std::size_t, int>> blocks;  // (series index, data block index)
  for (std::size_t s = 0; s < figure.series.size(); ++s) {
    const Series& series = figure.series[s];
    std::ostringstream block;
    int points = 0;
    for (std::size_t i = 0; i < series.x.size() && i < series.y.size(); ++i) {
      if (!plottable(series.x[i], figure.logx) || !plottable(series.y[i], figure.logy)) continue;
      block << shortest_decimal(series.x[i]) << " " << shortest_decimal(series.y[i]) << "\n";
      ++points;
    }
    if (points == 0) continue;
    data << (blocks.empty() ? "" : "\n\n") << "# " << legend(series) << "\n" << block.str();
    blocks.emplace_back(s, int(blocks.size()));
  }
  out.write(stem + ".dat", data.str());

  // "auto" puts the key under the plot: inside, its opaque box hid parts of the curves (the UB₂ curve of
  // section 1, the causal curves of section 2).
  const bool below = figure.key == "below" || figure.key == "auto";
  std::ostringstream gp;
  gp << "# " << figure.title << "\n"
     << "# Regenerate from the report directory: gnuplot " << stem << ".gp\n"
     << "if (!exists('svgout')) svgout = " << single_quoted(stem + ".svg") << "\n"
     << "if (!exists('pngout')) pngout = " << single_quoted(stem + ".png") << "\n"
     << "set encoding utf8\n"
     << "set terminal svg size 960," << (below ? 700 : 600)
     << " dynamic noenhanced font 'DejaVu Sans,15' background rgb 'white'\n"
     << "set output svgout\n"
     << "set title " << quoted(figure.title) << "\n"
     << "set xlabel " << quoted(figure.xlabel) << "\n"
     << "set ylabel " << quoted(figure.ylabel) << "\n"
     << (figure.logx ? "set logscale x 10\n" : "") << (figure.logy ? "set logscale y 10\n" : "")
     << "set format x '%g'\nset format y '%g'\n"
     << "set grid xtics ytics mxtics mytics lc rgb '#e0e0e0' lw 1\n"
     << "set key " << (below ? std::string("below center maxrows 4") : figure.key)
     << " box opaque samplen 3 spacing 1.1\n"
     << (below ? "set bmargin " + std::to_string(5 + 3 * std::min<std::size_t>(4, blocks.size()) / 2) + "\n"
               : std::string())
     << "set border lw 1.2\n"
     << "set autoscale xfix\nset autoscale yfix\n"
     << "set offsets graph 0.03, graph 0.03, graph 0.06, graph 0.06\n";
  // Data range along x, to put each line's label on the side with room for it.
  double xmin = HUGE_VAL, xmax = -HUGE_VAL;
  for (const Series& series : figure.series)
    for (std::size_t i = 0; i < series.x.size() && i < series.y.size(); ++i)
      if (plottable(series.x[i], figure.logx) && plottable(series.y[i], figure.logy)) {
        xmin = std::min(xmin, series.x[i]);
        xmax = std::max(xmax, series.x[i]);
      }
  auto position = [&](double x) {
    const auto f = [&](double v) { return figure.logx ? std::log(v) : v; };
    return xmax > xmin ? (f(x) - f(xmin)) / (f(xmax) - f(xmin)) : 0.0;
  };
  int line = 0;
  for (const auto& [x, label] : figure.vertical_lines) {
    if (!plottable(x, figure.logx) || !(x >= xmin && x <= xmax)) continue;
    const bool right_side = position(x) > 0.6;  // label to the left of the line near the right edge
    gp << "set arrow from " << shortest_decimal(x) << ", graph 0 to " << shortest_decimal(x)
       << ", graph 1 nohead dt 3 lw 1.5 lc rgb '#555555'\n"
       << "set label " << quoted(label) << " at " << shortest_decimal(x) << ", graph "
       << (0.04 + 0.06 * line++) << (right_side ? " offset -0.5,0 right" : " offset 0.5,0 left")
       << " textcolor rgb '#333333'\n";
  }
  if (blocks.empty()) {
    gp << "set label 'no plottable points' at graph 0.5, graph 0.5 center\n"
       << "plot [0:1] [0:1] NaN notitle\n";
  } else {
    gp << "plot \\\n";
    for (std::size_t b = 0; b < blocks.size(); ++b) {
      const Series& s = figure.series[blocks[b].first];
      const bool certified = s.kind == Kind::certified_lower || s.kind == Kind::certified_upper;
      const bool reference = s.kind == Kind::input;
      const std::size_t colour =
          std::size_t(s.colour >= 0 ? s.colour : int(blocks[b].first)) % (sizeof palette / sizeof *palette);
      const int marker = certified ? filled_points[b % 5] : open_points[b % 5];
      const char* with = reference              ? "lines"
                         : s.lines && s.markers ? "linespoints"
                         : s.lines              ? "lines"
                                                : "points";
      const int dash = certified ? 1 : reference ? 3 : 2;
      const std::string points =
          std::string(with) == "lines" ? "" : " pt " + std::to_string(marker) + " ps 0.9";
      gp << "  " << single_quoted(stem + ".dat") << " index " << blocks[b].second << " using 1:2 with "
         << with << " dt " << dash << " lw " << (certified ? 2.5 : 2.0) << points << " lc rgb '"
         << (reference ? "#444444" : palette[colour]) << "' title " << quoted(legend(s))
         << (b + 1 < blocks.size() ? ", \\\n" : "\n");
    }
  }
  gp << "set terminal pngcairo size 1200," << (below ? 880 : 750)
     << " noenhanced font 'DejaVu Sans,13' background rgb 'white'\n"
     << "set output pngout\nreplot\nunset output\n";
  out.write(stem + ".gp", gp.str());

  RenderResult result;
  if (!gnuplot_available()) {
    result.problem = "gnuplot not found (install the Debian package gnuplot-nox); script and data written";
    return result;
  }
  const std::string svg_tmp = stem + ".svg.tmp", png_tmp = stem + ".png.tmp";
  const std::filesystem::path root = out.root();
  const int status = run_gnuplot(
      {"-e", "svgout=" + single_quoted(svg_tmp) + "; pngout=" + single_quoted(png_tmp), stem + ".gp"}, root,
      root / "plots" / "gnuplot.log");
  std::error_code ec;
  if (status != 0 || !std::filesystem::exists(root / svg_tmp) || !std::filesystem::exists(root / png_tmp)) {
    std::filesystem::remove(root / svg_tmp, ec);
    std::filesystem::remove(root / png_tmp, ec);
    result.problem = "gnuplot failed (exit status " + std::to_string(status) + "; see plots/gnuplot.log)";
    return result;
  }
  std::filesystem::rename(root / svg_tmp, root / (stem + ".svg"), ec);
  if (!ec) std::filesystem::rename(root / png_tmp, root / (stem + ".png"), ec);
  if (ec) {
    result.problem = "cannot rename the rendered plot: " + ec.message();
    return result;
  }
  out.record(stem + ".svg");
  out.record(stem + ".png");
  result.rendered = true;
  if (!figure.frames.empty()) result.animated = render_animation(figure, out);
  return result;
}

}  // namespace regatta::cli::report
