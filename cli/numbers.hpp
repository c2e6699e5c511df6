#pragma once
// How the Lipschitz subcommands (bound, local, bracket, measure-lipschitz) write numbers and check where
// they will write files.
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <optional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include <regatta/core/error.hpp>

namespace regatta::cli {

/// A finite number, or JSON null (JSON has no infinities or NaN).
inline nlohmann::json number_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

/// An absent value is JSON null too.
inline nlohmann::json optional_number(const std::optional<double>& v) {
  return v ? number_or_null(*v) : nlohmann::json(nullptr);
}

/// A number for the human-readable tables: `digits` significant digits; "inf" for an infinite value (a bound
/// beyond the double range, no finite bound), "none" for NaN (no value).
inline std::string number(double v, int digits = 10) {
  if (std::isnan(v)) return "none";
  std::ostringstream os;
  os << std::setprecision(digits) << v;
  return os.str();
}

/// Throws InputError naming `option` when `file` is empty or its folder does not exist (checked before a
/// long computation, so that nothing is computed for a file that cannot be written).
inline void check_output_folder(const std::string& option, const std::string& file) {
  if (file.empty()) throw InputError(option, "needs a file name");
  const std::filesystem::path folder = std::filesystem::path(file).parent_path();
  if (!folder.empty() && !std::filesystem::is_directory(folder))
    throw InputError(option, "the folder '" + folder.string() + "' does not exist");
}

}  // namespace regatta::cli
