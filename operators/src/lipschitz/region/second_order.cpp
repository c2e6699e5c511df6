// The second-order bound on the sup of ‖J‖ over a region (see second_order.hpp).
#include "second_order.hpp"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/interval64_product.hpp>
#include <regatta/core/interval_norms.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/lipschitz/structured_rows.hpp>

#include "../jacobian/closed_form_jacobian.hpp"
#include "hessian_sweep.hpp"
#include "parallel_passes.hpp"

namespace regatta::lip::detail {

namespace {

using Eigen::Index;
using operators::AttentionLayer;
using operators::AttentionOptions;

/// Input coordinates differentiated per pass of the closed form (the value part is recomputed per pass).
constexpr int chunk = 8;
using Tangent = Dual<chunk>;

/// Upper end of √x for x ≥ 0 given by its upper end.
double sqrt_up(double x) { return sqrt(interval64(x)).upper(); }

/// Tightens the intermediate values of the closed form over the region (‖X' − X‖_F ≤ ρ): for an
/// intermediate v (a smooth function of the input), v(X') − v(X) = ∇v(ξ)·δ with ξ on the segment [X, X'], so
///   v(X') ∈ v(X) + [−1, 1]·ρ·G_v,   G_v = (Σ_k sup_B |∂_k v|²)^{1/2} ≥ sup_B ‖∇v‖₂
/// (the ℓ₂ geometry of the ball, where the box's interval evaluation pays ‖∇v‖₁ and every dependency).
/// Passes number the intermediates in the order closed_form forms them:
///   centre    records the interval64 enclosure of v(X) (a pass at the point X);
///   gradient  accumulates Σ_k mag(∂_k v)² over the chunk passes (after applying the current bounds);
///   apply     intersects each value with its bound (valid over the region, which is all the mean-value
///             argument needs: the points ξ of second_order.hpp lie on segments inside it).
struct BallTightening {
  enum class Mode { centre, gradient, apply } mode = Mode::centre;
  double rho = 0;
  std::size_t next = 0;
  std::vector<interval64> at_centre, bound;
  std::vector<interval64> gradient2;  // Σ_k mag(∂_k v)², accumulated in interval64 (upper ends used)

  void begin_pass() { next = 0; }

  void operator()(Tangent& v) {
    const std::size_t i = next++;
    if (mode == Mode::centre) {
      at_centre.push_back(v.v);
      return;
    }
    if (i < bound.size()) v.v = intersect(v.v, bound[i]);
    if (mode == Mode::gradient) {
      if (gradient2.size() <= i) gradient2.resize(i + 1, interval64(0.0));
      interval64 sum = gradient2[i];
      for (const interval64& g : v.g) {
        const interval64 m(magnitude(g));
        sum = sum + m * m;
      }
      gradient2[i] = sum;
    }
  }

  /// bound = (v(X) + [−ρG, ρG]) ∩ bound, after a gradient sweep.
  void update_bounds() {
    const std::size_t count = std::min(at_centre.size(), gradient2.size());
    bound.resize(count, interval64::hull(-infinity, infinity));
    for (std::size_t i = 0; i < count; ++i) {
      const double reach = (interval64(rho) * sqrt(interval64(gradient2[i].upper()))).upper();
      bound[i] = intersect(bound[i], at_centre[i] + interval64::hull(-reach, reach));
    }
  }
};

/// The spectral-gap form's quantities (second_order.hpp; docs/local.md, "Spectral-gap form"), accumulated
/// per coordinate k during the sweep over [T_k].
struct SpectralGap {
  Matrix<interval64> v;  // n·d × 1: encloses v̂ = ṽ/‖ṽ‖, ṽ the top right singular vector (double)
  Matrix<interval64> w;       // n·d × 1: encloses J(X)v̂
  Matrix<interval64> wt;      // 1 × n·d: wᵀ
  Matrix<interval64> tv;      // n·d × K: column k encloses [T_k]v̂ for every member of [T_k]
  Matrix<interval64> tw;      // n·d × K: column k encloses [T_k]ᵀw
  std::vector<interval64> s;  // s_k encloses wᵀ T'_k v̂ for every T'_k ∈ [T_k]

  Eigen::VectorXd top;  // ṽ

