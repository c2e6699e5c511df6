// The blocked CPU path (detail::reduce_blocked, core/src/pairwise/cpu_blocked.cpp) computed two other ways:
// against reduce_materialized<double> (the full n×m matrix, then softmax rows) and against
// detail::reduce_generic<double> (one key at a time, difference-form scores), for every score and mask,
// block sizes from 1 to larger than n and m (odd ones included), 1 and 2 threads, −inf log-weights (whole key
// blocks of them), huge logits (|t| ≈ 1e4), n ≠ m and tiny sizes. float runs on the same inputs (the double
// inputs are rounded to float once and handed back to the double references), so only its arithmetic differs.
//
// Tolerances (derived, per problem; eps = the unit roundoff of the blocked scalar S):
//   score   Δs ≤ δ := (d + 4)·eps·|scale|·max_ij (‖x_i‖² + ‖y_j‖²) + eps·max|ω|
//           (a d-term dot product or the expansion ‖x‖² − 2⟨x, y⟩ + ‖y‖² has error ≤ γ_{d+2} times the sum of
//           the magnitudes of its terms, which is ≤ ‖x‖² + ‖y‖²; the generic path's difference form is
//           ≤ the same bound). neg_dist_pow maps the error of D² through u ↦ u^{p/2}: (p/2)-Hölder with
//           constant 1 for p ≤ 2, Lipschitz with constant (p/2)·D_max^{p−2} for p > 2.
//   lse     Δlse ≤ δ + (m + 8)·eps·(1 + |lse|)        (exp, log and at most m summation roundings)
//   π       |Δπ_ij| ≤ (e^{2δ + (m+8)eps} − 1)·π_ij =: ρ·π_ij, so a softmax mean of a quantity q has
//   means   |Δ Σ π q| ≤ (ρ + (m + 8)·eps)·max|q| + Σ π |Δq|   (Δq = δ for expected_score, else 0).
// A safety factor of 2 covers second-order terms. Nothing is fitted to observed errors.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <regatta/core/detail/pairwise_blocks.hpp>
#include <regatta/core/detail/pairwise_paths.hpp>
#include <regatta/core/pairwise.hpp>
#include <regatta/core/random_matrix.hpp>
#include <string>
#include <vector>

