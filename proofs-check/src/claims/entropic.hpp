#pragma once
// Internal: enclosures of the entropic transport value OT_ε and of the transport cost ⟨P_ε, C⟩ of its optimal
// plan, from ANY potentials (f, g) — the sides of claim ot.entropic_bracket (transport.cpp;
// docs/math/transport.md#entropic-enclosure).
//
// For weights a (n), b (m), C_ij = ‖x_i − y_j‖² and ε > 0:
//   primal(Q) = ⟨Q, C⟩ + ε KL(Q ‖ a ⊗ b),   OT_ε = min over Q ∈ Π(a, b) of primal(Q), P_ε the minimiser,
//   D_ε(f, g) = ⟨f, a⟩ + ⟨g, b⟩ − ε (Σ_ij a_i b_j e^{(f_i + g_j − C_ij)/ε} − 1).
// Exact facts, for every pair of vectors (f, g) and every Q ∈ Π(a, b):
//   (1) weak duality: D_ε(f, g) ≤ OT_ε ≤ primal(Q);
//   (2) primal(Q) − OT_ε = ε KL(Q ‖ P_ε) (expand log P_ε = log(a_i b_j) + (f*_i + g*_j − C_ij)/ε at the
//   optimal
//       potentials, whose plan has mass 1). With gap = primal(Q) − D_ε(f, g) ≥ 0, Pinsker gives
//       ‖Q − P_ε‖₁ ≤ √(2 gap/ε), and since Q − P_ε has total mass 0 and C ∈ [0, max C],
//       |⟨Q, C⟩ − ⟨P_ε, C⟩| ≤ (max C / 2) √(2 gap/ε).
// Q is the plan of (f, g), P_ij = a_i b_j e^{(f_i + g_j − C_ij)/ε}, rounded onto Π(a, b) (Altschuler, Weed &
// Rigollet 2017, Alg. 2): rows scaled by min(1, a_i / r_i), then columns by min(1, b_j / c_j), then the
// missing mass err_a err_bᵀ / ‖err_a‖₁ added (err_a, err_b ≥ 0 with equal sums). Everything is evaluated in S
// from doubles — the point's coordinates, the weights, ε and the potentials, which come from a double
// Sinkhorn run but are just some vectors — so for S = interval the results enclose the exact real values
// whatever the solver's accuracy: poorer potentials only widen the brackets. For double and mpfr the
// results are estimates: OT_ε ≈ D_ε(f, g) and ⟨P_ε, C⟩ ≈ ⟨Q, C⟩.
#include <cmath>

#include "common.hpp"

