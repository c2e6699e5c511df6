// Theoretical bounds (operators/lipschitz/bounds.hpp) checked against
//   * the reference values of docs/math/bounds.md and claims.md (Λ_n table, 4Λ_n + 1, √n(4Λ_n + 1), the
//     kim.thm32_2_quoted counterexample), computed there at high precision;
//   * an independent evaluation of each formula written here (Eigen's JacobiSVD on the full matrices,
//     per-head sums arranged differently) for random multi-head layers;
//   * the scalar types against each other: the interval enclosure (128 bits) contains the mpfr value at 256
//     bits, and the certified upper bound is at least the double estimate;
// and every refusal (InputError from evaluate, a reason in theoretical_bounds).
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>
#include "support/tolerance.hpp"

namespace regatta::lip {
namespace {

using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Prenorm;

AttentionLayer layer_of(AttentionKind kind, int d, int heads, std::uint64_t seed, double scale = 1.0,
                        bool biases = false) {
  operators::RandomLayerSpec spec;
  spec.d = d;
  spec.heads = heads;
  spec.seed = seed;
  spec.scale = scale;
  spec.kind = kind;
  spec.biases = biases;
  return operators::random_layer(spec);
}

/// One-dimensional single-head tied L2 layer with W^Q = W^K = q, W^V = W^O = 1
/// (docs/math/bounds.md#kim-thm32, docs/math/bounds.md#kim-tightness).
AttentionLayer scalar_l2_layer(double q) {
  AttentionLayer L;
  L.d = L.heads = L.head_dim = L.value_dim = 1;
  L.kind = AttentionKind::l2;
  L.WQ = {Matrix<double>::Constant(1, 1, q)};
  L.WK = L.WQ;
  L.WV = {Matrix<double>::Constant(1, 1, 1.0)};
  L.WO = Matrix<double>::Constant(1, 1, 1.0);
  return L;
}

double svd_norm(const Matrix<double>& M) { return largest_singular_value(M); }

double max_row_sum(const Matrix<double>& M) { return M.cwiseAbs().rowwise().sum().maxCoeff(); }

// ---- tolerances (docs/math/README.md#checking) ----

/// Relative accuracy of a reference value written with the significant decimal digits of `text`: one unit in
/// its last digit (whether the table rounded or truncated), at most 10^(1 − digits) relative.
mpfr significant_digits_accuracy(const std::string& text) {
  int digits = 0;
  bool leading = true;
  for (char ch : text) {
    if (ch < '0' || ch > '9') continue;
    if (leading && ch == '0') continue;
    leading = false;
    ++digits;
  }
  return pow(mpfr(10), mpfr(1 - digits));
}

/// Absolute accuracy of a reference value written with the decimals of `text`: one unit in its last place.
double last_place(const std::string& text) {
  const std::size_t point = text.find('.');
  return std::pow(10.0, -double(point == std::string::npos ? 0 : text.size() - point - 1));
}

/// A bound's formula evaluated in double twice (by evaluate and independently here) from spectral norms and
/// row sums of d×d products: each a chain of ≲ 4·d rounded operations (a product of width d, then JacobiSVD,
/// spectral_norm_reference or a d-term sum), and ≲ 32 more to combine the heads, Λ_n and the radii. c = 2
/// for the two sides.
double formula_rounding(Eigen::Index d) { return testing::rounding_bound<double>(2, 4.0 * double(d) + 32); }

/// exp(x) turns a relative error r of its argument x into the relative error x·r of its value, so a formula
/// whose exponentials' arguments sum to `exponents` carries (1 + exponents) times its inputs' rounding.
double through_exponentials(double rounding, double exponents) { return rounding * (1 + exponents); }

BoundSetting setting_with(std::optional<std::int64_t> n, std::optional<double> radius) {
  BoundSetting s;
  s.n = n;
  s.radius = radius;
  return s;
}

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

// ---------------------------------------------------------------------------------------------------------
// Refusals
// ---------------------------------------------------------------------------------------------------------

/// The reason theoretical_bounds gives for `bound` (empty when it applies), and evaluate throws iff refused.
std::string reason_for(Bound bound, const AttentionLayer& L, const AttentionOptions& o, const BoundSetting& s,
                       std::optional<Norm> norm = {}) {
  for (const BoundReport& r : theoretical_bounds(L, o, s, norm))
    if (r.bound == bound) {
      if (!norm) {
        if (r.applies)
          EXPECT_NO_THROW(evaluate<double>(bound, L, o, s));
        else
          EXPECT_THROW(evaluate<double>(bound, L, o, s), InputError);
      }
      EXPECT_EQ(r.applies, r.reason.empty());
      return r.reason;
    }
  ADD_FAILURE() << "bound missing from the list";
  return "";
}

bool mentions(const std::string& reason, const std::string& word) {
  return reason.find(word) != std::string::npos;
}

TEST(Refusals, L2BoundsNeedATiedL2LayerWithTheDiagonalAndN) {
  const AttentionLayer l2 = layer_of(AttentionKind::l2, 4, 2, 30);
  const BoundSetting s = setting_with(8, 1.0);
  for (Bound b : {Bound::kim_inf, Bound::kim_two}) {
    EXPECT_EQ(reason_for(b, l2, {}, s), "");
    EXPECT_TRUE(mentions(reason_for(b, layer_of(AttentionKind::dot, 4, 2, 30), {}, s), "dot-product"));
    AttentionLayer untied = l2;
    untied.WK[1](0, 0) += 0.125;
    EXPECT_TRUE(mentions(reason_for(b, untied, {}, s), "untied"));
    BoundSetting masked = s;
    masked.diagonal_masked = true;
    EXPECT_TRUE(mentions(reason_for(b, l2, {}, masked), "diagonal"));
    EXPECT_TRUE(mentions(reason_for(b, l2, {}, setting_with(std::nullopt, 1.0)), "--n"));
    EXPECT_TRUE(mentions(reason_for(b, l2, {}, setting_with(1, 1.0)), "n >= 2"));
    AttentionOptions sinkhorn;
    sinkhorn.sinkhorn_iterations = 3;
    EXPECT_TRUE(mentions(reason_for(b, l2, sinkhorn, s), "Sinkhorn"));
    // The causal mask keeps the diagonal: covered (kim.causal_l2), same value.
    AttentionOptions causal;
    causal.causal = true;
    EXPECT_EQ(reason_for(b, l2, causal, s), "");
    EXPECT_EQ(evaluate<double>(b, l2, causal, s), evaluate<double>(b, l2, {}, s));
    // Tied biases cancel.
    EXPECT_EQ(reason_for(b, layer_of(AttentionKind::l2, 4, 2, 31, 1.0, true), {}, s), "");
  }
  // The norm a bound does not cover.
  EXPECT_TRUE(mentions(reason_for(Bound::kim_two, l2, {}, s, Norm::inf), "covers the 2-norm only"));
  EXPECT_TRUE(mentions(reason_for(Bound::kim_inf, l2, {}, s, Norm::two), "covers the inf-norm only"));
  EXPECT_EQ(reason_for(Bound::kim_inf, l2, {}, s, Norm::inf), "");
  EXPECT_EQ(reason_for(Bound::softmax_half, l2, {}, s, Norm::inf), "");
}

TEST(Refusals, DotProductBoundsNeedADotLayerARadiusAndNoQueryBias) {
  const AttentionLayer dot = layer_of(AttentionKind::dot, 4, 2, 32);
  BoundSetting s = setting_with(8, 1.0);
  s.depth = 2;
  s.input = Matrix<double>::Identity(3, 4);
  s.n.reset();
  BoundSetting with_n = s;
  with_n.input.resize(0, 0);
  with_n.n = 8;
  const std::vector<Bound> dot_bounds{Bound::castin_sqrt_n, Bound::castin_local, Bound::mf_query,
                                      Bound::mf_context,    Bound::mf_self,      Bound::mf_depth};
  for (Bound b : dot_bounds) {
    const BoundSetting& use = b == Bound::castin_local ? s : with_n;
    EXPECT_EQ(reason_for(b, dot, {}, use), "") << info(b).id;
    EXPECT_TRUE(mentions(reason_for(b, layer_of(AttentionKind::l2, 4, 2, 32), {}, use), "L2 layer"));
    EXPECT_TRUE(
        mentions(reason_for(b, layer_of(AttentionKind::dot, 4, 2, 33, 1.0, true), {}, use), "query bias"));
    AttentionOptions sinkhorn;
    sinkhorn.sinkhorn_iterations = 2;
    EXPECT_TRUE(mentions(reason_for(b, dot, sinkhorn, use), "Sinkhorn"));
    EXPECT_TRUE(mentions(reason_for(b, dot, {}, use, Norm::inf), "--norm inf"));
  }
  BoundSetting no_radius = with_n;
  no_radius.radius.reset();
  for (Bound b :
       {Bound::castin_sqrt_n, Bound::mf_query, Bound::mf_context, Bound::mf_self, Bound::mf_depth}) {
    EXPECT_TRUE(mentions(reason_for(b, dot, {}, no_radius), "--radius")) << info(b).id;
    AttentionOptions pre;
    pre.prenorm = Prenorm::rmsnorm;
    EXPECT_EQ(reason_for(b, dot, pre, no_radius), "") << info(b).id;  // the pre-norm fixes the radius
  }
  AttentionOptions causal;
  causal.causal = true;
  for (Bound b : {Bound::mf_query, Bound::mf_context, Bound::mf_self, Bound::mf_depth})
    EXPECT_TRUE(mentions(reason_for(b, dot, causal, with_n), "masked mean field"));
  EXPECT_EQ(reason_for(Bound::castin_sqrt_n, dot, causal, with_n), "");  // masks allowed
  EXPECT_EQ(reason_for(Bound::castin_local, dot, causal, s), "");
  EXPECT_TRUE(mentions(reason_for(Bound::castin_sqrt_n, dot, {}, setting_with(std::nullopt, 1.0)), "--n"));
  EXPECT_TRUE(mentions(reason_for(Bound::castin_local, dot, {}, with_n), "--input"));
  BoundSetting single = with_n;
  single.depth = 1;
  EXPECT_TRUE(mentions(reason_for(Bound::mf_depth, dot, {}, single), "--depth"));
  AttentionOptions residual;
  residual.residual = true;
  EXPECT_THROW(castin_local_code_form_claim<double>(dot, residual, s), InputError);
}

TEST(Refusals, NormConstantsNeedTheirPrenorm) {
  const AttentionLayer L = layer_of(AttentionKind::dot, 4, 2, 34);
  AttentionOptions ln, rms;
  ln.prenorm = Prenorm::layernorm;
  rms.prenorm = Prenorm::rmsnorm;
  const BoundSetting s;
  for (Bound b : {Bound::layernorm_two, Bound::layernorm_inf}) {
    EXPECT_EQ(reason_for(b, L, ln, s), "");
    EXPECT_TRUE(mentions(reason_for(b, L, {}, s), "LayerNorm"));
    EXPECT_TRUE(mentions(reason_for(b, L, rms, s), "LayerNorm"));
  }
  for (Bound b : {Bound::rmsnorm_two, Bound::rmsnorm_inf}) {
    EXPECT_EQ(reason_for(b, L, rms, s), "");
    EXPECT_TRUE(mentions(reason_for(b, L, ln, s), "RMSNorm"));
  }
  EXPECT_EQ(reason_for(Bound::softmax_half, L, {}, s), "");
}

TEST(Refusals, BadInputThrowsInsteadOfRefusing) {
  const AttentionLayer L = layer_of(AttentionKind::dot, 4, 2, 35);
  const auto throws = [&](BoundSetting s) {
    EXPECT_THROW(theoretical_bounds(L, {}, s), InputError);
    EXPECT_THROW(refusal(Bound::softmax_half, L, {}, s), InputError);
  };
  throws(setting_with(0, 1.0));
  throws(setting_with(5, 0.0));
  throws(setting_with(5, -1.0));
  throws(setting_with(5, std::nan("")));
  BoundSetting depth = setting_with(5, 1.0);
  depth.depth = 0;
  throws(depth);
  BoundSetting width = setting_with(std::nullopt, 1.0);
  width.input = Matrix<double>::Zero(3, 5);
  throws(width);
  BoundSetting rows = setting_with(4, 1.0);
  rows.input = Matrix<double>::Zero(3, 4);
  throws(rows);
  BoundSetting nonfinite = setting_with(std::nullopt, 1.0);
  nonfinite.input = Matrix<double>::Zero(3, 4);
  nonfinite.input(1, 2) = INFINITY;
  throws(nonfinite);
  AttentionLayer broken = L;
  broken.WO.resize(3, 3);
  EXPECT_THROW(theoretical_bounds(broken, {}, BoundSetting{}), InputError);
  EXPECT_THROW(parse_norm("1"), InputError);
  EXPECT_EQ(parse_norm("inf"), Norm::inf);
  EXPECT_EQ(parse_norm("2"), Norm::two);
}

TEST(Catalogue, EveryBoundIsDescribedAndDerived) {
  for (Bound b : all_bounds()) {
    const BoundInfo& i = info(b);
    EXPECT_FALSE(i.id.empty());
    EXPECT_FALSE(i.name.empty());
    EXPECT_FALSE(i.hypotheses.empty());
    EXPECT_NE(i.source.find("bounds.md"), std::string::npos);
    EXPECT_EQ(i.provenance,
              "derived");  // only derived statements are offered as bounds (docs/math/bounds.md)
  }
}

TEST(Catalogue, EveryEnumeratorIsOneRowWithItsOwnId) {
  // The table's size is the enum's (static_assert in bound_table.cpp); here: each enumerator exactly once,
  // in enum order, with distinct IDs.
  ASSERT_EQ(all_bounds().size(), static_cast<std::size_t>(Bound::count));
  std::set<std::string> ids;
  for (std::size_t i = 0; i < all_bounds().size(); ++i) {
    EXPECT_EQ(all_bounds()[i], static_cast<Bound>(i));
    EXPECT_TRUE(ids.insert(info(all_bounds()[i]).id).second) << info(all_bounds()[i]).id << " used twice";
  }
}

TEST(Catalogue, DocsListEveryRowInTableOrder) {
  // docs/bounds.md "Every bound": one table line per row, `id` first, in the table's order.
  std::ifstream in(std::string(REGATTA_TEST_DATA_DIR) + "/../../docs/bounds.md");
  ASSERT_TRUE(in) << "docs/bounds.md not found";
  std::vector<std::string> listed;
  std::string line;
  bool inside = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) inside = line == "## Every bound";
    if (inside && line.rfind("| `", 0) == 0) listed.push_back(line.substr(3, line.find('`', 3) - 3));
  }
  std::vector<std::string> table;
  for (Bound b : all_bounds()) table.push_back(info(b).id);
  EXPECT_EQ(listed, table);
}

TEST(Catalogue, SequenceBoundsAndNormsComeFromTheTable) {
  // The bracket compares the bounds on the n-token map: the Kim and Castin sqrt(n) rows (plain, augmented).
  std::set<std::string> sequence;
  for (Bound b : all_bounds())
    if (is_sequence_bound(b)) sequence.insert(info(b).id);
  EXPECT_EQ(sequence, (std::set<std::string>{"kim.thm32_inf", "kim.thm32_2", "castin.sqrt_n",
                                             "castin.sqrt_n_augmented"}));
  for (Bound b : all_bounds()) {
    const std::string& n = info(b).norm;
    EXPECT_EQ(covers(b, Norm::inf), n == "inf" || n == "2 and inf") << info(b).id;
    EXPECT_EQ(covers(b, Norm::two), n != "inf") << info(b).id;
  }
}

}  // namespace
}  // namespace regatta::lip
