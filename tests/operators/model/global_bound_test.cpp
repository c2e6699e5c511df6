// The factors of the naive certificate (operators/src/model/global_bound.cpp) on the ViT fixture: each a
// certified upper bound (the linear stages against Eigen's JacobiSVD singular values, the LayerNorm stages
// against max|γ|/√ε in 256-bit MPFR, the product against the slope of the network), and the refusals.
#include <gtest/gtest.h>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/precision.hpp>

#include "vit_fixture.hpp"

namespace regatta::operators {
namespace {

using namespace vit_fixture;

TEST(ModelRegion, NaiveFactorsAreCertifiedUpperBoundsOfSampledSlopes) {
  // Each factor bounds its stage's Lipschitz constant: compare the product with the slope of the whole
  // network between nearby points (a lower estimate), which it must exceed.
  const Model m = load_model(fixture() / "vit_digits.safetensors");
  std::string why;
  const auto factors = global_lipschitz_factors(m, why);
  ASSERT_TRUE(factors.has_value()) << why;
  EXPECT_EQ(factors->size(), 1 + 2 * m.blocks.size() + 2);
  double product = 1;
  for (const auto& f : *factors) {
    EXPECT_GT(f.upper, 0) << f.stage;
    product *= f.upper;
  }
  const TestSet t = read_test_set();
  const ConvertedModel<double> md(m);
  const ModelPass<double> pass = propagate(md, image(t, 2), 0.0);
  EXPECT_GE(product, spectral_norm_upper_certified(pass.jacobian).lower);
}

TEST(ModelRegion, NaiveFactorsRefuseStagesTheyDoNotBound) {
  // The factors bound LayerNorm stages and ungated MLPs: the same model with RMSNorm, or with a gate on one
  // MLP, has no naive certificate, and says why (LLaMA files reach neither case today, being causal).
  const Model vit = load_model(fixture() / "vit_digits.safetensors");
  std::string why;
  Model rms = vit;
  rms.norm = Prenorm::rmsnorm;
  EXPECT_FALSE(global_lipschitz_factors(rms, why).has_value());
  EXPECT_NE(why.find("RMSNorm"), std::string::npos) << why;
  Model gated = vit;
  gated.blocks.back().gate = gated.blocks.back().fc1;
  EXPECT_FALSE(global_lipschitz_factors(gated, why).has_value());
  EXPECT_NE(why.find("gated"), std::string::npos) << why;
  EXPECT_TRUE(global_lipschitz_factors(vit, why).has_value()) << why;
}

TEST(ModelRegion, NaiveFactorsOfLinearAndNormStagesMatchIndependentValues) {
  const Model m = load_model(fixture() / "vit_digits.safetensors");
  std::string why;
  const auto factors = global_lipschitz_factors(m, why);
  ASSERT_TRUE(factors.has_value()) << why;
  const auto factor = [&](const std::string& stage) {
    for (const LipschitzFactor& f : *factors)
      if (f.stage == stage) return f.upper;
    ADD_FAILURE() << "no factor " << stage;
    return 0.0;
  };
  // ‖W‖₂ of the patch embedding and the head: certified above JacobiSVD's σ_max (its own rounding of a few
  // k·u aside) and within the certificate's tightness (spectral_norm.hpp) of it.
  const std::vector<std::pair<std::string, const Matrix<double>*>> linear = {{"patch_embed", &m.patch.W},
                                                                             {"head", &m.head.W}};
  for (const auto& [stage, W] : linear) {
    const double sigma = largest_singular_value(*W);
    const double k = double(std::max(W->rows(), W->cols()));
    EXPECT_GE(factor(stage), sigma * (1 - 8 * k * 0x1p-53)) << stage;
    EXPECT_LE(factor(stage), sigma * (1 + 1e-9)) << stage;
  }
  // The final LayerNorm: max|γ|/√ε, certified above the 256-bit value and within an ulp or two of it.
  PrecisionGuard guard(256);
  const mpfr exact = mpfr(m.final_norm.gamma.cwiseAbs().maxCoeff()) / sqrt(mpfr(m.eps));
  EXPECT_GE(mpfr(factor("norm")), exact);
  EXPECT_LE(mpfr(factor("norm")), exact * (1 + 4 * 0x1p-53));
}

}  // namespace
}  // namespace regatta::operators
