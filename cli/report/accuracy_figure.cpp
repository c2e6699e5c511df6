// The accuracy-against-radius figure of `regatta certify --plot` and the report's robustness section.
#include "accuracy_figure.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include <regatta/core/interval64.hpp>

namespace regatta::cli::report {

Figure accuracy_figure(const std::vector<operators::InputRobustness>& rows) {
  using Row = operators::InputRobustness;
  std::vector<double> at;
  for (const Row& r : rows)
    for (double v : {r.certified, r.naive, r.attack})
      if (std::isfinite(v) && v > 0) at.push_back(v);
  std::sort(at.begin(), at.end());
  at.erase(std::unique(at.begin(), at.end()), at.end());
  // The fraction of inputs predicted correctly whose radius (field) is >= r, or > r; rounded down (the
  // certified curves are lower bounds).
  const auto accuracy = [&](double radius, double Row::*field, bool strictly) {
    long k = 0;
    for (const Row& r : rows)
      k += r.prediction == r.label && (strictly ? r.*field > radius : r.*field >= radius);
    return (interval64(double(k)) / interval64(double(rows.size()))).lower();
  };
  Series certified{"certified accuracy (certified radius >= r)", Kind::certified_lower, {}, {}};
  Series naive{"naive product certificate (radius >= r)", Kind::certified_lower, {}, {}};
  Series attack{"attack accuracy (no attack found within r; an upper bound)", Kind::estimate, {}, {}};
  // A step at each radius b where a curve can change: its value for r <= b (radius >= b), then for r > b.
  for (double b : at) {
    for (const auto& [series, field] : {std::pair{&certified, &Row::certified},
                                        std::pair{&naive, &Row::naive}, std::pair{&attack, &Row::attack}}) {
      series->x.insert(series->x.end(), {b, b});
      series->y.insert(series->y.end(), {accuracy(b, field, false), accuracy(b, field, true)});
    }
  }
  for (Series* c : {&certified, &naive, &attack}) c->markers = false;
  Figure fig("certified_accuracy", "Accuracy within an l2 ball of radius r around each input",
             "radius r (l2, input space)", "accuracy (fraction of the inputs)");
  fig.logx = true;
  fig.add(std::move(certified)).add(std::move(naive)).add(std::move(attack));
  fig.caption =
      "Certified accuracy: the fraction of inputs predicted correctly whose certified radius is at least r "
      "(a "
      "certified lower bound on the robust accuracy at r). Attack accuracy: the fraction the attack did not "
      "break within r (an estimate, an upper bound on the robust accuracy). The true robust accuracy lies "
      "between the two curves.";
  return fig;
}

}  // namespace regatta::cli::report
