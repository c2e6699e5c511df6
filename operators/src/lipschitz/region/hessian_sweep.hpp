#pragma once
// Enclosures of the second derivatives of the Jacobian of one attention block over a region, contracted as
// the Taylor form of the region bound needs them (second_order.cpp; docs/local.md, "Taylor form"). Internal
// header, included by second_order.cpp only.
//
// With H^{rc} the n·d × n·d Hessian of the entry J_rc (so ∂_k∂_l J_rc, a third derivative of the block),
// v̂, w the vectors of the spectral-gap form, one sweep of the closed form in HyperDual<8> (hyper_dual.hpp)
// over pairs of coordinate chunks (K ≤ L; the mixed partials of a C³ function commute, so pair (L, K) is the
// transpose of (K, L)) gives interval matrices, each enclosing the corresponding matrix at every point of
// the region:
//   phi        Σ_rc w_r v̂_c H^{rc}       the Hessian of φ(X') = wᵀJ(X')v̂
//   jv[r]      Σ_c v̂_c H^{rc}            the Hessian of (J(X')v̂)_r
//   jtw[c]     Σ_r w_r H^{rc}            the Hessian of (J(X')ᵀw)_c
// and non-negative matrices of magnitudes (rounded up)
//   rows[r] ≥ Σ_c |H^{rc}|,  cols[c] ≥ Σ_r |H^{rc}|  entrywise, and entry_frob2(r, c) ≥ ‖H^{rc}‖_F².
// The intermediate values of the closed form are intersected with `value_bounds` (numbered as in
// second_order.cpp's BallTightening, valid over the region); the region lies in `box`. The chunk pairs run on
// OpenMP threads (each writes its own blocks; the result does not depend on the number of threads).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/progress.hpp>

#include "../jacobian/closed_form_jacobian.hpp"
#include "hyper_dual.hpp"
#include "parallel_passes.hpp"

