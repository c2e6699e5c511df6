// Brackets, witness certification, the Kim et al. tightness family and the Theorem 3.1 growth (bracket.hpp).
#include <regatta/operators/lipschitz/bracket.hpp>
#include <regatta/operators/lipschitz/region.hpp>

#include <cmath>
#include <limits>

#include <regatta/core/convert.hpp>
#include <regatta/core/detail/scalar_math.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/core/random_matrix.hpp>
#include <regatta/operators/differentiable.hpp>
#include "jacobian_probe.hpp"
#include "search_support.hpp"

namespace regatta::lip {

namespace {

using operators::AttentionLayer;
using operators::AttentionOptions;

/// ‖J(X)v‖_F/‖v‖_F (2-norm) or Σ_k |J_rk(X)| (∞-norm) of a witness, in S.
template <class S>
S witness_value(const operators::Block<S>& block, const JacobianWitness& w, Norm norm) {
  using std::abs;
  using std::sqrt;
  const operators::Linearization<S> lin = block.linearize(matrix_cast<S>(w.input));
  if (norm == Norm::two) {
    const Matrix<S> V = matrix_cast<S>(w.direction);
    const Matrix<S> Jv = lin.jvp(V);
    S num(0), den(0);
    for (Eigen::Index i = 0; i < Jv.rows(); ++i)
      for (Eigen::Index a = 0; a < Jv.cols(); ++a) num += regatta::detail::square<S>(Jv(i, a));
    for (Eigen::Index i = 0; i < V.rows(); ++i)
      for (Eigen::Index a = 0; a < V.cols(); ++a) den += regatta::detail::square<S>(V(i, a));
    return sqrt(num / den);
  }
  const Matrix<double> E = detail::unit_matrix(w.input.rows(), w.input.cols(), w.row);
  const Matrix<S> row = lin.vjp(matrix_cast<S>(E));
  S sum(0);
  for (Eigen::Index i = 0; i < row.rows(); ++i)
    for (Eigen::Index a = 0; a < row.cols(); ++a) sum += abs(row(i, a));
  return sum;
}

}  // namespace

WitnessCertificate certify_witness(const AttentionLayer& layer, const AttentionOptions& options,
                                   const JacobianWitness& witness, Norm norm, std::optional<double> radius,
                                   unsigned precision_bits) {
  detail::check_precision(precision_bits);
  WitnessCertificate c;
  if (witness.input.size() == 0) {
    c.reason = "no witness";
    return c;
  }
  if (norm == Norm::two ? witness.direction.rows() != witness.input.rows() ||
                              witness.direction.cols() != witness.input.cols() || witness.direction.isZero(0)
                        : witness.row < 0 || witness.row >= witness.input.size()) {
    c.reason = "the witness has no direction (2-norm) or row (inf-norm)";
    return c;
  }
  const PrecisionGuard guard(precision_bits);
  if (radius) {
    const Eigen::Index i = detail::first_row_outside_ball(witness.input, *radius);
    if (i >= 0) {
      c.reason = "token " + std::to_string(i) + " of the witness is not certainly inside B_R";
      return c;
    }
  }
  const operators::Block<interval> block(layer, options);
  const interval value = witness_value(block, witness, norm);
  const double lower = detail::round_down(lower_bound(value));
  if (!std::isfinite(lower) || !scalar_traits<interval>::is_finite(value)) {
    c.reason = "the interval enclosure of the witness value is not finite";
    return c;
  }
  c.lower = lower;
  return c;
}

namespace {

/// The region enclosure over the box [−R, R]^{n×d} ⊇ (B_R)^n as a candidate upper end (see Bracket).
void region_upper_end(const AttentionLayer& layer, const AttentionOptions& options,
                      const BracketOptions& bracket, Bracket& b) {
  if (!bracket.radius) {
    b.region_note = "no region enclosure: the domain is unbounded (no radius)";
    return;
  }
  if (const auto why = region_refusal(layer, options)) {
    b.region_note = "no region enclosure: " + *why;
    return;
  }
  const std::int64_t nd = bracket.n * std::int64_t(layer.d);
  if (nd > bracket.region_limit) {
    b.region_note = "no region enclosure: n*d = " + std::to_string(nd) + " exceeds the region limit " +
                    std::to_string(bracket.region_limit);
    return;
  }
  RegionOptions region_options;
  region_options.closed_form = false;
  const RegionNormReport r = region_jacobian_norms(layer, options, Matrix<double>::Zero(bracket.n, layer.d),
                                                   Region{RegionShape::box, *bracket.radius}, region_options);
  if (!r.certified) {
    b.region_note = "region enclosure over the box [-R, R]^(n x d): " + r.status;
    return;
  }
  b.region_upper = bracket.norm == Norm::two ? r.two_upper : r.inf_upper;
  if (b.upper_certified && *b.upper_certified <= *b.region_upper) {
    b.region_note = "the region enclosure over the box [-R, R]^(n x d) is not below " + b.bound_name;
    return;
  }
  b.region_note = b.upper_certified ? "the region enclosure over the box [-R, R]^(n x d) is below " +
                                          b.bound_name + " (" + std::to_string(*b.upper_certified) + ")"
                                    : "no formula bound applies; the region enclosure gives the upper end";
  b.upper_certified = b.region_upper;
  b.upper = *b.region_upper;
  b.bound_name = "region.box_enclosure";
  b.bound_description =
      "interval64 enclosure of the Jacobian over the box [-R, R]^(n x d), which contains every input with "
      "tokens in B_R (not a published bound; region.hpp)";
}

}  // namespace

Bracket compute_bracket(const AttentionLayer& layer, const AttentionOptions& options,
                        const BracketOptions& bracket) {
  layer.validate();
  if (bracket.n < 1) throw InputError("n", "must be at least 1, got " + std::to_string(bracket.n));
  if (bracket.radius && !(*bracket.radius > 0 && std::isfinite(*bracket.radius)))
    throw InputError("radius", "must be positive and finite");
  detail::check_precision(bracket.precision_bits);

  Bracket b;
  b.norm = bracket.norm;
  b.n = bracket.n;
  b.radius = bracket.radius;

  BoundSetting setting;
  setting.n = bracket.n;
  setting.radius = bracket.radius;
  const std::vector<BoundReport> reports =
      theoretical_bounds(layer, options, setting, bracket.norm, bracket.precision_bits);
  const BoundReport* best = nullptr;
  for (const BoundReport& r : reports) {
    if (!is_sequence_bound(r.bound)) continue;
    if (!r.applies) {
      b.refused.push_back(info(r.bound).id + ": " + r.reason);
      continue;
    }
    const double key = bracket.certify ? r.certified_upper : r.value;
    if (!best || key < (bracket.certify ? best->certified_upper : best->value)) best = &r;
  }
  if (best) {
    b.bound_name = info(best->bound).id;
    b.bound_description = info(best->bound).name;
    b.upper_estimate = best->value;
  }

  SearchOptions search = bracket.search;
  search.norm = bracket.norm;
  search.radius = bracket.radius;
  const SearchResult found = search_jacobian_norm(layer, options, bracket.n, search);
  b.witness = found.best;
  b.all_rows = found.all_rows;
  b.evaluations = found.evaluations;
  b.stopped_by_budget = found.stopped_by_budget;
  b.stopped_by_evaluations = found.stopped_by_evaluations;
  b.lower_estimate = found.best.value;

  b.lower = b.lower_estimate;
  b.upper = b.upper_estimate;
  if (bracket.certify) {
    const WitnessCertificate c =
        certify_witness(layer, options, b.witness, bracket.norm, bracket.radius, bracket.precision_bits);
    b.lower_certified = c.lower;
    if (c.lower) b.lower = *c.lower;
    if (best && std::isfinite(best->certified_upper)) {
      b.upper_certified = best->certified_upper;
      b.upper = best->certified_upper;
    }
    region_upper_end(layer, options, bracket, b);
    b.certified = b.lower_certified.has_value() && b.upper_certified.has_value();
    if (!c.lower) b.note = "lower end not certified: " + c.reason;
    if (!best && !b.region_upper)
      b.note += std::string(b.note.empty() ? "" : "; ") + "no applicable bound, so no certified upper end";
    else if (!b.upper_certified)
      b.note += std::string(b.note.empty() ? "" : "; ") + "the certified bound exceeds the double range";
  }
  b.ratio = std::isfinite(b.upper) && b.upper > 0 ? b.lower / b.upper : 0;
  return b;
}

// ---- Kim et al. tightness family ----

AttentionLayer kim_unit_layer() {
  AttentionLayer layer;
  layer.d = layer.heads = layer.head_dim = layer.value_dim = 1;
  layer.kind = operators::AttentionKind::l2;
  const Matrix<double> one = Matrix<double>::Ones(1, 1);
  layer.WQ = {one};
  layer.WK = {one};
  layer.WV = {one};
  layer.WO = one;
  return layer;
}

double kim_family_row_sum(std::int64_t n, double t) {
  if (n < 3 || n % 2 == 0)
    throw InputError("n", "the closed form needs an odd n >= 3, got " + std::to_string(n));
  if (!(t >= 0.5) || !std::isfinite(t)) throw InputError("t", "the closed form needs a finite t >= 1/2");
  const double p = 1 / (1 + double(n - 1) * std::exp(-t));
  return 4 * (1 - p) * t + 2 * p - 1;
}

TightnessPoint kim_tightness(std::int64_t n) {
  if (n < 2) throw InputError("n", "the tightness family needs n >= 2, got " + std::to_string(n));
  const AttentionLayer layer = kim_unit_layer();
  const operators::Block<double> block(layer);
  const Vector<double> u = Vector<double>::Ones(1);
  const std::vector<Eigen::Index> first{0};
  const auto row_sum = [&](double t) {
    return detail::row_probe(block.linearize(balanced_input(n, u, std::sqrt(t), 0)), first).value;
  };
  TightnessPoint p;
  p.n = n;
  const detail::ScalarMax m = detail::maximize_log_scale(row_sum, 0.5, 40, 12, 40);
  p.t = m.argument;
  p.lower = m.value;
  p.witness = balanced_input(n, u, std::sqrt(p.t), 0);
  BoundSetting setting;
  setting.n = n;
  p.upper = evaluate<double>(Bound::kim_inf, layer, {}, setting);
  p.ratio = p.lower / p.upper;
  return p;
}

// ---- Theorem 3.1 growth ----

std::vector<GrowthPoint> theorem31_growth(const AttentionLayer& layer, const AttentionOptions& options,
                                          Eigen::Index n, std::span<const double> scales, Norm norm,
                                          unsigned precision_bits, std::uint64_t seed) {
  layer.validate();
  detail::check_precision(precision_bits);
  if (n < 2) throw InputError("n", "the construction needs n >= 2, got " + std::to_string(n));
  Vector<double> u = layer.d == 1 ? Vector<double>::Ones(1) : standard_normal(layer.d, seed);
  u /= u.norm();
  const operators::Block<double> block(layer, options);
  std::vector<GrowthPoint> out;
  for (const double c : scales) {
    if (!(c > 0) || !std::isfinite(c)) throw InputError("scales", "every scale must be positive and finite");
    GrowthPoint g;
    g.scale = c;
    g.input = balanced_input(n, u, c, 0);
    JacobianWitness w;
    w.input = g.input;
    const operators::Linearization<double> lin = block.linearize(g.input);
    if (norm == Norm::two) {
      const Vector<double> start = standard_normal(n * layer.d, detail::mix_seed(seed, 1));
      const detail::Probe p =
          detail::power_probe(lin, Eigen::Map<const Matrix<double>>(start.data(), n, layer.d), 1000, 1e-13);
      w.direction = p.direction;
    } else {
      const std::vector<Eigen::Index> first{0};
      const detail::Probe p = detail::row_probe(lin, first);
      w.row = p.row;
      w.direction = p.direction;
    }
    {
      const PrecisionGuard guard(precision_bits);
      const operators::Block<mpfr> high(layer, options);
      g.value = scalar_traits<mpfr>::to_double(witness_value(high, w, norm));
    }
    g.certified_lower = certify_witness(layer, options, w, norm, std::nullopt, precision_bits).lower;
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace regatta::lip
