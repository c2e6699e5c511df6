// The spectral-gap form of the region bound (operators/src/lipschitz/region/second_order.hpp), on the torch
// reference layers of tests/data/torch, each number against an independent computation in double:
//   gap_two (certified sup of ‖J‖₂ over B(X, ε))  σ_max of the closed-form Jacobian (JacobiSVD) at random
//                                                  points of the sphere and along projected gradient ascent
//                                                  of σ_max on it (gradient by central differences): the
//                                                  largest is never above gap_two;
//   gap_rate / ‖J(X)‖₂ (certified first-order rate) the norm of the finite-difference gradient of σ_max at X;
//   gap_sigma_two (certified ‖J(X)(I − vvᵀ)‖₂)      the second singular value of torch's Jacobian;
//   the region report                              where it names the spectral-gap form, its value is
//                                                  gap_two and is below the second-order form's bound;
//   taylor_two (the Taylor form's certified sup)   the same sampled sup on the ball;
//   the third-derivative enclosures (hessian_sweep) fourth-order central differences of wᵀJ(X')v and of
//                                                  (J(X')v)_r at points X' of the box: each lies in its
//                                                  enclosure;
//   one thread against three                       the same bits (the passes are combined in a fixed order).
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/operators/attention.hpp>
#include <regatta/operators/layer.hpp>
#include <regatta/operators/lipschitz/region.hpp>
#include "../../../../operators/src/lipschitz/region/hessian_sweep.hpp"
#include "../../../../operators/src/lipschitz/region/second_order.hpp"
#include "support/tolerance.hpp"

