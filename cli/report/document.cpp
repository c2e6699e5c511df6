// summary.md, index.html and report.json (see document.hpp).
#include "document.hpp"

#include "../json_output.hpp"

#include <sstream>

#include <regatta/core/decimal.hpp>
#include <regatta/core/io/json_file.hpp>

namespace regatta::cli::report {

void publish(Section& section, OutputDir& out) {
  for (const Table& t : section.tables) {
    out.write("tables/" + t.id() + ".csv", t.csv());
    out.write("tables/" + t.id() + ".json", json_text(t.json()) + "\n");
  }
  section.rendered.clear();
  for (const Figure& f : section.figures) section.rendered.push_back(render(f, out));
}

namespace {

/// Minimal Markdown → HTML for report paragraphs: escapes, then `code` and **bold**.
std::string inline_html(const std::string& text) {
  const std::string escaped = html_escape(text);
  std::string out;
  bool code = false, bold = false;
  for (std::size_t i = 0; i < escaped.size(); ++i) {
    if (escaped[i] == '`') {
      out += code ? "</code>" : "<code>";
      code = !code;
    } else if (!code && escaped.compare(i, 2, "**") == 0) {
      out += bold ? "</b>" : "<b>";
      bold = !bold;
      ++i;
    } else {
      out += escaped[i];
    }
  }
  if (code) out += "</code>";
  if (bold) out += "</b>";
  return out;
}

std::string seconds_text(double s) { return nearest_decimal(s, 3) + " s"; }

const char* const kind_legend =
    "Every number says what it is. **certified** upper/lower bounds are interval-arithmetic (MPFI) "
    "evaluations rounded outward: a certified upper bound is proved ≥ the exact value, a certified lower "
    "bound proved ≤ it (shown rounded outward in these pages; exact doubles in the CSV/JSON files). "
    "**estimate** means a floating-point computation or a search result without a guarantee. **input** "
    "columns are the parameters of the experiment. In the plots, certified curves are solid lines (with "
    "filled markers for witnesses), estimates dashed lines with open markers, exact reference curves (such "
    "as √n) dotted grey lines; every legend entry ends in [certified upper], [certified lower], [estimate] "
    "or [exact reference].";

}  // namespace

void write_pages(const std::vector<Section>& sections, const ReportMeta& meta, OutputDir& out) {
  // ---- summary.md --------------------------------------------------------------------------------------
  std::ostringstream md;
  md << "# regatta report\n\n"
     << "Command: `" << meta.command_line << "`  \n"
     << "regatta " << meta.version << ", " << (meta.quick ? "quick sizes (--quick)" : "full study")
     << ", base seed " << meta.seed << ", wall time " << seconds_text(meta.seconds) << " (estimate).  \n"
     << "User layer: " << (meta.user_layer.empty() ? "none (built-in configurations only)" : meta.user_layer)
     << "\n\n"
     << kind_legend << "\n\n"
     << "Tables: `tables/*.csv` and `tables/*.json`; plots: `plots/*.svg` and `plots/*.png` (gnuplot scripts "
        "and data beside them); the same content as a page: `index.html`. How to read each section: "
        "docs/report.md.\n\n";
  md << "## Contents\n\n";
  for (const Section& s : sections)
    md << "* Section " << s.number << ": " << s.title << (s.produced ? "" : " — **not produced**") << "\n";
  md << "\n";
  for (const Section& s : sections) {
    md << "## " << s.number << ". " << s.title << "\n\n";
    if (!s.produced) {
      md << "**Section " << s.number << ": not produced, because " << s.not_produced << "**\n\n";
      continue;
    }
    md << "Configurations and seeds:\n\n";
    for (const std::string& c : s.configuration) md << "* " << c << "\n";
    md << "\n";
    for (const std::string& p : s.text) md << p << "\n\n";
    if (!s.findings.empty()) {
      md << "Findings:\n\n";
      for (const std::string& f : s.findings) md << "* " << f << "\n";
      md << "\n";
    }
    for (std::size_t i = 0; i < s.figures.size(); ++i) {
      const Figure& f = s.figures[i];
      const bool ok = i < s.rendered.size() && s.rendered[i].rendered;
      md << "### Figure: " << f.title << "\n\n";
      if (ok) {
        md << "![" << f.title << "](plots/" << f.id << ".svg)\n\n";
        if (s.rendered[i].animated)
          md << "Animation: ![" << f.title << " (animation)](plots/" << f.id << "_animation.gif)\n\n";
      } else {
        md << "(plot not rendered: " << (i < s.rendered.size() ? s.rendered[i].problem : "not published")
           << "; data in `plots/" << f.id << ".dat`)\n\n";
      }
      if (!f.caption.empty()) md << f.caption << "\n\n";
    }
    for (const Table& t : s.tables) {
      md << "### Table: " << t.title() << " (`tables/" << t.id() << ".csv`)\n\n" << t.markdown() << "\n";
      if (!t.caption.empty()) md << t.caption << "\n\n";
    }
    if (!s.omissions.empty()) {
      md << "Left out:\n\n";
      for (const std::string& o : s.omissions) md << "* " << o << "\n";
      md << "\n";
    }
    md << "(section time " << seconds_text(s.seconds) << ", estimate)\n\n";
  }
  out.write("summary.md", md.str());

  // ---- index.html --------------------------------------------------------------------------------------
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       << "<title>regatta report</title>\n<style>\n"
       << "body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;"
          "padding:0 1em;line-height:1.45;color:#222}\n"
       << "table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:.88em}\n"
       << "th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right}\nth{background:#f2f2f2}\n"
       << "td.cert{background:#eef7ee}\ntd.est{background:#fff8e8}\n"
       << "img{max-width:100%;border:1px solid #ddd}\nfigure{margin:1em 0}\n"
       << "figcaption{font-size:.92em;color:#444}\n.missing{color:#a00;font-weight:bold}\n"
       << "details{margin:.5em 0 1em}\ncode{background:#f4f4f4;padding:0 .2em}\n</style>\n</head>\n<body>\n"
       << "<h1>regatta report</h1>\n<p>Command: <code>" << html_escape(meta.command_line) << "</code><br>\n"
       << "regatta " << html_escape(meta.version) << ", "
       << (meta.quick ? "quick sizes (--quick)" : "full study") << ", base seed " << meta.seed
       << ", wall time " << seconds_text(meta.seconds) << " (estimate).<br>\n"
       << "User layer: "
       << html_escape(meta.user_layer.empty() ? "none (built-in configurations only)" : meta.user_layer)
       << "</p>\n<p>" << inline_html(kind_legend)
       << " Certified cells are shaded green, estimates yellow.</p>\n<ol>\n";
  for (const Section& s : sections)
    html << "<li><a href=\"#" << s.key << "\">" << html_escape(s.title) << "</a>"
         << (s.produced ? "" : " <span class=\"missing\">(not produced)</span>") << "</li>\n";
  html << "</ol>\n";
  for (const Section& s : sections) {
    html << "<h2 id=\"" << s.key << "\">" << s.number << ". " << html_escape(s.title) << "</h2>\n";
    if (!s.produced) {
      html << "<p class=\"missing\">Section " << s.number << ": not produced, because "
           << html_escape(s.not_produced) << "</p>\n";
      continue;
    }
    html << "<p>Configurations and seeds:</p>\n<ul>\n";
    for (const std::string& c : s.configuration) html << "<li>" << inline_html(c) << "</li>\n";
    html << "</ul>\n";
    for (const std::string& p : s.text) html << "<p>" << inline_html(p) << "</p>\n";
    if (!s.findings.empty()) {
      html << "<p>Findings:</p>\n<ul>\n";
      for (const std::string& f : s.findings) html << "<li>" << inline_html(f) << "</li>\n";
      html << "</ul>\n";
    }
    for (std::size_t i = 0; i < s.figures.size(); ++i) {
      const Figure& f = s.figures[i];
      const bool ok = i < s.rendered.size() && s.rendered[i].rendered;
      html << "<figure>\n";
      if (ok) html << "<img src=\"plots/" << f.id << ".svg\" alt=\"" << html_escape(f.title) << "\">\n";
      if (ok && s.rendered[i].animated)
        html << "<img src=\"plots/" << f.id << "_animation.gif\" alt=\"" << html_escape(f.title)
             << " (animation)\">\n";
      if (!ok)
        html << "<p class=\"missing\">Plot not rendered: "
             << html_escape(i < s.rendered.size() ? s.rendered[i].problem : "not published") << "</p>\n";
      // The PNG link only where the PNG was made (a figure not rendered has its data and script only).
      html << "<figcaption><b>" << html_escape(f.title) << ".</b> " << inline_html(f.caption) << " ("
           << (ok ? "<a href=\"plots/" + f.id + ".png\">PNG</a>, " : std::string()) << "<a href=\"plots/"
           << f.id << ".dat\">data</a>, <a href=\"plots/" << f.id
           << ".gp\">gnuplot script</a>)</figcaption>\n</figure>\n";
    }
    for (const Table& t : s.tables) {
      html << "<h3>" << html_escape(t.title()) << "</h3>\n";
      if (t.rows() > 30)
        html << "<details><summary>" << t.rows() << " rows (click to show)</summary>\n"
             << t.html() << "</details>\n";
      else
        html << t.html();
      html << "<p>" << inline_html(t.caption) << " (<a href=\"tables/" << t.id()
           << ".csv\">CSV</a>, <a href=\"tables/" << t.id() << ".json\">JSON</a>)</p>\n";
    }
    if (!s.omissions.empty()) {
      html << "<p>Left out:</p>\n<ul>\n";
      for (const std::string& o : s.omissions) html << "<li>" << inline_html(o) << "</li>\n";
      html << "</ul>\n";
    }
    html << "<p><small>Section time " << seconds_text(s.seconds) << " (estimate).</small></p>\n";
  }
  html << "</body>\n</html>\n";
  out.write("index.html", html.str());

  // ---- report.json -------------------------------------------------------------------------------------
  nlohmann::json j = {{"command", meta.command_line},  {"version", meta.version},
                      {"quick", meta.quick},           {"seed", meta.seed},
                      {"user_layer", meta.user_layer}, {"seconds_estimate", meta.seconds}};
  nlohmann::json secs = nlohmann::json::array();
  for (const Section& s : sections) {
    nlohmann::json tables = nlohmann::json::array(), figures = nlohmann::json::array();
    for (const Table& t : s.tables) tables.push_back("tables/" + t.id() + ".json");
    for (std::size_t i = 0; i < s.figures.size(); ++i)
      figures.push_back({{"id", s.figures[i].id},
                         {"title", s.figures[i].title},
                         {"rendered", i < s.rendered.size() && s.rendered[i].rendered}});
    secs.push_back({{"number", s.number},
                    {"key", s.key},
                    {"title", s.title},
                    {"produced", s.produced},
                    {"not_produced_reason", s.not_produced},
                    {"configuration", s.configuration},
                    {"findings", s.findings},
                    {"omissions", s.omissions},
                    {"tables", tables},
                    {"figures", figures},
                    {"seconds_estimate", s.seconds}});
  }
  j["sections"] = secs;
  j["files"] =
      out.files();  // everything this run wrote before report.json (summary.md, index.html, tables, plots)
  out.write("report.json", json_text(j) + "\n");
}

}  // namespace regatta::cli::report
