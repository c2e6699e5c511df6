// regatta verify (docs/verify.md#method-graphsrcverifycpp): IBP on the input box (tightened, inequality by
// inequality, by the caller's certified bounds when it gives them: the CLI's affine forms), a PGD and corner
// attack, and branch and bound by input splitting. Verdicts are sound: unsat needs every box of a partition
// of the outer box refuted by certified bounds; sat needs an MPFI re-check at the exact counterexample.
#include <regatta/graph/verify.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <queue>
#include <random>
#include <stdexcept>

#include <regatta/core/error.hpp>
#include <regatta/graph/attack.hpp>
#include <regatta/graph/evaluate.hpp>

#include "pgd.hpp"
#include "phase_search.hpp"

namespace regatta::graph {

std::string verdict_name(Verdict v) {
  switch (v) {
    case Verdict::unsat:
      return "unsat";
    case Verdict::sat:
      return "sat";
    case Verdict::unknown:
      return "unknown";
    case Verdict::timeout:
      return "timeout";
  }
  return "unknown";
}

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
using Clock = std::chrono::steady_clock;

interval64 term_interval(const Term& t, const std::vector<interval64>& y) {
  return t.output >= 0 ? y[static_cast<std::size_t>(t.output)]
                       : interval64::hull(t.constant.lower, t.constant.upper);
}
double term_value(const Term& t, const std::vector<double>& y) {
  return t.output >= 0 ? y[static_cast<std::size_t>(t.output)]
                       : 0.5 * t.constant.lower + 0.5 * t.constant.upper;
}

// Over per-atom certified upper bounds of greater − smaller (atoms numbered disjunct by disjunct): whether
// every disjunct is certainly false, and a score (the largest, over the disjuncts, of the smallest upper
// bound over its atoms) that splitting tries to push below zero.
struct BoxBound {
  bool proved = false;
  double score = inf;
  std::vector<double> upper;  // per atom
};
BoxBound box_bound(const Property& p, std::vector<double> upper) {
  BoxBound b{true, -inf, {}};
  std::size_t k = 0;
  for (const auto& d : p.disjuncts) {
    bool refuted = false;
    double s = inf;
    for (const Atom& a : d) {
      const double u = upper[k++];
      if (a.strict ? u <= 0 : u < 0) refuted = true;
      s = std::min(s, u);
    }
    if (!refuted) b.proved = false;
    b.score = std::max(b.score, s);
  }
  b.upper = std::move(upper);
  return b;
}

// The upper bound of greater − smaller of every atom from the output enclosure (interval arithmetic).
std::vector<double> interval_uppers(const Property& p, const std::vector<interval64>& y) {
  std::vector<double> upper;
  for (const auto& d : p.disjuncts)
    for (const Atom& a : d) {
      const interval64 diff = term_interval(a.greater, y) - term_interval(a.smaller, y);
      upper.push_back(diff.is_nan() ? inf : diff.upper());
    }
  return upper;
}

// The functional smaller − greater of the outputs of each atom (its constants are added after bounding):
// a certified lower bound L of it gives upper(greater − smaller) ≤ −L + upper(c_greater) − lower(c_smaller).
std::vector<OutputFunctional> atom_functionals(const Property& p) {
  std::vector<OutputFunctional> f;
  for (const auto& d : p.disjuncts)
    for (const Atom& a : d) {
      OutputFunctional g;
      if (a.smaller.output >= 0) g.terms.emplace_back(static_cast<std::size_t>(a.smaller.output), 1.0);
      if (a.greater.output >= 0) g.terms.emplace_back(static_cast<std::size_t>(a.greater.output), -1.0);
      f.push_back(std::move(g));
    }
  return f;
}
std::vector<double> functional_uppers(const Property& p, const std::vector<double>& lower) {
  std::vector<double> upper;
  std::size_t k = 0;
  for (const auto& d : p.disjuncts)
    for (const Atom& a : d) {
      const double l = lower[k++];
      interval64 u = std::isnan(l) ? interval64(inf) : -interval64(l);
      if (a.greater.output < 0) u = u + interval64::hull(a.greater.constant.lower, a.greater.constant.upper);
      if (a.smaller.output < 0) u = u - interval64::hull(a.smaller.constant.lower, a.smaller.constant.upper);
      upper.push_back(u.is_nan() ? inf : u.upper());
    }
  return upper;
}

// The attack's objective at a point: max over disjuncts of min over atoms of greater − smaller (>= 0 where
// the double forward says the condition holds).
double point_score(const Property& p, const std::vector<double>& y) {
  double best = -inf;
  for (const auto& d : p.disjuncts) {
    double s = inf;
    for (const Atom& a : d) s = std::min(s, term_value(a.greater, y) - term_value(a.smaller, y));
    best = std::max(best, s);
  }
  return std::isnan(best) ? -inf : best;
}

struct Box {
  std::vector<double> lo, hi;
  double score = 0;
  int depth = 0;
};
struct ByScore {
  bool operator()(const Box& a, const Box& b) const { return a.score < b.score; }
};

class Search {
 public:
  Search(const Graph& g, const Property& p, const VerifyOptions& o)
      : g_(g), p_(p), o_(o), start_(Clock::now()), rng_(o.seed) {
    const double limit = std::max(0.0, o.timeout_seconds);
    deadline_ = start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit));
    in_shape_ = g.values[static_cast<std::size_t>(g.inputs[0])].shape;
    n_ = p.input_count;
    for (std::size_t k = 0; k < n_; ++k)
      if (!(p.inner_lower[k] <= p.inner_upper[k])) inner_empty_ = true;
    if (o.box_lower_bounds || (o.phase_bounds && o.split)) functionals_ = atom_functionals(p);
  }

  VerifyResult run() {
    // 1. IBP (and the caller's bounds) on the whole box.
    Box root{p_.outer_lower, p_.outer_upper, 0, 0};
    const BoxBound rb = ibp(root.lo, root.hi);
    std::vector<double> upper = rb.upper;
    r_.root_bound = rb.score;
    if (rb.proved) {
      r_.proved_by = "ibp";
      return done(Verdict::unsat, "interval bound propagation on the whole box refutes every disjunct");
    }
    root.score = rb.score;
    if (o_.phase_bounds && o_.split) phases_ = o_.phase_bounds(root.lo, root.hi, functionals_);
    if (!functionals_.empty() && (phases_ || o_.box_lower_bounds)) {
      const std::vector<double> affine =
          phases_ ? (++r_.affine_evaluations, functional_uppers(p_, phases_->root().lower))
                  : affine_uppers(root.lo, root.hi);
      const BoxBound ab = box_bound(p_, affine);
      for (std::size_t k = 0; k < upper.size(); ++k) upper[k] = std::min(upper[k], affine[k]);
      const BoxBound cb = box_bound(p_, upper);
      r_.root_affine_bound = cb.score;
      if (cb.proved) {
        r_.proved_by = ab.proved ? "affine" : "ibp+affine";
        return done(Verdict::unsat, ab.proved ? "the affine forms on the whole box refute every disjunct"
                                              : "interval and affine bounds on the whole box (the better per "
                                                "inequality) refute every disjunct");
      }
      root.score = cb.score;
    }
    // 2. The attack, for its share of the time.
    if (o_.box_encloses_set) {  // a point of the box need not lie in the set: no attack
    } else if (inner_empty_) {
      r_.reason =
          "no binary64 point lies in the box (a bound is not a double and the box is that thin): no "
          "counterexample can be checked";
    } else {
      const auto attack_end =
          start_ + std::chrono::duration_cast<Clock::duration>((deadline_ - start_) * o_.attack_share);
      if (attack(attack_end))
        return done(Verdict::sat, "the attack found an input whose outputs certainly satisfy a disjunct");
    }
    if (out_of_time()) return done(Verdict::timeout, "time limit reached during the attack");
    if (!o_.split)
      return done(
          Verdict::unknown,
          "the bounds of the whole box do not refute every disjunct, and splitting is off (--no-split)");
    if (phases_) return phase_branch_and_bound(rb.upper, std::move(root));
    if (o_.box_encloses_set)
      return done(Verdict::unknown, "no phase splitting, and input splitting does not apply to the set");
    return input_branch_and_bound(std::move(root));
  }

 private:
  // 3. Branch and bound by input splitting.
  VerifyResult input_branch_and_bound(Box root) {
    r_.splitting += r_.splitting.empty() ? "input" : ", then input";
    sensitivity(root);
    if (r_.verdict == Verdict::sat) return r_;
    if (out_of_time()) return done(Verdict::timeout, "time limit reached while ranking the input dimensions");
    return branch_and_bound(std::move(root));
  }

  VerifyResult done(Verdict v, const std::string& why) {
    r_.verdict = v;
    if (v != Verdict::unknown || r_.reason.empty()) r_.reason = why;
    r_.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    return r_;
  }
  bool out_of_time() const {
    return Clock::now() >= deadline_ || (o_.stop != nullptr && o_.stop->load(std::memory_order_relaxed));
  }

  std::vector<double> ibp_uppers(const std::vector<double>& lo, const std::vector<double>& hi) {
    Tensor<interval64> x{in_shape_, std::vector<interval64>(n_)};
    for (std::size_t k = 0; k < n_; ++k) x.data[k] = interval64::hull(lo[k], hi[k]);
    const auto out = evaluate<interval64>(g_, {x});
    ++r_.ibp_evaluations;
    return interval_uppers(p_, out[0].data);
  }
  BoxBound ibp(const std::vector<double>& lo, const std::vector<double>& hi) {
    return box_bound(p_, ibp_uppers(lo, hi));
  }
  // The caller's certified bounds of the atoms over the box (functional_uppers).
  std::vector<double> affine_uppers(const std::vector<double>& lo, const std::vector<double>& hi) {
    ++r_.affine_evaluations;
    const std::vector<double> lower = o_.box_lower_bounds(lo, hi, functionals_);
    if (lower.size() != functionals_.size())
      throw std::logic_error("verify: box_lower_bounds returned the wrong number of bounds");
    return functional_uppers(p_, lower);
  }
  // The better, atom by atom, of IBP and the caller's bounds (IBP alone when it already refutes the box).
  BoxBound tightened(const std::vector<double>& lo, const std::vector<double>& hi, const BoxBound& by_ibp) {
    if (by_ibp.proved || !o_.box_lower_bounds || out_of_time()) return by_ibp;
    std::vector<double> upper = by_ibp.upper;
    const std::vector<double> affine = affine_uppers(lo, hi);
    for (std::size_t k = 0; k < upper.size(); ++k) upper[k] = std::min(upper[k], affine[k]);
    const BoxBound b = box_bound(p_, upper);
    if (b.proved) ++r_.boxes_proved_by_affine;
    return b;
  }

  // The double forward at x (a point of the inner box); checks and records a counterexample.
  double point(const std::vector<double>& x) {
    const auto out = evaluate<double>(g_, {Tensor<double>{in_shape_, x}});
    ++r_.point_evaluations;
    const double s = point_score(p_, out[0].data);
    if (s >= 0 && r_.verdict != Verdict::sat && certainly_satisfies(g_, p_, x)) {
      r_.verdict = Verdict::sat;
      r_.input = x;
      r_.output = out[0].data;
    }
    return s;
  }
  std::vector<double> clamp_inner(std::vector<double> x) const {
    for (std::size_t k = 0; k < n_; ++k) x[k] = std::clamp(x[k], p_.inner_lower[k], p_.inner_upper[k]);
    return x;
  }
  std::vector<double> random_corner() {
    std::vector<double> x(n_);
    for (std::size_t k = 0; k < n_; ++k) x[k] = (rng_() & 1) ? p_.inner_upper[k] : p_.inner_lower[k];
    return x;
  }

  // The attack (docs/verify.md, "Method"): the centre, every corner in low dimension, projected gradient
  // ascent of the property's objective over the inner box for half the attack's time, then random search over
  // the corners (an l∞ ball's extreme points) with uniform random points for low dimensions. True when a
  // counterexample is certified.
  bool attack(Clock::time_point end) {
    std::vector<double> mid(n_);
    for (std::size_t k = 0; k < n_; ++k) mid[k] = 0.5 * p_.inner_lower[k] + 0.5 * p_.inner_upper[k];
    point(clamp_inner(mid));
    if (r_.verdict == Verdict::sat) return true;
    if (n_ <= 10) {  // every corner
      for (std::size_t mask = 0; mask < (std::size_t{1} << n_); ++mask) {
        std::vector<double> x(n_);
        for (std::size_t k = 0; k < n_; ++k) x[k] = (mask >> k & 1) ? p_.inner_upper[k] : p_.inner_lower[k];
        point(x);
        if (r_.verdict == Verdict::sat) return true;
        if (out_of_time()) return false;
      }
    }
    if (gradient_attack(Clock::now() + (end - Clock::now()) / 2)) return true;
    if (out_of_time()) return false;
    std::vector<double> best = random_corner();
    double best_score = point(best);
    std::uniform_real_distribution<double> unit(0, 1);
    std::size_t step = 0, stalled = 0;
    // Ends at its share of the time, or after 1000 steps without progress (the branch and bound then also
    // tries the centre of every box it takes).
    while (r_.verdict != Verdict::sat && Clock::now() < end && !out_of_time() && stalled < 1000) {
      std::vector<double> x = best;
      if (n_ <= 16 && step % 2 == 1) {
        for (std::size_t k = 0; k < n_; ++k)
          x[k] = p_.inner_lower[k] + unit(rng_) * (p_.inner_upper[k] - p_.inner_lower[k]);
        x = clamp_inner(x);
      } else {
        // Flip a random block of coordinates to the opposite end; the block shrinks as the search goes on.
        const double fraction =
            std::max(1.0 / static_cast<double>(n_), 0.1 / (1.0 + static_cast<double>(step) / 50.0));
        const std::size_t m =
            std::max<std::size_t>(1, static_cast<std::size_t>(fraction * static_cast<double>(n_)));
        for (std::size_t j = 0; j < m; ++j) {
          const std::size_t k = rng_() % n_;
          x[k] = x[k] == p_.inner_upper[k] ? p_.inner_lower[k] : p_.inner_upper[k];
        }
      }
      const double s = point(x);
      stalled = s > best_score ? 0 : stalled + 1;
      if (s >= best_score) {
        best_score = s;
        best = std::move(x);
      }
      ++step;
    }
    return r_.verdict == Verdict::sat;
  }

  // PGD (graph/src/pgd.hpp) maximising the objective over the inner box (the l∞ set with the box's centre and
  // half-widths as scale, radius 1, clamped to the inner box exactly), restarting from random points of the
  // box (32 starts at most) until `end`. The objective max_d min_a (greater − smaller) is piecewise linear in
  // the outputs: its gradient on the active piece is the vjp with w = e_greater − e_smaller of the active
  // atom. Every point it evaluates is a candidate checked like point()'s. True when a counterexample is
  // certified.
  bool gradient_attack(Clock::time_point end) {
    AttackSet set{Norm::linf,     std::vector<double>(n_), 1.0, std::vector<double>(n_),
                  p_.inner_lower, p_.inner_upper};
    for (std::size_t k = 0; k < n_; ++k) {
      set.centre[k] =
          std::clamp(0.5 * p_.inner_lower[k] + 0.5 * p_.inner_upper[k], p_.inner_lower[k], p_.inner_upper[k]);
      set.scale[k] = std::max(set.centre[k] - p_.inner_lower[k], p_.inner_upper[k] - set.centre[k]);
    }
    detail::Objective objective;
    objective.value = [this](const std::vector<double>& y, std::vector<double>& w) {
      const Atom* active = nullptr;
      double best = -inf;
      for (const auto& d : p_.disjuncts) {
        double s = inf;
        const Atom* low = nullptr;
        for (const Atom& a : d) {
          const double v = term_value(a.greater, y) - term_value(a.smaller, y);
          if (v < s || low == nullptr) {
            s = v;
            low = &a;
          }
        }
        if (low == nullptr) return -inf;  // an empty disjunct holds everywhere
        if (s > best || active == nullptr) {
          best = s;
          active = low;
        }
      }
      if (active == nullptr || std::isnan(best)) return inf;  // no atom: nothing to steer (or a NaN output)
      // Minimise −objective.
      if (active->greater.output >= 0) w[static_cast<std::size_t>(active->greater.output)] -= 1;
      if (active->smaller.output >= 0) w[static_cast<std::size_t>(active->smaller.output)] += 1;
      return -best;
    };
    objective.visit = [this, end](const std::vector<double>& x, const std::vector<double>& y, double value) {
      ++r_.point_evaluations;
      if (-value >= 0 && r_.verdict != Verdict::sat && certainly_satisfies(g_, p_, x)) {
        r_.verdict = Verdict::sat;
        r_.input = x;
        r_.output = y;
      }
      return r_.verdict == Verdict::sat || Clock::now() >= end || out_of_time();
    };
    AttackOptions options;
    options.steps = 50;
    options.restarts = 31;  // 32 starts at most (like the corner search's stall limit, so a long time limit
                            // still leaves the branch and bound its share), or until `end`
    options.seed = o_.seed;
    options.stop = o_.stop;
    detail::pgd_minimise(g_, set, objective, options);
    return r_.verdict == Verdict::sat;
  }

  // How much the attack objective moves when one coordinate goes from the centre to its upper end: the
  // ranking of split dimensions (n + 1 point evaluations, each also a counterexample candidate).
  void sensitivity(const Box& root) {
    weight_.assign(n_, 1.0);
    if (n_ <= 16 || inner_empty_) return;  // every dimension is tried at each split
    std::vector<double> c(n_);
    for (std::size_t k = 0; k < n_; ++k) c[k] = 0.5 * root.lo[k] + 0.5 * root.hi[k];
    c = clamp_inner(c);
    const double base = point(c);
    for (std::size_t k = 0; k < n_ && r_.verdict != Verdict::sat; ++k) {
      if (out_of_time()) return;  // the rest keep weight 1
      std::vector<double> x = c;
      x[k] = p_.inner_upper[k];
      const double s = point(x);
      weight_[k] = std::isfinite(s) && std::isfinite(base) ? std::abs(s - base) + 1e-12 : 1.0;
    }
  }

  VerifyResult branch_and_bound(Box root) {
    const std::size_t max_boxes = std::max<std::size_t>(2, o_.max_frontier_bytes / (16 * n_ + 64));
    std::priority_queue<Box, std::vector<Box>, ByScore> open;
    open.push(std::move(root));
    double proved = 0;
    while (!open.empty()) {
      if (out_of_time()) break;
      Box b = open.top();
      open.pop();
      if (!inner_empty_) {  // the centre of the box, inside the inner box, as a counterexample candidate
        std::vector<double> c(n_);
        for (std::size_t k = 0; k < n_; ++k) c[k] = 0.5 * b.lo[k] + 0.5 * b.hi[k];
        point(clamp_inner(c));
        if (r_.verdict == Verdict::sat)
          return done(Verdict::sat,
                      "the centre of a box in the branch and bound is a certified counterexample");
      }
      // Candidate dimensions: all (low dimension) or the largest sensitivity × width.
      std::vector<std::size_t> dims;
      for (std::size_t k = 0; k < n_; ++k) {
        const double m = 0.5 * b.lo[k] + 0.5 * b.hi[k];
        if (m > b.lo[k] && m < b.hi[k]) dims.push_back(k);
      }
      if (dims.empty()) {
        r_.proved_volume_fraction = proved;
        return done(Verdict::unknown,
                    "a box too thin to split (one binary64 step wide) is not refuted by its interval bound");
      }
      const std::size_t keep =
          n_ <= 16 ? dims.size() : std::min(dims.size(), std::max<std::size_t>(1, o_.split_candidates));
      std::partial_sort(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(keep), dims.end(),
                        [&](std::size_t a, std::size_t c) {
                          return weight_[a] * (b.hi[a] - b.lo[a]) > weight_[c] * (b.hi[c] - b.lo[c]);
                        });
      dims.resize(keep);
      // Try each: the split whose halves have the lowest bounds.
      double best = inf;
      Box best_l, best_r;
      BoxBound best_bl, best_br;
      for (std::size_t k : dims) {
        const double m = 0.5 * b.lo[k] + 0.5 * b.hi[k];
        Box l{b.lo, b.hi, 0, b.depth + 1}, r{b.lo, b.hi, 0, b.depth + 1};
        l.hi[k] = m;
        r.lo[k] = m;
        const BoxBound bl = ibp(l.lo, l.hi);
        const BoxBound br = ibp(r.lo, r.hi);
        // The sum of the halves' bounds (a proved half counts 0): the worse half alone is myopic (a split
        // that only helps one half, as along the dimension a ReLU depends on, would lose to a split that
        // shaves a little off both).
        const double worse = (bl.proved ? 0.0 : bl.score) + (br.proved ? 0.0 : br.score);
        if (worse < best || best_l.lo.empty()) {
          best = worse;
          best_l = std::move(l);
          best_r = std::move(r);
          best_bl = bl;
          best_br = br;
        }
        if (out_of_time()) break;
      }
      ++r_.boxes_split;
      // The chosen halves get the caller's bounds too (the candidates were scored by IBP alone).
      best_bl = tightened(best_l.lo, best_l.hi, best_bl);
      best_br = tightened(best_r.lo, best_r.hi, best_br);
      for (auto [box, bound] : {std::pair{&best_l, best_bl}, std::pair{&best_r, best_br}}) {
        if (bound.proved) {
          ++r_.boxes_proved;
          proved += std::ldexp(1.0, -box->depth);
        } else {
          box->score = bound.score;
          open.push(std::move(*box));
        }
      }
      r_.max_frontier = std::max(r_.max_frontier, open.size());
      if (open.size() > max_boxes) {
        r_.proved_volume_fraction = proved;
        return done(Verdict::unknown, "the frontier of open boxes reached its memory limit");
      }
    }
    r_.proved_volume_fraction = proved;
    if (open.empty()) {
      r_.proved_by = "splitting";
      return done(Verdict::unsat,
                  functionals_.empty()
                      ? "every box of the input splitting is refuted by its interval bound"
                      : "every box of the input splitting is refuted by its interval or affine "
                        "bounds");
    }
    return done(Verdict::timeout, "time limit reached during the branch and bound");
  }

  // 3′. Branch and bound on ReLU phases (phase_search.hpp); each branch's atom bounds are the better of the
  // root's IBP bound (valid on every branch: a branch is a subset of the box) and the branch's own.
  // A branch stuck with no unstable ReLU left hands the whole box to input splitting (a fresh, sound proof).
  VerifyResult phase_branch_and_bound(const std::vector<double>& ibp_upper, Box root) {
    r_.splitting = "phase";
    const auto judge = [&](const std::vector<double>& lower) {
      std::vector<double> upper = functional_uppers(p_, lower);
      for (std::size_t k = 0; k < upper.size(); ++k) upper[k] = std::min(upper[k], ibp_upper[k]);
      detail::PhaseJudgement j;
      const BoxBound b = box_bound(p_, upper);
      j.proved = b.proved;
      j.score = b.score;
      double worst = -inf;  // the functional deciding the score: the best atom of the worst open disjunct
      std::size_t k = 0;
      for (const auto& d : p_.disjuncts) {
        std::size_t at = k;
        for (std::size_t a = k; a < k + d.size(); ++a)
          if (upper[a] < upper[at]) at = a;
        if (!d.empty() && upper[at] >= worst) {
          worst = upper[at];
          j.functional = at;
        }
        k += d.size();
      }
      return j;
    };
    const detail::PhaseSearchResult s = detail::phase_search(
        *phases_, judge, [this] { return out_of_time(); }, o_.max_frontier_bytes);
    r_.phase_branches = s.branches;
    r_.phase_branches_proved = s.proved;
    r_.phase_max_depth = s.max_depth;
    r_.max_frontier = s.max_frontier;
    for (const auto& [node, count] : s.branches_by_node)
      r_.phase_branches_by_kind[std::string(op_name(g_.nodes[node].op))] += count;
    using End = detail::PhaseSearchResult::End;
    switch (s.end) {
      case End::proved:
        r_.proved_by = "splitting";
        return done(Verdict::unsat,
                    "every branch of the ReLU phase splitting is refuted by its affine bounds");
      case End::memory:
        return done(Verdict::unknown, "the frontier of open phase branches reached its memory limit");
      case End::stuck:
        if (o_.box_encloses_set)
          return done(Verdict::unknown, "a phase branch with no element left to split is not refuted");
        return input_branch_and_bound(std::move(root));
      case End::out_of_time:
        break;
    }
    return done(Verdict::timeout, "time limit reached during the phase branch and bound");
  }

  const Graph& g_;
  const Property& p_;
  const VerifyOptions& o_;
  Clock::time_point start_, deadline_;
  std::mt19937_64 rng_;
  Shape in_shape_;
  std::size_t n_ = 0;
  bool inner_empty_ = false;
  std::vector<double> weight_;
  std::vector<OutputFunctional> functionals_;  // one per atom, when the caller gave box_lower_bounds
  std::unique_ptr<PhaseBounder> phases_;       // the phase splitting's bounder, when it applies
  VerifyResult r_;
};

