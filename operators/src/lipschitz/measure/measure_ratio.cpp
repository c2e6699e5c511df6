// Measure-level Lipschitz ratio search and its certification (measure_ratio.hpp).
#include <regatta/core/decimal.hpp>
#include <regatta/operators/lipschitz/measure_ratio.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>

#include <regatta/core/error.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/measures/discrete_measure.hpp>
#include <regatta/measures/wasserstein.hpp>
#include <regatta/operators/differentiable.hpp>
#include "../search/search_support.hpp"

namespace regatta::lip {

namespace {

using operators::AttentionLayer;
using operators::AttentionOptions;

constexpr int measure_scan_points = 9;
constexpr int measure_golden_iterations = 10;
constexpr int max_measure_seed_heads = 4;
constexpr double min_relative_denominator = 1e-6;  // W_p(μ, ν) below this times the length scale: rejected

/// The three arguments: the varied X, Y and the shared Z (empty for self).
struct Vars {
  Matrix<double> X, Y, Z;
};

struct Value {
  double numerator = 0, denominator = 0, ratio = -std::numeric_limits<double>::infinity();
  Vars gradient;
  bool valid() const { return std::isfinite(ratio); }
};

struct Transport {
  double value = 0;
  Matrix<double> grad_a, grad_b;  // ∂W_p/∂a_i, ∂W_p/∂b_j for the optimal plan (envelope theorem)
};

/// W_p between the empirical measures of the rows of A and B, with its gradient in the atoms: for the plan π,
/// W_p^p = Σ π_ij ‖a_i − b_j‖^p, ∂/∂a_i = Σ_j π_ij p‖a_i − b_j‖^{p−2}(a_i − b_j), chained through (·)^{1/p}.
Transport transport(const Matrix<double>& A, const Matrix<double>& B, double p) {
  const auto r = measures::wasserstein_exact(measures::DiscreteMeasure<double>::empirical(A),
                                             measures::DiscreteMeasure<double>::empirical(B), p);
  Transport t;
  t.value = r.value;
  t.grad_a = Matrix<double>::Zero(A.rows(), A.cols());
  t.grad_b = Matrix<double>::Zero(B.rows(), B.cols());
  if (!(r.cost > 0)) return t;
  const double outer = std::pow(r.cost, 1 / p - 1);
  for (const measures::Coupling& c : r.plan.entries) {
    const Vector<double> diff = (A.row(c.i) - B.row(c.j)).transpose();
    const double dist = diff.norm();
    if (!(dist > 0)) continue;
    const Vector<double> g = c.mass * std::pow(dist, p - 2) * outer * diff;
    t.grad_a.row(c.i) += g.transpose();
    t.grad_b.row(c.j) -= g.transpose();
  }
  return t;
}

Vector<double> unit(Vector<double> u) {
  const double norm = u.norm();
  return norm > 0 ? Vector<double>(u / norm) : u;
}

/// n rows equal to c·u.
Matrix<double> repeated(Eigen::Index n, const Vector<double>& u, double c) {
  Matrix<double> X(n, u.size());
  for (Eigen::Index i = 0; i < n; ++i) X.row(i) = c * u.transpose();
  return X;
}

struct Family {
  std::string name;
  std::function<Vars(double)> vars;
};

class MeasureSearcher {
 public:
  MeasureSearcher(const AttentionLayer& layer, const AttentionOptions& options, const MeasureSearchOptions& s)
      : layer_(layer), block_(layer, options), s_(s), m_(s.m > 0 ? s.m : s.n) {
    ell_ = detail::length_scale(layer, options, s.radius);
    R_ = s.radius ? *s.radius * detail::ball_margin : ell_;
    Rq_ = s.query_radius ? *s.query_radius * detail::ball_margin : R_;
    start_ = detail::seconds_now();
  }

