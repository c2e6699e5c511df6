// Region enclosures of the Jacobian (operators/lipschitz/region.hpp), each against an independent
// computation:
//   the enclosure [J] over a box       the dense Jacobian of the generic engine in 256-bit mpfr at sampled
//                                      points of the box (corners and random points): every entry inside;
//   sup over the region of ‖J‖₂, ‖J‖∞  JacobiSVD and row sums of the double Jacobian at sampled points of
//                                      the ball and the box: never above the certified sup;
//   first-order tightness              the excess (sup − ‖J(X)‖₂)/‖J(X)‖₂ shrinks linearly with the radius;
//   robustness radius                  a linear readout's argmax never changes at sampled points of the
//                                      certified ball (forward passes of the streamed attention in double);
//   honest outcomes                    a vast box is "not certified: enclosure too wide"; bad radii throw;
//   second-order form                  its closed-form Jacobian against the generic engine (pre-norm
//                                      included); its sup against the double Jacobian's ‖·‖₂ on the sphere
//                                      along the steepest direction of ‖J‖₂ (finite differences) and at
//                                      sampled points; its slope against the finite-difference rate of
//                                      ‖J‖₂; below the first-order enclosure and → ‖J(X)‖₂ as ε → 0;
//   lower end (region_witness)         its point lies in the region (distances in long double); its value is
//                                      ‖J(X')‖ there (JacobiSVD, row sums; softmax and Sinkhorn); at least
//                                      the centre's and every norm at 48 sampled points of the sphere, at
//                                      most the certified upper end; its first-order gain is ‖∇σ_max‖ (finite
//                                      differences); bad radii, tokens and counts throw.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <regatta/core/convert.hpp>
#include <regatta/core/dense_svd.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/region.hpp>
#include "../../../../operators/src/lipschitz/region/second_order.hpp"
#include "support/random_layers.hpp"
#include "support/tolerance.hpp"

namespace regatta::lip {
namespace {

using Eigen::Index;
using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Block;
using operators::Prenorm;

/// Containment of a 256-bit reference value rounded to double in an interval64 entry: the rounding to
/// double moves it by at most half an ulp, so a few ulps of slack keep the test exact in spirit.
const double containment_slack = testing::rounding_bound<double>(4);
/// Sampled norms in double (JacobiSVD, row sums of a double Jacobian) may exceed their exact values by
/// rounding of order (n·d)·u; 64 covers the dense Jacobian's accumulation at these sizes.
const double sampled_norm_slack = testing::rounding_bound<double>(64, 64);

Matrix<double> gaussian(Index rows, Index cols, std::uint64_t seed, double scale = 1.0) {
  const Vector<double> z = standard_normal(rows * cols, seed);
  return scale * Eigen::Map<const Matrix<double>>(z.data(), rows, cols);
}

struct Case {
  std::string name;
  AttentionKind kind = AttentionKind::dot;
  int d = 4, heads = 2;
  bool biases = false, causal = false, residual = false;
  Prenorm prenorm = Prenorm::none;
  Index n = 4;
  double rope_theta = 0;  ///< > 0: rotary position embeddings with this base
  int sinkhorn = 1;       ///< Sinkhorn iterations (1: softmax)
};

std::vector<Case> cases() {
  return {{"dot"},
          {"dot_biases_causal_residual", AttentionKind::dot, 4, 2, true, true, true},
          {"l2_biases", AttentionKind::l2, 4, 2, true},
          {"dot_layernorm_weights", AttentionKind::dot, 4, 1, true, false, true, Prenorm::layernorm},
          {"l2_rmsnorm", AttentionKind::l2, 4, 2, false, false, true, Prenorm::rmsnorm, 3},
          {"dot_rope_biases_causal", AttentionKind::dot, 4, 1, true, true, true, Prenorm::none, 4, 7.5}};
}

AttentionLayer layer_for(const Case& c, std::uint64_t seed) {
  operators::RandomLayerSpec s;
  s.d = c.d;
  s.heads = c.heads;
  s.kind = c.kind;
  s.biases = c.biases;
  s.seed = seed;
  AttentionLayer L = operators::random_layer(s);
  if (c.prenorm != Prenorm::none) testing::draw_norm_weights(L, seed);
  if (c.rope_theta > 0) L.rotary = operators::Rotary{c.rope_theta};
  return L;
}

AttentionOptions options_for(const Case& c) {
  AttentionOptions o;
  o.causal = c.causal;
  o.residual = c.residual;
  o.prenorm = c.prenorm;
  o.sinkhorn_iterations = c.sinkhorn;
  return o;
}

Matrix<double> double_jacobian(const AttentionLayer& L, const AttentionOptions& o, const Matrix<double>& X) {
  return operators::dense_jacobian(Block<double>(L, o).linearize(X));
}

double sigma_max(const Matrix<double>& M) { return largest_singular_value(M); }

/// A point of the box: corner k (bit pattern over the first 20 entries, the rest from the generator) or a
/// uniform point.
Matrix<double> box_point(const Matrix<double>& X, double r, std::mt19937_64& gen, bool corner) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Matrix<double> P = X;
  for (Index k = 0; k < X.size(); ++k) {
    const double t = u(gen);
    P.data()[k] += r * (corner ? (t < 0 ? -1.0 : 1.0) : t);
  }
  return P;
}

/// A point on the sphere of radius ε around X (Frobenius).
Matrix<double> sphere_point(const Matrix<double>& X, double eps, std::uint64_t seed) {
  Matrix<double> U = gaussian(X.rows(), X.cols(), seed);
  return X + (eps / U.norm()) * U;
}

TEST(RegionEnclosure, ContainsTheJacobianAtSampledPointsOfTheBox) {
  const PrecisionGuard guard(256);
  std::mt19937_64 gen(11);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const AttentionLayer L = layer_for(c, 3);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(c.n, c.d, 5);
    const double r = 0.05;
    const Matrix<interval64> J = block_dense_jacobian_on_box<interval64>(L, o, region_box(X, r));
    for (int sample = 0; sample < 6; ++sample) {
      const Matrix<double> P = box_point(X, r, gen, sample % 2 == 0);
      const Matrix<mpfr> ref = operators::dense_jacobian(Block<mpfr>(L, o).linearize(matrix_cast<mpfr>(P)));
      ASSERT_EQ(ref.rows(), J.rows());
      for (Index i = 0; i < J.rows(); ++i)
        for (Index k = 0; k < J.cols(); ++k) {
          const double v = ref(i, k).convert_to<double>();
          const double slack = containment_slack * std::max(1.0, std::fabs(v));
          ASSERT_LE(J(i, k).lower(), v + slack) << "entry " << i << ", " << k;
          ASSERT_GE(J(i, k).upper(), v - slack) << "entry " << i << ", " << k;
        }
    }
  }
}

