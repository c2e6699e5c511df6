// Section 4 — local sensitivity (Havens, Araujo, Zhang, Hu 2024; docs/math/bounds.md#havens-local, claims
// havens.*).
//
// At one input X: δ(X, ε) against its naive variants, the gradient-norm comparator ε·L_GN and a PGD lower
// bound on Δ*(X, ε) = max_{‖E‖_F ≤ ε} ‖F(X + E) − F(X)‖_F, over ε; then certified radii of a linear read-out
// classifier g(X) = W_read·mean_i F(X)_i for small margins (Tsuzuku et al. 2018;
// docs/math/bounds.md#havens-certified-radius): the
// prediction cannot change within ε when m > √2·δ_g(X, ε), δ_g = ‖W_read‖₂·δ(X, ε)/√n (mean pooling).
// The ingredients come from lip::havens_estimates / havens_certified (operators/lipschitz/local.hpp); the
// attack from pgd.hpp.
#include <cmath>
#include <functional>

#include <regatta/core/precision.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/lipschitz/local.hpp>
#include <regatta/operators/lipschitz/pgd.hpp>

#include "common.hpp"
#include "sections.hpp"

namespace regatta::cli::report {

namespace {

using operators::AttentionLayer;
using operators::AttentionOptions;

/// Largest ε in [0, eps_max] with √2·L_out·bound(ε) < margin, by bisection (the bounds increase with ε); the
/// bound is a certified upper bound, so the radius is certified for the given margin.
double certified_radius(const std::function<double(double)>& bound, double read_lipschitz, double margin,
                        double eps_max) {
  auto ok = [&](double eps) {
    const double d = bound(eps);
    return std::isfinite(d) && std::sqrt(2.0) * read_lipschitz * d < margin;
  };
  if (ok(eps_max)) return eps_max;
  double lo = 0, hi = eps_max;
  for (int k = 0; k < 60; ++k) {
    const double mid = 0.5 * (lo + hi);
    (ok(mid) ? lo : hi) = mid;
  }
  return lo;
}

/// The sweep over ε and the radius table for one layer at one input. `prefix` names the tables and plots.
void study(const Context& ctx, Section& s, const AttentionLayer& layer, const AttentionOptions& options,
           const Matrix<double>& X, const std::string& prefix, const std::string& label) {
  const lip::HavensIngredients<double> est = lip::havens_estimates(layer, options, X);
  PrecisionGuard guard(128);
  const lip::HavensIngredients<interval> cert = lip::havens_certified(layer, options, X, est);
  const std::vector<double> eps = log_grid(1e-3, 1.0, ctx.size(7, 13));
  const int steps = ctx.size(40, 150), restarts = ctx.size(2, 6);
  const operators::Block<double> block(layer, options);
  const lip::SpectralEstimate jac = lip::jacobian_norm_2(block.linearize(X));
  // The four certified upper bounds on Δ*(X, ε), each a function of ε.
  const std::vector<std::pair<std::string, std::function<double(double)>>> bounds = {
      {"δ(X, ε)", [&](double e) { return upper_double(lip::havens_delta(cert, e)); }},
      {"naive δ, kernel level",
       [&](double e) { return upper_double(lip::havens_delta_naive_kernel(cert, e)); }},
      {"naive δ, weight level",
       [&](double e) { return upper_double(lip::havens_delta_naive_weights(cert, e)); }},
      {"ε·L_GN (gradient-norm comparator)",
       [&](double e) { return upper_double(interval(e) * lip::havens_gradnorm_lipschitz(cert, e)); }}};
  Table t(prefix + "delta", label + ": δ(X, ε) against its comparators");
  t.column("eps", "ε", Kind::input)
      .column("delta", "δ(X, ε)", Kind::certified_upper,
              "docs/math/bounds.md#havens-delta, interval ingredients (havens_certified)")
      .column("delta_est", "δ(X, ε)", Kind::estimate, "the same from double ingredients (havens_estimates)")
      .column("naive_kernel", "naive δ, kernel level", Kind::certified_upper,
              "docs/math/bounds.md#havens-naive")
      .column("naive_weights", "naive δ, weight level", Kind::certified_upper,
              "docs/math/bounds.md#havens-naive")
      .column("gradnorm", "ε·L_GN", Kind::certified_upper,
              "gradient-norm comparator (docs/math/bounds.md#havens-gradnorm)")
      .column("pgd_est", "PGD ‖F(X+E) − F(X)‖", Kind::estimate, "projected gradient ascent, double")
      .column("pgd", "PGD ‖F(X+E) − F(X)‖", Kind::certified_lower, "interval at the PGD perturbation")
      .column("linear", "ε‖DF(X)‖₂", Kind::estimate, "first-order prediction (Lanczos)");
  std::vector<Series> curves;
  for (const auto& b : bounds) curves.push_back({b.first, Kind::certified_upper, {}, {}, true, false});
  Series pgd{"PGD: max ‖F(X + E) − F(X)‖_F found", Kind::certified_lower, {}, {}, true, true};
  Series linear{"ε‖DF(X)‖₂ (first order)", Kind::estimate, {}, {}, true, false};
  const Matrix<double> direction = est.xi_estimate ? est.xi_estimate->witness : Matrix<double>();
  auto bar = ctx.progress("4 " + label + ": δ over ε", long(eps.size()));
  double worst_ratio = 0, last_gap = 0;
  for (std::size_t k = 0; k < eps.size(); ++k) {
    const double e = eps[k];
    std::vector<double> values;
    for (const auto& b : bounds) values.push_back(b.second(e));
    const lip::PgdResult p =
        lip::pgd_lower_bound(layer, options, X, e, direction, steps, restarts, ctx.seed(4, 4) + k);
    t.add_row({e, values[0], lip::havens_delta(est, e), values[1], values[2], values[3], p.estimate,
               p.certified_lower, e * jac.estimate});
    for (std::size_t v = 0; v < values.size(); ++v) {
      curves[v].x.push_back(e);
      curves[v].y.push_back(values[v]);
    }
    pgd.x.push_back(e);
    pgd.y.push_back(p.certified_lower);
    linear.x.push_back(e);
    linear.y.push_back(e * jac.estimate);
    worst_ratio = std::max(worst_ratio, p.estimate / values[0]);
    last_gap = values[0] / p.estimate;
    bar->advance();
  }
  bar->finish();
  t.caption =
      "Certified upper columns bound Δ*(X, ε) = max over ‖E‖_F ≤ ε of ‖F(X + E) − F(X)‖_F from above "
      "(lip::havens_certified: every ingredient enclosed in interval arithmetic, certificate: " +
      cert.certificate +
      "); the PGD column bounds it from below (certified). The true Δ*(X, ε) lies "
      "between the PGD column and the δ column.";
  Figure fig(prefix + "delta", label + ": output deviation bounds over the perturbation radius ε",
             "perturbation radius ε (Frobenius norm of E)", "‖F(X + E) − F(X)‖_F (units of the tokens)");
  fig.logx = fig.logy = true;
  for (const Series& c : curves) fig.add(c);
  fig.add(pgd).add(linear);
  fig.caption =
      "Certified upper bounds on the largest output change within distance ε of X (solid lines) against "
      "what an attack achieves (PGD, solid with markers: a certified lower bound on the true largest "
      "change). The fine δ is the lowest upper curve; the naive variants and the gradient-norm comparator "
      "are looser. For small ε the attack follows the first-order line ε‖DF(X)‖₂ (dashed).";
  s.add(std::move(fig), std::move(t));
  s.findings.push_back(
      label + ": largest PGD/δ " + said(worst_ratio, Kind::estimate, 3) +
      " (at most 1, as the bound requires); δ/PGD at ε = 1: " + said(last_gap, Kind::estimate, 3) + ".");

  // Certified radii of a 3-class read-out g(X) = W_read·mean_i F(X)_i for margins from 10⁻³ to 1.
  const Vector<double> g = standard_normal(3 * X.cols(), ctx.seed(4, 5));
  const Matrix<double> W_read = Eigen::Map<const Matrix<double>>(g.data(), 3, X.cols());
  const double read_norm = spectral_norm_upper_certified<double>(W_read).upper;
  // ‖mean_i Δ_i‖ ≤ ‖Δ‖_F/√n, so L_out = ‖W_read‖₂/√n, rounded up.
  const double read_lipschitz = upper_double(interval(read_norm) / sqrt(interval(double(X.rows()))));
  const std::vector<double> margins = log_grid(1e-3, 1.0, ctx.size(7, 13));
  Table r(prefix + "radius", label + ": certified radius of a linear read-out for a given margin");
  r.column("margin", "margin m", Kind::input)
      .column("radius_delta", "radius from δ", Kind::certified_lower, "lip::havens_certified_radius")
      .column("radius_naive_kernel", "radius from naive δ (kernel)", Kind::certified_lower)
      .column("radius_naive_weights", "radius from naive δ (weights)", Kind::certified_lower)
      .column("radius_gradnorm", "radius from ε·L_GN", Kind::certified_lower);
  std::vector<Series> radii;
  for (const auto& b : bounds)
    radii.push_back({"radius from " + b.first, Kind::certified_lower, {}, {}, true, true});
  for (double m : margins) {
    lip::MarginSetting setting;
    setting.margin = m;
    setting.readout_lipschitz = read_lipschitz;
    std::vector<Cell> row = {m};
    for (std::size_t v = 0; v < bounds.size(); ++v) {
      const double rad = v == 0 ? lip::havens_certified_radius(cert, setting).radius
                                : certified_radius(bounds[v].second, read_lipschitz, m, 100.0);
      row.push_back(rad);
      radii[v].x.push_back(m);
      radii[v].y.push_back(rad);
    }
    r.add_row(row);
  }
  r.caption = "Read-out W_read: 3×d standard normal, seed " + std::to_string(ctx.seed(4, 5)) +
              ", ‖W_read‖₂ ≤ " + format_number(read_norm, Kind::certified_upper) +
              " (certified); mean pooling over tokens. For each margin m (exact input), no input within the "
              "certified radius (Frobenius distance from X) can change the predicted class "
              "(docs/math/bounds.md#havens-certified-radius).";
  Figure rf(prefix + "radius", label + ": certified robustness radius against the classification margin",
            "margin m of the prediction (logit units)", "certified radius ε (Frobenius norm)");
  rf.logx = rf.logy = true;
  for (const Series& c : radii) rf.add(c);
  rf.caption =
      "For small margins the radius grows linearly in m, with slope set by the first-order coefficient of "
      "each bound; the fine δ certifies the largest radius, the gradient-norm comparator the smallest.";
  s.add(std::move(rf), std::move(r));
}

}  // namespace

Section section_local(const Context& ctx) {
  Section s;
  s.title = "Local sensitivity (Havens et al. 2024)";
  s.text.push_back(
      "Dot-product attention is not globally Lipschitz, but at a given input its output moves by at most "
      "δ(X, ε) "
      "when the input moves by ε in Frobenius norm. δ is the bound of docs/math/bounds.md#havens-delta — a "
      "reconstruction of "
      "Havens, "
      "Araujo, Zhang and Hu (ICML 2024) derived in the regatta reference, not a quotation of the paper. It "
      "is "
      "compared with naive variants (cruder norm inequalities, docs/math/bounds.md#havens-naive), a "
      "gradient-norm comparator of the "
      "SpecFormer "
      "type (docs/math/bounds.md#havens-gradnorm) and an attack (PGD) that shows how much of the bound is "
      "really reached.");
  operators::RandomLayerSpec spec;
  spec.d = 4;
  spec.heads = 2;
  spec.scale = 1.5;
  spec.seed = ctx.seed(4, 1);
  const AttentionLayer layer = operators::random_layer(spec);
  AttentionOptions options;
  options.residual = true;
  const Eigen::Index n = 6;
  const Vector<double> g = standard_normal(n * spec.d, ctx.seed(4, 2));
  const Matrix<double> X = Eigen::Map<const Matrix<double>>(g.data(), n, spec.d);
  s.configuration.push_back(
      "layer: random dot-product, d = 4, H = 2, d_h = 2, scale 1.5, seed " + std::to_string(spec.seed) +
      ", residual (W_skip = I); X: 6×4 standard normal, seed " + std::to_string(ctx.seed(4, 2)));
  s.configuration.push_back("PGD: " + std::to_string(ctx.size(40, 150)) +
                            " steps from ± the top singular vector of the "
                            "ξ matrix and " +
                            std::to_string(ctx.size(2, 6)) + " random directions (seed " +
                            std::to_string(ctx.seed(4, 4)) +
                            " + k); ingredients certified with MPFI at 128 bits");
  study(ctx, s, layer, options, X, "local_", "built-in layer");
  if (const ResolvedLayer* user = ctx.user()) {
    const Eigen::Index nu = 4;
    if (auto why = lip::havens_refusal(user->layer, user->options)) {
      s.omissions.push_back("4u: the user layer is outside this section: " + *why);
    } else {
      const Vector<double> gu = standard_normal(nu * user->layer.d, ctx.seed(4, 6));
      const Matrix<double> Xu = Eigen::Map<const Matrix<double>>(gu.data(), nu, user->layer.d);
      s.configuration.push_back("4u: user layer (" + describe(*user) + "), X: 4×d standard normal, seed " +
                                std::to_string(ctx.seed(4, 6)));
      study(ctx, s, user->layer, user->options, Xu, "user_local_", "user layer");
    }
  }
  return s;
}

}  // namespace regatta::cli::report