namespace regatta::lip {
namespace {

using Eigen::Index;
using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Prenorm;

/// σ_max by JacobiSVD of a double Jacobian that is itself rounded: (n·d)·u-relative errors, n·d ≤ 72 here.
const double sampled_norm_slack = testing::rounding_bound<double>(64, 72);
/// Central differences of σ_max with step h = 1e-6·‖X‖: truncation ~h²|∂³σ| and rounding ~u·σ/h, both below
/// a relative 1e-4 of the rate on these layers.
const double difference_slack = 1e-4;

struct TorchCase {
  std::string name;
  AttentionLayer layer;
  AttentionOptions options;
  Matrix<double> X;
  Matrix<double> jacobian;  ///< torch.autograd's float64 Jacobian at X
};

/// A self-attention case of tests/data/torch (format in its README.md).
TorchCase torch_case(const std::string& name) {
  const std::filesystem::path p = std::filesystem::path(REGATTA_TEST_DATA_DIR) / "torch" / (name + ".npz");
  const std::map<std::string, io::Array> arrays = io::read_npz(p);
  const auto scalar = [&](const std::string& key) { return arrays.at(key).data.at(0); };
  TorchCase c;
  c.name = name;
  const AttentionKind kind = scalar("kind") == 1.0 ? AttentionKind::l2 : AttentionKind::dot;
  std::string prefix;
  for (double code : arrays.at("layer_prefix").data) prefix.push_back(char(int(code)));
  c.layer = operators::load_layer(p, int(scalar("heads")), kind, prefix,
                                  operators::OutputProjection::from_file, operators::RotaryStatement::none());
  c.options.causal = scalar("causal") != 0;
  c.options.residual = scalar("residual") != 0;
  const double prenorm = scalar("prenorm");
  c.options.prenorm = prenorm == 1.0 ? Prenorm::layernorm : prenorm == 2.0 ? Prenorm::rmsnorm : Prenorm::none;
  if (c.options.prenorm != Prenorm::none) {
    c.layer.norm_gamma = arrays.at("norm.weight").vector();
    if (arrays.count("norm.bias")) c.layer.norm_beta = arrays.at("norm.bias").vector();
    c.layer.norm_eps = scalar("norm_eps");
  }
  c.options.sinkhorn_iterations = int(scalar("sinkhorn_iterations"));
  c.X = arrays.at("input").matrix();
  c.jacobian = arrays.at("jacobian").matrix();
  return c;
}

/// Layers of each kind the form covers (dot, L2, causal, biases, residual, LayerNorm, RMSNorm), n·d ≤ 72.
std::vector<std::string> case_names() {
  return {"dot_d4_h1_bias",
          "l2_d8_h2_bias",
          "dot_d8_h2_bias_causal",
          "prenorm_layernorm_d8_h2_bias_residual",
          "prenorm_rmsnorm_d4_h2_bias",
          "l2_d12_h3_nobias_causal"};
}

double sigma_max(const Matrix<double>& M) { return largest_singular_value(M); }

double sigma_at(const TorchCase& c, const Matrix<double>& X) {
  return sigma_max(detail::closed_form_block_jacobian(c.layer, c.options, X));
}

/// ∇σ_max(J(X)) = (uᵀ ∂_kJ v)_k for the top singular pair (u, v) of J(X) (σ_max simple), ∂_kJ by central
/// differences of the closed-form Jacobian with step h.
Matrix<double> sigma_gradient(const TorchCase& c, const Matrix<double>& X, double h) {
  const DenseSvd svd = dense_svd(detail::closed_form_block_jacobian(c.layer, c.options, X), true, true);
  const Vector<double> u = svd.U.col(0), v = svd.V.col(0);
  Matrix<double> G(X.rows(), X.cols());
  for (Index k = 0; k < X.size(); ++k) {
    Matrix<double> P = X, M = X;
    P.data()[k] += h;
    M.data()[k] -= h;
    const Matrix<double> dJ = detail::closed_form_block_jacobian(c.layer, c.options, P) -
                              detail::closed_form_block_jacobian(c.layer, c.options, M);
    G.data()[k] = u.dot(dJ * v) / (2 * h);
  }
  return G;
}

/// The largest σ_max(J(X')) found on the sphere ‖X' − X‖_F = ε: random points, and projected gradient
/// ascent on the sphere from the steepest direction at X (an estimate of the sup from below).
double sampled_sup(const TorchCase& c, double eps, std::uint64_t seed) {
  const double h = 1e-6 * c.X.norm();
  double best = sigma_at(c, c.X);
  for (int s = 0; s < 8; ++s) {
    const Vector<double> z = standard_normal(c.X.size(), seed + std::uint64_t(s));
    const Matrix<double> U = Eigen::Map<const Matrix<double>>(z.data(), c.X.rows(), c.X.cols());
    best = std::max(best, sigma_at(c, c.X + (eps / U.norm()) * U));
  }
  Matrix<double> U = sigma_gradient(c, c.X, h);
  U /= U.norm();
  for (int step = 0; step < 6; ++step) {
    const Matrix<double> P = c.X + eps * U;
    best = std::max(best, sigma_at(c, P));
    Matrix<double> G = sigma_gradient(c, P, h);
    G -= (G.cwiseProduct(U).sum()) * U;  // the tangent part
    if (G.norm() == 0) break;
    U += 0.5 * G / G.norm();
    U /= U.norm();
  }
  return best;
}

TEST(SpectralGapForm, BoundsTheSampledSupOnTheBallOfTorchLayers) {
  int checked = 0;
  for (const std::string& name : case_names()) {
    SCOPED_TRACE(name);
    const TorchCase c = torch_case(name);
    for (double rho : {1e-3, 1e-2}) {
      SCOPED_TRACE(rho);
      const double eps = rho * c.X.norm();
      detail::SecondOrderOptions so;
      so.taylor = false;  // the spectral-gap form alone (the Taylor form has its own test below)
      const detail::SecondOrderBound b =
          detail::second_order_bound(c.layer, c.options, c.X, region_box(c.X, eps), eps, so);
      if (!std::isfinite(b.gap_two)) continue;  // not formed (the slope is not finite): nothing claimed
      ++checked;
      const double sampled = sampled_sup(c, eps, 101);
      EXPECT_LE(sampled, b.gap_two * (1 + sampled_norm_slack));
      // Its parts: the second singular value below σ₂'s bound, the first-order rate below ‖g‖/‖J(X)‖₂.
      const Eigen::VectorXd sigma = singular_values(c.jacobian);
      EXPECT_LE(sigma(1), b.gap_sigma_two * (1 + sampled_norm_slack));
      const double rate = sigma_gradient(c, c.X, 1e-6 * c.X.norm()).norm();
      EXPECT_LE(rate, b.gap_rate / sigma(0) * (1 + difference_slack));
    }
  }
  EXPECT_GE(checked, 9);  // formed at ρ = 1e-3 on every layer, at 1e-2 on most
}

TEST(SpectralGapForm, IsReportedOnlyWhereItIsTheSmallest) {
  RegionOptions options;
  options.closed_form = false;
  options.second_order = true;
  // One segment piece: which form is reported does not depend on the pieces, and one costs a quarter of the
  // automatic choice.
  options.pieces = 1;
  int used = 0;
  for (const std::string& name : case_names()) {
    if (name == "l2_d12_h3_nobias_causal") continue;  // n·d = 72: the Taylor form's sweep takes ~10 s there
    SCOPED_TRACE(name);
    const TorchCase c = torch_case(name);
    const double eps = 1e-3 * c.X.norm();
    const RegionNormReport r =
        region_jacobian_norms(c.layer, c.options, c.X, Region{RegionShape::ball, eps}, options);
    ASSERT_TRUE(r.second_order.has_value());
    if (r.two_upper_form != "spectral-gap form") continue;
    ++used;
    EXPECT_EQ(r.two_upper, r.second_order->gap_two);
    EXPECT_LT(r.second_order->gap_two, r.second_order->two_upper);
    EXPECT_NE(r.two_upper_method.find("spectral-gap form"), std::string::npos);
  }
  // At ρ = 1e-3 the first-order rate is what bounds these layers (bench/RESULTS.md, "Region enclosures").
  EXPECT_GE(used, 4);
}

TEST(TaylorForm, BoundsTheSampledSupOnTheBallOfTorchLayers) {
  int formed = 0;
  for (const char* name : {"dot_d4_h1_bias", "prenorm_rmsnorm_d4_h2_bias", "l2_d8_h2_bias"}) {
    SCOPED_TRACE(name);
    const TorchCase c = torch_case(name);
    for (double rho : {1e-3, 1e-2}) {
      SCOPED_TRACE(rho);
      const double eps = rho * c.X.norm();
      const detail::SecondOrderBound b =
          detail::second_order_bound(c.layer, c.options, c.X, region_box(c.X, eps), eps);
      if (!std::isfinite(b.taylor_two)) continue;
      ++formed;
      EXPECT_LE(sampled_sup(c, eps, 202), b.taylor_two * (1 + sampled_norm_slack));
      EXPECT_LE(b.gap_two, b.taylor_two);  // the report keeps the smaller
    }
  }
  EXPECT_GE(formed, 3);
}

// More segment pieces (RegionOptions::pieces, --region-pieces): each piece's enclosure is over a sub-box of
// the region's box, so by inclusion isotonicity the ∞-norm slope (sums of magnitudes, no midpoint) cannot
// grow beyond rounding; the bounds stay above the sampled sup; the report says how many pieces were used.
TEST(TaylorForm, MorePiecesStayAboveTheSampledSupAndDoNotWidenTheSlope) {
  for (const char* name : {"dot_d4_h1_bias", "prenorm_rmsnorm_d4_h2_bias"}) {
    SCOPED_TRACE(name);
    const TorchCase c = torch_case(name);
    const double eps = 1e-2 * c.X.norm();
    detail::SecondOrderOptions one, many;
    one.radius_pieces = one.taylor_pieces = 1;
    many.radius_pieces = many.taylor_pieces = 16;
    const detail::SecondOrderBound a =
        detail::second_order_bound(c.layer, c.options, c.X, region_box(c.X, eps), eps, one);
    const detail::SecondOrderBound b =
        detail::second_order_bound(c.layer, c.options, c.X, region_box(c.X, eps), eps, many);
    ASSERT_TRUE(b.finite);
    EXPECT_EQ(a.radius_pieces, 1);
    EXPECT_EQ(b.radius_pieces, 16);
    EXPECT_EQ(b.taylor_pieces, std::isfinite(b.taylor_two) ? 16 : 0);
    EXPECT_LE(b.slope_inf, a.slope_inf * (1 + 1e-12));
    const double sampled = sampled_sup(c, eps, 303);
    EXPECT_LE(sampled, b.two_upper * (1 + sampled_norm_slack));
    EXPECT_LE(sampled, b.gap_two * (1 + sampled_norm_slack));
  }
  // The automatic choice: Taylor pieces up to 16 while their passes number at most 64, radius pieces at
  // least 4 where n·d ≤ 128 (docs/local.md, "Radius pieces").
  EXPECT_EQ(region_pieces(16), (std::pair{16, 16}));
  EXPECT_EQ(region_pieces(20), (std::pair{8, 8}));
  EXPECT_EQ(region_pieces(40), (std::pair{4, 4}));
  EXPECT_EQ(region_pieces(72), (std::pair{4, 2}));
  EXPECT_EQ(region_pieces(544), (std::pair{1, 2}));
  EXPECT_EQ(region_pieces(16, 0), (std::pair{4, 2}));  // the radius bisection's choice
}

// The forward-mode passes run on OpenMP threads and are combined in a fixed order (parallel_passes.hpp): one
// thread and three give the same bits, tightening sweeps, radius pieces and Taylor form included.
TEST(TaylorForm, DoesNotDependOnTheNumberOfThreads) {
  const TorchCase c = torch_case("prenorm_rmsnorm_d4_h2_bias");
  const double eps = 1e-3 * c.X.norm();
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  const detail::SecondOrderBound one =
      detail::second_order_bound(c.layer, c.options, c.X, region_box(c.X, eps), eps);
  omp_set_num_threads(3);
  const detail::SecondOrderBound three =
      detail::second_order_bound(c.layer, c.options, c.X, region_box(c.X, eps), eps);
  omp_set_num_threads(before);
  ASSERT_TRUE(std::isfinite(one.taylor_two));
  for (const auto& [a, b] :
       {std::pair{one.slope_two, three.slope_two}, std::pair{one.slope_inf, three.slope_inf},
        std::pair{one.gap_two, three.gap_two}, std::pair{one.gap_rate, three.gap_rate},
        std::pair{one.taylor_two, three.taylor_two}, std::pair{one.taylor_rate, three.taylor_rate},
        std::pair{one.taylor_slope, three.taylor_slope}})
    EXPECT_EQ(a, b);
}

/// ∂²f/∂x_k∂x_l by the four-point central difference with step h.
template <class F>
double mixed_difference(const F& f, const Matrix<double>& X, Index k, Index l, double h) {
  const auto at = [&](double sk, double sl) {
    Matrix<double> Y = X;
    Y.data()[k] += sk * h;
    Y.data()[l] += sl * h;
    return f(Y);
  };
  return (at(1, 1) - at(1, -1) - at(-1, 1) + at(-1, -1)) / (4 * h * h);
}

TEST(HessianSweep, EnclosesFiniteDifferenceHessiansOverABox) {
  for (const char* name : {"dot_d4_h1_bias", "prenorm_rmsnorm_d4_h2_bias", "l2_d4_h1_nobias"}) {
    SCOPED_TRACE(name);
    const TorchCase c = torch_case(name);
    const Index nd = c.X.size();
    const Vector<double> vz = standard_normal(nd, 7), wz = standard_normal(nd, 8);
    Matrix<interval64> v(nd, 1), w(nd, 1);
    for (Index i = 0; i < nd; ++i) {
      v(i, 0) = interval64(vz(i));
      w(i, 0) = interval64(wz(i));
    }
    const double r = 1e-3 * c.X.norm();
    const Matrix<interval64> box = region_box(c.X, r);
    const detail::HessianSweep H = detail::hessian_sweep(c.layer, c.options, box, {}, v, w);
    ASSERT_TRUE(H.finite);
    const double h = 1e-2 * r;  // inside the box for points at most r − 2h from its centre
    for (int s = 0; s < 3; ++s) {
      const Vector<double> z = standard_normal(nd, 30 + std::uint64_t(s));
      Matrix<double> P = c.X;
      for (Index i = 0; i < nd; ++i) P.data()[i] += 0.5 * r * std::tanh(z(i));
      const auto phi = [&](const Matrix<double>& Y) {
        return wz.dot(detail::closed_form_block_jacobian(c.layer, c.options, Y) * vz);
      };
      const auto jv0 = [&](const Matrix<double>& Y) {
        return (detail::closed_form_block_jacobian(c.layer, c.options, Y) * vz)(0);
      };
      // Rounding of the difference: ~u·|f|/h², with |f| ≤ ‖J‖‖w‖‖v‖; truncation ~h²|∂⁴f|, far smaller.
      const double scale = wz.norm() * vz.norm() * c.jacobian.norm();
      const double slack = 64 * std::numeric_limits<double>::epsilon() * scale / (h * h);
      for (Index k = 0; k < nd; k += 3)
        for (Index l = 0; l < nd; l += 2) {
          const double fd = mixed_difference(phi, P, k, l, h);
          EXPECT_GE(fd, H.phi(k, l).lower() - slack);
          EXPECT_LE(fd, H.phi(k, l).upper() + slack);
          const double fd0 = mixed_difference(jv0, P, k, l, h);
          EXPECT_GE(fd0, H.jv[0](k, l).lower() - slack);
          EXPECT_LE(fd0, H.jv[0](k, l).upper() + slack);
          EXPECT_LE(std::fabs(fd0), H.rows[0](k, l) * vz.cwiseAbs().maxCoeff() + slack);
        }
    }
  }
}

/// Scores s_j(x) = c_j + Σ_k A_jk x_k + ½ Σ_kl B_jkl x_k x_l of 8 coordinates, formed in any number type.
struct QuadraticScores {
  static constexpr int keys = 5, N = 8;
  Vector<double> c = standard_normal(keys, 51);
  Vector<double> A = standard_normal(keys * N, 52);
  Vector<double> B = standard_normal(keys * N * N, 53);
  double b(int j, int k, int l) const { return (B(j * N * N + k * N + l) + B(j * N * N + l * N + k)) / 2; }
  template <class T>
  std::vector<T> operator()(const std::vector<T>& x) const {
    std::vector<T> s;
    for (int j = 0; j < keys; ++j) {
      T acc(c(j));
      for (int k = 0; k < N; ++k) {
        acc = acc + x[std::size_t(k)] * T(A(j * N + k));
        for (int l = 0; l < N; ++l) acc = acc + x[std::size_t(k)] * x[std::size_t(l)] * T(b(j, k, l) / 2);
      }
      s.push_back(acc);
    }
    return s;
  }
  std::vector<double> softmax(const std::vector<double>& x) const {
    std::vector<double> s = (*this)(x), p(s.size());
    const double top = *std::max_element(s.begin(), s.end());
    double z = 0;
    for (std::size_t j = 0; j < s.size(); ++j) z += (p[j] = std::exp(s[j] - top));
    for (double& v : p) v /= z;
    return p;
  }
};

// The centred softmax of the forward-mode numbers (docs/local.md, "Centred softmax and weighted sums")
// against finite differences of a double softmax at points of the box, and against the quotient rule's width.
TEST(CentredSoftmax, EnclosesTheDerivativesOverABoxAndIsNarrowerThanTheQuotientRule) {
  constexpr int N = QuadraticScores::N;
  const QuadraticScores f;
  // A wide box for the widths, a narrow one where the enclosures are tight enough to catch a wrong formula.
  for (const double r : {0.05, 1e-3}) {
    SCOPED_TRACE(r);
    std::vector<detail::Dual<N>> xd(N);
    std::vector<detail::HyperDual<N>> xh(N);
    for (int k = 0; k < N; ++k) {
      xd[std::size_t(k)] = detail::Dual<N>(interval64::hull(-r, r));
      xd[std::size_t(k)].g[std::size_t(k)] = interval64(1.0);
      xh[std::size_t(k)] = detail::HyperDual<N>(interval64::hull(-r, r));
      xh[std::size_t(k)].a[std::size_t(k)] = interval64(1.0);
      xh[std::size_t(k)].b[std::size_t(k)] = interval64(1.0);
    }
    const auto pd = detail::softmax_numbers(f(xd), 0.3);  // the intersection of the two
    const auto ph = detail::softmax_numbers(f(xh), 0.3);
    const auto cd = detail::centred_softmax(f(xd), 0.3);  // the centred identities alone
    const auto ch = detail::centred_softmax(f(xh), 0.3);
    const auto qd = detail::softmax_numbers<detail::Dual<N>>(f(xd), 0.3);  // the quotient rule
    const auto qh = detail::softmax_numbers<detail::HyperDual<N>>(f(xh), 0.3);
    const auto width = [](const interval64& x) { return x.upper() - x.lower(); };
    double centred = 0, quotient = 0, centred2 = 0, quotient2 = 0;
    for (int j = 0; j < QuadraticScores::keys; ++j)
      for (int k = 0; k < N; ++k) {
        centred += width(cd[std::size_t(j)].g[std::size_t(k)]);
        quotient += width(qd[std::size_t(j)].g[std::size_t(k)]);
        for (int l = 0; l < N; ++l) {
          centred2 += width(ph[std::size_t(j)].ab[std::size_t(k * N + l)]);
          quotient2 += width(qh[std::size_t(j)].ab[std::size_t(k * N + l)]);
        }
      }
    // The centred first partials are narrower; the intersection is no wider than the quotient rule.
    EXPECT_LT(centred, quotient);
    EXPECT_LE(centred2, quotient2);
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> unit(-1, 1);
    const double h1 = 2e-5 * r, h2 = 1e-2 * r;
    // Central differences: truncation ~h²·|∂³p|, resp. ~h²·|∂⁴p| (|∂s| ≲ 10 here), and rounding ~u/h, resp.
    // u/h².
    const double slack1 = 1e-7, slack2 = 1e-3;
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<double> x(N);
      for (double& v : x) v = 0.9 * r * unit(rng);  // the stencils stay in the box
      const auto at = [&](int k, double dk, int l, double dl) {
        std::vector<double> y = x;
        y[std::size_t(k)] += dk;
        y[std::size_t(l)] += dl;
        return f.softmax(y);
      };
      for (int k = 0; k < N; ++k)
        for (int j = 0; j < QuadraticScores::keys; ++j) {
          const std::size_t J = std::size_t(j);
          const double g = (at(k, h1, k, 0)[J] - at(k, -h1, k, 0)[J]) / (2 * h1);
          for (const interval64& e :
               {pd[J].g[std::size_t(k)], ph[J].a[std::size_t(k)], cd[J].g[std::size_t(k)],
                ch[J].a[std::size_t(k)], ch[J].b[std::size_t(k)]}) {
            EXPECT_GE(g, e.lower() - slack1);
            EXPECT_LE(g, e.upper() + slack1);
          }
          for (int l = 0; l < N; l += 3) {
            const double H =
                (at(k, h2, l, h2)[J] - at(k, h2, l, -h2)[J] - at(k, -h2, l, h2)[J] + at(k, -h2, l, -h2)[J]) /
                (4 * h2 * h2);
            for (const interval64& e : {ph[J].ab[std::size_t(k * N + l)], ch[J].ab[std::size_t(k * N + l)]}) {
              EXPECT_GE(H, e.lower() - slack2);
              EXPECT_LE(H, e.upper() + slack2);
            }
          }
        }
    }
  }
}

// The geometry of the segment pieces, exactly: piece j of m must contain X + (j/m)(box − X) and X, with an
// ℓ₂ radius of at least (j/m)ρ, or every bound built on it is unsound — and the loss from too small a piece
// is far below the slack of any sampled check (a piece shrunk by 1/16 passes all of them), so each end is
// compared with the exact value in 256-bit arithmetic, where m·(end − x) and j·(box end − x) are exact.
TEST(RegionPieces, ContainTheScaledRegionExactly) {
  const PrecisionGuard guard(256);
  std::mt19937_64 rng(20261206);
  std::uniform_real_distribution<double> coord(-10.0, 10.0), log_radius(-9.0, 0.0);
  const auto radius = [&] { return std::pow(10.0, log_radius(rng)); };
  for (int trial = 0; trial < 40; ++trial) {
    const Index n = 3, d = 4;
    Matrix<double> X(n, d);
    Matrix<interval64> box(n, d);
    for (Index i = 0; i < n; ++i)
      for (Index a = 0; a < d; ++a) {
        X(i, a) = trial % 5 == 0 ? 1e6 * coord(rng) : coord(rng);
        box(i, a) = interval64::hull(X(i, a) - radius(), X(i, a) + radius());  // asymmetric
      }
    const double rho = radius();
    for (int m : {1, 2, 3, 4, 7, 8, 16, 64})
      for (int j = 1; j <= m; ++j) {
        const detail::RegionPiece piece = detail::region_piece(X, box, rho, j, m);
        EXPECT_GE(mpfr(piece.l2_radius) * m, mpfr(rho) * j) << m << " " << j;
        for (Index i = 0; i < n; ++i)
          for (Index a = 0; a < d; ++a) {
            const mpfr x(X(i, a)), lo(piece.box(i, a).lower()), hi(piece.box(i, a).upper());
            EXPECT_LE(lo, x);
            EXPECT_GE(hi, x);
            EXPECT_LE((lo - x) * m, (mpfr(box(i, a).lower()) - x) * j) << m << " " << j;
            EXPECT_GE((hi - x) * m, (mpfr(box(i, a).upper()) - x) * j) << m << " " << j;
            // and no wider than a few roundings: the pieces exist to be narrower than the box
            EXPECT_LE(piece.box(i, a).upper() - piece.box(i, a).lower(),
                      double(j) / m * (box(i, a).upper() - box(i, a).lower()) * (1 + 1e-12) +
                          8 * std::abs(X(i, a)) * std::numeric_limits<double>::epsilon());
          }
      }
  }
}

// The Taylor form's weights enclose ω_i = ∫ over [(i − 1)/m, i/m] of (1 − t) dt, computed here as the exact
// difference of the antiderivative t − t²/2, and the piece used for weight i is the region of radius i/m.
TEST(RegionPieces, TaylorWeightsAndRegionsMatchTheirPieces) {
  const PrecisionGuard guard(256);
  for (int pieces : {1, 2, 4, 8, 16, 64})
    for (int m = 1; m <= pieces; m *= 2) {
      mpfr total(0);
      for (int i = 1; i <= m; ++i) {
        const auto antiderivative = [&](int k) {
          const mpfr t = mpfr(k) / m;
          return t - t * t / 2;
        };
        const mpfr exact = antiderivative(i) - antiderivative(i - 1);
        const interval64 w = detail::taylor_piece_weight(i, m);
        EXPECT_LE(mpfr(w.lower()), exact) << i << "/" << m;
        EXPECT_GE(mpfr(w.upper()), exact) << i << "/" << m;
        total += exact;
        // radius piece p is X + ((p + 1)/pieces)(R − X): the one with (p + 1)/pieces = i/m
        const std::size_t p = detail::taylor_piece_region(i, m, pieces);
        EXPECT_EQ(int(p + 1) * m, i * pieces) << i << "/" << m << " of " << pieces;
      }
      EXPECT_EQ(total, mpfr(0.5));
    }
}

}  // namespace
}  // namespace regatta::lip
