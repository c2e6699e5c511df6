// Linear nodes on affine forms (operands.hpp, docs/models.md#the-graph-pass): conv, matmul and gemm with one
// constant operand, batch_norm, reduce_mean, neg, and add, sub, mul, div with a constant. A linear map acts
// on the symbols exactly; only the binary64 rounding of the new coefficients and centres enters the slack,
// bounded a priori (Higham's γ_k on each row's sum, centres in interval64; docs/numerics.md): certified.
// A constant operand with an enclosure radius r (docs/graph.md#enclosure-radii-of-constants) enters as the
// intervals [v − r, v + r] where it scales or shifts entries, and as its stored values plus the slack
// r·Σ sup|x| of the entries it multiplies where it is a matrix or a kernel.
#include <cmath>
#include <limits>
#include <stdexcept>

#include "../linear.hpp"
#include "operands.hpp"

namespace regatta::operators::affine::gp {

/// out_o = Σ_t w_t·F_{e_t} + b_o. Each computed coefficient is a sum of T products: its error is at most
/// γ_T·Σ_t |w_t·a_{e_t j}| + T·η, so a row's at most γ_T·Σ_t |w_t|·(row sum of F_{e_t}) + T·K·η (each
/// symbol is at most 1 in magnitude, in the ball and in the box); the slack adds Σ_t |w_t|·s_{e_t}, and the
/// centre is an interval64 sum whose half-width joins the slack.
Form sparse_linear(const Form& F, const SparseRows& rows, const Pass& p) {
  const Index N = Index(rows.terms.size()), K = F.A.cols();
  const Vector<double>& rs = row_sums(F, p);
  Form out{Vector<double>(N), Matrix<double>::Zero(N, K), Vector<double>(N)};
  for (Index o = 0; o < N; ++o) {
    const auto& terms = rows.terms[std::size_t(o)];
    I centre(rows.bias.empty() ? 0.0 : rows.bias[std::size_t(o)]), s(0.0), magnitude(0.0);
    for (const auto& [e, w] : terms) {
      out.A.row(o) += w * F.A.row(e);
      centre += I(w) * I(F.c(e));
      s += I(std::fabs(w)) * I(F.s(e));
      magnitude += I(std::fabs(w)) * I(rs(e));
    }
    const double T = double(terms.size());
    out.c(o) = mid(centre);
    out.s(o) = hi(s + I(gamma_of(T)) * magnitude + I(T * double(K)) * I(underflow_unit) +
                  I(halfwidth(centre, out.c(o))));
  }
  return out;
}

namespace {

/// Element e of a constant operand as an interval: its value, widened by the enclosure radius.
I entry(const Operand& c, std::size_t e) {
  const I v((*c.data)[e]);
  return c.radius == 0 ? v : v + I::hull(-c.radius, c.radius);
}

/// The entries of `data` broadcast to `out`, as intervals (exact points when the radius is 0).
std::vector<I> broadcast_values(const Operand& c, const Shape& out) {
  const std::vector<Index> map = broadcast_index(*c.shape, out);
  std::vector<I> v(map.size());
  for (std::size_t e = 0; e < map.size(); ++e) v[e] = entry(c, std::size_t(map[e]));
  return v;
}

/// Upper bounds of sup|x_e| = |c_e| + the half-width of the range of entry e of F.
std::vector<double> magnitudes(const Form& F, const Pass& p) {
  const Vector<double>& rad = radius(F, p);
  std::vector<double> m(std::size_t(F.size()));
  for (Index e = 0; e < F.size(); ++e) m[std::size_t(e)] = hi(I(std::fabs(F.c(e))) + I(rad(e)));
  return m;
}

/// Y's slack widened by r·Σ_{e ∈ reads[o]} sup|x_e| per entry o (sup|x| from `magnitude`), rounded up: the
/// product of those entries by constants each within r of the value used.
void widen_by_radius(Form& Y, double r, const std::vector<std::vector<Index>>& reads,
                     const std::vector<double>& magnitude) {
  for (Index o = 0; o < Y.size(); ++o) {
    I sum(0.0);
    for (Index e : reads[std::size_t(o)]) sum += I(magnitude[std::size_t(e)]);
    Y.s(o) = hi(I(Y.s(o)) + I(r) * sum);
  }
  Y.forget();
}

/// The form of x broadcast to `out`: x's own form when no entry moves, else a gathered copy in `storage`.
const Form& broadcast_form(const Operand& x, const Shape& out, Form& storage) {
  if (*x.shape == out && !x.constant()) return *x.form;
  storage = *x.shape == out ? form_of(x) : gather_or_zero(form_of(x), broadcast_index(*x.shape, out));
  return storage;
}

/// x ∘ c entrywise for one form x and one constant c, as y = Λ·x + M (affine_entries).
Form with_constant(graph::Op op, const Operand& x, const Operand& c, bool constant_first, const Shape& out,
                   const Pass& p) {
  Form storage;
  const Form* X = &broadcast_form(x, out, storage);
  std::vector<I> C = broadcast_values(c, out);
  const std::size_t N = C.size();
  // A −inf attention mask (docs/graph.md#non-finite-constants): x + (−inf), or an entry of x already masked,
  // is the constant −inf with no symbols; the softmax reading it gives that entry weight exactly 0.
  std::vector<Index> masked;
  if (op == graph::Op::add)
    for (std::size_t e = 0; e < N; ++e)
      if (C[e].upper() == -std::numeric_limits<double>::infinity() ||
          X->c(Index(e)) == -std::numeric_limits<double>::infinity()) {
        if (X != &storage) {  // x's own form: the masked rows are cleared in a copy
          storage = *X;
          X = &storage;
        }
        masked.push_back(Index(e));
        storage.c(Index(e)) = 0;
        storage.A.row(Index(e)).setZero();
        storage.s(Index(e)) = 0;
        C[e] = I(0.0);
      }
  std::vector<I> lambda(N, I(1.0)), M(N, I(0.0));
  for (std::size_t e = 0; e < N; ++e) switch (op) {
      case graph::Op::add:
        M[e] = C[e];
        break;
      case graph::Op::sub:  // x − c, or c − x
        if (constant_first) {
          lambda[e] = I(-1.0);
          M[e] = C[e];
        } else {
          M[e] = -C[e];
        }
        break;
      case graph::Op::mul:
        lambda[e] = C[e];
        break;
      case graph::Op::div:  // x / c (c / x is elementwise.cpp's: a reciprocal)
        if (C[e].lower() <= 0 && C[e].upper() >= 0) throw Vacuous{};
        lambda[e] = I(1.0) / C[e];
        break;
      default:
        throw std::logic_error("with_constant: not an arithmetic node");
    }
  Form Y = affine_entries(*X, lambda, M, p);
  for (Index e : masked) {
    Y.c(e) = -std::numeric_limits<double>::infinity();
    Y.A.row(e).setZero();
    Y.s(e) = 0;
  }
  return Y;
}

/// out = L·R (numpy matmul semantics, batch axes broadcast) where exactly one of L, R is a constant.
Form matmul_one_constant(const Operand& L, const Operand& R, const Shape& out, const Pass& p) {
  Shape a = *L.shape, b = *R.shape;
  const bool va = a.size() == 1, vb = b.size() == 1;
  if (va) a.insert(a.begin(), 1);
  if (vb) b.push_back(1);
  const Index m = Index(a[a.size() - 2]), k = Index(a.back()), n = Index(b.back());
  const Operand& C = L.constant() ? L : R;
  if (R.constant() && b.size() == 2) {  // a per-row map of L's rows: one dense product per row block
    Matrix<double> W(k, n);
    for (Index l = 0; l < k; ++l)
      for (Index j = 0; j < n; ++j) W(l, j) = (*R.data)[std::size_t(l * n + j)];
    Form Y = linear_rows(*L.form, L.size() / k, W, Vector<double>(), p);
    if (C.radius != 0) {  // output (row block t, column j) reads the k entries of L's row t
      std::vector<std::vector<Index>> reads(std::size_t(Y.size()));
      for (Index o = 0; o < Y.size(); ++o)
        for (Index l = 0; l < k; ++l) reads[std::size_t(o)].push_back((o / n) * k + l);
      widen_by_radius(Y, C.radius, reads, magnitudes(*L.form, p));
    }
    return Y;
  }
  const Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  const Shape batch(out.begin(), out.end() - (va ? 0 : 1) - (vb ? 0 : 1));
  const std::vector<Index> ma = broadcast_index(ba, batch), mb = broadcast_index(bb, batch);
  SparseRows rows;
  rows.terms.resize(ma.size() * std::size_t(m * n));
  for (std::size_t t = 0; t < ma.size(); ++t)
    for (Index i = 0; i < m; ++i)
      for (Index j = 0; j < n; ++j) {
        auto& terms = rows.terms[t * std::size_t(m * n) + std::size_t(i * n + j)];
        for (Index l = 0; l < k; ++l) {
          const Index ea = ma[t] * m * k + i * k + l, eb = mb[t] * k * n + l * n + j;
          const double w = L.constant() ? (*L.data)[std::size_t(ea)] : (*R.data)[std::size_t(eb)];
          if (w != 0 || C.radius != 0) terms.emplace_back(L.constant() ? eb : ea, w);
        }
      }
  const Form& X = L.constant() ? *R.form : *L.form;
  Form Y = sparse_linear(X, rows, p);
  if (C.radius != 0) {  // every term reads one entry of X, times a constant within the radius of w
    std::vector<std::vector<Index>> reads(rows.terms.size());
    for (std::size_t o = 0; o < reads.size(); ++o)
      for (const auto& term : rows.terms[o]) reads[o].push_back(term.first);
    widen_by_radius(Y, C.radius, reads, magnitudes(X, p));
  }
  return Y;
}

/// The transpose of a rows × cols constant or form operand, as an operand over `storage`.
Operand transposed(const Operand& x, Index rows, Index cols, Shape& shape, std::vector<double>& data,
                   Form& form) {
  shape = {cols, rows};
  std::vector<Index> idx(std::size_t(rows * cols));
  for (Index i = 0; i < cols; ++i)
    for (Index j = 0; j < rows; ++j) idx[std::size_t(i * rows + j)] = j * cols + i;
  Operand t{&shape};
  t.radius = x.radius;
  if (x.constant()) {
    data.resize(idx.size());
    for (std::size_t e = 0; e < idx.size(); ++e) data[e] = (*x.data)[std::size_t(idx[e])];
    t.data = &data;
  } else {
    form = gather_or_zero(*x.form, idx);
    t.form = &form;
  }
  return t;
}

/// Gemm: alpha·op(A)·op(B) + beta·C with one of A, B constant (and C constant).
Form gemm(const graph::Node& node, const std::vector<Operand>& in, const Shape& out, const Pass& p) {
  const auto& g = std::get<graph::GemmAttrs>(node.attributes);
  Shape sa, sb;
  std::vector<double> da, db;
  Form fa, fb;
  const Shape &A = *in[0].shape, &B = *in[1].shape;
  const Operand a = g.trans_a ? transposed(in[0], A[0], A[1], sa, da, fa) : in[0];
  const Operand b = g.trans_b ? transposed(in[1], B[0], B[1], sb, db, fb) : in[1];
  Form y = matmul_one_constant(a, b, out, p);
  const bool bias = in.size() > 2;
  if (g.alpha == 1 && !bias) return y;
  std::vector<I> M(std::size_t(y.size()), I(0.0));
  if (bias) {
    M = broadcast_values(in[2], out);
    for (I& v : M) v = I(g.beta) * v;
  }
  return affine_entries(y, std::vector<I>(std::size_t(y.size()), I(g.alpha)), M, p);
}

/// Conv (groups 1): the receptive field of each output position gathered as one row (zero rows for the
/// padding), then one dense product with the kernel as a (C·kh·kw) × M matrix, then moved to [M, OH, OW].
Form conv(const graph::Node& node, const std::vector<Operand>& in, const Shape& out, const Pass& p) {
  const auto& a = std::get<graph::ConvAttrs>(node.attributes);
  const Shape &x = *in[0].shape, &w = *in[1].shape;
  const Index C = Index(x[1]), H = Index(x[2]), W = Index(x[3]), M = Index(w[0]), kh = Index(w[2]),
              kw = Index(w[3]), OH = Index(out[2]), OW = Index(out[3]), T = C * kh * kw, P = OH * OW;
  std::vector<Index> idx(std::size_t(P * T), -1);
  for (Index oh = 0; oh < OH; ++oh)
    for (Index ow = 0; ow < OW; ++ow)
      for (Index c = 0; c < C; ++c)
        for (Index i = 0; i < kh; ++i)
          for (Index j = 0; j < kw; ++j) {
            const Index h = oh * a.strides[0] - a.pads[0] + i * a.dilations[0],
                        v = ow * a.strides[1] - a.pads[1] + j * a.dilations[1];
            if (h >= 0 && h < H && v >= 0 && v < W)
              idx[std::size_t((oh * OW + ow) * T + (c * kh + i) * kw + j)] = (c * H + h) * W + v;
          }
  Matrix<double> K(T, M);
  for (Index m = 0; m < M; ++m)
    for (Index t = 0; t < T; ++t) K(t, m) = (*in[1].data)[std::size_t(m * T + t)];
  Vector<double> b;
  if (in.size() > 2) {
    b.resize(M);
    for (Index m = 0; m < M; ++m) b(m) = (*in[2].data)[std::size_t(m)];
  }
  const Form patches = gather_or_zero(*in[0].form, idx);
  Form y = linear_rows(patches, P, K, b, p);  // entry q·M + m
  const double rw = in[1].radius, rb = in.size() > 2 ? in[2].radius : 0.0;
  if (rw != 0 || rb != 0) {  // entry q·M + m reads the T entries of patch q (zero rows: sup 0)
    std::vector<double> magnitude = magnitudes(patches, p);
    std::vector<std::vector<Index>> reads(std::size_t(y.size()));
    for (Index o = 0; o < y.size(); ++o)
      for (Index t = 0; t < T; ++t) reads[std::size_t(o)].push_back((o / M) * T + t);
    widen_by_radius(y, rw, reads, magnitude);
    for (Index o = 0; o < y.size(); ++o) y.s(o) = hi(I(y.s(o)) + I(rb));  // the bias's own radius
    y.forget();
  }
  std::vector<Index> back(std::size_t(M * P));
  for (Index m = 0; m < M; ++m)
    for (Index q = 0; q < P; ++q) back[std::size_t(m * P + q)] = q * M + m;
  return gather_or_zero(y, back);
}

/// BatchNormalization (inference): (x − mean)·scale/√(var + ε) + bias per channel (axis 1), as y = Λx + M
/// with Λ and M enclosed in interval64.
Form batch_norm(const graph::Node& node, const std::vector<Operand>& in, const Pass& p) {
  const double eps = std::get<graph::BatchNormAttrs>(node.attributes).epsilon;
  const Shape& x = *in[0].shape;
  Index outer = x[0], len = x.size() > 1 ? Index(x[1]) : 1, inner = 1;
  for (std::size_t k = 2; k < x.size(); ++k) inner *= Index(x[k]);
  std::vector<I> lambda(std::size_t(in[0].size())), M(lambda.size());
  for (Index c = 0; c < len; ++c) {
    const auto at = [&](int k) { return entry(in[std::size_t(k)], std::size_t(c)); };
    const I var = at(4) + I(eps);
    if (!(var.lower() > 0)) throw Vacuous{};
    const I factor = at(1) / sqrt(var), shift = at(2) - at(3) * factor;
    for (Index o = 0; o < outer; ++o)
      for (Index i = 0; i < inner; ++i) {
        const std::size_t e = std::size_t((o * len + c) * inner + i);
        lambda[e] = factor;
        M[e] = shift;
      }
  }
  return affine_entries(*in[0].form, lambda, M, p);
}

/// ReduceMean: the sum over the reduced axes (sparse_linear), then times 1/count in interval64.
Form reduce_mean(const graph::Node& node, const Operand& x, const Shape& out, const Pass& p) {
  const auto& a = std::get<graph::ReduceMeanAttrs>(node.attributes);
  const Shape& s = *x.shape;
  Shape kept = s;
  for (std::int64_t k : a.axes) kept[std::size_t(k)] = 1;
  std::vector<Index> stride(s.size(), 0);
  Index step = 1;
  for (std::size_t k = s.size(); k-- > 0;) {
    stride[k] = kept[k] == 1 ? 0 : step;
    step *= Index(kept[k]);
  }
  SparseRows rows;
  rows.terms.resize(std::size_t(graph::element_count(out)));
  std::vector<std::int64_t> idx(s.size(), 0);
  for (Index e = 0; e < x.size(); ++e) {
    Index o = 0;
    for (std::size_t k = 0; k < s.size(); ++k) o += Index(idx[k]) * stride[k];
    rows.terms[std::size_t(o)].emplace_back(e, 1.0);
    for (std::size_t k = s.size(); k-- > 0;) {
      if (++idx[k] < s[k]) break;
      idx[k] = 0;
    }
  }
  const Form sum = sparse_linear(*x.form, rows, p);
  const double count = double(x.size() / Index(rows.terms.size()));
  return affine_entries(sum, I(1.0) / I(count), std::vector<I>(std::size_t(sum.size()), I(0.0)), p);
}

}  // namespace

Form linear_node(const graph::Node& node, const std::vector<Operand>& in, const Shape& out, const Pass& p) {
  using graph::Op;
  switch (node.op) {
    case Op::conv:
      return conv(node, in, out, p);
    case Op::matmul:
      return matmul_one_constant(in[0], in[1], out, p);
    case Op::gemm:
      return gemm(node, in, out, p);
    case Op::batch_norm:
      return batch_norm(node, in, p);
    case Op::reduce_mean:
      return reduce_mean(node, in[0], out, p);
    case Op::neg:
      return affine_entries(*in[0].form, I(-1.0), std::vector<I>(std::size_t(in[0].size()), I(0.0)), p);
    case Op::add:
    case Op::sub:
    case Op::mul:
    case Op::div: {
      const bool first = in[0].constant();
      return with_constant(node.op, first ? in[1] : in[0], first ? in[0] : in[1], first, out, p);
    }
    default:
      throw std::logic_error("linear_node: not a linear node");
  }
}

}  // namespace regatta::operators::affine::gp
