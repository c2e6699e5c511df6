// Report tables (see table.hpp).
#include "table.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

#include <regatta/core/decimal.hpp>

namespace regatta::cli::report {

std::string to_string(Kind kind) {
  switch (kind) {
    case Kind::input:
      return "input";
    case Kind::estimate:
      return "estimate";
    case Kind::certified_lower:
      return "certified lower bound";
    case Kind::certified_upper:
      return "certified upper bound";
    case Kind::text:
      return "text";
  }
  return "text";
}

std::string tag(Kind kind) {
  switch (kind) {
    case Kind::estimate:
      return "estimate";
    case Kind::certified_lower:
    case Kind::certified_upper:
      return "certified";
    default:
      return "";
  }
}

std::string format_number(double value, Kind kind, int digits) {
  if (std::isnan(value)) return "n/a";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // Certified ends are converted with the directed rounding of core/decimal.hpp (MPFR, exact), so the text
  // is itself a bound; everything else to nearest.
  const Rounding rounding = kind == Kind::certified_upper   ? Rounding::up
                            : kind == Kind::certified_lower ? Rounding::down
                                                            : Rounding::nearest;
  return to_decimal(value, digits, rounding);
}

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Table::Table(std::string id, std::string title) : id_(std::move(id)), title_(std::move(title)) {}

Table& Table::column(std::string key, std::string header, Kind kind, std::string description) {
  columns_.push_back({std::move(key), std::move(header), kind, std::move(description)});
  return *this;
}

void Table::add_row(std::vector<Cell> cells) {
  if (cells.size() != columns_.size())
    throw std::logic_error("report table: a row of " + std::to_string(cells.size()) +
                           " cells in a table of " + std::to_string(columns_.size()) + " columns");
  rows_.push_back(std::move(cells));
}

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string csv_cell(const Cell& cell) {
  if (std::holds_alternative<double>(cell)) return shortest_decimal(std::get<double>(cell));
  if (std::holds_alternative<std::int64_t>(cell)) return std::to_string(std::get<std::int64_t>(cell));
  if (std::holds_alternative<std::string>(cell)) return csv_field(std::get<std::string>(cell));
  return "";
}

nlohmann::json json_cell(const Cell& cell) {
  if (std::holds_alternative<double>(cell)) {
    const double v = std::get<double>(cell);
    if (std::isfinite(v)) return v;
    return shortest_decimal(v);  // "inf", "-inf", "nan": JSON has no non-finite numbers
  }
  if (std::holds_alternative<std::int64_t>(cell)) return std::get<std::int64_t>(cell);
  if (std::holds_alternative<std::string>(cell)) return std::get<std::string>(cell);
  return nullptr;
}

std::string header_with_kind(const Column& c) {
  const std::string t = tag(c.kind);
  if (c.kind == Kind::certified_lower) return c.header + " (certified lower)";
  if (c.kind == Kind::certified_upper) return c.header + " (certified upper)";
  return t.empty() ? c.header : c.header + " (" + t + ")";
}

}  // namespace

std::string Table::csv() const {
  std::ostringstream os;
  for (std::size_t j = 0; j < columns_.size(); ++j) {
    const Column& c = columns_[j];
    os << (j ? "," : "") << csv_field(c.key + " (" + to_string(c.kind) + ")");
  }
  os << "\n";
  for (const auto& row : rows_) {
    for (std::size_t j = 0; j < row.size(); ++j) os << (j ? "," : "") << csv_cell(row[j]);
    os << "\n";
  }
  return os.str();
}

nlohmann::json Table::json() const {
  nlohmann::json cols = nlohmann::json::array();
  for (const Column& c : columns_)
    cols.push_back(
        {{"key", c.key}, {"header", c.header}, {"kind", to_string(c.kind)}, {"description", c.description}});
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : rows_) {
    nlohmann::json r = nlohmann::json::object();
    for (std::size_t j = 0; j < row.size(); ++j) r[columns_[j].key] = json_cell(row[j]);
    rows.push_back(std::move(r));
  }
  return {{"id", id_}, {"title", title_}, {"caption", caption}, {"columns", cols}, {"rows", rows}};
}

std::string Table::display(const Cell& cell, Kind kind) const {
  if (std::holds_alternative<double>(cell)) return format_number(std::get<double>(cell), kind);
  if (std::holds_alternative<std::int64_t>(cell)) return std::to_string(std::get<std::int64_t>(cell));
  if (std::holds_alternative<std::string>(cell)) return std::get<std::string>(cell);
  return "—";
}

std::vector<std::size_t> Table::shown_rows(std::size_t max_rows) const {
  std::vector<std::size_t> shown;
  const std::size_t n = rows_.size();
  if (n <= max_rows || max_rows < 2) {
    for (std::size_t i = 0; i < n; ++i) shown.push_back(i);
    return shown;
  }
  for (std::size_t k = 0; k < max_rows; ++k) {
    const std::size_t i = (k * (n - 1)) / (max_rows - 1);
    if (shown.empty() || shown.back() != i) shown.push_back(i);
  }
  return shown;
}

std::string Table::markdown(std::size_t max_rows) const {
  std::ostringstream os;
  os << "| ";
  for (const Column& c : columns_) os << header_with_kind(c) << " | ";
  os << "\n|";
  for (std::size_t j = 0; j < columns_.size(); ++j) os << "---|";
  os << "\n";
  const std::vector<std::size_t> shown = shown_rows(max_rows);
  for (std::size_t i : shown) {
    os << "| ";
    for (std::size_t j = 0; j < columns_.size(); ++j) {
      std::string s = display(rows_[i][j], columns_[j].kind);
      for (char& ch : s)
        if (ch == '|') ch = '/';
      os << s << " | ";
    }
    os << "\n";
  }
  if (shown.size() < rows_.size())
    os << "\n(" << shown.size() << " of " << rows_.size() << " rows shown; all rows in `tables/" << id_
       << ".csv`.)\n";
  return os.str();
}

std::string Table::html() const {
  std::ostringstream os;
  os << "<table>\n<thead><tr>";
  for (const Column& c : columns_)
    os << "<th title=\"" << html_escape(c.description) << "\">" << html_escape(header_with_kind(c))
       << "</th>";
  os << "</tr></thead>\n<tbody>\n";
  for (const auto& row : rows_) {
    os << "<tr>";
    for (std::size_t j = 0; j < row.size(); ++j) {
      const Kind k = columns_[j].kind;
      const char* cls = k == Kind::certified_lower || k == Kind::certified_upper ? " class=\"cert\""
                        : k == Kind::estimate                                    ? " class=\"est\""
                                                                                 : "";
      os << "<td" << cls << ">" << html_escape(display(row[j], k)) << "</td>";
    }
    os << "</tr>\n";
  }
  os << "</tbody>\n</table>\n";
  return os.str();
}

}  // namespace regatta::cli::report