TEST(RegionNorms, SupBoundsEverySampledNormInTheBallAndTheBox) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const AttentionLayer L = layer_for(c, 13);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(c.n, c.d, 17);
    const double eps = 0.02 * X.norm();
    // Soundness of the enclosure at a radius where it is loose: without the closed-form comparison (which
    // may call it too wide; tested below), so that the sampled norms are checked against it.
    RegionOptions options;
    options.closed_form = false;
    options.second_order = true;
    const RegionNormReport ball = region_jacobian_norms(L, o, X, Region{RegionShape::ball, eps}, options);
    const RegionNormReport box = region_jacobian_norms(L, o, X, Region{RegionShape::box, eps / 4}, options);
    ASSERT_TRUE(ball.certified) << ball.status;
    ASSERT_TRUE(box.certified) << box.status;
    std::mt19937_64 gen(19);
    for (int sample = 0; sample < 20; ++sample) {
      const Matrix<double> Jb = double_jacobian(L, o, sphere_point(X, eps, 100 + sample));
      EXPECT_LE(sigma_max(Jb), ball.two_upper * (1 + sampled_norm_slack));
      EXPECT_LE(Jb.cwiseAbs().rowwise().sum().maxCoeff(), ball.inf_upper * (1 + sampled_norm_slack));
      const Matrix<double> Jx = double_jacobian(L, o, box_point(X, eps / 4, gen, sample % 2 == 0));
      EXPECT_LE(sigma_max(Jx), box.two_upper * (1 + sampled_norm_slack));
      EXPECT_LE(Jx.cwiseAbs().rowwise().sum().maxCoeff(), box.inf_upper * (1 + sampled_norm_slack));
    }
    // The box of half-width ε contains the ball of radius ε: the ball's first-order enclosure is that box's,
    // and its second-order radius (ε) is below the box's (ε·√(n·d)).
    const RegionNormReport same = region_jacobian_norms(L, o, X, Region{RegionShape::box, eps}, options);
    EXPECT_LE(ball.two_upper, same.two_upper);
  }
}

