#pragma once
// The closed-form Jacobian of one softmax self-attention block, generic over a value type T, and a
// forward-mode number over interval64 that carries its partial derivatives along a few input coordinates.
// Internal header (centred_jacobian.cpp, second_order.cpp).
//
// Closed form (docs/math/jacobian.md; notation of docs/math/README.md#notation): with Xn = N(X) the row-wise
// pre-normalisation (X when
// there is none), for head h with q_i = xn_i W^Q + b_Q, k_j = xn_j W^K + b_K, u_j = xn_j M_h W^O_h + b_V
// W^O_h (M_h = W^V, or W^Q W^Qᵀ W^V/√d_h for L2), scores s_ij (dot: q_i·k_j/√d_h; l2: −‖q_i − k_j‖²/√d_h), P
// = softmax_row(S + mask), F_i = Σ_j P_ij u_j, the Jacobian with respect to Xn is
//   ∂F_i/∂xn_k = P_ik (M_h W^O_h)ᵀ + Σ_j P_ij (u_j − F_i)ᵀ ∂s_ij/∂xn_k,
//   dot: ∂s_ij/∂xn_k = (δ_ik k_j W^Qᵀ + δ_jk q_i W^Kᵀ)/√d_h,
//   l2:  ∂s_ij/∂xn_k = −2 (q_i − k_j)(δ_ik W^Q − δ_jk W^K)ᵀ/√d_h,
// and the chain rule through N multiplies block (i, k) on the right by N'(x_k) = diag(γ) s_k⁻¹(I − [11ᵀ/d] −
// w_k w_kᵀ/d) (normalization.hpp: w_k the normalised row, s_k its scale; the bracket is symmetric, so the
// block's row vector g becomes s_k⁻¹(g⊙γ − mean(g⊙γ) − w_k (w_k·(g⊙γ))/d)); a residual adds I.
//
// With T = Dual<N> whose values are intervals of a box and whose partials are seeded with unit vectors, every
// operation below is the interval extension of the forward-mode rules, so the value of entry (r, c) encloses
// J_rc over the box and partial t encloses ∂J_rc/∂x_{k_t} over the box (inclusion isotonicity). The softmax
// uses a point shift, exp(s − c)/Σ exp(s − c), exact for every constant c; for the forward-mode numbers its
// partials come from the centred identity ∂p_j = p_j (∂s_j − Σ_m p_m ∂s_m) (softmax_numbers).
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/normalization.hpp>

namespace regatta::lip::detail {

/// Forward-mode number: an enclosure of a value and of its partials along N input coordinates.
template <int N>
struct Dual {
  static constexpr int size = N;
  interval64 v{0.0};
  std::array<interval64, N> g{};

