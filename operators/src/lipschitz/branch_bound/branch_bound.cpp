// Branch and bound for the Lipschitz constant on a domain (see branch_bound.hpp and
// docs/branch-and-bound.md).
#include <regatta/operators/lipschitz/branch_bound.hpp>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <numbers>
#include <set>
#include <utility>

#include <mpfi.h>
#include <mpfr.h>

#include <regatta/core/dense_svd.hpp>
#include <regatta/core/error.hpp>
#include <regatta/core/interval64.hpp>
#include <regatta/core/spectral_norm.hpp>
#include <regatta/operators/lipschitz/local.hpp>
#include <regatta/operators/lipschitz/region.hpp>
#include "centred_jacobian.hpp"

namespace regatta::lip {

namespace {

using Eigen::Index;
using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Prenorm;

/// The best-first order: larger upper first, then older boxes first (a strict total order, so the pop
/// order does not depend on the heap's layout).
bool heap_less(const BnbBox& a, const BnbBox& b) {
  if (a.upper != b.upper) return a.upper < b.upper;
  return a.id > b.id;
}

bool has_bias(const std::vector<Vector<double>>& b) {
  for (const auto& v : b)
    if (v.size() != 0 && !v.isZero(0)) return true;
  return false;
}

double mignitude(const interval64& x) {
  if (x.lower() <= 0 && x.upper() >= 0) return 0;
  return std::min(std::fabs(x.lower()), std::fabs(x.upper()));
}

/// Certified upper bound on the induced norm of every matrix in J (+inf for a non-finite entry).
double norm_upper(const Matrix<interval64>& J, Norm norm) {
  for (Index r = 0; r < J.rows(); ++r)
    for (Index c = 0; c < J.cols(); ++c)
      if (!std::isfinite(J(r, c).lower()) || !std::isfinite(J(r, c).upper())) return infinity;
  if (norm == Norm::two) return spectral_norm_upper_fast(J).upper;
  double best = 0;
  for (Index r = 0; r < J.rows(); ++r) {
    interval64 row(0.0);
    for (Index c = 0; c < J.cols(); ++c) row = row + interval64(magnitude(J(r, c)));
    best = std::max(best, row.upper());
  }
  return best;
}

/// Certified lower bound on the induced norm of every matrix in J (a point enclosure: of J itself).
double norm_lower(const Matrix<interval64>& J, Norm norm) {
  for (Index r = 0; r < J.rows(); ++r)
    for (Index c = 0; c < J.cols(); ++c)
      if (!std::isfinite(J(r, c).lower()) || !std::isfinite(J(r, c).upper())) return 0;
  if (norm == Norm::two) return std::max(0.0, spectral_norm_upper_fast(J).lower);
  double best = 0;
  for (Index r = 0; r < J.rows(); ++r) {
    interval64 row(0.0);
    for (Index c = 0; c < J.cols(); ++c) row = row + interval64(mignitude(J(r, c)));
    best = std::max(best, row.lower());
  }
  return best;
}

double norm_estimate(const Matrix<double>& J, Norm norm) {
  if (norm == Norm::two) return largest_singular_value(J);
  return J.cwiseAbs().rowwise().sum().maxCoeff();
}

/// cos (sine = false) or sin over the angles [a, b], enclosed: MPFI at 64 bits (which handles the extrema
/// inside the interval), endpoints rounded outward to binary64.
interval64 trig_range(double a, double b, bool sine) {
  mpfi_t x, y;
  mpfr_t end;
  mpfi_init2(x, 64);
  mpfi_init2(y, 64);
  mpfr_init2(end, 64);
  mpfi_interv_d(x, a, b);
  if (sine)
    mpfi_sin(y, x);
  else
    mpfi_cos(y, x);
  mpfi_get_left(end, y);
  const double lo = mpfr_get_d(end, MPFR_RNDD);
  mpfi_get_right(end, y);
  const double hi = mpfr_get_d(end, MPFR_RNDU);
  mpfr_clear(end);
  mpfi_clear(y);
  mpfi_clear(x);
  return interval64::hull(lo, hi);
}

/// The interval box of X (n×d) that `box` covers: the box itself, or in polar coordinates (d = 2) the
/// enclosure of r_i·(cos θ_i, sin θ_i) over it.
Matrix<interval64> token_box(const BnbBox& box, Index n, Index d, bool polar) {
  Matrix<interval64> X(n, d);
  for (Index i = 0; i < n; ++i) {
    if (polar) {
      const interval64 r = interval64::hull(box.lo[2 * i], box.hi[2 * i]);
      const double t_lo = box.lo[2 * i + 1], t_hi = box.hi[2 * i + 1];
      X(i, 0) = r * trig_range(t_lo, t_hi, false);
      X(i, 1) = r * trig_range(t_lo, t_hi, true);
    } else {
      for (Index a = 0; a < d; ++a) X(i, a) = interval64::hull(box.lo[i * d + a], box.hi[i * d + a]);
    }
  }
  return X;
}

/// M (2×2) exactly of the form aI + bJ, J the quarter turn: then M commutes with every rotation Q of the
/// plane, and so do Mᵀ, products and sums of such matrices.
bool commutes_with_rotations(const Matrix<double>& M) {
  return M.rows() == 2 && M.cols() == 2 && M(0, 0) == M(1, 1) && M(0, 1) == -M(1, 0);
}

/// F(XQ) = F(X)Q + const for every rotation Q of the plane, by a sufficient condition checked exactly (no
/// rounding): d = 2, no query or key bias, and per head WQ_h, WK_h, WV_h, WO_h all 2×2 of the form aI + bJ.
/// Then the scores x·WQ_h·WK_hᵀ·yᵀ (dot) or −‖(x − y)WQ_h‖² (tied L2) are invariant under x ↦ xQ and the
/// value-output map WV_h·WO_h commutes with Q (value and output biases add constants, which the Jacobian
/// does not see).
bool rotation_equivariant(const AttentionLayer& layer) {
  if (layer.d != 2 || has_bias(layer.bQ) || has_bias(layer.bK)) return false;
  if (layer.kind == AttentionKind::l2 && !layer.tied()) return false;
  for (int h = 0; h < layer.heads; ++h) {
    const std::size_t k = std::size_t(h);
    const Matrix<double> WO_h = layer.WO.middleRows(Index(h) * layer.value_dim, layer.value_dim);
    for (const Matrix<double>* M : {&layer.WQ[k], &layer.WK[k], &layer.WV[k], &WO_h})
      if (!commutes_with_rotations(*M)) return false;
  }
  return true;
}

nlohmann::json matrix_json(const Matrix<double>& m) {
  nlohmann::json rows = nlohmann::json::array();
  for (Index i = 0; i < m.rows(); ++i) {
    nlohmann::json row = nlohmann::json::array();
    for (Index j = 0; j < m.cols(); ++j) row.push_back(m(i, j));
    rows.push_back(std::move(row));
  }
  return rows;
}

nlohmann::json vectors_json(const std::vector<Vector<double>>& vs) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : vs) out.push_back(std::vector<double>(v.data(), v.data() + v.size()));
  return out;
}