TEST(RegionNorms, ExcessOverTheCentreShrinksLinearlyWithTheRadius) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const AttentionLayer L = layer_for(c, 23);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(c.n, c.d, 29);
    const double centre = sigma_max(double_jacobian(L, o, X));
    RegionOptions options;
    options.closed_form = false;
    options.second_order = true;
    // One segment piece, the loosest second-order forms (a quarter of the automatic choice's passes): the
    // excess's rate is first order however many pieces there are.
    options.pieces = 1;
    std::vector<double> excess;
    for (double eps : {1e-3, 1e-4, 1e-5}) {
      const RegionNormReport r = region_jacobian_norms(L, o, X, Region{RegionShape::ball, eps}, options);
      ASSERT_TRUE(r.certified) << r.status;
      excess.push_back(r.two_upper / centre - 1);
      EXPECT_GE(excess.back(), -sampled_norm_slack);
    }
    // First order: a tenth of the radius gives about a tenth of the excess (5× allows the second-order
    // part and the certificate's fixed relative margin ~1e-10).
    EXPECT_LT(excess[1], excess[0] / 5);
    EXPECT_LT(excess[2], excess[1] / 5);
  }
}

TEST(RegionRadius, LinearReadoutNeverFlipsInsideTheCertifiedBall) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const AttentionLayer L = layer_for(c, 31);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(c.n, c.d, 37);
    const Index nd = X.size();
    // Readout: 3 logits from vec(F(X)); its ℓ₂ Lipschitz constant is its spectral norm (inflated by the
    // SVD's rounding so that it is an upper bound).
    const Matrix<double> R = gaussian(3, nd, 41, 1.0 / std::sqrt(double(nd)));
    const double lr = sigma_max(R) * (1 + sampled_norm_slack);
    const auto logits = [&](const Matrix<double>& Z) {
      const Matrix<double> F = operators::attend(L, Z, o);
      return Vector<double>(R * Eigen::Map<const Vector<double>>(F.data(), F.size()));
    };
    const Vector<double> g = logits(X);
    Index y = 0;
    g.maxCoeff(&y);
    double runner = -std::numeric_limits<double>::infinity();
    for (Index k = 0; k < g.size(); ++k)
      if (k != y) runner = std::max(runner, g(k));
    MarginSetting setting;
    setting.margin = g(y) - runner;
    setting.readout_lipschitz = lr;
    const double centre = sigma_max(double_jacobian(L, o, X));
    const RegionRadiusResult res = region_certified_radius(L, o, X, setting, centre);
    ASSERT_GT(res.radius, 0);
    EXPECT_LE(res.radius, res.first_order_limit);
    EXPECT_GE(res.sup_two_at_radius, centre * (1 - sampled_norm_slack));
    for (int sample = 0; sample < 50; ++sample) {
      const Vector<double> h = logits(sphere_point(X, res.radius, 200 + sample));
      Index yy = 0;
      h.maxCoeff(&yy);
      EXPECT_EQ(yy, y);
    }
    // With a certified upper bound for a larger radius the margin would be exceeded at the first failure.
    EXPECT_GT(res.first_failure, res.radius);
  }
}

TEST(RegionNorms, AVastBoxIsNotCertifiedAndBadRadiiAreRefused) {
  const Case c = cases()[0];
  const AttentionLayer L = layer_for(c, 43);
  const AttentionOptions o = options_for(c);
  const Matrix<double> X = gaussian(c.n, c.d, 47);
  const RegionNormReport wide = region_jacobian_norms(L, o, X, Region{RegionShape::box, 1e3});
  EXPECT_FALSE(wide.certified);
  EXPECT_EQ(wide.status.rfind("not certified: enclosure too wide", 0), 0u) << wide.status;
  for (double bad : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()})
    EXPECT_THROW(region_jacobian_norms(L, o, X, Region{RegionShape::ball, bad}), InputError);
  AttentionOptions sinkhorn = o;
  sinkhorn.sinkhorn_iterations = 3;
  EXPECT_TRUE(region_refusal(L, sinkhorn).has_value());
  EXPECT_THROW(region_jacobian_norms(L, sinkhorn, X, Region{RegionShape::ball, 0.1}), InputError);
  MarginSetting setting;
  setting.margin = -1;
  EXPECT_THROW(region_certified_radius(L, o, X, setting, 1.0), InputError);
}

// ---- the second-order form (second_order.hpp) ----

