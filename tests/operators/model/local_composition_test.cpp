// The composition of per-stage local Lipschitz bounds (operators/model_local.hpp) on the trained digits ViT
// of tests/data/vit_digits and the text fixtures of tests/data/text_models. Checked against independent
// double evaluations: every stage constant is at least ‖J_k‖₂ of the stage's Jacobian at sampled points of
// its ball (attention: the generic JVP engine, not the structured rows, on the ViT and on GPT-2's last-token
// rows; MLP and LayerNorm: their closed-form Jacobians written here, themselves checked against central
// differences), every stage input of a sampled point of the input ball lies within the chain's radius of
// the centre's, and the certified radius lies below the attack radius, keeps the label on its sphere, and
// is at least the naive product certificate.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <regatta/core/dense_svd.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/io/npz.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/model.hpp>
#include <regatta/operators/model_local.hpp>
#include <regatta/operators/model_robustness.hpp>

#include "support/tolerance.hpp"

namespace regatta::operators {
namespace {

const std::filesystem::path vit = std::filesystem::path(REGATTA_TEST_DATA_DIR) / "vit_digits";

/// Double evaluations of a stage Jacobian (a d×d or n·d×n·d matrix of ≲ 2000 rounded operations per entry:
/// two products of width 64 after LayerNorm's sums over 32 features, or the attention JVP's chain) may
/// exceed the exact sup by their rounding: c = 16 for the relative error of the singular value over those
/// steps (SVD of a 544×544 matrix included).
const double kJacobianRounding = testing::rounding_bound<double>(16, 2048);
/// Central differences with step h: truncation h²·|f‴|/6 and cancellation eps·|f|/h; at h = 1e-5 on these
/// stages (entries of order 1–100) about 1e-7 relative, so 1e-5 is a hundredfold reserve. Only checks
/// that the closed-form Jacobians written here are the stages' derivatives.
const double kDifferenceStep = 1e-5, kDifferenceTolerance = 1e-5;
/// Sampled points are taken at this fraction of a stage's radius: the double centre differs from the exact
/// one by rounding (≲ 1e-13 relative), which the 0.1 % margin keeps inside the certified ball.
const double kInside = 0.999;

struct Sample {
  Vector<double> x;
  int y = 0;
};

Sample test_image(std::size_t i) {
  const auto path = vit / "test_set.npz";
  const io::Array images = io::read_npz_member(path, "images");
  const io::Array labels =
      io::read_npz_member(path, "labels", io::default_max_file_bytes, io::NonFloat::integers);
  const std::size_t n = images.shape[1] * images.shape[2];
  return {Eigen::Map<const Vector<double>>(images.data.data() + i * n, Eigen::Index(n)), int(labels.data[i])};
}

/// ‖J‖₂ by a divide-and-conquer SVD (singular values only; backward stable, so within the rounding bound
/// below of the exact norm of the double matrix).
double norm2(const Matrix<double>& J) { return largest_singular_value(J, SvdMethod::divide_and_conquer); }

Matrix<double> layer_norm(const Matrix<double>& X, const NormParameters& p, double eps) {
  return normalize_rows(Prenorm::layernorm, X, p.gamma, p.beta, eps);
}

/// LayerNorm's Jacobian at one token x (row convention dy = dx·J): s⁻¹(I − 11ᵀ/d − uuᵀ/d)·diag(γ).
Matrix<double> layer_norm_jacobian(const Vector<double>& x, const NormParameters& p, double eps) {
  const double d = double(x.size()), mean = x.mean();
  const Vector<double> c = x.array() - mean;
  const double s = std::sqrt(c.squaredNorm() / d + eps);
  const Vector<double> u = c / s;
  Matrix<double> B = Matrix<double>::Identity(x.size(), x.size());
  B.array() -= 1 / d;
  B -= u * u.transpose() / d;
  return B / s * p.gamma.asDiagonal();
}

/// The pre-norm MLP sub-block at one token and its Jacobian I + J_LN·W₁·diag(σ′(h))·W₂.
Vector<double> mlp(const Model& m, const TransformerBlock& blk, const Vector<double>& x) {
  Matrix<double> h = layer_norm(Matrix<double>(x.transpose()), blk.norm2, m.eps) * blk.fc1.W;
  h.row(0) += blk.fc1.b.transpose();
  return x + (activate(m.activation, h) * blk.fc2.W).transpose() + blk.fc2.b;
}
Matrix<double> mlp_jacobian(const Model& m, const TransformerBlock& blk, const Vector<double>& x) {
  Matrix<double> h = layer_norm(Matrix<double>(x.transpose()), blk.norm2, m.eps) * blk.fc1.W;
  h.row(0) += blk.fc1.b.transpose();
  const Vector<double> s = activation_derivative(m.activation, h).row(0).transpose();
  return Matrix<double>::Identity(x.size(), x.size()) +
         layer_norm_jacobian(x, blk.norm2, m.eps) * blk.fc1.W * s.asDiagonal() * blk.fc2.W;
}

/// The row that cls or last pooling keeps.
Eigen::Index pooled_row(const Model& m, Eigen::Index rows) {
  return m.pooling == Pooling::cls ? 0 : rows - 1;
}

/// The stage inputs of a pre-norm model with cls or last pooling (the ViT, GPT-2) in double, in the order of
/// the chain: x, the tokens before blocks.0.attn, blocks.0.mlp, …, the pooled token before the final norm;
/// then the features.
std::vector<Matrix<double>> stage_inputs(const Model& m, const Vector<double>& x) {
  std::vector<Matrix<double>> out{Matrix<double>(x.transpose())};
  Matrix<double> X = embed<double>(m, x);
  for (std::size_t b = 0; b < m.blocks.size(); ++b) {
    out.push_back(X);
    X = Block<double>(m.blocks[b].attention, m.attention_options()).forward(X);
    if (b + 1 == m.blocks.size()) X = Matrix<double>(X.row(pooled_row(m, X.rows())));
    out.push_back(X);
    for (Eigen::Index i = 0; i < X.rows(); ++i)
      X.row(i) = mlp(m, m.blocks[b], X.row(i).transpose()).transpose();
  }
  out.push_back(X);
  out.push_back(layer_norm(X, m.final_norm, m.eps));
  return out;
}

/// One thread for Eigen's products: the chains' matrices are small (544 × 544 at most), and on a loaded
/// two-core machine the parallel GEMM's synchronisation made the radius search four times slower.
void single_threaded_products() { Eigen::setNbThreads(1); }

Matrix<double> random_direction(Eigen::Index rows, Eigen::Index cols, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  Matrix<double> D(rows, cols);
  for (auto& v : D.reshaped()) v = normal(rng);
  return D / D.norm();
}

/// ‖J‖₂ of block b's attention sub-block (residual and pre-norm included; the generic JVP engine) at a
/// random point of the ball of stage k (centre[k], the chain's radius), only the pooled row's outputs for
/// the last block, against the chain's constant.
void expect_attention_constant(const Model& m, const LocalChain& chain,
                               const std::vector<Matrix<double>>& centre, std::size_t b, std::size_t k,
                               std::mt19937_64& rng) {
  const Matrix<double>& X = centre[k];
  const Matrix<double> P = X + kInside * chain.stages[k].radius * random_direction(X.rows(), X.cols(), rng);
  const Block<double> block(m.blocks[b].attention, m.attention_options());
  Matrix<double> J = dense_jacobian(block.linearize(P));  // rows: output entry i·d + a
  if (b + 1 == m.blocks.size()) J = Matrix<double>(J.middleRows(pooled_row(m, X.rows()) * m.width, m.width));
  EXPECT_LE(norm2(J), chain.stages[k].lipschitz * (1 + kJacobianRounding)) << chain.stages[k].stage;
}

TEST(LocalComposition, ClosedFormStageJacobiansAreTheDerivatives) {
  // The MLP and LayerNorm Jacobians written above against central differences of the stage maps.
  const Model m = load_model(vit / "vit_digits.safetensors");
  const Matrix<double> X = stage_inputs(m, test_image(3).x)[2];  // tokens before blocks.0.mlp
  const Vector<double> x = X.row(4).transpose();
  const Matrix<double> J = mlp_jacobian(m, m.blocks[0], x), L = layer_norm_jacobian(x, m.final_norm, m.eps);
  for (Eigen::Index a = 0; a < x.size(); ++a) {
    Vector<double> e = Vector<double>::Zero(x.size());
    e(a) = kDifferenceStep;
    const Vector<double> dm =
        (mlp(m, m.blocks[0], x + e) - mlp(m, m.blocks[0], x - e)) / (2 * kDifferenceStep);
    const Vector<double> dl = (layer_norm(Matrix<double>((x + e).transpose()), m.final_norm, m.eps) -
                               layer_norm(Matrix<double>((x - e).transpose()), m.final_norm, m.eps))
                                  .row(0)
                                  .transpose() /
                              (2 * kDifferenceStep);
    EXPECT_LE((dm - J.row(a).transpose()).norm(), kDifferenceTolerance * J.norm()) << a;
    EXPECT_LE((dl - L.row(a).transpose()).norm(), kDifferenceTolerance * L.norm()) << a;
  }
}

TEST(LocalComposition, StageConstantsHoldSampledJacobiansAndRadii) {
  single_threaded_products();
  const Model m = load_model(vit / "vit_digits.safetensors");
  const ConvertedModel<interval64> mi(m);
  std::mt19937_64 rng(3);
  const Sample s = test_image(0);
  const LocalComposition lc(mi, s.x);
  // A trial radius where every stage constant is finite but visibly above its value at the centre.
  const double r = 2e-5;
  const LocalChain chain = lc.chain(r);
  const LocalChain at_centre = lc.chain(0.0);
  const std::vector<std::string> names{"patch_embed",   "blocks.0.attn", "blocks.0.mlp",
                                       "blocks.1.attn", "blocks.1.mlp",  "norm"};
  ASSERT_EQ(chain.stages.size(), names.size());
  for (std::size_t k = 0; k < names.size(); ++k) {
    EXPECT_EQ(chain.stages[k].stage, names[k]);
    ASSERT_TRUE(std::isfinite(chain.stages[k].lipschitz)) << names[k];
    EXPECT_GE(chain.stages[k].lipschitz, at_centre.stages[k].lipschitz) << names[k];
  }
  EXPECT_GT(chain.stages[1].lipschitz, at_centre.stages[1].lipschitz);  // the ball is not a point
  const std::vector<Matrix<double>> centre = stage_inputs(m, s.x);
  ASSERT_EQ(centre.size(), names.size() + 1);
  // Radii: stage inputs of points of the input ball stay within the chain's radii of the centre's.
  for (int t = 0; t < 16; ++t) {
    const Vector<double> p = s.x + kInside * r * random_direction(s.x.size(), 1, rng).col(0);
    const std::vector<Matrix<double>> at = stage_inputs(m, p);
    for (std::size_t k = 0; k < names.size(); ++k)
      EXPECT_LE((at[k] - centre[k]).norm(), chain.stages[k].radius * (1 + kJacobianRounding)) << names[k];
    EXPECT_LE((at.back() - centre.back()).norm(), chain.features_radius * (1 + kJacobianRounding));
  }
  // Constants: ‖J_k‖₂ at points of each stage's ball, on its sphere (random directions).
  EXPECT_GE(chain.stages[0].lipschitz, norm2(m.patch.W));
  for (int t = 0; t < 2; ++t) {
    for (std::size_t b = 0; b < m.blocks.size(); ++b) {
      const std::size_t k = 1 + 2 * b;
      expect_attention_constant(m, chain, centre, b, k, rng);
      const Matrix<double>& Y = centre[k + 1];
      const Matrix<double> Q =
          Y + kInside * chain.stages[k + 1].radius * random_direction(Y.rows(), Y.cols(), rng);
      double worst = 0;
      for (Eigen::Index i = 0; i < Q.rows(); ++i)
        worst = std::max(worst, norm2(mlp_jacobian(m, m.blocks[b], Q.row(i).transpose())));
      EXPECT_LE(worst, chain.stages[k + 1].lipschitz * (1 + kJacobianRounding)) << names[k + 1];
    }
    const Matrix<double>& Z = centre[5];
    const Matrix<double> Q = Z + kInside * chain.stages[5].radius * random_direction(1, Z.cols(), rng);
    EXPECT_LE(norm2(layer_norm_jacobian(Q.row(0).transpose(), m.final_norm, m.eps)),
              chain.stages[5].lipschitz * (1 + kJacobianRounding));
  }
}

TEST(LocalComposition, RadiusIsBelowTheAttackAboveTheNaiveAndKeepsTheLabel) {
  single_threaded_products();
  const Model m = load_model(vit / "vit_digits.safetensors");
  const ConvertedModel<double> md(m);
  const ConvertedModel<interval64> mi(m);
  std::string why;
  const auto factors = global_lipschitz_factors(m, why);
  ASSERT_TRUE(factors.has_value()) << why;
  std::mt19937_64 rng(9);
  const Sample s = test_image(1);
  const AttackResult a = attack(md, s.x, s.y);
  ASSERT_TRUE(a.found);
  const double tolerance = 0.5;  // loose: each chain costs two attention-box enclosures
  const CertifiedRadius c = local_composition_radius(mi, s.x, s.y, a.radius, tolerance);
  EXPECT_GT(c.radius, 0);
  EXPECT_LE(c.radius, a.radius);
  EXPECT_LE(c.radius, c.refuted);
  EXPECT_LE(c.refuted, c.radius * (1 + tolerance));
  const LocalComposition lc(mi, s.x);
  double margin = INFINITY;  // the certified margin at x, as input_robustness computes it
  for (int k = 0; k < m.classes; ++k)
    if (k != s.y) margin = std::min(margin, (lc.logits()(s.y) - lc.logits()(k)).lower());
  const double naive = (interval64(margin) / interval64(naive_denominator(*factors))).lower();
  EXPECT_GT(naive, 0);
  EXPECT_GE(c.radius, naive);
  for (int t = 0; t < 64; ++t) {  // points on the certified sphere keep the label
    Eigen::Index pred = 0;
    forward(m, Vector<double>(s.x + c.radius * random_direction(s.x.size(), 1, rng).col(0))).maxCoeff(&pred);
    EXPECT_EQ(int(pred), s.y);
  }
  // The condition itself at the reported radius: M_c > ‖w_y − w_c‖₂·r_K for every c.
  const LocalChain chain = lc.chain(c.radius);
  for (int k = 0; k < m.classes; ++k) {
    if (k == s.y) continue;
    EXPECT_GT((lc.logits()(s.y) - lc.logits()(k)).lower(),
              lc.head_difference(s.y, k) * chain.features_radius);
  }
}

TEST(LocalComposition, TextModelsAreCoveredAndStayBelowTheAttack) {
  single_threaded_products();
  // GPT-2 (causal, last-token pooling, tanh GELU) and BERT (post-norm, embedding LayerNorm, tanh pooler).
  for (const std::string name : {"gpt2", "bert"}) {
    const auto dir = std::filesystem::path(REGATTA_TEST_DATA_DIR) / "text_models" / name;
    const Model m = load_model(dir / "model.safetensors");
    ASSERT_EQ(local_composition_unsupported(m), "") << name;
    const ConvertedModel<double> md(m);
    const ConvertedModel<interval64> mi(m);
    const auto path = dir / "test_set.npz";
    const io::Array tokens =
        io::read_npz_member(path, "tokens", io::default_max_file_bytes, io::NonFloat::integers);
    const io::Array labels =
        io::read_npz_member(path, "labels", io::default_max_file_bytes, io::NonFloat::integers);
    std::vector<int> ids;
    for (std::size_t k = 0; k < tokens.shape[1]; ++k) ids.push_back(int(tokens.data[k]));
    const Vector<double> x = m.embed_tokens(ids);
    const int y = int(labels.data[0]);
    const AttackResult a = attack(md, x, y);
    ASSERT_TRUE(a.found) << name;
    const CertifiedRadius c = local_composition_radius(mi, x, y, a.radius, 0.5);
    EXPECT_GT(c.radius, 0) << name;
    EXPECT_LE(c.radius, a.radius) << name;
    std::mt19937_64 rng(2);
    for (int t = 0; t < 32; ++t) {
      Eigen::Index pred = 0;
      forward(m, Vector<double>(x + c.radius * random_direction(x.size(), 1, rng).col(0))).maxCoeff(&pred);
      EXPECT_EQ(int(pred), y) << name;
    }
    // The chain's bound on the margins' change, |Δ(z_y − z_c)| ≤ ‖w_y − w_c‖₂·r_K, at points of the certified
    // sphere: toward the adversarial point (the direction in which the margin falls fastest that we know)
    // and at random; double forwards only, so BERT's post-norm stages and pooler are covered too. The bound
    // is about 2000 times the change toward the adversarial point here (more at random), so this catches
    // gross errors only (a lost factor of the chain, a wrong pooled row).
    {
      const LocalComposition lc(mi, x);
      const LocalChain chain = lc.chain(c.radius);
      const Vector<double> z0 = forward(m, x);
      for (int t = 0; t < 4; ++t) {
        const Vector<double> u = t == 0 ? Vector<double>((a.point - x).normalized())
                                        : Vector<double>(random_direction(x.size(), 1, rng).col(0));
        const Vector<double> z = forward(m, Vector<double>(x + c.radius * u));
        for (int k = 0; k < m.classes; ++k) {
          if (k == y) continue;
          const double change = std::abs((z(y) - z(k)) - (z0(y) - z0(k)));
          EXPECT_LE(change, lc.head_difference(y, k) * chain.features_radius * (1 + kJacobianRounding))
              << name << " class " << k;
        }
      }
    }
    if (name == "gpt2") {  // last-token pooling: the last attention stage keeps the last row's outputs
      const LocalChain chain = LocalComposition(mi, x).chain(c.radius);
      const std::vector<Matrix<double>> centre = stage_inputs(m, x);
      ASSERT_EQ(chain.stages.size(), 2 * m.blocks.size() + 2) << "token_embed, blocks, norm";
      for (std::size_t b = 0; b < m.blocks.size(); ++b)
        expect_attention_constant(m, chain, centre, b, 1 + 2 * b, rng);
    }
  }
}

TEST(LocalComposition, UnsupportedModelsSayWhy) {
  Model m = load_model(vit / "vit_digits.safetensors");
  EXPECT_EQ(local_composition_unsupported(m), "");
  Model other = m;
  other.layout = "llama";
  EXPECT_NE(local_composition_unsupported(other).find("llama"), std::string::npos);
  const ConvertedModel<interval64> mi(other);
  EXPECT_THROW(LocalComposition(mi, test_image(0).x), std::logic_error);
  other = m;
  other.blocks[1].attention.kind = AttentionKind::l2;
  EXPECT_EQ(local_composition_unsupported(other), "L2 attention");
}

}  // namespace
}  // namespace regatta::operators
