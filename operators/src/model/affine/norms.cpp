// Row-wise LayerNorm and RMSNorm of affine forms (norms.hpp), and the linear maps that read a norm's output
// with its product remainder kept as one deviation product per output (docs/models.md).
#include "norms.hpp"

#include <algorithm>
#include <cmath>

#include <regatta/core/spectral_norm.hpp>

#include "linear.hpp"
#include "nonlinear.hpp"
#include "products.hpp"

namespace regatta::operators::affine {

namespace {

/// The entries of each of n rows of d features (rows[i]) and the row of each entry (row_of[e]).
struct RowIndex {
  std::vector<std::vector<Index>> rows;
  std::vector<Index> row_of;
  RowIndex(Index n, Index d) : rows(static_cast<std::size_t>(n)), row_of(static_cast<std::size_t>(n * d)) {
    for (Index i = 0; i < n; ++i)
      for (Index f = 0; f < d; ++f) {
        rows[std::size_t(i)].push_back(i * d + f);
        row_of[std::size_t(i * d + f)] = i;
      }
  }
};

}  // namespace

/// X minus the mean of its row (n rows × d features), linear in the symbols.
Form centred_rows(const Form& X, Index n, Index d, const Pass& p) {
  const RowIndex index(n, d);
  const Form mean = affine_entries(sum_groups(X, index.rows, p), I(1.0) / I(double(d)),
                                   std::vector<I>(std::size_t(n), I(0.0)), p);
  return combine(X, mean, -1, p, index.row_of);
}

namespace {

/// mean_f z_f² + ε for each of n rows × d features, one entry per row. With u = z − c (c the centres),
/// Σ_f z_f² = Σ_f c_f² + 2Σ_f c_f u_f + ‖u‖²: the middle term is linear in the symbols, and ‖u‖² ∈ [0, Q] is
/// one fresh symbol per row (half of Q joins the centre), with Q the smaller of Σ_f range_f² (each |u_f| ≤
/// its range) and (σ + ‖l‖)², σ ≥ ‖A_ε‖₂ the certified spectral norm of the row's input-symbol block
/// (‖A_ε ε‖ ≤ σ on the unit ball) and l_f the rest of |u_f| (other symbols' ℓ₁ plus the slack): the
/// input part of a row's deviation seldom fills every direction at once.
Form mean_square_rows(const Form& Z, const RowIndex& index, Index d, double eps, const Pass& p) {
  const Index n = Index(index.rows.size()), K = Z.A.cols(), q = std::min(p.q, K);
  measure(Z, p);
  Vector<double> beta(n);
  std::vector<I> Q(static_cast<std::size_t>(n));
  for (Index i = 0; i < n; ++i) {
    I by_entry(0.0), rest(0.0);
    for (Index f = 0; f < d; ++f) {
      const Index e = i * d + f;
      by_entry += square(I(Z.ranges(e)));
      rest += square(I(Z.ranges(e)) - I(Z.inputs(e)));  // ≥ ℓ₁ of the other symbols + slack (rounded up)
    }
    I bound = by_entry;
    if (q > 0 && !p.box) {  // over the box, ‖A_ε ε‖₂ has no such bound: the entries' ranges stand
      const double sigma = spectral_norm_upper_fast(Matrix<double>(Z.A.block(i * d, 0, d, q))).upper;
      bound = I::hull(0.0, std::min(by_entry.upper(), hi(square(I(sigma) + sqrt(rest)))));
    }
    Q[std::size_t(i)] = I(hi(bound));
    beta(i) = hi(I(hi(bound)) / I(2.0 * double(d)));
  }
  Form out{Vector<double>(n), coefficients(n, K, fresh_count(beta), p), Vector<double>(n)};
  const Vector<double>& rs = Z.sums;
  for (Index i = 0; i < n; ++i) {
    I centre = Q[std::size_t(i)] / I(2.0 * double(d)) + I(eps), s(0.0), magnitude(0.0);
    I squares(0.0);
    out.A.row(i).head(K).setZero();
    for (Index f = 0; f < d; ++f) {
      const Index e = i * d + f;
      const I exact = I(2.0) * I(Z.c(e)) / I(double(d));
      const double lambda = mid(exact);
      out.A.row(i).head(K) += lambda * Z.A.row(e);
      squares += square(I(Z.c(e)));
      // the slack, the rounding of λ·(c_f + u_f)'s coefficient λ, and of the sum of d scaled rows
      s += I(std::fabs(lambda)) * I(Z.s(e)) + I(halfwidth(exact, lambda)) * I(Z.ranges(e));
      magnitude += I(std::fabs(lambda)) * I(rs(e));
    }
    centre += squares / I(double(d));
    out.c(i) = mid(centre);
    out.s(i) = hi(s + I(gamma_of(double(d))) * magnitude + I(double(K) * double(d)) * I(underflow_unit) +
                  I(halfwidth(centre, out.c(i))));
  }
  add_fresh(out, beta, p);
  return out;
}

/// 1/√(mean of Z² per row + ε) for n rows × d features, one entry per row: 1/√ on [ε, ∞) of
/// mean_square_rows (the mean of squares is ≥ 0).
Form root_rows(const Form& Z, const RowIndex& index, Index d, double eps, const Pass& p) {
  return nonlinear(mean_square_rows(Z, index, d, eps, p), Function::rsqrt, p, eps);
}

/// γ and β per entry of n rows × d features (empty: 1, 0).
std::pair<std::vector<I>, std::vector<I>> entry_weights(Index n, Index d, const Vector<double>& gamma,
                                                        const Vector<double>& beta) {
  std::vector<I> g(static_cast<std::size_t>(n * d)), b(static_cast<std::size_t>(n * d));
  for (Index e = 0; e < n * d; ++e) {
    g[std::size_t(e)] = I(gamma.size() != 0 ? gamma(e % d) : 1.0);
    b[std::size_t(e)] = I(beta.size() != 0 ? beta(e % d) : 0.0);
  }
  return {g, b};
}

/// γ ⊙ Z/√(mean of Z² per row + ε) + β for n rows × d features (γ, β empty: 1, 0): Z times root_rows, then γ
/// and β.
Form scale_rows(const Form& Z, Index n, Index d, const Vector<double>& gamma, const Vector<double>& beta,
                double eps, const Pass& p) {
  const RowIndex index(n, d);
  const Form y = product(Z, root_rows(Z, index, d, eps, p), p, index.row_of);
  const auto [g, b] = entry_weights(n, d, gamma, beta);
  return affine_entries(y, g, b, p);
}

}  // namespace

/// Row-wise LayerNorm of n rows × d features with γ, β (empty: 1, 0) and ε.
Form layer_norm(const Form& X, Index n, Index d, const Vector<double>& gamma, const Vector<double>& beta,
                double eps, const Pass& p) {
  return scale_rows(centred_rows(X, n, d, p), n, d, gamma, beta, eps, p);
}

/// Row-wise RMSNorm of n rows × d features: γ ⊙ x/√(‖x‖²/d + ε) (γ empty: 1).
Form rms_norm(const Form& X, Index n, Index d, const Vector<double>& gamma, double eps, const Pass& p) {
  return scale_rows(X, n, d, gamma, Vector<double>(), eps, p);
}

/// The norm of kind `kind` (LayerNorm with β, or RMSNorm) of n rows × d features.
Form norm_rows(const Form& X, Index n, Index d, Prenorm kind, const Vector<double>& gamma,
               const Vector<double>& beta, double eps, const Pass& p) {
  return kind == Prenorm::rmsnorm ? rms_norm(X, n, d, gamma, eps, p)
                                  : layer_norm(X, n, d, gamma, beta, eps, p);
}

/// The pre-norm of kind `kind` (LayerNorm with β, or RMSNorm) of n rows × d features, kept as Rows.
Rows normed_rows(const Form& X, Index n, Index d, Prenorm kind, const Vector<double>& gamma,
                 const Vector<double>& beta, double eps, const Pass& p) {
  const RowIndex index(n, d);
  const Form Z = kind == Prenorm::rmsnorm ? X : centred_rows(X, n, d, p);
  Rows out;
  out.root = root_rows(Z, index, d, eps, p);
  const auto [g, b] = entry_weights(n, d, gamma, kind == Prenorm::rmsnorm ? Vector<double>() : beta);
  out.linear = affine_entries(linear_product(Z, out.root, p, index.row_of, {}, 0), g, b, p);
  Form deviation = Z;  // z − c_z exactly: centre 0, so that (γ ⊙ z)·W's centre is exactly 0 too
  deviation.c.setZero();
  deviation.forget();
  out.scaled = affine_entries(deviation, g, std::vector<I>(std::size_t(n * d), I(0.0)), p);
  return out;
}

namespace {

/// The deviation products of each entry e of F with the root of its row (entry e / per_row of `root`).
Remainders root_products(const Form& F, const Form& root, Index per_row, const Pass& p) {
  const Index N = F.size();
  measure(F, p);
  measure(root, p);
  Remainders r{std::vector<I>(static_cast<std::size_t>(N)), Vector<double>(N)};
  for (Index e = 0; e < N; ++e) {
    const I dev = deviation_product(F, e, root, e / per_row, p);
    r.shift[std::size_t(e)] = I(mid(dev));
    r.beta(e) = halfwidth(dev, mid(dev));
  }
  return r;
}

/// Adds remainders to `out` entrywise: each midpoint joins the centre, each half-width is a fresh symbol.
void add_remainders(Form& out, const Remainders& r, const Pass& p) {
  for (Index e = 0; e < out.size(); ++e) {
    const I centre = I(out.c(e)) + r.shift[std::size_t(e)];
    out.c(e) = mid(centre);
    out.s(e) = hi(I(out.s(e)) + I(halfwidth(centre, out.c(e))));
  }
  out.forget();
  add_fresh(out, r.beta, p);
}

}  // namespace

/// y = x·W + b per token for the normed rows H of n tokens, with one fresh symbol per output for the norm's
/// product remainder (Rows above).
/// The same for several maps at once (linear_parts): one form per map.
std::vector<Form> project_parts(const Rows& H, Index n, const std::vector<Map>& maps, const Pass& p) {
  std::vector<Map> bare;
  for (const Map& m : maps) bare.push_back(Map{m.W, Vector<double>()});
  std::vector<Form> Zw = linear_parts(H.scaled, n, bare, p);
  std::vector<Form> out = linear_parts(H.linear, n, maps, p);
  for (std::size_t k = 0; k < maps.size(); ++k) {
    const Index dout = maps[k].W->cols();
    const Remainders r = root_products(Zw[k], H.root, dout, p);
    const Index first = p.next;
    add_remainders(out[k], r, p);
    record(p, out[k], ledger_copy(H.root, p), ledger_copy(std::move(Zw[k]), p), r, first, dout, false,
           [dout](Index o) {
             return std::vector<std::pair<Index, Index>>{{o / dout, o}};
           });
  }
  return out;
}
Form project(const Rows& H, Index n, const Matrix<double>& W, const Vector<double>& b, const Pass& p) {
  return std::move(project_parts(H, n, {Map{&W, b}}, p).front());
}

/// The norm's output as one form: `linear` plus, per entry, the product remainder γ_f (z_f − c_z)(r − c_r)
/// (the deviation product of `scaled` and `root`: its midpoint joins the centre, the rest is a fresh symbol).
Form materialise(const Rows& H, Index d, const Pass& p) {
  Form out = H.linear;
  const Remainders r = root_products(H.scaled, H.root, d, p);
  const Index first = p.next;
  add_remainders(out, r, p);
  record(p, out, ledger_copy(H.root, p), ledger_copy(H.scaled, p), r, first, d, false, [d](Index o) {
    return std::vector<std::pair<Index, Index>>{{o / d, o}};
  });
  return out;
}

}  // namespace regatta::operators::affine