  MeasureSearchResult run() {
    MeasureSearchResult result;
    std::vector<std::pair<Vars, std::string>> starts;
    for (const Family& f : families()) {
      if (exhausted()) break;
      Vars best;
      double best_value = -std::numeric_limits<double>::infinity();
      const auto value = [&](double t) {
        Vars v = f.vars(t);
        project(v);
        const Value val = evaluate(v, false);
        if (val.valid() && val.ratio > best_value) {
          best_value = val.ratio;
          best = std::move(v);
        }
        return val.ratio;
      };
      detail::maximize_log_scale(value, 1e-3 * R_, R_, measure_scan_points, measure_golden_iterations,
                                 [this] { return exhausted(); });
      if (best.X.size() == 0) continue;
      report(f.name + " (scale scan)", best_value);
      starts.emplace_back(std::move(best), f.name);
    }
    for (int k = 0; k < s_.random_starts; ++k)
      starts.emplace_back(random_start(k), "random " + std::to_string(k));

    for (auto& [vars, origin] : starts) {
      if (exhausted()) break;
      Value value = evaluate(vars, true);
      if (!value.valid()) continue;
      ascend(vars, value);
      report(origin, value.ratio);
      if (value.ratio > result.best.ratio || result.best.mu.size() == 0) {
        result.best.mu = vars.X;
        result.best.nu = vars.Y;
        result.best.shared = vars.Z;
        result.best.numerator = value.numerator;
        result.best.denominator = value.denominator;
        result.best.ratio = value.ratio;
        result.best.origin = origin;
      }
    }
    result.evaluations = evaluations_;
    result.stopped_by_budget = time_up();
    result.stopped_by_evaluations = capped();
    return result;
  }

 private:
  bool capped() const { return evaluations_ >= s_.max_evaluations; }
  bool time_up() const {
    return s_.budget_seconds > 0 && detail::seconds_now() - start_ >= s_.budget_seconds;
  }
  bool exhausted() const { return capped() || time_up(); }

  void report(const std::string& origin, double value) const {
    if (s_.progress)
      s_.progress("search: " + origin + ": " + nearest_decimal(value, 8) + " (estimate, " +
                  std::to_string(evaluations_) + " evaluations)");
  }

  bool varied_in_ball() const { return s_.argument != MeasureArgument::query && s_.radius.has_value(); }

  void project(Vars& v) const {
    if (varied_in_ball()) {
      detail::project_rows_to_ball(v.X, *s_.radius);
      detail::project_rows_to_ball(v.Y, *s_.radius);
    }
    if (s_.argument == MeasureArgument::query && s_.radius) detail::project_rows_to_ball(v.Z, *s_.radius);
    if (s_.argument == MeasureArgument::context && (s_.query_radius || s_.radius))
      detail::project_rows_to_ball(v.Z, s_.query_radius ? *s_.query_radius : *s_.radius);
  }

  /// The ratio at v and, when asked, its gradient in (X, Y, Z).
  Value evaluate(const Vars& v, bool with_gradient) {
    if (s_.poll) s_.poll(evaluations_);  // outside the try below: its exception is not a rejected point
    ++evaluations_;
    Value out;
    try {
      const Transport den = transport(v.X, v.Y, s_.p);
      if (!(den.value > min_relative_denominator * ell_)) return out;
      Matrix<double> gX, gY, gZ;
      Transport num;
      if (s_.argument == MeasureArgument::self) {
        const auto lx = block_.linearize(v.X), ly = block_.linearize(v.Y);
        num = transport(lx.value(), ly.value(), s_.p);
        if (with_gradient) {
          gX = lx.vjp(num.grad_a);
          gY = ly.vjp(num.grad_b);
        }
      } else {
        const bool query = s_.argument == MeasureArgument::query;
        const auto lx = query ? block_.linearize_cross(v.X, v.Z) : block_.linearize_cross(v.Z, v.X);
        const auto ly = query ? block_.linearize_cross(v.Y, v.Z) : block_.linearize_cross(v.Z, v.Y);
        num = transport(lx.value(), ly.value(), s_.p);
        if (with_gradient) {
          if (query) {
            gX = lx.vjp_query(num.grad_a);
            gY = ly.vjp_query(num.grad_b);
            gZ = lx.vjp_context(num.grad_a) + ly.vjp_context(num.grad_b);
          } else {
            gX = lx.vjp_context(num.grad_a);
            gY = ly.vjp_context(num.grad_b);
            gZ = lx.vjp_query(num.grad_a) + ly.vjp_query(num.grad_b);
          }
        }
      }
      out.numerator = num.value;
      out.denominator = den.value;
      out.ratio = num.value / den.value;
      if (with_gradient) {
        // ∇(N/D) = (∇N − ρ∇D)/D.
        out.gradient.X = (gX - out.ratio * den.grad_a) / den.value;
        out.gradient.Y = (gY - out.ratio * den.grad_b) / den.value;
        if (gZ.size() != 0) out.gradient.Z = gZ / den.value;
      }
    } catch (const InputError&) {  // non-finite values far out: a rejected point
      return Value{};
    }
    if (!std::isfinite(out.ratio)) return Value{};
    return out;
  }

