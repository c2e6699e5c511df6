// The elementary operations of affine forms (form.hpp): their caches, deviation products of two entries,
// gathering rows, fresh symbols, entrywise affine maps and sums (docs/models.md, docs/numerics.md).
#include "form.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace regatta::operators::affine {

namespace {

void widen(Form& F, Index K) {
  if (F.A.cols() >= K) return;
  const Index old = F.A.cols();
  F.A.conservativeResize(Eigen::NoChange, K);
  F.A.rightCols(K - old).setZero();
}

/// Sets the bits of F.nonzero for row i (F.words words a row, zeroed): a block is marked when one of its
/// coefficients has a nonzero exponent or significand (−0 counts as zero; NaN and ±∞ as nonzero).
void mark_blocks(const Form& F, Index i) {
  const Index K = F.A.cols();
  const double* a = F.A.data() + i * K;  // row-major
  std::uint64_t* bits = F.nonzero.data() + i * F.words;
  for (Index b = 0; b * column_block < K; ++b) {
    const Index j0 = b * column_block, w = std::min(column_block, K - j0);
    std::uint64_t any = 0;
    if (w == column_block) {
      for (Index j = 0; j < column_block; ++j) any |= std::bit_cast<std::uint64_t>(a[j0 + j]) << 1;
    } else {
      for (Index j = 0; j < w; ++j) any |= std::bit_cast<std::uint64_t>(a[j0 + j]) << 1;
    }
    if (any != 0) bits[b / 64] |= std::uint64_t(1) << (b % 64);
  }
}

void start_blocks(const Form& F) {
  const Index K = F.A.cols(), blocks = (K + column_block - 1) / column_block;
  F.words = (blocks + 63) / 64;
  F.nonzero.assign(std::size_t(F.size() * F.words), 0);
  F.nonzero_cols = K;
}

}  // namespace