namespace regatta::pairwise {
namespace {

using Eigen::Index;
constexpr double inf = std::numeric_limits<double>::infinity();

struct Case {
  Index n, m, d, e = 3, f = 2;
  Kernel kernel;
  double input_scale = 1.0;  ///< multiplies the Gaussian coordinates
  bool neg_inf_weights = false;
  std::uint64_t seed = 1;
};

/// Inputs in double; `S` inputs are these rounded, and the references see the rounded values.
struct Inputs {
  Matrix<double> x, y, v, b;
  Vector<double> w;
};

Inputs make_inputs(const Case& c) {
  auto gaussian = [&](Index rows, Index cols, std::uint64_t salt) {
    return random_matrix({rows, cols, RandomMatrixKind::gaussian, 1, 1.0, c.seed * 16 + salt});
  };
  Inputs in{c.input_scale * gaussian(c.n, c.d, 0), c.input_scale * gaussian(c.m, c.d, 1),
            gaussian(c.m, c.e, 2), gaussian(c.m, c.f, 3), standard_normal(c.m, c.seed * 16 + 4)};
  if (c.neg_inf_weights) {
    // Every third key, and a run of a quarter of the keys (whole key blocks for small key_block), get
    // ω = −inf; key 0 and the last key keep a finite weight so that every row keeps a visible key under
    // both masks (the causal row 0 sees only key 0; the anticausal last row sees only the last keys).
    for (Index j = 0; j < c.m; ++j)
      if (j % 3 == 1 || (j >= c.m / 4 && j < c.m / 2)) in.w[j] = -inf;
    in.w[0] = 0.5;
    in.w[c.m - 1] = -0.25;
  }
  return in;
}

template <class S>
Matrix<S> as(const Matrix<double>& a) {
  return a.cast<S>();
}

struct Tolerance {
  double lse;          ///< relative to 1 + |lse|
  double mean_factor;  ///< times max|q| for a softmax mean of q
  double score;        ///< 2δ: the score error, doubled
  double max_score;    ///< an upper bound on |s_ij|
};

/// The tolerances of the header comment for the blocked path in a scalar with unit roundoff eps.
Tolerance derive_tolerance(const Inputs& in, const Case& c, double eps) {
  const double norms = in.x.rowwise().squaredNorm().maxCoeff() + in.y.rowwise().squaredNorm().maxCoeff();
  const double max_w = in.w.array().isFinite().select(in.w.array().abs(), 0.0).maxCoeff();
  const double scale = std::abs(c.kernel.scale);
  const double d2_error = (c.d + 4) * eps * norms;  // error of ‖x − y‖² by the expansion
  double delta = 0;
  if (c.kernel.score != ScoreKind::neg_dist_pow || c.kernel.power == 2.0) {
    delta = scale * d2_error;
  } else if (c.kernel.power < 2.0) {
    delta = scale * std::pow(d2_error, c.kernel.power / 2);
  } else {
    delta = scale * (c.kernel.power / 2) * std::pow(norms * 2, c.kernel.power / 2 - 1) * d2_error;
  }
  delta += eps * max_w;
  const double sum_rounding = (c.m + 8) * eps;
  const double rho = std::expm1(2 * delta + sum_rounding);
  // |s_ij| bounds: |scale|·‖x‖‖y‖ (dot), |scale|·(‖x‖ + ‖y‖)^{2 or p} (distances).
  const double rx = in.x.rowwise().norm().maxCoeff(), ry = in.y.rowwise().norm().maxCoeff();
  const double max_score = c.kernel.score == ScoreKind::dot ? scale * rx * ry
                           : c.kernel.score == ScoreKind::neg_sq_dist
                               ? scale * (rx + ry) * (rx + ry)
                               : scale * std::pow(rx + ry, c.kernel.power);
  return {2 * (delta + sum_rounding), 2 * (rho + sum_rounding), 2 * delta, max_score};
}

double max_abs(const Matrix<double>& a) { return a.size() ? a.cwiseAbs().maxCoeff() : 0.0; }

/// Asserts |blocked − reference| within the derived tolerance, entrywise.
template <class S>
void expect_close(const Result<S>& blocked, const Result<double>& reference, const Inputs& in,
                  const Tolerance& tol, const std::string& what) {
  SCOPED_TRACE(what);
  const Index n = reference.lse.size();
  ASSERT_EQ(blocked.lse.size(), n);
  for (Index i = 0; i < n; ++i) {
    ASSERT_TRUE(std::isfinite(double(blocked.lse[i]))) << "row " << i;
    ASSERT_NEAR(double(blocked.lse[i]), reference.lse[i], tol.lse * (1 + std::abs(reference.lse[i])))
        << "row " << i;
  }
  auto check = [&](const Matrix<S>& got, const Matrix<double>& want, double magnitude, const char* name) {
    ASSERT_EQ(got.rows(), want.rows()) << name;
    ASSERT_EQ(got.cols(), want.cols()) << name;
    const double bound = tol.mean_factor * magnitude;
    for (Index i = 0; i < got.rows(); ++i)
      for (Index k = 0; k < got.cols(); ++k)
        ASSERT_NEAR(double(got(i, k)), want(i, k), bound) << name << " (" << i << ", " << k << ")";
  };
  const double mv = max_abs(in.v), mb = max_abs(in.b);
  check(blocked.out, reference.out, mv, "out");
  check(blocked.feature_mean, reference.feature_mean, mb, "feature_mean");
  check(blocked.cross_moment, reference.cross_moment, mv * mb, "cross_moment");
  check(blocked.feature_second_moment, reference.feature_second_moment, mb * mb, "feature_second_moment");
  for (Index i = 0; i < reference.expected_score.size(); ++i) {
    const double bound = tol.mean_factor * tol.max_score + tol.score;
    ASSERT_NEAR(double(blocked.expected_score[i]), reference.expected_score[i], bound)
        << "expected_score " << i;
  }
}

constexpr Request all_outputs{true, true, true, true, true};

/// Runs the blocked path in S over block sizes and thread counts; compares with both double references.
template <class S>
void check_case(const Case& c, const std::vector<Options>& option_list) {
  const Inputs in0 = make_inputs(c);
  // Round once to S; the references run in double on exactly these values.
  const Inputs in{as<S>(in0.x).template cast<double>(), as<S>(in0.y).template cast<double>(),
                  as<S>(in0.v).template cast<double>(), as<S>(in0.b).template cast<double>(),
                  in0.w.cast<S>().template cast<double>()};
  const Problem<double> pd{&in.x, &in.y, &in.w, &in.v, &in.b};
  const Result<double> materialized = reduce_materialized<double>(pd, c.kernel, all_outputs);
  const Result<double> generic = detail::reduce_generic<double>(pd, c.kernel, all_outputs);

  const Matrix<S> x = in.x.cast<S>(), y = in.y.cast<S>(), v = in.v.cast<S>(), b = in.b.cast<S>();
  const Vector<S> w = in.w.cast<S>();
  const Problem<S> ps{&x, &y, &w, &v, &b};
  const Tolerance tol = derive_tolerance(in, c, std::numeric_limits<S>::epsilon() / 2);
  for (const Options& o : option_list) {
    const std::string what = std::string(sizeof(S) == 4 ? "float" : "double") + " n=" + std::to_string(c.n) +
                             " m=" + std::to_string(c.m) + " score=" + to_string(c.kernel.score) +
                             " p=" + std::to_string(c.kernel.power) + " mask=" + to_string(c.kernel.mask) +
                             " query_block=" + std::to_string(o.query_block) +
                             " key_block=" + std::to_string(o.key_block) +
                             " threads=" + std::to_string(o.threads);
    const Result<S> blocked = detail::reduce_blocked<S>(ps, c.kernel, all_outputs, o);
    expect_close(blocked, materialized, in, tol, what + " vs materialized");
    expect_close(blocked, generic, in, tol, what + " vs generic");
    if (::testing::Test::HasFatalFailure()) return;
  }
}

/// Block sizes (query_block, key_block): automatic, 1, odd, mixed, and larger than n and m; 1 thread for all,
/// 2 threads for one of them (a row's arithmetic does not depend on the thread count, see
/// ThreadCountDoesNotChangeBits). Few 2-thread runs: after each, the idle OpenMP worker spin-waits, and on a
/// loaded 2-core machine it takes the CPU from the single-threaded references.
std::vector<Options> block_options() {
  return {{0, 0, 1}, {1, 1, 1}, {1, 7, 1}, {7, 1, 1}, {5, 13, 1}, {16, 64, 1}, {1000, 1000, 1}, {5, 13, 2}};
}

/// The references run on one thread (the generic path uses the OpenMP default), for the same reason.
class SingleThreadedReferences : public ::testing::Environment {
 public:
  void SetUp() override { omp_set_num_threads(1); }
};
const auto* const environment = ::testing::AddGlobalTestEnvironment(new SingleThreadedReferences);

std::vector<Kernel> all_kernels(double scale) {
  std::vector<Kernel> kernels;
  for (MaskKind mask : {MaskKind::none, MaskKind::causal, MaskKind::anticausal}) {
    kernels.push_back({ScoreKind::dot, scale, 1.0, mask});
    kernels.push_back({ScoreKind::neg_sq_dist, std::abs(scale), 1.0, mask});
    for (double p : {1.0, 1.5, 2.0, 3.0})
      kernels.push_back({ScoreKind::neg_dist_pow, std::abs(scale), p, mask});
  }
  return kernels;
}

template <class S>
void check_shapes(Index d, double scale, double input_scale, bool neg_inf_weights) {
  // n ≠ m both ways (anticausal needs n ≤ m: a query i > m − 1 would see no key), and a square case.
  const std::pair<Index, Index> shapes[] = {{37, 53}, {53, 37}, {40, 40}};
  std::uint64_t seed = 1;
  for (const Kernel& k : all_kernels(scale))
    for (auto [n, m] : shapes) {
      if (k.mask == MaskKind::anticausal && n > m) continue;
      Case c{n, m, d, 3, 2, k, input_scale, neg_inf_weights, seed++};
      check_case<S>(c, block_options());
      if (::testing::Test::HasFatalFailure()) return;
    }
}

TEST(PairwiseBlocked, DoubleAllScoresMasksBlocksThreads) { check_shapes<double>(5, 0.7, 1.0, false); }
TEST(PairwiseBlocked, FloatAllScoresMasksBlocksThreads) { check_shapes<float>(5, 0.7, 1.0, false); }
TEST(PairwiseBlocked, DoubleNegativeInfiniteWeights) { check_shapes<double>(4, 0.5, 1.0, true); }
TEST(PairwiseBlocked, FloatNegativeInfiniteWeights) { check_shapes<float>(4, 0.5, 1.0, true); }
TEST(PairwiseBlocked, NegativeDotScale) { check_shapes<double>(3, -1.3, 1.0, true); }

// Huge logits: |s_ij| up to ≈ 1e4, softmax rows close to one-hot; a naive exp would overflow.
TEST(PairwiseBlocked, DoubleHugeLogits) { check_shapes<double>(8, 600.0, 1.5, true); }
TEST(PairwiseBlocked, FloatHugeLogits) { check_shapes<float>(8, 600.0, 1.5, true); }

TEST(PairwiseBlocked, TinySizes) {
  const std::pair<Index, Index> shapes[] = {{1, 1}, {1, 5}, {5, 1}, {3, 2}, {2, 3}};
  std::uint64_t seed = 100;
  for (const Kernel& k : all_kernels(0.9))
    for (auto [n, m] : shapes) {
      if (k.mask == MaskKind::anticausal && n > m) continue;
      Case c{n, m, 2, 1, 1, k, 1.0, false, seed++};
      check_case<double>(c, block_options());
      check_case<float>(c, block_options());
      if (HasFatalFailure()) return;
    }
}

// One query block per thread or one per row: each row is reduced by exactly the same operations whatever the
// thread count, so 1 and 2 threads agree bitwise.
TEST(PairwiseBlocked, ThreadCountDoesNotChangeBits) {
  Case c{203, 177, 6, 3, 2, {ScoreKind::dot, 0.4, 1.0, MaskKind::causal}, 1.0, true, 7};
  const Inputs in = make_inputs(c);
  const Problem<double> p{&in.x, &in.y, &in.w, &in.v, &in.b};
  const Result<double> one = detail::reduce_blocked<double>(p, c.kernel, all_outputs, {32, 50, 1});
  const Result<double> two = detail::reduce_blocked<double>(p, c.kernel, all_outputs, {32, 50, 2});
  EXPECT_EQ(one.lse, two.lse);
  EXPECT_EQ(one.out, two.out);
  EXPECT_EQ(one.cross_moment, two.cross_moment);
  EXPECT_EQ(one.expected_score, two.expected_score);
}

// Only requested outputs are produced; lse alone needs no values.
TEST(PairwiseBlocked, LseOnly) {
  Case c{20, 30, 4, 3, 2, {ScoreKind::neg_sq_dist, 0.3, 1.0, MaskKind::none}, 1.0, false, 9};
  const Inputs in = make_inputs(c);
  const Problem<double> p{&in.x, &in.y, nullptr, nullptr, nullptr};
  const Request lse_only{false, false, false, false, false};
  const Result<double> blocked = detail::reduce_blocked<double>(p, c.kernel, lse_only, {7, 9, 2});
  const Result<double> reference = reduce_materialized<double>(p, c.kernel, lse_only);
  EXPECT_EQ(blocked.out.size(), 0);
  EXPECT_EQ(blocked.cross_moment.size(), 0);
  const Tolerance tol = derive_tolerance(in, c, std::numeric_limits<double>::epsilon() / 2);
  for (Index i = 0; i < c.n; ++i)
    EXPECT_NEAR(blocked.lse[i], reference.lse[i], tol.lse * (1 + std::abs(reference.lse[i])));
}

// The mask arithmetic that decides which key blocks are skipped, checked entry by entry.
TEST(PairwiseBlocked, BlockVisibilityMatchesTheMask) {
  for (MaskKind mask : {MaskKind::none, MaskKind::causal, MaskKind::anticausal})
    for (Index i0 = 0; i0 < 9; ++i0)
      for (Index i1 = i0 + 1; i1 < 11; ++i1)
        for (Index j0 = 0; j0 < 9; ++j0)
          for (Index j1 = j0 + 1; j1 < 11; ++j1) {
            int visible = 0, total = 0;
            for (Index i = i0; i < i1; ++i)
              for (Index j = j0; j < j1; ++j, ++total)
                visible += mask == MaskKind::none || (mask == MaskKind::causal ? j <= i : j >= i);
            const auto expected = visible == 0       ? detail::BlockVisibility::hidden
                                  : visible == total ? detail::BlockVisibility::visible
                                                     : detail::BlockVisibility::partial;
            ASSERT_EQ(detail::block_visibility(mask, i0, i1, j0, j1), expected)
                << to_string(mask) << " [" << i0 << "," << i1 << ")x[" << j0 << "," << j1 << ")";
          }
}

}  // namespace
}  // namespace regatta::pairwise
