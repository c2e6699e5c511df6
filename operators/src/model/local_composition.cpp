// The composition of per-stage local Lipschitz bounds through a whole model, and its certified radius
// (model_local.hpp; docs/models.md, "The composition of per-stage local bounds").
#include <algorithm>
#include <cmath>
#include <limits>
#include <regatta/core/interval64.hpp>
#include <regatta/core/interval_norms.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/lipschitz/structured_rows.hpp>
#include <regatta/operators/model_local.hpp>
#include <stdexcept>

#include "../tangent_stack.hpp"

namespace regatta::operators {
// A named namespace, not an anonymous one: LocalComposition::Impl (declared in the public header) holds
// Stages, and a member of an internal-linkage type draws -Wsubobject-linkage in the unity build.
namespace local_composition_detail {

using Eigen::Index;
using I = interval64;

enum class Kind { fixed, layer_norm, attention, mlp, pooler };

/// One stage: what it is and the enclosure V_k of its input at x (a token matrix; one row after pooling).
struct Stage {
  Kind kind = Kind::fixed;
  std::string name;
  Matrix<I> input;
  double constant = 0;                   ///< fixed: the certified norm of the linear map
  const NormParameters* norm = nullptr;  ///< layer_norm: the norm; mlp: LN₂ for pre-norm, else null
  std::size_t block = 0;                 ///< attention, mlp
  Index row = -1;                        ///< attention: the only output row kept (pooled token), −1: all
};

/// V ± ρ entrywise: a box holding the Frobenius ball of radius ρ around every point of V.
Matrix<I> box(const Matrix<I>& V, double rho) {
  const I step = I::hull(-rho, rho);
  Matrix<I> B(V.rows(), V.cols());
  for (Index k = 0; k < V.size(); ++k) B(k) = V(k) + step;
  return B;
}

template <class S>
Matrix<S> layer_norm(const Matrix<S>& X, const NormParameters& p, double eps) {
  return normalize_rows(Prenorm::layernorm, X, Vector<S>(p.gamma.cast<S>()), Vector<S>(p.beta.cast<S>()),
                        S(eps));
}

/// The d unit tangents of an n-row token matrix, stacked (tangent p has every row e_p): a row-wise map's
/// JVP of them holds, in row p·n + i, row p of token i's d×d Jacobian (vectors are rows).
Matrix<I> unit_tangents(Index n, Index d) {
  Matrix<I> G = Matrix<I>::Zero(n * d, d);
  for (Index p = 0; p < d; ++p)
    for (Index i = 0; i < n; ++i) G(p * n + i, p) = I(1.0);
  return G;
}

/// max over tokens i of ‖J_i‖₂ for the stacked Jacobians of unit_tangents.
double max_token_norm(const Matrix<I>& G, Index n, Index d) {
  double worst = 0;
  Matrix<I> J(d, d);
  for (Index i = 0; i < n; ++i) {
    for (Index p = 0; p < d; ++p) J.row(p) = G.row(p * n + i);
    worst = std::max(worst, spectral_norm_upper(J));
    if (!std::isfinite(worst)) break;
  }
  return worst;
}

/// LayerNorm's Jacobian over the box B, stacked as unit_tangents (the bracket γ s⁻¹(I − 11ᵀ/d − uuᵀ/d)
/// evaluated in interval64 on each token's box: an enclosure of the Jacobian at every point of it).
Matrix<I> layer_norm_jacobians(const Matrix<I>& B, const NormParameters& p, double eps) {
  Matrix<I> G = unit_tangents(B.rows(), B.cols());
  detail::normalize_rows_jvp_stacked(Prenorm::layernorm, B, Vector<I>(p.gamma.cast<I>()), I(eps), G,
                                     B.cols());
  return G;
}

}  // namespace local_composition_detail
using namespace local_composition_detail;

std::string local_composition_unsupported(const Model& m) {
  if (m.layout == "llama")
    return "layout llama: RMSNorm, rotary position embeddings and the SwiGLU MLP have no local stage bounds "
           "here (covered: the LayerNorm layouts timm-vit, gpt2, bert)";
  if (m.layout != "timm-vit" && m.layout != "gpt2" && m.layout != "bert")
    return "layout " + m.layout + ": only the LayerNorm layouts timm-vit, gpt2, bert are covered";
  if (m.norm != Prenorm::layernorm) return "RMSNorm";
  for (const TransformerBlock& blk : m.blocks) {
    if (blk.attention.kind != AttentionKind::dot) return "L2 attention";
    if (blk.attention.rotary) return "rotary position embeddings";
    if (blk.gated()) return "gated (SwiGLU) MLP";
    if (const auto why = lip::structured_rows_refusal(blk.attention, m.attention_options())) return *why;
  }
  return "";
}

struct LocalComposition::Impl {
  const ConvertedModel<I>& cm;
  std::vector<Stage> stages;
  Vector<I> logits;