/// Fills F's caches in one sweep over A: upper bounds of each row's Σ_j |a_j| and of its half-width
/// ‖a_{<q}‖ + ‖a_{≥q}‖₁ + s (zero columns added later change neither; ‖·‖ the dual norm of the input set);
/// with `blocks`, also the blocks of nonzero coefficients (Form::nonzero) while each row is in cache.
void measure(const Form& F, const Pass& p, bool blocks) {
  const bool cached = F.sums.size() == F.size() && F.ranges.size() == F.size();
  blocks = blocks && F.nonzero_cols < 0;
  if (blocks) start_blocks(F);
  if (cached) {
    if (blocks)
      for (Index i = 0; i < F.size(); ++i) mark_blocks(F, i);
    return;
  }
  const Index K = F.A.cols(), q = std::min(p.q, K);
  F.sums.resize(F.size());
  F.ranges.resize(F.size());
  F.inputs.resize(F.size());
  if (F.size() == 0) return;
  // copies, not references: the memo's slots may be reused by a later count
  const SumConstants all = sum_constants(double(K)), inputs = sum_constants(double(q)),
                     others = sum_constants(double(K - q));
  for (Index i = 0; i < F.size(); ++i) {
    if (blocks) mark_blocks(F, i);
    const auto input = F.A.row(i).head(q);
    const double rest = F.A.row(i).tail(K - q).cwiseAbs().sum();
    F.sums(i) = sum_up(input.cwiseAbs().sum() + rest, all);
    F.inputs(i) =
        p.box ? sum_up(input.cwiseAbs().sum(), inputs) : hi(sqrt(I(sum_up(input.squaredNorm(), inputs))));
    F.ranges(i) = hi(I(F.inputs(i)) + I(sum_up(rest, others)) + I(F.s(i)));
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
  const SumConstants& k = sum_constants(double(q));  // γ_q and q·η, memoised (form.hpp)
  const I error = I(k.gamma) * I(na) * I(nb) + k.tail;
  const I ab = I(dot) + I::hull(-error.upper(), error.upper());
  const I quadratic = (ab + I::hull(-1.0, 1.0) * I(na) * I(nb)) / I(2.0);
  const I others = I(na) * I(ry) + I(rx) * I(nb) + I(rx) * I(ry);
  return quadratic + I::hull(-others.upper(), others.upper());
}

/// Over the box |ε_j| ≤ 1 the product of the input parts is (a·ε)(b·ε) = ¼[((a + b)·ε)² − ((a − b)·ε)²],
/// which lies in [−¼‖a − b‖₁², ¼‖a + b‖₁²], and in ±‖a‖₁‖b‖₁; the other three products are bounded as over
/// the ball. The sums a ± b are computed in binary64: |x| ≤ |fl(x)|/(1 − u) for each coefficient.
I deviation_bound_box(const InputRow& a, const InputRow& b, double na, double nb, double rx, double ry) {
  const Index q = a.size();
  const I both = I(na) * I(nb);
  double sum = 0, difference = 0;
  for (Index j = 0; j < q; ++j) {
    sum += std::fabs(a(j) + b(j));
    difference += std::fabs(a(j) - b(j));
  }
  const I widen = I(1.0) / (I(1.0) - I(unit_roundoff));
  const I plus = I(sum_up(sum, double(q))) * widen, minus = I(sum_up(difference, double(q))) * widen;
  const double top = std::min(hi(square(plus) / I(4.0)), both.upper());
  const double bottom = std::min(hi(square(minus) / I(4.0)), both.upper());
  const I others = I(na) * I(ry) + I(rx) * I(nb) + I(rx) * I(ry);
  return I::hull(-bottom, top) + I::hull(-others.upper(), others.upper());
}

/// An upper bound of ‖a‖₂ (ball) or ‖a‖₁ (box).
double input_norm(const InputRow& a, const Pass& p) {
  const double q = double(a.size());
  return p.box ? sum_up(a.cwiseAbs().sum(), q) : hi(sqrt(I(sum_up(a.squaredNorm(), q))));
}

I deviation_of(const InputRow& a, const InputRow& b, double na, double nb, double rx, double ry,
               const Pass& p) {
  if (p.box) return deviation_bound_box(a, b, na, nb, rx, ry);
  return deviation_bound(a.size() > 0 ? a.dot(b) : 0.0, na, nb, rx, ry, a.size());
}

I deviation_product(const Form& F, Index e, const Form& G, Index f, const Pass& p) {
  const Index q = std::min({p.q, F.A.cols(), G.A.cols()});
  if (p.box)
    return deviation_bound_box(F.A.row(e).head(q), G.A.row(f).head(q), F.inputs(e), G.inputs(f),
                               rest_of(F, e), rest_of(G, f));
  const double dot = q > 0 ? F.A.row(e).head(q).dot(G.A.row(f).head(q)) : 0.0;
  return deviation_bound(dot, F.inputs(e), G.inputs(f), rest_of(F, e), rest_of(G, f), q);
}

/// Upper bounds of the row sums Σ_j |a_j|.
const Vector<double>& row_sums(const Form& F, const Pass& p) {
  measure(F, p);
  return F.sums;
}
/// Upper bounds of the half-widths ‖a_{<q}‖ + ‖a_{≥q}‖₁ + s of the ranges.
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

/// y = Λ·x + M entrywise (Λ, M intervals: exact values somewhere inside).
/// `fresh`: room for that many symbols a caller adds next.
Form affine_entries(const Form& F, const std::vector<I>& Lambda, const std::vector<I>& M, const Pass& p,
                    Index fresh) {
  const Index N = F.size(), K = F.A.cols();
  const Vector<double>& rs = row_sums(F, p);
  bool wide = false;
  for (const I& l : Lambda) wide = wide || l.lower() != l.upper();
  const Vector<double>& rad = radius(F, p);
  const I tiny = I(double(K)) * I(underflow_unit);
  Form out{Vector<double>(N), coefficients(N, K, fresh, p), Vector<double>(N)};
  for (Index i = 0; i < N; ++i) {
    const double lambda = mid(Lambda[std::size_t(i)]);
    const I centre = I(lambda) * I(F.c(i)) + M[std::size_t(i)];
    out.c(i) = mid(centre);
    out.A.row(i).head(K) = lambda * F.A.row(i);
    // |λ|·s, the rounding of λ·A (u per coefficient, η per underflow), the centre's enclosure, and
    // |Λ − λ|·|x| with |x| ≤ |c| + radius.
    I s = I(std::fabs(lambda)) * (I(F.s(i)) + I(unit_roundoff) * I(rs(i))) + tiny +
          I(halfwidth(centre, out.c(i)));
    if (wide) s += I(halfwidth(Lambda[std::size_t(i)], lambda)) * (I(std::fabs(F.c(i))) + I(rad(i)));
    out.s(i) = hi(s);
  }
  return out;
}

Form affine_entries(const Form& F, const I& lambda, const std::vector<I>& M, const Pass& p) {
  return affine_entries(F, std::vector<I>(std::size_t(F.size()), lambda), M, p);
}

/// F + sign·G entrywise (sign ±1; entry i meets G's row map[i] when map is given).
Form combine(const Form& F, const Form& G, double sign, const Pass& p, const std::vector<Index>& map) {
  const Index KF = F.A.cols(), KG = G.A.cols(), K = std::max(KF, KG), N = F.size();
  const Vector<double>&r1 = row_sums(F, p), &r2 = row_sums(G, p);
  Form out{Vector<double>(N), Matrix<double>(N, K), Vector<double>(N)};
  for (Index i = 0; i < N; ++i) {
    const Index g = row_of(map, i);
    out.A.row(i).head(KF) = F.A.row(i);
    out.A.row(i).tail(K - KF).setZero();
    out.A.row(i).head(KG) += sign * G.A.row(g);
  }
  const I tiny = I(double(K)) * I(underflow_unit);
  for (Index i = 0; i < N; ++i) {
    const Index g = row_of(map, i);
    const I centre = I(F.c(i)) + I(sign) * I(G.c(g));
    out.c(i) = mid(centre);
    out.s(i) = hi(I(F.s(i)) + I(G.s(g)) + I(unit_roundoff) * (I(r1(i)) + I(r2(g))) + tiny +
                  I(halfwidth(centre, out.c(i))));
  }
  return out;
}

}  // namespace regatta::operators::affine
