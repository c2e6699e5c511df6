// The centred enclosure of the Jacobian over a box (see centred_jacobian.hpp).
#include "centred_jacobian.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <regatta/core/error.hpp>
#include <regatta/operators/lipschitz/branch_bound.hpp>

namespace regatta::lip::detail {

namespace {

using Eigen::Index;
using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;

/// Forward-mode number: an enclosure of a value and of its partials along the box coordinates.
struct Dual {
  static constexpr int size = int(bnb_max_dimension);
  interval64 v{0.0};
  std::array<interval64, size> g{};

  Dual() { g.fill(interval64(0.0)); }
  Dual(double c) : v(c) { g.fill(interval64(0.0)); }      // NOLINT: implicit, a constant
  Dual(interval64 c) : v(c) { g.fill(interval64(0.0)); }  // NOLINT: implicit, a constant
};

Dual operator+(const Dual& a, const Dual& b) {
  Dual r(a.v + b.v);
  for (int k = 0; k < Dual::size; ++k) r.g[k] = a.g[k] + b.g[k];
  return r;
}
Dual operator-(const Dual& a, const Dual& b) {
  Dual r(a.v - b.v);
  for (int k = 0; k < Dual::size; ++k) r.g[k] = a.g[k] - b.g[k];
  return r;
}
Dual operator*(const Dual& a, const Dual& b) {
  Dual r(a.v * b.v);
  for (int k = 0; k < Dual::size; ++k) r.g[k] = a.g[k] * b.v + a.v * b.g[k];
  return r;
}
Dual operator/(const Dual& a, const Dual& b) {
  Dual r(a.v / b.v);
  for (int k = 0; k < Dual::size; ++k) r.g[k] = (a.g[k] - r.v * b.g[k]) / b.v;
  return r;
}
Dual exp(const Dual& a) {
  Dual r(exp(a.v));
  for (int k = 0; k < Dual::size; ++k) r.g[k] = r.v * a.g[k];
  return r;
}

/// The constants of the layer: double for the point estimate, interval64 (exact products enclosed) for Dual.
template <class T>
struct Constant {
  using type = interval64;
};
template <>
struct Constant<double> {
  using type = double;
};

double centre_of(double x) { return x; }
double centre_of(const Dual& x) {
  const double m = x.v.lower() / 2 + x.v.upper() / 2;
  return std::isfinite(m) ? m : 0.0;
}

template <class C>
Matrix<C> cast(const Matrix<double>& m) {
  return m.template cast<C>();
}

/// A row-major matrix of any element type (Eigen would ask Dual for NumTraits).
template <class T>
struct Grid {
  Index rows = 0, cols = 0;
  std::vector<T> data;
  Grid(Index r, Index c, const T& fill = T(0.0)) : rows(r), cols(c), data(std::size_t(r * c), fill) {}
  T& operator()(Index r, Index c) { return data[std::size_t(r * cols + c)]; }
  const T& operator()(Index r, Index c) const { return data[std::size_t(r * cols + c)]; }
};

template <class T>
Grid<T> closed_form(const AttentionLayer& L, const AttentionOptions& o, const Grid<T>& X) {
  using C = typename Constant<T>::type;
  using std::exp;
  using std::sqrt;
  const Index n = X.rows, d = L.d, dh = L.head_dim;
  Grid<T> J(n * d, n * d);
  const C inv = C(1.0) / sqrt(C(double(dh)));
  const bool l2 = L.kind == AttentionKind::l2;
  for (int h = 0; h < L.heads; ++h) {
    const Matrix<C> WQ = cast<C>(L.WQ[std::size_t(h)]), WK = cast<C>(L.WK[std::size_t(h)]);
    const Matrix<C> WV = cast<C>(L.WV[std::size_t(h)]);
    const Matrix<C> WO = cast<C>(L.WO.middleRows(Index(h) * L.value_dim, L.value_dim));
    const Matrix<C> M = l2 ? Matrix<C>(WQ * ((WQ.transpose() * WV) * inv)) : WV;
    const Matrix<C> MW = M * WO;  // d×d: u_j = x_j MW + b_V W^O
    Matrix<C> bVW = Matrix<C>::Zero(1, d);
    if (!L.bV.empty()) bVW = cast<C>(Matrix<double>(L.bV[std::size_t(h)].transpose())) * WO;
    // Projections (T), keys and queries with their biases.
    Grid<T> Q(n, dh), K(n, dh), U(n, d);
    for (Index i = 0; i < n; ++i) {
      for (Index c = 0; c < dh; ++c) {
        T q(L.bQ.empty() ? 0.0 : L.bQ[std::size_t(h)](c)), k(L.bK.empty() ? 0.0 : L.bK[std::size_t(h)](c));
        for (Index b = 0; b < d; ++b) {
          q = q + X(i, b) * T(WQ(b, c));
          k = k + X(i, b) * T(WK(b, c));
        }
        Q(i, c) = q;
        K(i, c) = k;
      }
      for (Index a = 0; a < d; ++a) {
        T u(bVW(0, a));
        for (Index b = 0; b < d; ++b) u = u + X(i, b) * T(MW(b, a));
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
        s[std::size_t(j)] = acc * T(inv);
      }
      // Softmax with a point shift (exact for any shift).
      double shift = centre_of(s[0]);
      for (const T& x : s) shift = std::max(shift, centre_of(x));
      std::vector<T> p(s.size());
      T z(0.0);
      for (std::size_t j = 0; j < s.size(); ++j) {
        p[j] = exp(s[j] - T(shift));
        z = z + p[j];
      }
      for (T& x : p) x = x / z;
      std::vector<T> F(std::size_t(d), T(0.0));
      for (Index a = 0; a < d; ++a)
        for (Index j = 0; j <= last; ++j) F[std::size_t(a)] = F[std::size_t(a)] + p[std::size_t(j)] * U(j, a);
      // D_j(a) = P_ij (u_ja − F_ia)
      Grid<T> D(last + 1, d);
      for (Index j = 0; j <= last; ++j)
        for (Index a = 0; a < d; ++a) D(j, a) = p[std::size_t(j)] * (U(j, a) - F[std::size_t(a)]);
      // gq(j, b) = ∂s_ij/∂x_ib (the δ_ik part), gk(j, b) = ∂s_ij/∂x_jb (the δ_jk part).
      Grid<T> gq(last + 1, d), gk(last + 1, d);
      for (Index j = 0; j <= last; ++j)
        for (Index b = 0; b < d; ++b) {
          T tq(0.0), tk(0.0);
          for (Index c = 0; c < dh; ++c) {
            if (l2) {
              const T diff = Q(i, c) - K(j, c);
              tq = tq + diff * T(WQ(b, c));
              tk = tk + diff * T(WK(b, c));
            } else {
              tq = tq + K(j, c) * T(WQ(b, c));
              tk = tk + Q(i, c) * T(WK(b, c));
            }
          }
          gq(j, b) = l2 ? T(-2.0) * tq * T(inv) : tq * T(inv);
          gk(j, b) = l2 ? T(2.0) * tk * T(inv) : tk * T(inv);
        }
      for (Index a = 0; a < d; ++a)
        for (Index b = 0; b < d; ++b) {
          T own(0.0);  // k = i: Σ_j D_j(a) gq(j, b)
          for (Index j = 0; j <= last; ++j) own = own + D(j, a) * gq(j, b);
          J(i * d + a, i * d + b) = J(i * d + a, i * d + b) + own;
          for (Index k = 0; k <= last; ++k)
            J(i * d + a, k * d + b) =
                J(i * d + a, k * d + b) + p[std::size_t(k)] * T(MW(b, a)) + D(k, a) * gk(k, b);
        }
    }
  }
  if (o.residual)
    for (Index r = 0; r < n * d; ++r) J(r, r) = J(r, r) + T(1.0);
  return J;
}

}  // namespace

std::optional<std::string> centred_refusal(const AttentionLayer& layer, const AttentionOptions& options) {
  if (options.prenorm != operators::Prenorm::none)
    return "the centred enclosure does not cover pre-normalisation";
  if (options.sinkhorn_iterations != 1) return "the centred enclosure is for softmax attention";
  if (layer.rotary) return "the centred enclosure does not cover rotary position embeddings";
  if (layer.kind == AttentionKind::l2 && !layer.tied() && !options.allow_untied_l2)
    return "untied L2 attention needs allow_untied_l2";
  return std::nullopt;
}

Matrix<double> closed_form_jacobian(const AttentionLayer& layer, const AttentionOptions& options,
                                    const Matrix<double>& X) {
  if (const auto why = centred_refusal(layer, options)) throw InputError("closed-form Jacobian", *why);
  Grid<double> G(X.rows(), X.cols());
  for (Index i = 0; i < X.rows(); ++i)
    for (Index a = 0; a < X.cols(); ++a) G(i, a) = X(i, a);
  const Grid<double> J = closed_form<double>(layer, options, G);
  Matrix<double> out(J.rows, J.cols);
  for (Index r = 0; r < J.rows; ++r)
    for (Index c = 0; c < J.cols; ++c) out(r, c) = J(r, c);
  return out;
}

JacobianDerivatives jacobian_derivatives_on_box(const AttentionLayer& layer, const AttentionOptions& options,
                                                const Matrix<interval64>& box) {
  if (const auto why = centred_refusal(layer, options)) throw InputError("centred enclosure", *why);
  const Index n = box.rows(), d = box.cols(), k = n * d;
  if (k > Dual::size) throw InputError("centred enclosure", "n*d above the branch-and-bound limit");
  Grid<Dual> X(n, d);
  for (Index i = 0; i < n; ++i)
    for (Index a = 0; a < d; ++a) {
      X(i, a) = Dual(box(i, a));
      X(i, a).g[std::size_t(i * d + a)] = interval64(1.0);
    }
  const Grid<Dual> J = closed_form<Dual>(layer, options, X);
  JacobianDerivatives out;
  out.value.resize(k, k);
  out.partial.assign(std::size_t(k), Matrix<interval64>(k, k));
  for (Index r = 0; r < k; ++r)
    for (Index c = 0; c < k; ++c) {
      out.value(r, c) = J(r, c).v;
      for (Index q = 0; q < k; ++q) out.partial[std::size_t(q)](r, c) = J(r, c).g[std::size_t(q)];
    }
  return out;
}

Matrix<interval64> centred_enclosure(const AttentionLayer& layer, const AttentionOptions& options,
                                     const Matrix<interval64>& box, const Matrix<double>& centre,
                                     const Matrix<interval64>& at_centre) {
  const JacobianDerivatives jd = jacobian_derivatives_on_box(layer, options, box);
  const Index n = box.rows(), d = box.cols(), k = n * d;
  std::vector<interval64> offset(static_cast<std::size_t>(k));
  for (Index i = 0; i < n; ++i)
    for (Index a = 0; a < d; ++a) offset[std::size_t(i * d + a)] = box(i, a) - interval64(centre(i, a));
  Matrix<interval64> out(k, k);
  for (Index r = 0; r < k; ++r)
    for (Index c = 0; c < k; ++c) {
      interval64 e = at_centre(r, c);
      for (Index q = 0; q < k; ++q) e = e + jd.partial[std::size_t(q)](r, c) * offset[std::size_t(q)];
      // Both enclose the range of J_rc over the box: so does their intersection (non-empty in exact
      // terms; if rounding made it look empty, the centred one alone is kept).
      const interval64& naive = jd.value(r, c);
      const double lo = std::max(e.lower(), naive.lower()), hi = std::min(e.upper(), naive.upper());
      out(r, c) = lo <= hi ? interval64::hull(lo, hi) : e;
    }
  return out;
}

}  // namespace regatta::lip::detail
