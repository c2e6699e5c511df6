// Enclosure of every transfer function of the affine forms (operators/src/model/affine/form.hpp has the
// contract): for random input forms, points of the input's range are sampled (input symbols ε on the unit
// ℓ₂ ball, fresh symbols η in [−1, 1], the slack anywhere in [−s, s]), the exact function is evaluated
// there in MPFR at 256 bits, and each output entry must lie
//   (a) in the output form at the same values of the input's symbols, its own fresh symbols and slack free:
//       |y − (c′ + A′_old·(ε, η))| ≤ Σ_{new j} |A′_j| + s′ (the dependence on the input symbols is kept), and
//   (b) in the output form's certified range c′ ± radius′ (radius() of form.hpp, rounded up).
// The comparisons are in MPFR at 256 bits, so that the binary64 rounding of the test is not what is tested.
//
// The second half builds hand-made cases whose exact result is not a binary64 number (1 + 2⁻⁶⁰, e, ...)
// with no symbols at all: there the output form is a point plus its rounding terms, and the test checks that
// the enclosure holds and that the same check FAILS once the slack and the fresh symbols are dropped, so a
// transfer function that forgot its rounding terms would be caught.
#include <gtest/gtest.h>

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

namespace regatta::operators::affine {
namespace {

using R = regatta::mpfr;
constexpr unsigned bits = 256;

/// A point of the symbols' domain: ε (q values, ‖ε‖₂ ≤ 1) then η (K − q values in [−1, 1]).
using Symbols = std::vector<double>;

Symbols draw_symbols(Index q, Index K, std::mt19937_64& rng, int kind) {
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
Form random_form(Index N, Index K, double centre, double spread, double coef, double slack,
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
std::vector<R> values(const Form& F, const Symbols& sym, const std::vector<double>& t) {
  std::vector<R> v(static_cast<std::size_t>(F.size()));
  for (Index e = 0; e < F.size(); ++e) {
    R x = R(F.c(e));
    for (Index j = 0; j < F.A.cols(); ++j) x += R(F.A(e, j)) * R(sym[std::size_t(j)]);
    v[std::size_t(e)] = x + R(F.s(e)) * R(t[std::size_t(e)]);
  }
  return v;
}

/// How far y lies outside entry e of `out` at the old symbols `sym` (≤ 0: inside), check (a).
R excess(const Form& out, Index e, const Symbols& sym, const R& y) {
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
int check_enclosure(const std::vector<const Form*>& inputs, const Form& out, const Pass& p,
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

Pass pass_for(Index q, Index K) {
  Pass p;
  p.q = q;
  p.next = K;
  return p;
}

constexpr Index q = 3, K = 5;  // 3 input symbols, 2 fresh symbols already in use

// ---- linear maps ------------------------------------------------------------------------------------------

TEST(AffineTransfer, CombineEnclosesSumAndDifference) {
  PrecisionGuard guard(bits);
  const Form F = random_form(6, K, 0.0, 3.0, 0.4, 1e-3, 1), G = random_form(6, K, 0.0, 3.0, 0.4, 1e-3, 2);
  const Pass p = pass_for(q, K);
  for (double sign : {1.0, -1.0}) {
    const Form out = combine(F, G, sign, p);
    check_enclosure(
        {&F, &G}, out, p,
        [&](const std::vector<std::vector<R>>& x) {
          std::vector<R> y;
          for (std::size_t e = 0; e < x[0].size(); ++e) y.push_back(x[0][e] + R(sign) * x[1][e]);
          return y;
        },
        3);
  }
}

TEST(AffineTransfer, AffineEntriesEnclosesScaledShiftedEntries) {
  PrecisionGuard guard(bits);
  const Form F = random_form(5, K, 1.0, 2.0, 0.3, 1e-3, 4);
  const Pass p = pass_for(q, K);
  std::vector<I> Lambda, M;
  std::vector<double> lambda, m;
  for (Index e = 0; e < F.size(); ++e) {
    lambda.push_back(0.1 + 0.7 * double(e) - 1.3);
    m.push_back(std::ldexp(1.0, -int(e)) / 3.0);
    Lambda.push_back(I(lambda.back()));
    M.push_back(I(m.back()));
  }
  const Form out = affine_entries(F, Lambda, M, p);
  check_enclosure(
      {&F}, out, p,
      [&](const std::vector<std::vector<R>>& x) {
        std::vector<R> y;
        for (std::size_t e = 0; e < x[0].size(); ++e) y.push_back(R(lambda[e]) * x[0][e] + R(m[e]));
        return y;
      },
      5);
}

TEST(AffineTransfer, LinearRowsEnclosesPerTokenMap) {
  PrecisionGuard guard(bits);
  const Index n = 3, din = 4, dout = 3;
  const Form F = random_form(n * din, K, 0.0, 2.0, 0.3, 1e-3, 6);
  const Pass p = pass_for(q, K);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  Matrix<double> W(din, dout);
  Vector<double> b(dout);
  for (Index k = 0; k < W.size(); ++k) W.data()[k] = normal(rng);
  for (Index k = 0; k < b.size(); ++k) b(k) = normal(rng);
  const Form out = linear_rows(F, n, W, b, p);
  ASSERT_EQ(out.size(), n * dout);
  check_enclosure(
      {&F}, out, p,
      [&](const std::vector<std::vector<R>>& x) {
        std::vector<R> y;
        for (Index i = 0; i < n; ++i)
          for (Index o = 0; o < dout; ++o) {
            R v = R(b(o));
            for (Index f = 0; f < din; ++f) v += x[0][std::size_t(i * din + f)] * R(W(f, o));
            y.push_back(v);
          }
        return y;
      },
      8);
}

TEST(AffineTransfer, SumGroupsEnclosesGroupSums) {
  PrecisionGuard guard(bits);
  const Form F = random_form(7, K, 0.0, 5.0, 0.5, 1e-3, 9);
  const Pass p = pass_for(q, K);
  const std::vector<std::vector<Index>> groups{{0, 1, 2}, {3}, {4, 6, 5, 0}};
  const Form out = sum_groups(F, groups, p);
  check_enclosure(
      {&F}, out, p,
      [&](const std::vector<std::vector<R>>& x) {
        std::vector<R> y;
        for (const auto& g : groups) {
          R v = 0;
          for (Index e : g) v += x[0][std::size_t(e)];
          y.push_back(v);
        }
        return y;
      },
      10);
}

// ---- products ---------------------------------------------------------------------------------------------

TEST(AffineTransfer, ProductEnclosesEntrywiseProduct) {
  PrecisionGuard guard(bits);
  const Form F = random_form(6, K, 0.5, 2.0, 0.4, 1e-3, 11), G = random_form(6, K, -0.5, 2.0, 0.4, 1e-3, 12);
  Pass p = pass_for(q, K);
  const Form out = product(F, G, p);
  EXPECT_GT(p.next, K);  // the deviation products took fresh symbols
  check_enclosure(
      {&F, &G}, out, p,
      [&](const std::vector<std::vector<R>>& x) {
        std::vector<R> y;
        for (std::size_t e = 0; e < x[0].size(); ++e) y.push_back(x[0][e] * x[1][e]);
        return y;
      },
      13);
}

TEST(AffineTransfer, MatmulEnclosesMatrixProductOfTwoForms) {
  PrecisionGuard guard(bits);
  const Index n = 2, inner = 3, m_out = 2;
  const Form F = random_form(n * inner, K, 0.3, 1.0, 0.3, 1e-3, 14);
  const Form G = random_form(inner * m_out, K, -0.2, 1.0, 0.3, 1e-3, 15);
  Pass p = pass_for(q, K);
  auto a = [&](Index i, Index j) { return i * inner + j; };
  auto b = [&](Index j, Index k) { return j * m_out + k; };
  auto allowed = [](Index i, Index j) { return j <= i + 1; };  // a causal-like mask
  const Form out = matmul(F, G, n, inner, m_out, a, b, allowed, p);
  ASSERT_EQ(out.size(), n * m_out);
  check_enclosure(
      {&F, &G}, out, p,
      [&](const std::vector<std::vector<R>>& x) {
        std::vector<R> y;
        for (Index i = 0; i < n; ++i)
          for (Index k = 0; k < m_out; ++k) {
            R v = 0;
            for (Index j = 0; j < inner; ++j)
              if (allowed(i, j)) v += x[0][std::size_t(a(i, j))] * x[1][std::size_t(b(j, k))];
            y.push_back(v);
          }
        return y;
      },
      16);
}

// ---- elementwise nonlinearities ---------------------------------------------------------------------------

R exact_function(Function f, const R& x) {
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

TEST(AffineTransfer, NonlinearEnclosesEveryFunction) {
  PrecisionGuard guard(bits);
  struct Case {
    Function f;
    const char* name;
    double centre, spread, coef;
  };
  // Ranges: wide enough to meet the curvature (GELU and tanh around their inflections, ReLU across 0),
  // positive for 1/x and 1/√x.
  const Case cases[] = {
      {Function::exp, "exp", 0.0, 2.0, 0.3},
      {Function::reciprocal, "1/x", 3.0, 1.0, 0.25},
      {Function::rsqrt, "1/sqrt", 3.0, 1.0, 0.25},
      {Function::gelu_erf, "gelu_erf", 0.0, 2.5, 0.4},
      {Function::gelu_tanh, "gelu_tanh", 0.0, 2.5, 0.4},
      {Function::tanh, "tanh", 0.0, 2.0, 0.4},
      {Function::relu, "relu", 0.0, 0.6, 0.4},
      {Function::silu, "silu", 0.0, 2.5, 0.4},
  };
  std::uint64_t seed = 20;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Form F = random_form(8, K, c.centre, c.spread, c.coef, 1e-3, ++seed);
    Pass p = pass_for(q, K);
    const Form out = nonlinear(F, c.f, p, c.f == Function::rsqrt ? 1e-3 : 0.0);
    check_enclosure(
        {&F}, out, p,
        [&](const std::vector<std::vector<R>>& x) {
          std::vector<R> y;
          for (const R& v : x[0]) y.push_back(exact_function(c.f, v));
          return y;
        },
        ++seed, 300);
  }
}

// ---- row-wise norms ---------------------------------------------------------------------------------------

std::vector<R> exact_norm(const std::vector<R>& x, Index n, Index d, const Vector<double>& gamma,
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

TEST(AffineTransfer, LayerNormAndRmsNormEncloseTheNorms) {
  PrecisionGuard guard(bits);
  const Index n = 2, d = 4;
  const Form X = random_form(n * d, K, 0.0, 2.0, 0.3, 1e-3, 40);
  const Vector<double> gamma = (Vector<double>(d) << 1.2, 0.7, -0.4, 1.0).finished();
  const Vector<double> beta = (Vector<double>(d) << 0.1, -0.3, 0.0, 0.25).finished();
  const double eps = 1e-5;
  {
    SCOPED_TRACE("layernorm");
    Pass p = pass_for(q, K);
    const Form out = layer_norm(X, n, d, gamma, beta, eps, p);
    check_enclosure(
        {&X}, out, p,
        [&](const std::vector<std::vector<R>>& x) { return exact_norm(x[0], n, d, gamma, beta, eps, true); },
        41);
  }
  {
    SCOPED_TRACE("rmsnorm");
    Pass p = pass_for(q, K);
    const Form out = rms_norm(X, n, d, gamma, eps, p);
    check_enclosure(
        {&X}, out, p,
        [&](const std::vector<std::vector<R>>& x) {
          return exact_norm(x[0], n, d, gamma, Vector<double>(), eps, false);
        },
        42);
  }
  {
    SCOPED_TRACE("centred rows");
    Pass p = pass_for(q, K);
    const Form out = centred_rows(X, n, d, p);
    check_enclosure(
        {&X}, out, p,
        [&](const std::vector<std::vector<R>>& x) {
          std::vector<R> y;
          for (Index i = 0; i < n; ++i) {
            R mean = 0;
            for (Index f = 0; f < d; ++f) mean += x[0][std::size_t(i * d + f)];
            mean /= R(double(d));
            for (Index f = 0; f < d; ++f) y.push_back(x[0][std::size_t(i * d + f)] - mean);
          }
          return y;
        },
        43);
  }
}

TEST(AffineTransfer, NormedRowsReadByALinearMapEncloseTheComposition) {
  // normed_rows keeps the norm's product remainder apart; project bounds it per output of the map and
  // materialise per entry: both must enclose W-map(LN(x)) and LN(x).
  PrecisionGuard guard(bits);
  const Index n = 2, d = 4, dout = 3;
  const Form X = random_form(n * d, K, 0.0, 2.0, 0.3, 1e-3, 50);
  const Vector<double> gamma = (Vector<double>(d) << 0.9, 1.1, -0.6, 1.4).finished();
  const Vector<double> beta = (Vector<double>(d) << 0.0, 0.2, -0.1, 0.3).finished();
  Matrix<double> W(d, dout);
  std::mt19937_64 rng(51);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (Index k = 0; k < W.size(); ++k) W.data()[k] = normal(rng);
  const Vector<double> b = (Vector<double>(dout) << 0.5, -0.5, 0.0).finished();
  for (Prenorm kind : {Prenorm::layernorm, Prenorm::rmsnorm}) {
    SCOPED_TRACE(kind == Prenorm::layernorm ? "layernorm" : "rmsnorm");
    const bool centred = kind == Prenorm::layernorm;
    const Vector<double> bt = centred ? beta : Vector<double>();
    Pass p = pass_for(q, K);
    const Rows H = normed_rows(X, n, d, kind, gamma, beta, 1e-6, p);
    const Form projected = project(H, n, W, b, p);
    const Form whole = materialise(H, d, p);
    check_enclosure(
        {&X}, projected, p,
        [&](const std::vector<std::vector<R>>& x) {
          const std::vector<R> z = exact_norm(x[0], n, d, gamma, bt, 1e-6, centred);
          std::vector<R> y;
          for (Index i = 0; i < n; ++i)
            for (Index o = 0; o < dout; ++o) {
              R v = R(b(o));
              for (Index f = 0; f < d; ++f) v += z[std::size_t(i * d + f)] * R(W(f, o));
              y.push_back(v);
            }
          return y;
        },
        52);
    check_enclosure(
        {&X}, whole, p,
        [&](const std::vector<std::vector<R>>& x) {
          return exact_norm(x[0], n, d, gamma, bt, 1e-6, centred);
        },
        53);
  }
}

// ---- attention
// ---------------------------------------------------------------------------------------------

/// X + MHA(N(X)) at the rows `queries`, exactly (MPFR): scores q·k/√d_h, the causal mask (key j visible to
/// the query at position i iff j ≤ i), row softmax, Σ_h P_h V_h WO_h + bO.
std::vector<R> exact_attention(const std::vector<R>& x, Index n, const AttentionLayer& L, Prenorm prenorm,
                               bool causal, const std::vector<Index>& queries) {
  const Index d = L.d, hd = L.head_dim, dv = L.value_dim;
  std::vector<R> h = x;
  if (prenorm != Prenorm::none)
    h = exact_norm(x, n, d, L.norm_gamma, prenorm == Prenorm::layernorm ? L.norm_beta : Vector<double>(),
                   L.norm_eps, prenorm == Prenorm::layernorm);
  auto map = [&](const Matrix<double>& W, const std::vector<Vector<double>>& b, std::size_t head, Index t,
                 Index o) {
    R v = b.empty() ? R(0) : R(b[head](o));
    for (Index f = 0; f < d; ++f) v += h[std::size_t(t * d + f)] * R(W(f, o));
    return v;
  };
  std::vector<R> y;
  const R scale = R(1) / sqrt(R(double(hd)));
  for (Index i : queries) {
    std::vector<R> concat;
    for (std::size_t head = 0; head < std::size_t(L.heads); ++head) {
      std::vector<R> score;
      R top = R(-1e300);
      for (Index j = 0; j < n; ++j) {
        R sc = 0;
        for (Index o = 0; o < hd; ++o)
          sc += map(L.WQ[head], L.bQ, head, i, o) * map(L.WK[head], L.bK, head, j, o);
        score.push_back(sc * scale);
        if (!(causal && j > i) && score.back() > top) top = score.back();
      }
      R total = 0;
      std::vector<R> w(static_cast<std::size_t>(n), R(0));
      for (Index j = 0; j < n; ++j)
        if (!(causal && j > i)) {
          w[std::size_t(j)] = exp(score[std::size_t(j)] - top);
          total += w[std::size_t(j)];
        }
      for (Index o = 0; o < dv; ++o) {
        R v = 0;
        for (Index j = 0; j < n; ++j)
          if (!(causal && j > i)) v += w[std::size_t(j)] / total * map(L.WV[head], L.bV, head, j, o);
        concat.push_back(v);
      }
    }
    for (Index f = 0; f < d; ++f) {
      R v = x[std::size_t(i * d + f)] + (L.bO.size() ? R(L.bO(f)) : R(0));
      for (Index c = 0; c < Index(concat.size()); ++c) v += concat[std::size_t(c)] * R(L.WO(c, f));
      y.push_back(v);
    }
  }
  return y;
}

TEST(AffineTransfer, AttentionBlockEnclosesResidualMultiHeadAttention) {
  PrecisionGuard guard(bits);
  const Index n = 3, d = 4;
  RandomLayerSpec spec;
  spec.d = int(d);
  spec.heads = 2;
  spec.seed = 60;
  spec.biases = true;
  AttentionLayer L = random_layer(spec);
  L.norm_gamma = (Vector<double>(d) << 1.1, 0.8, -0.5, 1.3).finished();
  L.norm_beta = (Vector<double>(d) << 0.1, 0.0, -0.2, 0.05).finished();
  // Rows whose centres are spread (variance well away from 0), so that the norms' 1/√ stays moderate over
  // the ranges and the scores' exp does not overflow: the pass would be vacuous otherwise.
  Form X = random_form(n * d, K, 0.0, 0.2, 0.06, 1e-4, 61);
  for (Index i = 0; i < n; ++i)
    for (Index f = 0; f < d; ++f)
      X.c(i * d + f) += (double(f) - 1.5) * (1.0 + 0.3 * double(i)) + 0.2 * double(i);
  struct Case {
    const char* name;
    Prenorm prenorm;
    bool causal;
    std::vector<Index> queries;
  };
  const Case cases[] = {{"plain", Prenorm::none, false, {0, 1, 2}},
                        {"layernorm, causal", Prenorm::layernorm, true, {0, 1, 2}},
                        {"rmsnorm", Prenorm::rmsnorm, false, {0, 1, 2}},
                        {"layernorm, last query (pooled)", Prenorm::layernorm, false, {2}},
                        {"no norm, first query", Prenorm::none, true, {0}}};
  std::uint64_t seed = 62;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Pass p = pass_for(q, K);
    Form out;
    try {
      out = attention_block(X, n, c.queries, L, c.prenorm, c.causal, p);
    } catch (const Vacuous&) {
      FAIL() << "a range became unbounded or reached a pole";
    }
    ASSERT_EQ(out.size(), Index(c.queries.size()) * d);
    check_enclosure(
        {&X}, out, p,
        [&](const std::vector<std::vector<R>>& x) {
          return exact_attention(x[0], n, L, c.prenorm, c.causal, c.queries);
        },
        ++seed, 100);
  }
}

// ---- the checks have power
// ---------------------------------------------------------------------------------

/// The number of (point, entry) pairs at which y lies outside `out` (check (a)), without failing.
int count_outside(const Form& F, const Form& out, const Pass& p, const std::function<R(const R&)>& f,
                  std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  int outside = 0;
  for (int k = 0; k < 200; ++k) {
    const Symbols sym = draw_symbols(p.q, Index(F.A.cols()), rng, k % 2);
    const std::vector<R> x = values(F, sym, std::vector<double>(static_cast<std::size_t>(F.size()), 0.0));
    for (Index e = 0; e < out.size(); ++e) outside += excess(out, e, sym, f(x[std::size_t(e)])) > 0;
  }
  return outside;
}

TEST(AffineTransfer, AFormThatLosesItsDependenceIsCaught) {
  // The same transfer functions as above, with the output's coefficient on the first input symbol negated:
  // the sampled points must then find exact values outside the form, so the checks above can fail.
  PrecisionGuard guard(bits);
  const Form F = random_form(6, K, 0.5, 1.0, 0.3, 1e-3, 70);
  const Pass p = pass_for(q, K);
  const auto flip = [](Form out) {
    out.A.col(0) *= -1;
    out.forget();
    return out;
  };
  EXPECT_GT(count_outside(
                F, flip(affine_entries(F, I(2.0), std::vector<I>(6, I(0.0)), p)), p,
                [](const R& x) { return R(2) * x; }, 72),
            0);
  Pass pe = pass_for(q, K);
  EXPECT_GT(count_outside(
                F, flip(nonlinear(F, Function::exp, pe)), pe, [](const R& x) { return exp(x); }, 73),
            0);
  Pass pg = pass_for(q, K);
  EXPECT_GT(count_outside(
                F, flip(nonlinear(F, Function::gelu_erf, pg)), pg,
                [](const R& x) { return exact_function(Function::gelu_erf, x); }, 74),
            0);
}

// ---- rounding terms: hand-made cases ----------------------------------------------------------------------

/// A form of point entries (no symbols but q zero input columns).
Form points(const std::vector<double>& c) {
  const Index N = Index(c.size());
  Form F{Vector<double>(N), Matrix<double>::Zero(N, q), Vector<double>::Zero(N)};
  for (Index e = 0; e < N; ++e) F.c(e) = c[std::size_t(e)];
  return F;
}

/// `out` with its slack and the columns beyond `K_old` removed: what a transfer function that forgot its
/// rounding terms (and its remainders) would give.
Form dropped(Form out, Index K_old) {
  out.s.setZero();
  if (out.A.cols() > K_old) out.A.rightCols(out.A.cols() - K_old).setZero();
  out.forget();
  return out;
}

/// The exact values y of a hand-made case must lie in `out` (at ε = 0) and outside dropped(out).
void expect_rounding_matters(const Form& out, const std::vector<R>& y) {
  const Symbols zero(static_cast<std::size_t>(q), 0.0);
  const Form bare = dropped(out, q);
  bool some_outside = false;
  for (Index e = 0; e < out.size(); ++e) {
    EXPECT_LE(excess(out, e, zero, y[std::size_t(e)]), 0) << "entry " << e;
    some_outside = some_outside || excess(bare, e, zero, y[std::size_t(e)]) > 0;
  }
  EXPECT_TRUE(some_outside) << "the exact values lie in the form without its rounding terms: the case does "
                               "not exercise them";
}

TEST(AffineRounding, SumBelowOneUlpNeedsTheSlack) {
  PrecisionGuard guard(bits);
  const double tiny = std::ldexp(1.0, -60);
  const Pass p = pass_for(q, q);
  const Form out = combine(points({1.0, -1.0}), points({tiny, -tiny}), 1.0, p);  // 1 + 2⁻⁶⁰ rounds to 1
  expect_rounding_matters(out, {R(1) + R(tiny), R(-1) - R(tiny)});
  const Form sum = sum_groups(points({1.0, tiny, tiny}), {{0, 1, 2}}, p);
  expect_rounding_matters(sum, {R(1) + R(2) * R(tiny)});
}

TEST(AffineRounding, LinearMapCancellationNeedsTheSlack) {
  PrecisionGuard guard(bits);
  // x·W with x = (1 + u, 1), W = (1 + u, 1 + u)ᵀ: exactly 2 + 3u + u², and u² = 2⁻⁶⁰ is lost by the binary64
  // dot product.
  const double u = std::ldexp(1.0, -30);
  const Pass p = pass_for(q, q);
  Matrix<double> W(2, 1);
  W << 1.0 + u, 1.0 + u;
  const Form out = linear_rows(points({1.0 + u, 1.0}), 1, W, Vector<double>(), p);
  expect_rounding_matters(out, {(R(1) + R(u)) * (R(1) + R(u)) + (R(1) + R(u))});
}

TEST(AffineRounding, ProductOfCentresNeedsTheSlack) {
  PrecisionGuard guard(bits);
  const double u = std::ldexp(1.0, -30);
  Pass p = pass_for(q, q);
  const Form out = product(points({1.0 + u}), points({1.0 + u}), p);  // (1 + u)² = 1 + 2u + 2⁻⁶⁰
  expect_rounding_matters(out, {(R(1) + R(u)) * (R(1) + R(u))});
}

TEST(AffineRounding, TranscendentalAtAPointNeedsItsEnclosure) {
  PrecisionGuard guard(bits);
  for (Function f : {Function::exp, Function::reciprocal, Function::rsqrt, Function::gelu_erf,
                     Function::gelu_tanh, Function::tanh, Function::silu}) {
    Pass p = pass_for(q, q);
    const Form out = nonlinear(points({3.0, 0.7}), f, p, 1e-3);
    expect_rounding_matters(out, {exact_function(f, R(3.0)), exact_function(f, R(0.7))});
  }
}

TEST(AffineRounding, LayerNormOfAPointRowNeedsItsRoundingTerms) {
  PrecisionGuard guard(bits);
  const Index d = 4;
  const std::vector<double> row{1.0, 0.1, -0.3, std::ldexp(1.0, -40)};
  Pass p = pass_for(q, q);
  const Vector<double> gamma = Vector<double>::Constant(d, 1.0), beta = Vector<double>::Zero(d);
  const Form out = layer_norm(points(row), 1, d, gamma, beta, 1e-5, p);
  std::vector<R> x;
  for (double v : row) x.push_back(R(v));
  expect_rounding_matters(out, exact_norm(x, 1, d, gamma, beta, 1e-5, true));
}

}  // namespace
}  // namespace regatta::operators::affine
