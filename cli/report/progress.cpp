// Progress printers on stderr (see progress.hpp).
#include "progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace regatta::cli::report {

Progress::Progress(std::string label, long total, bool enabled)
    : label_(std::move(label)),
      total_(std::max(1L, total)),
      enabled_(enabled),
      tty_(::isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  if (!enabled_) return;
  if (tty_) {
    draw(false);
  } else {
    std::fprintf(stderr, "%s ...\n", label_.c_str());
    std::fflush(stderr);
  }
}

Progress::~Progress() { finish(); }

void Progress::advance(long steps) {
  done_ = std::min(total_, done_ + steps);
  if (!enabled_ || !tty_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ >= std::chrono::milliseconds(100) || done_ == total_) {
    last_draw_ = now;
    draw(false);
  }
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  done_ = total_;
  if (enabled_) draw(true);
}

void Progress::draw(bool final) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (!tty_) {
    if (final) std::fprintf(stderr, "%s done (%.1f s)\n", label_.c_str(), seconds);
    std::fflush(stderr);
    return;
  }
  constexpr int width = 30;
  const int filled = int(width * double(done_) / double(total_));
  std::string bar(std::size_t(filled), '#');
  bar.append(std::size_t(width - filled), '.');
  std::fprintf(stderr, "\r%-46.46s [%s] %3d%% %6.1f s%s", label_.c_str(), bar.c_str(),
               int(100.0 * double(done_) / double(total_)), seconds, final ? "\n" : "");
  std::fflush(stderr);
}

void progress_line(std::string_view command, std::string_view text) {
  std::cerr << command << ": " << text << "\n";
}

void StageProgress::operator()(std::string_view stage, std::ptrdiff_t done, std::ptrdiff_t total) {
  using clock = std::chrono::steady_clock;
  const auto now = clock::now();
  if (stage != stage_) {
    stage_ = std::string(stage);
    stage_start_ = now;
    shown_ = false;
  }
  const auto since = [&](clock::time_point t) { return std::chrono::duration<double>(now - t).count(); };
  if (done == total) seconds_[stage_] = since(stage_start_);
  if (since(start_) < 1.0) return;
  std::ostringstream line;
  line << std::fixed << std::setprecision(1);
  if (total == 1) {
    if (done == 0) {
      line << stage << " ...";
    } else if (shown_ || since(stage_start_) >= 1.0) {
      line << stage << " done (" << since(stage_start_) << " s)";
    } else {
      return;
    }
  } else {
    if (shown_ && done != total && since(last_) < 2.0) return;
    line << stage << " " << done << "/" << total << " (" << since(stage_start_) << " s)";
  }
  progress_line(command_, line.str());
  shown_ = true;
  last_ = now;
}

}  // namespace regatta::cli::report
