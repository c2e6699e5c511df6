#pragma once
// A second-order forward-mode number over interval64, for the Taylor remainders of the region bound
// (second_order.cpp, hessian_sweep.hpp). Internal header.
//
// HyperDual<N> carries an enclosure of a value f, of its partials along two sets of N input coordinates
// (a_t ∋ ∂f/∂x_{k_t}, b_s ∋ ∂f/∂x_{l_s}) and of the mixed second partials ab_ts ∋ ∂²f/∂x_{k_t}∂x_{l_s}. The
// rules are the interval extensions of
//   (fg)_k = f_k g + f g_k,   (fg)_kl = f_kl g + f_k g_l + f_l g_k + f g_kl,
//   φ(f)_k = φ'(f) f_k,        φ(f)_kl = φ'(f) f_kl + φ''(f) f_k f_l      (φ = exp, √, 1/x),
// so, seeded on a box with unit partials, every component encloses the corresponding derivative of the
// function over the box (inclusion isotonicity; φ' and φ'' are evaluated on the value's enclosure). The
// closed form (closed_form_jacobian.hpp) runs on it unchanged: it needs T(double), T(interval64), + − × ÷,
// the product with an interval64 constant, exp, sqrt, centre_of and softmax_numbers (the centred identities
// of softmax's derivatives, below).
#include <array>
#include <cmath>
#include <vector>

#include <regatta/core/interval64.hpp>

#include "../jacobian/closed_form_jacobian.hpp"

namespace regatta::lip::detail {

template <int N>
struct HyperDual {
  static constexpr int size = N;
  interval64 v{0.0};
  std::array<interval64, N> a{}, b{};
  std::array<interval64, N * N> ab{};  // ab[t * N + s] ∋ ∂²/∂x_{k_t}∂x_{l_s}

