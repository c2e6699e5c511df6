#pragma once
// Affine forms (zonotopes) over an ℓ₂ ball or an ℓ∞ box of inputs: the type every transfer function of the
// whole-model certificate reads and writes (model_affine.hpp has the method, docs/models.md the argument and
// docs/numerics.md#affine-forms-operatorsmodel_affinehpp the rounding bounds). Internal header of
// operators/src/model/affine/.
//
// WHAT A FORM REPRESENTS. A Form of N entries stands for N real-valued functions of the input on the ball
// B = {x + r·ε : ‖ε‖₂ ≤ 1}: entry e is
//     v_e = c_e + Σ_{j<q} A_ej·ε_j + Σ_{j≥q} A_ej·η_j + s_e·[−1, 1],     ‖ε‖₂ ≤ 1, |η_j| ≤ 1,
// with c, A, s binary64 and s ≥ 0. The first q columns (Pass::q, the input length) are the input symbols ε,
// shared by every form of a pass; each later column j ≥ q is a fresh symbol η_j that one nonlinear step
// introduced, owned by the Pass (Pass::next numbers them) and shared by every form computed after it, so two
// forms read the same column exactly when they depend on the same quantity. Columns beyond a form's A are
// zeros. The slack s holds binary64 rounding errors only.
//
// THE INPUT GEOMETRY. By default the input symbols range over the unit ℓ₂ ball ‖ε‖₂ ≤ 1; with Pass::box
// they range over the unit ℓ∞ box |ε_j| ≤ 1 (the graph pass's ℓ∞ sets, docs/models.md#the-graph-pass).
// Every bound that reads the input symbols uses the norm dual to that set: ‖a_{<q}‖₂ over the ball,
// ‖a_{<q}‖₁ over the box (max over the set of a·ε); below, ‖a_{<q}‖ means that dual norm.
//
// SOUNDNESS INVARIANT (what every function below preserves). For every input point x′ = x + r·ε of the ball
// there are values of the fresh symbols, |η_j| ≤ 1, one assignment for the whole pass, such that the exact
// real value of every quantity of the forward pass at x′ lies in c_e + A_e·(ε, η) + [−s_e, s_e] for its
// entry e. Hence the RANGE of entry e, c_e ± (‖A_e,<q‖ + ‖A_e,≥q‖₁ + s_e) rounded outward (radius()),
// encloses the quantity over the whole ball: every point of the true set lies in the form's range.
// Linear maps act on the coefficients exactly (in real arithmetic); a nonlinear f is replaced by an affine
// function of its input plus a remainder bounded over the input's range, and the remainder becomes a fresh
// symbol (or joins the entry's own symbol), so the invariant keeps holding with that symbol's new value.
//
// HOW ROUNDING IS ABSORBED. Coefficients and centres are computed in binary64 round-to-nearest; the
// difference between the computed and the exact coefficients is not tracked, but an a-priori upper bound of
// its effect is added to the slack s: a coefficient error e_j moves the value by |e_j·ε_j| ≤ |e_j| for
// either kind of symbol, so the row sum of the errors bounds a whole row. The bounds are Higham's γ_k for
// sums and dot products of k terms (gamma_of, sum_up: with underflow, k·η, η = 2⁻¹⁰⁷⁴), one ulp for the
// elementwise products, and interval64 (outward-rounded) evaluation for centres, scalars and the bounds
// themselves; a centre computed in interval64 keeps its midpoint and adds its half-width to s. The table in
// docs/numerics.md#affine-forms-operatorsmodel_affinehpp lists the bound each step adds. Dropping these
// terms breaks the invariant (tests/operators/model/affine/ has cases where it does).
//
// A step that meets an unbounded range or a denominator whose range reaches 0 throws Vacuous: the caller
// then certifies nothing (−∞).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include <regatta/core/eigen.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/rounding.hpp>