nlohmann::json number_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

std::vector<double> read_vector(const nlohmann::json& v, std::size_t size, const std::string& source,
                                const std::string& what) {
  if (!v.is_array() || v.size() != size)
    throw InputError(source, what + " must be an array of " + std::to_string(size) + " numbers");
  std::vector<double> out;
  out.reserve(size);
  for (const auto& x : v) {
    if (!x.is_number() || !std::isfinite(x.get<double>()))
      throw InputError(source, what + " holds an entry that is not a finite number");
    out.push_back(x.get<double>());
  }
  return out;
}

}  // namespace

std::string to_string(DomainShape shape) { return shape == DomainShape::box ? "box" : "ball"; }

Symmetries applicable_symmetries(const AttentionLayer& layer, const AttentionOptions& options,
                                 const BnbDomain& domain, const Symmetries& requested) {
  Symmetries s;
  s.permutation = requested.permutation && !options.causal;
  const bool tied_l2 = layer.kind == AttentionKind::l2 && layer.tied();
  s.translation = requested.translation && s.permutation && tied_l2 && options.prenorm == Prenorm::none &&
                  domain.shape == DomainShape::box;
  const bool even_scores =
      tied_l2 || (layer.kind == AttentionKind::dot && !has_bias(layer.bQ) && !has_bias(layer.bK));
  s.sign = requested.sign && even_scores && options.prenorm == Prenorm::none &&
           // with translation the reduction compares the first and last gaps: it needs n ≥ 3
           (!s.translation || domain.n >= 3);
  s.rotation = requested.rotation && domain.shape == DomainShape::ball && options.prenorm == Prenorm::none &&
               rotation_equivariant(layer);
  if (s.rotation) s.sign = false;  // −I is a rotation: θ_1 = 0 already keeps one of X, −X
  return s;
}