  SpectralGap(const Matrix<interval64>& Jc, const Eigen::VectorXd& given) {
    const Index nd = Jc.rows();
    if (given.size() == nd) {
      top = given;
    } else {
      Eigen::MatrixXd mid(nd, nd);
      for (Index r = 0; r < nd; ++r)
        for (Index c = 0; c < nd; ++c) mid(r, c) = static_cast<double>(Jc(r, c));
      // Any nonzero ṽ is sound; the SVD's makes the bound tight.
      top = dense_svd(mid, false, true, SvdMethod::divide_and_conquer).V.col(0);
    }
    interval64 norm2(0.0);
    for (Index c = 0; c < nd; ++c) norm2 = norm2 + square(interval64(top(c)));
    const interval64 norm = sqrt(norm2);
    v.resize(nd, 1);
    for (Index c = 0; c < nd; ++c) v(c, 0) = interval64(top(c)) / norm;
    w = midrad_product(Jc, v);
    wt = w.transpose();
    tv.resize(nd, nd);
    tw.resize(nd, nd);
    s.assign(std::size_t(nd), interval64(0.0));
  }

  /// Column k from [T_k] (n·d × n·d).
  void add(const Matrix<interval64>& Tk, Index k) {
    const Matrix<interval64> Tv = midrad_product(Tk, v), wT = midrad_product(wt, Tk);
    tv.col(k) = Tv.col(0);
    tw.col(k) = wT.row(0).transpose();
    // wᵀ([T_k]v̂) and (wᵀ[T_k])v̂ both enclose {wᵀT'v̂ : T' ∈ [T_k]}: keep their intersection.
    const interval64 left = midrad_product(wt, Tv)(0, 0), right = midrad_product(wT, v)(0, 0);
    s[std::size_t(k)] = intersect(left, right);
  }
};

/// The box's intervals with the unit partials of coordinates [k0, k0 + chunk).
Grid<Tangent> seeded(const Matrix<interval64>& box, Index k0) {
  const Index n = box.rows(), d = box.cols();
  Grid<Tangent> Xb(n, d);
  for (Index i = 0; i < n; ++i)
    for (Index a = 0; a < d; ++a) {
      Xb(i, a) = Tangent(box(i, a));
      const Index k = i * d + a;
      if (k >= k0 && k < k0 + chunk) Xb(i, a).g[std::size_t(k - k0)] = interval64(1.0);
    }
  return Xb;
}

/// √λ_max([[a, c], [c, b]]) rounded up, from upper ends a, b, c ≥ 0: λ_max = (a + b)/2 + √(((a − b)/2)² +
/// c²), non-decreasing in each.
double two_by_two_root(double a, double b, double c) {
  const interval64 A(a), B(b), C(c), half(0.5);
  const interval64 lambda = half * (A + B) + sqrt(square(half * (A - B)) + square(C));
  const double root = sqrt_up(lambda.upper());
  return std::isfinite(root) ? root : infinity;
}

/// The spectral-gap form (second_order.hpp, docs/local.md "Spectral-gap form") from the accumulated columns,
/// the enclosure Jc of J(X) and out.centre_two, out.slope_two: fills out.gap_*.
void spectral_gap_bound(const SpectralGap& gap, const Matrix<interval64>& Jc, double rho,
                        SecondOrderBound& out, bool coupling_map = false) {
  const Index nd = Jc.rows();
  const interval64 R(rho), S2(out.slope_two);
  // t_v ≥ ‖[T'_1 v ⋯ T'_K v]‖₂ and t_w ≥ ‖Q[T'_1ᵀw ⋯ T'_Kᵀw]‖₂ for every T'_k ∈ [T_k]. Q T'ᵀw = T'ᵀw −
  // v(wᵀT'v): column k of the projected matrix encloses it by [T_k]ᵀw − v̂·s_k; ‖Q‖₂ ≤ 1 allows the
  // unprojected one too.
  const double t_v = spectral_norm_bound(gap.tv).upper;
  Matrix<interval64> qtw = gap.tw;
  for (Index k = 0; k < nd; ++k)
    for (Index r = 0; r < nd; ++r) qtw(r, k) = gap.tw(r, k) - gap.v(r, 0) * gap.s[std::size_t(k)];
  const double t_w = std::min(spectral_norm_bound(gap.tw).upper, spectral_norm_bound(qtw).upper);
  // σ₂ ≥ ‖J Q‖₂: J Q = J − w v̂ᵀ, enclosed entrywise.
  const Matrix<interval64> JQ = Jc - midrad_product(gap.w, Matrix<interval64>(gap.v.transpose()));
  const double sigma2 = spectral_norm_bound(JQ).upper;
  // r ≥ ‖Q Jᵀ J v̂‖ = ‖Jᵀw − ‖w‖² v̂‖ (the residual of the approximate singular vector).
  interval64 ww(0.0);
  for (Index r = 0; r < nd; ++r) ww = ww + square(gap.w(r, 0));
  Matrix<interval64> resid = midrad_product(Matrix<interval64>(Jc.transpose()), gap.w);
  for (Index c = 0; c < nd; ++c) resid(c, 0) = resid(c, 0) - ww * gap.v(c, 0);
  const double r = frobenius_norm_upper(resid);
  // ‖g‖ with g_k = mag(s_k); |wᵀEv| ≤ ρ·min(‖g‖, ‖w‖·t_v).
  interval64 g2(0.0);
  for (const interval64& sk : gap.s) g2 = g2 + square(interval64(magnitude(sk)));
  const double g =
      std::min(sqrt_up(g2.upper()), (interval64(frobenius_norm_upper(gap.w)) * interval64(t_v)).upper());
  const interval64 Tv(t_v), Tw(t_w), s2(sigma2);
  const interval64 a = interval64(ww.upper()) + interval64(2.0) * R * interval64(g) + square(R * Tv);
  const interval64 b = square(s2 + R * S2);
  const interval64 c = interval64(r) + R * (s2 * Tv + Tw) + square(R) * S2 * Tv;
  out.gap_rate = g;
  out.gap_sigma_two = sigma2;
  out.gap_a = a.upper();
  out.gap_b = b.upper();
  out.gap_c = c.upper();
  out.gap_ww = ww.upper();
  out.gap_t_v = t_v;
  out.gap_t_w = t_w;
  out.gap_r = r;
  // t_c ≥ ‖C'‖₂ for every C' with columns Q(JᵀT'_kv̂ + T'_kᵀw), T'_k ∈ [T_k]: column k of [JQ]ᵀ[V] + [W]
  // ((JQ)ᵀ = QJᵀ). It bounds the first-order part of the coupling as one map (the Taylor form's c).
  if (coupling_map) {
    const Matrix<interval64> C = midrad_product(Matrix<interval64>(JQ.transpose()), gap.tv) + qtw;
    out.gap_t_c = spectral_norm_bound(C).upper;
  }
  out.gap_two = two_by_two_root(out.gap_a, out.gap_b, out.gap_c);
}

/// Upper end of ‖·‖₂ of a non-negative matrix given by upper ends: min of the binary64 certificate and
/// (‖A‖₁‖A‖∞)^{1/2}.
double nonnegative_norm_upper(const Matrix<double>& A) {
  const Matrix<interval64> box = A.cast<interval64>();
  return std::min(sqrt_up((interval64(one_norm_upper(box)) * interval64(inf_norm_upper(box))).upper()),
                  spectral_norm_bound(box).upper);
}

/// The Taylor form (second_order.hpp; docs/local.md, "Taylor form"). `centre`: the bound over the point
/// region {X} with the same v̂ (its slope, rate, t_v, t_w are the first-order coefficients at X); `sweeps[i]`
/// with weight `weights[i]` the third-derivative enclosure over piece i. Fills out.taylor_* and lowers
/// out.gap_two, out.two_upper where smaller.
void taylor_bound(const SecondOrderBound& centre, const std::vector<HessianSweep>& sweeps,
                  const std::vector<interval64>& weights, double rho, SecondOrderBound& out) {
  const Index nd = sweeps.front().phi.rows();
  // Remainder coefficients: ρ² × Σ_i ω_i (norm of piece i's enclosure).
  interval64 phi(0.0), max_row(0.0), max_col(0.0);
  std::vector<interval64> jv(std::size_t(nd), interval64(0.0)), jtw = jv;
  Matrix<interval64> entry = Matrix<interval64>::Constant(nd, nd, interval64(0.0));
  std::vector<interval64> row_sum(std::size_t(nd), interval64(0.0)), col_sum = row_sum;
  for (std::size_t i = 0; i < sweeps.size(); ++i)
    phi = phi + weights[i] * interval64(spectral_norm_bound(sweeps[i].phi).upper);
  // Row r's norms (4·pieces spectral certificates of n·d × n·d matrices) on OpenMP threads; each r writes
  // only its own sums, in the order of the pieces.
  parallel_passes(nd, [&](Index r) {
    const std::size_t q = std::size_t(r);
    for (std::size_t i = 0; i < sweeps.size(); ++i) {
      const HessianSweep& h = sweeps[i];
      const interval64 wt = weights[i];
      jv[q] = jv[q] + wt * interval64(spectral_norm_bound(h.jv[q]).upper);
      jtw[q] = jtw[q] + wt * interval64(spectral_norm_bound(h.jtw[q]).upper);
      row_sum[q] = row_sum[q] + wt * interval64(nonnegative_norm_upper(h.rows[q]));
      col_sum[q] = col_sum[q] + wt * interval64(nonnegative_norm_upper(h.cols[q]));
      for (Index c = 0; c < nd; ++c)
        entry(r, c) = entry(r, c) + wt * interval64(sqrt_up(h.entry_frob2(r, c)));
    }
  });
  interval64 jv2(0.0), jtw2(0.0), frob2(0.0);
  for (Index r = 0; r < nd; ++r) {
    jv2 = jv2 + square(interval64(jv[std::size_t(r)].upper()));
    jtw2 = jtw2 + square(interval64(jtw[std::size_t(r)].upper()));
    max_row = interval64(std::max(max_row.upper(), row_sum[std::size_t(r)].upper()));
    max_col = interval64(std::max(max_col.upper(), col_sum[std::size_t(r)].upper()));
    for (Index c = 0; c < nd; ++c) frob2 = frob2 + square(interval64(entry(r, c).upper()));
  }
  const double matrix_rem = std::min(sqrt_up((max_row * max_col).upper()), sqrt_up(frob2.upper()));
  const interval64 R(rho);
  const auto taylor = [&](double linear, double remainder) {
    return (R * interval64(linear) + square(R) * interval64(remainder)).upper();
  };
  // Each part: the smaller of the mean-value bound over the region and the Taylor bound.
  const double wEv = std::min((R * interval64(out.gap_rate)).upper(), taylor(centre.gap_rate, phi.upper()));
  const double Ev =
      std::min((R * interval64(out.gap_t_v)).upper(), taylor(centre.gap_t_v, sqrt_up(jv2.upper())));
  const double QEw =
      std::min((R * interval64(out.gap_t_w)).upper(), taylor(centre.gap_t_w, sqrt_up(jtw2.upper())));
  const double En = std::min((R * interval64(out.slope_two)).upper(), taylor(centre.slope_two, matrix_rem));
  out.taylor_rate = rho > 0 ? (interval64(wEv) / R).upper() : centre.gap_rate;
  out.taylor_slope = rho > 0 ? (interval64(En) / R).upper() : centre.slope_two;
  const interval64 s2(out.gap_sigma_two);
  const double a =
      (interval64(out.gap_ww) + interval64(2.0) * interval64(wEv) + square(interval64(Ev))).upper();
  const double b = square(s2 + interval64(En)).upper();
  // ‖Q(JᵀEv̂ + Eᵀw)‖: σ₂e₂ + e₃, or Taylor's formula on the linear map J' ↦ Q(JᵀJ'v̂ + J'ᵀw): the first-order
  // term ρ·t_c at the centre, the remainder ρ²(σ₂‖q‖ + ‖q'‖) with q, q' those of Ev̂ and Eᵀw.
  const double cross =
      std::min((s2 * interval64(Ev) + interval64(QEw)).upper(),
               taylor(centre.gap_t_c,
                      (s2 * interval64(sqrt_up(jv2.upper())) + interval64(sqrt_up(jtw2.upper()))).upper()));
  const double c = (interval64(out.gap_r) + interval64(cross) + interval64(En) * interval64(Ev)).upper();
  out.taylor_two = two_by_two_root(a, b, c);
  out.gap_two = std::min(out.gap_two, out.taylor_two);
  out.two_upper = std::min(out.two_upper, (interval64(out.centre_two) + interval64(En)).upper());
}

}  // namespace

std::optional<std::string> second_order_refusal(const AttentionLayer& layer,
                                                const AttentionOptions& options) {
  if (options.sinkhorn_iterations != 1) return "the second-order bound is for softmax attention";
  if (layer.rotary) return "the second-order bound does not cover rotary position embeddings";
  if (layer.kind == operators::AttentionKind::l2 && !layer.tied() && !options.allow_untied_l2)
    return "untied L2 attention needs allow_untied_l2";
  return std::nullopt;
}

Matrix<double> closed_form_block_jacobian(const AttentionLayer& layer, const AttentionOptions& options,
                                          const Matrix<double>& X) {
  if (const auto why = second_order_refusal(layer, options)) throw InputError("closed-form Jacobian", *why);
  return closed_form_at(layer, options, X);
}

RegionPiece region_piece(const Matrix<double>& X, const Matrix<interval64>& box, double l2_radius, int j,
                         int m) {
  const interval64 scale = interval64(double(j)) / interval64(double(m));
  RegionPiece piece{Matrix<interval64>(X.rows(), X.cols()), (scale * interval64(l2_radius)).upper()};
  for (Index i = 0; i < X.rows(); ++i)
    for (Index a = 0; a < X.cols(); ++a) {
      const interval64 x(X(i, a));
      const interval64 lo = x + scale * (interval64(box(i, a).lower()) - x),
                       hi = x + scale * (interval64(box(i, a).upper()) - x);
      piece.box(i, a) = interval64::hull(std::min(lo.lower(), x.lower()), std::max(hi.upper(), x.upper()));
    }
  return piece;
}

interval64 taylor_piece_weight(int i, int m) {
  // ∫ (1 − t) dt over [(i − 1)/m, i/m] = (1/m)(1 − (2i − 1)/(2m)).
  const interval64 M{double(m)};
  return (interval64(1.0) - interval64(double(2 * i - 1)) / (interval64(2.0) * M)) / M;
}

std::size_t taylor_piece_region(int i, int m, int pieces) { return std::size_t(i * (pieces / m) - 1); }

SecondOrderBound second_order_bound(const AttentionLayer& layer, const AttentionOptions& options,
                                    const Matrix<double>& X, const Matrix<interval64>& box, double l2_radius,
                                    const SecondOrderOptions& so_options) {
  if (const auto why = second_order_refusal(layer, options)) throw InputError("second-order bound", *why);
  const Index n = X.rows(), d = X.cols(), nd = n * d;
  SecondOrderBound out;
  out.slope_flat = infinity;

  // The centre: the structured rows in interval64 at the point X (an enclosure of J(X)).
  const Matrix<interval64> Jc =
      block_dense_jacobian_on_box<interval64>(layer, options, Matrix<interval64>(X.cast<interval64>()));
  const CertifiedNormBound centre = spectral_norm_bound(Jc);
  out.centre_two = centre.upper;
  out.centre_two_method = centre.method;
  for (Index r = 0; r < nd; ++r) {
    interval64 row(0.0);
    for (Index c = 0; c < nd; ++c) row = row + interval64(magnitude(Jc(r, c)));
    out.centre_inf = std::max(out.centre_inf, row.upper());
  }

  // Second derivative over the box, `chunk` input coordinates per pass.
  std::vector<interval64> row_acc(std::size_t(nd), interval64(0.0)),
      col_acc(std::size_t(nd), interval64(0.0));
  interval64 sum_u2(0.0);
  bool finite = true;
  Matrix<interval64> Tk(nd, nd);
  // The flattening M = [T_1 ⋯ T_K] (n·d × (n·d)²) when it is small enough to store.
  const bool flatten = nd <= so_options.flatten_limit;
  Matrix<interval64> M(flatten ? nd : 0, flatten ? nd * nd : 0);
  std::vector<interval64> col(static_cast<std::size_t>(nd), interval64(0.0));
  // Radius pieces (docs/local.md, "Radius pieces"): piece j of m encloses ∂_k J over the part t ∈ [(j−1)/m,
  // j/m] of every segment X + tδ, i.e. over X + (j/m)(region − X) (ℓ₂ radius (j/m)ρ, box X + (j/m)(box − X));
  // [T_k] is the average of the m enclosures (the integral form of the mean-value theorem, piece by piece).
  const int pieces = nd <= so_options.pieces_limit ? std::max(1, so_options.radius_pieces) : 1;
  out.radius_pieces = pieces;
  const Index passes = (nd + chunk - 1) / chunk;
  const interval64 weight = interval64(1.0) / interval64(double(pieces));
  std::vector<Matrix<interval64>> boxes;
  std::vector<BallTightening> tights(static_cast<std::size_t>(pieces));
  for (int j = 0; j < pieces; ++j) {
    RegionPiece piece = region_piece(X, box, l2_radius, j + 1, pieces);
    boxes.push_back(std::move(piece.box));
    // Tighten the intermediates over the piece's region first (BallTightening): a pass at the centre, then
    // sweeps of gradient bounds.
    BallTightening& tight = tights[std::size_t(j)];
    tight.rho = piece.l2_radius;
    if (so_options.tightening_sweeps > 0) {
      Grid<Tangent> Xc(n, d);
      for (Index i = 0; i < n; ++i)
        for (Index a = 0; a < d; ++a) Xc(i, a) = Tangent(interval64(X(i, a)));
      closed_form<Tangent>(layer, options, Xc, tight, false);
      tight.mode = BallTightening::Mode::gradient;
      for (int sweep = 0; sweep < so_options.tightening_sweeps; ++sweep) {
        // The chunk passes in parallel, each accumulating into its own copy; their sums added in pass order.
        std::vector<std::vector<interval64>> sums(static_cast<std::size_t>(passes));
        tight.gradient2.clear();
        parallel_passes(
            passes,
            [&](Index q) {
              BallTightening local = tight;
              local.begin_pass();
              closed_form<Tangent>(layer, options, seeded(boxes.back(), q * chunk), local, false);
              sums[std::size_t(q)] = std::move(local.gradient2);
            },
            [&](Index q) {
              if (so_options.progress)
                so_options.progress("tightening the intermediates over the ball", q * chunk, nd);
            });
        for (const std::vector<interval64>& pass_sum : sums) {
          if (tight.gradient2.size() < pass_sum.size())
            tight.gradient2.resize(pass_sum.size(), interval64(0.0));
          for (std::size_t i = 0; i < pass_sum.size(); ++i)
            tight.gradient2[i] = tight.gradient2[i] + pass_sum[i];
        }
        tight.update_bounds();
      }
    }
    tight.mode = BallTightening::Mode::apply;
  }
  std::optional<SpectralGap> gap;
  if (so_options.spectral_gap) gap.emplace(Jc, so_options.top);
  const std::string stage = "second derivative over the region (interval64)";
  // The passes of a batch run in parallel (each with its own copies of the tightening hooks, which count the
  // intermediates); their results are then added in the order of k, as one pass after another would.
  const Index batch = std::max<Index>(1, 2 * Index(omp_get_max_threads()));
  std::vector<std::vector<Grid<Tangent>>> batch_parts;
  for (Index b0 = 0; b0 < passes && finite; b0 += batch) {
    const Index count = std::min(batch, passes - b0);
    batch_parts.assign(std::size_t(count), {});
    parallel_passes(
        count,
        [&](Index q) {
          std::vector<BallTightening> local = tights;
          for (int j = 0; j < pieces; ++j) {
            local[std::size_t(j)].begin_pass();
            batch_parts[std::size_t(q)].push_back(closed_form<Tangent>(
                layer, options, seeded(boxes[std::size_t(j)], (b0 + q) * chunk), local[std::size_t(j)]));
          }
        },
        [&](Index q) {
          if (so_options.progress) so_options.progress(stage, (b0 + q) * chunk, nd);
        });
    for (Index q = 0; q < count && finite; ++q) {
      const Index k0 = (b0 + q) * chunk;
      const std::vector<Grid<Tangent>>& parts = batch_parts[std::size_t(q)];
      // The average of the pieces' partials (the pieces' own enclosure when there is one).
      const auto entry = [&](Index r, Index c, Index t) {
        if (pieces == 1) return parts[0](r, c).g[std::size_t(t)];
        interval64 sum(0.0);
        for (const Grid<Tangent>& J : parts) sum = sum + J(r, c).g[std::size_t(t)];
        return sum * weight;
      };
      for (Index t = 0; t < chunk && k0 + t < nd; ++t) {
        // [T_k]: entry (r, c) encloses ∂J_rc/∂x_k over the box, k = k0 + t.
        interval64 frob2(0.0), norm_inf(0.0), norm_one(0.0);
        std::fill(col.begin(), col.end(), interval64(0.0));
        for (Index r = 0; r < nd; ++r) {
          interval64 row(0.0);
          for (Index c = 0; c < nd; ++c) {
            const interval64 e = entry(r, c, t);
            Tk(r, c) = e;
            if (flatten) M(r, (k0 + t) * nd + c) = e;
            const interval64 m(magnitude(e));
            finite = finite && std::isfinite(m.upper());
            row = row + m;
            col[std::size_t(c)] = col[std::size_t(c)] + m;
            frob2 = frob2 + m * m;
          }
          row_acc[std::size_t(r)] =
              row_acc[std::size_t(r)] + interval64(row.upper()) * interval64(row.upper());
          norm_inf = interval64(std::max(norm_inf.upper(), row.upper()));
        }
        if (!finite) break;
        for (Index c = 0; c < nd; ++c) {
          const double g = col[std::size_t(c)].upper();
          col_acc[std::size_t(c)] = col_acc[std::size_t(c)] + interval64(g) * interval64(g);
          norm_one = interval64(std::max(norm_one.upper(), g));
        }
        double u2 = std::min(frob2.upper(), (norm_one * norm_inf).upper());
        if (nd <= so_options.spectral_limit) {
          const double u = spectral_norm_bound(Tk).upper;
          u2 = std::min(u2, (interval64(u) * interval64(u)).upper());
        }
        sum_u2 = sum_u2 + interval64(u2);
        if (gap) gap->add(Tk, k0 + t);
      }
    }
  }
  if (so_options.progress) so_options.progress(stage, nd, nd);
  if (!finite) {
    out.slope_two = out.slope_inf = infinity;
    return out;
  }
  double max_row = 0, max_col = 0;
  for (Index r = 0; r < nd; ++r) {
    max_row = std::max(max_row, row_acc[std::size_t(r)].upper());
    max_col = std::max(max_col, col_acc[std::size_t(r)].upper());
  }
  out.slope_inf = sqrt_up(max_row);
  // ‖Σ_k u_k T'_k‖₂ = ‖M'(u ⊗ I)‖₂ ≤ ‖M'‖₂ for ‖u‖ ≤ 1 and every M' in [M] (‖u ⊗ I‖₂ = ‖u‖).
  if (flatten) out.slope_flat = spectral_norm_bound(M).upper;
  out.slope_two = std::min({out.slope_flat, sqrt_up(sum_u2.upper()),
                            sqrt_up(sqrt_up((interval64(max_row) * interval64(max_col)).upper()))});
  out.two_upper = (interval64(out.centre_two) + interval64(l2_radius) * interval64(out.slope_two)).upper();
  out.inf_upper = (interval64(out.centre_inf) + interval64(l2_radius) * interval64(out.slope_inf)).upper();
  out.finite = std::isfinite(out.two_upper) && std::isfinite(out.inf_upper);
  if (gap && out.finite) {
    spectral_gap_bound(*gap, Jc, l2_radius, out, so_options.coupling_map);
    out.gap_top = gap->top;
  }
  // The Taylor form: first-order coefficients from the point region {X} (same v̂), remainders from the third
  // derivative over `taylor_pieces` nested pieces, piece i of m covering t ∈ [(i − 1)/m, i/m] with weight
  // ω_i = ∫ (1 − t) dt over it = (1/m)(1 − (2i − 1)/(2m)) (Σ ω_i = 1/2).
  if (gap && out.finite && so_options.taylor && nd <= so_options.taylor_limit && l2_radius > 0) {
    SecondOrderOptions at_centre = so_options;
    at_centre.taylor = false;
    at_centre.radius_pieces = 1;
    at_centre.tightening_sweeps = 0;
    at_centre.top = gap->top;
    at_centre.coupling_map = true;
    const SecondOrderBound centre =
        second_order_bound(layer, options, X, Matrix<interval64>(X.cast<interval64>()), 0.0, at_centre);
    const int m =
        pieces % std::max(1, so_options.taylor_pieces) == 0 ? std::max(1, so_options.taylor_pieces) : 1;
    std::vector<HessianSweep> sweeps;
    std::vector<interval64> weights;
    for (int i = 1; i <= m && centre.finite; ++i) {
      const std::size_t piece = taylor_piece_region(i, m, pieces);
      sweeps.push_back(hessian_sweep(layer, options, boxes[piece], tights[piece].bound, gap->v, gap->w,
                                     so_options.progress));
      if (!sweeps.back().finite) break;
      weights.push_back(taylor_piece_weight(i, m));
    }
    if (centre.finite && !sweeps.empty() && sweeps.back().finite && int(sweeps.size()) == m) {
      taylor_bound(centre, sweeps, weights, l2_radius, out);
      out.taylor_pieces = m;
    }
  }
  return out;
}

}  // namespace regatta::lip::detail