namespace regatta::operators::affine {

using I = interval64;
using Index = Eigen::Index;

/// Thrown inside a pass when a range is unbounded or a denominator's range reaches 0.
struct Vacuous {};

inline double hi(const I& v) {
  const double h = v.upper();
  if (!std::isfinite(h)) throw Vacuous{};
  return h;
}
inline double mid(const I& v) { return v.lower() / 2 + v.upper() / 2; }
/// max |v| over v (exact).
inline double magnitude_of(const I& v) { return std::max(std::fabs(v.lower()), std::fabs(v.upper())); }
/// max(v.upper − m, m − v.lower) rounded up: v ⊆ [m − w, m + w].
inline double halfwidth(const I& v, double m) { return hi(max(I(v.upper()) - I(m), I(m) - I(v.lower()))); }
/// γ_m = m·u/(1 − m·u), rounded up.
inline double gamma_uncached(double m) {
  const I mu = I(m) * I(unit_roundoff);
  return hi(mu / (I(1.0) - mu));
}

/// What sum_up needs of a count m: m·η and 1 − γ_m, as intervals.
struct SumConstants {
  double m = -1, gamma = 0;
  I tail, denominator;
};
/// The constants of the count m, from a per-thread memo of the last few counts asked for: a pass asks for
/// the same few counts (K, q, K − q, d) row after row, and each costs interval multiplications and
/// divisions; a pure function of m, so the results are the same as computed afresh.
inline const SumConstants& sum_constants(double m) {
  constexpr unsigned slots = 8;
  thread_local SumConstants memo[slots];
  thread_local unsigned next = 0;
  for (const SumConstants& k : memo)
    if (k.m == m) return k;
  const double gamma = gamma_uncached(m);  // may throw Vacuous: then nothing is stored
  SumConstants& k = memo[next++ % slots];
  k.gamma = gamma;
  k.tail = I(m) * I(underflow_unit);
  k.denominator = I(1.0) - I(gamma);
  k.m = m;
  return k;
}
/// γ_m = m·u/(1 − m·u), rounded up.
inline double gamma_of(double m) { return sum_constants(m).gamma; }
/// An upper bound of a sum s of m non-negative terms, each a product of at most two doubles, from its
/// binary64 value in any order: fl(s) ≥ (1 − γ_m)·s − m·η (Higham, Thm 3.5, with underflow).
/// The same with the constants of m at hand (a loop over rows takes them once: each sum_constants call
/// reads thread-local storage through a call in a shared library).
inline double sum_up(double computed, const SumConstants& k) {
  if (!std::isfinite(computed)) throw Vacuous{};
  return hi((I(computed) + k.tail) / k.denominator);
}
inline double sum_up(double computed, double m) {
  if (!std::isfinite(computed)) throw Vacuous{};
  return sum_up(computed, sum_constants(m));
}

/// v ∈ c + Σ_{j<q} A_j ε_j + Σ_{j≥q} A_j η_j + [−s, s] for every entry (one row of A per entry).
struct Form {
  Vector<double> c;
  Matrix<double> A;
  Vector<double> s;
  /// Caches of row_sums() and radius(), filled when first asked for: a step that changes A or s after
  /// that calls forget().
  mutable Vector<double> sums, ranges, inputs;  ///< inputs: upper bounds of ‖a_{<q}‖ (the dual norm)
  /// Which blocks of column_block columns of each row hold a nonzero coefficient (measure(F, p, true)):
  /// block b of row i is bit b % 64 of nonzero[i·words + b / 64], over the first nonzero_cols columns
  /// (columns beyond them are zeros, like those a step appends later); nonzero_cols < 0: not computed.
  mutable std::vector<std::uint64_t> nonzero;
  mutable Index nonzero_cols = -1, words = 0;

