// Theoretical bounds (operators/lipschitz/bounds.hpp) checked against
//   * the reference values of docs/math/bounds.md and claims.md (Λ_n table, 4Λ_n + 1, √n(4Λ_n + 1), the
//     kim.thm32_2_quoted counterexample), computed there at high precision;
//   * an independent evaluation of each formula written here (Eigen's JacobiSVD on the full matrices,
//     per-head sums arranged differently) for random multi-head layers;
//   * the scalar types against each other: the interval enclosure (128 bits) contains the mpfr value at 256
//     bits, and the certified upper bound is at least the double estimate;
// Every refusal (InputError from evaluate, a reason in theoretical_bounds) and the catalogue are checked in
// bounds_refusals_test.cpp; the shared helpers are in bounds_cases.hpp.
#include <gtest/gtest.h>

#include "bounds_cases.hpp"

namespace regatta::lip {
namespace {

using namespace bounds_test;

// ---------------------------------------------------------------------------------------------------------
// Reference values of docs/math/bounds.md
// ---------------------------------------------------------------------------------------------------------

struct LambdaRow {
  std::int64_t n;
  const char* lambda;  // docs/math/bounds.md#kim-lambda table, 30 digits
};

TEST(KimLambda, MatchesTheTableOfBoundsMd) {
  const LambdaRow rows[] = {
      {2, "0.278464542761073795109358739023"},   {3, "0.463055513365548857404470107740"},
      {4, "0.603545739535836010404151091435"},   {10, "1.10100299727697266311999577072"},
      {16, "1.38346150534999627381098013255"},   {64, "2.30713027803704796190418128015"},
      {1000, "4.42050160394292749451233393195"}, {1000000, "10.4672575057198279555505882554"}};
  const PrecisionGuard guard(256);
  for (const auto& row : rows) {
    const mpfr reference(row.lambda);
    const mpfr value = kim_lambda<mpfr>(row.n);
    EXPECT_LT(abs(value - reference) / reference, significant_digits_accuracy(row.lambda)) << "n = " << row.n;
    const interval enclosure = kim_lambda<interval>(row.n);
    EXPECT_TRUE(contains(enclosure, value)) << "n = " << row.n;
    // Λ_n in double: the Lambert-W inversion of n − 1 (exact) is within eps relative (two half-ulps).
    EXPECT_NEAR(kim_lambda<double>(row.n), double(reference),
                testing::rounding_bound<double>(1) * double(reference));
  }
  EXPECT_EQ(kim_lambda<double>(1), 0.0);  // W0(0) = 0
  EXPECT_THROW(kim_lambda<double>(0), InputError);
}

TEST(KimBounds, UnitWeightsReproduceTheTables) {
  // d = H = 1, all weights 1: UB_∞ = 4Λ_n + 1 (docs/math/bounds.md#kim-tightness table) and UB_2 = √n (4Λ_n +
  // 1) (docs/math/bounds.md#kim-lambda table).
  struct Row {
    std::int64_t n;
    const char *ub_inf, *ub_2;
  };
  const Row rows[] = {{2, "2.11385817104429518043743495609", "2.9894468944240279644"},
                      {3, "2.85222205346219542961788043096", "4.9401935110649571002"},
                      {10, "5.40401198910789065247998308288", "17.088986388437969869"},
                      {100, "11.5145983880811290026994517404", "115.14598388081129003"},
                      {1000, "18.6820064157717099780493357278", "590.77691535717213884"}};
  const AttentionLayer L = scalar_l2_layer(1.0);
  const PrecisionGuard guard(256);
  for (const auto& row : rows) {
    const BoundSetting s = setting_with(row.n, std::nullopt);
    EXPECT_LT(abs(evaluate<mpfr>(Bound::kim_inf, L, {}, s) / mpfr(row.ub_inf) - 1),
              significant_digits_accuracy(row.ub_inf));
    EXPECT_LT(abs(evaluate<mpfr>(Bound::kim_two, L, {}, s) / mpfr(row.ub_2) - 1),
              significant_digits_accuracy(row.ub_2));
  }
}

TEST(KimBounds, QuotedTwoNormFormAgainstTheCounterexampleOfBoundsMd) {
  // n = 3, d = H = d_h = 1, W^V = W^O = 1, W^Q = 5: the quoted form gives √3·2.852222·5 = 24.7009675553, the
  // scaling-consistent form 123.5048377766 (docs/math/bounds.md#kim-thm32, 10 decimals).
  const AttentionLayer L = scalar_l2_layer(5.0);
  const BoundSetting s = setting_with(3, std::nullopt);
  const PrecisionGuard guard(256);
  const std::string quoted = "24.7009675553", derived = "123.5048377766";
  EXPECT_NEAR(double(kim_thm32_2_quoted_claim<mpfr>(L, {}, s)), std::stod(quoted), last_place(quoted));
  EXPECT_NEAR(double(evaluate<mpfr>(Bound::kim_two, L, {}, s)), std::stod(derived), last_place(derived));
  // The quoted claim is never part of the list of valid bounds.
  for (const auto& r : theoretical_bounds(L, {}, s)) EXPECT_NE(info(r.bound).id, "kim.thm32_2_quoted");
  AttentionOptions residual;
  residual.residual = true;
  EXPECT_THROW(kim_thm32_2_quoted_claim<double>(L, residual, s), InputError);
}

// ---------------------------------------------------------------------------------------------------------
// Independent evaluation of each formula (double, JacobiSVD on the full matrices)
// ---------------------------------------------------------------------------------------------------------

struct HeadNorms {
  std::vector<double> a, v;  // ‖A_h‖₂, ‖V_h‖₂ from the d×d matrices
};

HeadNorms head_norms(const AttentionLayer& L) {
  HeadNorms out;
  for (int h = 0; h < L.heads; ++h) {
    const Matrix<double> A = L.WQ[h] * L.WK[h].transpose() / std::sqrt(double(L.head_dim));
    const Matrix<double> VO = L.WV[h] * L.WO.middleRows(h * L.value_dim, L.value_dim);
    out.a.push_back(svd_norm(A));
    out.v.push_back(svd_norm(VO));
  }
  return out;
}

double independent_kim_inf(const AttentionLayer& L, std::int64_t n) {
  std::vector<double> q, v;
  for (int h = 0; h < L.heads; ++h) {
    q.push_back(max_row_sum(L.WQ[h]) * max_row_sum(L.WQ[h].transpose()));
    v.push_back(max_row_sum(L.WV[h].transpose()));
  }
  const double lam = kim_lambda<double>(n);
  return (4 * lam + std::pow(double(L.head_dim), -0.5)) * max_row_sum(L.WO.transpose()) *
         *std::max_element(q.begin(), q.end()) * *std::max_element(v.begin(), v.end());
}

double independent_kim_two(const AttentionLayer& L, std::int64_t n) {
  Vector<double> terms(L.heads);  // ‖W^Q_h‖² ‖W^V_h‖ per head; the bound takes their Euclidean norm
  for (int h = 0; h < L.heads; ++h) terms(h) = std::pow(svd_norm(L.WQ[h]), 2) * svd_norm(L.WV[h]);
  return std::sqrt(double(n) / L.head_dim) * (4 * kim_lambda<double>(n) + 1) * terms.norm() * svd_norm(L.WO);
}

TEST(KimBounds, MatchAnIndependentEvaluation) {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const AttentionLayer L = layer_of(AttentionKind::l2, 6, seed == 3 ? 3 : 2, seed, 0.3 + seed);
    for (std::int64_t n : {2, 7, 100}) {
      const BoundSetting s = setting_with(n, std::nullopt);
      EXPECT_NEAR(evaluate<double>(Bound::kim_inf, L, {}, s), independent_kim_inf(L, n),
                  formula_rounding(L.d) * independent_kim_inf(L, n));
      EXPECT_NEAR(evaluate<double>(Bound::kim_two, L, {}, s), independent_kim_two(L, n),
                  formula_rounding(L.d) * independent_kim_two(L, n));
    }
  }
}

TEST(DotBounds, MatchAnIndependentEvaluation) {
  for (std::uint64_t seed : {4u, 5u}) {
    const AttentionLayer L = layer_of(AttentionKind::dot, 6, 3, seed, 0.6);
    const HeadNorms hn = head_norms(L);
    const double R = 1.7, Rq = 0.6;
    const std::int64_t n = 9;
    BoundSetting s = setting_with(n, R);
    s.query_radius = Rq;
    s.depth = 3;
    double sqrt_n = 0, query = 0, context = 0, self = 0, values = 0;
    double context_exponents = 0, self_exponents = 0;  // the largest arguments of the exponentials
    for (int h = 0; h < L.heads; ++h) {
      const double a = hn.a[h], v = hn.v[h];
      sqrt_n += std::sqrt(3 * (std::pow(a * R * R, 2) * (4 * n + 1) + n)) * v;
      query += v * a * R * R;
      context += v * (1 + 2 * a * R * Rq) * std::exp(a * R * Rq) * std::exp(a * R * Rq);
      self += v * (1 + 3 * a * R * R) * std::pow(std::exp(a * R * R), 2);
      values += v;
      context_exponents = std::max(context_exponents, 2 * a * R * Rq);
      self_exponents = std::max(self_exponents, 2 * a * R * R);
    }
    // Stack of three: radii R, ΣV·R, (ΣV)²·R (no biases, no residual). The radius of layer l carries the
    // rounding of l more products, which its exponential's argument 2·a·r² doubles.
    double depth = 1, radius = R, depth_exponents = 0;
    for (int l = 0; l < 3; ++l) {
      double c = 0, largest = 0;
      for (int h = 0; h < L.heads; ++h) {
        c += hn.v[h] * (1 + 3 * hn.a[h] * radius * radius) * std::exp(2 * hn.a[h] * radius * radius);
        largest = std::max(largest, 2 * hn.a[h] * radius * radius);
      }
      depth *= c;
      depth_exponents += largest * (1 + 2 * l);
      radius *= values;
    }
    const double rounding = formula_rounding(L.d);
    ASSERT_TRUE(std::isfinite(depth));
    EXPECT_NEAR(evaluate<double>(Bound::castin_sqrt_n, L, {}, s), sqrt_n, rounding * sqrt_n);
    EXPECT_NEAR(evaluate<double>(Bound::mf_query, L, {}, s), query, rounding * query);
    EXPECT_NEAR(evaluate<double>(Bound::mf_context, L, {}, s), context,
                through_exponentials(rounding, context_exponents) * context);
    EXPECT_NEAR(evaluate<double>(Bound::mf_self, L, {}, s), self,
                through_exponentials(rounding, self_exponents) * self);
    EXPECT_NEAR(evaluate<double>(Bound::mf_depth, L, {}, s), depth,
                through_exponentials(rounding, depth_exponents) * depth);
  }
}

TEST(DotBounds, LocalBoundMatchesAnIndependentEvaluation) {
  const AttentionLayer L = layer_of(AttentionKind::dot, 6, 2, 6, 2.0);
  const HeadNorms hn = head_norms(L);
  const Vector<double> z = standard_normal(7 * 6, 7);
  BoundSetting s;
  s.input = Eigen::Map<const Matrix<double>>(z.data(), 7, 6);
  const Matrix<double>& X = s.input;
  for (bool causal : {false, true}) {
    AttentionOptions o;
    o.causal = causal;
    double r = 0;
    for (int i = 0; i < X.rows(); ++i)
      for (int j = 0; j < X.rows(); ++j) r = std::max(r, (X.row(i) - X.row(j)).norm());
    double expected = 0, code = 0;
    for (int h = 0; h < L.heads; ++h) {
      const Matrix<double> A = L.WQ[h] * L.WK[h].transpose() / std::sqrt(double(L.head_dim));
      Matrix<double> S = X * A * X.transpose();  // S_ij = x_iᵀ A x_j
      Matrix<double> P = Matrix<double>::Zero(X.rows(), X.rows());
      for (int i = 0; i < X.rows(); ++i) {
        const int m = causal ? i + 1 : int(X.rows());
        const Eigen::RowVectorXd e = (S.row(i).head(m).array() - S.row(i).head(m).maxCoeff()).exp();
        P.row(i).head(m) = e / e.sum();
      }
      const double c_max = P.colwise().sum().maxCoeff();
      const double rho = (A * X.transpose()).colwise().norm().maxCoeff();                // max ‖A x_i‖
      const double rho_t = (A.transpose() * X.transpose()).colwise().norm().maxCoeff();  // max ‖Aᵀ x_i‖
      expected +=
          std::sqrt(3.0) * hn.v[h] * std::sqrt(c_max * (1 + r * r * rho_t * rho_t) + r * r * rho * rho);
      const double rho_h = std::max(rho, rho_t);
      code += hn.v[h] * std::sqrt(rho_h * rho_h * r * r * (X.rows() + 1) + X.rows());
    }
    // The scores S = X A Xᵀ (width d twice) and the softmax over n keys lengthen the chain by 2·d + n.
    const double rounding = formula_rounding(L.d + X.rows());
    EXPECT_NEAR(evaluate<double>(Bound::castin_local, L, o, s), expected, rounding * expected);
    EXPECT_NEAR(castin_local_code_form_claim<double>(L, o, s), code, rounding * code);
  }
}

TEST(NormBounds, MatchTheirFormulas) {
  AttentionLayer L = layer_of(AttentionKind::dot, 9, 3, 8);
  L.norm_gamma = Vector<double>::LinSpaced(9, -2.0, 1.5);
  L.norm_beta = Vector<double>::Constant(9, 0.5);
  L.norm_eps = 0.01;
  AttentionOptions ln, rms;
  ln.prenorm = Prenorm::layernorm;
  rms.prenorm = Prenorm::rmsnorm;
  const BoundSetting s;
  EXPECT_DOUBLE_EQ(evaluate<double>(Bound::softmax_half, L, {}, s), 0.5);
  EXPECT_DOUBLE_EQ(evaluate<double>(Bound::layernorm_two, L, ln, s), 2.0 / 0.1);
  EXPECT_DOUBLE_EQ(evaluate<double>(Bound::layernorm_inf, L, ln, s), 3.0 * 2.0 / 0.1);
  EXPECT_DOUBLE_EQ(evaluate<double>(Bound::rmsnorm_two, L, rms, s), 2.0 / 0.1);
  EXPECT_DOUBLE_EQ(evaluate<double>(Bound::rmsnorm_inf, L, rms, s), 3.0 * 2.0 / 0.1);
  // Radius after the pre-norm: √d‖γ‖∞ (+‖β‖ for LayerNorm) = 3·2 (+ 0.5·3).
  EXPECT_DOUBLE_EQ(prenorm_radius<double>(L, Prenorm::rmsnorm), 6.0);
  EXPECT_DOUBLE_EQ(prenorm_radius<double>(L, Prenorm::layernorm), 7.5);
  EXPECT_THROW(prenorm_radius<double>(L, Prenorm::none), InputError);
}

TEST(Composition, ResidualAddsOneAndPrenormMultipliesAndFixesTheRadius) {
  AttentionLayer L = layer_of(AttentionKind::l2, 4, 2, 9);
  L.norm_gamma = Vector<double>::Constant(4, 0.5);
  L.norm_eps = 0.0625;  // Lip₂(N) = 0.5/√ε = 2, Lip∞(N) = 2·√4 = 4
  const BoundSetting s = setting_with(5, 2.0);
  AttentionOptions res, pre;
  res.residual = true;
  pre.prenorm = Prenorm::rmsnorm;
  pre.residual = true;
  const double inf = evaluate<double>(Bound::kim_inf, L, {}, s),
               two = evaluate<double>(Bound::kim_two, L, {}, s);
  EXPECT_DOUBLE_EQ(evaluate<double>(Bound::kim_inf, L, res, s), 1 + inf);
  EXPECT_DOUBLE_EQ(evaluate<double>(Bound::kim_two, L, res, s), 1 + two);
  EXPECT_DOUBLE_EQ(evaluate<double>(Bound::kim_inf, L, pre, s), 1 + 4 * inf);
  EXPECT_DOUBLE_EQ(evaluate<double>(Bound::kim_two, L, pre, s), 1 + 2 * two);

  AttentionLayer D = layer_of(AttentionKind::dot, 4, 2, 10);
  D.norm_gamma = L.norm_gamma;
  D.norm_eps = L.norm_eps;
  // With the pre-norm the radius is √4·0.5 = 1 whatever --radius says.
  const BoundSetting at_one = setting_with(5, 1.0);
  const BoundSetting far = setting_with(5, 50.0);
  for (Bound b : {Bound::castin_sqrt_n, Bound::mf_query, Bound::mf_self}) {
    EXPECT_NEAR(evaluate<double>(b, D, pre, far), 1 + 2 * evaluate<double>(b, D, {}, at_one),
                formula_rounding(D.d) * evaluate<double>(b, D, pre, far));
    EXPECT_DOUBLE_EQ(evaluate<double>(b, D, res, at_one), 1 + evaluate<double>(b, D, {}, at_one));
  }
  // Theorem B: the residual's identity does not depend on the context.
  EXPECT_DOUBLE_EQ(evaluate<double>(Bound::mf_context, D, res, at_one),
                   evaluate<double>(Bound::mf_context, D, {}, at_one));
}

// ---------------------------------------------------------------------------------------------------------
// Scalar types against each other
// ---------------------------------------------------------------------------------------------------------

struct Config {
  AttentionLayer layer;
  AttentionOptions options;
  BoundSetting setting;
};

std::vector<Config> configurations() {
  std::vector<Config> out;
  BoundSetting s = setting_with(12, 1.3);
  s.query_radius = 0.8;
  s.depth = 2;
  const Vector<double> z = standard_normal(6 * 6, 11);
  s.input = Eigen::Map<const Matrix<double>>(z.data(), 6, 6);
  s.input.row(4) = s.input.row(1);  // a repeated token: differences of interval rows contain 0
  s.n = 6;
  for (AttentionKind kind : {AttentionKind::l2, AttentionKind::dot}) {
    for (int variant = 0; variant < 3; ++variant) {
      Config c{layer_of(kind, 6, 2, 20 + variant, 0.5 + variant), {}, s};
      c.options.residual = variant == 1;
      c.options.prenorm = variant == 2 ? Prenorm::layernorm : Prenorm::none;
      c.layer.norm_eps = 0.1;
      out.push_back(c);
    }
  }
  return out;
}

/// The double estimate against the 256-bit reference (exact here): formula_rounding's chain for d = 6, on
/// one side, amplified by the exponentials of the Castin and measure bounds, whose arguments (2‖A_h‖r²,
/// summed over the depth-2 stacks) reach ~15 in these configurations: c = 32.
const double exponential_formula_rounding = testing::rounding_bound<double>(32, 4.0 * 6 + 32);

TEST(ScalarTypes, IntervalEnclosesMpfrAndCertifiedUpperIsAtLeastTheEstimate) {
  for (const Config& c : configurations()) {
    int applied = 0;
    for (const BoundReport& r : theoretical_bounds(c.layer, c.options, c.setting)) {
      if (!r.applies) continue;
      ++applied;
      const Bound b = r.bound;
      mpfr reference;
      {
        const PrecisionGuard guard(256);
        reference = evaluate<mpfr>(b, c.layer, c.options, c.setting);
      }
      const PrecisionGuard guard(128);
      const interval enclosure = evaluate<interval>(b, c.layer, c.options, c.setting);
      EXPECT_TRUE(contains(enclosure, reference)) << info(b).id;
      EXPECT_GE(r.certified_upper, r.value) << info(b).id;
      EXPECT_NEAR(r.value, double(reference), exponential_formula_rounding * double(reference)) << info(b).id;
      // The certificate is tight on these small layers (product and Cholesky routes): each of the 2·H
      // certified norms within certified_upper_tightness of its estimate.
      EXPECT_LE(r.certified_upper,
                r.value * (1 + 2 * c.layer.heads * certified_upper_tightness + exponential_formula_rounding))
          << info(b).id;
    }
    EXPECT_GE(applied, 3);
  }
}

TEST(ScalarTypes, LargeLowRankProductsStayTightAndRankDeficientOnesFallBack) {
  // d = 300 > product_certification_limit with head_dim 4: ‖A_h‖₂ and ‖V_h‖₂ are certified through the 4×4
  // Cholesky-factor route, as tight as for small layers.
  operators::RandomLayerSpec spec;
  spec.d = 300;
  spec.heads = 2;
  spec.head_dim = 4;
  spec.seed = 12;
  AttentionLayer L = operators::random_layer(spec);
  const BoundSetting s = setting_with(10, 0.5);
  const auto mf_query_report = [&](const AttentionLayer& layer) {
    for (const BoundReport& r : theoretical_bounds(layer, {}, s))
      if (r.bound == Bound::mf_query) return r;
    ADD_FAILURE() << "mf.query_lipschitz missing";
    return BoundReport{};
  };
  const BoundReport tight = mf_query_report(L);
  ASSERT_TRUE(tight.applies);
  EXPECT_GE(tight.certified_upper, tight.value);
  // mf.query_lipschitz is Σ_h ‖V_h‖₂‖A_h‖₂R²: two certified norms per head, each within
  // certified_upper_tightness of its estimate.
  EXPECT_LE(tight.certified_upper, tight.value * (1 + 2 * certified_upper_tightness + formula_rounding(L.d)));
  EXPECT_EQ(tight.note.find("looser"), std::string::npos) << tight.note;
  // Two equal columns make W^Q_0 rank-deficient: its Gram matrix has no certified Cholesky factor, and the
  // 300×300 product is beyond the Cholesky limit, so the certificate falls back to looser bounds.
  L.WQ[0].col(1) = L.WQ[0].col(0);
  const BoundReport loose = mf_query_report(L);
  ASSERT_TRUE(loose.applies);
  EXPECT_GE(loose.certified_upper, loose.value);
  EXPECT_NE(loose.note.find("looser"), std::string::npos) << loose.note;
}

}  // namespace
}  // namespace regatta::lip