/// The closed form and the generic engine evaluate the same Jacobian in different orders: entries differ by
/// rounding of a few dozen accumulated terms of size up to max|J| (n·d ≤ 16, heads ≤ 2 here); 64·(n·d)·u
/// relative to the largest entry covers it.
const double closed_form_slack = testing::rounding_bound<double>(64, 16);
/// Central differences of σ_max(J) with step h have error ~h²·|∂³σ| (a few units at these scales) plus
/// rounding ~u·σ/h; with h = 1e-4·‖X‖ both stay below a relative 1e-3 of the slope.
const double difference_slack = 1e-3;

bool second_order_applies(const Case& c) { return c.rope_theta == 0; }

/// The direction of steepest increase of ‖J‖₂ at X: g_k = vᵀ(∂J/∂x_k)w for the top singular pair (v, w),
/// ∂J/∂x_k by central differences of the double Jacobian (only the direction; the check uses exact norms).
Matrix<double> steepest_direction(const AttentionLayer& L, const AttentionOptions& o,
                                  const Matrix<double>& X) {
  const DenseSvd svd = dense_svd(double_jacobian(L, o, X), true, true);
  const Vector<double> v = svd.U.col(0), w = svd.V.col(0);
  const double h = 1e-6 * X.norm();
  Matrix<double> G(X.rows(), X.cols());
  for (Index k = 0; k < X.size(); ++k) {
    Matrix<double> P = X, M = X;
    P.data()[k] += h;
    M.data()[k] -= h;
    G.data()[k] = v.dot((double_jacobian(L, o, P) - double_jacobian(L, o, M)) * w) / (2 * h);
  }
  return G / G.norm();
}

TEST(RegionSecondOrder, ClosedFormJacobianMatchesTheGenericEngine) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const AttentionLayer L = layer_for(c, 53);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(c.n, c.d, 59);
    if (!second_order_applies(c)) {
      EXPECT_TRUE(detail::second_order_refusal(L, o).has_value());
      continue;
    }
    const Matrix<double> ref = double_jacobian(L, o, X);
    const Matrix<double> J = detail::closed_form_block_jacobian(L, o, X);
    EXPECT_LE((J - ref).cwiseAbs().maxCoeff(), closed_form_slack * ref.cwiseAbs().maxCoeff());
  }
}

TEST(RegionSecondOrder, SupBoundsTheNormOnTheSphereAlongTheSteepestDirectionAndAtSampledPoints) {
  std::mt19937_64 gen(61);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const AttentionLayer L = layer_for(c, 67);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(c.n, c.d, 71);
    const Matrix<double> G = steepest_direction(L, o, X);
    RegionOptions options;
    options.closed_form = false;
    options.second_order = true;
    for (double rho : {1e-3, 1e-2}) {
      const double eps = rho * X.norm();
      const RegionNormReport r = region_jacobian_norms(L, o, X, Region{RegionShape::ball, eps}, options);
      ASSERT_TRUE(r.certified) << r.status;
      EXPECT_EQ(r.second_order.has_value(), second_order_applies(c));
      for (double t : {-1.0, -0.5, 0.5, 1.0}) {  // the steepest line, both ends on the sphere
        const Matrix<double> J = double_jacobian(L, o, X + (t * eps) * G);
        EXPECT_LE(sigma_max(J), r.two_upper * (1 + sampled_norm_slack)) << "t = " << t;
        EXPECT_LE(J.cwiseAbs().rowwise().sum().maxCoeff(), r.inf_upper * (1 + sampled_norm_slack));
      }
      for (int sample = 0; sample < 16; ++sample) {  // the sphere, and the interior
        const double radius = sample % 2 == 0 ? eps : eps * unit(gen);
        const Matrix<double> J = double_jacobian(L, o, sphere_point(X, radius, 300 + sample));
        EXPECT_LE(sigma_max(J), r.two_upper * (1 + sampled_norm_slack));
        EXPECT_LE(J.cwiseAbs().rowwise().sum().maxCoeff(), r.inf_upper * (1 + sampled_norm_slack));
      }
      if (!r.second_order) continue;
      // The second-order form's own bounds, whatever the kept minimum, hold on the steepest line too.
      const Matrix<double> Jw = double_jacobian(L, o, X + eps * G);
      EXPECT_LE(sigma_max(Jw), r.second_order->two_upper * (1 + sampled_norm_slack));
      EXPECT_LE(Jw.cwiseAbs().rowwise().sum().maxCoeff(),
                r.second_order->inf_upper * (1 + sampled_norm_slack));
      // It is the tighter form at ρ = 1e-3 on these layers (the first-order box enclosure loses √(n·d)).
      if (rho == 1e-3) {
        EXPECT_LT(r.second_order->two_upper, [&] {
          RegionOptions first = options;
          first.second_order = false;
          return region_jacobian_norms(L, o, X, Region{RegionShape::ball, eps}, first).two_upper;
        }());
        EXPECT_TRUE(r.two_upper_form == "second-order form" || r.two_upper_form == "spectral-gap form")
            << r.two_upper_form;
        EXPECT_LE(r.two_upper, r.second_order->two_upper);
      }
    }
  }
}

