#pragma once
// The shared part of the affine transfer tests (transfer_test.cpp, transfer_rounding_test.cpp): random
// symbols in the input range, the exact values of a form there in MPFR, the excess of an exact value over
// the output form, and the passes.
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <regatta/core/precision.hpp>
#include <regatta/core/scalar.hpp>

#include "../../../../operators/src/model/affine/attention.hpp"
#include "../../../../operators/src/model/affine/form.hpp"
#include "../../../../operators/src/model/affine/linear.hpp"
#include "../../../../operators/src/model/affine/nonlinear.hpp"
#include "../../../../operators/src/model/affine/norms.hpp"
#include "../../../../operators/src/model/affine/products.hpp"

namespace regatta::operators::affine::transfer_test {

using R = regatta::mpfr;
inline constexpr unsigned bits = 256;

/// A point of the symbols' domain: ε (q values, ‖ε‖₂ ≤ 1) then η (K − q values in [−1, 1]).
using Symbols = std::vector<double>;

inline Symbols draw_symbols(Index q, Index K, std::mt19937_64& rng, int kind) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  Symbols s(static_cast<std::size_t>(K));
  double norm = 0;
  for (Index j = 0; j < q; ++j) {
    s[std::size_t(j)] = normal(rng);
    norm += s[std::size_t(j)] * s[std::size_t(j)];
  }
  norm = std::sqrt(norm);
  // kind 0: on the sphere (the extremes of linear functionals), 1: inside, 2: the centre.
  const double radius = kind == 0 ? 1.0 : kind == 1 ? std::pow(0.5 * unit(rng) + 0.5, 1.0 / double(q)) : 0.0;
  for (Index j = 0; j < q; ++j) s[std::size_t(j)] *= norm > 0 ? radius * (1 - 1e-12) / norm : 0.0;
  for (Index j = q; j < K; ++j) s[std::size_t(j)] = kind == 0 ? (unit(rng) < 0 ? -1.0 : 1.0) : unit(rng);
  return s;
}

/// A random form of N entries on K columns, the first q the input symbols.
inline Form random_form(Index N, Index K, double centre, double spread, double coef, double slack,
                        std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  Form F{Vector<double>(N), Matrix<double>(N, K), Vector<double>(N)};
  for (Index e = 0; e < N; ++e) {
    F.c(e) = centre + spread * unit(rng);
    for (Index j = 0; j < K; ++j) F.A(e, j) = coef * unit(rng);
    F.s(e) = slack * (0.5 + 0.5 * unit(rng));
  }
  return F;
}

/// The input values at the symbols `sym` with the slack at t_e·s_e (t_e in [−1, 1]), exactly in MPFR.
inline std::vector<R> values(const Form& F, const Symbols& sym, const std::vector<double>& t) {
  std::vector<R> v(static_cast<std::size_t>(F.size()));
  for (Index e = 0; e < F.size(); ++e) {
    R x = R(F.c(e));
    for (Index j = 0; j < F.A.cols(); ++j) x += R(F.A(e, j)) * R(sym[std::size_t(j)]);
    v[std::size_t(e)] = x + R(F.s(e)) * R(t[std::size_t(e)]);
  }
  return v;
}

/// How far y lies outside entry e of `out` at the old symbols `sym` (≤ 0: inside), check (a).
inline R excess(const Form& out, Index e, const Symbols& sym, const R& y) {
  R centre = R(out.c(e));
  R width = R(out.s(e));
  for (Index j = 0; j < out.A.cols(); ++j) {
    if (j < Index(sym.size()))
      centre += R(out.A(e, j)) * R(sym[std::size_t(j)]);
    else
      width += abs(R(out.A(e, j)));
  }
  return abs(y - centre) - width;
}

/// Samples points of the inputs' ranges, applies `exact` to the input values (one vector per input form),
/// and checks (a) and (b) for every output entry. Returns the number of (point, entry) pairs checked.
inline int check_enclosure(const std::vector<const Form*>& inputs, const Form& out, const Pass& p,
                           const std::function<std::vector<R>(const std::vector<std::vector<R>>&)>& exact,
                           std::uint64_t seed, int points = 200) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  Index K = 0;
  for (const Form* F : inputs) K = std::max(K, Index(F->A.cols()));
  const Vector<double> range = radius(out, p);
  int checked = 0;
  for (int k = 0; k < points; ++k) {
    const Symbols sym = draw_symbols(p.q, K, rng, k % 3);
    std::vector<std::vector<R>> x;
    for (const Form* F : inputs) {
      std::vector<double> t(static_cast<std::size_t>(F->size()));
      for (double& v : t) v = k % 3 == 2 ? 0.0 : (k % 2 == 0 ? (unit(rng) < 0 ? -1.0 : 1.0) : unit(rng));
      x.push_back(values(*F, sym, t));
    }
    const std::vector<R> y = exact(x);
    EXPECT_EQ(Index(y.size()), out.size());
    for (Index e = 0; e < out.size(); ++e) {
      const R& v = y[std::size_t(e)];
      const R over = excess(out, e, sym, v);
      EXPECT_LE(over, 0) << "entry " << e << " at point " << k << ": outside the form by "
                         << over.convert_to<double>();
      EXPECT_LE(abs(v - R(out.c(e))), R(range(e)))
          << "entry " << e << " at point " << k << ": outside the range";
      ++checked;
    }
  }
  return checked;
}

inline Pass pass_for(Index q, Index K) {
  Pass p;
  p.q = q;
  p.next = K;
  return p;
}

inline constexpr Index q = 3, K = 5;  // 3 input symbols, 2 fresh symbols already in use

inline R exact_function(Function f, const R& x) {
  const R half = R(0.5);
  switch (f) {
    case Function::exp:
      return exp(x);
    case Function::reciprocal:
      return R(1) / x;
    case Function::rsqrt:
      return R(1) / sqrt(x);
    case Function::gelu_erf:
      return half * x * (R(1) + erf(x / sqrt(R(2))));
    case Function::gelu_tanh: {
      const R c = sqrt(R(2) / boost::math::constants::pi<R>());
      return half * x * (R(1) + tanh(c * (x + R(0.044715) * x * x * x)));
    }
    case Function::tanh:
      return tanh(x);
    case Function::relu:
      return x > 0 ? x : R(0);
    case Function::silu:
      return x / (R(1) + exp(-x));
  }
  return R(0);
}

inline std::vector<R> exact_norm(const std::vector<R>& x, Index n, Index d, const Vector<double>& gamma,
                                 const Vector<double>& beta, double eps, bool centred) {
  std::vector<R> y;
  for (Index i = 0; i < n; ++i) {
    R mean = 0;
    for (Index f = 0; f < d; ++f) mean += x[std::size_t(i * d + f)];
    mean /= R(double(d));
    if (!centred) mean = 0;
    R ms = 0;
    for (Index f = 0; f < d; ++f)
      ms += (x[std::size_t(i * d + f)] - mean) * (x[std::size_t(i * d + f)] - mean);
    const R root = R(1) / sqrt(ms / R(double(d)) + R(eps));
    for (Index f = 0; f < d; ++f) {
      const R g = gamma.size() ? R(gamma(f)) : R(1);
      const R b = beta.size() ? R(beta(f)) : R(0);
      y.push_back(g * (x[std::size_t(i * d + f)] - mean) * root + b);
    }
  }
  return y;
}

}  // namespace regatta::operators::affine::transfer_test
