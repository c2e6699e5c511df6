// Forward-mode region pass through a whole model and the certified ℓ₂ radius (model_robustness.hpp).
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <regatta/core/interval64.hpp>
#include <regatta/operators/model_robustness.hpp>
#include <type_traits>

#include "../tangent_stack.hpp"

namespace regatta::operators {
namespace {

/// The centred form V ± r·‖|T|‖₂ entrywise (the region of the stage over the ball; double: V itself).
Matrix<double> centred_region(const Matrix<double>& V, const std::vector<Matrix<double>>&, double) {
  return V;
}
Matrix<interval64> centred_region(const Matrix<interval64>& V, const std::vector<Matrix<interval64>>& T,
                                  double r) {
  // Only upper ends are needed: Σ_t |t_ia|², √ and the product by r with upward rounding (the upper ends of
  // the same interval64 operations), tangent by tangent in order.
  using regatta::detail::i64::add;
  using regatta::detail::i64::mul;
  Matrix<double> sum = Matrix<double>::Zero(V.rows(), V.cols());
  for (const auto& t : T)
    for (Eigen::Index k = 0; k < sum.size(); ++k) {
      const double m = magnitude(t(k));
      sum(k) = add<true>(sum(k), mul<true>(m, m));
    }
  Matrix<interval64> R(V.rows(), V.cols());
  for (Eigen::Index k = 0; k < V.size(); ++k) {
    const double w = r == 0 ? 0.0 : mul<true>(r, regatta::detail::i64::sqrt<true>(sum(k)));
    R(k) = V(k) + interval64::hull(-w, w);
  }
  return R;
}

/// Intersection of two enclosures of the same quantity (double: the first).
Matrix<double> tighten(const Matrix<double>& A, const Matrix<double>&) { return A; }
Matrix<interval64> tighten(const Matrix<interval64>& A, const Matrix<interval64>& B) {
  Matrix<interval64> C(A.rows(), A.cols());
  for (Eigen::Index i = 0; i < A.size(); ++i) C(i) = intersect(A(i), B(i));
  return C;
}

/// The model's norm (LayerNorm or RMSNorm, Model::norm) with parameters p.
template <class S>
Matrix<S> layer_norm(const Model& m, const Matrix<S>& X, const NormParameters& p) {
  return normalize_rows(m.norm, X, Vector<S>(p.gamma.cast<S>()), Vector<S>(p.beta.cast<S>()), S(m.eps));
}

template <class S>
void layer_norm_stage(const Model& m, Matrix<S>& X, std::vector<Matrix<S>>& T, const NormParameters& p,
                      double r) {
  const Matrix<S> R = centred_region(X, T, r);
  const Vector<S> gamma = p.gamma.cast<S>();
  T = detail::normalize_rows_jvp_all(m.norm, R, gamma, S(m.eps), T);
  X = layer_norm(m, X, p);
}

/// Y·W + 1bᵀ at the point, its tangents Ẏ·W, and its region: the centred form intersected with the direct
/// evaluation on the input region Y_R.
template <class S>
struct ProjectionOverRegion {
  Matrix<S> value, region;
  std::vector<Matrix<S>> tangents;
};
template <class S>
ProjectionOverRegion<S> project(const Matrix<S>& Y, const Matrix<S>& Y_region,
                                const std::vector<Matrix<S>>& Ydot, const Affine& W, double r) {
  ProjectionOverRegion<S> out;
  const Matrix<S> WS = W.W.cast<S>();
  const Vector<S> b = W.b.cast<S>();
  out.tangents = detail::tangents_times(Ydot, W.W);
  out.value = Y * WS;
  out.value.rowwise() += b.transpose();
  Matrix<S> direct = Y_region * WS;
  direct.rowwise() += b.transpose();
  out.region = tighten(centred_region(out.value, out.tangents, r), direct);
  return out;
}

/// X ← X + MLP(N(X)) with N = LN₂ (pre-norm) or the identity (post-norm), with its tangents.
template <class S>
void mlp_stage(const Model& m, const TransformerBlock& blk, Matrix<S>& X, std::vector<Matrix<S>>& T, double r,
               const std::function<void()>& tick) {
  const Matrix<S> R = centred_region(X, T, r);
  const Vector<S> gamma = blk.norm2.gamma.cast<S>();
  const Matrix<S> W2 = blk.fc2.W.cast<S>();
  tick();
  const std::vector<Matrix<S>> Ydot =
      m.prenorm ? detail::normalize_rows_jvp_all(m.norm, R, gamma, S(m.eps), T) : T;
  const Matrix<S> Y = m.prenorm ? layer_norm(m, X, blk.norm2) : X;
  const Matrix<S> Y_region = m.prenorm ? layer_norm(m, R, blk.norm2) : R;
  const ProjectionOverRegion<S> H = project(Y, Y_region, Ydot, blk.fc1, r);
  Matrix<S> A;
  if (blk.gated()) {
    // A = σ(G) ⊙ H: Ȧ = (σ′(G) ⊙ H)⊙Ġ + σ(G)⊙Ḣ with G and H anywhere in their regions (the product rule on
    // the segment of the mean-value form).
    const ProjectionOverRegion<S> G = project(Y, Y_region, Ydot, blk.gate, r);
    const Matrix<S> DG = activation_derivative(m.activation, G.region).cwiseProduct(H.region);
    const Matrix<S> DH = activate(m.activation, G.region);
    tick();
    const std::vector<Matrix<S>> from_gate = detail::masked_tangents_times(DG, G.tangents, blk.fc2.W);
    const std::vector<Matrix<S>> from_up = detail::masked_tangents_times(DH, H.tangents, blk.fc2.W);
    for (std::size_t j = 0; j < T.size(); ++j) T[j] += from_gate[j] + from_up[j];
    A = activate(m.activation, G.value).cwiseProduct(H.value);
  } else {
    const Matrix<S> D = activation_derivative(m.activation, H.region);
    tick();
    const std::vector<Matrix<S>> step = detail::masked_tangents_times(D, H.tangents, blk.fc2.W);
    for (std::size_t j = 0; j < T.size(); ++j) T[j] += step[j];
    A = activate(m.activation, H.value);
  }
  Matrix<S> O = A * W2;
  O.rowwise() += blk.fc2.b.cast<S>().transpose();
  X += O;
}

/// pooled ← tanh(pooled·W_P + b_P) (BERT's pooler), with its tangents: the pre-activation region is the
/// centred form intersected with the direct evaluation on the input region (project, as for the MLP).
template <class S>
void pooler_stage(const Model& m, Matrix<S>& X, std::vector<Matrix<S>>& T, double r) {
  const ProjectionOverRegion<S> P = project(X, centred_region(X, T, r), T, m.pooler, r);
  const Matrix<S> D = activation_derivative(Activation::tanh, P.region);
  for (std::size_t j = 0; j < T.size(); ++j) T[j] = D.cwiseProduct(P.tangents[j]);
  X = activate(Activation::tanh, P.value);
}

template <class S>
bool all_finite(const Matrix<S>& M) {
  using std::isfinite;
  for (Eigen::Index i = 0; i < M.size(); ++i)
    if (!isfinite(M(i))) return false;
  return true;
}

/// Whether the enclosures are finite (interval64; always true for double, whose pass is at a point). An
/// unbounded enclosure makes the gradient bound G infinite and the ball test fail, so the pass stops there
/// instead of carrying infinities through the products (whose non-finite path is the slow scalar one).
template <class S>
bool bounded(const Matrix<S>& M) {
  if constexpr (std::is_same_v<S, interval64>)
    return all_finite(M);
  else
    return true;
}
template <class S>
bool bounded(const std::vector<Matrix<S>>& T) {
  return std::all_of(T.begin(), T.end(), [](const Matrix<S>& t) { return bounded(t); });
}

int argmax(const Vector<double>& z) {
  Eigen::Index i = 0;
  z.maxCoeff(&i);
  return int(i);
}

}  // namespace

template <class S>
ConvertedModel<S>::ConvertedModel(const Model& m) : model(m) {
  for (const auto& blk : m.blocks) attention.emplace_back(blk.attention, m.attention_options());
}

template <class S>
ModelPass<S> propagate(const ConvertedModel<S>& cm, const Vector<double>& x, double r,
                       const std::function<void()>& poll) {
  const Model& m = cm.model;
  const std::function<void()> tick = [&poll] {
    if (poll) poll();
  };
  Matrix<S> X = embed<S>(m, x.cast<S>());
  std::vector<Matrix<S>> T(std::size_t(x.size()), Matrix<S>::Zero(X.rows(), m.width));
  if (m.text()) {  // x is the token-embedding matrix itself: ∂X₀/∂x_{i·d+a} = e_i e_aᵀ
    for (Eigen::Index i = 0; i < X.rows(); ++i)
      for (int a = 0; a < m.width; ++a) T[std::size_t(i * m.width + a)](i, a) = S(1.0);
    if (m.embed_norm.present()) layer_norm_stage(m, X, T, m.embed_norm, r);
  } else {
    const int first = m.class_token ? 1 : 0, K = m.channels * m.patch_size * m.patch_size;
    for (int q = 0; q < m.patch_count(); ++q)
      for (int k = 0; k < K; ++k)
        T[std::size_t(m.pixel_of(q, k))].row(q + first) = m.patch.W.row(k).cast<S>();
  }
  for (std::size_t b = 0; b < m.blocks.size(); ++b) {
    tick();
    const Matrix<S> R = centred_region(X, T, r);
    if (!all_finite(R)) return {};  // the region is unbounded: nothing to enclose
    const Linearization<S> lin = cm.attention[b].linearize(R);
    // An unbounded attention value over the region (a kernel or value enclosure overflowed) makes the
    // tangents unbounded too: the test fails, so stop before the products.
    if (!bounded(lin.value())) return {};
    X = cm.attention[b].forward(X);
    tick();
    T = lin.jvp_all(T);
    if (!bounded(T)) return {};
    if (b + 1 == m.blocks.size() && m.pooling != Pooling::mean) {
      // Only the pooled token (class or last) reaches the head, and the rest of the network is row-wise.
      X = pool(m, X);
      for (auto& t : T) t = pool(m, t);
    }
    if (!m.prenorm) layer_norm_stage(m, X, T, m.blocks[b].norm1, r);
    mlp_stage(m, m.blocks[b], X, T, r, tick);
    if (!bounded(T)) return {};
    if (!m.prenorm) layer_norm_stage(m, X, T, m.blocks[b].norm2, r);
  }
  X = pool(m, X);
  for (auto& t : T) t = pool(m, t);
  if (m.final_norm.present()) layer_norm_stage(m, X, T, m.final_norm, r);
  if (m.pooler.W.size() != 0) pooler_stage(m, X, T, r);
  const Matrix<S> WH = m.head.W.cast<S>();
  ModelPass<S> out;
  out.logits = (X * WH).transpose();
  out.logits += m.head.b.cast<S>();
  out.jacobian.resize(m.classes, x.size());
  const std::vector<Matrix<S>> head_tangents = detail::tangents_times(T, m.head.W);
  for (std::size_t j = 0; j < T.size(); ++j) out.jacobian.col(Eigen::Index(j)) = head_tangents[j].transpose();
  return out;
}

namespace {

/// The region test at radius r, and min_c M_c/G_c (the radius at which the test must fail with this G; used
/// only to start the search).
struct BallTest {
  bool certified = false;
  double linear_cap = 0;
};

BallTest ball_test(const ConvertedModel<interval64>& cm, const Vector<double>& x, int y, double r,
                   const std::function<void()>& poll = {}) {
  BallTest out;
  const ModelPass<interval64> pass = propagate(cm, x, r, poll);
  if (pass.logits.size() == 0) return out;
  const interval64 radius(r);
  out.certified = true;
  out.linear_cap = INFINITY;
  for (Eigen::Index c = 0; c < pass.logits.size(); ++c) {
    if (c == y) continue;
    const double margin = (pass.logits(y) - pass.logits(c)).lower();
    interval64 sum(0.0);
    for (Eigen::Index j = 0; j < pass.jacobian.cols(); ++j) {
      const interval64 g(magnitude(pass.jacobian(y, j) - pass.jacobian(c, j)));
      sum += g * g;
    }
    const double G = sqrt(sum).upper();
    if (!(margin > (radius * interval64(G)).upper())) out.certified = false;
    out.linear_cap = std::min(out.linear_cap, margin > 0 ? margin / G : 0.0);
  }
  return out;
}

}  // namespace

bool certify_ball(const ConvertedModel<interval64>& cm, const Vector<double>& x, int y, double r) {
  return ball_test(cm, x, y, r).certified;
}

CertifiedRadius certified_radius(const ConvertedModel<interval64>& cm, const Vector<double>& x, int y,
                                 double upper, double tolerance, int max_halvings,
                                 const std::function<void()>& poll) {
  CertifiedRadius out;
  auto test = [&](double r) {
    ++out.checks;
    return ball_test(cm, x, y, r, poll);
  };
  const BallTest at_centre = test(0.0);
  if (!at_centre.certified) return out;  // y is not even the certified prediction at x
  // The test at r passes when r < cap(r) = min_c M_c/G_c(r), and G_c(r) grows with r: the candidates look
  // for the crossing of g(r) = log(cap(r)/r) through 0. They only choose where to test: every reported
  // radius passed its own test, and the bracket [radius, refuted] ends within a factor 1 + tolerance.
  // First a failing and a passing radius below the attack radius: after a failure at r, 0.9·cap(r) (below
  // which the test is likely to pass: the crossing r* = cap(r*) lies above cap(r) since cap decreases), r/2
  // when cap(r) ≥ r, r/64 when G(r) is unbounded (no information; the region test is cheap to fail).
  struct Tried {
    double r = 0, g = NAN;
  };
  auto g_of = [](double r, const BallTest& t) {
    return t.linear_cap > 0 ? std::log(t.linear_cap / r) : -INFINITY;
  };
  double r = std::min(upper, std::isfinite(at_centre.linear_cap) ? at_centre.linear_cap : upper);
  Tried lo, hi;
  for (int k = 0; k < max_halvings && lo.r == 0; ++k) {
    const BallTest t = test(r);
    if (t.certified) {
      lo = {r, g_of(r, t)};
    } else {
      hi = {r, g_of(r, t)};
      const double cap = t.linear_cap;
      r = cap > 0 && cap < r ? 0.9 * cap : cap > 0 && std::isfinite(cap) ? r / 2 : r / 64;
    }
  }
  if (lo.r == 0) {
    out.refuted = hi.r;
    return out;
  }
  if (hi.r == 0) {  // the first candidate passed
    out.radius = out.refuted = lo.r;
    return out;
  }
  // Then interpolation of g in log r: inverse quadratic through the bracket ends and the previous point
  // when all three are usable (g curves: G(r) grows faster than a power of r near the crossing), else the
  // secant through the ends; aimed a third of the tolerance below the estimated crossing after a failure
  // and above it after a pass, so that two accurate steps close the bracket. The geometric midpoint when g
  // is not usable (unbounded, or a failure with cap > r from rounding) or after two moves of the same end
  // (as in the Illinois method); every candidate at least 5 % of the bracket inside it.
  const double offset = std::log1p(tolerance) / 3;
  bool aim_below = true;
  int same_side = 0;
  Tried previous;  // the end replaced last (r = 0: none)
  auto usable = [](const Tried& p) { return p.r > 0 && std::isfinite(p.g); };
  while (hi.r / lo.r > 1 + tolerance) {
    const double a = std::log(lo.r), b = std::log(hi.r), w = b - a;
    double c = a + w / 2;
    if (same_side < 2 && usable(lo) && usable(hi) && lo.g > 0 && hi.g < 0) {
      double crossing = a + w * lo.g / (lo.g - hi.g);
      if (usable(previous) && previous.g != lo.g && previous.g != hi.g) {
        const double p = std::log(previous.r), ga = lo.g, gb = hi.g, gp = previous.g;
        crossing = a * gb * gp / ((ga - gb) * (ga - gp)) + b * ga * gp / ((gb - ga) * (gb - gp)) +
                   p * ga * gb / ((gp - ga) * (gp - gb));
      }
      if (std::isfinite(crossing))
        c = std::clamp(crossing + (aim_below ? -offset : offset), a + 0.05 * w, b - 0.05 * w);
    }
    const double mid = std::exp(c);
    // No double strictly inside (a tolerance below what binary64 resolves): the bracket is as tight as it
    // gets, and testing an end again would loop forever.
    if (!(mid > lo.r && mid < hi.r)) break;
    const BallTest t = test(mid);
    const bool passed = t.certified;
    same_side = passed == !aim_below ? same_side + 1 : 1;
    Tried& end = passed ? lo : hi;
    previous = end;
    end = {mid, g_of(mid, t)};
    aim_below = !passed;
  }
  out.radius = lo.r;
  out.refuted = hi.r;
  return out;
}

namespace {

/// The gradient of wᵀz through pool (m, X the pooled stage's input, Pbar the pooled row's gradient).
Matrix<double> unpool(const Model& m, const Matrix<double>& X, const Matrix<double>& Pbar) {
  if (X.rows() == 1) return Pbar;
  Matrix<double> Xbar = Matrix<double>::Zero(X.rows(), X.cols());
  switch (m.pooling) {
    case Pooling::cls:
      Xbar.row(0) = Pbar.row(0);
      break;
    case Pooling::last:
      Xbar.row(X.rows() - 1) = Pbar.row(0);
      break;
    case Pooling::mean: {
      const Eigen::Index count = m.text() ? X.rows() : m.patch_count();
      for (Eigen::Index i = X.rows() - count; i < X.rows(); ++i) Xbar.row(i) = Pbar.row(0) / double(count);
      break;
    }
  }
  return Xbar;
}

/// (∂ norm(X)/∂X)ᵀ[Ybar] for the model's norm with parameters p.
Matrix<double> norm_vjp(const Model& m, const Matrix<double>& X, const NormParameters& p,
                        const Matrix<double>& Ybar) {
  return normalize_rows_vjp(m.norm, X, Vector<double>(p.gamma), m.eps, Ybar);
}

}  // namespace

LogitGradient logit_gradient(const ConvertedModel<double>& cm, const Vector<double>& x,
                             const std::function<Vector<double>(const Vector<double>&)>& weights,
                             const std::function<void()>& poll) {
  const Model& m = cm.model;
  auto tick = [&poll] {
    if (poll) poll();
  };
  // Forward, keeping what the backward pass reads: the same stages as forward() and propagate().
  struct Stage {
    std::optional<Linearization<double>> attention;
    Matrix<double> pooled_from, norm1_in, mlp_in, Y, H, G, norm2_in;
    Matrix<double> gate_value, derivative;  // σ(G) (gated) and σ′ of G (gated) or of H
  };
  Matrix<double> X = embed<double>(m, x);
  const Matrix<double> embedded = X;
  if (m.embed_norm.present()) X = layer_norm(m, X, m.embed_norm);
  std::vector<Stage> stages(m.blocks.size());
  for (std::size_t b = 0; b < m.blocks.size(); ++b) {
    tick();
    const TransformerBlock& blk = m.blocks[b];
    Stage& st = stages[b];
    st.attention.emplace(cm.attention[b].linearize(X));
    X = st.attention->value();
    if (b + 1 == m.blocks.size() && m.pooling != Pooling::mean) {
      st.pooled_from = X;
      X = pool(m, X);
    }
    if (!m.prenorm) {
      st.norm1_in = X;
      X = layer_norm(m, X, blk.norm1);
    }
    st.mlp_in = X;
    st.Y = m.prenorm ? layer_norm(m, X, blk.norm2) : X;
    st.H = st.Y * blk.fc1.W;
    st.H.rowwise() += blk.fc1.b.transpose();
    Matrix<double> A;
    if (blk.gated()) {
      st.G = st.Y * blk.gate.W;
      st.G.rowwise() += blk.gate.b.transpose();
      activate_with_derivative(m.activation, st.G, st.gate_value, st.derivative);
      A = st.gate_value.cwiseProduct(st.H);
    } else {
      activate_with_derivative(m.activation, st.H, A, st.derivative);
    }
    X += A * blk.fc2.W;
    X.rowwise() += blk.fc2.b.transpose();
    if (!m.prenorm) {
      st.norm2_in = X;
      X = layer_norm(m, X, blk.norm2);
    }
  }
  const Matrix<double> final_in = X;
  Matrix<double> pooled = pool(m, X);
  const Matrix<double> final_norm_in = pooled;
  if (m.final_norm.present()) pooled = layer_norm(m, pooled, m.final_norm);
  Matrix<double> pre_pooler;
  if (m.pooler.W.size() != 0) {
    pre_pooler = pooled * m.pooler.W;
    pre_pooler.rowwise() += m.pooler.b.transpose();
    pooled = activate(Activation::tanh, pre_pooler);
  }
  LogitGradient out;
  Vector<double> z = (pooled * m.head.W).transpose();
  z += m.head.b;
  if (!z.allFinite()) return out;
  out.logits = z;
  // Backward: the transpose of each stage's derivative, in reverse order.
  const Vector<double> w = weights(z);
  Matrix<double> bar = (m.head.W * w).transpose();
  if (m.pooler.W.size() != 0)
    bar = (bar.cwiseProduct(activation_derivative(Activation::tanh, pre_pooler))) * m.pooler.W.transpose();
  if (m.final_norm.present()) bar = norm_vjp(m, final_norm_in, m.final_norm, bar);
  bar = unpool(m, final_in, bar);
  for (std::size_t b = m.blocks.size(); b-- > 0;) {
    tick();
    const TransformerBlock& blk = m.blocks[b];
    const Stage& st = stages[b];
    if (!m.prenorm) bar = norm_vjp(m, st.norm2_in, blk.norm2, bar);
    const Matrix<double> Abar = bar * blk.fc2.W.transpose();
    Matrix<double> Ybar;
    if (blk.gated()) {
      const Matrix<double> Gbar = Abar.cwiseProduct(st.derivative).cwiseProduct(st.H);
      const Matrix<double> Hbar = Abar.cwiseProduct(st.gate_value);
      Ybar = Gbar * blk.gate.W.transpose() + Hbar * blk.fc1.W.transpose();
    } else {
      Ybar = Abar.cwiseProduct(st.derivative) * blk.fc1.W.transpose();
    }
    bar += m.prenorm ? norm_vjp(m, st.mlp_in, blk.norm2, Ybar) : Ybar;
    if (!m.prenorm) bar = norm_vjp(m, st.norm1_in, blk.norm1, bar);
    if (st.pooled_from.size() != 0) bar = unpool(m, st.pooled_from, bar);
    bar = st.attention->vjp(bar);
  }
  if (m.embed_norm.present()) bar = norm_vjp(m, embedded, m.embed_norm, bar);
  out.gradient = Vector<double>::Zero(x.size());
  if (m.text()) {
    for (Eigen::Index i = 0; i < bar.rows(); ++i)
      for (Eigen::Index a = 0; a < bar.cols(); ++a) out.gradient(i * m.width + a) = bar(i, a);
  } else {  // X's patch rows are P·W_patch: P̄ = X̄·W_patchᵀ, P(q, k) = x(pixel_of(q, k))
    const int first = m.class_token ? 1 : 0;
    const Matrix<double> Pbar = bar.middleRows(first, m.patch_count()) * m.patch.W.transpose();
    for (int q = 0; q < m.patch_count(); ++q)
      for (Eigen::Index k = 0; k < Pbar.cols(); ++k) out.gradient(m.pixel_of(q, int(k))) += Pbar(q, k);
  }
  return out;
}

AttackResult attack(const ConvertedModel<double>& cm, const Vector<double>& x, int y,
                    const AttackOptions& o) {
  const Model& m = cm.model;
  AttackResult out;
  auto flipped = [&](const Vector<double>& p, int* pred) {
    if (o.poll) o.poll();
    if (!p.allFinite()) return false;
    const int c = argmax(forward<double>(m, p));
    if (pred) *pred = c;
    return c != y;
  };
  int pred = -1;
  if (flipped(x, &pred)) {
    out.found = true;
    out.point = x;
    out.predicted = pred;
    return out;
  }
  // The closest boundary point on the segment x → p (p flipped).
  auto shrink = [&](const Vector<double>& p) {
    double lo = 0, hi = 1;
    for (int k = 0; k < o.line_bisection; ++k) {
      const double mid = (lo + hi) / 2;
      (flipped(x + mid * (p - x), nullptr) ? hi : lo) = mid;
    }
    return Vector<double>(x + hi * (p - x));
  };
  Vector<double> adv = x;
  bool found = false;
  for (int step = 0; step < o.deepfool_steps && !found; ++step) {
    if (!adv.allFinite()) return out;
    const ModelPass<double> pass = propagate(cm, adv, 0.0, o.poll);
    ++out.gradient_passes;
    if (pass.logits.size() == 0) return out;
    if (argmax(pass.logits) != y) {
      found = true;
      break;
    }
    double best = INFINITY;
    Vector<double> move;
    for (Eigen::Index c = 0; c < pass.logits.size(); ++c) {
      if (c == y) continue;
      const Vector<double> w = (pass.jacobian.row(c) - pass.jacobian.row(y)).transpose();
      const double f = pass.logits(y) - pass.logits(c), norm = w.norm();
      if (norm == 0) continue;
      if (f / norm < best) {
        best = f / norm;
        move = (f / (norm * norm)) * w;
      }
    }
    if (move.size() == 0) break;
    adv += (1 + o.overshoot) * move;
  }
  if (!found || !flipped(adv, nullptr)) return out;
  Vector<double> delta = shrink(adv) - x;
  // Rounds of PGD on the sphere of radius f·‖δ‖ (f = pgd_shrink at first): a success is shrunk again along
  // its segment; a failure moves f halfway to 1 (0.9 → 0.95 → 0.975 …), and pgd_failures of them end it.
  double factor = o.pgd_shrink;
  int failures = 0;
  for (int round = 0; round < o.pgd_rounds && failures < o.pgd_failures; ++round) {
    const double eps = factor * delta.norm();
    Vector<double> p = x + eps * delta.normalized();
    bool success = false;
    for (int step = 0; step < o.pgd_steps; ++step) {
      // The ascent direction of z_c − z_y for the strongest other class c, by reverse mode; its pass's logits
      // also say whether p is flipped, which forward() then confirms (one forward pass at a flipped point,
      // not one per step).
      const LogitGradient pass = logit_gradient(
          cm, p,
          [y](const Vector<double>& z) {
            Eigen::Index c_best = -1;
            for (Eigen::Index c = 0; c < z.size(); ++c)
              if (c != y && (c_best < 0 || z(c) > z(c_best))) c_best = c;
            Vector<double> w = Vector<double>::Zero(z.size());
            w(c_best) = 1;
            w(y) = -1;
            return w;
          },
          o.poll);
      ++out.gradient_passes;
      if (pass.logits.size() == 0) break;
      if (argmax(pass.logits) != y && flipped(p, nullptr)) {
        success = true;
        break;
      }
      const Vector<double>& g = pass.gradient;
      if (g.norm() == 0) break;
      // The step shrinks linearly from pgd_step·ε to a tenth of it over the round.
      const double length = o.pgd_step * (1 - 0.9 * double(step) / double(o.pgd_steps));
      p += (length * eps / g.norm()) * g;
      const Vector<double> d = p - x;
      if (d.norm() > eps) p = x + (eps / d.norm()) * d;
    }
    if (success) {
      delta = shrink(p) - x;
    } else {
      ++failures;
      factor = (1 + factor) / 2;
    }
  }
  const Vector<double> final_point = x + delta;
  if (!flipped(final_point, &pred)) return out;  // cannot happen: shrink keeps the flipped end
  out.found = true;
  out.point = final_point;
  out.predicted = pred;
  out.radius = delta.norm();
  return out;
}

template struct ConvertedModel<double>;
template struct ConvertedModel<interval64>;
template ModelPass<double> propagate<double>(const ConvertedModel<double>&, const Vector<double>&, double,
                                             const std::function<void()>&);
template ModelPass<interval64> propagate<interval64>(const ConvertedModel<interval64>&, const Vector<double>&,
                                                     double, const std::function<void()>&);

}  // namespace regatta::operators