namespace regatta::proofs::claims::entropic {

/// q log q for q ≥ 0 (0 at 0); for interval an enclosure over [max(0, lo), hi] (convex, smallest value
/// −1/e at 1/e, so monotone on each side of 1/e).
template <class S>
S xlogx(const S& q) {
  using std::log;
  if constexpr (num::is_interval_v<S>) {
    const mpfr lo = lower_bound(q) > 0 ? mpfr(lower_bound(q)) : mpfr(0), hi = upper_bound(q);
    auto at = [](const mpfr& x) { return x > 0 ? interval(interval(x) * log(interval(x))) : interval(0); };
    const interval inv_e = exp(interval(-1)), a = at(lo), b = at(hi);
    if (hi <= lower_bound(inv_e)) return make_interval(lower_bound(b), upper_bound(a));  // decreasing
    if (lo >= upper_bound(inv_e)) return make_interval(lower_bound(a), upper_bound(b));  // increasing
    const mpfr top = upper_bound(a) > upper_bound(b) ? upper_bound(a) : upper_bound(b);
    return make_interval(lower_bound(interval(-inv_e)), top);
  } else {
    return q > 0 ? S(q * log(q)) : S(0);
  }
}

/// x with its lower end raised to 0 (interval; a quantity known to be ≥ 0), x itself for point types.
template <class S>
S nonnegative(const S& x) {
  if constexpr (num::is_interval_v<S>) {
    if (lower_bound(x) >= 0) return x;
    return make_interval(mpfr(0), upper_bound(x) > 0 ? mpfr(upper_bound(x)) : mpfr(0));
  } else {
    return x;
  }
}

/// H(w) = −Σ_{w_i > 0} w_i log w_i.
template <class S>
S entropy(const Vector<double>& w) {
  using std::log;
  S h(0);
  for (Eigen::Index i = 0; i < w.size(); ++i)
    if (w(i) > 0) h -= lift<S>(w(i)) * log(lift<S>(w(i)));
  return h;
}

template <class S>
struct Bracket {
  S value;      ///< OT_ε: interval [D_ε(f, g), primal(Q)]; point types D_ε(f, g)
  S plan_cost;  ///< ⟨P_ε, C⟩: interval ⟨Q, C⟩ ± (max C / 2) √(2 gap/ε); point types ⟨Q, C⟩
  S dual;       ///< D_ε(f, g)
  S primal;     ///< primal(Q)
  S gap;        ///< primal(Q) − D_ε(f, g) (≥ 0 exactly)
};

/// The bracket of OT_ε(a, b) and ⟨P_ε, C⟩ from potentials (f, g) (see the file comment). Rows of X and Y are
/// the atoms; weights may be 0 (their rows and columns of Q are 0).
template <class S>
Bracket<S> bracket(const Matrix<double>& X, const Vector<double>& a, const Matrix<double>& Y,
                   const Vector<double>& b, double epsilon, const Vector<double>& f,
                   const Vector<double>& g) {
  using std::exp;
  using std::log;
  using std::sqrt;
  const long n = X.rows(), m = Y.rows();
  const S eps = lift<S>(epsilon);
  Matrix<S> C(n, m), P = Matrix<S>::Zero(n, m);
  S max_cost(0), mass(0);
  for (long i = 0; i < n; ++i)
    for (long j = 0; j < m; ++j) {
      S c(0);
      for (long k = 0; k < X.cols(); ++k) c += num::sq<S>(lift<S>(X(i, k)) - lift<S>(Y(j, k)));
      C(i, j) = c;
      max_cost = num::smax<S>(max_cost, c);
      if (a(i) > 0 && b(j) > 0)
        P(i, j) = lift<S>(a(i)) * lift<S>(b(j)) * exp((lift<S>(f(i)) + lift<S>(g(j)) - c) / eps);
      mass += P(i, j);
    }
  Bracket<S> out;
  out.dual = -eps * (mass - S(1));
  for (long i = 0; i < n; ++i) out.dual += lift<S>(a(i)) * lift<S>(f(i));
  for (long j = 0; j < m; ++j) out.dual += lift<S>(b(j)) * lift<S>(g(j));

  // Rounding onto Π(a, b): rows down to a, then columns down to b (each factor min(1, target / sum)).
  Matrix<S> Q = P;
  for (long i = 0; i < n; ++i) {
    if (a(i) == 0) continue;
    const S r = Q.row(i).sum();
    Q.row(i) *= num::smin<S>(S(1), lift<S>(a(i)) / r);
  }
  for (long j = 0; j < m; ++j) {
    if (b(j) == 0) continue;
    const S c = Q.col(j).sum();
    Q.col(j) *= num::smin<S>(S(1), lift<S>(b(j)) / c);
  }
  Vector<S> err_a(n), err_b(m);
  S missing(0);
  for (long i = 0; i < n; ++i) {
    err_a(i) = nonnegative<S>(lift<S>(a(i)) - S(Q.row(i).sum()));
    missing += err_a(i);
  }
  for (long j = 0; j < m; ++j) err_b(j) = nonnegative<S>(lift<S>(b(j)) - S(Q.col(j).sum()));
  // The missing mass err_a err_bᵀ / ‖err_a‖₁; each entry lies in [0, min(err_a_i, err_b_j)] (the sums of
  // err_a and err_b are equal), which encloses it when the interval of ‖err_a‖₁ reaches 0.
  bool divisible = false;
  if constexpr (num::is_interval_v<S>) {
    divisible = lower_bound(missing) > 0;
  } else {
    divisible = missing > 0;
  }
  for (long i = 0; i < n; ++i)
    for (long j = 0; j < m; ++j) {
      if constexpr (num::is_interval_v<S>) {
        const mpfr cap = upper_bound(err_a(i)) < upper_bound(err_b(j)) ? mpfr(upper_bound(err_a(i)))
                                                                       : mpfr(upper_bound(err_b(j)));
        const interval hull = make_interval(mpfr(0), cap);
        Q(i, j) += divisible ? intersect(interval(err_a(i) * err_b(j) / missing), hull) : hull;
        Q(i, j) = nonnegative<S>(Q(i, j));
      } else {
        if (divisible) Q(i, j) += err_a(i) * err_b(j) / missing;
      }
    }

  // primal(Q) = ⟨Q, C⟩ + ε (Σ Q log Q − Σ a log a − Σ b log b): Q has the marginals a and b exactly.
  S cost(0), neg_entropy(0);
  for (long i = 0; i < n; ++i)
    for (long j = 0; j < m; ++j) {
      cost += Q(i, j) * C(i, j);
      neg_entropy += xlogx<S>(Q(i, j));
    }
  out.primal = cost + eps * (neg_entropy + entropy<S>(a) + entropy<S>(b));
  out.gap = nonnegative<S>(out.primal - out.dual);
  if constexpr (num::is_interval_v<S>) {
    const interval gap_hi(upper_bound(out.gap));
    const interval radius = interval(mpfr(upper_bound(max_cost))) / S(2) * sqrt(S(2) * gap_hi / eps);
    const mpfr r = upper_bound(radius);
    out.value = make_interval(lower_bound(out.dual), upper_bound(out.primal));
    out.plan_cost = cost + make_interval(mpfr(-r), r);
  } else {
    out.value = out.dual;
    out.plan_cost = cost;
  }
  return out;
}

}  // namespace regatta::proofs::claims::entropic
