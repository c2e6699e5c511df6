// Per-stage certified global Lipschitz bounds of a whole model: the factors of the naive certificate
// (model_robustness.hpp, docs/models.md "The naive certificate").
#include <cmath>
#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/scalar.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>
#include <regatta/operators/model_robustness.hpp>

namespace regatta::operators {
namespace {

/// ‖M‖₂ rounded up: the MPFI certificate of a point matrix (core/spectral_norm.hpp).
double spectral_upper(const Matrix<double>& M) { return spectral_norm_upper_certified(M).upper; }

/// max|γ|/√ε rounded up (layernorm.lip2): a Lipschitz bound of the norm layer, not a matrix norm.
double layer_norm_lipschitz_upper(const NormParameters& p, double eps) {
  return (interval64(p.gamma.cwiseAbs().maxCoeff()) / sqrt(interval64(eps))).upper();
}

/// The layer with every token augmented by a constant coordinate 1: [x, 1]·[W; bᵀ] = x·W + bᵀ, so the
/// augmented layer has no biases and, on tokens whose last coordinate is 1, computes the same map; its
/// output gets a zero last column. Perturbations of x keep the last coordinate, so Lip of the original on
/// B_R ≤ Lip of the augmented layer on B_√(R²+1).
AttentionLayer augmented(const AttentionLayer& a) {
  AttentionLayer g;
  g.d = a.d + 1;
  g.heads = a.heads;
  g.head_dim = a.head_dim;
  g.value_dim = a.value_dim;
  g.kind = a.kind;
  auto stack = [](const Matrix<double>& W, const std::vector<Vector<double>>& b, int h) {
    Matrix<double> out(W.rows() + 1, W.cols());
    out.topRows(W.rows()) = W;
    if (b.empty())
      out.row(W.rows()).setZero();
    else
      out.row(W.rows()) = b[std::size_t(h)].transpose();
    return out;
  };
  for (int h = 0; h < a.heads; ++h) {
    g.WQ.push_back(stack(a.WQ[std::size_t(h)], a.bQ, h));
    g.WK.push_back(stack(a.WK[std::size_t(h)], a.bK, h));
    g.WV.push_back(stack(a.WV[std::size_t(h)], a.bV, h));
  }
  g.WO = Matrix<double>::Zero(a.WO.rows(), g.d);
  g.WO.leftCols(a.d) = a.WO;
  return g;
}

}  // namespace

std::optional<std::vector<LipschitzFactor>> global_lipschitz_factors(const Model& m, std::string& why_not) {
  if (!m.prenorm) {
    why_not = "post-norm model: no global bound is implemented for LN(X + MHA(X))";
    return std::nullopt;
  }
  if (m.causal) {
    why_not = "causal attention: castin.sqrt_n bounds full (non-causal) self-attention only";
    return std::nullopt;
  }
  if (m.norm != Prenorm::layernorm) {
    why_not = "RMSNorm: the factors below bound LayerNorm stages only";
    return std::nullopt;
  }
  for (const TransformerBlock& blk : m.blocks)
    if (blk.gated()) {
      why_not = "gated (SwiGLU) MLP: the MLP factor below bounds sigma(X W1 + b1) W2 only";
      return std::nullopt;
    }
  double sigma_max = 0;
  std::string sigma_how;
  if (m.activation == Activation::gelu_erf) {
    // max|GELU′| = GELU′(√2) (GELU″ = φ(x)(2 − x²); the minimum GELU′(−√2) is smaller in magnitude).
    Matrix<interval64> s(1, 1);
    s(0, 0) = interval64::hull(1.4142135623730949, 1.4142135623730951);
    sigma_max = activation_derivative(Activation::gelu_erf, s)(0, 0).upper();
    sigma_how = "max|GELU'| = GELU'(sqrt 2)";
  } else if (m.activation == Activation::relu) {
    sigma_max = 1;
    sigma_how = "max|ReLU'| = 1";
  } else {
    why_not = "no certified max|GELU_tanh'| is implemented";
    return std::nullopt;
  }
  std::vector<LipschitzFactor> out;
  if (m.text()) {
    out.push_back({"token_embed", 1.0, "the input is the token-embedding matrix; positions add a constant"});
    if (m.embed_norm.present())
      out.push_back({"embed_norm", layer_norm_lipschitz_upper(m.embed_norm, m.eps),
                     "max|gamma|/sqrt(eps) (layernorm.lip2)"});
  } else {
    out.push_back({"patch_embed", spectral_upper(m.patch.W), "||W_E||_2 (disjoint patches)"});
  }
  for (std::size_t b = 0; b < m.blocks.size(); ++b) {
    const TransformerBlock& blk = m.blocks[b];
    const std::string name = "blocks." + std::to_string(b);
    const double ln1 = layer_norm_lipschitz_upper(blk.norm1, m.eps),
                 ln2 = layer_norm_lipschitz_upper(blk.norm2, m.eps);
    const double R = interval64(lip::prenorm_radius<interval>(blk.attention, Prenorm::layernorm)).upper();
    lip::BoundSetting setting;
    setting.n = m.tokens();  // text: the context, the longest input (castin.sqrt_n grows with n)
    setting.radius = (sqrt(interval64(R) * interval64(R) + interval64(1.0))).upper();
    const AttentionLayer g = augmented(blk.attention);
    const AttentionOptions plain;
    if (auto reason = lip::refusal(lip::Bound::castin_sqrt_n, g, plain, setting)) {
      why_not = name + ".attn: castin.sqrt_n refused: " + *reason;
      return std::nullopt;
    }
    const double mha =
        interval64(lip::evaluate<interval>(lip::Bound::castin_sqrt_n, g, plain, setting)).upper();
    out.push_back({name + ".attn", (interval64(1.0) + interval64(mha) * interval64(ln1)).upper(),
                   "1 + castin.sqrt_n(bias-augmented, R=sqrt(R_LN^2+1)) * max|gamma1|/sqrt(eps)"});
    const double mlp =
        (interval64(1.0) + interval64(spectral_upper(blk.fc1.W)) * interval64(spectral_upper(blk.fc2.W)) *
                               interval64(sigma_max) * interval64(ln2))
            .upper();
    out.push_back({name + ".mlp", mlp, "1 + ||W1||_2 ||W2||_2 " + sigma_how + " * max|gamma2|/sqrt(eps)"});
  }
  if (m.final_norm.present())
    out.push_back(
        {"norm", layer_norm_lipschitz_upper(m.final_norm, m.eps), "max|gamma|/sqrt(eps) (layernorm.lip2)"});
  if (m.pooler.W.size() != 0)
    out.push_back({"pooler", spectral_upper(m.pooler.W), "||W_P||_2 * max|tanh'| = 1"});
  out.push_back({"head", spectral_upper(m.head.W), "||W_H||_2"});
  return out;
}

}  // namespace regatta::operators
