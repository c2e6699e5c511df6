#pragma once
// Parser for the comma-separated spec strings of the CLI ("64x64,kind=lowrank,rank=3,seed=0",
// "d=64,heads=4,seed=0"): an optional leading positional token, then key=value pairs. Every problem throws
// InputError naming the option.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace regatta::cli {

class Spec {
 public:
  /// Parses `text` given to `option`; `allowed` lists the accepted keys (others are rejected by name).
  Spec(std::string option, const std::string& text, const std::set<std::string>& allowed);

  const std::optional<std::string>& positional() const { return positional_; }
  bool has(const std::string& key) const { return values_.count(key) != 0; }
  std::string get_string(const std::string& key, const std::string& fallback) const;
  /// Integer in [lo, hi].
  long long get_int(const std::string& key, long long fallback, long long lo, long long hi) const;
  std::uint64_t get_seed(const std::string& key, std::uint64_t fallback) const;
  /// Finite double in [lo, hi].
  double get_double(const std::string& key, double fallback, double lo, double hi) const;

 private:
  std::string option_;
  std::optional<std::string> positional_;
  std::map<std::string, std::string> values_;
};

/// Parses "ROWSxCOLS" (each in [0, max_dim]).
std::pair<long long, long long> parse_dimensions(const std::string& option, const std::string& text,
                                                 long long max_dim);

}  // namespace regatta::cli
