// The second-order bound on the sup of ‖J‖ over a region (see second_order.hpp).
#include "second_order.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <regatta/core/error.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/lipschitz/structured_rows.hpp>

#include "closed_form_jacobian.hpp"

namespace regatta::lip::detail {

namespace {

using Eigen::Index;
using operators::AttentionLayer;
using operators::AttentionOptions;

/// Input coordinates differentiated per pass of the closed form (the value part is recomputed per pass).
constexpr int chunk = 8;
using Tangent = Dual<chunk>;

constexpr double infinity = std::numeric_limits<double>::infinity();

double magnitude(const interval64& x) { return std::max(std::fabs(x.lower()), std::fabs(x.upper())); }

/// Upper end of √x for x ≥ 0 given by its upper end.
double sqrt_up(double x) { return sqrt(interval64(x)).upper(); }

/// Certified upper bound on ‖M'‖₂ for every M' in the interval matrix M (binary64 Cholesky certificate,
/// the MPFI one when the fast one falls back to a norm product).
CertifiedNormBound two_norm_upper(const Matrix<interval64>& M) {
  CertifiedNormBound two = spectral_norm_upper_fast(M);
  if (two.method != "binary64-cholesky") {
    const CertifiedNormBound slow = spectral_norm_upper_certified<interval64>(M);
    if (slow.upper < two.upper) two = slow;
  }
  return two;
}

/// Tightens the intermediate values of the closed form over the region (‖X' − X‖_F ≤ ρ): for an
/// intermediate v (a smooth function of the input), v(X') − v(X) = ∇v(ξ)·δ with ξ on the segment [X, X'], so
///   v(X') ∈ v(X) + [−1, 1]·ρ·G_v,   G_v = (Σ_k sup_B |∂_k v|²)^{1/2} ≥ sup_B ‖∇v‖₂
/// (the ℓ₂ geometry of the ball, where the box's interval evaluation pays ‖∇v‖₁ and every dependency).
/// Passes number the intermediates in the order closed_form forms them:
///   centre    records the interval64 enclosure of v(X) (a pass at the point X);
///   gradient  accumulates Σ_k mag(∂_k v)² over the chunk passes (after applying the current bounds);
///   apply     intersects each value with its bound (valid over the region, which is all the mean-value
///             argument needs: the points ξ of second_order.hpp lie on segments inside it).
struct BallTightening {
  enum class Mode { centre, gradient, apply } mode = Mode::centre;
  double rho = 0;
  std::size_t next = 0;
  std::vector<interval64> at_centre, bound;
  std::vector<interval64> gradient2;  // Σ_k mag(∂_k v)², accumulated in interval64 (upper ends used)

  void begin_pass() { next = 0; }

  void operator()(Tangent& v) {
    const std::size_t i = next++;
    if (mode == Mode::centre) {
      at_centre.push_back(v.v);
      return;
    }
    if (i < bound.size()) {
      const double lo = std::max(v.v.lower(), bound[i].lower()), hi = std::min(v.v.upper(), bound[i].upper());
      if (lo <= hi) v.v = interval64::hull(lo, hi);  // disjoint only by a rounding accident: keep v
    }
    if (mode == Mode::gradient) {
      if (gradient2.size() <= i) gradient2.resize(i + 1, interval64(0.0));
      interval64 sum = gradient2[i];
      for (const interval64& g : v.g) {
        const interval64 m(magnitude(g));
        sum = sum + m * m;
      }
      gradient2[i] = sum;
    }
  }

