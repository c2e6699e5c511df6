// Havens et al. (2024), the exact identities behind δ (docs/math/bounds.md#havens-xi,
// docs/math/bounds.md#havens-kappa): havens.xi_exact,
// havens.score_identity. Machinery: havens.hpp.
#include "havens.hpp"

namespace regatta::proofs::claims::havens {

namespace {

// =========================================================================================================
// havens.xi_exact
// =========================================================================================================

class XiExact final : public ClaimBase<XiExact> {
 public:
  XiExact() {
    info_.id = "havens.xi_exact";
    info_.default_samples = 8192;  // fixed count: about a second of search
    info_.statement =
        "max_{||E||_F <= eps} ||E W^skip + sum_h P_h(X) E W^VO_h||_F = eps xi(X), xi(X) = ||I_n (x) "
        "(W^skip)^T + sum_h P_h(X) (x) (W^VO_h)^T||_2, attained at the top singular vector.";
    info_.latex =
        "$\\max_{\\|E\\|_F\\le\\varepsilon}\\|EW^{\\rm "
        "skip}+\\sum_hP_h(X)EW^{VO}_h\\|_F=\\varepsilon\\,\\xi(X)$, "
        "attained at the top singular vector";
    info_.source = "derived";
    info_.hypotheses = layer_hypotheses;
    info_.expected = Expected::identity;
    info_.kind = StatementKind::identity;
    info_.parts = {
        equal("||T_1(eps v*)||_F = eps ||Kronecker matrix||_2 at its top right singular vector v*"),
        equal("T_1(E) (matrix-free) = (I_n (x) W^skip^T + sum_h P_h (x) W^VO_h^T) vec(E)"),
        equal("F(X + E) - F(X) = T_1 + T_2, T_2 = sum_h (P_h(X + E) - P_h(X)) (X + E) W^VO_h")};
    info_.families = {"one_hot_rows"};
    info_.evaluated_at =
        havens_norms_evaluation +
        " The first part is evaluated at v, the mpfr approximation of the top singular vector v*: the "
        "interval "
        "enclosures of ||T_1(eps v)||_F and of eps ||K||_2 both hold eps ||K v||/||v||, so their difference "
        "contains 0 and its certified magnitude bounds the defect at v, approximation error included.";
    info_.notes =
        "The Kronecker matrix is formed from explicit Kronecker products of the kernels P_h computed here "
        "from the scores; its norm is the certified spectral norm of this file (interval: a witness at "
        "the working-precision top singular vector, an interval Cholesky certificate above). v* is the top "
        "eigenvector of K^T K at the working precision (mpfr), so the "
        "maximum is attained up to rounding at every precision; together with the second part (the "
        "Kronecker matrix is the matrix of T_1) this is the statement, since max ||K v|| over the unit "
        "sphere is ||K||_2 by definition. The third part checks the decomposition of "
        "docs/math/bounds.md#havens-xi against the "
        "library forward pass (biases included: they cancel because P 1 = 1).";
  }
  const ClaimInfo& info() const override { return info_; }
  bool searchable() const override { return false; }
  Point sample(Rng& rng) const override {
    const Shape s = sample_shape(rng, ShapeRange{});
    return make_perturbed(rng, s, sample_scales(rng), sample_eps(rng), false, 0, 0);
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name != "one_hot_rows") return out;
    std::uint64_t seed = 9101;
    for (bool residual : {false, true}) {  // large scores: nearly one-hot kernel rows
      Rng rng(seed++);
      Shape s;
      s.n = 4;
      s.d = 3;
      s.heads = 2;
      s.dh = 2;
      s.dv = 2;
      s.residual = residual;
      out.push_back(make_perturbed(rng, s, Draw{4.0, 1.0, 4.0}, 0.1, false, 0, 0));
    }
    return out;
  }
  void repair(Point& p) const override { repair_perturbed(p); }
  nlohmann::json describe(const Point& p) const override { return describe_perturbed(p); }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const Perturbed q = decode(pt);
    const Block<S> block(q.layer, q.options);
    const Weights<S> w = weights_of<S>(q.layer, q.options);
    const Matrix<S> X = num::lift_matrix<S>(q.X);
    const S eps = lift<S>(q.eps);
    const long n = q.shape.n, d = q.shape.d;
    const std::vector<Matrix<S>> P = kernels<S>(w, X);
    const Matrix<S> K = xi_matrix<S>(w, P, d);
    // Attained: T_1 at ε v*/‖v*‖ against ε ‖K‖₂.
    const Vector<S> v = top_right_vector<S>(K);
    const Matrix<S> Estar = unvec<S>(v, n, d) * (eps / num::euclidean_norm<S>(v));
    const S attained = num::frobenius<S>(xi_apply<S>(w, P, Estar));
    // Matrix of T_1 at the point's E.
    const Matrix<S> E = unit<S>(q.U) * eps;
    const Matrix<S> T1 = xi_apply<S>(w, P, E);
    // Decomposition against the library forward.
    const Matrix<S> Xp = X + E;
    const std::vector<Matrix<S>> Pp = kernels<S>(w, Xp);
    Matrix<S> T2 = Matrix<S>::Zero(n, d);
    for (long h = 0; h < w.heads; ++h) T2 += num::mul<S>(Matrix<S>(Pp[h] - P[h]), num::mul<S>(Xp, w.WVO[h]));
    const Matrix<S> change = block.forward(Xp) - block.forward(X);
    return {eq<S>(attained, eps * spec<S>(K)),
            eq<S>(relative_defect(Matrix<S>(vec<S>(T1)), apply<S>(K, E)), S(0)),
            eq<S>(relative_defect(Matrix<S>(T1 + T2), change), S(0))};
  }

