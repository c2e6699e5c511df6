// Linear maps of affine forms (linear.hpp): per-token affine maps, sums of entries, the rotary embedding
// and row selections. They act on the symbols exactly; only rounding enters the slack (docs/numerics.md).
#include "linear.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "../../rotary.hpp"

namespace regatta::operators::affine {

/// Rows of n tokens × din features (entry i·din + f) mapped by y = x·W_k + b_k per token, for several maps
/// of the same rows at once: one form per map (entry i·dout_k + o). The maps' columns stand side by side in
/// one product per token, so that the token's coefficients are packed for the product once, not once per map
/// (a head's projection is only d/h outputs wide, and packing then costs as much as the product).
/// `fresh`: room in each form for that many symbols a caller adds next.
std::vector<Form> linear_parts(const Form& F, Index n, const std::vector<Map>& maps, const Pass& p,
                               Index fresh) {
  const Index din = maps.front().W->rows(), K = F.A.cols();
  Index dout = 0;
  for (const Map& m : maps) dout += m.W->cols();
  Matrix<double> W(din, dout);
  Vector<double> b = Vector<double>::Zero(dout);  // an absent bias: 0, which changes no sum and no bound
  std::vector<Index> offset;
  for (const Map& m : maps) {
    if (m.W->rows() != din) throw std::logic_error("linear_parts: maps of different input widths");
    offset.push_back(offset.empty() ? 0 : offset.back() + maps[offset.size() - 1].W->cols());
    W.middleCols(offset.back(), m.W->cols()) = *m.W;
    if (m.b.size() != 0) b.segment(offset.back(), m.W->cols()) = m.b;
  }
  const Matrix<double> Wt = W.transpose(), absWt = Wt.cwiseAbs();
  const Vector<double>& rs = row_sums(F, p);
  const double g = gamma_of(double(din + 1));
  const SumConstants terms = sum_constants(double(din));
  const I tiny = I(double(K + 2)) * I(double(din + 1)) * I(underflow_unit);
  std::vector<Form> out;
  for (const Map& m : maps) {
    const Index w = m.W->cols();
    out.push_back(Form{Vector<double>(n * w), coefficients(n * w, K, fresh, p), Vector<double>(n * w)});
  }
  Matrix<double> product(maps.size() > 1 ? dout : 0, K);
  Vector<double> v(din);
  for (Index i = 0; i < n; ++i) {
    if (maps.size() == 1) {
      out[0].A.middleRows(i * dout, dout).leftCols(K).noalias() = Wt * F.A.middleRows(i * din, din);
    } else {
      product.noalias() = Wt * F.A.middleRows(i * din, din);
      for (std::size_t k = 0; k < maps.size(); ++k) {
        const Index w = maps[k].W->cols();
        out[k].A.middleRows(i * w, w).leftCols(K) = product.middleRows(offset[k], w);
      }
    }
    const Vector<double> c = Wt * F.c.segment(i * din, din) + b;
    // Each computed entry is a dot product of at most din + 1 terms: error ≤ γ·Σ|terms| + (din + 1)·η.
    for (Index f = 0; f < din; ++f)
      v(f) = hi(I(F.s(i * din + f)) + I(g) * (I(std::fabs(F.c(i * din + f))) + I(rs(i * din + f))));
    const Vector<double> t = absWt * v;
    for (std::size_t k = 0; k < maps.size(); ++k) {
      const Index w = maps[k].W->cols();
      for (Index o = 0; o < w; ++o) {
        const Index all = offset[k] + o;
        I s = I(sum_up(t(all), terms)) + tiny;
        if (b(all) != 0) s += I(g) * I(std::fabs(b(all)));
        out[k].c(i * w + o) = c(all);
        out[k].s(i * w + o) = hi(s);
      }
    }
  }
  return out;
}

/// Rows of n tokens × W.rows() features (entry i·din + f) mapped by y = x·W + b per token.
/// `fresh`: room for that many symbols a caller adds next.
Form linear_rows(const Form& F, Index n, const Matrix<double>& W, const Vector<double>& b, const Pass& p,
                 Index fresh) {
  return std::move(linear_parts(F, n, {Map{&W, b}}, p, fresh).front());
}

/// out_g = Σ_{e ∈ groups[g]} F_e.
Form sum_groups(const Form& F, const std::vector<std::vector<Index>>& groups, const Pass& p) {
  const Index K = F.A.cols(), N = Index(groups.size());
  const Vector<double>& rs = row_sums(F, p);
  Form out{Vector<double>(N), Matrix<double>::Zero(N, K), Vector<double>(N)};
  for (Index g = 0; g < N; ++g) {
    const auto& members = groups[std::size_t(g)];
    const double gm = gamma_of(double(members.size()));
    I centre(0.0), s(0.0), magnitude(0.0);
    for (Index e : members) {
      out.A.row(g) += F.A.row(e);
      centre += I(F.c(e));
      s += I(F.s(e));
      magnitude += I(rs(e));
    }
    out.c(g) = mid(centre);
    out.s(g) = hi(s + I(gm) * magnitude + I(double(K) * double(members.size())) * I(underflow_unit) +
                  I(halfwidth(centre, out.c(g))));
  }
  return out;
}

namespace {

/// Rows of one head's queries or keys (entry t·d_h + f; row t is the token at positions[t]) rotated by the
/// layer's rotary embedding (layer.hpp): in each plane (f, f + d_h/2), y_f = C·x_f − S·x_{f+d_h/2} and
/// y_{f+d_h/2} = C·x_{f+d_h/2} + S·x_f with C ∋ cos φ, S ∋ sin φ the interval64 tables of rotary.hpp. A fixed
/// linear map of each row, so it acts on the symbols exactly (no fresh symbol): coefficients c·A_f ± s·A_g
/// with c, s the midpoints of C and S. Slack: |c|·s_f + |s|·s_g, the rounding of the two products and their
/// sum (γ₂·(|c|·‖A_f‖₁ + |s|·‖A_g‖₁) + 2K·η), the centre's enclosure (C·c_f ± S·c_g in interval64), and
/// the tables' width |C − c|·ρ_f + |S − s|·ρ_g with ρ the deviations' ranges (docs/numerics.md).
Form rotate_rows(const Form& F, const std::vector<Index>& positions, Index hd, const Rotary& rotary,
                 const Pass& p) {
  const Index half = hd / 2, K = F.A.cols();
  const Index count = *std::max_element(positions.begin(), positions.end()) + 1;
  const detail::RotaryTables<I> tables = detail::rotary_tables<I>(rotary, count, int(hd));
  const Vector<double>&rs = row_sums(F, p), &rad = radius(F, p);
  const I g2(gamma_of(2));
  Form out{Vector<double>(F.size()), Matrix<double>(F.size(), K), Vector<double>(F.size())};
  for (std::size_t t = 0; t < positions.size(); ++t)
    for (Index f = 0; f < half; ++f) {
      const I C = tables.cos(positions[t], f), S = tables.sin(positions[t], f);
      const double c = mid(C), s = mid(S);
      const Index first = Index(t) * hd + f, second = first + half;
      for (const auto& [to, other, sign] :
           {std::tuple{first, second, -1.0}, std::tuple{second, first, 1.0}}) {
        const I centre = C * I(F.c(to)) + I(sign) * S * I(F.c(other));
        out.c(to) = mid(centre);
        out.A.row(to) = c * F.A.row(to) + (sign * s) * F.A.row(other);
        const I ac(std::fabs(c)), as(std::fabs(s));
        out.s(to) = hi(ac * I(F.s(to)) + as * I(F.s(other)) + g2 * (ac * I(rs(to)) + as * I(rs(other))) +
                       I(2.0 * double(K)) * I(underflow_unit) + I(halfwidth(centre, out.c(to))) +
                       I(halfwidth(C, c)) * I(rad(to)) + I(halfwidth(S, s)) * I(rad(other)));
      }
    }
  return out;
}

}  // namespace

/// F (rows × d_h) rotated as the tokens `positions` when the layer has rotary embeddings, else F.
Form rotated(Form F, const std::vector<Index>& positions, const AttentionLayer& L, const Pass& p) {
  // Not `rotary ? rotate_rows(…) : F`: a conditional expression would copy F instead of moving it.
  if (!L.rotary) return F;
  return rotate_rows(F, positions, L.head_dim, *L.rotary, p);
}
/// The same for the rows 0..n−1 (keys: every token of the context).
Form rotated(Form F, Index n, const AttentionLayer& L, const Pass& p) {
  if (!L.rotary) return F;
  std::vector<Index> positions(static_cast<std::size_t>(n));
  for (Index i = 0; i < n; ++i) positions[std::size_t(i)] = i;
  return rotated(std::move(F), positions, L, p);
}

Vector<double> bias_or_empty(const std::vector<Vector<double>>& b, std::size_t h) {
  return b.empty() ? Vector<double>() : b[h];
}

/// The rows `rows` of n tokens × d features (row-major entries).
Form keep_tokens(const Form& X, const std::vector<Index>& rows, Index d) {
  std::vector<Index> idx;
  for (Index i : rows)
    for (Index f = 0; f < d; ++f) idx.push_back(i * d + f);
  return gather(X, idx);
}

}  // namespace regatta::operators::affine
