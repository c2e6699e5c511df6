// The measure-level bracket: certification of a ratio witness and the matching mean-field bound
// (measure_ratio.hpp).
#include <algorithm>
#include <cmath>

#include <regatta/core/convert.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/measures/discrete_measure.hpp>
#include <regatta/measures/wasserstein.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/lipschitz/measure_ratio.hpp>
#include "../search/search_support.hpp"

namespace regatta::lip {

namespace {

using operators::AttentionLayer;
using operators::AttentionOptions;

/// The midpoints of an interval matrix and the largest Euclidean distance from a midpoint row to any point
/// of its box (rounded up, via Σ_a |mid − x_a| ≥ ‖mid − x‖).
double midpoints(const Matrix<interval>& M, Matrix<double>& mid) {
  using std::abs;
  mid.resize(M.rows(), M.cols());
  double radius = 0;
  for (Eigen::Index i = 0; i < M.rows(); ++i) {
    interval sum(0);
    for (Eigen::Index a = 0; a < M.cols(); ++a) {
      mid(i, a) = scalar_traits<interval>::to_double(M(i, a));
      sum += abs(scalar_cast<interval>(mid(i, a)) - M(i, a));
    }
    radius = std::max(radius, detail::round_up(upper_bound(sum)));
  }
  return radius;
}

}  // namespace

MeasureCertificate certify_measure_witness(const AttentionLayer& layer, const AttentionOptions& options,
                                           const MeasureWitness& w, const MeasureSearchOptions& s,
                                           unsigned precision_bits) {
  detail::validate_measure_search(layer, options, s);
  detail::check_precision(precision_bits);
  MeasureCertificate c;
  if (w.mu.size() == 0) {
    c.reason = "no witness";
    return c;
  }
  const PrecisionGuard guard(precision_bits);
  const auto outside = [&](const Matrix<double>& M, std::optional<double> radius, const char* what) {
    if (!radius) return false;
    const Eigen::Index i = detail::first_row_outside_ball(M, *radius);
    if (i < 0) return false;
    c.reason = std::string("atom ") + std::to_string(i) + " of " + what + " is not certainly inside its ball";
    return true;
  };
  if (s.argument != MeasureArgument::query &&
      (outside(w.mu, s.radius, "mu") || outside(w.nu, s.radius, "nu")))
    return c;
  if (s.argument == MeasureArgument::query && outside(w.shared, s.radius, "the context")) return c;
  if (s.argument == MeasureArgument::context &&
      outside(w.shared, s.query_radius ? s.query_radius : s.radius, "the queries"))
    return c;

  const operators::Block<interval> block(layer, options);
  const auto out = [&](const Matrix<double>& varied) {
    const Matrix<interval> V = matrix_cast<interval>(varied);
    if (s.argument == MeasureArgument::self) return block.forward(V);
    const Matrix<interval> Z = matrix_cast<interval>(w.shared);
    return s.argument == MeasureArgument::query ? block.forward_cross(V, Z) : block.forward_cross(Z, V);
  };
  Matrix<double> mid_mu, mid_nu;
  const double r_mu = midpoints(out(w.mu), mid_mu), r_nu = midpoints(out(w.nu), mid_nu);
  if (!std::isfinite(r_mu) || !std::isfinite(r_nu)) {
    c.reason = "the interval enclosure of the outputs is not finite";
    return c;
  }
  const auto bracket = [&](const Matrix<double>& a, const Matrix<double>& b) {
    const auto mu = measures::DiscreteMeasure<double>::empirical(a);
    const auto nu = measures::DiscreteMeasure<double>::empirical(b);
    return measures::certify_wasserstein(mu, nu, s.p, measures::wasserstein_exact(mu, nu, s.p).plan, true);
  };
  const measures::CertifiedBracket num = bracket(mid_mu, mid_nu), den = bracket(w.mu, w.nu);
  if (!num.certified || !den.certified || !(den.upper > 0)) {
    c.reason = "the Wasserstein brackets could not be certified";
    return c;
  }
  const interval lower_num =
      scalar_cast<interval>(num.lower) - scalar_cast<interval>(r_mu) - scalar_cast<interval>(r_nu);
  const double numerator = std::max(0.0, detail::round_down(lower_bound(lower_num)));
  c.lower =
      detail::round_down(lower_bound(scalar_cast<interval>(numerator) / scalar_cast<interval>(den.upper)));
  return c;
}

MeasureBracket compute_measure_bracket(const AttentionLayer& layer, const AttentionOptions& options,
                                       const MeasureSearchOptions& search, bool certify,
                                       unsigned precision_bits) {
  detail::validate_measure_search(layer, options, search);
  detail::check_precision(precision_bits);
  MeasureBracket b;
  const Bound bound = measure_bound(search.argument);
  BoundSetting setting;
  setting.n = search.n;
  setting.radius = search.radius;
  setting.query_radius = search.query_radius;
  const std::vector<BoundReport> reports =
      theoretical_bounds(layer, options, setting, Norm::two, precision_bits);
  const BoundReport* report = nullptr;
  for (const BoundReport& r : reports)
    if (r.bound == bound) report = &r;
  b.bound_name = info(bound).id;
  b.bound_description = info(bound).name;
  if (report && report->applies) {
    b.upper_estimate = report->value;
  } else {
    b.refused = report ? report->reason : "not evaluated";
  }

  const MeasureSearchResult found = search_measure_ratio(layer, options, search);
  b.witness = found.best;
  b.evaluations = found.evaluations;
  b.stopped_by_budget = found.stopped_by_budget;
  b.stopped_by_evaluations = found.stopped_by_evaluations;
  b.lower_estimate = found.best.ratio;
  b.lower = b.lower_estimate;
  b.upper = b.upper_estimate;
  if (certify) {
    const MeasureCertificate c = certify_measure_witness(layer, options, b.witness, search, precision_bits);
    b.lower_certified = c.lower;
    if (c.lower) b.lower = *c.lower;
    if (report && report->applies && std::isfinite(report->certified_upper)) {
      b.upper_certified = report->certified_upper;
      b.upper = report->certified_upper;
    }
    b.certified = b.lower_certified.has_value() && b.upper_certified.has_value();
    if (!c.lower) b.note = "lower end not certified: " + c.reason;
    if (!b.upper_certified)
      b.note += std::string(b.note.empty() ? "" : "; ") + "no certified upper end (" +
                (b.refused.empty() ? "the bound exceeds the double range" : b.refused) + ")";
  }
  b.ratio = std::isfinite(b.upper) && b.upper > 0 ? b.lower / b.upper : 0;
  return b;
}

}  // namespace regatta::lip