BranchBound::BranchBound(AttentionLayer layer, AttentionOptions options, BnbDomain domain, BnbOptions bnb)
    : layer_(std::move(layer)), options_(options), domain_(domain), bnb_(bnb) {
  layer_.validate();
  if (const auto why = region_refusal(layer_, options_)) throw InputError("branch and bound", *why);
  // Its symmetry reductions (token permutations), the centred enclosure and the checkpoint's layer record
  // are for layers whose tokens carry no position.
  if (layer_.rotary)
    throw InputError("branch and bound",
                     "rotary position embeddings are not covered (the symmetry reductions "
                     "and checkpoints assume tokens without positions)");
  if (!(std::isfinite(domain_.radius) && domain_.radius > 0))
    throw InputError("domain radius", "must be finite and > 0");
  if (domain_.n < 1) throw InputError("n", "must be >= 1");
  if (!(std::isfinite(bnb_.gap) && bnb_.gap > 0)) throw InputError("gap", "must be finite and > 0");
  if (bnb_.batch < 1) throw InputError("batch", "must be >= 1");
  const Index k = domain_.n * layer_.d;
  if (k > bnb_max_dimension)
    throw InputError("n*d", "= " + std::to_string(k) + " exceeds the branch-and-bound limit " +
                                std::to_string(bnb_max_dimension) +
                                ": first-order enclosures need about (1/gap)^(n*d) boxes to close the gap, "
                                "beyond any machine above this size");
  Symmetries requested = bnb_.symmetries;
  // θ_1 = 0 is a constraint in polar coordinates; ‖J(XQ)‖ = ‖J(X)‖ holds for the 2-norm (an orthogonal
  // similarity), not for the ∞-norm.
  requested.rotation = requested.rotation && bnb_.polar && bnb_.norm == Norm::two;
  symmetries_ = applicable_symmetries(layer_, options_, domain_, requested);
  // Polar boxes only where they bring the rotation reduction (one coordinate fewer): without it they took
  // 1.6-2.4 times as many boxes as Cartesian ones on random d = 2 layers (bench/RESULTS.md).
  polar_ = symmetries_.rotation;
  centred_ = !detail::centred_refusal(layer_, options_).has_value();
  // The origin lies in D: a Jacobian that overflows there leaves no finite constant to bracket, and the
  // search would split boxes whose enclosures are all infinite without ever pruning one.
  const Matrix<double> origin = Matrix<double>::Zero(domain_.n, layer_.d);
  if (!block_dense_jacobian<double>(layer_, options_, origin).allFinite())
    throw InputError("layer",
                     "its Jacobian at X = 0 is not a finite double (the weights are too large for "
                     "the double range): rescale them");
}