 private:
  ClaimInfo info_;
};

// =========================================================================================================
// havens.score_identity
// =========================================================================================================

class ScoreIdentity final : public ClaimBase<ScoreIdentity> {
 public:
  ScoreIdentity() {
    info_.id = "havens.score_identity";
    info_.default_samples = 16384;  // fixed count: about a second of search
    info_.statement =
        "S(X + E) - S(X) = E A X^T + X A E^T + E A E^T exactly; ||S(X') - S(X)||_F <= eps kappa(X) + eps^2 "
        "||A||_2 (holds); the Kronecker form of kappa equals the matrix-free operator.";
    info_.latex =
        "$S(X+E)-S(X)=EAX^\\top+XAE^\\top+EAE^\\top$; "
        "$\\|\\cdot\\|_F\\le\\varepsilon\\kappa(X)+\\varepsilon^2"
        "\\|A\\|_2$; Kronecker form of $\\kappa$ = matrix-free operator";
    info_.source = "derived";
    info_.hypotheses = {
        "scores S_h = (X W^Q_h + 1 b_Q^T)(X W^K_h + 1 b_K^T)^T / sqrt(d_h) of each head, H in {1, 2}",
        "with a query bias, X A_h E^T becomes B_h E^T, B_h = X A_h + 1 b_Q^T W^K^T / sqrt(d_h) ("
        "docs/math/bounds.md#havens-kappa); a key bias adds the row-constant E W^Q b_K 1^T / sqrt(d_h), "
        "which the softmax ignores",
        "the norm bound is checked where there is no key bias (a row constant is not bounded by kappa) and "
        "d >= 2: at d = 1 it is attained at E = eps X/||X||_F (an equality interval arithmetic cannot "
        "certify)"};
    info_.expected = Expected::identity;
    info_.kind = StatementKind::identity;
    info_.parts = {
        equal("S_h(X + E) - S_h(X) = E A_h X^T + B_h E^T + E A_h E^T (+ key-bias row constant), all heads"),
        at_most(
            "max_h ||S_h(X + E) - S_h(X)||_F / (eps kappa_h + eps^2 ||A_h||_2) <= 1 (no key bias, d >= 2)"),
        equal("(I_n (x) X A_h^T + (B_h (x) I_n) K_{n,d}) vec(E) = vec(E A_h X^T + B_h E^T), all heads")};
    info_.families = {"kappa_top"};
    info_.evaluated_at =
        havens_norms_evaluation +
        " Family kappa_top puts a double top singular vector of kappa into U: a coordinate of the point.";
    info_.notes =
        "Scores are formed directly from their definition at X and X + E; the expansion from A_h, B_h; "
        "kappa_h is the spectral norm of the explicit Kronecker matrix built from Kronecker products and "
        "the commutation matrix K_{n,d} (row-major vectorisation). Family kappa_top: E along the top right "
        "singular vector of the kappa matrix of head 1, eps in {0.001, 0.1}.";
  }
  const ClaimInfo& info() const override { return info_; }
  Point sample(Rng& rng) const override {
    const Shape s = sample_shape(rng, ShapeRange{});
    return make_perturbed(rng, s, sample_scales(rng), sample_eps(rng), false, 0, 0);
  }
  std::vector<Point> family(const std::string& name) const override {
    std::vector<Point> out;
    if (name != "kappa_top") return out;
    std::uint64_t seed = 9201;
    for (double eps : {1e-3, 0.1})
      for (long biases : {0L, 1L}) {
        Rng rng(seed++);
        Shape s;
        s.n = 4;
        s.d = 3;
        s.heads = 1;
        s.dh = 2;
        s.dv = 3;
        s.biases = biases;
        Point p = make_perturbed(rng, s, Draw{1.5, 1.0, 1.0}, eps, false, 0, 0);
        const Perturbed q = decode(p);
        const Weights<double> w = weights_of<double>(q.layer, q.options);
        const auto [C, B] = score_factors<double>(w, 0, q.X);
        const Mat V = unvec<double>(top_right_vector<double>(kappa_matrix<double>(C, B)), s.n, s.d);
        const std::size_t u_at = perturbed_layout(s).at("U");  // V into U, row-major as the block
        std::copy(V.data(), V.data() + V.size(), p.x.begin() + static_cast<std::ptrdiff_t>(u_at));
        out.push_back(p);
      }
    return out;
  }
  void repair(Point& p) const override { repair_perturbed(p); }
  nlohmann::json describe(const Point& p) const override { return describe_perturbed(p); }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const Perturbed q = decode(pt);
    const Weights<S> w = weights_of<S>(q.layer, q.options);
    const Matrix<S> X = num::lift_matrix<S>(q.X);
    const S eps = lift<S>(q.eps);
    const Matrix<S> E = unit<S>(q.U) * eps;
    const Matrix<S> Et = E.transpose();
    S identity_defect(0), kron_defect(0), worst(0);
    for (long h = 0; h < w.heads; ++h) {
      const Matrix<S> direct = scores<S>(w, h, Matrix<S>(X + E)) - scores<S>(w, h, X);
      const auto [C, B] = score_factors<S>(w, h, X);
      const Matrix<S> L = kappa_apply<S>(C, B, E);
      Matrix<S> expansion = L + num::mul<S>(num::mul<S>(E, w.A[h]), Et);
      if (w.bK[h].size() != 0) {
        const Matrix<S> r = num::mul<S>(num::mul<S>(E, w.WQ[h]), Matrix<S>(w.bK[h])) * w.scale;  // n×1
        expansion += num::mul<S>(r, Matrix<S>(Matrix<S>::Ones(1, q.shape.n)));
      }
      identity_defect += relative_defect(expansion, direct);
      const Matrix<S> K = kappa_matrix<S>(C, B);
      kron_defect += relative_defect(apply<S>(K, E), Matrix<S>(vec<S>(L)));
      if (w.bK[h].size() == 0)
        worst =
            num::smax<S>(worst, num::frobenius<S>(direct) / (eps * spec<S>(K) + eps * eps * spec<S>(w.A[h])));
    }
    const Side<S> bound = q.shape.biases == 2 || q.shape.d == 1 ? off<S>() : le<S>(worst, S(1));
    return {eq<S>(identity_defect, S(0)), bound, eq<S>(kron_defect, S(0))};
  }

 private:
  ClaimInfo info_;
};

}  // namespace

REGATTA_REGISTER_CLAIM(XiExact);
REGATTA_REGISTER_CLAIM(ScoreIdentity);

}  // namespace regatta::proofs::claims::havens