namespace regatta::lip::detail {

struct HessianSweep {
  Matrix<interval64> phi;
  std::vector<Matrix<interval64>> jv, jtw;
  std::vector<Matrix<double>> rows, cols;
  Matrix<double> entry_frob2;
  bool finite = true;
};

/// Intersects every intermediate value with its bound over the region (the hook of closed_form).
struct ValueBoundHook {
  const std::vector<interval64>* bound = nullptr;
  std::size_t next = 0;
  template <class T>
  void operator()(T& x) {
    const std::size_t i = next++;
    if (bound == nullptr || i >= bound->size()) return;
    x.v = intersect(x.v, (*bound)[i]);
  }
};

inline double upper_add(double a, double b) { return (interval64(a) + interval64(b)).upper(); }

inline HessianSweep hessian_sweep(const operators::AttentionLayer& layer,
                                  const operators::AttentionOptions& options, const Matrix<interval64>& box,
                                  const std::vector<interval64>& value_bounds, const Matrix<interval64>& v,
                                  const Matrix<interval64>& w, const Progress& progress = {}) {
  using Eigen::Index;
  constexpr int N = 8;
  using Number = HyperDual<N>;
  const Index n = box.rows(), d = box.cols(), nd = n * d;
  HessianSweep out;
  out.phi = Matrix<interval64>::Constant(nd, nd, interval64(0.0));
  out.jv.assign(std::size_t(nd), out.phi);
  out.jtw.assign(std::size_t(nd), out.phi);
  out.rows.assign(std::size_t(nd), Matrix<double>::Zero(nd, nd));
  out.cols.assign(std::size_t(nd), Matrix<double>::Zero(nd, nd));
  out.entry_frob2 = Matrix<double>::Zero(nd, nd);
  const Index chunks = (nd + N - 1) / N;
  const std::string stage = "third derivative over the region (interval64, second-order forward mode)";
  // The chunk pairs (K, L), K ≤ L, run in parallel: pair (K, L) alone writes the (k, l) block of chunks K × L
  // of phi, jv, jtw, rows and cols. Only the per-entry Frobenius sums are shared; each pair keeps its own,
  // added afterwards in the pairs' order, so the result does not depend on the number of threads.
  std::vector<std::pair<Index, Index>> pairs;
  for (Index K = 0; K < chunks; ++K)
    for (Index L = K; L < chunks; ++L) pairs.emplace_back(K, L);
  const Index total = Index(pairs.size());
  std::vector<Matrix<double>> pair_frob2(pairs.size());
  std::atomic<bool> finite{true};
  std::atomic<Index> done{0};
  const auto pass = [&](Index p) {
    const auto [K, L] = pairs[std::size_t(p)];
    const Index k0 = K * N, l0 = L * N, kn = std::min<Index>(N, nd - k0), ln = std::min<Index>(N, nd - l0);
    Grid<Number> Xb(n, d);
    for (Index i = 0; i < n; ++i)
      for (Index a = 0; a < d; ++a) {
        Number& x = Xb(i, a);
        x = Number(box(i, a));
        const Index k = i * d + a;
        if (k >= k0 && k < k0 + kn) x.a[std::size_t(k - k0)] = interval64(1.0);
        if (k >= l0 && k < l0 + ln) x.b[std::size_t(k - l0)] = interval64(1.0);
      }
    ValueBoundHook hook{&value_bounds, 0};
    const Grid<Number> J = closed_form<Number>(layer, options, Xb, hook);
    // The pair's mirror (L, K) adds the same magnitudes to the Frobenius sums.
    const interval64 mirror(K == L ? 1.0 : 2.0);
    Matrix<double>& frob2 = pair_frob2[std::size_t(p)];
    frob2.resize(nd, nd);
    bool pair_finite = true;
    for (Index r = 0; r < nd; ++r)
      for (Index c = 0; c < nd; ++c) {
        const Number& e = J(r, c);
        const interval64 wr = w(r, 0), vc = v(c, 0);
        interval64 frob(0.0);
        for (Index t = 0; t < kn; ++t)
          for (Index s = 0; s < ln; ++s) {
            const interval64& h = e.ab[std::size_t(t * N + s)];
            const Index k = k0 + t, l = l0 + s;
            const interval64 hv = h * vc;
            out.phi(k, l) = out.phi(k, l) + wr * hv;
            out.jv[std::size_t(r)](k, l) = out.jv[std::size_t(r)](k, l) + hv;
            out.jtw[std::size_t(c)](k, l) = out.jtw[std::size_t(c)](k, l) + wr * h;
            const double m = std::max(std::fabs(h.lower()), std::fabs(h.upper()));
            pair_finite = pair_finite && std::isfinite(m);
            double& row = out.rows[std::size_t(r)](k, l);
            double& col = out.cols[std::size_t(c)](k, l);
            row = upper_add(row, m);
            col = upper_add(col, m);
            frob = frob + square(interval64(m));
          }
        frob2(r, c) = (mirror * frob).upper();
      }
    if (!pair_finite) finite = false;  // the sweep is not used once an enclosure is infinite
    ++done;
  };
  parallel_passes(
      total, pass,
      [&](Index) {
        if (progress) progress(stage, done.load(), total);
      },
      [&] { return !finite.load(); });
  out.finite = finite.load();
  if (!out.finite) return out;
  for (const Matrix<double>& frob2 : pair_frob2)
    for (Index r = 0; r < nd; ++r)
      for (Index c = 0; c < nd; ++c) out.entry_frob2(r, c) = upper_add(out.entry_frob2(r, c), frob2(r, c));
  if (progress) progress(stage, chunks * (chunks + 1) / 2, chunks * (chunks + 1) / 2);
  // Fill the blocks below the diagonal from their transposes (Schwarz: ∂_k∂_l = ∂_l∂_k).
  const auto mirror_fill = [&](auto& M) {
    for (Index k = 0; k < nd; ++k)
      for (Index l = 0; l < nd; ++l)
        if (k / N > l / N) M(k, l) = M(l, k);
  };
  mirror_fill(out.phi);
  for (Index r = 0; r < nd; ++r) {
    mirror_fill(out.jv[std::size_t(r)]);
    mirror_fill(out.jtw[std::size_t(r)]);
    mirror_fill(out.rows[std::size_t(r)]);
    mirror_fill(out.cols[std::size_t(r)]);
  }
  return out;
}

}  // namespace regatta::lip::detail
