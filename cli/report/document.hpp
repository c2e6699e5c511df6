#pragma once
// The report's sections and the pages made from them: every table as tables/<id>.csv and .json, every
// figure as plots/<id>.svg and .png, and summary.md, index.html and report.json gathering them with the
// configurations and seeds of every section.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "figure.hpp"
#include "output.hpp"
#include "table.hpp"

namespace regatta::cli::report {

struct Section {
  int number = 0;
  std::string key;    ///< short machine name ("kim", "castin", …)
  std::string title;  ///< e.g. "L2 vs dot-product attention (Kim et al. 2021)"
  bool produced = true;
  std::string not_produced;                ///< why the section is absent (when !produced)
  std::vector<std::string> configuration;  ///< one line each: layers, sizes, seeds
  std::vector<std::string> text;           ///< paragraphs (Markdown: `code`, **bold**)
  std::vector<std::string> findings;       ///< key numbers, each saying estimate or certified
  std::vector<std::string> omissions;      ///< parts left out, each with the reason
  std::vector<Table> tables;
  std::vector<Figure> figures;
  std::vector<RenderResult> rendered;  ///< parallel to figures, filled by publish()
  double seconds = 0;

  /// Appends a figure and the table that holds its numbers.
  void add(Figure figure, Table table) {
    figures.push_back(std::move(figure));
    tables.push_back(std::move(table));
  }
};

struct ReportMeta {
  std::string command_line;
  std::string version;
  bool quick = false;
  std::uint64_t seed = 0;
  std::string user_layer;  ///< "" when none
  double seconds = 0;
};

/// Writes the section's tables (CSV + JSON) and renders its figures.
void publish(Section& section, OutputDir& out);

/// Writes summary.md, index.html and report.json for all sections (after publish()).
void write_pages(const std::vector<Section>& sections, const ReportMeta& meta, OutputDir& out);

}  // namespace regatta::cli::report