bool BranchBound::feasible(const BnbBox& box) const {
  const Index n = domain_.n, d = layer_.d;
  if (polar_) {
    // Every polar box lies in the disks (r ≤ R); the sign reduction and θ_1 = 0 are in the root box's
    // ranges (initial_state). Permutation: the angles sorted, from token 1 on (after θ_1 = 0 with rotation).
    if (symmetries_.permutation)
      for (Index i = symmetries_.rotation ? 1 : 0; i + 1 < n; ++i)
        if (box.lo[2 * i + 1] > box.hi[2 * (i + 1) + 1]) return false;
    return true;
  }
  if (domain_.shape == DomainShape::ball) {
    // Infeasible when the smallest norm of some token over the box certainly exceeds R.
    const interval64 R2 = interval64(domain_.radius) * interval64(domain_.radius);
    for (Index i = 0; i < n; ++i) {
      interval64 sq(0.0);
      for (Index a = 0; a < d; ++a) {
        const double lo = box.lo[i * d + a], hi = box.hi[i * d + a];
        const double m = (lo <= 0 && hi >= 0) ? 0.0 : std::min(std::fabs(lo), std::fabs(hi));
        sq = sq + interval64(m) * interval64(m);
      }
      if (sq.lower() > R2.upper()) return false;
    }
  }
  const auto first = [&](Index i) { return interval64::hull(box.lo[i * d], box.hi[i * d]); };
  if (symmetries_.permutation)
    for (Index i = 0; i + 1 < n; ++i)
      if (box.lo[i * d] > box.hi[(i + 1) * d]) return false;
  if (symmetries_.sign) {
    if (symmetries_.translation) {
      if ((first(1) - first(0)).lower() > (first(n - 1) - first(n - 2)).upper()) return false;
    } else if (symmetries_.permutation) {
      if ((first(0) + first(n - 1)).upper() < 0) return false;
    } else if (box.hi[0] < 0) {
      return false;
    }
  }
  return true;
}

std::vector<double> BranchBound::domain_point(const BnbBox& box) const {
  const Index n = domain_.n, d = layer_.d;
  std::vector<double> c(box.lo.size());
  for (std::size_t k = 0; k < c.size(); ++k) c[k] = box.lo[k] + (box.hi[k] - box.lo[k]) / 2;
  if (polar_)  // the centre in (r, θ), mapped to the plane; the scaling below catches a rounding outside
    for (Index i = 0; i < n; ++i) {
      const double r = c[std::size_t(2 * i)], t = c[std::size_t(2 * i + 1)];
      c[std::size_t(2 * i)] = r * std::cos(t);
      c[std::size_t(2 * i + 1)] = r * std::sin(t);
    }
  if (domain_.shape == DomainShape::ball) {
    // Scale each token into the ball; the result is checked with outward rounding (0 if that fails).
    const auto norm = [&](Index i) {
      interval64 sq(0.0);
      for (Index a = 0; a < d; ++a) sq = sq + interval64(c[i * d + a]) * interval64(c[i * d + a]);
      return sqrt(sq);
    };
    for (Index i = 0; i < n; ++i) {
      const interval64 r = norm(i);
      if (r.upper() <= domain_.radius) continue;
      const double s = domain_.radius / r.upper() * (1 - 0x1p-40);
      for (Index a = 0; a < d; ++a) c[i * d + a] *= s;
      if (!(norm(i).upper() <= domain_.radius))
        for (Index a = 0; a < d; ++a) c[i * d + a] = 0;
    }
  }
  return c;
}

