#pragma once
// A report figure: curves (x, y) each labelled estimate or certified, rendered by gnuplot (Debian package
// gnuplot-nox; terminals svg and pngcairo) into plots/<id>.svg and plots/<id>.png. The data file and the
// script are written beside them (plots/<id>.dat, plots/<id>.gp), so a figure can be regenerated or
// restyled with `gnuplot plots/<id>.gp` from the output directory.
//
// Drawing convention (stated in every legend entry and in docs/report.md):
//   certified upper / lower bound   solid line, filled markers, legend "… [certified upper/lower]"
//   estimate                        dashed line, open markers,  legend "… [estimate]"
//   exact reference curve (Kind::input, e.g. √n)  dotted grey line, legend "… [exact reference]"
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "output.hpp"
#include "table.hpp"

namespace regatta::cli::report {

struct Series {
  std::string label;  ///< what the curve is (the kind is appended in the legend)
  Kind kind = Kind::estimate;
  std::vector<double> x, y;
  bool lines = true;
  bool markers = true;
  int colour =
      -1;  ///< palette index shared by related curves (e.g. a bound and its witness); −1: by position
};

struct Figure {
  Figure() = default;
  Figure(std::string id_, std::string title_, std::string xlabel_, std::string ylabel_)
      : id(std::move(id_)),
        title(std::move(title_)),
        xlabel(std::move(xlabel_)),
        ylabel(std::move(ylabel_)) {}

  std::string id;  ///< file stem under plots/
  std::string title, xlabel, ylabel;
  std::string caption;  ///< one paragraph under the figure: what is plotted and how to read it
  bool logx = false, logy = false;
  /// gnuplot key position; "below" and "auto": under the plot, in columns (inside the plot the key's box
  /// hides curves)
  std::string key = "auto";
  std::vector<Series> series;
  std::vector<std::pair<double, std::string>> vertical_lines;  ///< x positions with a label
  /// Optional animation, plots/<id>_animation.gif (gnuplot's gif terminal): one list of curves per frame,
  /// drawn with the figure's labels on axes fixed over all frames (equal scales when `equal_axes`);
  /// frame_titles[k], when given, is the title of frame k (else the figure title).
  std::vector<std::vector<Series>> frames;
  std::vector<std::string> frame_titles;
  bool equal_axes = false;

  /// Adds a curve; points with a non-finite coordinate (or ≤ 0 on a log axis) are left out of the plot.
  Figure& add(Series s);
};

/// The one way regatta runs gnuplot (the report's figures, regatta flow --plot): gnuplot `arguments`
/// (searched in PATH) in `directory` ("": here), stdin from /dev/null, stdout and stderr appended to `log`
/// ("": discarded; a relative `log` is relative to this process's folder, not `directory`). An interrupt of
/// the report stops it (interrupt.hpp). Returns gnuplot's exit status: 127 when it is not installed, 126 when
/// `directory` cannot be entered, −1 when it could not be started or did not exit normally.
int run_gnuplot(const std::vector<std::string>& arguments, const std::filesystem::path& directory,
                const std::filesystem::path& log);

/// Whether `gnuplot` can be run (gnuplot --version exits 0); checked once per process.
bool gnuplot_available();

struct RenderResult {
  bool rendered = false;  ///< both the SVG and the PNG were produced
  bool animated = false;  ///< the figure has frames and plots/<id>_animation.gif was produced
  std::string problem;    ///< why not (empty when rendered)
};

/// Writes plots/<id>.dat and plots/<id>.gp, runs gnuplot (when available) into temporary files and renames
/// them to plots/<id>.svg and plots/<id>.png. gnuplot's messages go to plots/gnuplot.log.
RenderResult render(const Figure& figure, OutputDir& out);

}  // namespace regatta::cli::report