void check_model(const Graph& g, const Property& p) {
  if (g.inputs.size() != 1 || g.outputs.size() != 1)
    throw InputError(g.source, "the model has " + std::to_string(g.inputs.size()) + " inputs and " +
                                   std::to_string(g.outputs.size()) + " outputs; verify needs one of each");
  check_property_size(
      p, static_cast<std::size_t>(element_count(g.values[static_cast<std::size_t>(g.inputs[0])].shape)),
      static_cast<std::size_t>(element_count(g.values[static_cast<std::size_t>(g.outputs[0])].shape)));
}

}  // namespace

bool certainly_satisfies(const Graph& g, const Property& p, const std::vector<double>& input) {
  check_model(g, p);
  for (std::size_t k = 0; k < p.input_count; ++k)
    if (!(input[k] >= p.inner_lower[k] && input[k] <= p.inner_upper[k])) return false;
  Tensor<interval> x{g.values[static_cast<std::size_t>(g.inputs[0])].shape, {}};
  x.data.reserve(input.size());
  for (double v : input) x.data.emplace_back(v);
  const auto out = evaluate<interval>(g, {x});
  std::vector<interval64> y;
  y.reserve(out[0].data.size());
  for (const interval& v : out[0].data) y.emplace_back(v);  // outward to binary64
  for (const auto& d : p.disjuncts) {
    bool all = true;
    for (const Atom& a : d) {
      const interval64 diff = term_interval(a.greater, y) - term_interval(a.smaller, y);
      if (diff.is_nan() || !(a.strict ? diff.lower() > 0 : diff.lower() >= 0)) {
        all = false;
        break;
      }
    }
    if (all) return true;
  }
  return false;
}

VerifyResult verify(const Graph& graph, const Property& property, const VerifyOptions& options) {
  check_model(graph, property);
  return Search(graph, property, options).run();
}

}  // namespace regatta::graph
