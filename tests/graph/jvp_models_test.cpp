// Forward mode and Jacobian enclosures on the committed ONNX models (tests/data/onnx/make_onnx_models.py)
// and the trained digits ViT (tests/data/vit_digits), docs/graph.md#forward-mode-and-jacobian-enclosures:
// J·v against the reverse sweep (uᵀ(J·v) = (Jᵀu)ᵀ·v, the reverse sweep itself checked against torch in
// vjp_models_test) and against central difference quotients of the MPFI forward at 128 bits, which the MPFI
// tangent must contain; the interval64 Jacobian over a small box must contain the binary64 Jacobian at 100
// points of the box, and the enclosure at the box's centre alone must miss some (the containment can fail).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>
#include <string>

#include <Eigen/SVD>

#include <regatta/core/eigen.hpp>
#include <regatta/core/io/npy.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/scalar_traits.hpp>
#include <regatta/graph/attack.hpp>
#include <regatta/graph/derivatives.hpp>
#include <regatta/graph/evaluate.hpp>
#include <regatta/graph/local_lipschitz.hpp>
#include <regatta/graph/onnx_import.hpp>

namespace {

using namespace regatta;
using namespace regatta::graph;

const std::string data = std::string(REGATTA_TEST_DATA_DIR);

struct Case {
  Graph g;
  std::vector<double> x;
};

Case load(const std::string& name) {
  if (name == "vit_digits") {  // the first test image
    const io::Array images = io::read_npz_member(data + "/vit_digits/test_set.npz", "images");
    return {import_onnx(data + "/vit_digits/vit_digits.onnx"),
            std::vector<double>(images.data.begin(), images.data.begin() + 64)};
  }
  return {import_onnx(data + "/onnx/" + name + ".onnx"),
          io::read_npy(data + "/onnx/" + name + ".input.npy").data};
}

std::vector<double> random_vector(std::size_t n, std::mt19937_64& rng) {
  std::vector<double> v(n);
  for (double& e : v) e = std::uniform_real_distribution<double>(-1, 1)(rng);
  return v;
}

class JvpModel : public ::testing::TestWithParam<std::string> {};

TEST_P(JvpModel, ForwardModeAgreesWithReverseModeAndMpfiQuotients) {
  const Case c = load(GetParam());
  const Shape& shape = c.g.values[std::size_t(c.g.inputs[0])].shape;
  std::mt19937_64 rng(3);
  const std::vector<double> v = random_vector(c.x.size(), rng);
  const std::vector<double> jv = jvp(c.g, c.x, v);
  const std::vector<double> u = random_vector(jv.size(), rng);
  const std::vector<double> ju = vjp(c.g, c.x, u);
  double a = 0, b = 0, scale = 0;
  for (std::size_t k = 0; k < jv.size(); ++k) {
    a += u[k] * jv[k];
    scale += std::fabs(u[k] * jv[k]);
  }
  for (std::size_t i = 0; i < v.size(); ++i) b += ju[i] * v[i];
  EXPECT_NEAR(a, b, 1e-12 * scale) << GetParam() << ": uᵀ(J·v) against (Jᵀu)ᵀ·v";

  PrecisionGuard guard(128);
  const interval h = interval(1) / interval(std::ldexp(1.0, 30));
  const auto at = [&](int sign) {
    Tensor<interval> t{shape, {}};
    for (std::size_t i = 0; i < c.x.size(); ++i)
      t.data.emplace_back(interval(c.x[i]) + interval(sign) * h * interval(v[i]));
    return evaluate<interval>(c.g, {t})[0].data;
  };
  const std::vector<interval> plus = at(1), minus = at(-1);
  std::vector<interval> xi(c.x.begin(), c.x.end()), vi(v.begin(), v.end());
  const std::vector<interval> jv_mpfi = jvp<interval>(c.g, xi, vi);
  double worst = 0, largest = 0;
  std::vector<double> q(jv.size());
  for (std::size_t k = 0; k < jv.size(); ++k) {
    q[k] = scalar_traits<interval>::to_double(interval((plus[k] - minus[k]) / (interval(2) * h)));
    largest = std::max(largest, std::fabs(q[k]));
  }
  ASSERT_GT(largest, 1e-3) << GetParam() << ": a tangent that vanishes checks nothing";
  for (std::size_t k = 0; k < jv.size(); ++k) {
    worst = std::max(worst, std::fabs(jv[k] - q[k]));
    // The quotient misses J·v by its truncation O(h²) ≈ 1e-18·|f'''|: 1e-11 of the tangent's size.
    const double slack = 1e-11 * largest;
    EXPECT_LE(static_cast<double>(lower_bound(jv_mpfi[k])) - slack, q[k]) << GetParam() << " " << k;
    EXPECT_GE(static_cast<double>(upper_bound(jv_mpfi[k])) + slack, q[k]) << GetParam() << " " << k;
  }
  EXPECT_LE(worst, 1e-9 * largest) << GetParam();
  std::cout << GetParam() << ": largest |J·v - MPFI quotient| " << worst << " of " << largest << "\n";
}

INSTANTIATE_TEST_SUITE_P(Models, JvpModel,
                         ::testing::Values("encoder_postnorm_gelu", "encoder_prenorm_relu", "vit_conv_mha",
                                           "gpt_causal", "vit_vnncomp_like", "vit_digits", "causal_where_inf",
                                           "causal_add_inf"));

/// Whether every entry of J lies in the enclosure E, up to J's own rounding (1e-12 relative).
bool contains(const Jacobian<interval64>& E, const Jacobian<double>& J) {
  for (std::size_t e = 0; e < J.data.size(); ++e) {
    const double slack = 1e-12 * (1 + std::fabs(J.data[e]));
    if (!(E.data[e].lower() - slack <= J.data[e] && J.data[e] <= E.data[e].upper() + slack)) return false;
  }
  return true;
}

// The box half-widths keep the enclosures informative: the naive interval sweeps widen through every
// softmax and LayerNorm (docs/graph.md#forward-mode-and-jacobian-enclosures), so on the encoder the enclosure
// over a box of half-width 1e-6 is ~1e5 wide already, on the ReLU/BatchNorm ViT ~3e-3 (|J| ≤ 0.02).
TEST(JacobianEnclosure, ContainsTheJacobianAtSampledPointsOfTheBoxAndFailsWhenShrunkToItsCentre) {
  for (const std::string name : {"vit_vnncomp_like", "encoder_prenorm_relu"}) {
    const Case c = load(name);
    const double d = 1e-6;
    std::vector<double> lo(c.x.size()), hi(c.x.size());
    for (std::size_t i = 0; i < c.x.size(); ++i) {
      lo[i] = c.x[i] - d;
      hi[i] = c.x[i] + d;
    }
    const Jacobian<interval64> E = jacobian_enclosure(c.g, lo, hi),
                               centre = jacobian_enclosure(c.g, c.x, c.x);
    std::mt19937_64 rng(11);
    int outside_centre = 0;
    double width = 0, centre_width = 0, spread = 0;
    const Jacobian<double> J0 = jacobian(c.g, c.x);
    for (int s = 0; s < 100; ++s) {
      std::vector<double> p(c.x.size());
      for (std::size_t i = 0; i < p.size(); ++i)
        p[i] = std::uniform_real_distribution<double>(lo[i], hi[i])(rng);
      const Jacobian<double> J = jacobian(c.g, p);
      EXPECT_TRUE(contains(E, J)) << name << ": sample " << s << " outside the enclosure";
      outside_centre += !contains(centre, J);
      for (std::size_t e = 0; e < J.data.size(); ++e)
        spread = std::max(spread, std::fabs(J.data[e] - J0.data[e]));
    }
    EXPECT_TRUE(contains(centre, J0)) << name << ": the point enclosure misses the Jacobian at the point";
    for (const interval64& e : E.data) width = std::max(width, e.upper() - e.lower());
    for (const interval64& e : centre.data) centre_width = std::max(centre_width, e.upper() - e.lower());
    EXPECT_GT(outside_centre, 0) << name
                                 << ": the enclosure at the centre held every sample: the check cannot fail";
    std::cout << name << ": Jacobian " << E.rows << " x " << E.cols << ", box half-width " << d
              << ": widest enclosure " << width << " (at the centre alone " << centre_width
              << "), largest sampled |J(p) - J(x)| " << spread << ", " << outside_centre
              << " of 100 samples outside the centre's enclosure\n";
  }
}

// At a point the interval64 sweep amplifies its own rounding widths (on the digits ViT to entries over 200
// wide, for entries below 8); the MPFI sweep at 128 bits, rounded out to interval64, contains the binary64
// Jacobian within 1e-9, and the certified ‖J(x)‖₂ built on it lies within 0.1 % above the power-iteration
// estimate, which itself matches the largest singular value of the binary64 Jacobian (Eigen's SVD, a
// second algorithm).
TEST(JacobianEnclosure, MpfiAtAPointIsNarrowAndTheCertifiedLipschitzBoundIsTight) {
  for (const std::string name : {"vit_digits", "gpt_causal", "encoder_postnorm_gelu"}) {
    const Case c = load(name);
    const Jacobian<double> J = jacobian(c.g, c.x);
    const Jacobian<interval64> E = jacobian_enclosure_at(c.g, c.x);
    EXPECT_TRUE(contains(E, J)) << name;
    double width = 0;
    for (const interval64& e : E.data) width = std::max(width, e.upper() - e.lower());
    EXPECT_LT(width, 1e-9) << name;
    const WholeLipschitz w = local_lipschitz(c.g, c.x);
    Matrix<double> M(Eigen::Index(J.rows), Eigen::Index(J.cols));
    for (std::size_t i = 0; i < J.rows; ++i)
      for (std::size_t j = 0; j < J.cols; ++j) M(Eigen::Index(i), Eigen::Index(j)) = J(i, j);
    const double sigma = Eigen::JacobiSVD<Matrix<double>>(M).singularValues()(0);
    EXPECT_NEAR(w.estimate, sigma, 1e-6 * sigma) << name;
    EXPECT_LE(sigma, w.certified) << name;
    EXPECT_LE(w.certified, 1.001 * sigma) << name;
    std::cout << name << ": widest MPFI enclosure at the point " << width << "; ||J||_2 estimate "
              << w.estimate << " (" << w.iterations << " steps), SVD " << sigma
              << ", certified <= " << w.certified << "\n";
  }
}

}  // namespace
