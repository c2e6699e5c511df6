// Optimised ReLU slopes on the final bound by re-expressing the remainder symbols of one ReLU node
// (slopes.hpp has the identity and the argument; docs/verify.md#optimised-relu-slopes).
#include "slopes.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "../nonlinear.hpp"

namespace regatta::operators::affine::gp {

ReluRelaxation relu_relaxation(std::size_t node, const Form& Z, const std::vector<Index>& fresh,
                               const Pass& p, const std::vector<I>* within) {
  const Linearisation l = linearise(Z, Function::relu, p, 0, within);
  const Vector<double>& rad = radius(Z, p);
  const Vector<double>& rs = row_sums(Z, p);
  ReluRelaxation r;
  r.node = node;
  std::vector<Index> rows;
  for (Index e = 0; e < Z.size(); ++e) {
    const bool has = e < Index(fresh.size()) && fresh[std::size_t(e)] >= 0;
    if (has != (l.beta(e) > 0)) throw std::logic_error("relu_relaxation: remainder columns do not match");
    if (!has) continue;
    I J = I(Z.c(e)) + I::hull(-rad(e), rad(e));  // as linearise computes it
    if (within) {
      const I& w = (*within)[std::size_t(e)];
      J = I::hull(std::max(J.lower(), w.lower()), std::min(J.upper(), w.upper()));
    }
    const I& lambda = l.lambda[std::size_t(e)];
    const I& M = l.M[std::size_t(e)];
    if (lambda.lower() != lambda.upper() || M.lower() != M.upper())
      throw std::logic_error("relu_relaxation: the pass's slope or offset is not a point");
    r.column.push_back(fresh[std::size_t(e)]);
    r.lower.push_back(J.lower());
    r.upper.push_back(J.upper());
    r.lambda.push_back(lambda.lower());
    r.M.push_back(M.lower());
    r.b.push_back(l.beta(e));
    r.c.push_back(Z.c(e));
    r.s.push_back(Z.s(e));
    r.row_sum.push_back(rs(e));
    rows.push_back(e);
  }
  r.G.resize(Index(rows.size()), Z.A.cols());
  for (std::size_t i = 0; i < rows.size(); ++i) r.G.row(Index(i)) = Z.A.row(rows[i]);
  return r;
}

namespace {

/// m′ = max((1 − λ′)·u, −λ′·l) rounded up: relu(z) − λ′·z ∈ [0, m′] for z ∈ [l, u].
double remainder_top(double slope, double lower, double upper) {
  return hi(max((I(1.0) - I(slope)) * I(upper), I(-slope) * I(lower)));
}

}  // namespace

std::vector<double> choose_slopes(const Objective& o, const Row& v, const ReluRelaxation& r, const Pass& p,
                                  int steps) {
  const std::size_t n = r.column.size();
  std::vector<double> best = r.lambda;
  if (n == 0 || steps <= 0) return best;
  const Index KZ = r.G.cols(), K = std::max(v.size(), KZ), q = std::min(p.q, K);
  Vector<double> w = Vector<double>::Zero(Index(n));
  Row base = Row::Zero(K);
  base.head(v.size()) = v;
  bool any = false;
  for (std::size_t j = 0; j < n; ++j) {
    const Index col = r.column[j];
    const double a = col < v.size() ? v(col) : 0.0;
    const double wj = r.b[j] > 1e-300 ? a / r.b[j] : 0.0;
    if (!(wj > 0) || !std::isfinite(wj)) continue;  // the chord is optimal for a non-positive weight
    w(Index(j)) = wj;
    if (col < K) base(col) -= a;  // the element's term is valued below, from its relaxation
    any = true;
  }
  if (!any) return best;
  std::vector<double> slope = r.lambda;
  Vector<double> d = Vector<double>::Zero(Index(n)), g = Vector<double>::Zero(Index(n));
  Row u(K);
  double best_value = -std::numeric_limits<double>::infinity(), rate = 0.25;
  for (int t = 0; t <= steps; ++t) {
    double value = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const double wj = w(Index(j)), delta = slope[j] - r.lambda[j];
      d(Index(j)) = wj * delta;
      if (wj == 0) continue;
      // w·[(λ′ − λ)·c + M′ − M] − w·b′ − |d|·s, with M′ = b′ = m′/2
      value += wj * (delta * r.c[j] - r.M[j]) - std::fabs(d(Index(j))) * r.s[j];
    }
    Row now = base;
    now.head(KZ).noalias() += d.transpose() * r.G;
    if (p.box) {
      value -= now.cwiseAbs().sum();
      for (Index k = 0; k < K; ++k) u(k) = now(k) > 0 ? 1.0 : now(k) < 0 ? -1.0 : 0.0;
    } else {
      const double norm = now.head(q).norm();
      value -= norm + now.tail(K - q).cwiseAbs().sum();
      for (Index k = q; k < K; ++k) u(k) = now(k) > 0 ? 1.0 : now(k) < 0 ? -1.0 : 0.0;
      u.head(q) = norm > 0 ? Row(now.head(q) / norm) : Row(Row::Zero(q));
    }
    if (value > best_value) {
      best_value = value;
      best = slope;
    }
    if (t == steps) break;
    g.noalias() = r.G * u.head(KZ).transpose();  // the input's coefficients at the minimising symbols
    for (std::size_t j = 0; j < n; ++j) {
      const double wj = w(Index(j));
      if (wj == 0) continue;
      const double delta = slope[j] - r.lambda[j];
      const double grad = wj * (r.c[j] - g(Index(j)) - (delta > 0 ? r.s[j] : delta < 0 ? -r.s[j] : 0.0));
      const double step = grad > 0 ? rate : grad < 0 ? -rate : 0.0;
      slope[j] = std::clamp(slope[j] + step, 0.0, 1.0);
    }
    rate *= 0.85;
  }
  return best;
}

