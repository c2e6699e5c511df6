// The certified lower end of the supremum of ‖J‖ over a region: projected ascent inside the region, then an
// interval re-evaluation at the point found (region.hpp, region_witness).
#include <regatta/operators/lipschitz/region.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include <regatta/core/checks.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/operators/lipschitz/bracket.hpp>
#include <regatta/operators/lipschitz/structured_rows.hpp>

#include "../search/jacobian_probe.hpp"
#include "../search/search_support.hpp"

namespace regatta::lip {

namespace {

using Eigen::Index;
using operators::AttentionLayer;
using operators::AttentionOptions;

/// Projected points land at radius·(1 − 2^-30), far above the rounding of X + δ relative to the radius
/// unless the radius is below about 1e-7 of the entries; a point the interval check still rejects is pulled
/// further in (into_region).
constexpr double projection_margin = 1.0 - 0x1p-30;

/// CERTIFIED upper bound on ‖X' − X‖_F (ball) or max |X'_ia − X_ia| (box): interval64, outward-rounded.
double certified_distance(const Matrix<double>& moved, const Matrix<double>& X, RegionShape shape) {
  interval64 squares(0.0);
  double widest = 0;
  for (Index k = 0; k < X.size(); ++k) {
    const interval64 step = interval64(moved.data()[k]) - interval64(X.data()[k]);
    if (shape == RegionShape::ball)
      squares = squares + square(step);
    else
      widest = std::max(widest, magnitude(step));
  }
  return shape == RegionShape::ball ? sqrt(squares).upper() : widest;
}

/// X + δ moved into the region (δ scaled onto the ball of radius·margin, or clamped to the box), pulled in
/// further while interval arithmetic cannot certify that it lies in the region. Empty when δ is not finite
/// or no pull brings it in.
Matrix<double> into_region(const Matrix<double>& X, Matrix<double> delta, const Region& region) {
  if (!delta.allFinite()) return {};
  const double limit = region.radius * projection_margin;
  if (region.shape == RegionShape::ball) {
    const double norm = delta.norm();
    if (norm > limit) delta *= limit / norm;
  } else {
    delta = delta.cwiseMax(-limit).cwiseMin(limit);
  }
  for (const double pull : {1.0, 1 - 0x1p-20, 1 - 0x1p-10, 0.99, 0.9, 0.5, 0.0}) {
    delta *= pull;
    Matrix<double> moved = X + delta;
    if (moved.allFinite() && certified_distance(moved, X, region.shape) <= region.radius) return moved;
  }
  return {};
}

class RegionAscent {
 public:
  RegionAscent(const AttentionLayer& layer, const AttentionOptions& options, const Matrix<double>& X,
               const Region& region, Norm norm, const RegionWitnessOptions& settings)
      : layer_(layer),
        options_(options),
        block_(layer, options),
        X_(X),
        region_(region),
        norm_(norm),
        settings_(settings) {
    ell_ = detail::length_scale(layer, options, std::nullopt);
    structured_ = !structured_rows_refusal(layer, options).has_value();
  }

  RegionWitness run() {
    Point best;
    std::string best_origin;
    const auto consider = [&](Point start, const std::string& origin) {
      if (!start.valid()) return;
      Point p = ascend(std::move(start));
      if (!best.valid() || p.probe.value > best.probe.value) {
        best = std::move(p);
        best_origin = origin;
      }
    };
    const Point centre = probe(X_, {});
    consider(centre, "centre");
    // Against the gradient too: at larger radii the other side of the boundary can be higher (a softmax row
    // that the first-order step saturates further, the other step brings to a tie).
    if (centre.valid()) consider(opposite_start(centre), "centre, against the gradient");
    for (int k = 0; k < settings_.random_starts; ++k)
      consider(random_start(k), "random " + std::to_string(k));
    RegionWitness out;
    if (!best.valid()) {
      out.reason = "no point of the region has a finite Jacobian value in double";
      return out;
    }
    polish(best);
    out.estimate = best.probe.value;
    out.input = best.X;
    out.origin = best_origin;
    out.distance = certified_distance(best.X, X_, region_.shape);
    if (!(out.distance <= region_.radius)) {
      out.reason = "the witness is not certainly inside the region";
      return out;
    }
    JacobianWitness witness;
    witness.input = best.X;
    witness.direction = best.probe.direction;
    witness.row = best.probe.row;
    witness.value = best.probe.value;
    witness.origin = best_origin;
    const WitnessCertificate c =
        certify_witness(layer_, options_, witness, norm_, std::nullopt, settings_.precision_bits);
    out.lower = c.lower;
    out.reason = c.reason;
    return out;
  }

 private:
  static constexpr int cold_power_iterations = 30;  // from a random direction
  static constexpr int warm_power_iterations = 8;   // from the direction of the previous point
  static constexpr int polish_power_iterations = 1000;
  static constexpr double probe_tolerance = 1e-9, polish_tolerance = 1e-13;

  struct Point {
    Matrix<double> X;
    detail::Probe probe;
    bool valid() const { return X.size() != 0; }
  };

  /// The value at X' (in the region): ‖J(X')v‖ from a power iteration warm-started at `warm` (2-norm), or
  /// the largest absolute row sum (∞-norm). Invalid when a value is not finite.
  Point probe(Matrix<double> moved, const Matrix<double>& warm) {
    Point p;
    try {
      const operators::Linearization<double> lin = block_.linearize(moved);
      if (norm_ == Norm::two) {
        const bool cold = warm.size() == 0;
        p.probe = detail::power_probe(lin, cold ? random_direction() : warm,
                                      cold ? cold_power_iterations : warm_power_iterations, probe_tolerance);
      } else {
        p.probe = largest_row(moved, lin);
      }
    } catch (const InputError&) {  // non-finite intermediate values: a rejected point
      return Point{};
    }
    if (!std::isfinite(p.probe.value)) return Point{};
    p.X = std::move(moved);
    return p;
  }

