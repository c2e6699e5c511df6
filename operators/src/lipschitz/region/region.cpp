// Certified Jacobian norms over balls and boxes of inputs, and the robustness radius (see region.hpp).
#include <regatta/operators/lipschitz/region.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include <regatta/core/checks.hpp>
#include <regatta/core/decimal.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/interval_norms.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>

#include "second_order.hpp"

namespace regatta::lip {

namespace {

using Eigen::Index;
using operators::AttentionLayer;
using operators::AttentionOptions;

void check_radius(const std::string& subject, double r) {
  if (!(std::isfinite(r) && r > 0)) throw InputError(subject, "must be finite and > 0");
}

/// R with ‖x'_i‖ ≤ R for every token of every X' in the region: max_i ‖x_i‖ + ε (ball: ‖x'_i − x_i‖ ≤
/// ‖X' − X‖_F ≤ ε) or + r√d (box), rounded up.
double token_radius(const Matrix<double>& X, const Region& region) {
  interval64 widest(0.0);
  for (Index i = 0; i < X.rows(); ++i) {
    interval64 sq(0.0);
    for (Index a = 0; a < X.cols(); ++a) sq = sq + interval64(X(i, a)) * interval64(X(i, a));
    const interval64 norm = sqrt(sq);
    if (norm.upper() > widest.upper()) widest = norm;
  }
  const interval64 step = region.shape == RegionShape::ball
                              ? interval64(region.radius)
                              : interval64(region.radius) * sqrt(interval64(double(X.cols())));
  return (interval64(widest.upper()) + step).upper();
}

std::optional<ClosedFormBound> best_closed_form(const AttentionLayer& layer, const AttentionOptions& options,
                                                const Matrix<double>& X, const Region& region, Norm norm) {
  BoundSetting setting;
  setting.n = X.rows();
  setting.radius = token_radius(X, region);
  std::optional<ClosedFormBound> best;
  for (const BoundReport& r : theoretical_bounds(layer, options, setting, norm)) {
    if (!r.applies || !is_sequence_bound(r.bound) || !std::isfinite(r.certified_upper)) continue;
    if (!best || r.certified_upper < best->upper)
      best = ClosedFormBound{info(r.bound).id, r.certified_upper, *setting.radius};
  }
  return best;
}

}  // namespace

std::string to_string(RegionShape shape) { return shape == RegionShape::ball ? "ball" : "box"; }

std::pair<int, int> region_pieces(Index nd, Index budget) {
  const Index chunks = (nd + 7) / 8, passes = chunks * (chunks + 1) / 2;
  int taylor = 2;
  while (taylor < 16 && 2 * taylor * passes <= budget) taylor *= 2;
  return {nd <= 128 ? std::max(4, taylor) : 1, taylor};
}

Matrix<interval64> region_box(const Matrix<double>& X, double r) {
  check_radius("region radius", r);
  const interval64 step = interval64::hull(-r, r);
  Matrix<interval64> box(X.rows(), X.cols());
  for (Index i = 0; i < X.rows(); ++i)
    for (Index a = 0; a < X.cols(); ++a) box(i, a) = interval64(X(i, a)) + step;
  return box;
}

std::optional<std::string> region_refusal(const AttentionLayer& layer, const AttentionOptions& options) {
  if (const auto why = structured_rows_refusal(layer, options))
    return "the region enclosure is built on the structured rows: " + *why;
  return std::nullopt;
}

RegionNormReport region_jacobian_norms(const AttentionLayer& layer, const AttentionOptions& options,
                                       const Matrix<double>& X, const Region& region,
                                       const RegionOptions& options_region) {
  layer.validate();
  check_radius(region.shape == RegionShape::ball ? "ball radius" : "box radius", region.radius);
  if (const auto why = region_refusal(layer, options)) throw InputError("region", *why);
  check_finite("tokens", X);
  const Index nd = X.rows() * X.cols();
  if (nd > options_region.dense_limit)
    throw InputError("region", "n*d = " + std::to_string(nd) + " exceeds the dense enclosure limit " +
                                   std::to_string(options_region.dense_limit));
  RegionNormReport out;
  out.region = region;
  if (options_region.closed_form) {
    out.closed_form_two = best_closed_form(layer, options, X, region, Norm::two);
    out.closed_form_inf = best_closed_form(layer, options, X, region, Norm::inf);
  }
  if (options_region.lower_witness) {
    // The lower ends hold whatever the upper end's outcome, so they come first.
    if (options_region.progress) options_region.progress("region: lower end (ascent in the region)", 0, 2);
    out.two_witness = region_witness(layer, options, X, region, Norm::two, options_region.witness);
    if (options_region.progress) options_region.progress("region: lower end (ascent in the region)", 1, 2);
    out.inf_witness = region_witness(layer, options, X, region, Norm::inf, options_region.witness);
    if (options_region.progress) options_region.progress("region: lower end (ascent in the region)", 2, 2);
  }
  const Matrix<interval64> box = region_box(X, region.radius);
  const Matrix<interval64> J =
      block_dense_jacobian_on_box<interval64>(layer, options, box, options_region.progress);

  bool finite = true;
  double scale = 0, width = 0;
  interval64 inf_norm(0.0);
  for (Index r = 0; r < J.rows(); ++r) {
    interval64 row(0.0);
    for (Index c = 0; c < J.cols(); ++c) {
      const interval64& e = J(r, c);
      finite = finite && std::isfinite(e.lower()) && std::isfinite(e.upper());
      scale = std::max(scale, magnitude(e));
      width = std::max(width, e.upper() - e.lower());
      row = row + interval64(magnitude(e));
    }
    if (row.upper() > inf_norm.upper()) inf_norm = row;
  }
  out.relative_width = scale > 0 ? width / scale : (width > 0 ? infinity : 0.0);
  out.two_upper = out.inf_upper = infinity;
  if (finite) {
    out.inf_upper = inf_norm.upper();
    // ‖mid‖₂ + ‖rad‖₂ in binary64 (core/spectral_norm.hpp), falling back to the MPFI certificate on the same
    // enclosure when the fast one only reaches its norm-product fallback.
    const CertifiedNormBound two = spectral_norm_bound(J);
    out.two_upper = two.upper;
    out.two_upper_method = two.method + " of the interval64 Jacobian enclosure over the box";
    out.two_upper_form = out.inf_upper_form = "first-order enclosure";
  }
  // The second-order form (second_order.hpp): the centre plus the radius times the second derivative.
  if (options_region.second_order && !detail::second_order_refusal(layer, options)) {
    // Every X' of the region has ‖X' − X‖_F ≤ ε (ball) or ≤ r·√(n·d) (box).
    const double l2_radius = region.shape == RegionShape::ball
                                 ? region.radius
                                 : (interval64(region.radius) * sqrt(interval64(double(nd)))).upper();
    detail::SecondOrderOptions so;
    so.progress = options_region.progress;
    so.spectral_limit = options_region.second_order_spectral_limit;
    if (options_region.pieces > 0) {
      so.radius_pieces = so.taylor_pieces = options_region.pieces;
      so.pieces_limit = std::numeric_limits<Index>::max();
    } else {
      std::tie(so.radius_pieces, so.taylor_pieces) = region_pieces(nd, options_region.pieces_budget);
    }
    const detail::SecondOrderBound b = detail::second_order_bound(layer, options, X, box, l2_radius, so);
    out.second_order = SecondOrderSummary{
        b.centre_two, b.centre_inf, b.slope_two,     b.slope_inf, b.two_upper,     b.inf_upper,    l2_radius,
        b.gap_two,    b.gap_rate,   b.gap_sigma_two, b.gap_c,     b.radius_pieces, b.taylor_pieces};
    if (b.finite && b.two_upper < out.two_upper) {
      out.two_upper = b.two_upper;
      out.two_upper_method = "second-order form: " + b.centre_two_method +
                             " at the centre + radius x certified second-derivative bound";
      out.two_upper_form = "second-order form";
    }
    if (b.finite && b.gap_two < out.two_upper) {
      out.two_upper = b.gap_two;
      out.two_upper_method =
          "spectral-gap form: 2 x 2 bound on J(X')^T J(X') in the top singular vector of "
          "J(X) and its complement (certified first-order rate, second-derivative bound; where n*d <= 128 "
          "each part also by Taylor's formula: first-order terms at X, remainder from a certified "
          "third-derivative bound over the ball)";
      out.two_upper_form = "spectral-gap form";
    }
    if (b.finite && b.inf_upper < out.inf_upper) {
      out.inf_upper = b.inf_upper;
      out.inf_upper_form = "second-order form";
    }
  }
  if (!std::isfinite(out.two_upper) || !std::isfinite(out.inf_upper)) {
    out.status = "not certified: enclosure too wide (an entry of the Jacobian enclosure is not finite)";
    return out;
  }

  std::string wider;
  if (out.closed_form_two && out.two_upper >= out.closed_form_two->upper)
    wider = "sup ||J||_2 <= " + upper_decimal(out.two_upper) + " is not below " + out.closed_form_two->id;
  if (out.closed_form_inf && out.inf_upper >= out.closed_form_inf->upper)
    wider += (wider.empty() ? "" : "; ") + ("sup ||J||_inf <= " + upper_decimal(out.inf_upper) +
                                            " is not below " + out.closed_form_inf->id);
  if (!wider.empty()) {
    out.status = "not certified: enclosure too wide (" + wider + ")";
    return out;
  }
  out.certified = true;
  out.status = "certified";
  return out;
}

RegionRadiusResult region_certified_radius(const AttentionLayer& layer, const AttentionOptions& options,
                                           const Matrix<double>& X, const MarginSetting& setting,
                                           double jacobian_norm_estimate,
                                           const RegionRadiusOptions& options_radius) {
  check_positive("margin", setting.margin);
  for (const auto& [name, value] : {std::pair{"readout_lipschitz", setting.readout_lipschitz},
                                    std::pair{"embedding_lipschitz", setting.embedding_lipschitz}})
    if (!(std::isfinite(value) && value > 0)) throw InputError(name, "must be finite and > 0");
  if (!(std::isfinite(jacobian_norm_estimate) && jacobian_norm_estimate > 0))
    throw InputError("jacobian norm estimate", "must be finite and > 0");
  if (!(options_radius.relative_tolerance > 0 && options_radius.relative_tolerance < 1))
    throw InputError("relative_tolerance", "must lie in (0, 1)");
  if (const auto why = region_refusal(layer, options)) throw InputError("region", *why);

  RegionOptions region_options = options_radius.region;
  region_options.closed_form = false;
  RegionRadiusResult out;
  out.first_failure = infinity;
  // ρ₀ = m / (√2 L_out L_in ‖J(X)‖₂): an estimate, only the end of the search interval.
  out.first_order_limit = setting.margin / (std::sqrt(2.0) * setting.readout_lipschitz *
                                            setting.embedding_lipschitz * jacobian_norm_estimate);
  // The certified check at input radius ρ: √2·L_out·ρ·sup_{B(X, L_in ρ)} ‖J‖₂ < m, outward-rounded.
  const auto safe = [&](double rho, double& sup) {
    ++out.steps;
    const double token_rho = (interval64(setting.embedding_lipschitz) * interval64(rho)).upper();
    const RegionNormReport r =
        region_jacobian_norms(layer, options, X, Region{RegionShape::ball, token_rho}, region_options);
    if (!std::isfinite(r.two_upper) || r.status.rfind("not certified", 0) == 0) return false;
    sup = r.two_upper;
    const interval64 change = sqrt(interval64(2.0)) * interval64(setting.readout_lipschitz) *
                              interval64(rho) * interval64(r.two_upper);
    return change.upper() < setting.margin;
  };
  double lo = 0, hi = out.first_order_limit;
  const double tolerance = options_radius.relative_tolerance * out.first_order_limit;
  while (hi - lo > tolerance && out.steps < options_radius.max_steps) {
    const double mid = lo + (hi - lo) / 2;
    if (!(mid > lo && mid < hi)) break;
    double sup = 0;
    if (safe(mid, sup)) {
      lo = mid;
      out.radius = mid;
      out.sup_two_at_radius = sup;
    } else {
      hi = mid;
      out.first_failure = mid;
    }
  }
  return out;
}

}  // namespace regatta::lip
