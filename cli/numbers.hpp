#pragma once
// How the Lipschitz subcommands (bound, local, bracket, measure-lipschitz) and certify write numbers and
// check where they will write files.
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>

#include <nlohmann/json.hpp>

#include <regatta/core/decimal.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/io/file_bytes.hpp>

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
  return std::isnan(v) ? std::string("none") : nearest_decimal(v, digits);
}

/// A certified lower end for the tables: rounded down (core/decimal.hpp), so that the printed decimal is
/// itself a lower bound; "none" for NaN as number().
inline std::string lower_number(double v, int digits = 10) {
  return std::isnan(v) ? std::string("none") : lower_decimal(v, digits);
}

/// A certified upper end: rounded up; "none" for NaN.
inline std::string upper_number(double v, int digits = 10) {
  return std::isnan(v) ? std::string("none") : upper_decimal(v, digits);
}

/// A lower end printed as certified (rounded down) when `certified`, as an estimate (nearest) otherwise.
inline std::string lower_number(double v, bool certified, int digits = 10) {
  return certified ? lower_number(v, digits) : number(v, digits);
}

/// An upper end printed as certified (rounded up) when `certified`, as an estimate (nearest) otherwise.
inline std::string upper_number(double v, bool certified, int digits = 10) {
  return certified ? upper_number(v, digits) : number(v, digits);
}

/// A count k of n inputs as a fraction, printed exactly: the decimal when k/n terminates, with k/n beside it
/// ("0.85 (34/40)", "1 (40/40)"); otherwise the decimal cut after `places` decimals, which rounds it down,
/// and said so ("0.6666666666 (20/30, rounded down)"). Needs 0 <= k and 1 <= n <= 2^40 (the long division
/// below keeps 10·remainder < 2^44). An accuracy is such a fraction of counted inputs, so nothing is lost to
/// binary floating point (the double nearest 34/40 lies below 0.85 and printed rounded down as 0.849999).
inline std::string fraction_text(long k, long n, int places = 10) {
  if (k < 0 || n < 1 || n > (1L << 40)) return "none";
  long reduced = n / std::gcd(k, n), twos = 0, fives = 0;
  while (reduced % 2 == 0) reduced /= 2, ++twos;
  while (reduced % 5 == 0) reduced /= 5, ++fives;
  const bool terminates = reduced == 1;
  const long decimals = terminates ? std::max(twos, fives) : places;
  std::string text = std::to_string(k / n);
  long remainder = k % n;
  if (decimals > 0) text += '.';
  for (long i = 0; i < decimals; ++i) {
    remainder *= 10;
    text += char('0' + remainder / n);
    remainder %= n;
  }
  return text + " (" + std::to_string(k) + "/" + std::to_string(n) + (terminates ? ")" : ", rounded down)");
}

/// Throws InputError naming `option` when the last component of `file` is longer than the file system of
/// its folder allows (NAME_MAX, 255 bytes on Linux): said before any work rather than when the file is
/// written. For the names a command derives from an option (PREFIX_mu.npy, W_direction.npy).
inline void check_name_length(const std::string& option, const std::string& file) {
  const std::filesystem::path path(file);
  const std::string name = path.filename().string();
  const std::filesystem::path folder = path.has_parent_path() ? path.parent_path() : ".";
  long limit = ::pathconf(folder.c_str(), _PC_NAME_MAX);
  if (limit <= 0) limit = NAME_MAX;
  if (name.size() > std::size_t(limit))
    throw InputError(option, "the file name " + regatta::quoted(name.substr(0, 32)) + "... is " +
                                 std::to_string(name.size()) + " bytes long, more than the " +
                                 std::to_string(limit) + " its file system allows");
}

/// Throws InputError naming `option` when `file` is empty or its folder does not exist (checked before a
/// long computation, so that nothing is computed for a file that cannot be written).
inline void check_output_folder(const std::string& option, const std::string& file) {
  if (file.empty()) throw InputError(option, "needs a file name");
  const std::filesystem::path folder = std::filesystem::path(file).parent_path();
  std::error_code ec;  // the non-throwing overload: a name too long or a loop is bad input, not exit 3
  if (!folder.empty() && !std::filesystem::is_directory(folder, ec))
    throw InputError(option, "the folder " + regatta::quoted(folder.string()) + " does not exist" +
                                 (ec ? " (" + ec.message() + ")" : std::string()));
  check_name_length(option, file);
  io::check_not_input(file);  // an input already read (io::protect_inputs)
}

}  // namespace regatta::cli