  /// bound = (v(X) + [−ρG, ρG]) ∩ bound, after a gradient sweep.
  void update_bounds() {
    const std::size_t count = std::min(at_centre.size(), gradient2.size());
    bound.resize(count, interval64::hull(-infinity, infinity));
    for (std::size_t i = 0; i < count; ++i) {
      const double reach = (interval64(rho) * sqrt(interval64(gradient2[i].upper()))).upper();
      const interval64 ball = at_centre[i] + interval64::hull(-reach, reach);
      const double lo = std::max(ball.lower(), bound[i].lower()),
                   hi = std::min(ball.upper(), bound[i].upper());
      if (lo <= hi) bound[i] = interval64::hull(lo, hi);
    }
  }
};

/// The box's intervals with the unit partials of coordinates [k0, k0 + chunk).
Grid<Tangent> seeded(const Matrix<interval64>& box, Index k0) {
  const Index n = box.rows(), d = box.cols();
  Grid<Tangent> Xb(n, d);
  for (Index i = 0; i < n; ++i)
    for (Index a = 0; a < d; ++a) {
      Xb(i, a) = Tangent(box(i, a));
      const Index k = i * d + a;
      if (k >= k0 && k < k0 + chunk) Xb(i, a).g[std::size_t(k - k0)] = interval64(1.0);
    }
  return Xb;
}

}  // namespace

std::optional<std::string> second_order_refusal(const AttentionLayer& layer,
                                                const AttentionOptions& options) {
  if (options.sinkhorn_iterations != 1) return "the second-order bound is for softmax attention";
  if (layer.rotary) return "the second-order bound does not cover rotary position embeddings";
  if (layer.kind == operators::AttentionKind::l2 && !layer.tied() && !options.allow_untied_l2)
    return "untied L2 attention needs allow_untied_l2";
  return std::nullopt;
}

Matrix<double> closed_form_block_jacobian(const AttentionLayer& layer, const AttentionOptions& options,
                                          const Matrix<double>& X) {
  if (const auto why = second_order_refusal(layer, options)) throw InputError("closed-form Jacobian", *why);
  return closed_form_at(layer, options, X);
}

SecondOrderBound second_order_bound(const AttentionLayer& layer, const AttentionOptions& options,
                                    const Matrix<double>& X, const Matrix<interval64>& box, double l2_radius,
                                    const SecondOrderOptions& so_options) {
  if (const auto why = second_order_refusal(layer, options)) throw InputError("second-order bound", *why);
  const Index n = X.rows(), d = X.cols(), nd = n * d;
  SecondOrderBound out;
  out.slope_flat = infinity;

  // The centre: the structured rows in interval64 at the point X (an enclosure of J(X)).
  const Matrix<interval64> Jc =
      block_dense_jacobian_on_box<interval64>(layer, options, Matrix<interval64>(X.cast<interval64>()));
  const CertifiedNormBound centre = two_norm_upper(Jc);
  out.centre_two = centre.upper;
  out.centre_two_method = centre.method;
  for (Index r = 0; r < nd; ++r) {
    interval64 row(0.0);
    for (Index c = 0; c < nd; ++c) row = row + interval64(magnitude(Jc(r, c)));
    out.centre_inf = std::max(out.centre_inf, row.upper());
  }

  // Second derivative over the box, `chunk` input coordinates per pass.
  std::vector<interval64> row_acc(std::size_t(nd), interval64(0.0)),
      col_acc(std::size_t(nd), interval64(0.0));
  interval64 sum_u2(0.0);
  bool finite = true;
  Matrix<interval64> Tk(nd, nd);
  // The flattening M = [T_1 ⋯ T_K] (n·d × (n·d)²) when it is small enough to store.
  const bool flatten = nd <= so_options.flatten_limit;
  Matrix<interval64> M(flatten ? nd : 0, flatten ? nd * nd : 0);
  std::vector<interval64> col(static_cast<std::size_t>(nd), interval64(0.0));
  // Tighten the intermediates over the region first (BallTightening): a pass at the centre, then sweeps of
  // gradient bounds.
  BallTightening tight;
  tight.rho = l2_radius;
  if (so_options.tightening_sweeps > 0) {
    Grid<Tangent> Xc(n, d);
    for (Index i = 0; i < n; ++i)
      for (Index a = 0; a < d; ++a) Xc(i, a) = Tangent(interval64(X(i, a)));
    closed_form<Tangent>(layer, options, Xc, tight, false);
    tight.mode = BallTightening::Mode::gradient;
    for (int sweep = 0; sweep < so_options.tightening_sweeps; ++sweep) {
      tight.gradient2.clear();
      for (Index k0 = 0; k0 < nd; k0 += chunk) {
        if (so_options.progress) so_options.progress("tightening the intermediates over the ball", k0, nd);
        tight.begin_pass();
        closed_form<Tangent>(layer, options, seeded(box, k0), tight, false);
      }
      tight.update_bounds();
    }
  }
  tight.mode = BallTightening::Mode::apply;
  const std::string stage = "second derivative over the region (interval64)";
  for (Index k0 = 0; k0 < nd && finite; k0 += chunk) {
    if (so_options.progress) so_options.progress(stage, k0, nd);
    tight.begin_pass();
    const Grid<Tangent> J = closed_form<Tangent>(layer, options, seeded(box, k0), tight);
    for (Index t = 0; t < chunk && k0 + t < nd; ++t) {
      // [T_k]: entry (r, c) encloses ∂J_rc/∂x_k over the box, k = k0 + t.
      interval64 frob2(0.0), norm_inf(0.0), norm_one(0.0);
      std::fill(col.begin(), col.end(), interval64(0.0));
      for (Index r = 0; r < nd; ++r) {
        interval64 row(0.0);
        for (Index c = 0; c < nd; ++c) {
          const interval64& e = J(r, c).g[std::size_t(t)];
          Tk(r, c) = e;
          if (flatten) M(r, (k0 + t) * nd + c) = e;
          const interval64 m(magnitude(e));
          finite = finite && std::isfinite(m.upper());
          row = row + m;
          col[std::size_t(c)] = col[std::size_t(c)] + m;
          frob2 = frob2 + m * m;
        }
        row_acc[std::size_t(r)] = row_acc[std::size_t(r)] + interval64(row.upper()) * interval64(row.upper());
        norm_inf = interval64(std::max(norm_inf.upper(), row.upper()));
      }
      if (!finite) break;
      for (Index c = 0; c < nd; ++c) {
        const double g = col[std::size_t(c)].upper();
        col_acc[std::size_t(c)] = col_acc[std::size_t(c)] + interval64(g) * interval64(g);
        norm_one = interval64(std::max(norm_one.upper(), g));
      }
      double u2 = std::min(frob2.upper(), (norm_one * norm_inf).upper());
      if (nd <= so_options.spectral_limit) {
        const double u = two_norm_upper(Tk).upper;
        u2 = std::min(u2, (interval64(u) * interval64(u)).upper());
      }
      sum_u2 = sum_u2 + interval64(u2);
    }
  }
  if (so_options.progress) so_options.progress(stage, nd, nd);
  if (!finite) {
    out.slope_two = out.slope_inf = infinity;
    return out;
  }
  double max_row = 0, max_col = 0;
  for (Index r = 0; r < nd; ++r) {
    max_row = std::max(max_row, row_acc[std::size_t(r)].upper());
    max_col = std::max(max_col, col_acc[std::size_t(r)].upper());
  }
  out.slope_inf = sqrt_up(max_row);
  // ‖Σ_k u_k T'_k‖₂ = ‖M'(u ⊗ I)‖₂ ≤ ‖M'‖₂ for ‖u‖ ≤ 1 and every M' in [M] (‖u ⊗ I‖₂ = ‖u‖).
  if (flatten) out.slope_flat = two_norm_upper(M).upper;
  out.slope_two = std::min({out.slope_flat, sqrt_up(sum_u2.upper()),
                            sqrt_up(sqrt_up((interval64(max_row) * interval64(max_col)).upper()))});
  out.two_upper = (interval64(out.centre_two) + interval64(l2_radius) * interval64(out.slope_two)).upper();
  out.inf_upper = (interval64(out.centre_inf) + interval64(l2_radius) * interval64(out.slope_inf)).upper();
  out.finite = std::isfinite(out.two_upper) && std::isfinite(out.inf_upper);
  return out;
}

}  // namespace regatta::lip::detail
