// Projected gradient descent over an ℓ2 ball or ℓ∞ box intersected with a box, and the margin attack built
// on it (docs/graph.md, "Attack"). Everything is a binary64 estimate: the result is a candidate point.
#include <regatta/graph/attack.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <random>
#include <string>

#include <regatta/core/error.hpp>

#include "gradient.hpp"
#include "pgd.hpp"

namespace regatta::graph {

namespace detail {

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

double lower_of(const AttackSet& s, std::size_t k) { return s.lower.empty() ? -inf : s.lower[k]; }
double upper_of(const AttackSet& s, std::size_t k) { return s.upper.empty() ? inf : s.upper[k]; }
double scale_of(const AttackSet& s, std::size_t k) { return s.scale.empty() ? 1.0 : s.scale[k]; }

// The ℓ∞ set's interval on coordinate k: [centre − radius·scale, centre + radius·scale] ∩ [lower, upper].
std::pair<double, double> linf_range(const AttackSet& s, std::size_t k) {
  const double half = s.radius * scale_of(s, k);
  return {std::max(lower_of(s, k), s.centre[k] - half), std::min(upper_of(s, k), s.centre[k] + half)};
}

std::vector<double> clamp_box(const AttackSet& s, std::vector<double> x) {
  for (std::size_t k = 0; k < x.size(); ++k) x[k] = std::clamp(x[k], lower_of(s, k), upper_of(s, k));
  return x;
}

double distance(const std::vector<double>& x, const std::vector<double>& c) {
  double s = 0;
  for (std::size_t k = 0; k < x.size(); ++k) s += (x[k] - c[k]) * (x[k] - c[k]);
  return std::sqrt(s);
}

}  // namespace

void check_attack_set(const AttackSet& s, std::size_t n, const std::string& subject) {
  const auto fail = [&](const std::string& why) { throw InputError(subject, "attack set: " + why); };
  const auto sized = [&](const std::vector<double>& v, const char* what, bool optional) {
    if (v.size() != n && !(optional && v.empty()))
      fail(std::string(what) + " has " + std::to_string(v.size()) + " values, the input " +
           std::to_string(n));
  };
  sized(s.centre, "the centre", false);
  sized(s.scale, "the scale", true);
  sized(s.lower, "the lower bound", true);
  sized(s.upper, "the upper bound", true);
  if (!(s.radius >= 0) || !std::isfinite(s.radius)) fail("the radius is not a finite number >= 0");
  for (std::size_t k = 0; k < n; ++k) {
    if (!std::isfinite(s.centre[k])) fail("the centre is not finite");
    if (!(scale_of(s, k) >= 0) || !std::isfinite(scale_of(s, k))) fail("a scale is not a finite number >= 0");
    if (!(lower_of(s, k) <= upper_of(s, k))) fail("a lower bound exceeds its upper bound (or is NaN)");
  }
  if (s.norm == Norm::linf) {
    for (std::size_t k = 0; k < n; ++k)
      if (const auto [lo, hi] = linf_range(s, k); !(lo <= hi))
        fail("the box around the centre misses [lower, upper] on coordinate " + std::to_string(k));
  } else if (distance(clamp_box(s, s.centre), s.centre) > s.radius) {
    fail("the ball misses the box [lower, upper]");
  }
}

std::vector<double> project(const AttackSet& s, std::vector<double> x) {
  if (s.norm == Norm::linf) {
    for (std::size_t k = 0; k < x.size(); ++k) {
      const auto [lo, hi] = linf_range(s, k);
      x[k] = std::clamp(x[k], lo, hi);
    }
    return x;
  }
  std::vector<double> z = clamp_box(s, x);
  if (distance(z, s.centre) <= s.radius) return z;
  // ‖clamp((1 − μ)x + μc) − c‖ decreases from > r at μ = 0 to ≤ r at μ = 1: bisect, keep the feasible end.
  const auto at = [&](double mu) {
    std::vector<double> y(x.size());
    for (std::size_t k = 0; k < x.size(); ++k) y[k] = (1 - mu) * x[k] + mu * s.centre[k];
    return clamp_box(s, std::move(y));
  };
  double lo = 0, hi = 1;
  for (int it = 0; it < 100 && hi - lo > 0x1p-52; ++it) {
    const double mid = 0.5 * (lo + hi);
    (distance(at(mid), s.centre) > s.radius ? lo : hi) = mid;
  }
  return at(hi);
}

Minimum pgd_minimise(const Graph& graph, const AttackSet& set, const Objective& objective,
                     const AttackOptions& options) {
  const std::size_t n = set.centre.size();
  std::mt19937_64 rng(options.seed);
  Minimum best;
  best.value = inf;
  const int steps = std::max(options.steps, 0);
  const auto stopped = [&] {
    return options.stop != nullptr && options.stop->load(std::memory_order_relaxed);
  };

  // One evaluation: the value, the visit, and (when `want_gradient`) the gradient of the value in x.
  double value = inf;
  const auto evaluate = [&](const std::vector<double>& x, bool want_gradient) {
    auto r = value_and_gradient(graph, x, [&](const std::vector<double>& y, std::vector<double>& w) {
      value = objective.value(y, w);
      if (std::isnan(value)) value = inf;
      return want_gradient && std::isfinite(value);
    });
    ++best.evaluations;
    if (value < best.value || best.point.empty()) {
      best.value = value;
      best.point = x;
      best.output = r.output;
    }
    if (objective.visit && objective.visit(x, r.output, value)) best.ended = true;
    return std::move(r.gradient);
  };

  for (int start = 0; start <= std::max(options.restarts, 0) && !best.ended && !stopped(); ++start) {
    std::vector<double> x(n);
    if (start == 0) {
      x = set.centre;
    } else if (set.norm == Norm::linf) {
      for (std::size_t k = 0; k < n; ++k) {
        const auto [lo, hi] = linf_range(set, k);
        x[k] =
            std::isfinite(lo) && std::isfinite(hi) ? std::uniform_real_distribution<double>(lo, hi)(rng) : lo;
        if (!std::isfinite(x[k])) x[k] = std::clamp(set.centre[k], lo, hi);
      }
    } else {  // uniform in the ball: a Gaussian direction, radius r·u^(1/n)
      std::normal_distribution<double> gauss;
      double norm = 0;
      for (double& v : x) {
        v = gauss(rng);
        norm += v * v;
      }
      const double len = set.radius * std::pow(std::uniform_real_distribution<double>(0, 1)(rng),
                                               1.0 / static_cast<double>(n));
      norm = std::sqrt(norm);
      for (std::size_t k = 0; k < n; ++k) x[k] = set.centre[k] + (norm > 0 ? len * x[k] / norm : 0.0);
    }
    x = project(set, std::move(x));
    for (int t = 0; t <= steps && !best.ended && !stopped(); ++t) {
      const std::vector<double> g = evaluate(x, t < steps);
      if (t == steps || g.empty()) break;  // the last point, or no usable gradient (a NaN or ∞ value)
      const double length =
          5.0 * set.radius / steps * 0.5 * (1 + std::cos(std::numbers::pi * t / static_cast<double>(steps)));
      double gnorm = 0;
      for (double v : g) gnorm += v * v;
      gnorm = std::sqrt(gnorm);
      if (!(gnorm > 0) || !std::isfinite(gnorm)) break;  // a flat point (or a broken gradient): stay
      if (set.norm == Norm::linf) {
        for (std::size_t k = 0; k < n; ++k)
          if (g[k] != 0) x[k] -= std::copysign(length * scale_of(set, k), g[k]);
      } else {
        for (std::size_t k = 0; k < n; ++k) x[k] -= length * g[k] / gnorm;
      }
      x = project(set, std::move(x));
    }
  }
  return best;
}

}  // namespace detail

