// Multistart projected ascent on a Jacobian norm (search.hpp).
#include <regatta/core/decimal.hpp>
#include <regatta/operators/lipschitz/search.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include <regatta/core/error.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/lipschitz/local.hpp>
#include "jacobian_probe.hpp"
#include "search_support.hpp"

namespace regatta::lip {

namespace {

using operators::AttentionLayer;
using operators::AttentionOptions;

constexpr int cold_power_iterations = 30;  // power steps from a random start inside the search
constexpr int warm_power_iterations = 8;   // from the direction of a nearby point
constexpr double search_power_tolerance = 1e-7;
constexpr int polish_power_iterations = 1000;
constexpr double polish_power_tolerance = 1e-13;
constexpr int scan_points = 9;                 // log-spaced scale values of a family scan
constexpr int golden_iterations = 14;          // golden-section refinements around the best scan point
constexpr Eigen::Index start_row_limit = 256;  // a random start examines every row when n·d is at most this

struct Point {
  Matrix<double> X;
  detail::Probe probe;
  std::vector<Eigen::Index> tokens;  // ∞-norm: tokens whose rows are probed
  bool valid() const { return X.size() != 0; }
};

class Searcher {
 public:
  Searcher(const AttentionLayer& layer, const AttentionOptions& options, Eigen::Index n,
           const SearchOptions& search)
      : layer_(layer), options_(options), block_(layer, options), n_(n), search_(search) {
    ell_ = detail::length_scale(layer, options, search.radius);
    structured_ = !structured_rows_refusal(layer, options).has_value();
    start_ = detail::seconds_now();
  }

  SearchResult run() {
    SearchResult result;
    std::vector<std::pair<Point, std::string>> starts;
    if (search_.structured_seeds) {
      for (const SeedFamily& f : near_extremal_families(layer_, options_, n_, search_.radius, search_.seed)) {
        if (exhausted()) break;
        Point p = sweep(f);
        if (!p.valid()) continue;
        report(f.name + " (scale scan)", p.probe.value);
        starts.emplace_back(std::move(p), f.name);
      }
      std::stable_sort(starts.begin(), starts.end(), [](const auto& a, const auto& b) {
        return a.first.probe.value > b.first.probe.value;
      });
    }
    for (int k = 0; k < search_.random_starts; ++k)
      starts.emplace_back(Point{}, "random " + std::to_string(k));

    Point best;
    std::string best_origin;
    // Every family's best point is a candidate even when the budget leaves no time to climb from it.
    for (std::size_t k = 0; k < starts.size(); ++k) {
      auto& [start, origin] = starts[k];
      if (!start.valid() && !exhausted()) start = random_start(k);
      if (!start.valid()) continue;
      Point p = ascend(std::move(start));
      result.seeds.push_back({origin, p.probe.value});
      report(origin, p.probe.value);
      if (!best.valid() || p.probe.value > best.probe.value) {
        best = std::move(p);
        best_origin = origin;
      }
    }
    if (!best.valid()) {  // budget spent before any start: probe the first family's or a random point once
      best = random_start(0);
      best_origin = "random 0";
    }
    result.stopped_by_budget = time_up();
    result.stopped_by_evaluations = capped();
    result.all_rows = polish(best);
    result.best.input = best.X;
    result.best.direction = best.probe.direction;
    result.best.row = best.probe.row;
    result.best.value = best.probe.value;
    result.best.origin = best_origin;
    result.evaluations = evaluations_;
    return result;
  }

 private:
  bool capped() const { return evaluations_ >= search_.max_evaluations; }
  bool time_up() const {
    if (search_.poll) search_.poll(evaluations_);
    return search_.budget_seconds > 0 && detail::seconds_now() - start_ >= search_.budget_seconds;
  }
  bool exhausted() const { return capped() || time_up(); }

  void report(const std::string& origin, double value) const {
    if (search_.progress)
      search_.progress("search: " + origin + ": " + nearest_decimal(value, 8) + " (estimate, " +
                       std::to_string(evaluations_) + " linearisations)");
  }

  operators::Linearization<double> linearize(const Matrix<double>& X) {
    ++evaluations_;
    return block_.linearize(X);
  }

  /// Probes X (already in the domain); `warm` is the direction of a nearby point (2-norm) or empty. A point
  /// whose value is not finite is returned invalid.
  Point probe(Matrix<double> X, const std::vector<Eigen::Index>& tokens, const Matrix<double>& warm) {
    Point p;
    try {
      const operators::Linearization<double> lin = linearize(X);
      if (search_.norm == Norm::two) {
        const bool cold = warm.size() == 0;
        const Matrix<double> start = cold ? random_direction() : warm;
        p.probe = detail::power_probe(lin, start, cold ? cold_power_iterations : warm_power_iterations,
                                      search_power_tolerance, [this] { return time_up(); });
      } else {
        p.probe = detail::row_probe(lin, tokens);
      }
    } catch (const InputError&) {  // non-finite intermediate values far out: treat as a rejected point
      return Point{};
    }
    if (!std::isfinite(p.probe.value)) return Point{};
    p.X = std::move(X);
    p.tokens = tokens;
    return p;
  }

  Matrix<double> random_direction() {
    const Vector<double> g = standard_normal(n_ * layer_.d, detail::mix_seed(search_.seed, 7000 + draws_++));
    return Eigen::Map<const Matrix<double>>(g.data(), n_, layer_.d);
  }

  void project(Matrix<double>& X) const {
    if (search_.radius) detail::project_rows_to_ball(X, *search_.radius);
  }

