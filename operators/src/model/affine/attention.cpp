// Multi-head dot-product attention on affine forms (attention.hpp): projections, scores, softmax weights
// as exp times the reciprocal of their row sum, the weighted values, the output map and the residual.
#include "attention.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include "linear.hpp"
#include "nonlinear.hpp"
#include "norms.hpp"
#include "per_token.hpp"
#include "products.hpp"

namespace regatta::operators::affine {

/// (X + MHA(N(X))) at the query tokens `queries` (N the pre-norm or the identity; keys and values from all
/// n tokens). Each head draws its fresh symbols from the same columns while it is computed (heads do not
/// meet before their concatenation), and the concatenation moves them apart, so a head's forms are not
/// widened by the other heads' symbols.
Form attention_block(const Form& X, Index n, const std::vector<Index>& queries, const AttentionLayer& L,
                     Prenorm prenorm, bool causal, const Pass& p) {
  const Index d = L.d, hd = L.head_dim, dv = L.value_dim, nq = Index(queries.size());
  // Per token (tokens do not meet before the scores: per_token): the pre-norm with its product remainder as
  // one fresh symbol per entry (materialise), then every head's keys and values, and the queries when every
  // token is queried, in one product per token (linear_parts). In the last block every map reads the norm
  // through one deviation product per output instead (project_parts: twice the symbols, kept whole up to
  // the margin's ledger): +2.2 % radii on the first 16 digits images at about the same time per test; in
  // block 0 it gained 0.9 % more for 27 % more time. The pooled token (the queries of a subset, with a
  // pre-norm) reads the norm through project, from the norm's Rows; without a pre-norm a subset's queries
  // are its rows' products too.
  const bool pooled = prenorm != Prenorm::none && nq < n;
  std::vector<Map> maps, query_maps;
  auto add_maps = [&](std::vector<Map>& to, const std::vector<Matrix<double>>& W,
                      const std::vector<Vector<double>>& b) {
    for (std::size_t h = 0; h < std::size_t(L.heads); ++h) to.push_back(Map{&W[h], bias_or_empty(b, h)});
  };
  if (nq == n) add_maps(maps, L.WQ, L.bQ);
  add_maps(maps, L.WK, L.bK);
  add_maps(maps, L.WV, L.bV);
  if (nq < n && !pooled) add_maps(query_maps, L.WQ, L.bQ);
  std::vector<char> queried(static_cast<std::size_t>(n), 0);
  for (Index a : queries) queried[std::size_t(a)] = 1;
  const PerToken tokens = per_token(X, n, d, p, [&](Index i, const Form& row, const Pass& pass) {
    std::optional<Rows> N;
    Form normed;
    const bool through = prenorm != Prenorm::none && pass.exact;
    if (prenorm != Prenorm::none) {
      N = normed_rows(row, 1, d, prenorm, L.norm_gamma, L.norm_beta, L.norm_eps, pass);
      if (!through) normed = materialise(*N, d, pass);
    }
    const Form& H = N ? normed : row;
    std::vector<Form> out = through ? project_parts(*N, 1, maps, pass) : linear_parts(H, 1, maps, pass);
    if (nq < n && queried[std::size_t(i)]) {
      if (pooled) {
        out.push_back(std::move(N->linear));
        out.push_back(std::move(N->scaled));
        out.push_back(std::move(N->root));
      } else {
        for (Form& f : linear_parts(H, 1, query_maps, pass)) out.push_back(std::move(f));
      }
    }
    return out;
  });
  std::vector<Form> parts;
  for (std::size_t k = 0; k < maps.size(); ++k) parts.push_back(tokens.stacked(k));
  for (std::size_t k = 0; k < query_maps.size(); ++k)
    parts.push_back(tokens.stacked(maps.size() + k, queries));
  const std::optional<Rows> Nq = pooled ? std::optional<Rows>(Rows{tokens.stacked(maps.size(), queries),
                                                                   tokens.stacked(maps.size() + 1, queries),
                                                                   tokens.stacked(maps.size() + 2, queries)})
                                        : std::nullopt;
  // parts: [queries,] keys, values by head (queries first: all tokens queried, or a subset's, moved there)
  if (!query_maps.empty()) std::rotate(parts.begin(), parts.end() - L.heads, parts.end());
  const std::size_t first_key = pooled ? 0 : std::size_t(L.heads),
                    first_value = first_key + std::size_t(L.heads);
  auto queries_of = [&](std::size_t h) {
    return pooled ? project(*Nq, nq, L.WQ[h], bias_or_empty(L.bQ, h), p) : std::move(parts[h]);
  };
  auto allowed = [&](Index a, Index j) { return !causal || j <= queries[std::size_t(a)]; };
  const I scale = I(1.0) / sqrt(I(double(hd)));
  const Index shared = p.next;
  std::vector<Form> heads;
  std::vector<std::size_t> recorded;  // the ledger's groups of head h: [recorded[h], recorded[h + 1])
  recorded.push_back(p.ledger ? p.ledger->size() : 0);
  const bool recording = p.ledger && p.record;
  for (std::size_t h = 0; h < std::size_t(L.heads); ++h) {
    p.tick();
    p.next = shared;
    Form Q = rotated(queries_of(h), queries, L, p);
    Form Kf = rotated(std::move(parts[first_key + h]), n, L, p);
    Form V = std::move(parts[first_value + h]);
    // Scores of the allowed pairs (a query a, a key j), in row-major order.
    std::vector<Index> kept, row_of;
    std::vector<std::vector<Index>> row_members(static_cast<std::size_t>(nq));
    for (Index a = 0; a < nq; ++a)
      for (Index j = 0; j < n; ++j)
        if (allowed(a, j)) {
          row_members[std::size_t(a)].push_back(Index(kept.size()));
          row_of.push_back(a);
          kept.push_back(a * n + j);
        }
    Remainders products;
    Index first = p.next;
    const Form scores = matmul(
        Q, Kf, nq, hd, n, [hd](Index a, Index t) { return a * hd + t; },
        [hd](Index t, Index j) { return j * hd + t; }, [](Index, Index) { return true; }, p, false,
        &products);
    // Every pair kept (not causal): kept[e] = e, and S is the scores themselves, not a copy.
    const bool every = Index(kept.size()) == nq * n;
    const Form gathered = every ? Form() : gather(scores, kept);
    const Form& S = every ? scores : gathered;
    // Outside the last block each score's remainder symbol is read by that score alone, and then by its
    // exponential alone: the exponential's remainder joins it (nonlinear's `own`), one column per score
    // instead of two. The last block keeps them apart for the ledger.
    const bool join = !p.exact;
    std::vector<Index> own(kept.size(), -1);
    if (join) {
      std::vector<Index> column(static_cast<std::size_t>(nq * n), -1);
      Index next = first;
      for (Index o = 0; o < nq * n; ++o)
        if (products.beta(o) > 0) column[std::size_t(o)] = next++;
      for (std::size_t e = 0; e < kept.size(); ++e) {
        own[e] = column[std::size_t(kept[e])];
        if (own[e] >= 0) check_column(S, Index(e), own[e], products.beta(kept[e]));
      }
    }
    if (recording && !join)
      record(p, scores, ledger_copy(std::move(Q), p), ledger_copy(std::move(Kf), p), products, first, n,
             false, [n, hd](Index o) {
               std::vector<std::pair<Index, Index>> pairs;
               for (Index t = 0; t < hd; ++t) pairs.emplace_back((o / n) * hd + t, (o % n) * hd + t);
               return pairs;
             });
    // Shift each row by its largest centre (softmax is invariant), scale by 1/√d_h.
    std::vector<I> shift(kept.size());
    {
      std::vector<double> top(std::size_t(nq), -std::numeric_limits<double>::infinity());
      for (std::size_t e = 0; e < kept.size(); ++e)
        top[std::size_t(row_of[e])] = std::max(top[std::size_t(row_of[e])], mid(I(S.c(Index(e))) * scale));
      for (std::size_t e = 0; e < kept.size(); ++e) shift[e] = I(-top[std::size_t(row_of[e])]);
    }
    const Form E = nonlinear(affine_entries(S, scale, shift, p), Function::exp, p, 0, join ? &own : nullptr);
    const Form R = nonlinear(sum_groups(E, row_members, p), Function::reciprocal, p);
    first = p.next;
    Form P = product(E, R, p, row_of, recording ? &products : nullptr);
    if (recording)  // entry e of P: E_e times the root of its row, grouped by row (R's entry)
      record(p, P, ledger_copy(R, p), ledger_copy(E, p), products, first, Index(kept.size()), false,
             [&row_of](Index e) {
               return std::vector<std::pair<Index, Index>>{{row_of[std::size_t(e)], e}};
             });
    // O_(a,t) = Σ_j P_aj V_jt over the allowed j (P stored over the kept pairs).
    std::vector<Index> position(std::size_t(nq * n), -1);
    for (std::size_t e = 0; e < kept.size(); ++e) position[std::size_t(kept[e])] = Index(e);
    first = p.next;
    heads.push_back(matmul(
        P, V, nq, n, dv, [&position, n](Index a, Index j) { return position[std::size_t(a * n + j)]; },
        [dv](Index j, Index t) { return j * dv + t; }, allowed, p, true, recording ? &products : nullptr));
    if (recording)  // one group per query: its row of P meets the values
      record(p, heads.back(), ledger_copy(std::move(P), p), ledger_copy(std::move(V), p), products, first, dv,
             true, [&, dv, n](Index o) {
               std::vector<std::pair<Index, Index>> pairs;
               for (Index j = 0; j < n; ++j)
                 if (allowed(o / dv, j))
                   pairs.emplace_back(position[std::size_t((o / dv) * n + j)], j * dv + o % dv);
               return pairs;
             });
    recorded.push_back(p.ledger ? p.ledger->size() : 0);
  }
  // Concatenate the heads per token, entry (a, h·dv + t); head h's own columns move to [offset, ...).
  Index K = shared;
  for (const Form& f : heads) K += std::max<Index>(0, f.A.cols() - shared);
  const Index width = Index(heads.size()) * dv;
  Form O{Vector<double>(nq * width), Matrix<double>::Zero(nq * width, K), Vector<double>(nq * width)};
  Index offset = shared;
  for (std::size_t h = 0; h < heads.size(); ++h) {
    const Index own = std::max<Index>(0, heads[h].A.cols() - shared), common = heads[h].A.cols() - own;
    for (Index a = 0; a < nq; ++a)
      for (Index t = 0; t < dv; ++t) {
        const Index to = a * width + Index(h) * dv + t, from = a * dv + t;
        O.c(to) = heads[h].c(from);
        O.A.row(to).head(common) = heads[h].A.row(from).head(common);
        O.A.row(to).segment(offset, own) = heads[h].A.row(from).tail(own);
        O.s(to) = heads[h].s(from);
      }
    if (p.ledger)
      for (std::size_t g = recorded[h]; g < recorded[h + 1]; ++g) {
        ProductGroup& group = (*p.ledger)[g];
        for (auto& out : group.outputs) {
          if (out.column >= shared) out.column += offset - shared;
          // the values' products joined this head's output: entry (a, t) is O's row (a, h·d_v + t)
          if (group.stochastic)
            check_column(O, (out.entry / dv) * width + Index(h) * dv + out.entry % dv, out.column, out.beta);
        }
      }
    offset += own;
  }
  p.next = K;
  // Not `combine(nq == n ? X : keep_tokens(…), …)`: the conditional expression would copy X.
  if (nq == n) return combine(X, linear_rows(O, nq, L.WO, L.bO, p), +1, p);
  return combine(keep_tokens(X, queries, d), linear_rows(O, nq, L.WO, L.bO, p), +1, p);
}

}  // namespace regatta::operators::affine