BnbEvaluation BranchBound::evaluate(const BnbBox& box, double threshold) const {
  BnbEvaluation out;
  out.feasible = feasible(box);
  if (!out.feasible) return out;
  const Index n = domain_.n, d = layer_.d;
  const Matrix<interval64> X = token_box(box, n, d, polar_);
  // The lower end at a point of D: the centre (the box domain contains it), or its projection on the balls.
  out.point = domain_point(box);
  Matrix<double> C(n, d);  // the centre of the centred form: any point of X
  for (Index i = 0; i < n; ++i)
    for (Index a = 0; a < d; ++a) {
      const double lo = X(i, a).lower(), hi = X(i, a).upper();
      C(i, a) = polar_ ? std::clamp(out.point[std::size_t(i * d + a)], lo, hi) : lo + (hi - lo) / 2;
    }
  // J(c) enclosed by the library's structured rows at the exact point c.
  const Matrix<interval64> at_centre =
      block_dense_jacobian_on_box<interval64>(layer_, options_, C.cast<interval64>());
  // Over the box: the centred form where it applies (much tighter on small boxes), else the naive enclosure.
  const Matrix<interval64> J = centred_ ? detail::centred_enclosure(layer_, options_, X, C, at_centre)
                                        : block_dense_jacobian_on_box<interval64>(layer_, options_, X);
  out.upper = norm_upper(J, bnb_.norm);
  Matrix<double> P(n, d);
  for (Index i = 0; i < n; ++i)
    for (Index a = 0; a < d; ++a) P(i, a) = out.point[i * d + a];
  const bool at_c = P == C;
  Matrix<double> mid(at_centre.rows(), at_centre.cols());
  if (at_c) {
    for (Index r = 0; r < mid.rows(); ++r)
      for (Index c = 0; c < mid.cols(); ++c)
        mid(r, c) = at_centre(r, c).lower() / 2 + at_centre(r, c).upper() / 2;
  } else {
    mid = block_dense_jacobian<double>(layer_, options_, P);
  }
  // Certified only where the double estimate could raise the current lower end.
  if (norm_estimate(mid, bnb_.norm) >= threshold)
    out.lower = norm_lower(
        at_c ? at_centre : block_dense_jacobian_on_box<interval64>(layer_, options_, P.cast<interval64>()),
        bnb_.norm);
  return out;
}

BnbBox BranchBound::root_box() const {
  const Index k = dimension();
  BnbBox root;
  root.lo.assign(k, -domain_.radius);
  root.hi.assign(k, domain_.radius);
  if (symmetries_.translation) root.hi[0] = -domain_.radius;
  if (polar_) {
    // r_i ∈ [0, R]; the angles cover a full turn (the binary64 neighbours above π, π/2, 2π: a little more).
    const double up = std::numeric_limits<double>::infinity();
    const double pi = std::nextafter(std::numbers::pi, up), half = std::nextafter(std::numbers::pi / 2, up),
                 two_pi = std::nextafter(2 * std::numbers::pi, up);
    for (Index i = 0; i < domain_.n; ++i) {
      root.lo[std::size_t(2 * i)] = 0;
      root.lo[std::size_t(2 * i + 1)] = symmetries_.rotation && symmetries_.permutation ? 0 : -pi;
      root.hi[std::size_t(2 * i + 1)] = symmetries_.rotation && symmetries_.permutation ? two_pi : pi;
    }
    if (symmetries_.rotation) {
      // Rotate token 1 to θ = 0; with permutation the others, measured from it in [0, 2π), are sorted.
      root.lo[1] = root.hi[1] = 0;
    } else if (symmetries_.sign) {
      // One of X, −X has: the smallest angle ≤ 0 (sorted: when all angles lie in (0, π], those of −X lie
      // in (−π, 0]); without the sorted order, θ_1 in [−π/2, π/2].
      if (symmetries_.permutation) {
        root.hi[1] = 0;
      } else {
        root.lo[1] = -half;
        root.hi[1] = half;
      }
    }
  }
  return root;
}

BnbState BranchBound::initial_state() const {
  BnbBox root = root_box();
  BnbState state;
  root.id = state.next_id++;
  const BnbEvaluation e = evaluate(root, 0);
  apply(state, {root}, {e});
  return state;
}

