#include "spec.hpp"

#include <charconv>
#include <cmath>
#include <regatta/core/error.hpp>
#include <sstream>

namespace regatta::cli {

namespace {

long long parse_integer(const std::string& option, const std::string& key, const std::string& text) {
  long long v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size())
    throw InputError(option, "'" + key + "' must be an integer, got '" + text + "'");
  return v;
}

}  // namespace

Spec::Spec(std::string option, const std::string& text, const std::set<std::string>& allowed)
    : option_(std::move(option)) {
  std::stringstream ss(text);
  std::string token;
  bool first = true;
  while (std::getline(ss, token, ',')) {
    const auto eq = token.find('=');
    if (eq == std::string::npos) {
      if (!first || token.empty()) throw InputError(option_, "expected key=value, got '" + token + "'");
      positional_ = token;
    } else {
      const std::string key = token.substr(0, eq);
      if (!allowed.count(key)) {
        std::string keys;
        for (const auto& k : allowed) keys += (keys.empty() ? "" : ", ") + k;
        throw InputError(option_, "unknown key '" + key + "' (accepted: " + keys + ")");
      }
      if (values_.count(key)) throw InputError(option_, "key '" + key + "' given twice");
      values_[key] = token.substr(eq + 1);
    }
    first = false;
  }
}

std::string Spec::get_string(const std::string& key, const std::string& fallback) const {
  const auto it = values_.find(key);
  return it == values_.end() ? fallback : it->second;
}

long long Spec::get_int(const std::string& key, long long fallback, long long lo, long long hi) const {
  const auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  const long long v = parse_integer(option_, key, it->second);
  if (v < lo || v > hi)
    throw InputError(option_, "'" + key + "' must lie in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                  "], got " + it->second);
  return v;
}

std::uint64_t Spec::get_seed(const std::string& key, std::uint64_t fallback) const {
  const auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  std::uint64_t v = 0;
  const auto& t = it->second;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size())
    throw InputError(option_, "'" + key + "' must be a nonnegative integer, got '" + t + "'");
  return v;
}

double Spec::get_double(const std::string& key, double fallback, double lo, double hi) const {
  const auto it = values_.find(key);
  if (it == values_.end()) return fallback;
  double v = 0;
  const auto& t = it->second;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || end != t.data() + t.size() || !std::isfinite(v))
    throw InputError(option_, "'" + key + "' must be a finite number, got '" + t + "'");
  if (v < lo || v > hi) {
    std::ostringstream os;
    os << "'" << key << "' must lie in [" << lo << ", " << hi << "], got " << t;
    throw InputError(option_, os.str());
  }
  return v;
}

std::pair<long long, long long> parse_dimensions(const std::string& option, const std::string& text,
                                                 long long max_dim) {
  const auto x = text.find('x');
  if (x == std::string::npos) throw InputError(option, "expected ROWSxCOLS, got '" + text + "'");
  const long long rows = parse_integer(option, "rows", text.substr(0, x));
  const long long cols = parse_integer(option, "cols", text.substr(x + 1));
  if (rows < 1 || cols < 1 || rows > max_dim || cols > max_dim)
    throw InputError(option,
                     "dimensions must lie in [1, " + std::to_string(max_dim) + "], got '" + text + "'");
  return {rows, cols};
}

}  // namespace regatta::cli