  HyperDual() : HyperDual(interval64(0.0)) {}
  HyperDual(double c) : HyperDual(interval64(c)) {}  // NOLINT: implicit, a constant
  HyperDual(interval64 c) : v(c) {                   // NOLINT: implicit, a constant
    a.fill(interval64(0.0));
    b.fill(interval64(0.0));
    ab.fill(interval64(0.0));
  }
};

template <int N>
HyperDual<N> operator+(const HyperDual<N>& x, const HyperDual<N>& y) {
  HyperDual<N> r(x.v + y.v);
  for (int t = 0; t < N; ++t) {
    r.a[t] = x.a[t] + y.a[t];
    r.b[t] = x.b[t] + y.b[t];
  }
  for (int i = 0; i < N * N; ++i) r.ab[i] = x.ab[i] + y.ab[i];
  return r;
}
template <int N>
HyperDual<N> operator-(const HyperDual<N>& x, const HyperDual<N>& y) {
  HyperDual<N> r(x.v - y.v);
  for (int t = 0; t < N; ++t) {
    r.a[t] = x.a[t] - y.a[t];
    r.b[t] = x.b[t] - y.b[t];
  }
  for (int i = 0; i < N * N; ++i) r.ab[i] = x.ab[i] - y.ab[i];
  return r;
}
template <int N>
HyperDual<N> operator*(const HyperDual<N>& x, const HyperDual<N>& y) {
  HyperDual<N> r(x.v * y.v);
  for (int t = 0; t < N; ++t) {
    r.a[t] = x.a[t] * y.v + x.v * y.a[t];
    r.b[t] = x.b[t] * y.v + x.v * y.b[t];
  }
  for (int t = 0; t < N; ++t)
    for (int s = 0; s < N; ++s) {
      const int i = t * N + s;
      r.ab[i] = x.ab[i] * y.v + x.a[t] * y.b[s] + x.b[s] * y.a[t] + x.v * y.ab[i];
    }
  return r;
}
/// A HyperDual times a constant (no partials).
template <int N>
HyperDual<N> operator*(const HyperDual<N>& x, const interval64& c) {
  HyperDual<N> r(x.v * c);
  for (int t = 0; t < N; ++t) {
    r.a[t] = x.a[t] * c;
    r.b[t] = x.b[t] * c;
  }
  for (int i = 0; i < N * N; ++i) r.ab[i] = x.ab[i] * c;
  return r;
}
template <int N>
HyperDual<N> operator*(const interval64& c, const HyperDual<N>& x) {
  return x * c;
}

/// φ(x) given enclosures f ∋ φ(x.v), f1 ∋ φ'(x.v), f2 ∋ φ''(x.v) over x's value.
template <int N>
HyperDual<N> chain(const HyperDual<N>& x, const interval64& f, const interval64& f1, const interval64& f2) {
  HyperDual<N> r(f);
  for (int t = 0; t < N; ++t) {
    r.a[t] = f1 * x.a[t];
    r.b[t] = f1 * x.b[t];
  }
  for (int t = 0; t < N; ++t)
    for (int s = 0; s < N; ++s) {
      const int i = t * N + s;
      r.ab[i] = f1 * x.ab[i] + f2 * (x.a[t] * x.b[s]);
    }
  return r;
}

template <int N>
HyperDual<N> exp(const HyperDual<N>& x) {
  const interval64 e = exp(x.v);
  return chain(x, e, e, e);
}
/// √x: φ' = 1/(2√x), φ'' = −φ'/(2x); the argument is bounded away from 0 (a variance plus ε_LN > 0).
template <int N>
HyperDual<N> sqrt(const HyperDual<N>& x) {
  const interval64 f = sqrt(x.v), f1 = interval64(1.0) / (interval64(2.0) * f);
  return chain(x, f, f1, -(f1 / (interval64(2.0) * x.v)));
}
/// x / y = x · (1/y), 1/y: φ' = −φ², φ'' = 2φ³; the value is enclosed directly by x.v / y.v.
template <int N>
HyperDual<N> operator/(const HyperDual<N>& x, const HyperDual<N>& y) {
  const interval64 f = interval64(1.0) / y.v, f2 = square(f);
  HyperDual<N> r = x * chain(y, f, -f2, interval64(2.0) * f2 * f);
  r.v = x.v / y.v;
  return r;
}

/// Softmax of second-order numbers by the centred identities (closed_form_jacobian.hpp has the first-order
/// one): with d_j = ∂s_j − s̄ along each set of coordinates (s̄ = Σ_m p_m ∂s_m),
///   ∂_k p_j = p_j d_jk,   ∂_k∂_l p_j = p_j (d_jk d_jl + ∂_k∂_l s_j − Σ_m p_m ∂_k∂_l s_m − Σ_m p_m d_mk
///   d_ml),
/// from log p_j = s_j − log Σ exp and ∂_l s̄_k = Σ_m p_m ∂_k∂_l s_m + Σ_m p_m d_mk d_ml (Σ_m p_m d_ml = 0).
template <int N>
std::vector<HyperDual<N>> centred_softmax(const std::vector<HyperDual<N>>& s, double shift) {
  const std::size_t m = s.size();
  std::vector<interval64> sv(m);
  for (std::size_t j = 0; j < m; ++j) sv[j] = s[j].v;
  const std::vector<interval64> p = softmax_values(sv, shift);
  std::array<interval64, N> ma, mb;
  std::array<interval64, N * N> mab;
  ma.fill(interval64(0.0));
  mb.fill(interval64(0.0));
  mab.fill(interval64(0.0));
  for (std::size_t j = 0; j < m; ++j) {
    for (int t = 0; t < N; ++t) {
      ma[t] = ma[t] + p[j] * s[j].a[t];
      mb[t] = mb[t] + p[j] * s[j].b[t];
    }
    for (int i = 0; i < N * N; ++i) mab[i] = mab[i] + p[j] * s[j].ab[i];
  }
  std::vector<std::array<interval64, N>> da(m), db(m);
  std::array<interval64, N * N> cov;
  cov.fill(interval64(0.0));
  for (std::size_t j = 0; j < m; ++j) {
    for (int t = 0; t < N; ++t) {
      da[j][t] = s[j].a[t] - ma[t];
      db[j][t] = s[j].b[t] - mb[t];
    }
    for (int t = 0; t < N; ++t)
      for (int u = 0; u < N; ++u) cov[t * N + u] = cov[t * N + u] + p[j] * (da[j][t] * db[j][u]);
  }
  std::vector<HyperDual<N>> out(m);
  for (std::size_t j = 0; j < m; ++j) {
    HyperDual<N>& r = out[j];
    r.v = p[j];
    for (int t = 0; t < N; ++t) {
      r.a[t] = p[j] * da[j][t];
      r.b[t] = p[j] * db[j][t];
    }
    for (int t = 0; t < N; ++t)
      for (int u = 0; u < N; ++u) {
        const int i = t * N + u;
        r.ab[i] = p[j] * (da[j][t] * db[j][u] + (s[j].ab[i] - mab[i]) - cov[i]);
      }
  }
  return out;
}

/// The second-order softmax: the quotient rule's enclosure intersected componentwise with the centred one
/// (neither is the narrower in every component).
template <int N>
std::vector<HyperDual<N>> softmax_numbers(const std::vector<HyperDual<N>>& s, double shift) {
  std::vector<HyperDual<N>> out = softmax_numbers<HyperDual<N>>(s, shift);
  const std::vector<HyperDual<N>> c = centred_softmax(s, shift);
  for (std::size_t j = 0; j < out.size(); ++j) {
    intersect_into(out[j].v, c[j].v);
    for (int t = 0; t < N; ++t) {
      intersect_into(out[j].a[t], c[j].a[t]);
      intersect_into(out[j].b[t], c[j].b[t]);
    }
    for (int i = 0; i < N * N; ++i) intersect_into(out[j].ab[i], c[j].ab[i]);
  }
  return out;
}

template <int N>
double centre_of(const HyperDual<N>& x) {
  const double m = x.v.lower() / 2 + x.v.upper() / 2;
  return std::isfinite(m) ? m : 0.0;
}

}  // namespace regatta::lip::detail
