#pragma once
// The one validator of the CLI's numeric options. CLI::Range lets NaN through (every comparison with NaN is
// false) and accepts inf when the upper end is the largest double; these validators refuse NaN and ±inf by
// construction and state the accepted interval, so that every option means the same in every subcommand.
// The message is CLI11's "--option: ..." line, exit 2.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

#include <CLI/CLI.hpp>

namespace regatta::cli {

/// The command-line spelling of a library option's member name, for the checks the library does itself
/// (measures::check_sinkhorn_options): "max_iterations" -> "--max-iterations"; `prefix` goes after the dashes
/// ("w2-": "--w2-epsilon").
inline std::string option_flag(const std::string& member, const std::string& prefix = "") {
  std::string flag = "--" + prefix + member;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

/// Which ends of the interval belong to it.
enum class Ends { closed, open_low, open };

/// A finite number in [lo, hi] (Ends::closed), (lo, hi] (Ends::open_low) or (lo, hi) (Ends::open).
inline CLI::Validator finite_in(double lo, double hi, Ends ends = Ends::closed) {
  std::ostringstream range;
  range << (ends == Ends::closed ? "[" : "(") << lo << ", " << hi << (ends == Ends::open ? ")" : "]");
  const std::string text = range.str();
  return CLI::Validator(
      [lo, hi, ends, text](std::string& input) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(input, v)) return "'" + input + "' is not a number";
        if (!std::isfinite(v)) return "must be a finite number in " + text + ", got " + input;
        const bool low_ok = ends == Ends::closed ? v >= lo : v > lo;
        const bool high_ok = ends == Ends::open ? v < hi : v <= hi;
        if (!low_ok || !high_ok) return "must lie in " + text + ", got " + input;
        return {};
      },
      "in " + text);
}

/// The largest magnitude accepted for a length-like option (a radius, a scale): far inside the double range,
/// so that squares and products of a few such values stay finite.
inline constexpr double max_magnitude = 1e150;

/// A finite number > 0 (at most `hi`).
inline CLI::Validator positive(double hi = max_magnitude) { return finite_in(0, hi, Ends::open_low); }

/// A finite number >= 0 (at most `hi`).
inline CLI::Validator nonnegative(double hi = max_magnitude) { return finite_in(0, hi); }

/// A file name: not empty (an empty --out or --resume was accepted and silently did nothing).
inline CLI::Validator file_name() {
  return CLI::Validator(
      [](std::string& input) -> std::string { return input.empty() ? "needs a file name" : ""; }, "FILE");
}

/// A seed: an integer in [0, 2^64 − 1], written in decimal digits only (CLI11 would read "-1" as 2^64 − 1 and
/// saturate larger values silently).
inline CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& input) -> std::string {
        std::uint64_t v = 0;
        const char* end = input.data() + input.size();
        const auto [ptr, ec] = std::from_chars(input.data(), end, v);
        if (input.empty() || ec != std::errc() || ptr != end)
          return "must be an integer in [0, 18446744073709551615], got " + input;
        return {};
      },
      "in [0, 2^64 - 1]");
}

}  // namespace regatta::cli
