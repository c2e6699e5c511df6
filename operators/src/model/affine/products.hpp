#pragma once
// Products of two affine forms (products.cpp): the part linear in the symbols plus the deviation product
// (x − c_x)(y − c_y), bounded over the ranges and given a fresh symbol; and the ledger of those symbols that
// the margin may bound together (fresh_bound). The templates (record, matmul) live here.
#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "form.hpp"

namespace regatta::operators::affine {

/// c_x·G + c_y·F − c_x·c_y + shift entrywise: the part of F ∘ G linear in the symbols (products.cpp).
Form linear_product(const Form& F, const Form& G, const Pass& p, const std::vector<Index>& map,
                    const std::vector<I>& shift, Index fresh);

/// Remainders of products entrywise, as enclosures' midpoints (joining the centres) and half-widths (fresh
/// symbols).
struct Remainders {
  std::vector<I> shift;
  Vector<double> beta;
};

/// F ∘ G entrywise (entry i meets G's row map[i] when map is given, else G_i). `report` (when given) receives
/// the remainders, as matmul's `quads`.
Form product(const Form& F, const Form& G, const Pass& p, const std::vector<Index>& map = {},
             Remainders* report = nullptr);

/// An enclosure of Σ_j (F_{e_j} − c)(G_{f_j} − c′) over the pairs (e_j, f_j), one deviation product each;
/// `stochastic`: the F_{e_j} sum to exactly 1 (a row of attention weights), which allows a centred form
/// (products.cpp).
I deviation_sum(const Form& F, const Form& G, const std::vector<std::pair<Index, Index>>& pairs,
                const Pass& p, bool stochastic);

/// Fresh symbols of one step that stand for sums of deviation products: output t is the symbol in column
/// `column`, with β_t η_t = Σ_{(e,f) ∈ pairs_t} (F_e − c_F)(G_f − c_G) − shift_t (shift_t joined the centre).
/// A row a of coefficients meets Σ_t a_t η_t = Σ_t w_t·(Σ_{pairs_t} …) − Σ_t w_t·shift_t + Σ_t (a_t − w_t
/// β_t) η_t for any w (w_t ≈ a_t/β_t), and the weighted sum regroups by F's entries: Σ_e (F_e − c_F)·(Σ w_t
/// (G_f − c_G)), one deviation product per entry of F (deviation_sum; `stochastic` when F's entries are one
/// row of attention weights). Against Σ_t |a_t|, the cancellations of the combination over t are kept.
/// `exact_rest`: the combinations' other symbols are summed exactly (else bounded by the triangle
/// inequality, which is cheaper).
struct ProductGroup {
  struct Output {
    Index entry, column;  ///< the entry of the step's result that the symbol joined, and its column
    double beta;
    I shift;
    std::vector<std::pair<Index, Index>> pairs;
  };
  std::shared_ptr<const Form> F, G;
  bool stochastic = false, exact_rest = false;
  std::vector<Output> outputs;
};

/// An upper bound of −Σ_{j≥q} a_j η_j over the symbols beyond the input ones (products.cpp).
double fresh_bound(const Eigen::Matrix<double, 1, Eigen::Dynamic>& a, Index q, const Pass& p, bool ledger);
/// Checks that entry o of `out` reads the fresh symbol in `column` with coefficient β (std::logic_error
/// otherwise).
void check_column(const Form& out, Index o, Index column, double beta);
/// A shared copy of F for the ledger (null when the pass does not record).
std::shared_ptr<const Form> ledger_copy(const Form& F, const Pass& p);
std::shared_ptr<const Form> ledger_copy(Form&& F, const Pass& p);

/// Records in the ledger (when the pass records) the fresh symbols that one step gave its remainders r:
/// add_fresh put them in `out` from column `first` on, in entry order. Entries [g·per_group, (g +
/// 1)·per_group) form group g, and entry o stands for the sum of the deviation products of the pairs
/// pairs_of(o) of F and G.
template <class PairsOf>
void record(const Pass& p, const Form& out, const std::shared_ptr<const Form>& F,
            const std::shared_ptr<const Form>& G, const Remainders& r, Index first, Index per_group,
            bool stochastic, PairsOf pairs_of) {
  if (!p.ledger || !p.record) return;
  Index column = first;
  const Index N = r.beta.size();
  for (Index start = 0; start < N; start += per_group) {
    ProductGroup group{F, G, stochastic, p.exact, {}};
    for (Index o = start; o < std::min(N, start + per_group); ++o)
      if (r.beta(o) > 0) {
        check_column(out, o, column, r.beta(o));
        group.outputs.push_back({o, column++, r.beta(o), r.shift[std::size_t(o)], pairs_of(o)});
      }
    if (!group.outputs.empty()) p.ledger->push_back(std::move(group));
  }
}

/// out_(i,k) = Σ_{j < inner, allowed(i, j)} F_{a(i,j)}·G_{b(j,k)} for i < n, k < m_out (a matrix product of
/// two forms; `allowed` masks terms of the inner sum). `stochastic`: each row of F sums to exactly 1 over the
/// allowed j (attention weights), so out_(i,k) = v + Σ_j F_{a(i,j)}·(G_{b(j,k)} − v) for any constant v; with
/// v the F-weighted mean of G's centres, the coefficient of F's deviation is c_G − v instead of c_G, which
/// removes from the output the part of F's symbols that the constraint cancels anyway. `quads` (when given)
/// receives the sums of the deviations' products (their midpoints join the centres, their half-widths are
/// the fresh symbols, in entry order).
template <class Left, class Right, class Allowed>
Form matmul(const Form& F, const Form& G, Index n, Index inner, Index m_out, Left a, Right b, Allowed allowed,
            const Pass& p, bool stochastic = false, Remainders* quads = nullptr) {
  const Index KF = F.A.cols(), KG = G.A.cols(), K = std::max(KF, KG);
  measure(F, p, true);
  measure(G, p, true);
  const Vector<double>&r1 = F.sums, &r2 = G.sums;
  Vector<double> beta(n * m_out);
  std::vector<I> shift(static_cast<std::size_t>(n * m_out));
  std::vector<std::pair<Index, Index>> pairs;
  for (Index i = 0; i < n; ++i)
    for (Index k = 0; k < m_out; ++k) {
      pairs.clear();
      for (Index j = 0; j < inner; ++j)
        if (allowed(i, j)) pairs.emplace_back(a(i, j), b(j, k));
      // Σ_j of the deviations' products: its midpoint joins the centre, the rest is fresh
      const I quad = deviation_sum(F, G, pairs, p, stochastic);
      const double m = mid(quad);
      shift[std::size_t(i * m_out + k)] = I(m);
      beta(i * m_out + k) = halfwidth(quad, m);
    }
  Form out{Vector<double>(n * m_out), coefficients(n * m_out, K, fresh_count(beta), p),
           Vector<double>(n * m_out)};
  out.A.leftCols(K).setZero();
  // The terms of each output's coefficient row, (F's entry, G's entry, c_F, g) in the order of j: the rows
  // are accumulated below in blocks of columns, every coefficient through the same operations in the same
  // order as one row at a time, while the blocks of F's and G's rows that an output reads stay in cache.
  // Within a block only the runs of F's and G's rows that hold nonzero coefficients are added
  // (for_each_run: the terms skipped are c·0, which change no coefficient).
  struct Term {
    Index e, f;
    double cf, g;
  };
  std::vector<Term> terms;
  std::vector<Index> first_term(static_cast<std::size_t>(n * m_out + 1), 0);
  for (Index i = 0; i < n; ++i)
    for (Index k = 0; k < m_out; ++k) {
      const Index o = i * m_out + k;
      double v = 0;
      if (stochastic) {
        double weight = 0;
        for (Index j = 0; j < inner; ++j)
          if (allowed(i, j)) {
            v += F.c(a(i, j)) * G.c(b(j, k));
            weight += F.c(a(i, j));
          }
        v = weight > 0 && std::isfinite(v / weight) ? v / weight : 0;
      }
      I centre(v), s(0.0), magnitude(0.0);
      double count = 0;
      for (Index j = 0; j < inner; ++j) {
        if (!allowed(i, j)) continue;
        const Index e = a(i, j), f = b(j, k);
        // g = c_G − v rounded; (c_G − v − g)·F_e is at most its rounding times |c_F| + range.
        const I exact = I(G.c(f)) - I(v);
        const double g = mid(exact);
        terms.push_back(Term{e, f, F.c(e), g});
        centre += I(F.c(e)) * I(g);
        const I a1(std::fabs(F.c(e))), a2(std::fabs(g));
        s += a1 * I(G.s(f)) + a2 * I(F.s(e));
        if (v != 0) s += I(halfwidth(exact, g)) * (a1 + I(F.ranges(e)));
        magnitude += a1 * I(r2(f)) + a2 * I(r1(e));
        count += 2;
      }
      first_term[std::size_t(o + 1)] = Index(terms.size());
      centre += shift[std::size_t(o)];
      out.c(o) = mid(centre);
      out.s(o) = hi(s + I(gamma_of(count)) * magnitude + I(count * double(K)) * I(underflow_unit) +
                    I(halfwidth(centre, out.c(o))));
    }
  constexpr Index block = 512;
  for (Index c0 = 0; c0 < K; c0 += block) {
    const Index wG = std::clamp<Index>(KG - c0, 0, block), wF = std::clamp<Index>(KF - c0, 0, block);
    for (Index o = 0; o < n * m_out; ++o) {
      auto row = out.A.row(o);
      for (Index t = first_term[std::size_t(o)]; t < first_term[std::size_t(o + 1)]; ++t) {
        const Term& term = terms[std::size_t(t)];
        if (wG > 0)
          for_each_run(G, term.f, c0, c0 + wG, [&](Index j, Index w) {
            row.segment(j, w) += term.cf * G.A.row(term.f).segment(j, w);
          });
        if (wF > 0)
          for_each_run(F, term.e, c0, c0 + wF, [&](Index j, Index w) {
            row.segment(j, w) += term.g * F.A.row(term.e).segment(j, w);
          });
      }
    }
  }
  add_fresh(out, beta, p);
  if (quads) *quads = Remainders{std::move(shift), std::move(beta)};
  return out;
}

}  // namespace regatta::operators::affine
