// Every InputError of pairwise validate() (one line naming the argument), the accepted corner inputs, and
// log_kernel_matrix against directly computed scores and its size limit.
#include <gtest/gtest.h>

#include "reduce_cases.hpp"

namespace regatta::pairwise {
namespace {

using namespace reduce_test;

Case valid_case() {
  std::mt19937_64 rng(3);
  Case c;
  c.x = gaussian(rng, 4, 3);
  c.y = gaussian(rng, 5, 3);
  c.v = gaussian(rng, 5, 2);
  c.b = gaussian(rng, 5, 2);
  c.w = gaussian(rng, 5, 1);
  c.qmap = gaussian(rng, 3, 2);
  c.kmap = gaussian(rng, 3, 2);
  c.has_w = c.has_v = c.has_b = true;
  c.request.out = c.request.feature_mean = c.request.cross_moment = c.request.feature_second_moment =
      c.request.expected_score = true;
  return c;
}

struct ErrorCase {
  std::string what;
  std::string argument;  ///< must appear in the subject
  std::function<void(Case&)> mutate;
};

std::vector<ErrorCase> error_cases() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto dist = [](Case& c) { c.kernel.score = ScoreKind::neg_sq_dist; };
  return {
      {"null queries", "queries", [](Case& c) { c.null_queries = true; }},
      {"null keys", "keys", [](Case& c) { c.null_keys = true; }},
      {"no keys", "keys",
       [](Case& c) {
         c.y.resize(0, 3);
         c.v.resize(0, 2);
         c.b.resize(0, 2);
         c.w.resize(0);
       }},
      {"key width", "keys", [](Case& c) { c.y.conservativeResize(Eigen::NoChange, 2); }},
      {"log_weights size", "log_weights", [](Case& c) { c.w.conservativeResize(4); }},
      {"values rows", "values", [](Case& c) { c.v.conservativeResize(4, Eigen::NoChange); }},
      {"features rows", "features", [](Case& c) { c.b.conservativeResize(6, Eigen::NoChange); }},
      {"query_map rows", "query_map",
       [](Case& c) {
         c.has_qmap = true;
         c.qmap.conservativeResize(2, Eigen::NoChange);
         c.key_map = KeyMap::separate;
       }},
      {"key_map rows", "key_map",
       [](Case& c) {
         c.has_qmap = true;
         c.key_map = KeyMap::separate;
         c.kmap.conservativeResize(4, Eigen::NoChange);
       }},
      {"map widths", "key_map",
       [](Case& c) {
         c.has_qmap = true;
         c.key_map = KeyMap::separate;
         c.kmap.conservativeResize(Eigen::NoChange, 1);
       }},
      {"query_map alone changes the width", "query_map", [](Case& c) { c.has_qmap = true; }},
      {"NaN query", "queries", [=](Case& c) { c.x(2, 1) = nan; }},
      {"infinite key", "keys", [](Case& c) { c.y(0, 0) = -kInf; }},
      {"NaN value", "values", [=](Case& c) { c.v(4, 1) = nan; }},
      {"infinite feature", "features", [](Case& c) { c.b(1, 0) = kInf; }},
      {"NaN query_map", "query_map",
       [=](Case& c) {
         c.has_qmap = true;
         c.key_map = KeyMap::separate;
         c.qmap(1, 1) = nan;
       }},
      {"infinite key_map", "key_map",
       [](Case& c) {
         c.has_qmap = true;
         c.key_map = KeyMap::separate;
         c.kmap(0, 1) = kInf;
       }},
      {"NaN log-weight", "log_weights", [=](Case& c) { c.w(3) = nan; }},
      {"+inf log-weight", "log_weights", [](Case& c) { c.w(1) = kInf; }},
      {"all log-weights -inf", "log_weights", [](Case& c) { c.w.setConstant(-kInf); }},
      {"infinite scale (dot)", "scale", [](Case& c) { c.kernel.scale = kInf; }},
      {"NaN scale (dot)", "scale", [=](Case& c) { c.kernel.scale = nan; }},
      {"zero scale (neg_sq_dist)", "scale",
       [=](Case& c) {
         dist(c);
         c.kernel.scale = 0;
       }},
      {"negative scale (neg_dist_pow)", "scale",
       [](Case& c) {
         c.kernel.score = ScoreKind::neg_dist_pow;
         c.kernel.scale = -1;
       }},
      {"power below 1", "power",
       [](Case& c) {
         c.kernel.score = ScoreKind::neg_dist_pow;
         c.kernel.power = 0.5;
       }},
      {"infinite power", "power",
       [](Case& c) {
         c.kernel.score = ScoreKind::neg_dist_pow;
         c.kernel.power = kInf;
       }},
      {"NaN power", "power",
       [=](Case& c) {
         c.kernel.score = ScoreKind::neg_dist_pow;
         c.kernel.power = nan;
       }},
      {"out without values", "values", [](Case& c) { c.has_v = false; }},
      {"cross_moment without values", "values",
       [](Case& c) {
         c.has_v = false;
         c.request.out = false;
       }},
      {"feature_mean without features", "features",
       [](Case& c) {
         c.has_b = false;
         c.request.cross_moment = c.request.feature_second_moment = false;
       }},
      {"cross_moment without features", "features",
       [](Case& c) {
         c.has_b = false;
         c.request.feature_mean = c.request.feature_second_moment = false;
       }},
      {"feature_second_moment without features", "features",
       [](Case& c) {
         c.has_b = false;
         c.request.feature_mean = c.request.cross_moment = false;
       }},
      {"separate key_map for a distance score", "key_map",
       [=](Case& c) {
         dist(c);
         c.has_qmap = true;
         c.key_map = KeyMap::separate;
       }},
      {"causal: row 0 sees only -inf", "log_weights",
       [](Case& c) {
         c.kernel.mask = MaskKind::causal;
         c.w(0) = c.w(1) = -kInf;
       }},
      {"anticausal: more queries than keys", "mask",
       [](Case& c) {
         c.kernel.mask = MaskKind::anticausal;
         c.x = Matrix<double>::Constant(6, 3, 0.5);
       }},
      {"anticausal: last row sees only -inf", "log_weights",
       [](Case& c) {
         c.kernel.mask = MaskKind::anticausal;
         c.w(3) = c.w(4) = -kInf;
       }},
  };
}

template <class S>
class PairwiseErrors : public ::testing::Test {};
TYPED_TEST_SUITE(PairwiseErrors, AllScalars, testing::ScalarNames);

TYPED_TEST(PairwiseErrors, EveryBadInputThrowsOneLineNamingTheArgument) {
  using S = TypeParam;
  for (const ErrorCase& ec : error_cases()) {
    Case c = valid_case();
    ec.mutate(c);
    at_precision<S>([&] {
      Converted<S> p(c);
      auto check = [&](const char* entry, auto&& call) {
        try {
          call();
          ADD_FAILURE() << entry << ": no InputError for " << ec.what;
        } catch (const InputError& e) {
          const std::string msg = e.what();
          EXPECT_EQ(msg.find('\n'), std::string::npos) << ec.what << ": " << msg;
          EXPECT_EQ(e.subject().rfind("pairwise ", 0), 0u) << ec.what << ": " << msg;
          EXPECT_NE(e.subject().find(ec.argument), std::string::npos)
              << ec.what << ": subject should name " << ec.argument << ": " << msg;
          EXPECT_FALSE(e.problem().empty()) << ec.what;
        }
      };
      check("validate", [&] { validate<S>(p.problem, c.kernel, c.request); });
      check("reduce", [&] { (void)reduce<S>(p.problem, c.kernel, c.request); });
      check("reduce_materialized", [&] { (void)reduce_materialized<S>(p.problem, c.kernel, c.request); });
    });
  }
}

TYPED_TEST(PairwiseErrors, AcceptedCornerInputs) {
  using S = TypeParam;
  std::vector<std::pair<std::string, std::function<void(Case&)>>> ok = {
      {"-inf log-weights", [](Case& c) { c.w(0) = c.w(3) = -kInf; }},
      {"negative and zero dot scale", [](Case& c) { c.kernel.scale = -2; }},
      {"zero dot scale", [](Case& c) { c.kernel.scale = 0; }},
      {"causal with more queries than keys",
       [](Case& c) {
         c.kernel.mask = MaskKind::causal;
         c.x = Matrix<double>::Constant(9, 3, 0.5);
         c.w(1) = c.w(2) = -kInf;
       }},
      {"anticausal, square",
       [](Case& c) {
         c.kernel.mask = MaskKind::anticausal;
         c.x = Matrix<double>::Constant(5, 3, 0.5);
         c.w(0) = -kInf;
       }},
      {"key_map same as query_map for a distance score",
       [](Case& c) {
         c.kernel.score = ScoreKind::neg_dist_pow;
         c.kernel.power = 1.25;
         c.has_qmap = true;
         c.key_map = KeyMap::same;
       }},
      {"dot with separate maps",
       [](Case& c) {
         c.has_qmap = true;
         c.key_map = KeyMap::separate;
       }},
      {"no queries",
       [](Case& c) {
         c.kernel.mask = MaskKind::anticausal;
         c.x.resize(0, 3);
       }},
      {"nothing but lse",
       [](Case& c) {
         c.has_v = c.has_b = c.has_w = false;
         c.request = Request{};
         c.request.out = false;
       }},
  };
  for (auto& entry : ok) {  // not a structured binding: clang 14 cannot capture one in the lambda below
    const auto& what = entry.first;
    Case c = valid_case();
    entry.second(c);
    at_precision<S>([&] {
      Converted<S> p(c);
      EXPECT_NO_THROW(validate<S>(p.problem, c.kernel, c.request)) << what;
      Result<S> r;
      EXPECT_NO_THROW(r = reduce<S>(p.problem, c.kernel, c.request)) << what;
      EXPECT_NO_THROW((void)reduce_materialized<S>(p.problem, c.kernel, c.request)) << what;
      EXPECT_EQ(r.lse.size(), c.x.rows()) << what;
      for (Eigen::Index i = 0; i < r.lse.size(); ++i)
        EXPECT_TRUE(scalar_traits<S>::is_finite(r.lse(i))) << what << " row " << i;
    });
  }
}

// ---------------------------------------------------------------------------------------------------------
// log_kernel_matrix
// ---------------------------------------------------------------------------------------------------------

TEST(PairwiseLogKernel, MatchesDirectScores) {
  for (ScoreKind score : {ScoreKind::dot, ScoreKind::neg_sq_dist, ScoreKind::neg_dist_pow}) {
    Case c = valid_case();
    c.kernel.score = score;
    c.kernel.scale = 0.75;
    c.kernel.power = 1.5;
    c.kernel.mask = MaskKind::causal;
    c.w(2) = -kInf;
    Converted<double> p(c);
    const Matrix<double> t = log_kernel_matrix<double>(p.problem, c.kernel);
    ASSERT_EQ(t.rows(), c.x.rows());
    ASSERT_EQ(t.cols(), c.y.rows());
    const Tolerance tol = tolerance(c, Vector<double>::Zero(c.x.rows()), Form::difference, eps<double>());
    PrecisionGuard guard(256);
    for (Eigen::Index i = 0; i < t.rows(); ++i)
      for (Eigen::Index j = 0; j < t.cols(); ++j) {
        if (!visible(c, i, j)) {
          EXPECT_EQ(t(i, j), -kInf) << i << ", " << j;
          continue;
        }
        mpfr s(0);
        for (Eigen::Index k = 0; k < c.x.cols(); ++k) {
          const mpfr xk(c.x(i, k)), yk(c.y(j, k));
          s += score == ScoreKind::dot ? mpfr(xk * yk) : mpfr((xk - yk) * (xk - yk));
        }
        if (score == ScoreKind::neg_dist_pow) s = pow(sqrt(s), mpfr(c.kernel.power));
        const mpfr exact =
            (score == ScoreKind::dot ? mpfr(c.kernel.scale) : mpfr(-c.kernel.scale)) * s + c.w(j);
        // lse tolerance at lse = 0 is 2·(A + (2m+2)u) ≥ 2·E_ij: a bound on the error of every visible t_ij.
        EXPECT_LE(scalar_traits<mpfr>::to_double(abs(mpfr(t(i, j)) - exact)), tol.lse(i))
            << to_string(score) << " t(" << i << ", " << j << ")";
      }
  }
}

TEST(PairwiseLogKernel, RefusesHugeSizesWithoutAllocating) {
  // 2^15 × 2^15 = 2^30 entries > max_materialized_entries = 2^28 (8 GiB of doubles), and 2^20 × 2^20 whose
  // product would overflow a naive 32-bit count: both refused with InputError before any allocation (an
  // attempt to allocate 2^40 doubles would surface as std::bad_alloc, not InputError).
  for (Eigen::Index n : {Eigen::Index(1) << 15, Eigen::Index(1) << 20}) {
    Matrix<double> x = Matrix<double>::Zero(n, 1), y = Matrix<double>::Zero(n, 1),
                   v = Matrix<double>::Zero(n, 1);
    Problem<double> p;
    p.queries = &x;
    p.keys = &y;
    p.values = &v;
    EXPECT_THROW((void)log_kernel_matrix<double>(p, Kernel{}), InputError);
    EXPECT_THROW((void)reduce_materialized<double>(p, Kernel{}), InputError);
    try {
      (void)log_kernel_matrix<double>(p, Kernel{});
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("max_materialized_entries"), std::string::npos) << e.what();
    }
  }
}

TEST(PairwiseNames, ToString) {
  EXPECT_EQ(to_string(ScoreKind::dot), "dot");
  EXPECT_EQ(to_string(ScoreKind::neg_sq_dist), "neg_sq_dist");
  EXPECT_EQ(to_string(ScoreKind::neg_dist_pow), "neg_dist_pow");
  EXPECT_EQ(to_string(MaskKind::none), "none");
  EXPECT_EQ(to_string(MaskKind::causal), "causal");
  EXPECT_EQ(to_string(MaskKind::anticausal), "anticausal");
}

}  // namespace
}  // namespace regatta::pairwise
