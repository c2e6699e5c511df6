// The certified margin and radius by affine forms (model_affine.hpp): the lower end of the logit margin over
// the ball, read through the final norm when the head has one, and the search for the largest radius it
// certifies (docs/models.md).
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/model_affine.hpp>

#include "../radius_search.hpp"
#include "form.hpp"
#include "linear.hpp"
#include "norms.hpp"
#include "pass.hpp"
#include "products.hpp"

namespace regatta::operators::affine {
namespace {

/// min over the classes c ≠ y of bound(c, ledger), a lower bound of z_y − z_c that the ledger (fresh_bound)
/// can only raise: each class is first bounded without it, then, from the smallest up, with it, until the
/// next class's bound without it is no smaller than the minimum so far (the ledger cannot bring it lower).
template <class Bound>
double smallest_bound(const Model& m, int y, const Pass& p, Bound bound) {
  std::vector<std::pair<double, Index>> plain;
  for (Index c = 0; c < m.classes; ++c)
    if (c != y) plain.emplace_back(bound(c, false), c);
  std::sort(plain.begin(), plain.end());
  double worst = std::numeric_limits<double>::infinity();
  for (const auto& [value, c] : plain) {
    if (value >= worst) break;
    worst = std::min(worst, p.ledger ? bound(c, true) : value);
  }
  return worst;
}

/// The lower end of min_{c≠y} (z_y − z_c) when the head reads the final norm of the pooled row X.
/// With z the centred row (LayerNorm; RMSNorm: the row itself), s(z) = √(‖z‖²/d + ε), w = γ ⊙ (W_y − W_c)
/// and κ = βᵀ(W_y − W_c) + b_y − b_c, the margin is N(z)/s(z) with N(z) = wᵀz + κ·s(z). s is convex, with
/// s(z) ≥ s₀ + Gᵀu (its tangent at the centre z₀, G = z₀/(d·s₀), u = z − z₀) and, by the tangent of √ at s₀²,
/// s(z) ≤ s₀ + Gᵀu + ‖u‖²/(2d·s₀). So N is bounded below by one linear functional of the row's form, plus
/// −|κ|·‖u‖²/(2d·s₀) when κ < 0: the norm adds no remainder symbol, and its curvature enters only through
/// that one scalar. Then z_y − z_c ≥ N_lo / max s when N_lo > 0, and ≥ N_lo / min s otherwise.
double normed_margin(const Form& X, const Model& m, int y, const Pass& p, const Deferred& deferred) {
  const Index d = m.width;
  const bool centre = m.norm == Prenorm::layernorm;
  const Form z = centre ? centred_rows(X, 1, d, p) : X;
  const Index K = z.A.cols(), q = std::min(p.q, K);
  const Vector<double> rad = radius(z, p);
  // The deferred remainder: the row is z + D, D_f = Σ_o Wc_of·l_o·ρ_o (Wc: W₂ with each row centred for
  // LayerNorm, as z is), |D_f| ≤ extra_f.
  const Index hidden = deferred.present() ? deferred.Zw.size() : 0;
  Matrix<I> Wc(hidden, d);
  Vector<double> extra = Vector<double>::Zero(d);
  for (Index o = 0; o < hidden; ++o) {
    I mean(0.0);
    for (Index f = 0; f < d; ++f) mean += I(deferred.W(o, f));
    mean = centre ? mean / I(double(d)) : I(0.0);
    const I size = I(std::fabs(deferred.slope(o))) * I(deferred.rho(o));
    for (Index f = 0; f < d; ++f) {
      Wc(o, f) = I(deferred.W(o, f)) - mean;
      extra(f) = hi(I(extra(f)) + I(magnitude_of(Wc(o, f))) * size);
    }
  }
  // ‖u‖₂ ≤ ‖A_ε‖₂ + ‖(Σ_{j≥q} |A_fj| + s_f + extra_f)_f‖₂ (the input symbols in an ℓ₂ ball, the others in
  // [−1, 1]; ‖A_ε‖₂ certified, at most its Frobenius norm).
  I fresh2(0.0);
  for (Index f = 0; f < d; ++f)
    fresh2 +=
        square(I(sum_up(z.A.row(f).tail(K - q).cwiseAbs().sum(), double(K - q))) + I(z.s(f)) + I(extra(f)));
  const double input_norm = q > 0
                                ? std::min(spectral_norm_upper_fast(Matrix<double>(z.A.leftCols(q))).upper,
                                           hi(sqrt(I(sum_up(z.A.leftCols(q).squaredNorm(), double(d * q))))))
                                : 0.0;
  const I rho = I(input_norm) + sqrt(fresh2);
  I norm2(0.0);
  for (Index f = 0; f < d; ++f) norm2 += square(I(z.c(f)));
  const I s0 = sqrt(norm2 / I(double(d)) + I(m.eps));
  if (!isfinite(rho) || !isfinite(s0) || !(s0.lower() > 0)) throw Vacuous{};
  const I spread = rho / sqrt(I(double(d)));  // |s(z) − s₀| ≤ ‖u‖/√d (the triangle inequality)
  const double s_max = hi(s0 + spread);
  const double s_min = std::max(sqrt(I(m.eps)).lower(), (s0 - spread).lower());
  const I quad = square(rho) / (I(2.0 * double(d)) * I(s0.lower()));
  std::vector<I> G(static_cast<std::size_t>(d));
  for (Index f = 0; f < d; ++f) G[std::size_t(f)] = I(z.c(f)) / (I(double(d)) * s0);
  const Vector<double>& rs = row_sums(z, p);
  const bool has_bias = m.head.b.size() != 0, has_gamma = m.final_norm.gamma.size() != 0,
             has_beta = m.final_norm.beta.size() != 0;
  auto bound = [&](Index c, bool ledger) -> double {
    I kappa = has_bias ? I(m.head.b(y)) - I(m.head.b(c)) : I(0.0), spill(0.0);
    Vector<double> w(d);
    for (Index f = 0; f < d; ++f) {
      const I a = I(m.head.W(f, y)) - I(m.head.W(f, c));
      const I wf = has_gamma ? a * I(m.final_norm.gamma(f)) : a;
      if (has_beta) kappa += a * I(m.final_norm.beta(f));
      w(f) = mid(wf);
      spill += I(halfwidth(wf, w(f)));
    }
    // Σ_f (w_f − ŵ_f)·g_f(z) with |g_f| = |z_f|/s ≤ √d.
    const double k = (kappa - spill * sqrt(I(double(d)))).lower();
    if (!std::isfinite(k)) throw Vacuous{};
    // N ≥ Σ_f ŵ_f z₀_f + k·s₀ + Σ_f λ_f u_f − [k < 0]·|k|·‖u‖²/(2d·s₀), λ_f = ŵ_f + k·G_f.
    I constant = I(k) * s0, loss(0.0), scaled(0.0);
    Vector<double> lambda(d);
    for (Index f = 0; f < d; ++f) {
      constant += I(w(f)) * I(z.c(f));
      const I l = I(w(f)) + I(k) * G[std::size_t(f)];
      lambda(f) = mid(l);
      // the slack, the width of λ_f over the entry's range, and the rounding of Σ_f λ̂_f A_f
      loss += I(std::fabs(lambda(f))) * I(z.s(f)) + I(halfwidth(l, lambda(f))) * (I(rad(f)) + I(extra(f)));
      scaled += I(std::fabs(lambda(f))) * I(rs(f));
    }
    const Eigen::Matrix<double, 1, Eigen::Dynamic> a = lambda.transpose() * z.A;
    const double l2 = hi(sqrt(I(sum_up(a.head(q).squaredNorm(), double(q)))));
    const double l1 = fresh_bound(a, q, p, ledger);
    loss += I(l2) + I(l1) + I(gamma_of(double(d))) * scaled + I(double(K * d)) * I(underflow_unit);
    if (k < 0) loss += I(-k) * quad;
    if (hidden > 0) {
      // Σ_f λ_f D_f = Σ_o w_o ρ_o, w_o = l_o·Σ_f Wc_of λ_f ∋ ŵ_o: (r − c_r)·Σ_o ŵ_o Zw_o (one deviation
      // product) plus Σ_o |w_o − ŵ_o|·mag ρ_o.
      Matrix<double> weights(hidden, 1);
      I spread_w(0.0);
      for (Index o = 0; o < hidden; ++o) {
        I w(0.0);
        for (Index f = 0; f < d; ++f) w += Wc(o, f) * I(lambda(f));
        w *= I(deferred.slope(o));
        weights(o, 0) = mid(w);
        spread_w += I(halfwidth(w, weights(o, 0))) * I(deferred.rho(o));
      }
      const Form V = linear_rows(deferred.Zw, 1, weights, Vector<double>(), p);
      measure(V, p);
      loss += spread_w - I(std::min(0.0, deviation_product(V, 0, deferred.root, 0, p).lower()));
    }
    const double n_low = (constant - loss).lower();
    if (!std::isfinite(n_low)) throw Vacuous{};
    if (!(n_low > 0) && !(s_min > 0)) return -std::numeric_limits<double>::infinity();  // ε = 0
    return (I(n_low) / I(n_low > 0 ? s_max : s_min)).lower();
  };
  return smallest_bound(m, y, p, bound);
}

}  // namespace
}  // namespace regatta::operators::affine

