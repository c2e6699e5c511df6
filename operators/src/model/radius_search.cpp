// The power-law search for the largest certified radius (radius_search.hpp;
// docs/models.md#certifying-an-onnx-graph).
#include "radius_search.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace regatta::operators {

CertifiedRadius search_certified_radius(const std::function<double(double)>& margin, double at_centre,
                                        double upper, double tolerance,
                                        const std::function<bool()>& stopped) {
  CertifiedRadius out;
  const auto stop = [&stopped] { return stopped && stopped(); };
  // The loss D(r) = L(0) − L(r) of the lower bound L grows like a power of r whose exponent rises slowly
  // (about 1.5 at small radii, 2.4 near the failure on the digits ViT), and past the failure it jumps by
  // orders of magnitude (a range reaches a pole), so a failing test says where the failure is and little
  // more. Candidates therefore come from the passing tests: the log–log slope s of D through the two
  // largest passing radii (plus half its last increase; at least 1; 2.5 from a single pass) predicts where D
  // reaches L(0), and the candidate aims a little below it (D = 0.97·L(0)) so that it passes close to the
  // failure; then lo·(1 + tolerance) closes the bracket. Two failures in a row fall back to geometric
  // bisection. The first test is at upper/12, a little below the typical certified fraction of the attack
  // radius; when it fails the next is at upper/(12·1.4), then a quarter of the last failure. (First 40
  // digits images: the exponent from the first pass to the failure has median 2.5, and the smallest
  // fraction is 0.066.)
  const double target = std::log(at_centre), aim = std::log(0.97);
  double lo = 0, hi = upper;
  std::vector<std::pair<double, double>> passed;  // (r, log D) in increasing r
  std::vector<double> lows;                       // L(r) at the passing radii
  int failures = 0;
  double r = upper / 12;
  for (int k = 0; k < 200 && !stop(); ++k) {
    ++out.checks;
    const double l = margin(r);
    if (stop()) break;  // a stopped test certifies nothing: r neither passed nor failed
    if (l > 0) {
      lo = r;
      passed.emplace_back(r, std::log(std::max(at_centre - l, at_centre * 1e-300)));
      lows.push_back(l);
      failures = 0;
    } else {
      hi = r;
      ++failures;
    }
    if (lo > 0 && hi / lo <= 1 + tolerance) break;
    if (passed.empty()) {
      r = hi / (failures == 1 ? 1.4 : 4.0);
      if (!(r > 0)) break;  // underflow: nothing positive passes
      continue;
    }
    const std::size_t m = passed.size();
    auto slope = [&passed](std::size_t a, std::size_t b) {
      return (passed[b].second - passed[a].second) / std::log(passed[b].first / passed[a].first);
    };
    double s = 2.5;
    if (m >= 2) {
      s = slope(m - 2, m - 1);
      if (m >= 3) s += 0.5 * std::max(0.0, s - slope(m - 3, m - 2));
      s = std::max(s, 1.0);
    }
    double candidate = passed.back().first * std::exp((target + aim - passed.back().second) / s);
    if (m >= 2 && lows[m - 1] < 0.1 * at_centre) {
      // Close to the failure D steepens, and steps aimed at D = 0.97·L(0) shrink towards the tolerance. There
      // L itself, extrapolated linearly in log r through the last two passes, says where it reaches 0 (an
      // overestimate where L is concave), and the candidate goes 80 % of the way when that is further.
      const double sigma = (lows[m - 2] - lows[m - 1]) / std::log(passed[m - 1].first / passed[m - 2].first);
      if (sigma > 0)
        candidate = std::max(candidate, passed.back().first * std::exp(0.8 * lows[m - 1] / sigma));
    }
    if (failures >= 2) candidate = std::sqrt(lo * hi);
    const double next = lo * (1 + tolerance);
    if (!(candidate > next)) candidate = next;
    if (candidate >= hi) candidate = hi / lo > (1 + tolerance) * (1 + tolerance) ? std::sqrt(lo * hi) : next;
    if (candidate >= upper) {  // nothing below `upper` is left to test but `upper` itself
      hi = upper;
      break;
    }
    r = candidate;
  }
  out.radius = lo;
  out.refuted = hi;
  return out;
}

}  // namespace regatta::operators