void BranchBound::check_resumed(const BnbState& state, const std::string& source) const {
  const BnbBox root = root_box();
  const Index n = domain_.n, d = layer_.d;
  std::set<std::uint64_t> ids;
  for (const BnbBox& b : state.frontier) {
    if (!ids.insert(b.id).second)
      throw InputError(source, "two frontier boxes have the id " + std::to_string(b.id));
    for (std::size_t k = 0; k < b.lo.size(); ++k)
      if (!(b.lo[k] >= root.lo[k] && b.hi[k] <= root.hi[k]))
        throw InputError(source, "frontier box " + std::to_string(b.id) + " is not inside the domain");
  }
  if (state.evaluated < state.frontier.size())
    throw InputError(source, "'evaluated' is below the number of frontier boxes");
  // The lower end: re-certified at its witness, which must lie in D.
  if (state.witness.empty()) {
    if (state.lower != 0) throw InputError(source, "'lower' is positive but there is no witness");
  } else {
    Matrix<double> P(n, d);
    for (Index i = 0; i < n; ++i)
      for (Index a = 0; a < d; ++a) P(i, a) = state.witness[std::size_t(i * d + a)];
    for (Index i = 0; i < n; ++i) {
      interval64 sq(0.0);
      for (Index a = 0; a < d; ++a) {
        if (!(std::fabs(P(i, a)) <= domain_.radius))
          throw InputError(source, "the witness is not in the domain");
        sq = sq + interval64(P(i, a)) * interval64(P(i, a));
      }
      if (domain_.shape == DomainShape::ball && !(sqrt(sq).upper() <= domain_.radius))
        throw InputError(source, "the witness is not in the domain");
    }
    const double certified = norm_lower(
        block_dense_jacobian_on_box<interval64>(layer_, options_, P.cast<interval64>()), bnb_.norm);
    if (!(state.lower <= certified))
      throw InputError(source, "'lower' is above the certified norm at its witness");
  }
  // Each frontier box's bound, evaluated again (deterministic: the same number when the file is the run's).
  std::vector<double> again(state.frontier.size());
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 16)
  for (std::ptrdiff_t i = 0; i < std::ptrdiff_t(again.size()); ++i) {
    try {
      const BnbEvaluation e = evaluate(state.frontier[std::size_t(i)], infinity);
      again[std::size_t(i)] = e.feasible ? e.upper : 0;
    } catch (...) {
#pragma omp critical(regatta_bnb_resume_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  for (std::size_t i = 0; i < again.size(); ++i)
    if (!(state.frontier[i].upper >= again[i]))
      throw InputError(source, "frontier box " + std::to_string(state.frontier[i].id) +
                                   " has an 'upper' below its evaluation");
}

BnbBracket BranchBound::bracket(const BnbState& state) const {
  BnbBracket b;
  b.lower = state.lower;
  b.upper = std::max(state.lower, state.pruned_upper);
  if (!state.frontier.empty()) b.upper = std::max(b.upper, state.frontier.front().upper);
  b.gap_reached = b.upper - b.lower <= bnb_.gap * b.lower || b.upper == b.lower;
  return b;
}

bool BranchBound::done(const BnbState& state) const {
  return state.frontier.empty() || bracket(state).gap_reached;
}

double BranchBound::threshold(const BnbState& state) const { return state.lower; }

std::vector<BnbBox> BranchBound::split_batch(BnbState& state) const {
  std::vector<BnbBox> children;
  for (int taken = 0; taken < bnb_.batch && !state.frontier.empty(); ++taken) {
    std::pop_heap(state.frontier.begin(), state.frontier.end(), heap_less);
    BnbBox box = std::move(state.frontier.back());
    state.frontier.pop_back();
    // The widest coordinate whose midpoint lies strictly inside (first on ties).
    std::size_t best = box.lo.size();
    double width = 0;
    for (std::size_t k = 0; k < box.lo.size(); ++k) {
      const double w = split_width(box, k);
      const double mid = box.lo[k] + (box.hi[k] - box.lo[k]) / 2;
      if (w > width && mid > box.lo[k] && mid < box.hi[k]) {
        best = k;
        width = w;
      }
    }
    if (best == box.lo.size()) {  // cannot be split: its bound stays in the bracket
      state.pruned_upper = std::max(state.pruned_upper, box.upper);
      continue;
    }
    const double mid = box.lo[best] + (box.hi[best] - box.lo[best]) / 2;
    BnbBox left = box, right = std::move(box);
    left.hi[best] = mid;
    right.lo[best] = mid;
    left.id = state.next_id++;
    right.id = state.next_id++;
    children.push_back(std::move(left));
    children.push_back(std::move(right));
  }
  ++state.steps;
  return children;
}

double BranchBound::split_width(const BnbBox& box, std::size_t k) const {
  const double w = box.hi[k] - box.lo[k];
  if (polar_ && k % 2 == 1) return w * box.hi[k - 1];  // θ_i: arc length at the outer radius r_i
  return w;
}

void BranchBound::apply(BnbState& state, std::vector<BnbBox> boxes,
                        const std::vector<BnbEvaluation>& results) const {
  const double old_lower = state.lower;
  for (std::size_t i = 0; i < boxes.size(); ++i) {
    ++state.evaluated;
    const BnbEvaluation& e = results[i];
    if (e.feasible && e.lower > state.lower) {
      state.lower = e.lower;
      state.witness = e.point;
    }
  }
  const double prune = state.lower * (1 + bnb_.gap);
  for (std::size_t i = 0; i < boxes.size(); ++i) {
    if (!results[i].feasible) continue;
    BnbBox& box = boxes[i];
    box.upper = results[i].upper;
    if (box.upper <= prune) {
      state.pruned_upper = std::max(state.pruned_upper, box.upper);
      continue;
    }
    state.frontier.push_back(std::move(box));
    std::push_heap(state.frontier.begin(), state.frontier.end(), heap_less);
  }
  if (state.lower > old_lower) {  // a better lower end prunes part of the frontier
    const auto keep = std::partition(state.frontier.begin(), state.frontier.end(),
                                     [&](const BnbBox& b) { return b.upper > prune; });
    for (auto it = keep; it != state.frontier.end(); ++it)
      state.pruned_upper = std::max(state.pruned_upper, it->upper);
    state.frontier.erase(keep, state.frontier.end());
    std::make_heap(state.frontier.begin(), state.frontier.end(), heap_less);
  }
}

nlohmann::json BranchBound::problem_json() const {
  const AttentionLayer& l = layer_;
  nlohmann::json WQ = nlohmann::json::array(), WK = nlohmann::json::array(), WV = nlohmann::json::array();
  for (int h = 0; h < l.heads; ++h) {
    WQ.push_back(matrix_json(l.WQ[h]));
    WK.push_back(matrix_json(l.WK[h]));
    WV.push_back(matrix_json(l.WV[h]));
  }
  const auto vec = [](const Vector<double>& v) { return std::vector<double>(v.data(), v.data() + v.size()); };
  // Keys for the polar coordinates and the rotation only where they are used: checkpoints of other problems
  // read as before.
  nlohmann::json domain = {{"shape", to_string(domain_.shape)}, {"radius", domain_.radius}, {"n", domain_.n}};
  if (polar_) domain["coordinates"] = "polar";
  nlohmann::json symmetries = {{"permutation", symmetries_.permutation},
                               {"translation", symmetries_.translation},
                               {"sign", symmetries_.sign}};
  if (symmetries_.rotation) symmetries["rotation"] = true;
  return {{"layer",
           {{"kind", operators::to_string(l.kind)},
            {"d", l.d},
            {"heads", l.heads},
            {"head_dim", l.head_dim},
            {"value_dim", l.value_dim},
            {"WQ", WQ},
            {"WK", WK},
            {"WV", WV},
            {"WO", matrix_json(l.WO)},
            {"bQ", vectors_json(l.bQ)},
            {"bK", vectors_json(l.bK)},
            {"bV", vectors_json(l.bV)},
            {"bO", vec(l.bO)},
            {"norm_gamma", vec(l.norm_gamma)},
            {"norm_beta", vec(l.norm_beta)},
            {"norm_eps", l.norm_eps}}},
          {"options",
           {{"causal", options_.causal},
            {"residual", options_.residual},
            {"allow_untied_l2", options_.allow_untied_l2},
            {"prenorm", operators::to_string(options_.prenorm)},
            {"sinkhorn_iterations", options_.sinkhorn_iterations}}},
          {"domain", domain},
          {"norm", to_string(bnb_.norm)},
          {"symmetries", symmetries},
          {"batch", bnb_.batch}};
}

std::optional<std::string> BranchBound::describe_mismatch(const nlohmann::json& mine,
                                                          const nlohmann::json& theirs) {
  if (!theirs.is_object()) return "it holds no problem description";
  for (const char* key : {"layer", "options", "domain", "norm", "symmetries", "batch"}) {
    if (!theirs.contains(key)) return std::string("its problem has no '") + key + "'";
    if (mine.at(key) != theirs.at(key))
      return std::string("the ") + key + " differs" +
             (std::string(key) == "layer" || std::string(key) == "options"
                  ? std::string()
                  : " (this run: " + mine.at(key).dump() + ", the file: " + theirs.at(key).dump() + ")");
  }
  return std::nullopt;
}

nlohmann::json state_to_json(const BnbState& state) {
  nlohmann::json frontier = nlohmann::json::array();
  for (const BnbBox& b : state.frontier)
    frontier.push_back({{"id", b.id}, {"upper", number_or_null(b.upper)}, {"lo", b.lo}, {"hi", b.hi}});
  return {{"lower", state.lower},     {"witness", state.witness},     {"pruned_upper", state.pruned_upper},
          {"next_id", state.next_id}, {"evaluated", state.evaluated}, {"steps", state.steps},
          {"frontier", frontier}};
}

BnbState state_from_json(const nlohmann::json& v, Eigen::Index dimension, const std::string& source) {
  const std::size_t k = std::size_t(dimension);
  if (!v.is_object()) throw InputError(source, "'state' must be an object");
  BnbState s;
  try {
    const auto finite = [&](const char* key) {
      const double x = v.at(key).get<double>();
      if (!std::isfinite(x) || x < 0)
        throw InputError(source, std::string("'") + key + "' must be finite, >= 0");
      return x;
    };
    s.lower = finite("lower");
    s.pruned_upper = finite("pruned_upper");
    s.next_id = v.at("next_id").get<std::uint64_t>();
    s.evaluated = v.at("evaluated").get<std::uint64_t>();
    s.steps = v.at("steps").get<std::uint64_t>();
    if (!v.at("witness").empty()) s.witness = read_vector(v.at("witness"), k, source, "'witness'");
    for (const auto& b : v.at("frontier")) {
      BnbBox box;
      box.id = b.at("id").get<std::uint64_t>();
      if (box.id >= s.next_id) throw InputError(source, "a frontier box has an id >= next_id");
      box.upper = b.at("upper").is_null() ? infinity : b.at("upper").get<double>();
      if (std::isnan(box.upper) || box.upper < 0)
        throw InputError(source, "a frontier box has a bad 'upper'");
      box.lo = read_vector(b.at("lo"), k, source, "a frontier box's 'lo'");
      box.hi = read_vector(b.at("hi"), k, source, "a frontier box's 'hi'");
      for (std::size_t j = 0; j < k; ++j)
        if (box.lo[j] > box.hi[j]) throw InputError(source, "a frontier box has lo > hi");
      s.frontier.push_back(std::move(box));
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError(source, std::string("malformed checkpoint state: ") + e.what());
  }
  std::make_heap(s.frontier.begin(), s.frontier.end(), heap_less);
  return s;
}

void run_branch_bound(const BranchBound& problem, BnbState& state,
                      const std::function<bool(const BnbState&)>& should_stop,
                      const std::function<void(const BnbState&)>& on_step) {
  while (!problem.done(state) && !(should_stop && should_stop(state))) {
    const double threshold = problem.threshold(state);
    std::vector<BnbBox> boxes = problem.split_batch(state);
    std::vector<BnbEvaluation> results(boxes.size());
    std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1)
    for (std::ptrdiff_t i = 0; i < std::ptrdiff_t(boxes.size()); ++i) {
      try {
        results[i] = problem.evaluate(boxes[i], threshold);
      } catch (...) {
#pragma omp critical(regatta_bnb_failure)
        if (!failure) failure = std::current_exception();
      }
    }
    if (failure) std::rethrow_exception(failure);
    problem.apply(state, std::move(boxes), results);
    if (on_step) on_step(state);
  }
}

}  // namespace regatta::lip
