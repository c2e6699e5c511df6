// Products of two affine forms (products.hpp): the part linear in the symbols, the deviation products
// bounded as fresh symbols, and the ledger that lets the margin bound groups of them together.
#include "products.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace regatta::operators::affine {

/// c_x·G + c_y·F − c_x·c_y + shift entrywise (entry i meets G's row map[i] when map is given, else G_i): the
/// part of F ∘ G that is linear in the symbols, (x − c_x)(y − c_y) left out (its midpoint may come as
/// `shift`). `fresh`: room for that many symbols a caller adds next.
Form linear_product(const Form& F, const Form& G, const Pass& p, const std::vector<Index>& map,
                    const std::vector<I>& shift, Index fresh) {
  const Index KF = F.A.cols(), KG = G.A.cols(), K = std::max(KF, KG), N = F.size();
  const Vector<double>&r1 = row_sums(F, p), &r2 = row_sums(G, p);
  const double g2 = gamma_of(2);
  Form out{Vector<double>(N), coefficients(N, K, fresh, p), Vector<double>(N)};
  const I tiny = I(2.0 * double(K)) * I(underflow_unit);
  for (Index i = 0; i < N; ++i) {
    const Index g = row_of(map, i);
    const I centre = I(F.c(i)) * I(G.c(g)) + (shift.empty() ? I(0.0) : shift[std::size_t(i)]);
    out.c(i) = mid(centre);
    out.A.row(i).head(KF) = G.c(g) * F.A.row(i);
    out.A.row(i).segment(KF, K - KF).setZero();
    out.A.row(i).head(KG) += F.c(i) * G.A.row(g);
    const I a1(std::fabs(F.c(i))), a2(std::fabs(G.c(g)));
    out.s(i) = hi(a1 * I(G.s(g)) + a2 * I(F.s(i)) + I(g2) * (a1 * I(r2(g)) + a2 * I(r1(i))) + tiny +
                  I(halfwidth(centre, out.c(i))));
  }
  return out;
}

/// F ∘ G entrywise (entry i meets G's row map[i] when map is given, else G_i). `report` (when given) receives
/// the remainders, as matmul's `quads`.
Form product(const Form& F, const Form& G, const Pass& p, const std::vector<Index>& map, Remainders* report) {
  const Index N = F.size();
  measure(F, p);
  measure(G, p);
  Vector<double> beta(N);
  std::vector<I> shift(static_cast<std::size_t>(N));
  for (Index i = 0; i < N; ++i) {  // (x − c_x)(y − c_y): its midpoint joins the centre, the rest is fresh
    const I dev = deviation_product(F, i, G, row_of(map, i), p);
    shift[std::size_t(i)] = I(mid(dev));
    beta(i) = halfwidth(dev, mid(dev));
  }
  Form out = linear_product(F, G, p, map, shift, fresh_count(beta));
  add_fresh(out, beta, p);
  if (report) {
    report->shift = std::move(shift);
    report->beta = std::move(beta);
  }
  return out;
}

/// An enclosure of Σ_j (F_{e_j} − c)(G_{f_j} − c′) over the pairs (e_j, f_j), one deviation product each.
/// `stochastic`: the F_{e_j} sum to exactly 1 (a row of attention weights), so that δ = Σ_j (F_{e_j} − c) =
/// 1 − Σ_j c exactly. Then for any vector g of input-symbol coefficients the sum is also
/// Σ_j (F_{e_j} − c)(G_{f_j} − c′ − gᵀε) + δ·gᵀε with |gᵀε| ≤ ‖g‖; with g the mean of the G_{f_j}'s input
/// coefficients weighted by the F_{e_j}'s ranges, each product meets a smaller input part. Both sums enclose
/// the same number: their intersection does too. (Only the input symbols are centred: the others are bounded
/// in ℓ₁, where subtracting a mean adds mass on the symbols a row does not read.)
I deviation_sum(const Form& F, const Form& G, const std::vector<std::pair<Index, Index>>& pairs,
                const Pass& p, bool stochastic) {
  measure(F, p);
  measure(G, p);
  I sum(0.0);
  for (const auto& [e, f] : pairs) sum += deviation_product(F, e, G, f, p);
  const Index q = std::min({p.q, F.A.cols(), G.A.cols()});
  if (!stochastic || q == 0) return sum;
  Eigen::RowVectorXd g = Eigen::RowVectorXd::Zero(q), bj(q);
  double weight = 0;
  I delta(1.0);
  for (const auto& [e, f] : pairs) {
    g += F.ranges(e) * G.A.row(f).head(q);
    weight += F.ranges(e);
    delta -= I(F.c(e));
  }
  if (!(weight > 0) || !std::isfinite(weight)) return sum;
  g /= weight;
  // |gᵀε| ≤ ‖g‖, the dual norm of the input set (over the box, ℓ₁ norms and deviation_bound_box throughout)
  const double gn = p.box ? input_norm(g, p) : hi(sqrt(I(sum_up(g.squaredNorm(), double(q)))));
  I centred = I::hull(-gn, gn) * delta;
  for (const auto& [e, f] : pairs) {
    bj = G.A.row(f).head(q) - g;
    const double nb = p.box ? input_norm(bj, p) : hi(sqrt(I(sum_up(bj.squaredNorm(), double(q)))));
    // the subtraction's rounding, at most u·(|G_f| + |g|) per coefficient, joins the rest
    const double ry = hi(I(rest_of(G, f)) + I(unit_roundoff) * (I(G.inputs(f)) + I(gn)));
    centred += p.box ? deviation_bound_box(F.A.row(e).head(q), bj, F.inputs(e), nb, rest_of(F, e), ry)
                     : deviation_bound(F.A.row(e).head(q).dot(bj), F.inputs(e), nb, rest_of(F, e), ry, q);
  }
  return intersect(sum, centred);
}