TEST(RegionSecondOrder, SlopeBoundsTheRateOfTheNormAndTheSupTendsToTheCentre) {
  for (const Case& c : cases()) {
    if (!second_order_applies(c)) continue;
    SCOPED_TRACE(c.name);
    const AttentionLayer L = layer_for(c, 73);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(c.n, c.d, 79);
    const Matrix<double> G = steepest_direction(L, o, X);
    const double centre = sigma_max(double_jacobian(L, o, X));
    const double h = 1e-4 * X.norm();
    const double rate =
        (sigma_max(double_jacobian(L, o, X + h * G)) - sigma_max(double_jacobian(L, o, X - h * G))) / (2 * h);
    RegionOptions options;
    options.closed_form = false;
    options.second_order = true;
    const double eps = 1e-7 * X.norm();
    const RegionNormReport r = region_jacobian_norms(L, o, X, Region{RegionShape::ball, eps}, options);
    ASSERT_TRUE(r.second_order.has_value());
    // ‖J‖₂ is Lipschitz with constant slope_two on the ball, so its rate along a unit direction is below it.
    EXPECT_LE(std::fabs(rate), r.second_order->slope_two * (1 + difference_slack));
    // As ε → 0 the bound tends to ‖J(X)‖₂: the excess is ε·slope plus the centre certificate's margin.
    EXPECT_TRUE(r.two_upper_form == "second-order form" || r.two_upper_form == "spectral-gap form")
        << r.two_upper_form;
    EXPECT_GE(r.two_upper, centre * (1 - sampled_norm_slack));
    EXPECT_LE(r.two_upper - centre, 2 * eps * r.second_order->slope_two + 1e-8 * centre);
  }
}

long double frobenius_distance(const Matrix<double>& A, const Matrix<double>& B) {
  long double s = 0;
  for (Index k = 0; k < A.size(); ++k) {
    const long double e = (long double)A.data()[k] - (long double)B.data()[k];
    s += e * e;
  }
  return std::sqrt(s);
}

long double max_distance(const Matrix<double>& A, const Matrix<double>& B) {
  long double m = 0;
  for (Index k = 0; k < A.size(); ++k)
    m = std::max(m, std::fabs((long double)A.data()[k] - (long double)B.data()[k]));
  return m;
}

/// The region cases and a Sinkhorn block (no structured rows: the ∞-norm examines every row by VJPs).
std::vector<Case> witness_cases() {
  std::vector<Case> all = cases();
  all.push_back({"sinkhorn_3", AttentionKind::dot, 4, 1, false, false, false, Prenorm::none, 4, 0, 3});
  return all;
}

double row_sum_norm(const Matrix<double>& J) { return J.cwiseAbs().rowwise().sum().maxCoeff(); }

TEST(RegionWitness, LiesInTheRegionAndItsLowerEndIsTheNormThere) {
  for (const Case& c : witness_cases()) {
    SCOPED_TRACE(c.name);
    const AttentionLayer L = layer_for(c, 7);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(c.n, c.d, 11);
    for (const Region region : {Region{RegionShape::ball, 1e-2 * X.norm()}, Region{RegionShape::box, 3e-3}}) {
      SCOPED_TRACE(to_string(region.shape));
      for (const Norm norm : {Norm::two, Norm::inf}) {
        const RegionWitness w = region_witness(L, o, X, region, norm);
        ASSERT_TRUE(w.lower.has_value()) << w.reason;
        const long double distance =
            region.shape == RegionShape::ball ? frobenius_distance(w.input, X) : max_distance(w.input, X);
        EXPECT_LE(distance, (long double)region.radius);
        EXPECT_LE(distance, (long double)w.distance);
        // The ascent reaches the boundary (the norm grows outwards on these layers).
        EXPECT_GT(distance, 0.5L * region.radius);
        const Matrix<double> J = double_jacobian(L, o, w.input);
        const double there = norm == Norm::two ? sigma_max(J) : row_sum_norm(J);
        EXPECT_LE(*w.lower, there * (1 + sampled_norm_slack));
        // Converged: the certified value is the norm at X' (a converged power iteration, or every row).
        EXPECT_GE(*w.lower, there * (1 - 1e-9));
        EXPECT_LE(*w.lower, w.estimate * (1 + sampled_norm_slack));
      }
    }
  }
}

