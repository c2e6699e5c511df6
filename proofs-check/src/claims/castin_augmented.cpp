// Claim castin.sqrt_n_augmented (docs/bounds.md, "Biased layers: the augmented castin.sqrt_n"): for a
// dot-product multi-head layer with query, key, value and output biases and every token in B_R,
//   ‖DF(X)‖₂ ≤ Σ_h min_t √3‖V_h‖₂(‖[A_h; c_hᵀ/t]‖₂²(R² + t²)²(4n + 1) + n)^{1/2},  c_h = W^K_h b_Q,h/√d_h,
// t = 2^k (|k| ≤ 8, chosen per head by the row).
// The left side is the spectral norm of the dense Jacobian of the library's biased block
// (operators::Block<S>, the layer's own forward map with its biases, not the augmented form), the right side
// the bound table's row lip::evaluate<S>(Bound::castin_sqrt_n_augmented), so the check is of the row as
// offered. Both sides are enclosures in interval arithmetic.
#include <algorithm>
#include <cmath>

#include <regatta/operators/differentiable.hpp>
#include <regatta/operators/lipschitz/bounds.hpp>
#include "common.hpp"
#include "layout.hpp"

namespace regatta::proofs::claims {

namespace {

using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Block;

/// Tokens are kept at norm ≤ (1 − token_margin)·R, so that the double check ‖x_i‖² ≤ R² (relative rounding
/// error ≤ (d + 2)·2^-53 for d ≤ 3) proves the exact token in B_R.
constexpr double token_margin = 0x1.0p-30;
constexpr double radius_min = 0.1, radius_max = 4.0;

/// Point: k = {n, d, heads, head_dim, causal}; x = (R, X (n×d), per head W^Q, W^K, W^V (d×d_h each, d_v =
/// d_h), b_Q, b_K, b_V (d_h each), then W^O ((H·d_h)×d) and b_O (d)).
const Keys keys{"n", "d", "heads", "head_dim", "causal"};

Layout layout_of(long n, long d, long H, long dh) {
  Layout l;
  l.add("R", 1).add("X", n, d);
  for (long h = 0; h < H; ++h)
    l.add(indexed("WQ", h), d, dh)
        .add(indexed("WK", h), d, dh)
        .add(indexed("WV", h), d, dh)
        .add(indexed("bQ", h), dh)
        .add(indexed("bK", h), dh)
        .add(indexed("bV", h), dh);
  return l.add("WO", H * dh, d).add("bO", d);
}

struct Shape {
  long n, d, H, dh;
  bool causal;
  Layout layout() const { return layout_of(n, d, H, dh); }
};

Shape shape_of(const Point& p) {
  if (p.k.size() != keys.size()) throw InputError("point", "wrong discrete size");
  const Shape s{keys.of(p, "n"), keys.of(p, "d"), keys.of(p, "heads"), keys.of(p, "head_dim"),
                keys.of(p, "causal") != 0};
  if (s.n < 1 || s.d < 1 || s.H < 1 || s.dh < 1 || p.x.size() != s.layout().size())
    throw InputError("point", "wrong size");
  return s;
}

/// Offset of the first weight in x: the weights are every block after X (the first is W^Q of head 0).
std::size_t weights_at(const Layout& l) { return l.at(indexed("WQ", 0)); }

struct Setup {
  Shape shape;
  double R;
  Matrix<double> X;
  AttentionLayer layer;
  AttentionOptions options;
};

Setup setup_of(const Point& p) {
  const Shape s = shape_of(p);
  const Layout l = s.layout();
  Setup out{s, l.raw(p, "R"), {}, {}, {}};
  if (!(out.R > 0)) throw InputError("point", "radius not positive");
  out.X = l.matrix<double>(p, "X");
  for (long i = 0; i < s.n; ++i)
    if (out.X.row(i).squaredNorm() > out.R * out.R * (1 - token_margin))
      throw InputError("point", "token outside B_R");
  AttentionLayer& L = out.layer;
  L.d = static_cast<int>(s.d);
  L.heads = static_cast<int>(s.H);
  L.head_dim = L.value_dim = static_cast<int>(s.dh);
  for (long h = 0; h < s.H; ++h) {
    L.WQ.push_back(l.matrix<double>(p, indexed("WQ", h)));
    L.WK.push_back(l.matrix<double>(p, indexed("WK", h)));
    L.WV.push_back(l.matrix<double>(p, indexed("WV", h)));
    L.bQ.push_back(l.vector<double>(p, indexed("bQ", h)));
    L.bK.push_back(l.vector<double>(p, indexed("bK", h)));
    L.bV.push_back(l.vector<double>(p, indexed("bV", h)));
  }
  L.WO = l.matrix<double>(p, "WO");
  L.bO = l.vector<double>(p, "bO");
  L.validate();
  out.options.causal = s.causal;
  return out;
}

/// Pulls every token into the ball of radius (1 − 2·token_margin)·R, R into [radius_min, radius_max].
void repair_point(Point& p) {
  const Shape s = shape_of(p);
  const Layout l = s.layout();
  double& R = p.x[l.at("R")];
  R = std::clamp(std::isfinite(R) ? std::abs(R) : 1.0, radius_min, radius_max);
  const double limit = R * (1 - 2 * token_margin);
  const auto at = [&](long i, long a) -> double& {
    return p.x[l.at("X") + static_cast<std::size_t>(i * s.d + a)];
  };
  for (long i = 0; i < s.n; ++i) {
    double norm2 = 0;
    for (long a = 0; a < s.d; ++a) norm2 += at(i, a) * at(i, a);
    const double norm = std::sqrt(norm2);
    if (norm > limit)
      for (long a = 0; a < s.d; ++a) at(i, a) *= limit / norm * (1 - token_margin);
  }
  for (std::size_t i = weights_at(l); i < p.x.size(); ++i)
    p.x[i] = std::clamp(std::isfinite(p.x[i]) ? p.x[i] : 0.0, -20.0, 20.0);
}

/// Single head, d = d_h = 1: scores a·x_i x_j + b·x_j (query bias b·1 on W^K = 1), V = 1; tokens alternate
/// between −R and R, or one at −R and the others at R (the construction of
/// docs/math/bounds.md#castin-adversarial with the bias).
std::vector<Point> adversarial_points() {
  std::vector<Point> out;
  for (long n : {4L, 16L})
    for (double bias : {2.0, 8.0})
      for (int causal = 0; causal <= 1; ++causal)
        for (int pattern = 0; pattern <= 1; ++pattern) {
          const double R = 1.0;
          Point p;
          p.family = "adversarial";
          p.k = {n, 1, 1, 1, causal};
          const Layout l = layout_of(n, 1, 1, 1);
          const auto put = [&](std::string_view name, double v) { l.fill(p.x, name, [v] { return v; }); };
          put("R", R);
          long i = 0;
          l.fill(p.x, "X", [&] {
            const double x = pattern == 0 ? (i % 2 == 0 ? -R : R) : (i == 0 ? -R : R);
            ++i;
            return x * (1 - 4 * token_margin);
          });
          put(indexed("WQ", 0), -1.0);
          put(indexed("WK", 0), 1.0);
          put(indexed("WV", 0), 1.0);
          put(indexed("bQ", 0), bias);
          put(indexed("bK", 0), 0.5);
          put(indexed("bV", 0), 0.25);
          put("WO", 1.0);
          put("bO", 0.1);
          out.push_back(p);
        }
  return out;
}

class CastinAugmented final : public ClaimBase<CastinAugmented> {
 public:
  CastinAugmented() {
    info_.id = "castin.sqrt_n_augmented";
    info_.default_samples = 16384;  // fixed count: about a second of search
    info_.statement =
        "Dot-product multi-head attention with biases, every token in B_R: ||DF(X)||_2 <= sum_h sqrt(3) "
        "||V_h|| (||[A_h; c_h^T/t_h]||^2 (R^2 + t_h^2)^2 (4n + 1) + n)^(1/2), c_h = W^K_h b_Q,h / sqrt(d_h), "
        "any t_h > 0 (the row takes t_h = 2^k, |k| <= 8, the smallest term); causal mask allowed.";
    info_.latex =
        "$\\|DF(X)\\|_2\\le\\sum_h\\sqrt3\\|V_h\\|(\\|[A_h;c_h^\\top/t_h]\\|^2(R^2+t_h^2)^2(4n+1)+n)^{1/2}$, "
        "$X\\in B_R^n$";
    info_.source = "derived (docs/bounds.md, Biased layers)";
    info_.hypotheses = {"dot-product multi-head attention with query, key, value and output biases",
                        "every token in B_R", "causal mask allowed"};
    info_.expected = Expected::holds;
    info_.kind = StatementKind::inequality;
    info_.parts = {at_most("||DF(X)||_2 <= castin.sqrt_n_augmented (the bound table's row)")};
    info_.families = {"adversarial"};
    info_.evaluated_at =
        "Left side: the spectral norm of the dense interval Jacobian, enclosed (lower end ||J v||/||v|| at a "
        "double power vector v lifted exactly, upper end an interval Cholesky certificate). Right side: the "
        "bound table's row evaluated in S (its norms certified by the library; t_h = 2^k is a free parameter "
        "of the bound, any choice valid).";
    info_.notes =
        "Left side: the Jacobian of the library's biased block (operators::Block, biases included, not the "
        "augmented form); right side: the bound table's row castin.sqrt_n_augmented at the point's n and R. "
        "Family: d = d_h = 1 with a query bias of 2 or 8, tokens at ±R (n = 4, 16; with and without causal "
        "mask).";
  }
  const ClaimInfo& info() const override { return info_; }
  Point sample(Rng& rng) const override {
    Point p;
    const long n = rng.coin(0.3) ? rng.integer(1, 3) : rng.integer(2, 6), d = rng.integer(1, 3),
               H = rng.coin(0.6) ? 1 : 2, dh = rng.integer(1, 2);
    p.k = {n, d, H, dh, rng.coin(0.4) ? 1L : 0L};
    const Layout l = layout_of(n, d, H, dh);
    l.fill(p.x, "R", [&] { return std::pow(10.0, rng.uniform(-0.5, 0.5)); });
    const double R = l.raw(p, "R");
    l.fill(p.x, "X", [&] { return rng.corner(R); });
    const double bias = rng.coin(0.4) ? 5.0 : 1.0;
    const auto weight = [&] { return rng.normal() * (rng.coin(0.2) ? 3.0 : 1.0); };
    for (long h = 0; h < H; ++h)
      for (const char* name : {"WQ", "WK", "WV", "bQ", "bK", "bV"}) l.fill(p.x, indexed(name, h), weight);
    l.fill(p.x, "WO", weight);
    l.fill(p.x, "bO", weight);
    // Query biases larger on some points (they carry the c_h term).
    for (long h = 0; h < H; ++h)
      for (long k = 0; k < dh; ++k) p.x[l.at(indexed("bQ", h)) + static_cast<std::size_t>(k)] *= bias;
    repair_point(p);
    return p;
  }
  std::vector<Point> family(const std::string& name) const override {
    return name == "adversarial" ? adversarial_points() : std::vector<Point>{};
  }
  void repair(Point& p) const override { repair_point(p); }
  nlohmann::json describe(const Point& p) const override {
    const Shape s = shape_of(p);
    const Layout l = s.layout();
    return {{"family", p.family},
            {"n", s.n},
            {"d", s.d},
            {"heads", s.H},
            {"head_dim", s.dh},
            {"causal", s.causal},
            {"R", l.raw(p, "R")},
            {"X", l.rows(p, "X")},
            {"weights",
             std::vector<double>(p.x.begin() + static_cast<std::ptrdiff_t>(weights_at(l)), p.x.end())}};
  }

  template <class S>
  Evaluation<S> evaluate(const Point& pt) const {
    const Setup s = setup_of(pt);
    lip::BoundSetting setting;
    setting.n = s.shape.n;
    setting.radius = s.R;
    // Refused configurations (no query bias) throw InputError: outside the claim's domain.
    const S rhs = lip::evaluate<S>(lip::Bound::castin_sqrt_n_augmented, s.layer, s.options, setting);
    const Block<S> block(s.layer, s.options);
    Matrix<S> X(s.shape.n, s.shape.d);
    for (long i = 0; i < s.shape.n; ++i)
      for (long a = 0; a < s.shape.d; ++a) X(i, a) = lift<S>(s.X(i, a));
    const S lhs = num::norm_2(Matrix<S>(operators::dense_jacobian(block.linearize(X))));
    return {le<S>(lhs, rhs)};
  }

 private:
  ClaimInfo info_;
};

}  // namespace

REGATTA_REGISTER_CLAIM(CastinAugmented);

}  // namespace regatta::proofs::claims