/// An upper bound of −Σ_{j≥q} a_j η_j over the symbols beyond the input ones (η_j ∈ [−1, 1]): Σ |a_j|, except
/// that (with `ledger`) a ledger group's columns are bounded together (ProductGroup) where that is smaller.
double fresh_bound(const Eigen::Matrix<double, 1, Eigen::Dynamic>& a, Index q, const Pass& p, bool ledger) {
  const Index K = a.size();
  Eigen::Matrix<double, 1, Eigen::Dynamic> rest = a.tail(K - q);
  I extra(0.0);
  if (ledger && p.ledger)
    for (const ProductGroup& group : *p.ledger) {
      double cost = 0;
      for (const auto& out : group.outputs)
        if (out.column < K) cost += std::fabs(a(out.column));
      if (!(cost > 0)) continue;
      const Form& F = *group.F;
      const Form& G = *group.G;
      measure(F, p);
      measure(G, p, true);  // the runs of G's rows for the combinations below, kept for the other classes
      // w_t, and the combination of G's rows that meets each entry of F
      std::vector<Index> slot(static_cast<std::size_t>(F.size()), -1);
      std::vector<Index> entries;
      std::vector<std::vector<std::pair<Index, double>>> terms;
      I shifted(0.0), spill(0.0);
      for (const auto& out : group.outputs) {
        const double at = out.column < K ? a(out.column) : 0.0;
        if (at == 0) continue;
        const double w = at / out.beta;
        if (!std::isfinite(w)) throw Vacuous{};
        shifted += I(w) * out.shift;
        spill += abs(I(at) - I(w) * I(out.beta));
        for (const auto& [e, f] : out.pairs) {
          if (slot[std::size_t(e)] < 0) {
            slot[std::size_t(e)] = Index(entries.size());
            entries.push_back(e);
            terms.emplace_back();
          }
          terms[std::size_t(slot[std::size_t(e)])].emplace_back(f, w);
        }
      }
      // The combinations as deviations (centre 0): coefficients Σ w·A_f, slack Σ |w|·s_f plus their rounding.
      const Index rows = Index(entries.size()),
                  width = group.exact_rest ? G.A.cols() : std::min(q, G.A.cols());
      Form combo{Vector<double>::Zero(rows), Matrix<double>::Zero(rows, width), Vector<double>(rows)};
      std::vector<std::pair<Index, Index>> pairs;
      for (Index r = 0; r < rows; ++r) {
        I slack(0.0), magnitude(0.0);
        for (const auto& [f, w] : terms[std::size_t(r)]) {
          // only the runs of G_f's nonzero coefficients: the terms skipped are w·0 (for_each_run)
          for_each_run(G, f, 0, width, [&, f = f, w = w](Index j, Index len) {
            combo.A.row(r).segment(j, len) += w * G.A.row(f).segment(j, len);
          });
          slack += I(std::fabs(w)) * (group.exact_rest ? I(G.s(f)) : I(rest_of(G, f)));
          magnitude += I(std::fabs(w)) * I(G.sums(f));
        }
        const double m = double(terms[std::size_t(r)].size());
        combo.s(r) = hi(slack + I(gamma_of(m)) * magnitude + I(m * double(width)) * I(underflow_unit));
        pairs.emplace_back(entries[std::size_t(r)], r);
      }
      const I sum = deviation_sum(F, combo, pairs, p, group.stochastic) - shifted;
      const double alternative = hi(I(-sum.lower()) + spill);
      if (alternative < cost) {
        extra += I(alternative);
        for (const auto& out : group.outputs)
          if (out.column < K) rest(out.column - q) = 0;
      }
    }
  return hi(I(sum_up(rest.cwiseAbs().sum(), double(K - q))) + extra);
}

/// Checks that entry o of `out` reads the fresh symbol in `column` with coefficient β, as add_fresh wrote it:
/// std::logic_error otherwise (the ledger would attribute a column to the wrong product).
void check_column(const Form& out, Index o, Index column, double beta) {
  if (column >= out.A.cols() || out.A(o, column) != beta)
    throw std::logic_error("affine forms: a ledger column is not its symbol's");
}

/// A shared copy of F for the ledger (null when the pass does not record). Without p.exact, only what
/// fresh_bound reads is kept: the centres, the input symbols' coefficients and, as the slack, the bound of
/// the rest (rest_of).
std::shared_ptr<const Form> ledger_copy(const Form& F, const Pass& p) {
  if (!p.ledger || !p.record) return nullptr;
  if (p.exact) return std::make_shared<const Form>(F);
  measure(F, p);
  const Index q = std::min(p.q, F.A.cols());
  Vector<double> rest(F.size());
  for (Index e = 0; e < F.size(); ++e) rest(e) = rest_of(F, e);
  return std::make_shared<const Form>(F.c, F.A.leftCols(q), std::move(rest));
}
std::shared_ptr<const Form> ledger_copy(Form&& F, const Pass& p) {
  if (p.ledger && p.record && p.exact) return std::make_shared<const Form>(std::move(F));
  return ledger_copy(static_cast<const Form&>(F), p);
}

}  // namespace regatta::operators::affine
