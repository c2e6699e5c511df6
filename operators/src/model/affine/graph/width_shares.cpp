// The width-share diagnostic of the graph pass (width_shares.hpp).
#include "width_shares.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace regatta::operators::affine::gp {

bool width_shares_wanted() { return std::getenv("REGATTA_DEBUG_WIDTH_SHARES") != nullptr; }

void print_width_shares(const graph::Graph& g, const std::vector<std::pair<std::size_t, Index>>& starts,
                        const Row& v, double slack, const Pass& p, const std::string& title) {
  const Index K = v.size(), q = std::min(p.q, K);
  const double inputs = p.box ? v.head(q).cwiseAbs().sum() : v.head(q).norm();
  std::vector<double> per(starts.size(), 0.0);
  double rest = 0, moved = 0;
  for (Index j = q; j < K; ++j) {
    if (v(j) == 0) continue;
    if (j >= p.next) {  // a remainder re-expressed with optimised slopes (slopes.hpp)
      moved += std::fabs(v(j));
      continue;
    }
    std::size_t i = starts.size();
    while (i > 0 && starts[i - 1].second > j) --i;  // the last node that started at or before column j
    if (i == 0) {
      rest += std::fabs(v(j));
      continue;
    }
    per[i - 1] += std::fabs(v(j));
  }
  double total = inputs + rest + moved + slack;
  for (double x : per) total += x;
  std::fprintf(stderr,
               "width shares %s: total width %.6g\n  input symbols %.6g (%.1f%%)\n  slack %.6g (%.1f%%)\n",
               title.c_str(), total, inputs, 100 * inputs / total, slack, 100 * slack / total);
  std::map<std::string, double> kinds;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    if (per[i] == 0) continue;
    const graph::Node& node = g.nodes[starts[i].first];
    kinds[std::string(graph::op_name(node.op))] += per[i];
    if (per[i] >= 0.005 * total)
      std::fprintf(stderr, "  node %zu %s (%s): %.6g (%.1f%%)\n", starts[i].first, node.name.c_str(),
                   std::string(graph::op_name(node.op)).c_str(), per[i], 100 * per[i] / total);
  }
  for (const auto& [kind, x] : kinds)
    std::fprintf(stderr, "  kind %s: %.6g (%.1f%%)\n", kind.c_str(), x, 100 * x / total);
  if (moved > 0)
    std::fprintf(stderr, "  relu remainders with optimised slopes %.6g (%.1f%%)\n", moved,
                 100 * moved / total);
  if (rest > 0) std::fprintf(stderr, "  unattributed %.6g\n", rest);
}

}  // namespace regatta::operators::affine::gp
