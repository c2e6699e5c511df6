#pragma once
// Internal: the measure-level machinery of the mean-field claims (docs/math/bounds.md#mean-field;
// mean_field_context.cpp, mean_field_self.cpp).
//
// A measure is μ = Σ_j (a_j / Σa) δ_{y_j}: raw weights a_j are doubles of the point (≥ 0, summing to 1 within
// normalisation_tolerance), atoms are in S. The division happens in S, so μ is the same mathematical measure
// at every precision, and it is the measure that measures::certify_wasserstein normalises (a_i / Σa).
// Weights enter the softmax as log-weights (log a_j; the normalisation cancels), so a weight e^−40 next to
// scores of size 30 needs no special path in any scalar type.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include <regatta/core/checks.hpp>
#include <regatta/measures/wasserstein.hpp>
#include "common.hpp"
#include "layout.hpp"

namespace regatta::proofs::claims::mf {

template <class S>
struct Measure {
  Matrix<S> atoms;     ///< m×d, row j is the atom y_j
  Vector<double> raw;  ///< a_j ≥ 0; the weight of y_j is a_j / Σa
  long size() const { return atoms.rows(); }
  long dim() const { return atoms.cols(); }
};

template <class S>
Measure<S> lift_measure(const Matrix<double>& atoms, const Vector<double>& raw) {
  return Measure<S>{num::lift_matrix<S>(atoms), raw};
}

/// Raw weights |r_j| / Σ|r| in double (all zero or not finite: the first atom gets all the mass); they sum
/// to 1 within normalisation_tolerance. For samplers and repair.
inline void normalise_weights(std::vector<double>& x, std::size_t from, std::size_t count) {
  double total = 0;
  for (std::size_t j = from; j < from + count; ++j) total += std::abs(x[j]);
  for (std::size_t j = from; j < from + count; ++j)
    x[j] = total > 0 && std::isfinite(total) ? std::abs(x[j]) / total : (j == from ? 1.0 : 0.0);
}

/// Throws InputError("point", …) unless the raw weights are finite, ≥ 0, with a positive entry, and sum to
/// 1 within normalisation_tolerance (what DiscreteMeasure<double> accepts).
inline void check_raw(const Vector<double>& a) {
  double total = 0;
  for (Eigen::Index j = 0; j < a.size(); ++j) {
    if (!std::isfinite(a(j)) || a(j) < 0) throw InputError("point", "weights must be finite and >= 0");
    total += a(j);
  }
  if (!(std::abs(total - 1) <= normalisation_tolerance(static_cast<std::size_t>(a.size()))))
    throw InputError("point", "weights do not sum to 1");
}

/// a_j / Σa in S.
template <class S>
std::vector<S> weights(const Vector<double>& raw) {
  S total(0);
  for (Eigen::Index j = 0; j < raw.size(); ++j) total += lift<S>(raw(j));
  std::vector<S> w(static_cast<std::size_t>(raw.size()));
  for (Eigen::Index j = 0; j < raw.size(); ++j) w[j] = lift<S>(raw(j)) / total;
  return w;
}

template <class S>
Vector<S> row(const Matrix<S>& m, long i) {
  return m.row(i).transpose();
}

/// Σ_j w_j y_j.
template <class S>
Vector<S> mean(const Measure<S>& mu) {
  const std::vector<S> w = weights<S>(mu.raw);
  Vector<S> m = Vector<S>::Zero(mu.dim());
  for (long j = 0; j < mu.size(); ++j)
    if (mu.raw(j) > 0) m += w[j] * row(mu.atoms, j);
  return m;
}

/// The radius of the support: max ‖y_j‖ over the atoms of positive weight.
template <class S>
S radius(const Measure<S>& mu) {
  S R(0);
  for (long j = 0; j < mu.size(); ++j)
    if (mu.raw(j) > 0) R = num::smax<S>(R, num::euclidean_norm<S>(mu.atoms.row(j)));
  return R;
}

/// One head: scores k(x, y) = xᵀA y (dot) or −‖A(x − y)‖² (l2: L2 / Gaussian potentials), values
/// v(y) = V y + b (b empty: none).
enum class Score { dot, l2 };
template <class S>
struct Head {
  Score score = Score::dot;
  Matrix<S> A, V;
  Vector<S> b;
};

template <class S>
S potential(const Head<S>& h, const Vector<S>& x, const Vector<S>& y) {
  const long d = x.size();
  S s(0);
  if (h.score == Score::dot) {
    for (long a = 0; a < d; ++a)
      for (long b = 0; b < d; ++b) s += x(a) * h.A(a, b) * y(b);
    return s;
  }
  for (long a = 0; a < h.A.rows(); ++a) {
    S r(0);
    for (long b = 0; b < d; ++b) r += h.A(a, b) * (x(b) - y(b));
    s += num::sq<S>(r);
  }
  return -s;
}

template <class S>
Vector<S> value(const Head<S>& h, const Vector<S>& y) {
  Vector<S> v = num::mul<S>(h.V, Matrix<S>(y)).col(0);
  if (h.b.size() > 0) v += h.b;
  return v;
}

/// The attention kernel K_μ(x, ·): softmax_j(k(x, y_j) + log a_j) over the atoms of positive weight (the
/// others get exactly 0).
template <class S>
std::vector<S> kernel(const Head<S>& h, const Vector<S>& x, const Measure<S>& mu) {
  using std::log;
  std::vector<S> s(static_cast<std::size_t>(mu.size()), S(0));
  std::vector<bool> shown(static_cast<std::size_t>(mu.size()));
  for (long j = 0; j < mu.size(); ++j) {
    shown[j] = mu.raw(j) > 0;
    if (shown[j]) s[j] = potential(h, x, row(mu.atoms, j)) + log(lift<S>(mu.raw(j)));
  }
  return num::softmax(s, shown);
}

/// Γ_μ(x) = Σ_j K_μ(x, y_j) v(y_j).
template <class S>
Vector<S> gamma(const Head<S>& h, const Vector<S>& x, const Measure<S>& mu) {
  const std::vector<S> p = kernel(h, x, mu);
  Vector<S> mean_y = Vector<S>::Zero(mu.dim());
  for (long j = 0; j < mu.size(); ++j)
    if (mu.raw(j) > 0) mean_y += p[j] * row(mu.atoms, j);
  return value(h, mean_y);
}

/// CA(η, μ) = (Γ_μ)_# η, or with `residual` (id + Γ_μ)_# η; F(μ) = CA(μ, μ).
template <class S>
Measure<S> cross(const Head<S>& h, const Measure<S>& eta, const Measure<S>& mu, bool residual = false) {
  Measure<S> out{Matrix<S>(eta.size(), h.V.rows()), eta.raw};
  for (long i = 0; i < eta.size(); ++i) {
    Vector<S> g = gamma(h, row(eta.atoms, i), mu);
    if (residual) g += row(eta.atoms, i);
    out.atoms.row(i) = g.transpose();
  }
  return out;
}
template <class S>
Measure<S> attend(const Head<S>& h, const Measure<S>& mu, bool residual = false) {
  return cross(h, mu, mu, residual);
}

/// The double version of a measure (atoms rounded to nearest; interval: the midpoints).
template <class S>
measures::DiscreteMeasure<double> to_discrete(const Measure<S>& mu) {
  Matrix<double> atoms(mu.size(), mu.dim());
  for (long j = 0; j < mu.size(); ++j)
    for (long a = 0; a < mu.dim(); ++a) atoms(j, a) = scalar_traits<S>::to_double(mu.atoms(j, a));
  return measures::DiscreteMeasure<double>(atoms, mu.raw);
}

/// a ≥ b for every point of the arguments (interval: lower end of a against upper end of b).
template <class S>
bool certainly_at_least(const S& a, const S& b) {
  if constexpr (num::is_interval_v<S>) {
    return lower_bound(a) >= upper_bound(b);
  } else {
    return a >= b;
  }
}

/// For μ = Σ w_i δ_{x_i}, ν = Σ w_i δ_{y_i} with the same weights and δ_i = ‖x_i − y_i‖: the pairing x_i ↔
/// y_i is an optimal coupling for every cost ‖x − y‖^p when ‖x_i − y_j‖ ≥ δ_i for all atoms i ≠ j of positive
/// weight (then every coupling π costs Σ_ij π_ij ‖x_i − y_j‖^p ≥ Σ_i (Σ_j π_ij) δ_i^p = Σ_i w_i δ_i^p), or
/// symmetrically ‖x_i − y_j‖ ≥ δ_j. Decided rigorously in S; true for small moves of separated atoms.
template <class S>
bool pairing_is_optimal(const Measure<S>& mu, const Measure<S>& nu) {
  const long m = mu.size();
  std::vector<S> moved(static_cast<std::size_t>(m));
  for (long i = 0; i < m; ++i)
    moved[i] = num::euclidean_norm<S>(Vector<S>(row(mu.atoms, i) - row(nu.atoms, i)));
  bool rows = true, columns = true;
  for (long i = 0; i < m && (rows || columns); ++i)
    for (long j = 0; j < m && (rows || columns); ++j) {
      if (i == j || mu.raw(i) == 0 || mu.raw(j) == 0) continue;
      const S cross = num::euclidean_norm<S>(Vector<S>(row(mu.atoms, i) - row(nu.atoms, j)));
      rows = rows && certainly_at_least(cross, moved[i]);
      columns = columns && certainly_at_least(cross, moved[j]);
    }
  return rows || columns;
}

/// W_p(μ, ν) for p ∈ {1, 2}.
///   double, mpfr: the network simplex on the atoms rounded to double (an ESTIMATE, accurate to about 53
///   bits:
///                 parts using it set Part::accuracy_bits = double_bits), clamped into the exact bounds
///                 below.
///   interval:     a CERTIFIED enclosure: measures::certify_wasserstein's bracket for the rounded atoms,
///                 widened on each side by the largest distance from an atom's enclosure to its rounding
///                 (triangle inequality: the rounded measure has the same weights), intersected with the
///                 exact bounds.
/// Exact bounds (evaluated in S): ‖m_μ − m_ν‖ ≤ W_1 ≤ W_p (means), and when μ and ν have the same raw weights
/// atom by atom, W_p ≤ (Σ_j w_j ‖x_j − y_j‖^p)^{1/p} (the pairing coupling). For one atom moved both ends
/// coincide, so the value is exact there whatever the size of W; and when the pairing is provably optimal
/// (pairing_is_optimal) its cost is W_p itself, returned without the solver. Throws InputError("point", …)
/// when the bracket cannot be certified (the engine then leaves the point uncertified).
template <class S>
S wasserstein(const Measure<S>& mu, const Measure<S>& nu, int p) {
  using std::sqrt;
  const S lower = num::euclidean_norm<S>(Vector<S>(mean(mu) - mean(nu)));
  std::optional<S> upper;
  if (mu.size() == nu.size() && mu.raw == nu.raw) {
    const std::vector<S> w = weights<S>(mu.raw);
    S cost(0);
    for (long j = 0; j < mu.size(); ++j) {
      if (mu.raw(j) == 0) continue;
      const S dist = num::euclidean_norm<S>(Vector<S>(row(mu.atoms, j) - row(nu.atoms, j)));
      cost += w[j] * (p == 1 ? dist : num::sq<S>(dist));
    }
    upper = p == 1 ? cost : S(sqrt(cost));
    if (pairing_is_optimal(mu, nu)) return *upper;
  }
  const measures::DiscreteMeasure<double> md = to_discrete(mu), nd = to_discrete(nu);
  const measures::WassersteinResult exact = measures::wasserstein_exact(md, nd, p);
  if constexpr (num::is_interval_v<S>) {
    const measures::CertifiedBracket bracket =
        measures::certify_wasserstein(md, nd, p, exact.plan, /*improve=*/true);
    if (!bracket.certified && !upper) throw InputError("point", "the Wasserstein bracket is not certified");
    auto rounding_gap = [](const Measure<S>& m, const measures::DiscreteMeasure<double>& r) {
      S gap(0);
      for (long j = 0; j < m.size(); ++j)
        gap = num::smax<S>(gap, num::euclidean_norm<S>(Vector<S>(
                                    row(m.atoms, j) - num::lift_matrix<S>(r.atoms()).row(j).transpose())));
      return gap;
    };
    const S gaps = rounding_gap(mu, md) + rounding_gap(nu, nd);
    mpfr lo(0), hi(std::numeric_limits<double>::infinity());
    if (bracket.certified) {
      lo = lower_bound(S(lift<S>(bracket.lower) - gaps));
      hi = upper_bound(S(lift<S>(bracket.upper) + gaps));
    }
    if (lower_bound(lower) > lo) lo = lower_bound(lower);
    if (upper && upper_bound(*upper) < hi) hi = upper_bound(*upper);
    if (lo < 0) lo = 0;
    return make_interval(lo, hi);
  } else {
    // The simplex plan's cost with the distances evaluated in S between the unrounded atoms: an estimate
    // whose error is that of the plan's masses, not that of rounding atoms far from the origin.
    S cost(0);
    for (const measures::Coupling& e : exact.plan.entries) {
      const S dist = num::euclidean_norm<S>(Vector<S>(row(mu.atoms, e.i) - row(nu.atoms, e.j)));
      cost += lift<S>(e.mass) * (p == 1 ? dist : num::sq<S>(dist));
    }
    S v = num::smax<S>(p == 1 ? cost : S(sqrt(cost)), lower);
    if (upper) v = num::smin<S>(v, *upper);
    return v;
  }
}

/// ClaimInfo::evaluated_at of the claims whose sides contain W_p from `wasserstein` (each may add a
/// sentence).
inline const char* const wasserstein_evaluated_at =
    "W_p is the network-simplex plan's cost in double and mpfr (an estimate); in interval it is a certified "
    "enclosure (measures::certify_wasserstein at that plan, widened by the rounding of the atoms to double, "
    "intersected with the exact mean-gap and pairing bounds), so the solver's error enters as its width.";

/// W_p of the double measures by the network simplex (decisions that must not depend on S, such as whether
/// two input measures coincide).
inline double wasserstein_estimate(const Measure<double>& mu, const Measure<double>& nu, int p) {
  return measures::wasserstein_exact(to_discrete(mu), to_discrete(nu), p).value;
}

/// Theorem B: C_B = ‖V‖(1 + 2‖A‖RR′)e^{2‖A‖RR′}.
template <class S>
S context_constant(const S& v, const S& a, const S& R, const S& Rq) {
  using std::exp;
  const S t = S(2) * a * R * Rq;
  return v * (S(1) + t) * exp(t);
}
/// Theorem C: L_R = ‖V‖(1 + 3‖A‖R²)e^{2‖A‖R²}.
template <class S>
S self_constant(const S& v, const S& a, const S& R) {
  using std::exp;
  const S t = a * R * R;
  return v * (S(1) + S(3) * t) * exp(S(2) * t);
}

// ---- a pair of measures (μ, ν) on m atoms in R^d, read from 2m(d + 1) coordinates -------------------------
// x = (Y (m×d), a (m), D (m×d), c (m)); the mode (a discrete coordinate) says what ν is:
//   moved        ν = Σ a_j δ_{fl(y_j + D_j)}  (same weights; the sums are rounded to double, so every atom of
//                                             both measures is a double and the pairing is a coupling)
//   reweighted   ν = Σ c_j δ_{y_j}
//   independent  ν = Σ c_j δ_{D_j}
enum PairMode : long { moved = 0, reweighted = 1, independent = 2 };

inline std::size_t pair_size(long m, long d) { return static_cast<std::size_t>(2 * m * (d + 1)); }

struct PairData {
  Matrix<double> Y, Z;  ///< atoms of μ and ν
  Vector<double> a, c;  ///< raw weights of μ and ν
};

/// Throws InputError("point", …) for a mode outside 0..2, too few coordinates or unnormalised weights.
inline PairData read_pair(const std::vector<double>& x, std::size_t offset, long m, long d, long mode) {
  if (mode < 0 || mode > 2 || m < 1 || d < 1 || x.size() < offset + pair_size(m, d))
    throw InputError("point", "bad measure pair");
  auto at = [&](std::size_t k) { return x[offset + k]; };
  const std::size_t md = static_cast<std::size_t>(m * d), mm = static_cast<std::size_t>(m);
  PairData p{Matrix<double>(m, d), Matrix<double>(m, d), Vector<double>(m), Vector<double>(m)};
  for (long j = 0; j < m; ++j) {
    for (long k = 0; k < d; ++k) {
      const std::size_t e = static_cast<std::size_t>(j * d + k);
      p.Y(j, k) = at(e);
      const double D = at(md + mm + e);
      p.Z(j, k) = mode == moved ? at(e) + D : (mode == reweighted ? at(e) : D);
    }
    p.a(j) = at(md + static_cast<std::size_t>(j));
    p.c(j) = mode == moved ? p.a(j) : at(2 * md + mm + static_cast<std::size_t>(j));
  }
  check_raw(p.a);
  check_raw(p.c);
  for (long j = 0; j < m; ++j)
    for (long k = 0; k < d; ++k)
      if (!std::isfinite(p.Y(j, k)) || !std::isfinite(p.Z(j, k)))
        throw InputError("point", "atom not finite");
  return p;
}

/// In mode `moved`: the only atom of positive weight whose position differs between μ and ν, if exactly one
/// atom moved (and none of weight 0 did).
inline std::optional<long> single_moved_atom(const PairData& p, long mode) {
  if (mode != moved) return std::nullopt;
  std::optional<long> found;
  for (long j = 0; j < p.Y.rows(); ++j)
    if (p.Y.row(j) != p.Z.row(j)) {
      if (found || p.a(j) == 0) return std::nullopt;
      found = j;
    }
  return found;
}

/// Appends a random pair (2m(d + 1) coordinates) of scale `scale` and returns its mode (`mode` ≥ 0 forces
/// it): atoms Gaussian with corner cases (a duplicated atom, the origin), weights with zeros and tiny
/// entries; ν one atom moved by 10^−7..1 (most often), all atoms jittered, reweighted, or independent.
inline long sample_pair(Rng& rng, std::vector<double>& x, long m, long d, double scale, long forced = -1) {
  const std::size_t start = x.size(), md = static_cast<std::size_t>(m * d), mm = static_cast<std::size_t>(m);
  const double per_axis = scale / std::sqrt(static_cast<double>(d));
  for (std::size_t e = 0; e < md; ++e) x.push_back(per_axis * rng.normal());
  if (m >= 2 && rng.coin(0.15))
    for (long k = 0; k < d; ++k)
      x[start + static_cast<std::size_t>(d + k)] = x[start + static_cast<std::size_t>(k)];
  if (rng.coin(0.1))
    for (long k = 0; k < d; ++k) x[start + static_cast<std::size_t>(k)] = 0;
  for (std::size_t j = 0; j < mm; ++j)
    x.push_back(rng.coin(0.1) ? 0.0 : (rng.coin(0.15) ? 1e-8 : rng.uniform(0.05, 1)));
  normalise_weights(x, start + md, mm);
  const double r = rng.uniform();
  const long mode = forced >= 0 ? forced : (r < 0.55 ? moved : (r < 0.75 ? reweighted : independent));
  const long j_moved = rng.integer(0, m - 1);
  const bool one_atom = rng.coin(0.6);
  const double size = std::pow(10.0, rng.uniform(-7, 0)) * per_axis;
  for (long j = 0; j < m; ++j)
    for (long k = 0; k < d; ++k) {
      double v = 0;
      if (mode == moved) v = one_atom ? (j == j_moved ? size * rng.normal() : 0.0) : size * rng.normal();
      if (mode == independent) v = per_axis * rng.normal();
      x.push_back(v);
    }
  for (std::size_t j = 0; j < mm; ++j) {
    const double a = x[start + md + j];
    x.push_back(mode == reweighted ? a * std::exp(std::pow(10.0, rng.uniform(-4, 0)) * rng.normal())
                                   : rng.uniform(0.05, 1));
  }
  normalise_weights(x, start + 2 * md + mm, mm);
  if (mode == moved && one_atom && x[start + md + static_cast<std::size_t>(j_moved)] == 0)
    x[start + md + static_cast<std::size_t>(j_moved)] = 0.5;  // the moved atom carries mass
  normalise_weights(x, start + md, mm);
  return mode;
}

/// Atoms clamped to [−bound, bound]; both weight vectors made nonnegative and normalised.
inline void repair_pair(std::vector<double>& x, std::size_t offset, long m, long d, double bound) {
  const std::size_t md = static_cast<std::size_t>(m * d), mm = static_cast<std::size_t>(m);
  if (x.size() < offset + pair_size(m, d)) return;
  for (std::size_t e = 0; e < md; ++e) {
    x[offset + e] = std::clamp(x[offset + e], -bound, bound);
    x[offset + md + mm + e] = std::clamp(x[offset + md + mm + e], -bound, bound);
  }
  normalise_weights(x, offset + md, mm);
  normalise_weights(x, offset + 2 * md + mm, mm);
}

/// x < c for every point of x (interval: the upper end); decides hypotheses inside evaluations.
template <class S>
bool certainly_below(const S& x, double c) {
  if constexpr (num::is_interval_v<S>) {
    return upper_bound(x) < c;
  } else {
    return x < c;
  }
}

/// Entries clamped to [−bound, bound] from `from` on (matrices of a point).
inline void clamp_tail(std::vector<double>& x, std::size_t from, double bound) {
  for (std::size_t i = from; i < x.size(); ++i) x[i] = std::clamp(x[i], -bound, bound);
}

/// Appends the 2m(d + 1) coordinates of a pair in mode `moved` where atom j moves by D_j.
inline void push_moved_pair(std::vector<double>& x, const Matrix<double>& Y, const Vector<double>& a,
                            const Matrix<double>& D) {
  for (long j = 0; j < Y.rows(); ++j)
    for (long k = 0; k < Y.cols(); ++k) x.push_back(Y(j, k));
  for (long j = 0; j < a.size(); ++j) x.push_back(a(j));
  for (long j = 0; j < D.rows(); ++j)
    for (long k = 0; k < D.cols(); ++k) x.push_back(D(j, k));
  for (long j = 0; j < a.size(); ++j) x.push_back(a(j));
}

}  // namespace regatta::proofs::claims::mf