  /// Scan of the family's scale on a log grid, then golden section around the best grid point.
  Point sweep(const SeedFamily& f) {
    Point best;
    const auto value = [&](double theta) {
      Matrix<double> X = f.input(theta);
      project(X);
      Point p = probe(std::move(X), f.tokens, best.valid() ? best.probe.direction : Matrix<double>());
      if (!p.valid()) return -std::numeric_limits<double>::infinity();
      const double v = p.probe.value;
      if (!best.valid() || v > best.probe.value) best = std::move(p);
      return v;
    };
    detail::maximize_log_scale(value, f.low, f.high, scan_points, golden_iterations,
                               [this] { return exhausted(); });
    return best;
  }

  Point random_start(std::size_t k) {
    const Vector<double> g =
        standard_normal(n_ * layer_.d, detail::mix_seed(search_.seed, 5000 + static_cast<std::uint64_t>(k)));
    Matrix<double> X = Eigen::Map<const Matrix<double>>(g.data(), n_, layer_.d);
    X *= (search_.radius ? 0.7 * *search_.radius : ell_) / std::sqrt(double(layer_.d));
    project(X);
    std::vector<Eigen::Index> tokens{0};
    if (search_.norm == Norm::inf) {
      // Track the token of the largest row when every row is affordable, else token 0.
      if (structured_ || n_ * layer_.d <= start_row_limit) {
        try {
          if (const std::optional<Eigen::Index> r = largest_row(X, linearize(X))) tokens = {*r / layer_.d};
        } catch (const InputError&) {
          return Point{};
        }
      }
    }
    return probe(std::move(X), tokens, Matrix<double>());
  }

  /// The bilinear form whose gradient is the ascent direction at p.
  Matrix<double> gradient(const Point& p) {
    evaluations_ += 2;
    return detail::probe_gradient(block_, p.X, p.probe, ell_);
  }

  Point ascend(Point current) {
    Matrix<double> G;
    const auto direction = [&] {
      try {
        G = gradient(current);
      } catch (const InputError&) {
        return false;
      }
      const double gnorm = G.size() ? G.norm() : 0.0;
      if (!(gnorm > 0) || !std::isfinite(gnorm)) return false;
      G /= gnorm;
      return true;
    };
    const auto climb = [&](double step) {
      Matrix<double> X = current.X + step * G;
      project(X);
      Point trial = probe(std::move(X), current.tokens, current.probe.direction);
      if (!trial.valid() || !(trial.probe.value > current.probe.value)) return false;
      current = std::move(trial);
      return true;
    };
    detail::adaptive_ascent(0.1 * ell_ * std::sqrt(double(n_)), 1e-9 * ell_, search_.ascent_steps, direction,
                            climb, [this] { return exhausted(); });
    return current;
  }

  /// The row of J(X) with the largest absolute sum, when every row is affordable: from the rank-one
  /// structure of the rows of a softmax block (local.hpp, O(H n² d²)) or by n·d VJPs within full_row_limit
  /// and full_row_work; nullopt otherwise.
  std::optional<Eigen::Index> largest_row(const Matrix<double>& X,
                                          const operators::Linearization<double>& lin) {
    if (structured_) return block_jacobian_norm_inf<double>(layer_, options_, X).index;
    const double rows = double(n_) * double(layer_.d);
    if (rows <= double(full_row_limit) && rows * double(n_) * double(n_) <= full_row_work)
      return detail::all_rows_probe(lin).row;
    return std::nullopt;
  }

  /// Converged power iteration (2-norm) or every row (∞-norm, when affordable). Returns whether every row
  /// was examined. Once the time budget is spent the point keeps the value it was probed with.
  bool polish(Point& p) {
    if (!p.valid() || time_up()) return false;
    try {
      const operators::Linearization<double> lin = linearize(p.X);
      if (search_.norm == Norm::two) {
        const detail::Probe q = detail::power_probe(lin, p.probe.direction, polish_power_iterations,
                                                    polish_power_tolerance, [this] { return time_up(); });
        if (q.value >= p.probe.value) p.probe = q;
        return false;
      }
      if (const std::optional<Eigen::Index> r = largest_row(p.X, lin)) {
        const std::vector<Eigen::Index> token{*r / layer_.d};
        const detail::Probe q = detail::row_probe(lin, token);
        if (q.value >= p.probe.value) p.probe = q;
        return true;
      }
    } catch (const InputError&) {
    }
    return false;
  }

  const AttentionLayer& layer_;
  const AttentionOptions& options_;
  operators::Block<double> block_;
  Eigen::Index n_;
  SearchOptions search_;
  double ell_ = 1;
  bool structured_ = false;  // the rows of J come from local.hpp's structured path
  double start_ = 0;
  std::int64_t evaluations_ = 0;
  std::uint64_t draws_ = 0;
};

}  // namespace

SearchResult search_jacobian_norm(const AttentionLayer& layer, const AttentionOptions& options,
                                  Eigen::Index n, const SearchOptions& search) {
  layer.validate();
  if (n < 1) throw InputError("n", "must be at least 1, got " + std::to_string(n));
  if (search.radius && !(*search.radius > 0 && std::isfinite(*search.radius)))
    throw InputError("radius", "must be positive and finite");
  if (search.random_starts < 0) throw InputError("random_starts", "must be >= 0");
  if (search.ascent_steps < 0) throw InputError("ascent_steps", "must be >= 0");
  if (search.max_evaluations < 1) throw InputError("max_evaluations", "must be >= 1");
  if (!(search.budget_seconds >= 0) || !std::isfinite(search.budget_seconds))
    throw InputError("budget", "must be a finite number of seconds >= 0");
  return Searcher(layer, options, n, search).run();
}

}  // namespace regatta::lip
