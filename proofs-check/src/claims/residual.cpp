// resid.fixed_point_inversion (docs/math/attention.md#residual-inversion, operators/inversion.hpp): Banach's
// a priori and
// a posteriori bounds for the fixed-point inversion of F = id + g, and the bi-Lipschitz constants 1 ± L of F,
// on contractive L2 attention g = c·F_L2/B₂ (Frobenius norms throughout).
//
// B₂ is the certified upper end of the library's kim.thm32_2 bound (lip::evaluate<interval>, evaluated at a
// fixed 128 bits and rounded up to a double), so Lip₂(g) ≤ c·Lip₂(F_L2)/B₂ ≤ c =: L exactly; g is evaluated
// in S with the library's generic block (operators::Block<S>::forward), scaled by c/B₂ in S. The fixed point
// is exact: Y = X* + g(X*) is built from the chosen X*, so ‖X⁽ᵏ⁾ − X*‖ needs no reference solve. The
// iteration X⁽⁰⁾ = Y, X⁽ᵏ⁺¹⁾ = Y − g(X⁽ᵏ⁾) runs in S (interval: enclosures of the exact iterates).
//
// Resolution: the errors ‖X⁽ᵏ⁾ − X*‖ fall like (true contraction)ᵏ, and once a step is below the rounding of
// the double search its ratio there is noise. A point therefore tests the iterations k ≤ K whose step
// ‖X⁽ᵏ⁾ − X⁽ᵏ⁻¹⁾‖ is at least 2^(−24)(1 + ‖Y‖) in a double pre-run (a deterministic function of the point,
// the same for every scalar type), and the bi-Lipschitz pair only when ‖X′ − X‖ ≥ 2^(−24)(1 + ‖X*‖).
#include <algorithm>
#include <array>
#include <cmath>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>
#include "common.hpp"
#include "layout.hpp"

