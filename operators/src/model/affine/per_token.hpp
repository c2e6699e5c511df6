#pragma once
// A step applied to each token on its own, on a copy of the token's rows that keeps only the columns they
// read (used by the attention and MLP blocks; AffineOptions::compact_columns).
#include <algorithm>
#include <memory>
#include <vector>

#include "form.hpp"
#include "products.hpp"

namespace regatta::operators::affine {

/// Results of a step applied to each token on its own (per_token): per token, its forms in its own
/// columns, and the column of the whole pass that each of those columns is.
struct PerToken {
  std::vector<std::vector<Form>> results;   ///< [token][k]
  std::vector<std::vector<Index>> columns;  ///< [token][own column]

  /// Form k of the tokens `tokens`, stacked in that order, in the pass's columns.
  Form stacked(std::size_t k, const std::vector<Index>& tokens) const {
    Index N = 0, K = 0;
    for (Index t : tokens) {
      const Form& r = results[std::size_t(t)][k];
      N += r.size();
      if (r.A.cols() > 0) K = std::max(K, columns[std::size_t(t)][std::size_t(r.A.cols() - 1)] + 1);
    }
    Form out{Vector<double>(N), Matrix<double>::Zero(N, K), Vector<double>(N)};
    Index row = 0;
    for (Index t : tokens) {
      const Form& r = results[std::size_t(t)][k];
      const auto& cols = columns[std::size_t(t)];
      out.c.segment(row, r.size()) = r.c;
      out.s.segment(row, r.size()) = r.s;
      for (Index e = 0; e < r.size(); ++e, ++row)
        for (Index j = 0; j < r.A.cols(); ++j) out.A(row, cols[std::size_t(j)]) = r.A(e, j);
    }
    return out;
  }
  /// Form k of every token.
  Form stacked(std::size_t k) const {
    std::vector<Index> all(results.size());
    for (std::size_t t = 0; t < all.size(); ++t) all[t] = Index(t);
    return stacked(k, all);
  }
};

/// step(i, row, pass) applied to each token i of the n tokens (rows of d entries) of X on its own, for a step
/// that treats each token on its own (a norm, an MLP, the projections of attention): the same forms as the
/// step over all tokens at once, up to the numbering of the fresh symbols. After an attention layer each
/// token's rows read few of X's columns: the input symbols and the layer's shared ones, but of the symbols
/// private to one token (a score's or a softmax weight's remainder) only its own, about a fifth of the
/// columns of the digits ViT's first block. So the step runs on a copy that keeps only those columns, in a
/// pass of its own (columns renumbered: the input symbols first and unmoved, then the others in order, then
/// the step's fresh symbols), and its ledger groups move back to the pass's columns (their copies of forms
/// keep the token's numbering, which fresh_bound never compares with another group's). The fresh symbols
/// take columns of their own after X's. The rounding bounds count the terms of the copy's sums: the same
/// nonzero terms.
template <class Step>
PerToken per_token(const Form& X, Index n, Index d, const Pass& p, Step step) {
  const Index K = X.A.cols(), q = std::min(p.q, K);
  PerToken out;
  for (Index i = 0; i < n; ++i) {
    const auto rows = X.A.middleRows(i * d, d);
    // The columns the token's rows read, one row at a time (A is row-major: a column-wise reduction
    // strides through memory; this sweep is contiguous).
    std::vector<char> used(static_cast<std::size_t>(K), 0);
    if (p.compact)
      for (Index r = 0; r < d; ++r) {
        const double* a = &X.A(i * d + r, 0);
        for (Index j = q; j < K; ++j) used[std::size_t(j)] |= char(a[j] != 0);
      }
    std::vector<Index> cols;
    for (Index j = 0; j < K; ++j)
      if (j < q || used[std::size_t(j)] || !p.compact) cols.push_back(j);
    Form row{X.c.segment(i * d, d), Matrix<double>(d, Index(cols.size())), X.s.segment(i * d, d)};
    for (Index r = 0; r < d; ++r)
      for (std::size_t k = 0; k < cols.size(); ++k) row.A(r, Index(k)) = rows(r, cols[k]);
    Pass pass;
    pass.q = p.q;
    pass.box = p.box;
    pass.next = Index(cols.size());
    pass.poll = p.poll;
    pass.record = p.record;
    pass.exact = p.exact;
    pass.compact = p.compact;
    std::vector<ProductGroup> ledger;
    if (p.ledger) pass.ledger = &ledger;
    out.results.push_back(step(i, row, pass));
    const Index own = Index(cols.size());
    for (Index j = own; j < pass.next; ++j) cols.push_back(p.next + (j - own));
    p.next += pass.next - own;
    for (ProductGroup& group : ledger) {
      for (auto& o : group.outputs) o.column = cols[std::size_t(o.column)];
      p.ledger->push_back(std::move(group));
    }
    out.columns.push_back(std::move(cols));
  }
  return out;
}

}  // namespace regatta::operators::affine