  void ascend(Vars& current, Value& value) {
    Vars g;
    double gnorm = 0;
    const auto direction = [&] {
      g = value.gradient;
      gnorm = std::sqrt(g.X.squaredNorm() + g.Y.squaredNorm() + (g.Z.size() ? g.Z.squaredNorm() : 0.0));
      return gnorm > 0 && std::isfinite(gnorm);
    };
    const auto climb = [&](double step) {
      Vars trial{current.X + (step / gnorm) * g.X, current.Y + (step / gnorm) * g.Y, current.Z};
      if (g.Z.size() != 0) trial.Z += (step / gnorm) * g.Z;
      project(trial);
      Value v = evaluate(trial, true);
      if (!v.valid() || !(v.ratio > value.ratio)) return false;
      current = std::move(trial);
      value = std::move(v);
      return true;
    };
    detail::adaptive_ascent(0.05 * ell_ * std::sqrt(double(s_.n)), 1e-9 * ell_, s_.ascent_steps, direction,
                            climb, [this] { return exhausted(); });
  }

  Matrix<double> gaussian(Eigen::Index rows, double scale, std::uint64_t stream) const {
    const Vector<double> g = standard_normal(rows * layer_.d, detail::mix_seed(s_.seed, stream));
    return Matrix<double>(Eigen::Map<const Matrix<double>>(g.data(), rows, layer_.d)) *
           (scale / std::sqrt(double(layer_.d)));
  }

  Vars random_start(int k) const {
    Vars v;
    const std::uint64_t base = 9000 + 10 * static_cast<std::uint64_t>(k);
    const double varied = s_.argument == MeasureArgument::query ? ell_ : 0.7 * R_;
    v.X = gaussian(s_.n, varied, base);
    v.Y = v.X + gaussian(s_.n, 0.05 * varied, base + 1);
    if (s_.argument != MeasureArgument::self)
      v.Z = gaussian(m_, 0.7 * (s_.argument == MeasureArgument::query ? R_ : Rq_), base + 2);
    project(v);
    return v;
  }

  /// docs/math/bounds.md#mean-field: the Theorem B family and its positive-spectrum variant (self and
  /// context), the Theorem A
  /// input (query); for the first heads.
  std::vector<Family> families() const {
    std::vector<Family> out;
    const Eigen::Index n = s_.n, m = m_, last = n - 1;
    const double R = R_, Rq = Rq_;
    for (int h = 0; h < std::min(layer_.heads, max_measure_seed_heads); ++h) {
      const Matrix<double> A = detail::score_matrix(layer_, h);
      const std::string head = " head " + std::to_string(h);
      if (s_.argument == MeasureArgument::query) {
        const Vector<double> u = detail::top_right_singular_vector(A);
        const Vector<double> w = unit(A * u);
        if (w.norm() == 0) continue;
        out.push_back({"theorem A input" + head, [=](double t) {
                         Vars v;
                         v.X = Matrix<double>::Zero(n, u.size());
                         v.Y = repeated(n, w, t);
                         v.Z = Matrix<double>(m, u.size());
                         for (Eigen::Index j = 0; j < m; ++j)
                           v.Z.row(j) = (j % 2 == 0 ? R : -R) * u.transpose();
                         return v;
                       }});
        continue;
      }
      const detail::ExtremeEigen e = detail::extreme_eigen(A);
      const bool self = s_.argument == MeasureArgument::self;
      // Contracting direction (A u = λ u, λ < 0; for λ > 0 the query sits at −R′u instead).
      for (const bool negative : {true, false}) {
        const double lambda = negative ? e.lambda_min : e.lambda_max;
        if (lambda == 0 || (!negative && e.lambda_max == e.lambda_min)) continue;  // d = 1: one eigenpair
        const Vector<double> u = negative ? e.u_min : e.u_max;
        const double side = lambda < 0 ? 1.0 : -1.0;  // query at side·R′u
        if (self && !(lambda < 0)) continue;
        out.push_back(
            {std::string("theorem B family") + (negative ? " (lambda_min)" : " (lambda_max)") + head,
             [=](double t) {
               Vars v;
               v.X = repeated(n, u, R);
               v.X.row(last) = -R * u.transpose();
               v.Y = v.X;
               v.Y.row(last) = (t - R) * u.transpose();
               if (!self) v.Z = repeated(m, u, side * Rq);
               return v;
             }});
      }
      if (self && e.lambda_max > 0) {
        const Vector<double> u = e.u_max;
        out.push_back({"positive-spectrum family" + head, [=](double t) {
                         Vars v;
                         v.X = repeated(n, u, R / 2);
                         v.X.row(last) = R * u.transpose();
                         v.Y = v.X;
                         v.Y.row(last) = (R - t) * u.transpose();
                         return v;
                       }});
      }
    }
    return out;
  }