AttackResult pgd_attack(const Graph& graph, const AttackSet& set, int label, const AttackOptions& options) {
  if (graph.inputs.size() != 1 || graph.outputs.size() != 1)
    throw InputError(graph.source, "the model has " + std::to_string(graph.inputs.size()) + " inputs and " +
                                       std::to_string(graph.outputs.size()) +
                                       " outputs; the attack needs one of each");
  const auto n =
      static_cast<std::size_t>(element_count(graph.values[static_cast<std::size_t>(graph.inputs[0])].shape));
  const auto classes = element_count(graph.values[static_cast<std::size_t>(graph.outputs[0])].shape);
  detail::check_attack_set(set, n, graph.source);
  if (label < 0 || label >= classes || classes < 2)
    throw InputError(graph.source, "label " + std::to_string(label) + " is not one of the model's " +
                                       std::to_string(classes) + " outputs (the margin needs at least 2)");
  detail::Objective margin;
  margin.value = [label](const std::vector<double>& y, std::vector<double>& w) {
    std::size_t other = label == 0 ? 1 : 0;
    for (std::size_t c = 0; c < y.size(); ++c)
      if (static_cast<int>(c) != label && y[c] > y[other]) other = c;
    w[static_cast<std::size_t>(label)] = 1;
    w[other] = -1;
    return y[static_cast<std::size_t>(label)] - y[other];
  };
  margin.visit = [&](const std::vector<double>&, const std::vector<double>&, double v) {
    return options.stop_when_found && v < 0;
  };
  const detail::Minimum m = detail::pgd_minimise(graph, set, margin, options);
  AttackResult r;
  r.point = m.point;
  r.margin = m.value;
  r.found = m.value < 0;
  r.evaluations = m.evaluations;
  return r;
}

}  // namespace regatta::graph