  Form() = default;
  Form(Vector<double> c_, Matrix<double> A_, Vector<double> s_)
      : c(std::move(c_)), A(std::move(A_)), s(std::move(s_)) {}
  Index size() const { return c.size(); }
  void forget() const {
    sums.resize(0);
    ranges.resize(0);
    inputs.resize(0);
    nonzero.clear();
    nonzero_cols = -1;
  }
};

/// The width of the blocks of columns that Form::nonzero marks.
inline constexpr Index column_block = 32;

/// fn(j, w) for runs of columns [j, j + w) within [from, to) that cover every nonzero coefficient of row
/// `row` of F there (F.nonzero computed), in increasing order; the columns left out hold zeros. A sum
/// that adds w·a_j over the row's coefficients skips only terms w·0 = ±0, which change no sum that
/// starts at +0 (x + ±0 = x for x ≠ 0, +0 + ±0 = +0, with or without a fused multiply-add).
template <class Fn>
void for_each_run(const Form& F, Index row, Index from, Index to, Fn&& fn) {
  to = std::min(to, F.nonzero_cols);
  if (from >= to) return;
  const std::uint64_t* bits = F.nonzero.data() + row * F.words;
  const Index last = (to - 1) / column_block;  // the last block, inclusive
  Index b = from / column_block;
  while (b <= last) {
    const std::uint64_t set = bits[b / 64] >> (b % 64);
    if (set == 0) {
      b = (b / 64 + 1) * 64;
      continue;
    }
    b += Index(std::countr_zero(set));
    if (b > last) break;
    Index e = b + 1;  // the end of the run of set bits
    while (e <= last) {
      const std::uint64_t clear = ~bits[e / 64] >> (e % 64);
      if (clear != 0) {
        e += Index(std::countr_zero(clear));
        break;
      }
      e = (e / 64 + 1) * 64;
    }
    const Index j = std::max(from, b * column_block), end = std::min(to, e * column_block);
    if (end > j) fn(j, end - j);
    b = e;
  }
}

struct ProductGroup;

struct Pass {
  Index q = 0;  ///< the input symbols ε: columns [0, q) of every A
  bool box = false;  ///< the input symbols range over the ℓ∞ box |ε_j| ≤ 1 (else the ℓ₂ ball ‖ε‖₂ ≤ 1)
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

/// Fills F's caches in one sweep over A: upper bounds of each row's Σ_j |a_j| and of its half-width
/// ‖a_{<q}‖ + ‖a_{≥q}‖₁ + s (zero columns added later change neither); with `blocks`, also F.nonzero
/// (found while each row is in cache).
void measure(const Form& F, const Pass& p, bool blocks = false);
/// A row of input-symbol coefficients, contiguous or not.
using InputRow = Eigen::Ref<const Eigen::Matrix<double, 1, Eigen::Dynamic>, 0, Eigen::InnerStride<>>;
/// An upper bound of the dual norm of the input coefficients a: ‖a‖₂ (ball) or ‖a‖₁ (box).
double input_norm(const InputRow& a, const Pass& p);
/// An enclosure of (x − c_x)(y − c_y) from a·b (a, b the input coefficients), ‖a‖, ‖b‖ and the bounds
/// ρ_x, ρ_y of the rest, over the ℓ₂ ball (form.cpp has the argument).
I deviation_bound(double dot, double na, double nb, double rx, double ry, Index q);
/// The same over the ℓ∞ box, from the coefficients a, b themselves and ‖a‖₁ ≤ na, ‖b‖₁ ≤ nb.
I deviation_bound_box(const InputRow& a, const InputRow& b, double na, double nb, double rx, double ry);
/// deviation_bound or deviation_bound_box, as the pass's geometry says.
I deviation_of(const InputRow& a, const InputRow& b, double na, double nb, double rx, double ry,
               const Pass& p);
/// ρ = range − ‖a‖ of entry e of F (rounded up): the bound of its deviation's part beyond the input symbols.
inline double rest_of(const Form& F, Index e) {
  return std::max(0.0, (I(F.ranges(e)) - I(F.inputs(e))).upper());
}
/// An enclosure of (F_e − c_e)(G_f − c_f) over the ball.
I deviation_product(const Form& F, Index e, const Form& G, Index f, const Pass& p);
/// Upper bounds of the row sums Σ_j |a_j|.
const Vector<double>& row_sums(const Form& F, const Pass& p);
/// Upper bounds of the half-widths ‖a_{<q}‖ + ‖a_{≥q}‖₁ + s of the ranges.
const Vector<double>& radius(const Form& F, const Pass& p);
/// Coefficients of N entries that read columns [0, K), with zero columns up to p.next + fresh when a step
/// will add `fresh` symbols (add_fresh then writes them without moving the matrix).
Matrix<double> coefficients(Index N, Index K, Index fresh, const Pass& p);
/// The rows `idx` of F (in that order).
Form gather(const Form& F, const std::vector<Index>& idx);
/// Appends one fresh symbol per entry with a positive β (an upper bound of that entry's remainder).
void add_fresh(Form& F, const Vector<double>& beta, const Pass& p);
inline Index fresh_count(const Vector<double>& beta) { return Index((beta.array() > 0).count()); }
/// y = Λ·x + M entrywise (Λ, M intervals: exact values somewhere inside). `fresh`: room for that many
/// symbols a caller adds next.
Form affine_entries(const Form& F, const std::vector<I>& Lambda, const std::vector<I>& M, const Pass& p,
                    Index fresh = 0);
/// y = λ·x + M entrywise.
Form affine_entries(const Form& F, const I& lambda, const std::vector<I>& M, const Pass& p);
/// The row of G that entry i of F meets: G_map[i] (map non-empty), else G_i.
inline Index row_of(const std::vector<Index>& map, Index i) { return map.empty() ? i : map[std::size_t(i)]; }
/// F + sign·G entrywise (sign ±1; entry i meets G's row map[i] when map is given).
Form combine(const Form& F, const Form& G, double sign, const Pass& p, const std::vector<Index>& map = {});

}  // namespace regatta::operators::affine
