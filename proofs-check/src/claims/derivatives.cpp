// Derivative claims against the library's Jacobian engine (operators/differentiable.hpp): kim.l2_jacobian
// (the block and factorised formulas of docs/math/jacobian.md#l2-tied-derivatives) and attn.derivatives
// (JVP/VJP duality, central
// differences, dense Jacobian against the checker's independent attention map).
#include <cmath>

#include <regatta/operators/differentiable.hpp>
#include <regatta/proofs/detail/attention_map.hpp>
#include "common.hpp"
#include "layout.hpp"

namespace regatta::proofs::claims {

namespace {

using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Block;

/// h = 2^(−digits/3): central differences then have truncation and rounding errors of order 2^(−2 digits/3).
template <class S>
S difference_step() {
  S h(1);
  for (int k = 0; k < scalar_traits<S>::digits() / 3; ++k) h /= S(2);
  return h;
}

Part central_differences(std::string name) {
  Part p = equal(std::move(name), 48);
  p.precision_exponent = 2.0 / 3.0;
  p.exact = false;
  return p;
}

// ---------------------------------------------------------------------------------------------------------
// kim.l2_jacobian — point: k = {n, d, d_h}; x = (X (n×d), W (d×d_h))
// ---------------------------------------------------------------------------------------------------------

class L2Jacobian final : public ClaimBase<L2Jacobian> {
 public:
  L2Jacobian() {
    info_.id = "kim.l2_jacobian";
    info_.default_samples = 16384;  // fixed count: about a second of search
    info_.statement =
        "For tied L2 attention f = P X A (A = W W^T / sqrt(d_h)), "
        "the block formula J_ij = A[2 P_ij (x_j - m_i)(x_i - x_j)^T A + P_ij I] (j != i), "
        "J_ii = A[2 Cov_i A + P_ii I] "
        "and the factorised formula J_ij = (W/d_h^(1/4)) K_ij (W^T/d_h^(1/4)) + P_ij A "
        "equal the JVP columns and central differences.";
    info_.latex =
        "$J_{ij}=A[2P_{ij}(x_j-m_i)(x_i-x_j)^\\top A+P_{ij}I]$, $J_{ii}=A[2\\mathrm{Cov}_iA+P_{ii}I]$; "
        "$J_{ij}=\\frac{W}{d_h^{1/4}}K_{ij}\\frac{W^\\top}{d_h^{1/4}}+P_{ij}A$";
    info_.source = "derived";
    info_.hypotheses = {"single tied L2 head, values X A (W^V = W^O = I)", "no mask"};
    info_.expected = Expected::identity;
    info_.kind = StatementKind::identity;
    info_.parts = {
        equal("factorised formula = library JVP columns (relative Frobenius defect)"),
        equal("block formula = library JVP columns (relative Frobenius defect)"),
        central_differences("central differences of the library forward = JVP columns (h = 2^(-p/3))")};
    info_.families = {"near_coincident"};
    info_.notes =
        "The JVP columns are operators::dense_jacobian(Block::linearize(X)) of a one-head tied L2 layer with "
        "W^V = W^O = I; P, m_i, Cov_i, z and K are formed here from their definitions. The full multi-head "
        "form J^F = Σ_h (W^O_h)ᵀ(W^V_h)ᵀ J^h is exercised by attn.derivatives (dense Jacobian against the "
        "checker's attention map).";
  }
  const ClaimInfo& info() const override { return info_; }
  bool searchable() const override { return false; }
  const Keys keys{"n", "d", "head_dim"};
  static Layout layout(long n, long d, long dh) { return Layout().add("X", n, d).add("W", d, dh); }
  Layout layout(const Point& p) const {
    return layout(keys.of(p, "n"), keys.of(p, "d"), keys.of(p, "head_dim"));
  }
  Point sample(Rng& rng) const override {
    Point p;
    const long n = rng.integer(1, 6), d = rng.integer(1, 3), dh = rng.integer(1, d);
    p.k = {n, d, dh};
    const Layout l = layout(n, d, dh);
    l.fill(p.x, "X", [&] { return rng.corner(1.0); });
    const double ws = std::pow(10.0, rng.uniform(std::log10(0.3), std::log10(3.0)));
    l.fill(p.x, "W", [&] { return ws * rng.normal(); });
    return p;
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "near_coincident")
      out.push_back(Point{{0.5, 0.5, 0.5 + 1e-7, 0.5, -1, 2, 0.8, -0.3, 0.4, 1.1}, {3, 2, 2}});
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    using std::sqrt;
    const long n = keys.of(pt, "n"), d = keys.of(pt, "d"), dh = keys.of(pt, "head_dim");
    const Layout l = layout(pt);
    l.check(pt);
    AttentionLayer layer;
    layer.d = static_cast<int>(d);
    layer.heads = 1;
    layer.head_dim = static_cast<int>(dh);
    layer.value_dim = static_cast<int>(d);
    layer.kind = AttentionKind::l2;
    const Matrix<double> Wd = l.matrix<double>(pt, "W");
    layer.WQ = {Wd};
    layer.WK = {Wd};
    layer.WV = {Matrix<double>::Identity(d, d)};
    layer.WO = Matrix<double>::Identity(d, d);
    const Block<S> block(layer);
    const Matrix<S> X = l.matrix<S>(pt, "X"), W = l.matrix<S>(pt, "W");
    const Matrix<S> Jlib = operators::dense_jacobian(block.linearize(X));
    const S root4 = sqrt(sqrt(lift<S>(static_cast<double>(dh))));
    const Matrix<S> Wn = W / root4;                                  // W / d_h^(1/4)
    const Matrix<S> A = num::mul<S>(Wn, Matrix<S>(Wn.transpose()));  // W Wᵀ/√d_h
    const Matrix<S> Z = num::mul<S>(X, Wn);                          // rows z_kᵀ
    Matrix<S> Jfac(n * d, n * d), Jblock(n * d, n * d);
    for (long i = 0; i < n; ++i) {
      std::vector<S> s(static_cast<std::size_t>(n));
      for (long k = 0; k < n; ++k) {
        S t(0);
        for (long c = 0; c < dh; ++c) t += num::sq<S>(Z(i, c) - Z(k, c));
        s[k] = -t;
      }
      const std::vector<S> P = num::softmax(s);
      Vector<S> nu = Vector<S>::Zero(dh), m = Vector<S>::Zero(d);
      for (long k = 0; k < n; ++k) {
        nu += P[k] * Vector<S>(Z.row(k).transpose());
        m += P[k] * Vector<S>(X.row(k).transpose());
      }
      Matrix<S> covz = Matrix<S>::Zero(dh, dh), covx = Matrix<S>::Zero(d, d);
      for (long k = 0; k < n; ++k) {
        const Vector<S> cz = Z.row(k).transpose() - nu, cx = X.row(k).transpose() - m;
        covz += P[k] * num::mul<S>(Matrix<S>(cz), Matrix<S>(cz.transpose()));
        covx += P[k] * num::mul<S>(Matrix<S>(cx), Matrix<S>(cx.transpose()));
      }
      for (long j = 0; j < n; ++j) {
        Matrix<S> K, inner;
        if (j == i) {
          K = S(2) * covz;
          inner = S(2) * num::mul<S>(covx, A);
        } else {
          const Vector<S> a = Z.row(j).transpose() - nu, b = Z.row(i).transpose() - Z.row(j).transpose();
          K = S(2) * P[j] * num::mul<S>(Matrix<S>(a), Matrix<S>(b.transpose()));
          const Vector<S> ax = X.row(j).transpose() - m, bx = X.row(i).transpose() - X.row(j).transpose();
          inner = S(2) * P[j] * num::mul<S>(num::mul<S>(Matrix<S>(ax), Matrix<S>(bx.transpose())), A);
        }
        for (long a = 0; a < d; ++a) inner(a, a) += P[j];
        Jfac.block(i * d, j * d, d, d) =
            num::mul<S>(num::mul<S>(Wn, K), Matrix<S>(Wn.transpose())) + P[j] * A;
        Jblock.block(i * d, j * d, d, d) = num::mul<S>(A, inner);
      }
    }
    // Central differences of the library forward.
    const S h = difference_step<S>();
    Matrix<S> Jfd(n * d, n * d);
    for (long j = 0; j < n; ++j)
      for (long b = 0; b < d; ++b) {
        Matrix<S> Xp = X, Xm = X;
        Xp(j, b) += h;
        Xm(j, b) -= h;
        const Matrix<S> diff = (block.forward(Xp) - block.forward(Xm)) / (S(2) * h);
        for (long i = 0; i < n; ++i)
          for (long a = 0; a < d; ++a) Jfd(i * d + a, j * d + b) = diff(i, a);
      }
    return {eq<S>(relative_defect(Jfac, Jlib), S(0)), eq<S>(relative_defect(Jblock, Jlib), S(0)),
            eq<S>(relative_defect(Jfd, Jlib), S(0))};
  }