Objective substitute(const Objective& o, const ReluRelaxation& r, const std::vector<double>& slopes,
                     const Pass& p, std::vector<std::pair<Index, Index>>* moved, Index first) {
  (void)p;
  const std::size_t n = r.column.size();
  if (slopes.size() != n) throw std::logic_error("substitute: one slope per element");
  std::vector<std::size_t> changed;
  for (std::size_t j = 0; j < n; ++j) {
    if (!(slopes[j] >= 0 && slopes[j] <= 1)) throw std::logic_error("substitute: a slope outside [0, 1]");
    if (slopes[j] != r.lambda[j]) changed.push_back(j);
  }
  const Index KZ = r.G.cols(), K = std::max({o.a.size(), KZ, first}), m = Index(changed.size());
  Objective out{o.centre, Row::Zero(K + m), o.slack};
  out.a.head(o.a.size()) = o.a;
  if (m == 0) return out;
  Vector<double> d = Vector<double>::Zero(Index(n));
  I magnitude(sum_up(o.a.cwiseAbs().sum(), double(o.a.size())));
  for (Index t = 0; t < m; ++t) {
    const std::size_t j = changed[std::size_t(t)];
    const Index col = r.column[j];
    const I W = I(col < o.a.size() ? o.a(col) : 0.0) / I(r.b[j]);  // encloses a/b
    const I D = W * (I(slopes[j]) - I(r.lambda[j]));
    const double dj = mid(D);
    const double top = remainder_top(slopes[j], r.lower[j], r.upper[j]);
    const I E = I::hull(0.0, top);
    const double Mn = mid(E), bn = halfwidth(E, Mn);
    // (a/b)·[(λ′ − λ)·z + (M′ − M) + b′·η′] with z = c + A·(ε, η) + [−s, s]:
    out.centre += D * I(r.c[j]) + W * (I(Mn) - I(r.M[j]));
    out.slack += I(halfwidth(D, dj)) * I(r.row_sum[j]) + I(magnitude_of(D)) * I(r.s[j]);
    const I coefficient = W * I(bn);
    const double cm = mid(coefficient);
    out.slack += I(halfwidth(coefficient, cm));
    if (col < o.a.size()) out.a(col) = 0;
    out.a(K + t) = cm;
    d(Index(j)) = dj;
    magnitude += I(std::fabs(dj)) * I(r.row_sum[j]);
    if (moved) moved->emplace_back(K + t, col);
  }
  out.a.head(KZ).noalias() += d.transpose() * r.G;
  // each coefficient of A's columns is a sum of m + 1 terms (Higham's γ, with underflow)
  out.slack += I(gamma_of(double(m + 1))) * magnitude + I(double(m + 1) * double(K)) * I(underflow_unit);
  if (!isfinite(out.centre) || !isfinite(out.slack)) throw Vacuous{};
  return out;
}

Objective optimise_slopes(Objective o, const std::vector<const ReluRelaxation*>& nodes,
                          std::vector<SplitRow>& rows, const std::vector<double>& beta, const Pass& p,
                          int steps, Index first, std::vector<std::pair<Index, Index>>* moved) {
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const ReluRelaxation& r = **it;
    const std::vector<double> slopes = choose_slopes(o, combined(o, rows, beta), r, p, steps);
    // One numbering of the new columns for the functional and the rows.
    Index base = std::max({first, o.a.size(), r.G.cols()});
    for (const SplitRow& row : rows) base = std::max(base, Index(row.r.size()));
    o = substitute(o, r, slopes, p, moved, base);
    for (SplitRow& row : rows) {
      bool reads = false;  // whether the row reads a remainder column whose slope changed
      for (std::size_t j = 0; j < r.column.size() && !reads; ++j)
        reads = slopes[j] != r.lambda[j] && r.column[j] < row.r.size() && row.r(r.column[j]) != 0;
      if (!reads) continue;
      const Objective x = substitute(Objective{I(row.c), row.r, I(row.s)}, r, slopes, p, nullptr, base);
      row.c = mid(x.centre);
      row.s = hi(x.slack + I(halfwidth(x.centre, row.c)));
      row.r = x.a;
    }
  }
  return o;
}

}  // namespace regatta::operators::affine::gp
