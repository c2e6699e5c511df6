#pragma once
// A report table: typed columns, each saying what its numbers are (an input of the experiment, an estimate,
// a certified lower or upper bound), written as CSV and JSON files and embedded in summary.md and index.html.
//
// Numbers keep full precision in CSV and JSON (shortest round-trip decimal, so a certified double is the same
// double after parsing). The short forms of the Markdown and HTML tables round certified numbers outward —
// a certified upper bound up, a certified lower bound down — so a displayed certified number stays certified.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace regatta::cli::report {

/// What a number (a table column, a plotted curve) is.
enum class Kind {
  input,            ///< a parameter of the experiment, exact as written (n, ε, R, a seed)
  estimate,         ///< a floating-point computation or a search result: no guarantee
  certified_lower,  ///< proved ≤ the exact quantity (interval arithmetic, rounded down)
  certified_upper,  ///< proved ≥ the exact quantity (interval arithmetic, rounded up)
  text,             ///< a label or a verdict
};

/// "input", "estimate", "certified lower bound", "certified upper bound", "text".
std::string to_string(Kind kind);
/// The short tag written after a curve's or column's name: "estimate", "certified" (lower/upper), "".
std::string tag(Kind kind);

/// A number formatted to `digits` significant digits, rounded up (certified_upper), down (certified_lower)
/// or to nearest (every other kind); "inf", "-inf", "n/a" (NaN) for non-finite values.
std::string format_number(double value, Kind kind, int digits = 6);

/// An empty cell means "not available" (written as an empty CSV field and JSON null).
using Cell = std::variant<std::monostate, double, std::int64_t, std::string>;

struct Column {
  std::string key;     ///< machine name (CSV header, JSON key), e.g. "upper_inf"
  std::string header;  ///< human name, e.g. "UB∞ (Theorem 3.2)"
  Kind kind = Kind::estimate;
  std::string description;  ///< one line: what the column is and how it was computed
};

class Table {
 public:
  Table(std::string id, std::string title);

  Table& column(std::string key, std::string header, Kind kind, std::string description = "");
  /// One row; its length must equal the number of columns (asserted).
  void add_row(std::vector<Cell> cells);

  const std::string& id() const { return id_; }
  const std::string& title() const { return title_; }
  const std::vector<Column>& columns() const { return columns_; }
  std::size_t rows() const { return rows_.size(); }
  std::string caption;  ///< one paragraph under the table

  /// Header "key (kind)" for every column, then one line per row; RFC 4180 quoting.
  std::string csv() const;
  /// {"id", "title", "caption", "columns": [{key, header, kind, description}], "rows": [{key: value}]}.
  nlohmann::json json() const;
  /// A Markdown table; with more than max_rows rows, an evenly spaced subset (first and last kept) and a
  /// line saying so.
  std::string markdown(std::size_t max_rows = 24) const;
  /// The same as an HTML <table> (all rows).
  std::string html() const;

 private:
  std::string display(const Cell& cell, Kind kind) const;
  std::vector<std::size_t> shown_rows(std::size_t max_rows) const;

  std::string id_, title_;
  std::vector<Column> columns_;
  std::vector<std::vector<Cell>> rows_;
};

/// HTML-escapes &, <, >, ".
std::string html_escape(const std::string& text);

}  // namespace regatta::cli::report