  Dual() { g.fill(interval64(0.0)); }
  Dual(double c) : v(c) { g.fill(interval64(0.0)); }      // NOLINT: implicit, a constant
  Dual(interval64 c) : v(c) { g.fill(interval64(0.0)); }  // NOLINT: implicit, a constant
};

template <int N>
Dual<N> operator+(const Dual<N>& a, const Dual<N>& b) {
  Dual<N> r(a.v + b.v);
  for (int k = 0; k < N; ++k) r.g[k] = a.g[k] + b.g[k];
  return r;
}
template <int N>
Dual<N> operator-(const Dual<N>& a, const Dual<N>& b) {
  Dual<N> r(a.v - b.v);
  for (int k = 0; k < N; ++k) r.g[k] = a.g[k] - b.g[k];
  return r;
}
template <int N>
Dual<N> operator*(const Dual<N>& a, const Dual<N>& b) {
  Dual<N> r(a.v * b.v);
  for (int k = 0; k < N; ++k) r.g[k] = a.g[k] * b.v + a.v * b.g[k];
  return r;
}
/// A Dual times a constant (no partials): N + 1 products instead of 2N + 1.
template <int N>
Dual<N> operator*(const Dual<N>& a, const interval64& c) {
  Dual<N> r(a.v * c);
  for (int k = 0; k < N; ++k) r.g[k] = a.g[k] * c;
  return r;
}
template <int N>
Dual<N> operator*(const interval64& c, const Dual<N>& a) {
  return a * c;
}
template <int N>
Dual<N> operator/(const Dual<N>& a, const Dual<N>& b) {
  Dual<N> r(a.v / b.v);
  for (int k = 0; k < N; ++k) r.g[k] = (a.g[k] - r.v * b.g[k]) / b.v;
  return r;
}
template <int N>
Dual<N> exp(const Dual<N>& a) {
  Dual<N> r(exp(a.v));
  for (int k = 0; k < N; ++k) r.g[k] = r.v * a.g[k];
  return r;
}
/// √a with (√a)' = a'/(2√a); the caller's argument is bounded away from 0 (a variance plus ε_LN > 0).
template <int N>
Dual<N> sqrt(const Dual<N>& a) {
  Dual<N> r(sqrt(a.v));
  const interval64 twice = interval64(2.0) * r.v;
  for (int k = 0; k < N; ++k) r.g[k] = a.g[k] / twice;
  return r;
}

/// Softmax of the scores s with a point shift: exp(s_j − shift)/Σ_m exp(s_m − shift), exact for every shift.
/// The forward-mode numbers have their own overloads (below, and in hyper_dual.hpp), which form the partials
/// from the centred identities of softmax instead of the quotient rule.
template <class T>
std::vector<T> softmax_numbers(const std::vector<T>& s, double shift) {
  using std::exp;
  std::vector<T> p(s.size());
  T z(0.0);
  for (std::size_t j = 0; j < s.size(); ++j) {
    p[j] = exp(s[j] - T(shift));
    z = z + p[j];
  }
  for (T& x : p) x = x / z;
  return p;
}

/// x ∩ y into x, for two enclosures of the same number (disjoint only by a rounding accident: x is kept).
inline void intersect_into(interval64& x, const interval64& y) { x = intersect(x, y); }

/// Enclosures of the softmax values p_j = exp(s_j − shift)/Σ_m exp(s_m − shift) for s_j in the intervals
/// s[j], intersected with [0, 1].
inline std::vector<interval64> softmax_values(const std::vector<interval64>& s, double shift) {
  std::vector<interval64> p = softmax_numbers(s, shift);
  for (interval64& x : p) x = interval64::hull(std::max(x.lower(), 0.0), std::min(x.upper(), 1.0));
  return p;
}

/// Softmax of forward-mode numbers by the centred identity ∂_k p_j = p_j (∂_k s_j − s̄_k) with
/// s̄_k = Σ_m p_m ∂_k s_m (∂ log p_j = ∂s_j − ∂ log Σ exp): the same derivative as the quotient rule, with p_j
/// a common factor instead of two correlated terms (docs/local.md, "Centred softmax and weighted sums").
template <int N>
std::vector<Dual<N>> centred_softmax(const std::vector<Dual<N>>& s, double shift) {
  std::vector<interval64> sv(s.size());
  for (std::size_t j = 0; j < s.size(); ++j) sv[j] = s[j].v;
  const std::vector<interval64> p = softmax_values(sv, shift);
  std::array<interval64, N> mean;
  mean.fill(interval64(0.0));
  for (std::size_t m = 0; m < s.size(); ++m)
    for (int k = 0; k < N; ++k) mean[k] = mean[k] + p[m] * s[m].g[k];
  std::vector<Dual<N>> out(s.size());
  for (std::size_t j = 0; j < s.size(); ++j) {
    out[j].v = p[j];
    for (int k = 0; k < N; ++k) out[j].g[k] = p[j] * (s[j].g[k] - mean[k]);
  }
  return out;
}

/// Componentwise x ∩ y into x for two enclosures of the same forward-mode numbers.
template <int N>
void intersect_into(std::vector<Dual<N>>& x, const std::vector<Dual<N>>& y) {
  for (std::size_t j = 0; j < x.size(); ++j) {
    intersect_into(x[j].v, y[j].v);
    for (int k = 0; k < N; ++k) intersect_into(x[j].g[k], y[j].g[k]);
  }
}

/// The forward-mode softmax: the quotient rule's enclosure intersected with the centred one (usually the
/// narrower, but not in every component).
template <int N>
std::vector<Dual<N>> softmax_numbers(const std::vector<Dual<N>>& s, double shift) {
  std::vector<Dual<N>> out = softmax_numbers<Dual<N>>(s, shift);
  intersect_into(out, centred_softmax(s, shift));
  return out;
}

/// The constants of the layer: double for the point estimate, interval64 (exact products enclosed) otherwise.
template <class T>
struct Constant {
  using type = interval64;
};
template <>
struct Constant<double> {
  using type = double;
};

inline double centre_of(double x) { return x; }
inline double centre_of(const interval64& x) {
  const double m = x.lower() / 2 + x.upper() / 2;
  return std::isfinite(m) ? m : 0.0;
}
template <int N>
double centre_of(const Dual<N>& x) {
  return centre_of(x.v);
}

/// A row-major matrix of any element type (Eigen would ask Dual for NumTraits).
template <class T>
struct Grid {
  Eigen::Index rows = 0, cols = 0;
  std::vector<T> data;
  Grid(Eigen::Index r, Eigen::Index c, const T& fill = T(0.0))
      : rows(r), cols(c), data(std::size_t(r * c), fill) {}
  T& operator()(Eigen::Index r, Eigen::Index c) { return data[std::size_t(r * cols + c)]; }
  const T& operator()(Eigen::Index r, Eigen::Index c) const { return data[std::size_t(r * cols + c)]; }
};

/// The default hook: nothing.
struct NoHook {
  template <class T>
  void operator()(T&) const {}
};

/// The n·d × n·d Jacobian of the block at X (or over the box X) by the closed form above. The caller checks
/// the configuration (softmax attention, no rotary embedding, tied L2 unless allowed). `hook(v)` is called on
/// every intermediate value right after it is formed (normalised rows and scales, projections, scores,
/// attention weights, head outputs, the row factors D, gq, gk), always in the same order for a given layer,
/// options and n, so that a hook can number them (second_order.cpp tightens them over a ball). With
/// assemble = false only the intermediates are formed and the returned grid is empty.
template <class T, class Hook = NoHook>
Grid<T> closed_form(const operators::AttentionLayer& L, const operators::AttentionOptions& o,
                    const Grid<T>& X, Hook&& hook = {}, bool assemble = true) {
  using C = typename Constant<T>::type;
  using Eigen::Index;
  using std::exp;
  using std::sqrt;
  const Index n = X.rows, d = L.d, dh = L.head_dim;
  const auto cast = [](const Matrix<double>& m) { return Matrix<C>(m.template cast<C>()); };
  const bool l2 = L.kind == operators::AttentionKind::l2;
  const operators::Prenorm norm = o.prenorm;
  const C dd = C(double(d));

  // Pre-normalisation: Xn = γ ⊙ w + β row-wise, w = (x − [x̄]) / s, s = √(σ² + ε).
  Grid<T> Xn = X, W(norm == operators::Prenorm::none ? 0 : n, d);
  std::vector<T> inv_scale;
  if (norm != operators::Prenorm::none) {
    inv_scale.assign(std::size_t(n), T(0.0));
    for (Index i = 0; i < n; ++i) {
      T mean(0.0);
      if (norm == operators::Prenorm::layernorm) {
        for (Index a = 0; a < d; ++a) mean = mean + X(i, a);
        mean = mean / T(dd);
        hook(mean);
      }
      std::vector<T> centred(static_cast<std::size_t>(d), T(0.0));
      T second(0.0);
      for (Index a = 0; a < d; ++a) {
        T& c = centred[std::size_t(a)];
        c = X(i, a) - mean;
        hook(c);
        second = second + c * c;
      }
      hook(second);
      T inv = T(1.0) / sqrt(second / T(dd) + T(C(L.norm_eps)));
      hook(inv);
      inv_scale[std::size_t(i)] = inv;
      for (Index a = 0; a < d; ++a) {
        W(i, a) = centred[std::size_t(a)] * inv;
        hook(W(i, a));
        T y = W(i, a);
        if (L.norm_gamma.size() != 0) y = y * C(L.norm_gamma(a));
        if (L.norm_beta.size() != 0 && norm == operators::Prenorm::layernorm) y = y + T(C(L.norm_beta(a)));
        hook(y);
        Xn(i, a) = y;
      }
    }
  }

  Grid<T> J(assemble ? n * d : 0, assemble ? n * d : 0);
  const C inv = C(1.0) / sqrt(C(double(dh)));
  for (int h = 0; h < L.heads; ++h) {
    const Matrix<C> WQ = cast(L.WQ[std::size_t(h)]), WK = cast(L.WK[std::size_t(h)]);
    const Matrix<C> WV = cast(L.WV[std::size_t(h)]);
    const Matrix<C> WO = cast(L.WO.middleRows(Index(h) * L.value_dim, L.value_dim));
    const Matrix<C> M = l2 ? Matrix<C>(WQ * ((WQ.transpose() * WV) * inv)) : WV;
    const Matrix<C> MW = M * WO;  // d×d: u_j = xn_j MW + b_V W^O
    Matrix<C> bVW = Matrix<C>::Zero(1, d);
    if (!L.bV.empty()) bVW = cast(Matrix<double>(L.bV[std::size_t(h)].transpose())) * WO;
    Grid<T> Q(n, dh), K(n, dh), U(n, d);
    for (Index i = 0; i < n; ++i) {
      for (Index c = 0; c < dh; ++c) {
        T q(L.bQ.empty() ? 0.0 : L.bQ[std::size_t(h)](c)), k(L.bK.empty() ? 0.0 : L.bK[std::size_t(h)](c));
        for (Index b = 0; b < d; ++b) {
          q = q + Xn(i, b) * WQ(b, c);
          k = k + Xn(i, b) * WK(b, c);
        }
        hook(q);
        hook(k);
        Q(i, c) = q;
        K(i, c) = k;
      }
      for (Index a = 0; a < d; ++a) {
        T u(bVW(0, a));
        for (Index b = 0; b < d; ++b) u = u + Xn(i, b) * MW(b, a);
        hook(u);
        U(i, a) = u;
      }
    }
    for (Index i = 0; i < n; ++i) {
      const Index last = o.causal ? i : n - 1;  // keys j ≤ last are visible
      std::vector<T> s(std::size_t(last + 1));
      for (Index j = 0; j <= last; ++j) {
        T acc(0.0);
        for (Index c = 0; c < dh; ++c) {
          if (l2) {
            const T diff = Q(i, c) - K(j, c);
            acc = acc - diff * diff;
          } else {
            acc = acc + Q(i, c) * K(j, c);
          }
        }
        s[std::size_t(j)] = acc * inv;
        hook(s[std::size_t(j)]);
      }
      double shift = centre_of(s[0]);
      for (const T& x : s) shift = std::max(shift, centre_of(x));
      std::vector<T> p = softmax_numbers(s, shift);
      for (T& x : p) hook(x);
      // F_ia = Σ_j P_ij u_ja = c_a + Σ_j P_ij (u_ja − c_a) for any constant c_a (Σ_j P_ij = 1), here a point
      // near F_ia: the enclosures then pay the spread of u_ja over j, not its size.
      std::vector<T> F(std::size_t(d), T(0.0));
      for (Index a = 0; a < d; ++a) {
        double c = 0;
        for (Index j = 0; j <= last; ++j) c += centre_of(p[std::size_t(j)]) * centre_of(U(j, a));
        if (!std::isfinite(c)) c = 0;
        T acc(c);
        for (Index j = 0; j <= last; ++j) acc = acc + p[std::size_t(j)] * (U(j, a) - T(c));
        F[std::size_t(a)] = acc;
      }
      for (T& x : F) hook(x);
      // D_j(a) = P_ij (u_ja − F_ia)
      Grid<T> D(last + 1, d);
      for (Index j = 0; j <= last; ++j)
        for (Index a = 0; a < d; ++a) {
          D(j, a) = p[std::size_t(j)] * (U(j, a) - F[std::size_t(a)]);
          hook(D(j, a));
        }
      // gq(j, b) = ∂s_ij/∂xn_ib (the δ_ik part), gk(j, b) = ∂s_ij/∂xn_jb (the δ_jk part).
      Grid<T> gq(last + 1, d), gk(last + 1, d);
      for (Index j = 0; j <= last; ++j)
        for (Index b = 0; b < d; ++b) {
          T tq(0.0), tk(0.0);
          for (Index c = 0; c < dh; ++c) {
            if (l2) {
              const T diff = Q(i, c) - K(j, c);
              tq = tq + diff * WQ(b, c);
              tk = tk + diff * WK(b, c);
            } else {
              tq = tq + K(j, c) * WQ(b, c);
              tk = tk + Q(i, c) * WK(b, c);
            }
          }
          gq(j, b) = l2 ? tq * C(-2.0) * inv : tq * inv;
          gk(j, b) = l2 ? tk * C(2.0) * inv : tk * inv;
          hook(gq(j, b));
          hook(gk(j, b));
        }
      if (!assemble) continue;
      // Σ_j D_j(a) = Σ_j P_ij (u_ja − F_ia) = 0, so Σ_j D_j(a) gq(j, b) = Σ_j D_j(a) (gq(j, b) − c_b) for any
      // constant c_b: a point near the weighted mean of gq(·, b), so that the enclosure pays its spread.
      std::vector<double> gq_centre(std::size_t(d), 0.0);
      for (Index b = 0; b < d; ++b) {
        double c = 0;
        for (Index j = 0; j <= last; ++j) c += centre_of(p[std::size_t(j)]) * centre_of(gq(j, b));
        gq_centre[std::size_t(b)] = std::isfinite(c) ? c : 0.0;
      }
      for (Index a = 0; a < d; ++a)
        for (Index b = 0; b < d; ++b) {
          T own(0.0);  // k = i: Σ_j D_j(a) gq(j, b)
          const T cb(gq_centre[std::size_t(b)]);
          for (Index j = 0; j <= last; ++j) own = own + D(j, a) * (gq(j, b) - cb);
          J(i * d + a, i * d + b) = J(i * d + a, i * d + b) + own;
          for (Index k = 0; k <= last; ++k)
            J(i * d + a, k * d + b) =
                J(i * d + a, k * d + b) + p[std::size_t(k)] * MW(b, a) + D(k, a) * gk(k, b);
        }
    }
  }
  if (!assemble) return Grid<T>(0, 0);
  if (norm != operators::Prenorm::none) {
    std::vector<T> g(static_cast<std::size_t>(d), T(0.0));
    for (Index r = 0; r < n * d; ++r)
      for (Index k = 0; k < n; ++k) {
        T mean(0.0), proj(0.0);
        for (Index c = 0; c < d; ++c) {
          T x = J(r, k * d + c);
          if (L.norm_gamma.size() != 0) x = x * C(L.norm_gamma(c));
          g[std::size_t(c)] = x;
          if (norm == operators::Prenorm::layernorm) mean = mean + x;
          proj = proj + W(k, c) * x;
        }
        mean = mean / T(dd);
        proj = proj / T(dd);
        for (Index b = 0; b < d; ++b)
          J(r, k * d + b) = inv_scale[std::size_t(k)] * (g[std::size_t(b)] - mean - W(k, b) * proj);
      }
  }
  if (o.residual)
    for (Index r = 0; r < n * d; ++r) J(r, r) = J(r, r) + T(1.0);
  return J;
}

/// The closed form in binary64 at a point X (n×d), as a dense (n·d)×(n·d) matrix. Callers check that the
/// layer is one the closed form covers.
inline Matrix<double> closed_form_at(const operators::AttentionLayer& L, const operators::AttentionOptions& o,
                                     const Matrix<double>& X) {
  Grid<double> G(X.rows(), X.cols());
  for (Eigen::Index i = 0; i < X.rows(); ++i)
    for (Eigen::Index a = 0; a < X.cols(); ++a) G(i, a) = X(i, a);
  const Grid<double> J = closed_form<double>(L, o, G);
  Matrix<double> out(J.rows, J.cols);
  for (Eigen::Index r = 0; r < J.rows; ++r)
    for (Eigen::Index c = 0; c < J.cols; ++c) out(r, c) = J(r, c);
  return out;
}

}  // namespace regatta::lip::detail