  const AttentionLayer& layer_;
  operators::Block<double> block_;
  MeasureSearchOptions s_;
  Eigen::Index m_;
  double ell_ = 1, R_ = 1, Rq_ = 1, start_ = 0;
  std::int64_t evaluations_ = 0;
};

}  // namespace

void detail::validate_measure_search(const AttentionLayer& layer, const AttentionOptions& options,
                                     const MeasureSearchOptions& s) {
  layer.validate();
  if (options.causal)
    throw InputError("--causal",
                     "measure-level ratios of masked attention need lifted measures "
                     "(docs/math/attention.md#lifted-causal), which are not supported");
  if (layer.rotary)
    throw InputError("--rope",
                     "rotary position embeddings rotate a token by its position: attention with "
                     "them is not a map on measures, whose atoms have no order");
  if (s.n < 1) throw InputError("n", "must be at least 1, got " + std::to_string(s.n));
  if (s.m < 0) throw InputError("m", "must be >= 0 (0: n)");
  if (!(s.p >= 1) || !std::isfinite(s.p)) throw InputError("p", "must be a finite number >= 1");
  if (s.radius && !(*s.radius > 0 && std::isfinite(*s.radius)))
    throw InputError("radius", "must be positive and finite");
  if (s.query_radius && !(*s.query_radius > 0 && std::isfinite(*s.query_radius)))
    throw InputError("query_radius", "must be positive and finite");
  if (s.random_starts < 0) throw InputError("random_starts", "must be >= 0");
  if (s.ascent_steps < 0) throw InputError("ascent_steps", "must be >= 0");
  if (s.max_evaluations < 1) throw InputError("max_evaluations", "must be >= 1");
  if (!(s.budget_seconds >= 0) || !std::isfinite(s.budget_seconds))
    throw InputError("budget", "must be a finite number of seconds >= 0");
}

std::string to_string(MeasureArgument argument) {
  switch (argument) {
    case MeasureArgument::self:
      return "self";
    case MeasureArgument::query:
      return "query";
    case MeasureArgument::context:
      return "context";
  }
  return "self";
}

MeasureArgument parse_measure_argument(const std::string& text, const std::string& subject) {
  if (text == "self") return MeasureArgument::self;
  if (text == "query") return MeasureArgument::query;
  if (text == "context") return MeasureArgument::context;
  throw InputError(subject, "must be query or context, got '" + text + "'");
}

Bound measure_bound(MeasureArgument argument) {
  switch (argument) {
    case MeasureArgument::query:
      return Bound::mf_query;
    case MeasureArgument::context:
      return Bound::mf_context;
    default:
      return Bound::mf_self;
  }
}

MeasureSearchResult search_measure_ratio(const AttentionLayer& layer, const AttentionOptions& options,
                                         const MeasureSearchOptions& search) {
  detail::validate_measure_search(layer, options, search);
  return MeasureSearcher(layer, options, search).run();
}

}  // namespace regatta::lip
