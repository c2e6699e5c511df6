// Enclosure of every transfer function of the affine forms (operators/src/model/affine/form.hpp has the
// contract): for random input forms, points of the input's range are sampled (input symbols ε on the unit
// ℓ₂ ball, fresh symbols η in [−1, 1], the slack anywhere in [−s, s]), the exact function is evaluated
// there in MPFR at 256 bits, and each output entry must lie
//   (a) in the output form at the same values of the input's symbols, its own fresh symbols and slack free:
//       |y − (c′ + A′_old·(ε, η))| ≤ Σ_{new j} |A′_j| + s′ (the dependence on the input symbols is kept), and
//   (b) in the output form's certified range c′ ± radius′ (radius() of form.hpp, rounded up).
// The comparisons are in MPFR at 256 bits, so that the binary64 rounding of the test is not what is tested.
// Hand-made cases that show the check has power are in transfer_rounding_test.cpp; the shared helpers in
// transfer_cases.hpp.
#include <gtest/gtest.h>

#include "transfer_cases.hpp"

namespace regatta::operators::affine {
namespace {

using namespace transfer_test;

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

}  // namespace
}  // namespace regatta::operators::affine