  double lipschitz(const Stage& s, double rho) const;
};

double LocalComposition::Impl::lipschitz(const Stage& s, double rho) const {
  const Model& m = cm.model;
  switch (s.kind) {
    case Kind::fixed:
      return s.constant;
    case Kind::layer_norm: {
      const Matrix<I> B = box(s.input, rho);
      return max_token_norm(layer_norm_jacobians(B, *s.norm, m.eps), B.rows(), B.cols());
    }
    case Kind::attention: {
      const TransformerBlock& blk = m.blocks[s.block];
      Matrix<I> J =
          lip::block_dense_jacobian_on_box<I>(blk.attention, m.attention_options(), box(s.input, rho));
      if (s.row >= 0) J = Matrix<I>(J.middleRows(s.row * m.width, m.width));
      return spectral_norm_upper(J);
    }
    case Kind::mlp: {
      // Per token: I + J_N·W₁·diag(σ′(H))·W₂ with J_N LN₂'s Jacobian over the token's box (pre-norm) or the
      // identity, and H ⊇ N(box)·W₁ + b₁ the hidden pre-activations over the box.
      const TransformerBlock& blk = m.blocks[s.block];
      const Matrix<I> B = box(s.input, rho);
      const Index n = B.rows(), d = B.cols();
      const Matrix<I> A = s.norm ? layer_norm_jacobians(B, *s.norm, m.eps) : unit_tangents(n, d);
      Matrix<I> H = detail::times_point(s.norm ? layer_norm(B, *s.norm, m.eps) : B, blk.fc1.W);
      H.rowwise() += blk.fc1.b.cast<I>().transpose();
      if (!all_finite(H)) return infinity;
      const Matrix<I> D = activation_derivative(m.activation, H);
      Matrix<I> G = detail::times_point(
          Matrix<I>(detail::tile_rows(D, d).cwiseProduct(detail::times_point(A, blk.fc1.W))), blk.fc2.W);
      for (Index p = 0; p < d; ++p)
        for (Index i = 0; i < n; ++i) G(p * n + i, p) += I(1.0);
      return max_token_norm(G, n, d);
    }
    case Kind::pooler: {
      // tanh(h·W_P + b_P): J = W_P·diag(tanh′(P)) with P ⊇ box·W_P + b_P.
      const Matrix<I> B = box(s.input, rho);
      Matrix<I> P = detail::times_point(B, m.pooler.W);
      P.rowwise() += m.pooler.b.cast<I>().transpose();
      if (!all_finite(P)) return infinity;
      const Matrix<I> D = activation_derivative(Activation::tanh, P);
      Matrix<I> J = m.pooler.W.cast<I>();
      for (Index c = 0; c < J.cols(); ++c) J.col(c) *= D(0, c);
      return spectral_norm_upper(J);
    }
  }
  return infinity;
}

LocalComposition::LocalComposition(const ConvertedModel<I>& cm, const Vector<double>& x)
    : impl_(std::make_unique<Impl>(Impl{cm, {}, {}})) {
  const Model& m = cm.model;
  const std::string why = local_composition_unsupported(m);
  if (!why.empty()) throw std::logic_error("LocalComposition: " + why);
  if (!m.accepts(x.size())) throw std::logic_error("LocalComposition: bad input length");
  std::vector<Stage>& st = impl_->stages;
  Matrix<I> X = embed<I>(m, Vector<I>(x.cast<I>()));
  {
    Stage s;
    s.kind = Kind::fixed;
    if (m.text()) {
      s.name = "token_embed";  // the input is the embedding matrix; positions add a constant
      s.constant = 1;
    } else {
      s.name = "patch_embed";  // disjoint patches: ‖ΔX‖_F ≤ ‖W_E‖₂‖Δx‖₂
      s.constant = spectral_norm_upper_certified(m.patch.W).upper;
    }
    st.push_back(s);
  }
  auto norm_stage = [&](const std::string& name, const NormParameters& p) {
    Stage s;
    s.kind = Kind::layer_norm;
    s.name = name;
    s.input = X;
    s.norm = &p;
    st.push_back(s);
    X = layer_norm(X, p, m.eps);
  };
  if (m.embed_norm.present()) norm_stage("embed_norm", m.embed_norm);
  for (std::size_t b = 0; b < m.blocks.size(); ++b) {
    const TransformerBlock& blk = m.blocks[b];
    const std::string name = "blocks." + std::to_string(b);
    Stage a;
    a.kind = Kind::attention;
    a.name = name + ".attn";
    a.input = X;
    a.block = b;
    // Only the pooled token (class or last) reaches the head, and the rest of the network is row-wise.
    const bool keep_one = b + 1 == m.blocks.size() && m.pooling != Pooling::mean && X.rows() > 1;
    if (keep_one) a.row = m.pooling == Pooling::cls ? 0 : X.rows() - 1;
    st.push_back(a);
    X = cm.attention[b].forward(X);
    if (keep_one) X = Matrix<I>(X.row(a.row));
    if (!m.prenorm) norm_stage(name + ".norm1", blk.norm1);
    Stage p;
    p.kind = Kind::mlp;
    p.name = name + ".mlp";
    p.input = X;
    p.block = b;
    p.norm = m.prenorm ? &blk.norm2 : nullptr;
    st.push_back(p);
    Matrix<I> H = (m.prenorm ? layer_norm(X, blk.norm2, m.eps) : X) * blk.fc1.W.cast<I>();
    H.rowwise() += blk.fc1.b.cast<I>().transpose();
    Matrix<I> O = activate(m.activation, H) * blk.fc2.W.cast<I>();
    O.rowwise() += blk.fc2.b.cast<I>().transpose();
    X += O;
    if (!m.prenorm) norm_stage(name + ".norm2", blk.norm2);
  }
  if (X.rows() > 1) {
    Stage s;
    s.kind = Kind::fixed;
    s.name = "pool";
    if (m.pooling == Pooling::mean) {  // the mean of `count` rows has norm 1/√count
      const Index count = m.text() ? X.rows() : m.patch_count();
      s.constant = (I(1.0) / sqrt(I(double(count)))).upper();
    } else {
      s.constant = 1;  // selecting one row
    }
    st.push_back(s);
    X = pool(m, X);
  }
  if (m.final_norm.present()) norm_stage("norm", m.final_norm);
  if (m.pooler.W.size() != 0) {
    Stage s;
    s.kind = Kind::pooler;
    s.name = "pooler";
    s.input = X;
    st.push_back(s);
    Matrix<I> P = X * m.pooler.W.cast<I>();
    P.rowwise() += m.pooler.b.cast<I>().transpose();
    X = activate(Activation::tanh, P);
  }
  impl_->logits = (X * m.head.W.cast<I>()).transpose();
  impl_->logits += m.head.b.cast<I>();
}

LocalComposition::~LocalComposition() = default;
LocalComposition::LocalComposition(LocalComposition&&) noexcept = default;

const Vector<interval64>& LocalComposition::logits() const { return impl_->logits; }

double LocalComposition::head_difference(int y, int c) const {
  const Matrix<double>& W = impl_->cm.model.head.W;
  I sum(0.0);
  for (Index a = 0; a < W.rows(); ++a) {
    const I diff = I(W(a, y)) - I(W(a, c));
    sum += diff * diff;
  }
  return sqrt(sum).upper();
}

LocalChain LocalComposition::chain(double r) const {
  LocalChain out;
  double rho = r;
  I product(1.0);
  for (const Stage& s : impl_->stages) {
    const double L = impl_->lipschitz(s, rho);
    out.stages.push_back({s.name, rho, L});
    if (!std::isfinite(L)) {
      out.features_radius = out.product = infinity;
      return out;
    }
    rho = (I(L) * I(rho)).upper();
    product = product * I(L);
  }
  out.features_radius = rho;
  out.product = product.upper();
  return out;
}

CertifiedRadius local_composition_radius(const ConvertedModel<I>& cm, const Vector<double>& x, int y,
                                         double upper, double tolerance, const std::function<void()>& poll) {
  CertifiedRadius out;
  const LocalComposition lc(cm, x);
  const Vector<I>& z = lc.logits();
  // M_c (the certified margin at x) and h_c = ‖w_y − w_c‖₂ per competitor.
  std::vector<double> margin, head;
  for (Index c = 0; c < z.size(); ++c) {
    if (c == y) continue;
    margin.push_back((z(y) - z(c)).lower());
    head.push_back(lc.head_difference(y, int(c)));
    if (!(margin.back() > 0)) return out;  // y is not the certified prediction at x
  }
  // The test at r: M_c > h_c·r_K for every c. cap(r) = min_c M_c/(h_c·Π L_k(r)) is the radius at which the
  // test would fail with the constants of r (only used to choose candidates).
  struct Test {
    bool passed = false;
    double cap = 0;
  };
  auto test = [&](double r) {
    if (poll) poll();
    ++out.checks;
    const LocalChain ch = lc.chain(r);
    Test t;
    if (!std::isfinite(ch.features_radius)) return t;
    t.passed = true;
    t.cap = infinity;
    for (std::size_t k = 0; k < margin.size(); ++k) {
      if (!(margin[k] > (I(head[k]) * I(ch.features_radius)).upper())) t.passed = false;
      t.cap = std::min(t.cap, margin[k] / (head[k] * ch.product));
    }
    return t;
  };
  const Test at_centre = test(0.0);
  if (!at_centre.passed) return out;
  // First a passing radius: the candidate cap(r) after each failure (its constants can only grow with r,
  // so the crossing lies below), 0.9 of it when that does not move, r/64 when the chain was unbounded.
  double r = std::isfinite(at_centre.cap) ? std::min(upper, at_centre.cap) : upper;
  double lo = 0, hi = 0, g_lo = NAN, g_hi = NAN;
  auto g_of = [](double rr, const Test& t) { return t.cap > 0 ? std::log(t.cap / rr) : -infinity; };
  for (int k = 0; k < 60 && lo == 0; ++k) {
    if (!(r > 0)) break;
    const Test t = test(r);
    if (t.passed) {
      lo = r, g_lo = g_of(r, t);
    } else {
      hi = r, g_hi = g_of(r, t);
      r = t.cap > 0 && t.cap < 0.99 * r ? t.cap : t.cap > 0 ? 0.9 * r : r / 64;
    }
  }
  if (lo == 0) {
    out.refuted = hi;
    return out;
  }
  if (hi == 0) {  // the first candidate (the attack radius or cap(0)) passed
    out.radius = out.refuted = lo;
    return out;
  }
  // Then the secant of g(r) = log(cap(r)/r) in log r (g crosses 0 at the limit; it is nearly −log r + const
  // while the constants stay flat), aimed a third of the tolerance past the estimate on alternating sides,
  // kept 5 % inside the bracket, and the geometric midpoint after two moves of the same end.
  const double offset = std::log1p(tolerance) / 3;
  bool aim_below = true;
  int same_side = 0;
  while (hi / lo > 1 + tolerance) {
    const double a = std::log(lo), b = std::log(hi), w = b - a;
    double c = a + w / 2;
    if (same_side < 2 && std::isfinite(g_lo) && std::isfinite(g_hi) && g_lo > 0 && g_hi < 0) {
      const double crossing = a + w * g_lo / (g_lo - g_hi);
      c = std::clamp(crossing + (aim_below ? -offset : offset), a + 0.05 * w, b - 0.05 * w);
    }
    const double mid = std::exp(c);
    if (!(mid > lo && mid < hi)) break;  // no double strictly inside: as tight as binary64 allows
    const Test t = test(mid);
    same_side = t.passed == !aim_below ? same_side + 1 : 1;
    if (t.passed)
      lo = mid, g_lo = g_of(mid, t);
    else
      hi = mid, g_hi = g_of(mid, t);
    aim_below = !t.passed;
  }
  out.radius = lo;
  out.refuted = hi;
  return out;
}

}  // namespace regatta::operators
