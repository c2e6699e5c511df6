// Branch and bound for the Lipschitz constant on a domain (see branch_bound.hpp and
// docs/branch-and-bound.md): the problem, its symmetries, the frontier of boxes (root, best-first split,
// pruning) and the driver. The bound of one box is bounding.cpp; the resumable state is checkpoint.cpp.
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
#include "box_bounds.hpp"
#include "centred_jacobian.hpp"

namespace regatta::lip {

namespace {

using Eigen::Index;
using operators::AttentionKind;
using operators::AttentionLayer;
using operators::AttentionOptions;
using operators::Prenorm;

bool has_bias(const std::vector<Vector<double>>& b) {
  for (const auto& v : b)
    if (v.size() != 0 && !v.isZero(0)) return true;
  return false;
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
    std::pop_heap(state.frontier.begin(), state.frontier.end(), detail::heap_less);
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
    std::push_heap(state.frontier.begin(), state.frontier.end(), detail::heap_less);
  }
  if (state.lower > old_lower) {  // a better lower end prunes part of the frontier
    const auto keep = std::partition(state.frontier.begin(), state.frontier.end(),
                                     [&](const BnbBox& b) { return b.upper > prune; });
    for (auto it = keep; it != state.frontier.end(); ++it)
      state.pruned_upper = std::max(state.pruned_upper, it->upper);
    state.frontier.erase(keep, state.frontier.end());
    std::make_heap(state.frontier.begin(), state.frontier.end(), detail::heap_less);
  }
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