namespace regatta::operators {

std::string affine_unsupported(const Model& m) {
  for (const TransformerBlock& blk : m.blocks) {
    if (blk.attention.kind != AttentionKind::dot) return "L2 attention";
  }
  return "";
}

double affine_margin(const Model& m, const Vector<double>& x, int y, double r,
                     const std::function<void()>& poll, const AffineOptions& options) {
  using namespace affine;  // function scope: a unity batch must not see the internal names
  const std::string why = affine_unsupported(m);
  if (!why.empty()) throw std::logic_error("affine_margin: " + why);
  if (!m.accepts(x.size()) || y < 0 || y >= m.classes || !(r >= 0))
    throw std::logic_error("affine_margin: bad input, label or radius");
  Pass p;
  p.q = p.next = x.size();
  p.poll = poll;
  p.compact = options.compact_columns;
  std::vector<ProductGroup> ledger;
  p.ledger = &ledger;
  try {
    if (m.final_norm.present() && m.pooler.W.size() == 0) {
      Deferred deferred;
      const Form pooled = pooled_form(m, x, r, p, &deferred);
      return normed_margin(pooled, m, y, p, deferred);
    }
    const Form pooled = pooled_form(m, x, r, p);
    const Form z = logits_form(m, pooled, p);
    const Index K = z.A.cols(), q = std::min(p.q, K);
    auto bound = [&](Index c, bool ledger) -> double {
      const Eigen::Matrix<double, 1, Eigen::Dynamic> a = z.A.row(y) - z.A.row(c);
      // Rounding of the subtraction: u·(|a_y| + |a_c|) per coefficient.
      const double rounding = hi(I(unit_roundoff) * (I(sum_up(z.A.row(y).cwiseAbs().sum(), double(K))) +
                                                     I(sum_up(z.A.row(c).cwiseAbs().sum(), double(K)))) +
                                 I(double(K)) * I(underflow_unit));
      const double l2 = hi(sqrt(I(sum_up(a.head(q).squaredNorm(), double(q)))));
      const double l1 = fresh_bound(a, q, p, ledger);
      const I low = I(z.c(y)) - I(z.c(c)) - (I(l2) + I(l1) + I(z.s(y)) + I(z.s(c)) + I(rounding));
      return isfinite(low) ? low.lower() : -std::numeric_limits<double>::infinity();
    };
    return smallest_bound(m, y, p, bound);
  } catch (const Vacuous&) {
    return -std::numeric_limits<double>::infinity();
  }
}

CertifiedRadius affine_certified_radius(const Model& m, const Vector<double>& x, int y, double upper,
                                        double tolerance, const std::function<void()>& poll,
                                        double at_centre) {
  using namespace affine;
  auto margin = [&](double r) { return affine_margin(m, x, y, r, poll); };
  // L(0): the lower end of the margin's interval64 enclosure at x (the affine pass at r = 0 computes the
  // same number, less tightly and more slowly), unless the caller has it.
  if (std::isnan(at_centre)) {
    const Vector<I> z = forward<I>(m, Vector<I>(x.cast<I>()));
    at_centre = INFINITY;
    for (Index c = 0; c < z.size(); ++c)
      if (c != y) at_centre = std::min(at_centre, (z(y) - z(c)).lower());
  }
  if (!(at_centre > 0)) return CertifiedRadius{};
  return search_certified_radius(margin, at_centre, upper, tolerance);
}

}  // namespace regatta::operators
