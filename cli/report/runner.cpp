// The report driver: runs the sections in order, publishes each one into the staging directory as soon as it
// is done, writes summary.md, index.html and report.json, and swaps the staging directory in (output.hpp):
// the target holds one run's whole report, never the pieces of two runs.
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <new>

#include <regatta/core/error.hpp>
#include "section_flow.hpp"
#include "sections.hpp"

namespace regatta::cli::report {

std::uint64_t Context::seed(int section, int purpose) const {
  // splitmix64 of (base seed, section, purpose): independent, reproducible streams.
  std::uint64_t z =
      options_.seed + 0x9e3779b97f4a7c15ULL * (std::uint64_t(section) * 1000 + std::uint64_t(purpose) + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::vector<Section> run_report(const ReportOptions& options, const std::string& version) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  OutputDir out(options.out);
  ReportOptions staged = options;  // sections that write files themselves (proofs-check) write into staging
  staged.out = out.root();
  const Context ctx(staged);

  struct Entry {
    int number;
    const char* key;
    const char* title;
    std::function<Section(const Context&)> run;
  };
  const Entry entries[] = {
      {1, "kim", "L2 vs dot-product attention (Kim et al. 2021)", section_kim},
      {2, "castin", "Bounded domain (Castin et al. 2024)", section_castin},
      {3, "measure", "Measure level (Vuckovic et al. 2020)", section_measure},
      {4, "local", "Local sensitivity (Havens et al. 2024)", section_local},
      {5, "proofs", "proofs-check: the claims catalogue", section_proofs},
      {6, "meanfield", "Mean field: grid measure against samples", section_mean_field},
      {7, "flow", "Attention dynamics and clustering", section_flow},
      {8, "true_constant", "The true constant (branch and bound)", section_true_constant},
      {9, "robustness", "Certified robustness of a trained ViT", section_robustness},
  };
  std::vector<Section> sections;
  for (const Entry& e : entries) {
    const auto t0 = clock::now();
    Section s;
    try {
      s = e.run(ctx);
    } catch (const std::bad_alloc&) {
      s = Section{};
      s.produced = false;
      s.not_produced = "it ran out of memory";
    } catch (const std::exception& ex) {
      // An ingredient failed: the section says so instead of showing partial numbers.
      s = Section{};
      s.produced = false;
      s.not_produced = std::string("an ingredient failed: ") + ex.what();
    }
    s.number = e.number;
    s.key = e.key;
    if (s.title.empty()) s.title = e.title;
    s.seconds = std::chrono::duration<double>(clock::now() - t0).count();
    if (s.produced) publish(s, out);
    sections.push_back(std::move(s));
  }
  ReportMeta meta;
  meta.command_line = options.command_line;
  meta.version = version;
  meta.quick = options.quick;
  meta.seed = options.seed;
  meta.user_layer = options.user ? describe(*options.user) : "";
  meta.seconds = std::chrono::duration<double>(clock::now() - start).count();
  write_pages(sections, meta, out);
  out.commit();
  return sections;
}

}  // namespace regatta::cli::report
