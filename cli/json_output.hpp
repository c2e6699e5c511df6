#pragma once
// The one way the CLI turns a JSON document into text. nlohmann::json refuses to serialise a string that is
// not valid UTF-8 (type_error 316) — a file name from a non-UTF-8 file system, a tensor name from a hostile
// file — which used to surface as "internal error" (exit 3) after the work was done. Here every string value
// and every key that is not valid UTF-8 is replaced by regatta::printable(text), which keeps the valid
// characters and writes each invalid byte as the four characters \xNN: the output is valid JSON, still names
// the file recognisably, and nothing can throw while it is written.
#include <string>

#include <nlohmann/json.hpp>

#include <regatta/core/error.hpp>

namespace regatta::cli {

/// True when nlohmann::json can serialise `text` as it is (valid UTF-8).
inline bool serialisable(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

/// `text` when it is valid UTF-8, otherwise printable(text) (invalid bytes as \xNN).
inline std::string json_safe(const std::string& text) { return serialisable(text) ? text : printable(text); }

/// A copy of `value` whose every string and key is json_safe.
inline nlohmann::json json_safe(const nlohmann::json& value) {
  if (value.is_string()) return json_safe(value.get_ref<const std::string&>());
  if (value.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : value) out.push_back(json_safe(v));
    return out;
  }
  if (value.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto it = value.begin(); it != value.end(); ++it) out[json_safe(it.key())] = json_safe(it.value());
    return out;
  }
  return value;
}

/// The document as indented text (two spaces), every string json_safe.
inline std::string json_text(const nlohmann::json& value) { return json_safe(value).dump(2); }

}  // namespace regatta::cli
