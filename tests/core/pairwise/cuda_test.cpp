// The GPU path (pairwise_cuda.hpp) against the CPU path: cuda::reduce<float> and cuda::reduce<double> must
// agree with pairwise::reduce<double> on the same inputs (float inputs are rounded once and handed to both,
// so only the arithmetic differs) for every score, mask, −inf log-weights and several shapes.
//
// Without a usable GPU (CI, or a build with REGATTA_CUDA=OFF) the comparisons skip with availability()'s
// reason, and the tests of the unavailable path run instead.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <regatta/core/error.hpp>
#include <regatta/core/pairwise.hpp>
#include <regatta/core/pairwise_cuda.hpp>
#include <regatta/core/random_matrix.hpp>
#include <string>
#include <type_traits>
#include <vector>

#include "support/scalar_names.hpp"

namespace regatta::pairwise {
namespace {

#define REGATTA_REQUIRE_GPU()                                          \
  do {                                                                 \
    const cuda::Availability gpu = cuda::availability();               \
    if (!gpu.available) GTEST_SKIP() << "no GPU path: " << gpu.reason; \
  } while (false)

/// The thresholds on the relative error |x̂ − x| / max(|x|, 1) (relative above 1, absolute below: lse
/// and out are O(1)–O(10) here): 1e-5 ≈ 170 float ulps, 1e-12 ≈ 9000 double ulps. With scores of size O(1)
/// the rounding of a score (O(d) terms) and of the running sum (O(√m) typical growth for m ≤ 1000) stay well
/// inside them.
template <class S>
constexpr double tolerance() {
  return std::is_same_v<S, float> ? 1e-5 : 1e-12;
}

double relative_error(double approx, double exact) {
  return std::abs(approx - exact) / std::max(std::abs(exact), 1.0);
}

/// Random inputs in double, already rounded to S (so that the CPU reference sees exactly the GPU's inputs).
template <class S>
Matrix<double> random_rounded(Eigen::Index rows, Eigen::Index cols, std::uint64_t seed, double factor = 1.0) {
  RandomMatrixSpec spec;
  spec.rows = rows;
  spec.cols = cols;
  spec.seed = seed;
  return (random_matrix(spec) * factor).template cast<S>().template cast<double>();
}

struct Case {
  Eigen::Index n, m, d, e;
  Kernel kernel;
  bool neg_inf_weights;
};

std::string describe(const Case& c) {
  return "n=" + std::to_string(c.n) + " m=" + std::to_string(c.m) + " d=" + std::to_string(c.d) +
         " e=" + std::to_string(c.e) + " score=" + to_string(c.kernel.score) +
         " p=" + std::to_string(c.kernel.power) + " mask=" + to_string(c.kernel.mask) +
         (c.neg_inf_weights ? " with -inf weights" : "");
}

/// Scale so that the scores are O(1)–O(5): ⟨x, y⟩ ~ √d, ‖x − y‖² ~ 2d for standard normal coordinates.
double natural_scale(ScoreKind score, double power, Eigen::Index d) {
  const double dd = static_cast<double>(d);
  switch (score) {
    case ScoreKind::dot:
      return 2.0 / std::sqrt(dd);
    case ScoreKind::neg_sq_dist:
      return 1.0 / dd;
    case ScoreKind::neg_dist_pow:
      return 2.0 / std::pow(2.0 * dd, power / 2.0);
  }
  return 1.0;
}

/// Runs one case on the GPU in S and on the CPU in double; returns the worst relative error of lse and out.
/// The error of t_ij grows like eps·|t_ij|; tolerance_factor (≥ 1) scales the tolerance for huge scores.
template <class S>
void compare(const Case& c, std::uint64_t seed, double tolerance_factor = 1.0) {
  SCOPED_TRACE(describe(c));
  const Matrix<double> x = random_rounded<S>(c.n, c.d, seed);
  const Matrix<double> y = random_rounded<S>(c.m, c.d, seed + 1);
  const Matrix<double> v = random_rounded<S>(c.m, c.e, seed + 2);
  Vector<double> w = random_rounded<S>(c.m, 1, seed + 3, 0.5).col(0);
  if (c.neg_inf_weights) {
    // About a quarter of the keys get ω_j = −inf; keys 0 and m − 1 keep a finite weight so that every row
    // still sees a key under either mask.
    const Vector<double> u = standard_normal(c.m, seed + 4);
    for (Eigen::Index j = 1; j + 1 < c.m; ++j)
      if (u(j) > 0.67) w(j) = -std::numeric_limits<double>::infinity();
  }

  Problem<double> reference;
  reference.queries = &x;
  reference.keys = &y;
  reference.log_weights = &w;
  reference.values = &v;
  const Result<double> cpu = reduce<double>(reference, c.kernel);

  const Matrix<S> xs = x.cast<S>();
  const Matrix<S> ys = y.cast<S>();
  const Matrix<S> vs = v.cast<S>();
  const Vector<S> ws = w.cast<S>();
  Problem<S> problem;
  problem.queries = &xs;
  problem.keys = &ys;
  problem.log_weights = &ws;
  problem.values = &vs;
  const Result<S> gpu = cuda::reduce<S>(problem, c.kernel);

  ASSERT_EQ(gpu.lse.size(), c.n);
  ASSERT_EQ(gpu.out.rows(), c.n);
  ASSERT_EQ(gpu.out.cols(), c.e);
  double worst_lse = 0;
  double worst_out = 0;
  for (Eigen::Index i = 0; i < c.n; ++i) {
    worst_lse = std::max(worst_lse, relative_error(gpu.lse(i), cpu.lse(i)));
    for (Eigen::Index k = 0; k < c.e; ++k)
      worst_out = std::max(worst_out, relative_error(gpu.out(i, k), cpu.out(i, k)));
    ASSERT_TRUE(std::isfinite(static_cast<double>(gpu.lse(i)))) << "row " << i;
  }
  EXPECT_LE(worst_lse, tolerance_factor * tolerance<S>()) << "lse";
  EXPECT_LE(worst_out, tolerance_factor * tolerance<S>()) << "out";
}

/// Every shape (n, m ∈ {1, 7, 128, 1000}, d ∈ {1, 16, 64}) for one score, all masks, with and without −inf
/// weights (the anticausal mask needs m ≥ n so that every row sees a key).
template <class S>
void sweep(ScoreKind score, double power) {
  const std::vector<Eigen::Index> sizes = {1, 7, 128, 1000};
  const std::vector<Eigen::Index> dims = {1, 16, 64};
  std::uint64_t seed = 1000;
  for (Eigen::Index n : sizes)
    for (Eigen::Index m : sizes)
      for (Eigen::Index d : dims)
        for (MaskKind mask : {MaskKind::none, MaskKind::causal, MaskKind::anticausal}) {
          if (mask == MaskKind::anticausal && m < n) continue;
          Case c{n,
                 m,
                 d,
                 3 + d % 5,
                 Kernel{score, natural_scale(score, power, d), power, mask},
                 (seed % 2) == 0};
          compare<S>(c, seed);
          seed += 10;
          if (::testing::Test::HasFatalFailure()) return;
        }
}

template <class S>
class CudaReduceTest : public ::testing::Test {};
using Scalars = ::regatta::testing::TypesOf<::regatta::scalars::hardware>;
class ScalarName {
 public:
  template <class S>
  static std::string GetName(int) {
    return std::is_same_v<S, float> ? "float" : "double";
  }
};
TYPED_TEST_SUITE(CudaReduceTest, Scalars, ScalarName);

TYPED_TEST(CudaReduceTest, DotMatchesCpu) {
  REGATTA_REQUIRE_GPU();
  sweep<TypeParam>(ScoreKind::dot, 1.0);
}

TYPED_TEST(CudaReduceTest, NegSqDistMatchesCpu) {
  REGATTA_REQUIRE_GPU();
  sweep<TypeParam>(ScoreKind::neg_sq_dist, 1.0);
}

TYPED_TEST(CudaReduceTest, NegDistPowMatchesCpu) {
  REGATTA_REQUIRE_GPU();
  sweep<TypeParam>(ScoreKind::neg_dist_pow, 1.0);
  sweep<TypeParam>(ScoreKind::neg_dist_pow, 3.0);
}

// The largest supported dimensions (d = e = 256): every lane holds 8 coordinates; keys tile in few per block.
TYPED_TEST(CudaReduceTest, LargestDimensionsMatchCpu) {
  REGATTA_REQUIRE_GPU();
  for (ScoreKind score : {ScoreKind::dot, ScoreKind::neg_sq_dist})
    compare<TypeParam>(
        Case{300, 257, 256, 256, Kernel{score, natural_scale(score, 1.0, 256), 1.0, MaskKind::causal}, true},
        7);
}

// Huge logits: the running maximum must keep exp() in range (scores up to ~ ±2000, so exp alone would
// overflow). The rounding error of t_ij is then O(eps·scale·|⟨x_i, y_j⟩|): the tolerance scales with scale.
TYPED_TEST(CudaReduceTest, HugeLogitsStayFinite) {
  REGATTA_REQUIRE_GPU();
  const double scale = 100.0;
  compare<TypeParam>(Case{64, 200, 16, 4, Kernel{ScoreKind::dot, scale, 1.0, MaskKind::none}, false}, 11,
                     scale);
}

// lse only (no values), and the linear maps applied on the host.
TYPED_TEST(CudaReduceTest, LseOnlyAndLinearMapsMatchCpu) {
  REGATTA_REQUIRE_GPU();
  using S = TypeParam;
  const Matrix<double> x = random_rounded<S>(50, 12, 21);
  const Matrix<double> y = random_rounded<S>(70, 12, 22);
  const Matrix<double> a = random_rounded<S>(12, 5, 23, 0.3);
  const Matrix<double> b = random_rounded<S>(12, 5, 24, 0.3);
  const Matrix<S> xs = x.cast<S>(), ys = y.cast<S>(), as = a.cast<S>(), bs = b.cast<S>();
  Request lse_only;
  lse_only.out = false;
  for (ScoreKind score : {ScoreKind::dot, ScoreKind::neg_sq_dist}) {
    SCOPED_TRACE(to_string(score));
    const Kernel kernel{score, 0.5, 1.0, MaskKind::none};
    Problem<double> reference{&x, &y, nullptr, nullptr, nullptr, &a, score == ScoreKind::dot ? &b : nullptr};
    Problem<S> problem{&xs, &ys, nullptr, nullptr, nullptr, &as, score == ScoreKind::dot ? &bs : nullptr};
    const Result<double> cpu = reduce<double>(reference, kernel, lse_only);
    const Result<S> gpu = cuda::reduce<S>(problem, kernel, lse_only);
    ASSERT_EQ(gpu.lse.size(), cpu.lse.size());
    EXPECT_EQ(gpu.out.size(), 0);
    for (Eigen::Index i = 0; i < cpu.lse.size(); ++i)
      EXPECT_LE(relative_error(gpu.lse(i), cpu.lse(i)), tolerance<S>()) << "row " << i;
  }
}

/// A small valid problem, kept alive by the fixture.
struct SmallProblem {
  Matrix<double> x = Matrix<double>::Ones(3, 2);
  Matrix<double> y = Matrix<double>::Ones(4, 2);
  Matrix<double> v = Matrix<double>::Ones(4, 1);
  Problem<double> problem{&x, &y, nullptr, &v};
};

TEST(CudaReduce, UnsupportedRequestsAndDimensionsThrowInputError) {
  SmallProblem small;
  for (int field = 0; field < 4; ++field) {
    Request request;
    request.feature_mean = field == 0;
    request.cross_moment = field == 1;
    request.feature_second_moment = field == 2;
    request.expected_score = field == 3;
    EXPECT_THROW(cuda::reduce<double>(small.problem, Kernel{}, request), InputError) << "field " << field;
  }
  const Matrix<double> wide = Matrix<double>::Zero(2, cuda::max_dimension + 1);
  const Matrix<double> wide_values = Matrix<double>::Zero(2, cuda::max_dimension + 1);
  const Problem<double> too_wide{&wide, &wide, nullptr, nullptr};
  Request lse_only;
  lse_only.out = false;
  EXPECT_THROW(cuda::reduce<double>(too_wide, Kernel{}, lse_only), InputError);
  const Problem<double> too_many_values{&small.x, &small.x, nullptr, &wide_values};
  try {
    cuda::reduce<double>(too_many_values, Kernel{});
    ADD_FAILURE() << "e > max_dimension accepted";
  } catch (const InputError& e) {
    if (cuda::availability().available) {
      EXPECT_NE(std::string(e.what()).find("257"), std::string::npos) << e.what();
    }
  }
}

TEST(CudaReduce, InvalidInputIsRejectedLikeOnTheCpu) {
  REGATTA_REQUIRE_GPU();
  SmallProblem small;
  const Matrix<double> bad_keys = Matrix<double>::Ones(4, 3);  // d mismatch
  Problem<double> problem = small.problem;
  problem.keys = &bad_keys;
  EXPECT_THROW(cuda::reduce<double>(problem, Kernel{}), InputError);
}

// Runs everywhere: the reason is stated when the GPU path is unavailable, and reduce refuses to run then
// rather than falling back to the CPU.
TEST(CudaAvailability, ReasonIsStatedAndReduceThrowsWhenUnavailable) {
  const cuda::Availability gpu = cuda::availability();
  if (gpu.available) {
    EXPECT_TRUE(gpu.reason.empty()) << gpu.reason;
    EXPECT_FALSE(gpu.device_name.empty());
    std::cout << "[          ] GPU path available on " << gpu.device_name << "\n";
    return;
  }
  std::cout << "[          ] GPU path unavailable: " << gpu.reason << "\n";
  EXPECT_FALSE(gpu.reason.empty());
  SmallProblem small;
  try {
    cuda::reduce<double>(small.problem, Kernel{});
    ADD_FAILURE() << "cuda::reduce ran without a GPU path";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(gpu.reason), std::string::npos) << e.what();
  }
  const Matrix<float> xf = small.x.cast<float>(), yf = small.y.cast<float>(), vf = small.v.cast<float>();
  const Problem<float> problem_f{&xf, &yf, nullptr, &vf};
  EXPECT_THROW(cuda::reduce<float>(problem_f, Kernel{}), InputError);
}

}  // namespace
}  // namespace regatta::pairwise
