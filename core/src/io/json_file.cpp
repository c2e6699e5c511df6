#include <regatta/core/io/json_file.hpp>

#include <string>

#include <regatta/core/error.hpp>
#include <regatta/core/io/detail/bytes.hpp>
#include <regatta/core/io/file_bytes.hpp>

namespace regatta::io {

namespace {

/// nlohmann's message without its "[json.exception.parse_error.101] " prefix, on one line.
std::string json_problem(const nlohmann::json::exception& e) {
  std::string what = e.what();
  if (const auto bracket = what.find("] ");
      what.starts_with("[json.exception") && bracket != std::string::npos)
    what.erase(0, bracket + 2);
  return detail::printable(what);
}

}  // namespace

void write_json(const std::filesystem::path& path, const nlohmann::json& value) {
  std::string text;
  try {
    text = value.dump(2) + "\n";
  } catch (const nlohmann::json::exception& e) {
    throw InputError(detail::printable(path.string(), 4096), "cannot write JSON: " + json_problem(e));
  }
  write_file_atomic(path, std::as_bytes(std::span(text.data(), text.size())));
}

nlohmann::json read_json(const std::filesystem::path& path) {
  const auto bytes = read_file_bytes(path);
  const std::string_view text = detail::as_chars(bytes);
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    throw InputError(detail::printable(path.string(), 4096), "invalid JSON: " + json_problem(e));
  }
}

}  // namespace regatta::io
