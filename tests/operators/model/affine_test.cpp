// affine_margin / affine_certified_radius (operators/model_affine.hpp) on the trained digits ViT of
// tests/data/vit_digits: the certified lower bound of the margin over a ball must lie below the margin's
// interval64 enclosure at every sampled point of the ball (an independent evaluation: the plain forward pass
// at that point), be tight at radius 0, and the certified radius must lie below the attack radius and above
// the region enclosures' radius (model_robustness.hpp), with the prediction kept on the certified sphere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <regatta/core/interval64.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/core/resources.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_affine.hpp>
#include <regatta/operators/model_robustness.hpp>

#include "support/tolerance.hpp"

namespace regatta::operators {
namespace {

// The command line's thread setting (core/resources.hpp): Eigen's products on one thread. The passes'
// matrices are small, and on a loaded two-core machine a parallel GEMM's synchronisation made these tests
// several times slower.
const ThreadSetting kThreads = configure_threads();

const std::filesystem::path dir = std::filesystem::path(REGATTA_TEST_DATA_DIR) / "vit_digits";

struct Sample {
  Vector<double> x;
  int y = 0;
};

Sample test_image(std::size_t i) {
  const auto path = dir / "test_set.npz";
  const io::Array images = io::read_npz_member(path, "images");
  const io::Array labels =
      io::read_npz_member(path, "labels", io::default_max_file_bytes, io::NonFloat::integers);
  const std::size_t n = images.shape[1] * images.shape[2];
  return {Eigen::Map<const Vector<double>>(images.data.data() + i * n, Eigen::Index(n)), int(labels.data[i])};
}

/// The interval64 enclosure of min_c z_y − z_c at one point: [lower, upper] of the smallest difference.
interval64 margin_enclosure(const Model& m, const Vector<double>& x, int y) {
  const Vector<interval64> z = forward<interval64>(m, Vector<interval64>(x.cast<interval64>()));
  double lo = INFINITY, hi = INFINITY;
  for (Eigen::Index c = 0; c < z.size(); ++c) {
    if (c == y) continue;
    lo = std::min(lo, (z(y) - z(c)).lower());
    hi = std::min(hi, (z(y) - z(c)).upper());
  }
  return interval64::hull(lo, hi);
}

TEST(AffineMargin, AtRadiusZeroItIsTheMarginUpToRounding) {
  const Model m = load_model(dir / "vit_digits.safetensors");
  // At r = 0 only rounding errors remain. The affine pass bounds them a priori (γ_k per dot product) and
  // carries them in the slack, which every later stage multiplies by |W| (it wraps, like an interval): at
  // r = 0 it ends 10⁻⁶-relative wide on these images, against the interval64 forward's 10⁻¹³. The check
  // is that this stays negligible next to the margin, with a hundredfold reserve: 10⁻⁴ of it. (The
  // upper comparison is exact soundness: a lower bound cannot exceed the enclosure's upper end.)
  const double kRoundingLoss = 1e-4;
  for (std::size_t i : {7}) {
    const Sample s = test_image(i);
    const interval64 e = margin_enclosure(m, s.x, s.y);
    const double lower = affine_margin(m, s.x, s.y, 0.0);
    EXPECT_LE(lower, e.upper()) << "image " << i;
    EXPECT_GE(lower, e.lower() - kRoundingLoss * std::fabs(e.upper())) << "image " << i;
  }
}

TEST(AffineMargin, LowerBoundHoldsAtSampledPointsOfTheBall) {
  const Model m = load_model(dir / "vit_digits.safetensors");
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform;
  for (std::size_t i : {12}) {
    const Sample s = test_image(i);
    const ConvertedModel<double> md(m);
    const AttackResult a = attack(md, s.x, s.y);
    ASSERT_TRUE(a.found);
    // A radius where the bound is still positive and one where it is not: both must hold.
    for (double r : {0.02 * a.radius, 0.3 * a.radius}) {
      const double lower = affine_margin(m, s.x, s.y, r);
      ASSERT_FALSE(std::isnan(lower));
      const Vector<double> towards = (a.point - s.x).normalized();
      for (int k = 0; k < 24; ++k) {
        Vector<double> d(s.x.size());
        for (auto& v : d) v = normal(rng);
        // The sphere (k even), the interior, and the direction of the attack (where the margin falls
        // fastest).
        const double t = k % 2 == 0 ? 1.0 : std::pow(uniform(rng), 1.0 / double(s.x.size()));
        const Vector<double> dir_k = k % 3 == 0 ? towards : Vector<double>(d.normalized());
        const Vector<double> point = s.x + (r * t) * dir_k;
        EXPECT_LE(lower, margin_enclosure(m, point, s.y).upper()) << "image " << i << ", r = " << r;
      }
    }
  }
}

TEST(AffineMargin, OtherActivationsHoldAtSampledPointsToo) {
  // The same weights with the tanh GELU and with ReLU in the MLPs (other networks, same shapes): their
  // remainders use other second-derivative enclosures, and ReLU its own relaxation.
  std::mt19937_64 rng(9);
  std::normal_distribution<double> normal;
  const Sample s = test_image(3);
  for (Activation act : {Activation::gelu_tanh, Activation::relu}) {
    Model m = load_model(dir / "vit_digits.safetensors");
    m.activation = act;
    const double r = 0.01;
    const double lower = affine_margin(m, s.x, s.y, r);
    EXPECT_GT(lower, 0) << to_string(act);  // not vacuous at half the ViT's certified radius
    for (int k = 0; k < 16; ++k) {
      Vector<double> d(s.x.size());
      for (auto& v : d) v = normal(rng);
      const Vector<double> point = s.x + (r / d.norm()) * d;
      EXPECT_LE(lower, margin_enclosure(m, point, s.y).upper()) << to_string(act);
    }
  }
}

TEST(AffineMargin, TextModelsCentreOnTheForwardPassAndHoldAtSampledPoints) {
  // tests/data/text_models: GPT-2 (causal, last-token pooling, tanh GELU) and BERT (post-norm, embedding
  // LayerNorm, tanh pooler), on every input of their test sets: at r = 0 the bound is the margin up to
  // rounding (kRoundingLoss as above: a wrong mask or stage moves it by O(1)), and at a radius where it is
  // positive it lies below the margin's enclosure at sampled points of the ball.
  const double kRoundingLoss = 1e-4;
  std::mt19937_64 rng(13);
  std::normal_distribution<double> normal;
  for (const char* name : {"gpt2", "bert"}) {
    const auto root = std::filesystem::path(REGATTA_TEST_DATA_DIR) / "text_models" / name;
    const Model m = load_model(root / "model.safetensors");
    const auto set = root / "test_set.npz";
    const io::Array tokens =
        io::read_npz_member(set, "tokens", io::default_max_file_bytes, io::NonFloat::integers);
    const std::size_t n = tokens.shape[1];
    for (std::size_t i = 0; i < std::min<std::size_t>(tokens.shape[0], 4); ++i) {
      std::vector<int> ids;
      for (std::size_t k = 0; k < n; ++k) ids.push_back(int(tokens.data[i * n + k]));
      const Vector<double> x = m.embed_tokens(ids);
      Eigen::Index y = 0;
      forward(m, x).maxCoeff(&y);  // the predicted class: its margin is positive
      const interval64 e = margin_enclosure(m, x, int(y));
      const double at_centre = affine_margin(m, x, int(y), 0.0);
      EXPECT_LE(at_centre, e.upper()) << name << " input " << i;
      EXPECT_GE(at_centre, e.lower() - kRoundingLoss * std::fabs(e.upper())) << name << " input " << i;
      double r = 0.1;
      while (affine_margin(m, x, int(y), r) <= 0 && r > 1e-8) r /= 4;
      const double lower = affine_margin(m, x, int(y), r);
      for (int k = 0; k < 6; ++k) {
        Vector<double> d(x.size());
        for (auto& v : d) v = normal(rng);
        EXPECT_LE(lower, margin_enclosure(m, Vector<double>(x + (r / d.norm()) * d), int(y)).upper())
            << name << " input " << i;
      }
    }
  }
}

TEST(AffineMargin, ATokensOwnColumnsGiveTheBoundOfAllColumns) {
  // The row-wise steps run per token over only the columns its rows read (AffineOptions::compact_columns);
  // over every column the forms are the same up to the numbering of fresh symbols, so the two bounds may
  // differ only by the rounding terms, which count the (nonzero) terms of each sum: far below 10⁻⁹ of the
  // margin. A column moved to the wrong place (a token's or the ledger's) changes the bound by O(1). On the
  // digits ViT (the ledger, the last block's per-output norm products) and GPT-2 (causal, every token
  // queried through the last block).
  auto check = [](const Model& m, const Vector<double>& x, int y, double r, const std::string& what) {
    const double compact = affine_margin(m, x, y, r);
    const double all = affine_margin(m, x, y, r, {}, AffineOptions{false});
    ASSERT_TRUE(std::isfinite(compact) && std::isfinite(all)) << what;
    EXPECT_NEAR(compact, all, 1e-9 * (std::fabs(all) + 1)) << what;
  };
  const Model vit = load_model(dir / "vit_digits.safetensors");
  const Sample s = test_image(3);
  for (double r : {0.0, 0.02, 0.035}) check(vit, s.x, s.y, r, "digits image 3, r = " + std::to_string(r));
  const auto root = std::filesystem::path(REGATTA_TEST_DATA_DIR) / "text_models" / "gpt2";
  const Model gpt2 = load_model(root / "model.safetensors");
  const io::Array tokens = io::read_npz_member(root / "test_set.npz", "tokens", io::default_max_file_bytes,
                                               io::NonFloat::integers);
  std::vector<int> ids;
  for (std::size_t k = 0; k < tokens.shape[1]; ++k) ids.push_back(int(tokens.data[k]));
  const Vector<double> x = gpt2.embed_tokens(ids);
  Eigen::Index y = 0;
  forward(gpt2, x).maxCoeff(&y);
  check(gpt2, x, int(y), 0.03, "gpt2 input 0");
}

TEST(AffineRadius, BetweenTheRegionRadiusAndTheAttackAndKeepsTheLabel) {
  const Model m = load_model(dir / "vit_digits.safetensors");
  const ConvertedModel<double> md(m);
  const ConvertedModel<interval64> mi(m);
  const Sample s = test_image(1);
  const AttackResult a = attack(md, s.x, s.y);
  ASSERT_TRUE(a.found);
  const CertifiedRadius affine = affine_certified_radius(m, s.x, s.y, a.radius, 0.1);
  // The region enclosures (a second method) certify a tiny ball here, but not this one: the point of the
  // affine forms.
  EXPECT_TRUE(certify_ball(mi, s.x, s.y, 1e-6));
  EXPECT_FALSE(certify_ball(mi, s.x, s.y, affine.radius));
  EXPECT_LT(affine.radius, a.radius);
  EXPECT_GT(affine_margin(m, s.x, s.y, affine.radius), 0);
  EXPECT_LE(affine_margin(m, s.x, s.y, affine.refuted), 0);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal;
  for (int k = 0; k < 32; ++k) {
    Vector<double> d(s.x.size());
    for (auto& v : d) v = normal(rng);
    Eigen::Index pred = 0;
    forward(m, Vector<double>(s.x + (affine.radius / d.norm()) * d)).maxCoeff(&pred);
    EXPECT_EQ(int(pred), s.y);
  }
}

TEST(AffineMargin, UnsupportedModelsSayWhy) {
  Model m = load_model(dir / "vit_digits.safetensors");
  EXPECT_EQ(affine_unsupported(m), "");
  m.blocks[1].attention.kind = AttentionKind::l2;
  EXPECT_NE(affine_unsupported(m).find("L2"), std::string::npos);
  EXPECT_THROW(affine_margin(m, test_image(0).x, 0, 0.1), std::logic_error);
}

}  // namespace
}  // namespace regatta::operators
