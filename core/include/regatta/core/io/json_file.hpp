#pragma once
// JSON files (run reports, configurations) through nlohmann::json.
#include <filesystem>

#include <nlohmann/json.hpp>

namespace regatta::io {

/// Writes `value` pretty-printed (2-space indent, trailing newline) with write_file_atomic. Throws
/// InputError naming the path when it cannot be written or `value` holds a string that is not UTF-8.
void write_json(const std::filesystem::path& path, const nlohmann::json& value);

/// Parses the file at `path`. Throws InputError naming the path (and, for syntax errors, the line and
/// column) when it cannot be read or is not valid JSON.
nlohmann::json read_json(const std::filesystem::path& path);

}  // namespace regatta::io