  /// Every row's absolute sum: from the structured rows (O(H n² d²)) and one VJP per row of the largest
  /// row's token, so that the value and its signs come from the same computation as the ascent's; n·d VJPs
  /// where the structured rows do not apply.
  detail::Probe largest_row(const Matrix<double>& moved, const operators::Linearization<double>& lin) const {
    if (!structured_) return detail::all_rows_probe(lin);
    const Index row = block_jacobian_norm_inf<double>(layer_, options_, moved).index;
    const std::vector<Index> token{row / X_.cols()};
    return detail::row_probe(lin, token);
  }

  Matrix<double> random_direction() {
    const Vector<double> g = standard_normal(X_.size(), detail::mix_seed(settings_.seed, 9000 + draws_++));
    return Eigen::Map<const Matrix<double>>(g.data(), X_.rows(), X_.cols());
  }

  Matrix<double> gradient(const Point& p) const { return detail::probe_gradient(block_, p.X, p.probe, ell_); }

  /// The boundary point against the gradient at the centre, or an invalid point where it has no direction.
  Point opposite_start(const Point& centre) {
    Matrix<double> G;
    try {
      G = gradient(centre);
    } catch (const InputError&) {
      return Point{};
    }
    const double gnorm = G.size() ? G.norm() : 0.0;
    if (!(gnorm > 0) || !std::isfinite(gnorm)) return Point{};
    Matrix<double> delta = region_.shape == RegionShape::ball
                               ? Matrix<double>((-region_.radius / gnorm) * G)
                               : Matrix<double>(G.unaryExpr([&](double x) {
                                   return x > 0 ? -region_.radius : (x < 0 ? region_.radius : 0.0);
                                 }));
    Matrix<double> moved = into_region(X_, std::move(delta), region_);
    if (moved.size() == 0) return Point{};
    return probe(std::move(moved), norm_ == Norm::two ? centre.probe.direction : Matrix<double>());
  }

  /// A seeded point of the boundary: a Gaussian direction scaled to the ball's radius, or random signs at
  /// the box's half-width.
  Point random_start(int k) {
    const Vector<double> g =
        standard_normal(X_.size(), detail::mix_seed(settings_.seed, 5000 + static_cast<std::uint64_t>(k)));
    Matrix<double> delta = Eigen::Map<const Matrix<double>>(g.data(), X_.rows(), X_.cols());
    if (region_.shape == RegionShape::ball) {
      delta *= region_.radius / delta.norm();
    } else {
      delta = delta.unaryExpr([&](double x) { return x < 0 ? -region_.radius : region_.radius; });
    }
    Matrix<double> moved = into_region(X_, std::move(delta), region_);
    if (moved.size() == 0) return Point{};
    return probe(std::move(moved), {});
  }

  /// Steps along the gradient (ball: its unit direction; box: its signs, the steepest direction in the
  /// box's ℓ∞ geometry), projected onto the region; the first step has the region's full size, so from the
  /// centre it lands on the first-order maximiser (detail::adaptive_ascent: ×1.5 after an accepted step, ÷3
  /// after a rejected one).
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
      if (region_.shape == RegionShape::ball)
        G /= gnorm;
      else
        G = G.unaryExpr([](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); });
      return true;
    };
    const auto climb = [&](double step) {
      Matrix<double> moved = into_region(X_, current.X - X_ + step * G, region_);
      if (moved.size() == 0) return false;
      Point trial = probe(std::move(moved), norm_ == Norm::two ? current.probe.direction : Matrix<double>());
      if (!trial.valid() || !(trial.probe.value > current.probe.value)) return false;
      current = std::move(trial);
      return true;
    };
    // Ball: ‖δ‖_F; box: every |δ_ia|. The first step has the region's full size.
    detail::adaptive_ascent(region_.radius, 1e-6 * region_.radius, settings_.ascent_steps, direction, climb);
    return current;
  }

  /// A converged power iteration at the best point (2-norm); the ∞-norm probe already examined every row.
  void polish(Point& p) const {
    if (norm_ != Norm::two) return;
    try {
      const detail::Probe q = detail::power_probe(block_.linearize(p.X), p.probe.direction,
                                                  polish_power_iterations, polish_tolerance);
      if (q.value >= p.probe.value) p.probe = q;
    } catch (const InputError&) {
    }
  }

  const AttentionLayer& layer_;
  const AttentionOptions& options_;
  operators::Block<double> block_;
  const Matrix<double>& X_;
  Region region_;
  Norm norm_;
  RegionWitnessOptions settings_;
  double ell_ = 1;
  bool structured_ = false;
  std::uint64_t draws_ = 0;
};

}  // namespace

RegionWitness region_witness(const AttentionLayer& layer, const AttentionOptions& options,
                             const Matrix<double>& X, const Region& region, Norm norm,
                             const RegionWitnessOptions& options_witness) {
  layer.validate();
  if (!(std::isfinite(region.radius) && region.radius > 0))
    throw InputError(region.shape == RegionShape::ball ? "ball radius" : "box radius",
                     "must be finite and > 0");
  check_finite("tokens", X);
  if (X.size() == 0) throw InputError("tokens", "must not be empty");
  if (options_witness.random_starts < 0 || options_witness.ascent_steps < 0)
    throw InputError("region witness", "random_starts and ascent_steps must be >= 0");
  return RegionAscent(layer, options, X, region, norm, options_witness).run();
}

}  // namespace regatta::lip