namespace regatta::proofs::claims {

namespace {

using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Block;

/// Bits of the interval evaluation of B₂ (fixed, so that g is the same map at every working precision).
constexpr unsigned bound_bits = 128;
/// Steps and pair distances below this fraction of the point's scale are not resolved by the double search.
constexpr double resolution = 0x1.0p-24;
/// Largest iteration count of a point (keeps interval widths far below the tested errors).
constexpr long max_iterations = 10;
/// The adversarial search stays in a box (the thm31 inputs reach 1024); c stays in [c_min, c_max].
constexpr double coordinate_box = 2048.0;
constexpr double c_min = 0.01, c_max = 0.995;

/// Point: k = {n, d, H, d_h, K, causal}; x = (X* (n×d), D (n×d), W^Q_h (d×d_h) for each h, W^V_h (d×d_h) for
/// each h, W^O ((H·d_h)×d), c). The pair of the bi-Lipschitz parts is (X*, X* + D).
const Keys keys{"n", "d", "H", "d_h", "K", "causal"};

Layout layout_of(long n, long d, long H, long dh) {
  Layout l;
  l.add("X_star", n, d).add("D", n, d);
  for (long h = 0; h < H; ++h) l.add(indexed("WQ", h), d, dh);
  for (long h = 0; h < H; ++h) l.add(indexed("WV", h), d, dh);
  return l.add("WO", H * dh, d).add("c", 1);
}
Layout layout_of(const Point& p) {
  return layout_of(keys.of(p, "n"), keys.of(p, "d"), keys.of(p, "H"), keys.of(p, "d_h"));
}

struct Shape {
  long n, d, H, dh, K;
  bool causal;
  Layout layout() const { return layout_of(n, d, H, dh); }
};

Shape shape_of(const Point& p) {
  const Shape s{keys.of(p, "n"),   keys.of(p, "d"), keys.of(p, "H"),
                keys.of(p, "d_h"), keys.of(p, "K"), keys.of(p, "causal") != 0};
  if (s.n < 2 || s.d < 1 || s.H < 1 || s.dh < 1 || s.K < 1 || s.K > max_iterations ||
      p.x.size() != s.layout().size())
    throw InputError("point", "inconsistent shape (n >= 2, 1 <= K <= 10)");
  return s;
}

AttentionLayer layer_of(const Point& p, const Shape& s) {
  AttentionLayer layer;
  layer.d = static_cast<int>(s.d);
  layer.heads = static_cast<int>(s.H);
  layer.head_dim = layer.value_dim = static_cast<int>(s.dh);
  layer.kind = AttentionKind::l2;
  const Layout l = s.layout();
  for (long h = 0; h < s.H; ++h) layer.WQ.push_back(l.matrix<double>(p, indexed("WQ", h)));
  layer.WK = layer.WQ;
  for (long h = 0; h < s.H; ++h) layer.WV.push_back(l.matrix<double>(p, indexed("WV", h)));
  layer.WO = l.matrix<double>(p, "WO");
  return layer;
}

/// The certified B₂ of the layer at length n (upper end of the interval kim.thm32_2 bound, rounded up).
double certified_b2(const AttentionLayer& layer, const AttentionOptions& options, long n) {
  PrecisionGuard guard(bound_bits);
  lip::BoundSetting setting;
  setting.n = n;
  return num::upper_double(lip::evaluate<interval>(lip::Bound::kim_two, layer, options, setting));
}

/// Everything about a point that is computed in double and fixed for every scalar type.
struct Setup {
  Shape shape;
  AttentionLayer layer;
  AttentionOptions options;
  double c = 0, B = 0;
  long resolved = 0;     ///< iterations k ≤ K whose steps are resolved (0: the iteration parts are off)
  bool pair_ok = false;  ///< the bi-Lipschitz pair is resolved
};

Setup setup_of(const Point& p) {
  Setup s{shape_of(p), {}, {}, 0, 0, 0, false};
  s.layer = layer_of(p, s.shape);
  s.options.causal = s.shape.causal;
  const Layout l = s.shape.layout();
  s.c = l.raw(p, "c");
  if (!(s.c > 0 && s.c < 1)) throw InputError("c", "must lie in (0, 1)");
  s.B = certified_b2(s.layer, s.options, s.shape.n);
  if (!(s.B > 0) || !std::isfinite(s.B)) throw InputError("point", "B_2 is not positive and finite");
  const Block<double> block(s.layer, s.options);
  const double scale = s.c / s.B;
  const auto g = [&](const Matrix<double>& X) { return Matrix<double>(block.forward(X) * scale); };
  const Matrix<double> X = l.matrix<double>(p, "X_star");
  const Matrix<double> D = l.matrix<double>(p, "D");
  const Matrix<double> Y = X + g(X);
  const double floor = resolution * (1 + Y.norm());
  Matrix<double> cur = Y;
  for (long k = 1; k <= s.shape.K; ++k) {
    const Matrix<double> next = Y - g(cur);
    if (!((next - cur).norm() >= floor)) break;
    s.resolved = k;
    cur = next;
  }
  s.pair_ok = D.norm() >= resolution * (1 + X.norm());
  return s;
}

/// The layers of the families (fixed weights; W^K = W^Q).
Point layer_point(const std::vector<double>& X, long d, long H, long dh, bool causal,
                  const std::vector<double>& weights, double c, long K) {
  Point p;
  const long n = static_cast<long>(X.size()) / d;
  p.k = {n, d, H, dh, K, causal ? 1L : 0L};
  const Layout l = layout_of(n, d, H, dh);
  std::size_t i = 0, w = 0;
  l.fill(p.x, "X_star", [&] { return X.at(i++); });
  l.fill(p.x, "D", [] { return 0.0; });  // set by with_extremal_pair
  const auto weight = [&] { return weights.at(w++); };
  for (long h = 0; h < H; ++h) l.fill(p.x, indexed("WQ", h), weight);
  for (long h = 0; h < H; ++h) l.fill(p.x, indexed("WV", h), weight);
  l.fill(p.x, "WO", weight);
  if (w != weights.size()) throw InputError("weights", "do not match the layer shape");
  l.fill(p.x, "c", [&] { return c; });
  return p;
}

/// Sets D to a small multiple of a right singular vector of DF(X*) = I + Dg(X*) (the largest or the smallest
/// singular value): the locally most expanding or most contracting direction of F, near-extremal for the
/// upper and the lower bi-Lipschitz relation.
Point with_extremal_pair(Point p, bool largest) {
  const Setup s = setup_of(p);
  const long n = s.shape.n, d = s.shape.d;
  const Block<double> block(s.layer, s.options);
  const Layout l = s.shape.layout();
  const Matrix<double> X = l.matrix<double>(p, "X_star");
  Matrix<double> J = operators::dense_jacobian(block.linearize(X)) * (s.c / s.B);
  J += Matrix<double>::Identity(n * d, n * d);
  const Eigen::MatrixXd V = dense_svd(J, false, true).V;  // J is square: the thin V is the full one
  const Eigen::Index col = largest ? 0 : n * d - 1;
  const double step = 1e-3 * (1 + X.norm());
  for (long i = 0; i < n * d; ++i) p.x[l.at("D") + static_cast<std::size_t>(i)] = step * V(i, col);
  return p;
}

constexpr std::array<double, 3> family_c{0.5, 0.9, 0.99};
constexpr long family_K = 8;

std::vector<Point> contractive_points() {
  std::vector<Point> out;
  for (double c : family_c) {
    // n = 4, d = d_h = 2, one head.
    const Point a = layer_point({0.3, -1.2, 1.5, 0.4, -0.7, 0.9, 0.1, 2.0}, 2, 1, 2, false,
                                {0.9, -0.4, 0.3, 1.1, 1.0, 0.5, -0.2, 0.8, 0.7, -0.3, 0.4, 1.2}, c, family_K);
    // n = 3, d = 3, two heads of width 1, causal mask.
    const Point b = layer_point(
        {1.0, -0.5, 0.2, 0.3, 0.8, -1.1, -0.6, 0.4, 0.9}, 3, 2, 1, true,
        {1.2, -0.3, 0.5, 0.2, 0.9, -0.7, 0.8, 0.6, -0.4, -0.5, 1.1, 0.3, 0.6, -0.9, 0.4, 0.7, 0.2, -1.0}, c,
        family_K);
    for (const Point& p : {a, b}) {
      out.push_back(with_extremal_pair(p, true));
      out.push_back(with_extremal_pair(p, false));
    }
  }
  return out;
}

/// The inputs of kim.thm31_dp_unbounded (kim_unbounded.cpp) as fixed points X* of contractive L2 maps.
std::vector<Point> thm31_points() {
  std::vector<Point> out;
  for (double c : family_c) {
    for (double s : {1.0, 32.0, 1024.0})
      out.push_back(with_extremal_pair(layer_point({0, s, -s, s, -s}, 1, 1, 1, false, {1, 1, 1}, c, family_K),
                                       c != 0.9));
    // e1e2: rows (0,0), ±10(1,1) twice each; W^Q = I, W^V = e1 e1ᵀ + e2 e2ᵀ/2, W^O = I.
    out.push_back(with_extremal_pair(layer_point({0, 0, 10, 10, -10, -10, 10, 10, -10, -10}, 2, 1, 2, false,
                                                 {1, 0, 0, 1, 1, 0, 0, 0.5, 1, 0, 0, 1}, c, family_K),
                                     true));
    // single_spike: n = 3, d = 3, the d = 3 weights of kim.thm31_dp_unbounded's A as W^Q.
    out.push_back(
        with_extremal_pair(layer_point({0, 0, 0, 18, -24, 0, 0, 0, 0}, 3, 1, 3, false,
                                       {0.5, -1.2, 0.7, 0.3, 0.9, 0.1, -0.4, 1.1, 0.2, 1, 0, 0, 0, 1,
                                        0,   0,    0,   1,   1,   0,   0,    0,   1,   0, 0, 0, 1},
                                       c, family_K),
                           false));
  }
  return out;
}

class FixedPointInversion final : public ClaimBase<FixedPointInversion> {
 public:
  FixedPointInversion() {
    info_.id = "resid.fixed_point_inversion";
    info_.default_samples = 8192;  // fixed count: about a second of search
    info_.statement =
        "If Lip(g) <= L < 1, the iterates X^(k+1) = Y - g(X^(k)) satisfy, at every k, ||X^(k) - X*|| <= "
        "L^k/(1-L) ||X^(1) - X^(0)|| and <= L/(1-L) ||X^(k) - X^(k-1)||; F = id + g is bi-Lipschitz with "
        "constants 1 +- L.";
    info_.latex =
        "$\\|X^{(k)}-X^\\ast\\|\\le\\frac{L^k}{1-L}\\|X^{(1)}-X^{(0)}\\|$, "
        "$\\|X^{(k)}-X^\\ast\\|\\le\\frac L{1-L}\\|X^{(k)}-X^{(k-1)}\\|$; "
        "$(1-L)\\|X-X'\\|\\le\\|F(X)-F(X')\\|\\le(1+L)\\|X-X'\\|$";
    info_.source = "derived";
    info_.hypotheses = {
        "g = c F_L2 / B_2: tied L2 multi-head attention scaled by c / B_2, B_2 the certified "
        "upper end of kim.thm32_2 at the sequence length (causal mask allowed), L = c < 1",
        "Frobenius norms; X^(0) = Y = X* + g(X*) (X* exact)", "1 <= k <= K <= 10"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {at_most("max_{k<=K} ||X^(k) - X*|| / (L^k/(1-L) ||X^(1) - X^(0)||) <= 1 (a priori)"),
                   at_most("max_{k<=K} ||X^(k) - X*|| / (L/(1-L) ||X^(k) - X^(k-1)||) <= 1 (a posteriori)"),
                   at_most("(1 - L) ||X - X'|| <= ||F(X) - F(X')||"),
                   at_most("||F(X) - F(X')|| <= (1 + L) ||X - X'||")};
    info_.families = {"contractive_l2", "thm31_inputs"};
    info_.evaluated_at =
        "The iterates X^(k) are computed in S (interval: enclosures of the exact iterates of the exact map); "
        "X* is exact by construction (Y = X* + g(X*)). B_2, computed once in interval arithmetic and rounded "
        "up to a double, defines g = c F/B_2 exactly, so Lip(g) <= c = L holds for the map evaluated. The "
        "double pre-run only selects which k are tested.";
    info_.notes =
        "g = c·F_L2/B₂ is evaluated with operators::Block<S>; B₂ is the certified upper end of the library's "
        "kim.thm32_2 bound, so L = c exactly. Y = X* + g(X*) makes the fixed point X* exact. Families: "
        "c ∈ {0.5, 0.9, 0.99} on two fixed layers (one causal) and on the inputs of kim.thm31_dp_unbounded "
        "(x = (0, s, −s, s, −s), s = 1, 32, 1024; e1e2; single_spike), with X′ − X* along the most and the "
        "least expanding singular direction of DF(X*), K = 8. Iterations whose step is below 2^(−24)(1 + "
        "‖Y‖) in double are not tested (their errors are rounding noise in the double search); Kim's B₂ "
        "overestimates Lip₂(F_L2), so the true contraction is well below c and the margins are wide.";
  }
  const ClaimInfo& info() const override { return info_; }
  Point sample(Rng& rng) const override {
    Point p;
    const long n = rng.integer(2, 4), d = rng.integer(1, 3), H = rng.coin(0.6) ? 1 : 2,
               dh = rng.integer(1, d);
    p.k = {n, d, H, dh, rng.integer(1, max_iterations), rng.coin(0.3) ? 1L : 0L};
    const Layout l = layout_of(n, d, H, dh);
    const double xs = std::pow(10.0, rng.uniform(-1.0, 1.0));
    l.fill(p.x, "X_star", [&] { return rng.corner(xs); });
    const double ds = (1 + xs) * std::pow(10.0, rng.uniform(-4.0, 0.0));
    l.fill(p.x, "D", [&] { return ds * rng.normal(); });
    const double ws = std::pow(10.0, rng.uniform(std::log10(0.3), std::log10(3.0)));
    const auto weight = [&] { return ws * rng.normal(); };
    for (long h = 0; h < H; ++h) l.fill(p.x, indexed("WQ", h), weight);
    for (long h = 0; h < H; ++h) l.fill(p.x, indexed("WV", h), weight);
    l.fill(p.x, "WO", weight);
    l.fill(p.x, "c", [&] {
      return rng.coin(0.5) ? family_c[static_cast<std::size_t>(rng.integer(0, 2))] : rng.uniform(0.05, c_max);
    });
    return p;
  }
  void repair(Point& p) const override {
    for (double& v : p.x) v = std::clamp(v, -coordinate_box, coordinate_box);
    double& c = p.x.at(layout_of(p).at("c"));
    c = std::clamp(c, c_min, c_max);
  }
  std::vector<Point> family(const std::string& name) const override {
    if (name == "contractive_l2") return contractive_points();
    if (name == "thm31_inputs") return thm31_points();
    return {};
  }
  nlohmann::json describe(const Point& p) const override {
    const Shape s = shape_of(p);
    const Layout l = s.layout();
    nlohmann::json wq = nlohmann::json::array(), wv = nlohmann::json::array();
    for (long h = 0; h < s.H; ++h) {
      wq.push_back(l.rows(p, indexed("WQ", h)));
      wv.push_back(l.rows(p, indexed("WV", h)));
    }
    return {{"family", p.family},  {"n", s.n}, {"d", s.d},           {"heads", s.H},
            {"head_dim", s.dh},    {"K", s.K}, {"causal", s.causal}, {"X_star", l.rows(p, "X_star")},
            {"D", l.rows(p, "D")}, {"WQ", wq}, {"WV", wv},           {"WO", l.rows(p, "WO")},
            {"c", l.raw(p, "c")}};
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const Setup s = setup_of(pt);
    const Block<S> block(s.layer, s.options);
    const S L = lift<S>(s.c);
    const S scale = L / lift<S>(s.B);
    const auto g = [&](const Matrix<S>& X) { return Matrix<S>(block.forward(X) * scale); };
    const Layout l = s.shape.layout();
    const Matrix<S> Xs = l.matrix<S>(pt, "X_star"), D = l.matrix<S>(pt, "D");
    const auto norm = [](const Matrix<S>& M) { return num::frobenius<S>(M); };
    Evaluation<S> out(info_.parts.size(), off<S>());
    if (s.resolved >= 1) {
      const Matrix<S> Y = Xs + g(Xs);
      const S one_minus = S(1) - L;
      Matrix<S> prev = Y, cur = Y - g(Y);
      const S first = norm(Matrix<S>(cur - prev));
      S Lk = L, prior(0), posterior(0);
      for (long k = 1;; ++k) {
        const S error = norm(Matrix<S>(cur - Xs));
        prior = num::smax<S>(prior, error / (Lk / one_minus * first));
        posterior = num::smax<S>(posterior, error / (L / one_minus * norm(Matrix<S>(cur - prev))));
        if (k == s.resolved) break;
        prev = cur;
        cur = Y - g(prev);
        Lk *= L;
      }
      out[0] = le<S>(prior, S(1));
      out[1] = le<S>(posterior, S(1));
    }
    if (s.pair_ok) {
      const Matrix<S> Xp = Xs + D;
      const S dF = norm(Matrix<S>(D + g(Xp) - g(Xs)));
      const S dX = norm(D);
      out[2] = le<S>((S(1) - L) * dX, dF);
      out[3] = le<S>(dF, (S(1) + L) * dX);
    }
    return out;
  }

 private:
  ClaimInfo info_;
};

}  // namespace

REGATTA_REGISTER_CLAIM(FixedPointInversion);

}  // namespace regatta::proofs::claims
