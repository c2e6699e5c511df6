#pragma once
// What every report section receives: the options of the run (quick or full sizes, the base seed, the user's
// layer when one is given) and the helpers that keep sections uniform (sizes, derived seeds, progress bars).
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "../layer_options.hpp"
#include "progress.hpp"

namespace regatta::cli::report {

struct ReportOptions {
  std::filesystem::path out = "regatta-report";
  bool quick = false;
  std::uint64_t seed = 1;
  std::optional<ResolvedLayer> user;  ///< the layer of --layer/--random, when given
  std::string command_line;
  bool progress = true;
  /// The running executable (for sections that call a subcommand in a child process).
  std::filesystem::path executable;
  /// The trained model and labelled test set of section 9 (--model, --data; by default the digits fixture
  /// of the source tree, tests/data/vit_digits, when it is there).
  std::filesystem::path model, data;
};

class Context {
 public:
  explicit Context(const ReportOptions& options) : options_(options) {}

  const ReportOptions& options() const { return options_; }
  bool quick() const { return options_.quick; }
  /// `quick_value` under --quick, `full_value` otherwise.
  template <class T>
  T size(T quick_value, T full_value) const {
    return options_.quick ? quick_value : full_value;
  }
  /// A seed derived from the base seed, the section number and a purpose index (splitmix64), so that
  /// sections do not share random streams and each stream is reproducible from the recorded base seed.
  std::uint64_t seed(int section, int purpose) const;
  /// A progress bar on stderr (silent when progress is off).
  std::unique_ptr<Progress> progress(const std::string& label, long total) const {
    return std::make_unique<Progress>(label, total, options_.progress);
  }
  const ResolvedLayer* user() const { return options_.user ? &*options_.user : nullptr; }

 private:
  const ReportOptions& options_;
};

}  // namespace regatta::cli::report
