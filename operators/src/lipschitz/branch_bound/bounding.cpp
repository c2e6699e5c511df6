// The bound of one box of the branch and bound (branch_bound.hpp, docs/branch-and-bound.md): feasibility,
// the point of the domain a box stands for, and the certified upper and lower ends of the induced norm of
// the Jacobian over the box (interval enclosure, centred form, point evaluation).
#include <regatta/operators/lipschitz/branch_bound.hpp>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <numbers>
#include <set>
#include <utility>

#include <mpfi.h>
#include <mpfr.h>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/interval_norms.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/lipschitz/local.hpp>
#include <regatta/operators/lipschitz/region.hpp>
#include "box_bounds.hpp"
#include "centred_jacobian.hpp"

namespace regatta::lip {

namespace {

using Eigen::Index;
using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Prenorm;

double mignitude(const interval64& x) {
  if (x.lower() <= 0 && x.upper() >= 0) return 0;
  return std::min(std::fabs(x.lower()), std::fabs(x.upper()));
}

}  // namespace

/// Certified upper bound on the induced norm of every matrix in J (+inf for a non-finite entry).
double detail::norm_upper(const Matrix<interval64>& J, Norm norm) {
  return norm == Norm::two ? spectral_norm_upper(J) : inf_norm_upper(J);
}

/// Certified lower bound on the induced norm of every matrix in J (a point enclosure: of J itself).
double detail::norm_lower(const Matrix<interval64>& J, Norm norm) {
  for (Index r = 0; r < J.rows(); ++r)
    for (Index c = 0; c < J.cols(); ++c)
      if (!std::isfinite(J(r, c).lower()) || !std::isfinite(J(r, c).upper())) return 0;
  if (norm == Norm::two) return std::max(0.0, spectral_norm_upper_fast(J).lower);
  double best = 0;
  for (Index r = 0; r < J.rows(); ++r) {
    interval64 row(0.0);
    for (Index c = 0; c < J.cols(); ++c) row = row + interval64(mignitude(J(r, c)));
    best = std::max(best, row.lower());
  }
  return best;
}

namespace {

double norm_estimate(const Matrix<double>& J, Norm norm) {
  if (norm == Norm::two) return largest_singular_value(J);
  return J.cwiseAbs().rowwise().sum().maxCoeff();
}

/// cos (sine = false) or sin over the angles [a, b], enclosed: MPFI at 64 bits (which handles the extrema
/// inside the interval), endpoints rounded outward to binary64.
interval64 trig_range(double a, double b, bool sine) {
  mpfi_t x, y;
  mpfr_t end;
  mpfi_init2(x, 64);
  mpfi_init2(y, 64);
  mpfr_init2(end, 64);
  mpfi_interv_d(x, a, b);
  if (sine)
    mpfi_sin(y, x);
  else
    mpfi_cos(y, x);
  mpfi_get_left(end, y);
  const double lo = mpfr_get_d(end, MPFR_RNDD);
  mpfi_get_right(end, y);
  const double hi = mpfr_get_d(end, MPFR_RNDU);
  mpfr_clear(end);
  mpfi_clear(y);
  mpfi_clear(x);
  return interval64::hull(lo, hi);
}

/// The interval box of X (n×d) that `box` covers: the box itself, or in polar coordinates (d = 2) the
/// enclosure of r_i·(cos θ_i, sin θ_i) over it.
Matrix<interval64> token_box(const BnbBox& box, Index n, Index d, bool polar) {
  Matrix<interval64> X(n, d);
  for (Index i = 0; i < n; ++i) {
    if (polar) {
      const interval64 r = interval64::hull(box.lo[2 * i], box.hi[2 * i]);
      const double t_lo = box.lo[2 * i + 1], t_hi = box.hi[2 * i + 1];
      X(i, 0) = r * trig_range(t_lo, t_hi, false);
      X(i, 1) = r * trig_range(t_lo, t_hi, true);
    } else {
      for (Index a = 0; a < d; ++a) X(i, a) = interval64::hull(box.lo[i * d + a], box.hi[i * d + a]);
    }
  }
  return X;
}

}  // namespace

bool BranchBound::feasible(const BnbBox& box) const {
  const Index n = domain_.n, d = layer_.d;
  if (polar_) {
    // Every polar box lies in the disks (r ≤ R); the sign reduction and θ_1 = 0 are in the root box's
    // ranges (initial_state). Permutation: the angles sorted, from token 1 on (after θ_1 = 0 with rotation).
    if (symmetries_.permutation)
      for (Index i = symmetries_.rotation ? 1 : 0; i + 1 < n; ++i)
        if (box.lo[2 * i + 1] > box.hi[2 * (i + 1) + 1]) return false;
    return true;
  }
  if (domain_.shape == DomainShape::ball) {
    // Infeasible when the smallest norm of some token over the box certainly exceeds R.
    const interval64 R2 = interval64(domain_.radius) * interval64(domain_.radius);
    for (Index i = 0; i < n; ++i) {
      interval64 sq(0.0);
      for (Index a = 0; a < d; ++a) {
        const double lo = box.lo[i * d + a], hi = box.hi[i * d + a];
        const double m = (lo <= 0 && hi >= 0) ? 0.0 : std::min(std::fabs(lo), std::fabs(hi));
        sq = sq + interval64(m) * interval64(m);
      }
      if (sq.lower() > R2.upper()) return false;
    }
  }
  const auto first = [&](Index i) { return interval64::hull(box.lo[i * d], box.hi[i * d]); };
  if (symmetries_.permutation)
    for (Index i = 0; i + 1 < n; ++i)
      if (box.lo[i * d] > box.hi[(i + 1) * d]) return false;
  if (symmetries_.sign) {
    if (symmetries_.translation) {
      if ((first(1) - first(0)).lower() > (first(n - 1) - first(n - 2)).upper()) return false;
    } else if (symmetries_.permutation) {
      if ((first(0) + first(n - 1)).upper() < 0) return false;
    } else if (box.hi[0] < 0) {
      return false;
    }
  }
  return true;
}

std::vector<double> BranchBound::domain_point(const BnbBox& box) const {
  const Index n = domain_.n, d = layer_.d;
  std::vector<double> c(box.lo.size());
  for (std::size_t k = 0; k < c.size(); ++k) c[k] = box.lo[k] + (box.hi[k] - box.lo[k]) / 2;
  if (polar_)  // the centre in (r, θ), mapped to the plane; the scaling below catches a rounding outside
    for (Index i = 0; i < n; ++i) {
      const double r = c[std::size_t(2 * i)], t = c[std::size_t(2 * i + 1)];
      c[std::size_t(2 * i)] = r * std::cos(t);
      c[std::size_t(2 * i + 1)] = r * std::sin(t);
    }
  if (domain_.shape == DomainShape::ball) {
    // Scale each token into the ball; the result is checked with outward rounding (0 if that fails).
    const auto norm = [&](Index i) {
      interval64 sq(0.0);
      for (Index a = 0; a < d; ++a) sq = sq + interval64(c[i * d + a]) * interval64(c[i * d + a]);
      return sqrt(sq);
    };
    for (Index i = 0; i < n; ++i) {
      const interval64 r = norm(i);
      if (r.upper() <= domain_.radius) continue;
      const double s = domain_.radius / r.upper() * (1 - 0x1p-40);
      for (Index a = 0; a < d; ++a) c[i * d + a] *= s;
      if (!(norm(i).upper() <= domain_.radius))
        for (Index a = 0; a < d; ++a) c[i * d + a] = 0;
    }
  }
  return c;
}

BnbEvaluation BranchBound::evaluate(const BnbBox& box, double threshold) const {
  BnbEvaluation out;
  out.feasible = feasible(box);
  if (!out.feasible) return out;
  const Index n = domain_.n, d = layer_.d;
  const Matrix<interval64> X = token_box(box, n, d, polar_);
  // The lower end at a point of D: the centre (the box domain contains it), or its projection on the balls.
  out.point = domain_point(box);
  Matrix<double> C(n, d);  // the centre of the centred form: any point of X
  for (Index i = 0; i < n; ++i)
    for (Index a = 0; a < d; ++a) {
      const double lo = X(i, a).lower(), hi = X(i, a).upper();
      C(i, a) = polar_ ? std::clamp(out.point[std::size_t(i * d + a)], lo, hi) : lo + (hi - lo) / 2;
    }
  // J(c) enclosed by the library's structured rows at the exact point c.
  const Matrix<interval64> at_centre =
      block_dense_jacobian_on_box<interval64>(layer_, options_, C.cast<interval64>());
  // Over the box: the centred form where it applies (much tighter on small boxes), else the naive enclosure.
  const Matrix<interval64> J = centred_ ? detail::centred_enclosure(layer_, options_, X, C, at_centre)
                                        : block_dense_jacobian_on_box<interval64>(layer_, options_, X);
  out.upper = detail::norm_upper(J, bnb_.norm);
  Matrix<double> P(n, d);
  for (Index i = 0; i < n; ++i)
    for (Index a = 0; a < d; ++a) P(i, a) = out.point[i * d + a];
  const bool at_c = P == C;
  Matrix<double> mid(at_centre.rows(), at_centre.cols());
  if (at_c) {
    for (Index r = 0; r < mid.rows(); ++r)
      for (Index c = 0; c < mid.cols(); ++c)
        mid(r, c) = at_centre(r, c).lower() / 2 + at_centre(r, c).upper() / 2;
  } else {
    mid = block_dense_jacobian<double>(layer_, options_, P);
  }
  // Certified only where the double estimate could raise the current lower end.
  if (norm_estimate(mid, bnb_.norm) >= threshold)
    out.lower = detail::norm_lower(
        at_c ? at_centre : block_dense_jacobian_on_box<interval64>(layer_, options_, P.cast<interval64>()),
        bnb_.norm);
  return out;
}

}  // namespace regatta::lip
