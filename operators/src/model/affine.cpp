// Affine forms (zonotopes) through a whole Model over an ℓ₂ ball (model_affine.hpp has the method,
// docs/models.md the argument and docs/numerics.md the rounding bounds).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <numbers>
#include <optional>
#include <stdexcept>
#include <vector>

#include <regatta/core/interval64.hpp>
#include <regatta/core/rounding.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/model_affine.hpp>
#include <tuple>

#include "../rotary.hpp"

namespace regatta::operators {
namespace {

using I = interval64;
using Index = Eigen::Index;

constexpr double gelu_curvature = 0.8;   // |GELU″(x)| = φ(x)|2 − x²| ≤ 2φ(0) = 0.7979…
constexpr double tanh_curvature = 0.77;  // |tanh″(x)| = 2|tanh x|(1 − tanh² x) ≤ 4/(3√3) = 0.7698…
// |SiLU″(x)| ≤ 1/2: SiLU″ = s(1 − s)(2 − x·tanh(x/2)) with s = 1/(1 + e⁻ˣ), s(1 − s) = 1/(4cosh²(x/2)) ≤ 1/4
// and x·tanh(x/2) ≥ 0, so SiLU″ ≤ 1/2 (at x = 0); and −SiLU″ ≤ |x|/(4cosh²(x/2)) ≤ |x|/(4 + x²) ≤ 1/4.
constexpr double silu_curvature = 0.5;

/// Thrown inside a pass when a range is unbounded or a denominator's range reaches 0.
struct Vacuous {};

double hi(const I& v) {
  const double h = v.upper();
  if (!std::isfinite(h)) throw Vacuous{};
  return h;
}
double mid(const I& v) { return v.lower() / 2 + v.upper() / 2; }
/// max |v| over v (exact).
double magnitude_of(const I& v) { return std::max(std::fabs(v.lower()), std::fabs(v.upper())); }
/// max(v.upper − m, m − v.lower) rounded up: v ⊆ [m − w, m + w].
double halfwidth(const I& v, double m) { return hi(max(I(v.upper()) - I(m), I(m) - I(v.lower()))); }
/// γ_m = m·u/(1 − m·u), rounded up.
double gamma_of(double m) {
  const I mu = I(m) * I(unit_roundoff);
  return hi(mu / (I(1.0) - mu));
}
/// An upper bound of a sum s of m non-negative terms, each a product of at most two doubles, from its
/// binary64 value in any order: fl(s) ≥ (1 − γ_m)·s − m·η (Higham, Thm 3.5, with underflow).
double sum_up(double computed, double m) {
  if (!std::isfinite(computed)) throw Vacuous{};
  return hi((I(computed) + I(m) * I(underflow_unit)) / (I(1.0) - I(gamma_of(m))));
}

/// v ∈ c + Σ_{j<q} A_j ε_j + Σ_{j≥q} A_j η_j + [−s, s] for every entry (one row of A per entry).
struct Form {
  Vector<double> c;
  Matrix<double> A;
  Vector<double> s;
  /// Caches of row_sums() and radius(), filled when first asked for: a step that changes A or s after
  /// that calls forget().
  mutable Vector<double> sums, ranges, inputs;  ///< inputs: upper bounds of ‖a_{<q}‖₂