TEST(RegionWitness, IsAtLeastTheCentreAndSampledPointsAndAtMostTheUpperEnd) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const AttentionLayer L = layer_for(c, 23);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(c.n, c.d, 29);
    const double eps = 1e-2 * X.norm();
    RegionOptions options;
    options.closed_form = false;
    options.second_order = true;
    options.lower_witness = true;
    const RegionNormReport r = region_jacobian_norms(L, o, X, Region{RegionShape::ball, eps}, options);
    ASSERT_TRUE(r.certified) << r.status;
    ASSERT_TRUE(r.two_witness && r.two_witness->lower) << (r.two_witness ? r.two_witness->reason : "none");
    ASSERT_TRUE(r.inf_witness && r.inf_witness->lower) << (r.inf_witness ? r.inf_witness->reason : "none");
    const double two = *r.two_witness->lower, inf = *r.inf_witness->lower;
    EXPECT_LE(two, r.two_upper);
    EXPECT_LE(inf, r.inf_upper);
    const Matrix<double> J0 = double_jacobian(L, o, X);
    EXPECT_GT(two, sigma_max(J0));
    EXPECT_GT(inf, row_sum_norm(J0));
    for (int sample = 0; sample < 48; ++sample) {
      const Matrix<double> J = double_jacobian(L, o, sphere_point(X, eps, 1000 + sample));
      EXPECT_GE(two, sigma_max(J) * (1 - sampled_norm_slack)) << "sample " << sample;
      EXPECT_GE(inf, row_sum_norm(J) * (1 - sampled_norm_slack)) << "sample " << sample;
    }
  }
}

TEST(RegionWitness, FirstOrderGainIsTheGradientNormOfTheLargestSingularValue) {
  for (const Case& c : witness_cases()) {
    SCOPED_TRACE(c.name);
    const AttentionLayer L = layer_for(c, 31);
    const AttentionOptions o = options_for(c);
    const Matrix<double> X = gaussian(c.n, c.d, 37);
    // ‖∇σ_max(J(X))‖ by central differences of the double Jacobian along each coordinate (σ_max simple here).
    const double h = 1e-6 * X.norm();
    double gradient2 = 0;
    for (Index k = 0; k < X.size(); ++k) {
      Matrix<double> P = X, M = X;
      P.data()[k] += h;
      M.data()[k] -= h;
      const double g = (sigma_max(double_jacobian(L, o, P)) - sigma_max(double_jacobian(L, o, M))) / (2 * h);
      gradient2 += g * g;
    }
    const double rate = std::sqrt(gradient2);
    const double eps = 1e-5 * X.norm();
    const RegionWitness w = region_witness(L, o, X, Region{RegionShape::ball, eps}, Norm::two);
    ASSERT_TRUE(w.lower.has_value()) << w.reason;
    const double gain = (*w.lower - sigma_max(double_jacobian(L, o, X))) / eps;
    // σ(X + δ) = σ(X) + ∇σ·δ + O(ε²): the best point of the ball gains ε‖∇σ‖ up to the curvature term.
    EXPECT_NEAR(gain, rate, 2e-2 * rate + 1e-6);
  }
}

TEST(RegionWitness, BadInputIsRefused) {
  const Case c = cases().front();
  const AttentionLayer L = layer_for(c, 41);
  const AttentionOptions o = options_for(c);
  const Matrix<double> X = gaussian(c.n, c.d, 43);
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  for (const double r : {0.0, -1.0, nan, inf})
    EXPECT_THROW(region_witness(L, o, X, Region{RegionShape::ball, r}, Norm::two), InputError) << r;
  Matrix<double> bad = X;
  bad(1, 2) = nan;
  EXPECT_THROW(region_witness(L, o, bad, Region{RegionShape::ball, 0.1}, Norm::two), InputError);
  RegionWitnessOptions negative;
  negative.random_starts = -1;
  EXPECT_THROW(region_witness(L, o, X, Region{RegionShape::box, 0.1}, Norm::inf, negative), InputError);
}

}  // namespace
}  // namespace regatta::lip