 private:
  ClaimInfo info_;
};

// ---------------------------------------------------------------------------------------------------------
// attn.derivatives — point: k = {n, d, heads, kind (0 dot, 1 l2), causal, residual, prenorm (0, 1 LN, 2 RMS),
// seed}; x = (X (n×d), weight scale)
// ---------------------------------------------------------------------------------------------------------

class Derivatives final : public ClaimBase<Derivatives> {
 public:
  Derivatives() {
    info_.id = "attn.derivatives";
    info_.default_samples = 32768;  // fixed count: about a second of search
    info_.statement =
        "For dot-product and L2 attention, every head, masks, residual, LayerNorm/RMSNorm: JVP = central "
        "differences; <J Xdot, Ybar> = <Xdot, J^T Ybar>; dense Jacobian columns = JVPs; the block formulas; "
        "cross-attention and the measure derivatives of docs/math/jacobian.md#measure-derivatives.";
    info_.latex =
        "$\\mathrm{JVP}=$ central differences; $\\langle J\\dot X,\\bar Y\\rangle=\\langle\\dot "
        "X,J^\\top\\bar Y"
        "\\rangle$; dense Jacobian = JVP columns = block formulas";
    info_.source = "derived";
    info_.hypotheses = {"self-attention blocks of operators::Block (random layers, no biases)",
                        "causal mask, residual and pre-norm (LayerNorm / RMSNorm) as sampled"};
    info_.expected = Expected::identity;
    info_.kind = StatementKind::identity;
    info_.parts = {
        equal("<JVP(Xdot), Ybar> = <Xdot, VJP(Ybar)>  (relative)"),
        central_differences("JVP(Xdot) = central differences of the forward (h = 2^(-p/3))"),
        equal("dense Jacobian (library) = JVP-rule Jacobian of the checker's attention map (no pre-norm)"),
        equal("VJP(Ybar) = J^T Ybar with the library's dense J")};
    info_.families = {"one_hot_rows"};
    info_.notes =
        "Checked here: duality, central differences, the library's dense Jacobian against the checker's "
        "independent materialised attention map (detail::AttentionMap: dot and tied L2, causal, residual), "
        "and VJP against the transposed dense Jacobian. Not evaluated by this claim: cross-attention "
        "(query-only, context-only), untied L2, Sinkhorn blocks and the measure derivatives of "
        "docs/math/jacobian.md#measure-derivatives; those "
        "are covered by the operators test-suite.";
  }
  const ClaimInfo& info() const override { return info_; }
  bool searchable() const override { return false; }
  // kind: 0 dot, 1 tied L2; prenorm: 0 none, 1 layernorm, 2 rmsnorm; seed: of the random layer's weights.
  const Keys keys{"n", "d", "heads", "kind", "causal", "residual", "prenorm", "seed"};
  static Layout layout(long n, long d) { return Layout().add("X", n, d).add("weight_scale", 1); }
  Layout layout(const Point& p) const { return layout(keys.of(p, "n"), keys.of(p, "d")); }
  Point sample(Rng& rng) const override {
    Point p;
    const long heads = rng.integer(1, 2), d = heads * rng.integer(1, 2), n = rng.integer(1, 5);
    p.k = {n,
           d,
           heads,
           rng.integer(0, 1),
           rng.integer(0, 1),
           rng.integer(0, 1),
           rng.integer(0, 2),
           static_cast<long>(rng.integer(0, 1000))};
    const Layout l = layout(n, d);
    l.fill(p.x, "X", [&] { return rng.corner(1.0); });
    l.fill(p.x, "weight_scale", [&] { return std::pow(10.0, rng.uniform(-0.5, 0.7)); });
    return p;
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name == "one_hot_rows")  // large, well separated tokens: softmax rows nearly one-hot
      for (long kind : {0L, 1L})
        out.push_back(Point{{6, 0, 0, 6, -6, 0, 3, 3, 4}, {4, 2, 1, kind, 1, 1, 0, 5}});
    return out;
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    if (pt.k.size() != keys.size()) throw InputError("point", "wrong size");
    const long n = keys.of(pt, "n"), d = keys.of(pt, "d"), heads = keys.of(pt, "heads"),
               prenorm = keys.of(pt, "prenorm");
    const auto seed = static_cast<std::uint64_t>(keys.of(pt, "seed"));
    const Layout l = layout(pt);
    l.check(pt);
    operators::RandomLayerSpec spec;
    spec.d = static_cast<int>(d);
    spec.heads = static_cast<int>(heads);
    spec.kind = keys.of(pt, "kind") == 0 ? AttentionKind::dot : AttentionKind::l2;
    spec.seed = seed;
    spec.scale = l.raw(pt, "weight_scale");
    const AttentionLayer layer = operators::random_layer(spec);
    AttentionOptions options;
    options.causal = keys.of(pt, "causal") != 0;
    options.residual = keys.of(pt, "residual") != 0;
    options.prenorm = prenorm == 0   ? operators::Prenorm::none
                      : prenorm == 1 ? operators::Prenorm::layernorm
                                     : operators::Prenorm::rmsnorm;
    const Block<S> block(layer, options);
    const Matrix<S> X = l.matrix<S>(pt, "X");
    Rng rng(seed + 17);
    Matrix<S> Xdot(n, d), Ybar(n, d);
    for (long i = 0; i < n; ++i)
      for (long a = 0; a < d; ++a) {
        Xdot(i, a) = lift<S>(rng.normal());
        Ybar(i, a) = lift<S>(rng.normal());
      }
    const operators::Linearization<S> lin = block.linearize(X);
    const Matrix<S> jv = lin.jvp(Xdot), vj = lin.vjp(Ybar);
    S left(0), right(0), scale(0);
    for (long i = 0; i < n; ++i)
      for (long a = 0; a < d; ++a) {
        left += jv(i, a) * Ybar(i, a);
        right += Xdot(i, a) * vj(i, a);
        scale += num::sabs<S>(jv(i, a) * Ybar(i, a));
      }
    const S h = difference_step<S>();
    const Matrix<S> fd =
        (block.forward(Matrix<S>(X + Xdot * h)) - block.forward(Matrix<S>(X - Xdot * h))) / (S(2) * h);
    const Matrix<S> J = operators::dense_jacobian(lin);
    Vector<S> yflat(n * d);
    for (long i = 0; i < n; ++i)
      for (long a = 0; a < d; ++a) yflat(i * d + a) = Ybar(i, a);
    const Matrix<S> jt = num::mul<S>(Matrix<S>(J.transpose()), Matrix<S>(yflat));
    Matrix<S> vflat(n * d, 1);
    for (long i = 0; i < n; ++i)
      for (long a = 0; a < d; ++a) vflat(i * d + a, 0) = vj(i, a);
    Side<S> independent = off<S>();
    if (options.prenorm == operators::Prenorm::none) {
      using std::sqrt;
      detail::AttentionMap<S> map;
      map.kind = spec.kind == AttentionKind::dot ? detail::ScoreKind::dot : detail::ScoreKind::l2;
      map.mask = options.causal ? detail::MaskKind::causal : detail::MaskKind::none;
      const S c = S(1) / sqrt(lift<S>(static_cast<double>(layer.head_dim)));
      for (int hh = 0; hh < layer.heads; ++hh) {
        const Matrix<S> WQ = num::lift_matrix<S>(layer.WQ[hh]), WK = num::lift_matrix<S>(layer.WK[hh]);
        const Matrix<S> WOh =
            num::lift_matrix<S>(Matrix<double>(layer.WO.middleRows(hh * layer.value_dim, layer.value_dim)));
        Matrix<S> wval = num::mul<S>(num::lift_matrix<S>(layer.WV[hh]), WOh);
        if (spec.kind == AttentionKind::l2)
          wval = num::mul<S>(Matrix<S>(num::mul<S>(WQ, Matrix<S>(WQ.transpose())) * c), wval);
        map.heads.push_back({WQ, WK, wval, c});
      }
      if (options.residual) map.skip = Matrix<S>::Identity(d, d);
      independent = eq<S>(relative_defect(map.jacobian(X), J), S(0));
    }
    return {eq<S>((left - right) / (S(1) + scale), S(0)), eq<S>(relative_defect(fd, jv), S(0)), independent,
            eq<S>(relative_defect(vflat, jt), S(0))};
  }

 private:
  ClaimInfo info_;
};

}  // namespace

REGATTA_REGISTER_CLAIM(L2Jacobian);
REGATTA_REGISTER_CLAIM(Derivatives);

}  // namespace regatta::proofs::claims