  Form() = default;
  Form(Vector<double> c_, Matrix<double> A_, Vector<double> s_)
      : c(std::move(c_)), A(std::move(A_)), s(std::move(s_)) {}
  Index size() const { return c.size(); }
  void forget() const {
    sums.resize(0);
    ranges.resize(0);
    inputs.resize(0);
  }
};

struct ProductGroup;

struct Pass {
  Index q = 0;  ///< the input symbols ε: columns [0, q) of every A
  /// Fresh symbols that stand for sums of deviation products, recorded for the margin (fresh_bound); null:
  /// not recorded.
  std::vector<ProductGroup>* ledger = nullptr;
  mutable bool record = false;  ///< whether the steps now computed record their products in the ledger
  mutable bool exact = false;   ///< ProductGroup::exact_rest for the groups recorded now
  bool compact = true;          ///< per_token keeps only the columns a token reads (else every column)
  /// The next unused column: every fresh symbol gets its own column for the whole pass (columns beyond a
  /// form's A are zeros), so two forms share a column exactly when they depend on the same symbol.
  mutable Index next = 0;
  std::function<void()> poll;
  void tick() const {
    if (poll) poll();
  }
};

void widen(Form& F, Index K) {
  if (F.A.cols() >= K) return;
  const Index old = F.A.cols();
  F.A.conservativeResize(Eigen::NoChange, K);
  F.A.rightCols(K - old).setZero();
}

/// Fills F's caches in one sweep over A: upper bounds of each row's Σ_j |a_j| and of its half-width
/// ‖a_{<q}‖₂ + ‖a_{≥q}‖₁ + s (zero columns added later change neither).
void measure(const Form& F, const Pass& p) {
  if (F.sums.size() == F.size() && F.ranges.size() == F.size()) return;
  const Index K = F.A.cols(), q = std::min(p.q, K);
  F.sums.resize(F.size());
  F.ranges.resize(F.size());
  F.inputs.resize(F.size());
  for (Index i = 0; i < F.size(); ++i) {
    const auto input = F.A.row(i).head(q);
    const double rest = F.A.row(i).tail(K - q).cwiseAbs().sum();
    F.sums(i) = sum_up(input.cwiseAbs().sum() + rest, double(K));
    F.inputs(i) = hi(sqrt(I(sum_up(input.squaredNorm(), double(q)))));
    F.ranges(i) = hi(I(F.inputs(i)) + I(sum_up(rest, double(K - q))) + I(F.s(i)));
  }
}

/// An enclosure of (x − c_x)(y − c_y) for entry e of F and entry f of G. With x − c_x = aᵀε + X′ and
/// y − c_y = bᵀε + Y′ (ε the input symbols, ‖ε‖₂ ≤ 1; X′, Y′ the rest, |X′| ≤ ρ_x, |Y′| ≤ ρ_y), the
/// product of the input parts is the quadratic form εᵀ(abᵀ + baᵀ)ε/2, whose values on the unit ball lie
/// between its extreme eigenvalues (a·b ∓ ‖a‖‖b‖)/2; the other three products are at most
/// ‖a‖ρ_y + ρ_x‖b‖ + ρ_xρ_y in magnitude. Against the product of the two ranges this halves the
/// input-input term.
I deviation_bound(double dot, double na, double nb, double rx, double ry, Index q) {
  // a·b in binary64: |error| ≤ γ_q·Σ|a_j b_j| + qη ≤ γ_q‖a‖‖b‖ + qη.
  const I error = I(gamma_of(double(q))) * I(na) * I(nb) + I(double(q)) * I(underflow_unit);
  const I ab = I(dot) + I::hull(-error.upper(), error.upper());
  const I quadratic = (ab + I::hull(-1.0, 1.0) * I(na) * I(nb)) / I(2.0);
  const I others = I(na) * I(ry) + I(rx) * I(nb) + I(rx) * I(ry);
  return quadratic + I::hull(-others.upper(), others.upper());
}
/// ρ = range − ‖a‖ of entry e of F (rounded up): the bound of its deviation's part beyond the input symbols.
double rest_of(const Form& F, Index e) { return std::max(0.0, (I(F.ranges(e)) - I(F.inputs(e))).upper()); }

I deviation_product(const Form& F, Index e, const Form& G, Index f, const Pass& p) {
  const Index q = std::min({p.q, F.A.cols(), G.A.cols()});
  const double dot = q > 0 ? F.A.row(e).head(q).dot(G.A.row(f).head(q)) : 0.0;
  return deviation_bound(dot, F.inputs(e), G.inputs(f), rest_of(F, e), rest_of(G, f), q);
}

/// Upper bounds of the row sums Σ_j |a_j|.
const Vector<double>& row_sums(const Form& F, const Pass& p) {
  measure(F, p);
  return F.sums;
}
/// Upper bounds of the half-widths ‖a_{<q}‖₂ + ‖a_{≥q}‖₁ + s of the ranges.
const Vector<double>& radius(const Form& F, const Pass& p) {
  measure(F, p);
  return F.ranges;
}

/// Coefficients of N entries that read columns [0, K), with zero columns up to p.next + fresh when a step
/// will add `fresh` symbols (add_fresh then writes them without moving the matrix).
Matrix<double> coefficients(Index N, Index K, Index fresh, const Pass& p) {
  const Index width = fresh > 0 ? std::max(K, p.next + fresh) : K;
  Matrix<double> A(N, width);
  A.rightCols(width - K).setZero();
  return A;
}

/// The rows `idx` of F (in that order).
Form gather(const Form& F, const std::vector<Index>& idx) {
  Form out{Vector<double>(Index(idx.size())), Matrix<double>(Index(idx.size()), F.A.cols()),
           Vector<double>(Index(idx.size()))};
  for (std::size_t t = 0; t < idx.size(); ++t) {
    out.c(Index(t)) = F.c(idx[t]);
    out.A.row(Index(t)) = F.A.row(idx[t]);
    out.s(Index(t)) = F.s(idx[t]);
  }
  return out;
}

/// Appends one fresh symbol per entry with a positive β (an upper bound of that entry's remainder).
void add_fresh(Form& F, const Vector<double>& beta, const Pass& p) {
  const Index fresh = Index((beta.array() > 0).count());
  Index col = p.next;
  p.next += fresh;
  widen(F, p.next);
  for (Index i = 0; i < F.size(); ++i)
    if (beta(i) > 0) F.A(i, col++) = beta(i);
  F.forget();
}

Index fresh_count(const Vector<double>& beta) { return Index((beta.array() > 0).count()); }

/// y = Λ·x + M entrywise (Λ, M intervals: exact values somewhere inside).
/// `fresh`: room for that many symbols a caller adds next.
Form affine_entries(const Form& F, const std::vector<I>& Lambda, const std::vector<I>& M, const Pass& p,
                    Index fresh = 0) {
  const Index N = F.size(), K = F.A.cols();
  const Vector<double>& rs = row_sums(F, p);
  bool wide = false;
  for (const I& l : Lambda) wide = wide || l.lower() != l.upper();
  const Vector<double>& rad = radius(F, p);
  Form out{Vector<double>(N), coefficients(N, K, fresh, p), Vector<double>(N)};
  for (Index i = 0; i < N; ++i) {
    const double lambda = mid(Lambda[std::size_t(i)]);
    const I centre = I(lambda) * I(F.c(i)) + M[std::size_t(i)];
    out.c(i) = mid(centre);
    out.A.row(i).head(K) = lambda * F.A.row(i);
    // |λ|·s, the rounding of λ·A (u per coefficient, η per underflow), the centre's enclosure, and
    // |Λ − λ|·|x| with |x| ≤ |c| + radius.
    I s = I(std::fabs(lambda)) * (I(F.s(i)) + I(unit_roundoff) * I(rs(i))) +
          I(double(K)) * I(underflow_unit) + I(halfwidth(centre, out.c(i)));
    if (wide) s += I(halfwidth(Lambda[std::size_t(i)], lambda)) * (I(std::fabs(F.c(i))) + I(rad(i)));
    out.s(i) = hi(s);
  }
  return out;
}

Form affine_entries(const Form& F, const I& lambda, const std::vector<I>& M, const Pass& p) {
  return affine_entries(F, std::vector<I>(std::size_t(F.size()), lambda), M, p);
}

/// The row of G that entry i of F meets: G_map[i] (map non-empty), else G_i.
Index row_of(const std::vector<Index>& map, Index i) { return map.empty() ? i : map[std::size_t(i)]; }

/// F + sign·G entrywise (sign ±1; entry i meets G's row map[i] when map is given).
Form combine(const Form& F, const Form& G, double sign, const Pass& p, const std::vector<Index>& map = {}) {
  const Index KF = F.A.cols(), KG = G.A.cols(), K = std::max(KF, KG), N = F.size();
  const Vector<double>&r1 = row_sums(F, p), &r2 = row_sums(G, p);
  Form out{Vector<double>(N), Matrix<double>(N, K), Vector<double>(N)};
  for (Index i = 0; i < N; ++i) {
    const Index g = row_of(map, i);
    out.A.row(i).head(KF) = F.A.row(i);
    out.A.row(i).tail(K - KF).setZero();
    out.A.row(i).head(KG) += sign * G.A.row(g);
  }
  for (Index i = 0; i < N; ++i) {
    const Index g = row_of(map, i);
    const I centre = I(F.c(i)) + I(sign) * I(G.c(g));
    out.c(i) = mid(centre);
    out.s(i) = hi(I(F.s(i)) + I(G.s(g)) + I(unit_roundoff) * (I(r1(i)) + I(r2(g))) +
                  I(double(K)) * I(underflow_unit) + I(halfwidth(centre, out.c(i))));
  }
  return out;
}

/// One affine map y = x·W + b of a token's features (b empty: 0).
struct Map {
  const Matrix<double>* W;
  Vector<double> b;
};

/// Rows of n tokens × din features (entry i·din + f) mapped by y = x·W_k + b_k per token, for several maps
/// of the same rows at once: one form per map (entry i·dout_k + o). The maps' columns stand side by side in
/// one product per token, so that the token's coefficients are packed for the product once, not once per map
/// (a head's projection is only d/h outputs wide, and packing then costs as much as the product).
/// `fresh`: room in each form for that many symbols a caller adds next.
std::vector<Form> linear_parts(const Form& F, Index n, const std::vector<Map>& maps, const Pass& p,
                               Index fresh = 0) {
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
        I s = I(sum_up(t(all), double(din))) + I(double(K + 2)) * I(double(din + 1)) * I(underflow_unit);
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
                 Index fresh = 0) {
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

/// c_x·G + c_y·F − c_x·c_y + shift entrywise (entry i meets G's row map[i] when map is given, else G_i): the
/// part of F ∘ G that is linear in the symbols, (x − c_x)(y − c_y) left out (its midpoint may come as
/// `shift`). `fresh`: room for that many symbols a caller adds next.
Form linear_product(const Form& F, const Form& G, const Pass& p, const std::vector<Index>& map,
                    const std::vector<I>& shift, Index fresh) {
  const Index KF = F.A.cols(), KG = G.A.cols(), K = std::max(KF, KG), N = F.size();
  const Vector<double>&r1 = row_sums(F, p), &r2 = row_sums(G, p);
  const double g2 = gamma_of(2);
  Form out{Vector<double>(N), coefficients(N, K, fresh, p), Vector<double>(N)};
  for (Index i = 0; i < N; ++i) {
    const Index g = row_of(map, i);
    const I centre = I(F.c(i)) * I(G.c(g)) + (shift.empty() ? I(0.0) : shift[std::size_t(i)]);
    out.c(i) = mid(centre);
    out.A.row(i).head(KF) = G.c(g) * F.A.row(i);
    out.A.row(i).segment(KF, K - KF).setZero();
    out.A.row(i).head(KG) += F.c(i) * G.A.row(g);
    const I a1(std::fabs(F.c(i))), a2(std::fabs(G.c(g)));
    out.s(i) = hi(a1 * I(G.s(g)) + a2 * I(F.s(i)) + I(g2) * (a1 * I(r2(g)) + a2 * I(r1(i))) +
                  I(2.0 * double(K)) * I(underflow_unit) + I(halfwidth(centre, out.c(i))));
  }
  return out;
}

/// Remainders of products entrywise, as enclosures' midpoints (joining the centres) and half-widths (fresh
/// symbols).
struct Remainders {
  std::vector<I> shift;
  Vector<double> beta;
};

/// F ∘ G entrywise (entry i meets G's row map[i] when map is given, else G_i). `report` (when given) receives
/// the remainders, as matmul's `quads`.
Form product(const Form& F, const Form& G, const Pass& p, const std::vector<Index>& map = {},
             Remainders* report = nullptr) {
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
  const double gn = hi(sqrt(I(sum_up(g.squaredNorm(), double(q)))));
  I centred = I::hull(-gn, gn) * delta;
  for (const auto& [e, f] : pairs) {
    bj = G.A.row(f).head(q) - g;
    const double nb = hi(sqrt(I(sum_up(bj.squaredNorm(), double(q)))));
    // the subtraction's rounding, at most u·(|G_f| + |g|) per coefficient, joins the rest
    const double ry = hi(I(rest_of(G, f)) + I(unit_roundoff) * (I(G.inputs(f)) + I(gn)));
    centred += deviation_bound(F.A.row(e).head(q).dot(bj), F.inputs(e), nb, rest_of(F, e), ry, q);
  }
  return intersect(sum, centred);
}

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
      measure(G, p);
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
          combo.A.row(r) += w * G.A.row(f).head(width);
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
  measure(F, p);
  measure(G, p);
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
      double terms = 0;
      for (Index j = 0; j < inner; ++j) {
        if (!allowed(i, j)) continue;
        const Index e = a(i, j), f = b(j, k);
        // g = c_G − v rounded; (c_G − v − g)·F_e is at most its rounding times |c_F| + range.
        const I exact = I(G.c(f)) - I(v);
        const double g = mid(exact);
        out.A.row(o).head(KG) += F.c(e) * G.A.row(f);
        out.A.row(o).head(KF) += g * F.A.row(e);
        centre += I(F.c(e)) * I(g);
        const I a1(std::fabs(F.c(e))), a2(std::fabs(g));
        s += a1 * I(G.s(f)) + a2 * I(F.s(e));
        if (v != 0) s += I(halfwidth(exact, g)) * (a1 + I(F.ranges(e)));
        magnitude += a1 * I(r2(f)) + a2 * I(r1(e));
        terms += 2;
      }
      centre += shift[std::size_t(o)];
      out.c(o) = mid(centre);
      out.s(o) = hi(s + I(gamma_of(terms)) * magnitude + I(terms * double(K)) * I(underflow_unit) +
                    I(halfwidth(centre, out.c(o))));
    }
  add_fresh(out, beta, p);
  if (quads) *quads = Remainders{std::move(shift), std::move(beta)};
  return out;
}

enum class Function { exp, reciprocal, rsqrt, gelu_erf, gelu_tanh, tanh, relu, silu };

/// Enclosures of σ″ over each interval of J (N×1): GELU″(x) = φ(x)(2 − x²); tanh″ = −2t(1 − t²) with
/// t = tanh x; for the tanh GELU σ(x) = ½x(1 + tanh u), u = c(x + a x³), c = √(2/π), a = 0.044715 (the
/// binary64 constant of the model): σ″ = (1 − t²)u′ + ½x(1 − t²)(u″ − 2t u′²), u′ = c(1 + 3a x²), u″ = 6c a
/// x. Each is a naive interval evaluation, intersected with the global bound where one is proved.
Matrix<I> second_derivative(Activation act, const Matrix<I>& J) {
  const I pi = I::hull(std::nextafter(std::numbers::pi, 0.0), std::nextafter(std::numbers::pi, 4.0));
  const I inv_sqrt_2pi = I(1.0) / sqrt(I(2.0) * pi);
  const Index N = J.rows();
  Matrix<I> out(N, 1);
  if (act == Activation::silu) {  // SiLU″ = s(1 − s)(2 + x(1 − 2s)), s = 1/(1 + e⁻ˣ)
    for (Index i = 0; i < N; ++i) {
      const I x = J(i, 0), s = I(1.0) / (I(1.0) + exp(-x));
      out(i, 0) = intersect(s * (I(1.0) - s) * (I(2.0) + x * (I(1.0) - I(2.0) * s)),
                            I::hull(-silu_curvature, silu_curvature));
    }
    return out;
  }
  if (act == Activation::gelu_erf) {
    for (Index i = 0; i < N; ++i) {
      const I x2 = square(J(i, 0));
      out(i, 0) = intersect(exp(I(-0.5) * x2) * inv_sqrt_2pi * (I(2.0) - x2),
                            I::hull(-gelu_curvature, gelu_curvature));
    }
    return out;
  }
  const I c = I(2.0) * inv_sqrt_2pi, a(0.044715);
  Matrix<I> u(N, 1);
  for (Index i = 0; i < N; ++i) {
    const I x = J(i, 0);
    u(i, 0) = act == Activation::tanh ? x : c * (x + a * x * square(x));
  }
  const Matrix<I> t = activate(Activation::tanh, u);
  for (Index i = 0; i < N; ++i) {
    const I x = J(i, 0), ti = intersect(t(i, 0), I::hull(-1.0, 1.0)), sech2 = I(1.0) - square(ti);
    if (act == Activation::tanh) {
      out(i, 0) = intersect(I(-2.0) * ti * sech2, I::hull(-tanh_curvature, tanh_curvature));
    } else {
      const I du = c * (I(1.0) + I(3.0) * a * square(x)), ddu = I(6.0) * c * a * x;
      out(i, 0) = sech2 * du + I(0.5) * x * sech2 * (ddu - I(2.0) * ti * square(du));
    }
  }
  return out;
}

/// f(x) entrywise by the tangent at the centre p plus the Lagrange remainder over the range J (the range
/// intersected with the domain: (0, ∞) for 1/x, [floor, ∞) for 1/√x); exp, 1/x and 1/√x by their chord.
/// f(v) ∈ λ·v + M + β·[−1, 1] for every v in the range of each entry of a form (nonlinear below).
struct Linearisation {
  std::vector<I> lambda, M;
  Vector<double> beta;
};

Linearisation linearise(const Form& F, Function f, const Pass& p, double floor = 0) {
  const Index N = F.size();
  const Vector<double> rad = radius(F, p);
  Linearisation out{std::vector<I>(static_cast<std::size_t>(N)), std::vector<I>(static_cast<std::size_t>(N)),
                    Vector<double>(N)};
  std::vector<I>&lambda = out.lambda, &M = out.M;
  Vector<double>& beta = out.beta;
  Matrix<I> points(N, 1), ranges(N, 1);
  for (Index i = 0; i < N; ++i) {
    I J = I(F.c(i)) + I::hull(-rad(i), rad(i));
    if (!isfinite(J)) throw Vacuous{};
    if (f == Function::reciprocal && !(J.lower() > 0)) throw Vacuous{};
    if (f == Function::rsqrt) J = I::hull(std::max(J.lower(), floor), std::max(J.upper(), floor));
    ranges(i, 0) = J;
    points(i, 0) = I(std::clamp(F.c(i), J.lower(), J.upper()));
  }
  Matrix<I> value(N, 1), slope(N, 1), curvature(N, 1);
  if (f == Function::gelu_erf || f == Function::gelu_tanh || f == Function::tanh || f == Function::silu) {
    const Activation act = f == Function::silu        ? Activation::silu
                           : f == Function::tanh      ? Activation::tanh
                           : f == Function::gelu_tanh ? Activation::gelu_tanh
                                                      : Activation::gelu_erf;
    value = activate(act, points);
    slope = activation_derivative(act, points);
    curvature = second_derivative(act, ranges);
  }
  for (Index i = 0; i < N; ++i) {
    const I J = ranges(i, 0), P = points(i, 0);
    if (f == Function::relu) {
      double l = 0;
      I err(0.0);
      if (J.lower() >= 0) {
        l = 1;
      } else if (J.upper() > 0) {
        l = J.upper() / (J.upper() - J.lower());  // any l ∈ [0, 1] is sound; this one is DeepZ's
        // relu(x) − l·x ∈ [0, max((1 − l)·sup J, −l·inf J)] on J.
        err = I::hull(0.0, hi(max((I(1.0) - I(l)) * I(J.upper()), I(-l) * I(J.lower()))));
      }
      lambda[std::size_t(i)] = I(l);
      const double m = mid(err);
      M[std::size_t(i)] = I(m);
      beta(i) = halfwidth(err, m);
      continue;
    }
    if (f == Function::exp || f == Function::reciprocal || f == Function::rsqrt) {
      // Convex on J (1/x and 1/√x on J > 0): the chord slope l, and the exact range of the convex
      // e(x) = f(x) − l·x on J: at most its larger endpoint value, at least the tangent of e at ξ ≈ the
      // point where f′ = l, evaluated at the ends of J (a convex function lies above its tangents).
      auto value_at = [f](const I& x) {
        return f == Function::exp ? exp(x) : f == Function::reciprocal ? I(1.0) / x : I(1.0) / sqrt(x);
      };
      auto slope_at = [f](const I& x) {
        return f == Function::exp          ? exp(x)
               : f == Function::reciprocal ? -(I(1.0) / square(x))
                                           : I(-0.5) / (x * sqrt(x));
      };
      const double a = J.lower(), b = J.upper();
      const I fa = value_at(I(a)), fb = value_at(I(b));
      double l = b > a ? mid((fb - fa) / (I(b) - I(a))) : mid(slope_at(I(a)));
      if (!std::isfinite(l)) throw Vacuous{};
      double xi = a;  // where f′(ξ) = l, clamped to J (any ξ in J is sound; this one is tight)
      if (f == Function::exp && l > 0) xi = std::log(l);
      if (f == Function::reciprocal && l < 0) xi = std::sqrt(-1.0 / l);
      if (f == Function::rsqrt && l < 0) xi = std::pow(-2.0 * l, -2.0 / 3.0);
      xi = std::clamp(std::isfinite(xi) ? xi : a, a, b);
      const I e_xi = value_at(I(xi)) - I(l) * I(xi), de_xi = slope_at(I(xi)) - I(l);
      const double top = hi(max(fa - I(l) * I(a), fb - I(l) * I(b)));
      const double bottom = min(e_xi + de_xi * (I(a) - I(xi)), e_xi + de_xi * (I(b) - I(xi))).lower();
      if (!std::isfinite(bottom) || !(bottom <= top)) throw Vacuous{};
      const I E = I::hull(bottom, top);
      const double m = mid(E);
      lambda[std::size_t(i)] = I(l);
      M[std::size_t(i)] = I(m);
      beta(i) = halfwidth(E, m);
      continue;
    }
    I fp, dfp, d2;  // f(p), f′(p), and f″ over J
    switch (f) {
      case Function::gelu_erf:
      case Function::gelu_tanh:
      case Function::tanh:
      case Function::silu:
        fp = value(i, 0);
        dfp = slope(i, 0);
        d2 = curvature(i, 0);
        break;
      default:
        break;
    }
    // f(x) = f(p) + f′(p)(x − p) + ½f″(ξ)(x − p)² = l·x + μ + err with err ∈ E below, for x ∈ J.
    const double l = mid(dfp);
    const I D = J - P;
    const I base = fp - I(l) * P;
    const double mu = mid(base);
    const I E = (base - I(mu)) + (dfp - I(l)) * D + I(0.5) * d2 * square(D);
    if (!isfinite(E)) throw Vacuous{};
    const double m = mid(E);
    lambda[std::size_t(i)] = I(l);
    M[std::size_t(i)] = I(mu) + I(m);
    beta(i) = halfwidth(E, m);
  }
  return out;
}

/// y = f(x) entrywise: linearise, then one fresh symbol per entry for the remainder.
/// `own` (when given): per entry, a column that no other entry of F nor any later step reads (−1: none).
/// There the entry's remainder joins that symbol instead of a fresh one: α·η + β·η′ with both symbols read
/// by this entry alone takes exactly the values of (|α| + β)·η″, |η″| ≤ 1.
Form nonlinear(const Form& F, Function f, const Pass& p, double floor = 0,
               const std::vector<Index>* own = nullptr) {
  Linearisation l = linearise(F, f, p, floor);
  if (!own) {
    Form out = affine_entries(F, l.lambda, l.M, p, fresh_count(l.beta));
    add_fresh(out, l.beta, p);
    return out;
  }
  Vector<double> joined = Vector<double>::Zero(F.size());
  for (Index e = 0; e < F.size(); ++e)
    if ((*own)[std::size_t(e)] >= 0) std::swap(joined(e), l.beta(e));
  Form out = affine_entries(F, l.lambda, l.M, p, fresh_count(l.beta));
  for (Index e = 0; e < F.size(); ++e)
    if (joined(e) > 0) {
      double& a = out.A(e, (*own)[std::size_t(e)]);
      a = hi(I(std::fabs(a)) + I(joined(e)));
    }
  out.forget();
  add_fresh(out, l.beta, p);
  return out;
}

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

/// X minus the mean of its row (n rows × d features), linear in the symbols.
Form centred_rows(const Form& X, Index n, Index d, const Pass& p) {
  const RowIndex index(n, d);
  const Form mean = affine_entries(sum_groups(X, index.rows, p), I(1.0) / I(double(d)),
                                   std::vector<I>(std::size_t(n), I(0.0)), p);
  return combine(X, mean, -1, p, index.row_of);
}

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
    if (q > 0) {
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

/// What a linear map reads: the rows of a form, or a row-wise norm's output γ ⊙ z·r + β (z the centred or raw
/// rows, r = 1/√(mean z² + ε) per row) kept as three forms: `linear` = γ ⊙ (c_z·r + c_r·z − c_z·c_r) + β, its
/// part linear in the symbols; `scaled` = γ ⊙ (z − c_z), centred at exactly 0; `root` = r. What `linear`
/// leaves out is the product remainder γ_f (z_f − c_z)(r − c_r). A linear map W applied next (project) bounds
/// Σ_f W_fo γ_f (z_f − c_z)(r − c_r) for each output o as one deviation product, of entry o of (γ ⊙ (z −
/// c_z))·W and r, so the cancellations of the sum over f are kept; the product as one fresh symbol per entry,
/// mapped by W, pays Σ_f |W_fo|·(remainder of entry f) instead.
struct Rows {
  Form linear, scaled, root;
};

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

/// F (rows × d_h) rotated as the tokens `positions` when the layer has rotary embeddings, else F.
Form rotated(Form F, const std::vector<Index>& positions, const AttentionLayer& L, const Pass& p) {
  return L.rotary ? rotate_rows(F, positions, L.head_dim, *L.rotary, p) : F;
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
    const Eigen::Array<bool, 1, Eigen::Dynamic> used = (rows.array() != 0).colwise().any();
    std::vector<Index> cols;
    for (Index j = 0; j < K; ++j)
      if (j < q || used(j) || !p.compact) cols.push_back(j);
    Form row{X.c.segment(i * d, d), Matrix<double>(d, Index(cols.size())), X.s.segment(i * d, d)};
    for (Index r = 0; r < d; ++r)
      for (std::size_t k = 0; k < cols.size(); ++k) row.A(r, Index(k)) = rows(r, cols[k]);
    Pass pass;
    pass.q = p.q;
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
    const Form S = gather(scores, kept);
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
  return combine(nq == n ? X : keep_tokens(X, queries, d), linear_rows(O, nq, L.WO, L.bO, p), +1, p);
}

/// The product remainder of the last block's LN₂ on the pooled row, carried to the margin (normed_margin)
/// instead of one symbol per fc1 output: fc1's output o is h_o + ρ_o with ρ_o = Zw_o·(r − c_r) (Zw = the row
/// of (γ ⊙ (z − c_z))·W₁, centred at 0; r the root; project's deviation product), the activation's tangent
/// slope l_o multiplies it, and fc2 adds Σ_o W₂_of·l_o·ρ_o to feature f of the row. A functional λ of the row
/// then meets (r − c_r)·Σ_o w_o Zw_o with w_o = l_o·(W₂λ)_o: one deviation product, so the cancellations of
/// the sum over the fc1 outputs are kept; ρ_o's range (|ρ_o| ≤ mag ρ_o) enters the activation's range and
/// the row's.
struct Deferred {
  Form Zw, root;
  Vector<double> slope;  ///< l_o
  Vector<double> rho;    ///< mag ρ_o (upper bounds)
  Matrix<double> W;      ///< W₂ (mlp × width)
  bool present() const { return Zw.size() != 0; }
};

/// X + MLP(N(X)) (N = LN₂ for pre-norm, the identity for post-norm). `pooled`: X is the pooled row alone
/// (after the last attention), which reads LN₂ through project; other rows read it as one form.
/// `deferred` (the pooled row of the last block only): LN₂'s product remainder is left out of the result and
/// described there instead.
Form mlp_block(const Form& X, Index n, const Model& m, const TransformerBlock& blk, const Pass& p,
               bool pooled, Deferred* deferred = nullptr) {
  std::optional<Rows> N;
  Form normed;
  if (m.prenorm) {
    N = normed_rows(X, n, m.width, m.norm, blk.norm2.gamma, blk.norm2.beta, m.eps, p);
    if (!pooled) normed = materialise(*N, m.width, p);
  }
  auto linear = [&](const Affine& map) {
    if (N && pooled) return project(*N, n, map.W, map.b, p);
    return linear_rows(N ? normed : X, n, map.W, map.b, p);
  };
  const Form H = linear(blk.fc1);
  const Function f = m.activation == Activation::silu        ? Function::silu
                     : m.activation == Activation::relu      ? Function::relu
                     : m.activation == Activation::tanh      ? Function::tanh
                     : m.activation == Activation::gelu_tanh ? Function::gelu_tanh
                                                             : Function::gelu_erf;
  if (deferred && N && pooled && !blk.gated() && f != Function::relu) {
    // Deferred: fc1 without the norm's product remainder, whose range widens the activation's range only.
    const Form lin = linear_rows(N->linear, 1, blk.fc1.W, blk.fc1.b, p);
    deferred->Zw = linear_rows(N->scaled, 1, blk.fc1.W, Vector<double>(), p);
    deferred->root = N->root;
    measure(deferred->Zw, p);
    measure(deferred->root, p);
    const Index hidden = lin.size();
    Form wide = lin;
    deferred->rho.resize(hidden);
    for (Index o = 0; o < hidden; ++o) {
      const I dev = deviation_product(deferred->Zw, o, deferred->root, 0, p);
      deferred->rho(o) = magnitude_of(dev);
      wide.s(o) = hi(I(wide.s(o)) + I(deferred->rho(o)));
    }
    wide.forget();
    const Linearisation l = linearise(wide, f, p);
    deferred->slope.resize(hidden);
    for (Index o = 0; o < hidden; ++o) {
      if (l.lambda[std::size_t(o)].lower() != l.lambda[std::size_t(o)].upper())
        throw std::logic_error("mlp_block: a tangent slope is a point");
      deferred->slope(o) = l.lambda[std::size_t(o)].lower();
    }
    deferred->W = blk.fc2.W;
    Form T = affine_entries(lin, l.lambda, l.M, p, fresh_count(l.beta));
    add_fresh(T, l.beta, p);
    return combine(X, linear_rows(T, 1, blk.fc2.W, blk.fc2.b, p), +1, p);
  }
  if (blk.gated()) {  // SwiGLU: σ(Y·W_g + b_g) ⊙ H, the product of two forms
    const Form G = nonlinear(linear(blk.gate), f, p);
    return combine(X, linear_rows(product(G, H, p), n, blk.fc2.W, blk.fc2.b, p), +1, p);
  }
  return combine(X, linear_rows(nonlinear(H, f, p), n, blk.fc2.W, blk.fc2.b, p), +1, p);
}

/// The input stage: embed(x + r·ε), linear in ε.
Form input_form(const Model& m, const Vector<double>& x, double r, const Pass& p) {
  const Matrix<I> centre = embed<I>(m, Vector<I>(x.cast<I>()));
  const Index N = centre.size(), q = x.size();
  Form L{Vector<double>::Zero(N), Matrix<double>::Zero(N, q), Vector<double>::Zero(N)};
  if (m.text()) {
    for (Index e = 0; e < q; ++e) L.A(e, e) = 1;
  } else {
    const int first = m.class_token ? 1 : 0, K = m.channels * m.patch_size * m.patch_size;
    for (int t = 0; t < m.patch_count(); ++t)
      for (int k = 0; k < K; ++k)
        for (int f = 0; f < m.width; ++f)
          L.A(Index(t + first) * m.width + f, m.pixel_of(t, k)) = m.patch.W(k, f);
  }
  Form F = affine_entries(L, I(r), std::vector<I>(std::size_t(N), I(0.0)), p);
  for (Index e = 0; e < N; ++e) {
    const I c = centre(e / m.width, e % m.width);
    F.c(e) = mid(c);
    F.s(e) = hi(I(F.s(e)) + I(halfwidth(c, F.c(e))));
  }
  F.forget();
  return F;
}

/// The pooled row's form over the ball (what the final norm, the pooler and the head read).
/// `deferred`: as mlp_block's, for the last block.
Form pooled_form(const Model& m, const Vector<double>& x, double r, const Pass& p,
                 Deferred* deferred = nullptr) {
  Index n = m.text() ? x.size() / m.width : m.tokens();
  const Index d = m.width;
  Form X = input_form(m, x, r, p);
  if (m.embed_norm.present()) X = layer_norm(X, n, d, m.embed_norm.gamma, m.embed_norm.beta, m.eps, p);
  for (std::size_t b = 0; b < m.blocks.size(); ++b) {
    p.tick();
    const TransformerBlock& blk = m.blocks[b];
    std::vector<Index> queries(static_cast<std::size_t>(n));
    for (Index i = 0; i < n; ++i) queries[std::size_t(i)] = i;
    if (b + 1 == m.blocks.size() && n > 1 && m.pooling != Pooling::mean)
      // Only the pooled token reaches the head, and the rest of the network is row-wise from here.
      queries = {m.pooling == Pooling::cls ? 0 : n - 1};
    p.record = true;  // the products go to the ledger, the last block's with their other symbols exactly
    p.exact = b + 1 == m.blocks.size();
    X = attention_block(X, n, queries, blk.attention, m.prenorm ? m.norm : Prenorm::none, m.causal, p);
    n = Index(queries.size());
    if (!m.prenorm) X = layer_norm(X, n, d, blk.norm1.gamma, blk.norm1.beta, m.eps, p);
    p.tick();
    auto mlp = [&](const Form& rows, Index count, const Pass& pass) {
      Form out = mlp_block(rows, count, m, blk, pass, n == 1, b + 1 == m.blocks.size() ? deferred : nullptr);
      if (!m.prenorm) out = layer_norm(out, count, d, blk.norm2.gamma, blk.norm2.beta, m.eps, pass);
      return out;
    };
    X = n > 1 ? per_token(X, n, d, p,
                          [&](Index, const Form& row, const Pass& pass) {
                            return std::vector<Form>{mlp(row, 1, pass)};
                          })
                    .stacked(0)
              : mlp(X, n, p);
  }
  if (n > 1) {
    if (m.pooling == Pooling::mean) {
      const Index first = m.text() ? 0 : n - m.patch_count();
      std::vector<std::vector<Index>> columns(static_cast<std::size_t>(d));
      for (Index i = first; i < n; ++i)
        for (Index f = 0; f < d; ++f) columns[std::size_t(f)].push_back(i * d + f);
      X = affine_entries(sum_groups(X, columns, p), I(1.0) / I(double(n - first)),
                         std::vector<I>(std::size_t(d), I(0.0)), p);
    } else {
      X = keep_tokens(X, {m.pooling == Pooling::cls ? 0 : n - 1}, d);
    }
  }
  return X;
}

/// The logits' forms from the pooled row's.
Form logits_form(const Model& m, Form X, const Pass& p) {
  const Index d = m.width;
  if (m.final_norm.present()) X = norm_rows(X, 1, d, m.norm, m.final_norm.gamma, m.final_norm.beta, m.eps, p);
  if (m.pooler.W.size() != 0) X = nonlinear(linear_rows(X, 1, m.pooler.W, m.pooler.b, p), Function::tanh, p);
  return linear_rows(X, 1, m.head.W, m.head.b, p);
}

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

std::string affine_unsupported(const Model& m) {
  for (const TransformerBlock& blk : m.blocks) {
    if (blk.attention.kind != AttentionKind::dot) return "L2 attention";
  }
  return "";
}

double affine_margin(const Model& m, const Vector<double>& x, int y, double r,
                     const std::function<void()>& poll, const AffineOptions& options) {
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
                                        double tolerance, const std::function<void()>& poll) {
  CertifiedRadius out;
  auto margin = [&](double r) {
    ++out.checks;
    return affine_margin(m, x, y, r, poll);
  };
  // L(0): the lower end of the margin's interval64 enclosure at x (the affine pass at r = 0 computes the
  // same number, less tightly and more slowly).
  const Vector<I> z = forward<I>(m, Vector<I>(x.cast<I>()));
  double at_centre = INFINITY;
  for (Index c = 0; c < z.size(); ++c)
    if (c != y) at_centre = std::min(at_centre, (z(y) - z(c)).lower());
  if (!(at_centre > 0)) return out;
  // The search only decides where to test: the radius returned passed its own test. The loss
  // D(r) = L(0) − L(r) of the lower bound L grows like a power of r whose exponent rises slowly (about 1.5
  // at small radii, 2.4 near the failure on the digits ViT), and past the failure it jumps by orders of
  // magnitude (a range reaches a pole), so a failing test says where the failure is and little more.
  // Candidates therefore come from the passing tests: the log–log slope s of D through the two largest
  // passing radii (plus half its last increase; at least 1; 2.5 from a single pass) predicts where D reaches
  // L(0), and the candidate aims a little below it (D = 0.97·L(0)) so that it passes close to the failure;
  // then lo·(1 + tolerance) closes the bracket. Two failures in a row fall back to geometric bisection. The
  // first test is at upper/12, a little below the typical certified fraction of the attack radius; when it
  // fails the next is at upper/(12·1.4), then a quarter of the last failure. (First 40 digits images: the
  // exponent from the first pass to the failure has median 2.5, and the smallest fraction is 0.066.)
  const double target = std::log(at_centre), aim = std::log(0.97);
  double lo = 0, hi_r = upper;
  std::vector<std::pair<double, double>> passed;  // (r, log D) in increasing r
  std::vector<double> lows;                       // L(r) at the passing radii
  int failures = 0;
  double r = upper / 12;
  for (int k = 0; k < 200; ++k) {
    const double l = margin(r);
    if (l > 0) {
      lo = r;
      passed.emplace_back(r, std::log(std::max(at_centre - l, at_centre * 1e-300)));
      lows.push_back(l);
      failures = 0;
    } else {
      hi_r = r;
      ++failures;
    }
    if (lo > 0 && hi_r / lo <= 1 + tolerance) break;
    if (passed.empty()) {
      r = hi_r / (failures == 1 ? 1.4 : 4.0);
      continue;
    }
    const std::size_t m = passed.size();
    auto slope = [&passed](std::size_t a, std::size_t b) {
      return (passed[b].second - passed[a].second) / std::log(passed[b].first / passed[a].first);
    };
    double s = 2.5;
    if (m >= 2) {
      s = slope(m - 2, m - 1);
      if (m >= 3) s += 0.5 * std::max(0.0, s - slope(m - 3, m - 2));
      s = std::max(s, 1.0);
    }
    double candidate = passed.back().first * std::exp((target + aim - passed.back().second) / s);
    if (m >= 2 && lows[m - 1] < 0.1 * at_centre) {
      // Close to the failure D steepens, and steps aimed at D = 0.97·L(0) shrink towards the tolerance. There
      // L itself, extrapolated linearly in log r through the last two passes, says where it reaches 0 (an
      // overestimate where L is concave), and the candidate goes 80 % of the way when that is further.
      const double sigma = (lows[m - 2] - lows[m - 1]) / std::log(passed[m - 1].first / passed[m - 2].first);
      if (sigma > 0)
        candidate = std::max(candidate, passed.back().first * std::exp(0.8 * lows[m - 1] / sigma));
    }
    if (failures >= 2) candidate = std::sqrt(lo * hi_r);
    const double next = lo * (1 + tolerance);
    if (!(candidate > next)) candidate = next;
    if (candidate >= hi_r)
      candidate = hi_r / lo > (1 + tolerance) * (1 + tolerance) ? std::sqrt(lo * hi_r) : next;
    if (candidate >= upper) {  // nothing below the attack radius is left to test but `upper` itself
      hi_r = upper;
      break;
    }
    r = candidate;
  }
  if (lo == 0) {
    out.refuted = hi_r;
    return out;
  }
  out.radius = lo;
  out.refuted = hi_r;
  return out;
}

}  // namespace regatta::operators
