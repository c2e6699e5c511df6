#include <regatta/proofs/engine.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include <regatta/core/error.hpp>
#include <regatta/core/io/json_file.hpp>
#include <regatta/core/precision.hpp>
#include <regatta/proofs/detail/numeric.hpp>

namespace regatta::proofs {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double inf = std::numeric_limits<double>::infinity();

/// Bits by which an mpfr ratio may exceed 1 before an uncertified excess counts as a suspected violation
/// (rounding of a tight bound evaluated at p bits stays far below 2^(−p+32)).
constexpr int violation_slack_bits = 32;
/// An uncertified candidate whose mpfr ratio lies within this window below 1 is an equality point (a tight
/// bound attained up to rounding); below the window the interval enclosures were merely too wide.
constexpr double tight_window = 0x1.0p-20;

std::uint64_t splitmix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t hash_id(const std::string& s) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

/// lhs/rhs with the conventions of a ≤ relation: rhs > 0 the plain ratio; rhs = 0 gives 0 (lhs < 0), 1
/// (equality) or +inf; rhs < 0 gives rhs/lhs (≤ 1 exactly when lhs ≤ rhs).
double ratio_of(double l, double r) {
  if (r > 0) return l / r;
  if (r == 0) return l < 0 ? 0.0 : (l == 0 ? 1.0 : inf);
  return l < 0 ? r / l : inf;
}

double relative_error(double v, double r) { return std::abs(v - r) / std::max(1.0, std::abs(r)); }

double relative_error(const mpfr& v, const mpfr& r) {
  using std::abs;
  const mpfr scale = abs(r) > 1 ? mpfr(abs(r)) : mpfr(1);
  return static_cast<double>(mpfr(abs(v - r) / scale));
}

struct Candidate {
  Point point;
  double score = -inf;
  std::vector<double> part_scores;
};

bool same_point(const Point& a, const Point& b) { return a.x == b.x && a.k == b.k; }

class Search {
 public:
  Search(const Claim& claim, const EngineOptions& options, ClaimResult& result)
      : claim_(claim), info_(claim.info()), options_(options), result_(result), start_(Clock::now()) {
    result_.parts.resize(info_.parts.size());
    best_part_.resize(info_.parts.size());
    for (std::size_t k = 0; k < info_.parts.size(); ++k) {
      result_.parts[k].name = info_.parts[k].name;
      result_.parts[k].kind = info_.parts[k].kind;
      result_.parts[k].max_ratio_double = -inf;
    }
    for (const Part& p : info_.parts) has_at_most_ |= p.kind == PartKind::at_most;
  }

  double elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  /// Evaluates p in double and files it; returns its score (−inf when skipped).
  double consider(const Point& p) {
    Evaluation<double> ev;
    try {
      ev = claim_.evaluate_double(p);
    } catch (const InputError&) {
      ++result_.skipped_points;
      return -inf;
    }
    Candidate c{p, -inf, std::vector<double>(info_.parts.size(), -inf)};
    double growth_score = -inf;
    for (std::size_t k = 0; k < info_.parts.size() && k < ev.size(); ++k) {
      const Side<double>& s = ev[k];
      if (!s.active) continue;
      const PartKind kind = info_.parts[k].kind;
      if (!std::isfinite(s.lhs) || (kind != PartKind::growth && !std::isfinite(s.rhs))) {
        ++result_.skipped_points;
        return -inf;
      }
      double v = 0;
      if (kind == PartKind::at_most) {
        v = ratio_of(s.lhs, s.rhs);
        c.score = std::max(c.score, v);
        result_.parts[k].max_ratio_double = std::max(result_.parts[k].max_ratio_double, v);
      } else if (kind == PartKind::equal) {
        v = relative_error(s.lhs, s.rhs);
      } else {
        v = s.lhs;
        growth_score = std::max(growth_score, v);
      }
      ++result_.parts[k].evaluated;
      c.part_scores[k] = v;
    }
    if (!has_at_most_) c.score = growth_score;
    for (std::size_t k = 0; k < info_.parts.size(); ++k)
      if (c.part_scores[k] > -inf && (!best_part_[k] || c.part_scores[k] > best_part_[k]->part_scores[k]))
        best_part_[k] = c;
    insert_top(c);
    return c.score;
  }

  void run() {
    // 1. Families.
    std::vector<std::string> names;
    for (const std::string& f : info_.families)
      if (options_.families.empty() ||
          std::find(options_.families.begin(), options_.families.end(), f) != options_.families.end())
        names.push_back(f);
    for (const std::string& f : names)
      for (Point& p : claim_.family(f)) {
        p.family = f;
        consider(p);
        ++result_.family_points;
      }
    // 2. Random points (not when the run is restricted to named families).
    if (options_.families.empty()) {
      const std::uint64_t base = splitmix(options_.seed ^ hash_id(info_.id));
      for (long i = 0;; ++i) {
        if (fixed_count_ >= 0 ? i >= fixed_count_
                              : (i >= options_.min_samples && elapsed() >= options_.budget_seconds / 2))
          break;
        Rng rng(splitmix(base + static_cast<std::uint64_t>(i)));
        Point p = claim_.sample(rng);
        p.family = "random";
        consider(p);
        ++result_.random_points;
      }
    }
    // 3. Adversarial climb on the at_most parts.
    if (has_at_most_ && claim_.searchable() && !top_.empty()) climb();
  }

  std::vector<Candidate> candidates() const {
    std::vector<Candidate> out = top_;
    for (const auto& b : best_part_)
      if (b && std::none_of(out.begin(), out.end(),
                            [&](const Candidate& c) { return same_point(c.point, b->point); }))
        out.push_back(*b);
    return out;
  }

 private:
  void insert_top(const Candidate& c) {
    if (c.score == -inf) return;
    for (Candidate& t : top_)
      if (same_point(t.point, c.point)) return;
    top_.push_back(c);
    std::stable_sort(top_.begin(), top_.end(),
                     [](const Candidate& a, const Candidate& b) { return a.score > b.score; });
    if (static_cast<int>(top_.size()) > options_.candidates) top_.pop_back();
  }

  void climb() {
    struct Walker {
      Point point;
      double score;
      double sigma = 0.1;
    };
    std::vector<Walker> walkers;
    for (const Candidate& c : top_)
      if (!c.point.x.empty()) walkers.push_back({c.point, c.score});
    if (walkers.empty()) return;
    Rng rng(splitmix(options_.seed ^ hash_id(info_.id) ^ 0xad5e75a11ULL));
    for (long s = 0;; ++s) {
      if (fixed_count_ >= 0 ? s >= fixed_count_
                            : (s >= options_.min_samples && elapsed() >= options_.budget_seconds))
        break;
      Walker& w = walkers[static_cast<std::size_t>(s) % walkers.size()];
      Point trial = w.point;
      trial.family = "adversarial";
      for (double& v : trial.x) v += w.sigma * (std::abs(v) + 0.05) * rng.normal();
      claim_.repair(trial);
      const double score = consider(trial);
      ++result_.climb_steps;
      if (score > w.score) {
        w.point = trial;
        w.score = score;
        w.sigma = std::min(1.0, w.sigma * 1.5);
      } else {
        w.sigma *= 0.85;
        if (w.sigma < 1e-9) w.sigma = 0.1;  // restart the step size once it has collapsed
      }
    }
  }

  const Claim& claim_;
  const ClaimInfo& info_;
  const EngineOptions& options_;
  ClaimResult& result_;
  Clock::time_point start_;
  /// Random points and climb steps: --samples, else the claim's default; −1 in budget mode.
  long fixed_count_ = options_.samples > 0          ? options_.samples
                      : options_.budget_seconds > 0 ? -1
                                                    : std::max(1L, info_.default_samples);
  bool has_at_most_ = false;
  std::vector<Candidate> top_;
  std::vector<std::optional<Candidate>> best_part_;
};

struct Evaluations {
  bool ok = false;
  Evaluation<mpfr> m;
  Evaluation<interval> i;
};

Evaluations evaluate_at(const Claim& claim, const Point& p, unsigned bits) {
  Evaluations e;
  PrecisionGuard guard(bits);
  try {
    e.m = claim.evaluate_mpfr(p);
    e.i = claim.evaluate_interval(p);
    e.ok = true;
  } catch (const InputError&) {
    e.ok = false;
  }
  return e;
}

Counterexample make_counterexample(const Claim& claim, const Point& p, const Part& part, const Side<mpfr>& m,
                                   const Side<interval>& i) {
  Counterexample c;
  c.point = claim.describe(p);
  c.part = part.name;
  c.lhs_lower = num::lower_text(i.lhs);
  c.lhs_upper = num::upper_text(i.lhs);
  c.rhs_lower = num::lower_text(i.rhs);
  c.rhs_upper = num::upper_text(i.rhs);
  c.ratio = part.kind == PartKind::at_most ? ratio_of(static_cast<double>(m.lhs), static_cast<double>(m.rhs))
                                           : relative_error(m.lhs, m.rhs);
  return c;
}

void write_counterexample(const ClaimResult& r, Counterexample& c, const EngineOptions& options) {
  if (options.out_dir.empty()) return;
  std::error_code ec;  // the non-throwing overload: a folder that cannot be made is bad input, not exit 3
  std::filesystem::create_directories(options.out_dir, ec);
  if (ec)
    throw InputError(options.out_dir.string(), "cannot be created as a folder (--out): " + ec.message());
  const std::filesystem::path file = options.out_dir / (r.id + ".json");
  nlohmann::json j{{"id", r.id},
                   {"part", c.part},
                   {"point", c.point},
                   {"lhs", nlohmann::json::array({c.lhs_lower, c.lhs_upper})},
                   {"rhs", nlohmann::json::array({c.rhs_lower, c.rhs_upper})},
                   {"ratio_estimate", c.ratio},
                   {"certified", c.certified},
                   {"precision_bits", options.precision}};
  io::write_json(file, j);  // atomically: an interrupted run leaves no half-written counterexample
  c.file = file.string();
}

/// What re-evaluating the candidates (and the growth family) found: the evidence for the verdict.
struct Findings {
  std::optional<Counterexample> violation;       // certified violation of an at_most part
  std::optional<Counterexample> identity_break;  // failed identity
  bool suspected = false;                        // uncertified violation beyond the tolerance
  long tight_points = 0, wide_points = 0, uncertified_points = 0;
  bool no_candidates = false;  // the search evaluated no point
  bool growth_ok = false;      // unbounded claims: the growth family passed
};

/// The verdict and what goes with it.
struct Decision {
  Verdict verdict = Verdict::inconclusive;
  bool certified = false;
  std::optional<Counterexample> counterexample;
  std::string note;
};

/// Re-evaluates the at_most part k at a candidate (m, iv: mpfr and interval at p bits); an uncertified excess
/// beyond the tolerance is retried at 2p bits.
void recheck_at_most(const Claim& claim, const Point& point, std::size_t k, const Side<mpfr>& m,
                     const Side<interval>& iv, unsigned p, PartOutcome& o, Findings& f) {
  const Part& part = claim.info().parts[k];
  const double violation_tolerance = std::ldexp(1.0, -static_cast<int>(p) + violation_slack_bits);
  const double ratio = ratio_of(static_cast<double>(m.lhs), static_cast<double>(m.rhs));
  o.max_ratio = std::max(o.max_ratio, ratio);
  const bool holds = upper_bound(iv.lhs) <= lower_bound(iv.rhs);
  const bool broken = lower_bound(iv.lhs) > upper_bound(iv.rhs);
  const interval q = iv.lhs / iv.rhs;
  const double q_hi = lower_bound(iv.rhs) > 0 ? num::upper_double(q) : inf;
  o.certified_ratio_upper = std::max(o.certified_ratio_upper, q_hi);
  if (broken) {
    Counterexample cx = make_counterexample(claim, point, part, m, iv);
    cx.certified = true;
    o.failed = true;
    if (!f.violation || cx.ratio > f.violation->ratio) f.violation = cx;
  } else if (!holds) {
    o.certified = false;
    const double tolerance =
        part.accuracy_bits > 0
            ? std::max(violation_tolerance, std::ldexp(1.0, -part.accuracy_bits + violation_slack_bits))
            : violation_tolerance;
    if (ratio > 1 + tolerance) {
      // Retry at twice the precision before calling it undecided.
      const Evaluations w = evaluate_at(claim, point, 2 * p);
      if (w.ok && lower_bound(w.i[k].lhs) > upper_bound(w.i[k].rhs)) {
        Counterexample cx = make_counterexample(claim, point, part, w.m[k], w.i[k]);
        cx.certified = true;
        o.failed = true;
        if (!f.violation || cx.ratio > f.violation->ratio) f.violation = cx;
      } else {
        f.suspected = true;
        o.failed = true;
      }
    } else if (ratio > 1 - tight_window) {
      ++f.tight_points;
    } else {
      ++f.wide_points;
    }
  }
}

/// Re-evaluates the equal part k at a candidate: m at p bits, e2 the evaluations at 2p bits.
void recheck_equal(const Claim& claim, const Point& point, std::size_t k, const Side<mpfr>& m,
                   const Evaluations& e2, unsigned p, PartOutcome& o, Findings& f) {
  const Part& part = claim.info().parts[k];
  if (!e2.ok || k >= e2.m.size() || !e2.m[k].active) {
    o.certified = false;
    return;
  }
  const double err_p = relative_error(m.lhs, m.rhs);
  double err_2p, certified_defect;
  bool zero_in = true;
  {
    PrecisionGuard guard(2 * p);
    err_2p = relative_error(e2.m[k].lhs, e2.m[k].rhs);
    const interval diff = e2.i[k].lhs - e2.i[k].rhs;
    zero_in = lower_bound(diff) <= 0 && upper_bound(diff) >= 0;
    certified_defect = num::upper_double(abs(diff));
  }
  o.error_p = std::max(o.error_p, err_p);
  o.error_2p = std::max(o.error_2p, err_2p);
  const double tolerance =
      std::ldexp(1.0, static_cast<int>(-part.precision_exponent * 2.0 * p) + part.slack_bits);
  const bool fails = err_2p > tolerance;
  if (part.exact) {
    o.certified_error = std::max(o.certified_error, certified_defect);
    if (!zero_in) {
      o.failed = true;
      Counterexample cx = make_counterexample(claim, point, part, e2.m[k], e2.i[k]);
      cx.certified = true;
      if (!f.identity_break || !f.identity_break->certified || cx.ratio > f.identity_break->ratio)
        f.identity_break = cx;
    }
  } else {
    o.certified = false;
  }
  if (fails && !o.failed) {
    o.failed = true;
    Counterexample cx = make_counterexample(claim, point, part, e2.m[k], e2.i[k]);
    if (!f.identity_break) f.identity_break = cx;
  }
}

/// Re-evaluates every candidate in mpfr and intervals at p bits (identities also at 2p) and completes the
/// part outcomes of the double search.
Findings recheck(const Claim& claim, const std::vector<Candidate>& candidates, unsigned p,
                 std::vector<PartOutcome>& parts) {
  const ClaimInfo& info = claim.info();
  bool has_equal = false;
  for (const Part& part : info.parts) has_equal |= part.kind == PartKind::equal;
  Findings f;
  f.no_candidates = candidates.empty();
  for (PartOutcome& o : parts) {
    o.max_ratio = -inf;
    o.certified = true;
  }
  std::vector<bool> part_seen(info.parts.size(), false);
  for (const Candidate& c : candidates) {
    const Evaluations e = evaluate_at(claim, c.point, p);
    if (!e.ok) {
      ++f.uncertified_points;
      continue;
    }
    Evaluations e2;
    if (has_equal) e2 = evaluate_at(claim, c.point, 2 * p);
    for (std::size_t k = 0; k < info.parts.size(); ++k) {
      if (k >= e.m.size() || !e.m[k].active) continue;
      if (info.parts[k].kind == PartKind::at_most) {
        part_seen[k] = true;
        recheck_at_most(claim, c.point, k, e.m[k], e.i[k], p, parts[k], f);
      } else if (info.parts[k].kind == PartKind::equal) {
        part_seen[k] = true;
        recheck_equal(claim, c.point, k, e.m[k], e2, p, parts[k], f);
      }
    }
  }
  for (std::size_t k = 0; k < info.parts.size(); ++k) {
    PartOutcome& o = parts[k];
    if (info.parts[k].kind == PartKind::growth) {
      o.certified = false;
      continue;
    }
    if (!part_seen[k]) o.certified = false;
    if (o.max_ratio == -inf) o.max_ratio = o.max_ratio_double == -inf ? 0.0 : o.max_ratio_double;
    if (o.max_ratio_double == -inf) o.max_ratio_double = 0.0;
  }
  return f;
}

/// Unbounded claims: evaluates the growth family, fills r.growth, the growth part's certification, the
/// growth max_ratio and the note; returns whether the certified sequence increases past 10^growth_decades.
bool check_growth(const Claim& claim, const EngineOptions& options, ClaimResult& r) {
  const ClaimInfo& info = claim.info();
  std::size_t gk = info.parts.size();
  for (std::size_t k = 0; k < info.parts.size(); ++k)
    if (info.parts[k].kind == PartKind::growth) gk = k;
  const bool family_allowed =
      options.families.empty() || std::find(options.families.begin(), options.families.end(),
                                            info.growth_family) != options.families.end();
  if (gk >= info.parts.size() || !family_allowed) {
    r.note = "growth family '" + info.growth_family + "' not selected";
    return false;
  }
  bool increasing = true;
  double previous_upper = -inf;
  for (Point& pt : claim.family(info.growth_family)) {
    pt.family = info.growth_family;
    const Evaluations e = evaluate_at(claim, pt, options.precision);
    if (!e.ok || gk >= e.i.size() || !e.i[gk].active) continue;
    GrowthStep step{claim.describe(pt), num::lower_double(e.i[gk].lhs), num::upper_double(e.i[gk].lhs)};
    if (!(step.certified_lower > previous_upper)) increasing = false;
    previous_upper = step.certified_upper;
    r.growth.push_back(step);
  }
  int passed = 0;
  for (int decade = 1; decade <= info.growth_decades; ++decade)
    for (const GrowthStep& s : r.growth)
      if (s.certified_lower > std::pow(10.0, decade)) {
        ++passed;
        break;
      }
  const bool growth_ok = increasing && passed == info.growth_decades && !r.growth.empty();
  r.parts[gk].certified = growth_ok;
  if (!r.growth.empty()) r.max_ratio = r.growth.back().certified_lower;
  if (!growth_ok)
    r.note = increasing ? "the growth family did not pass 10^" + std::to_string(info.growth_decades)
                        : "the certified growth sequence is not increasing";
  return growth_ok;
}

/// The verdict from the findings (pure): a certified violation refutes, then a broken identity; no point or
/// an unconfirmed violation is inconclusive; otherwise the claim's kind decides, certified when every part
/// is. `note` is the note so far (kept unless the verdict explains itself).
Decision decide(const ClaimInfo& info, const std::vector<PartOutcome>& parts, const Findings& f, unsigned p,
                std::string note) {
  Decision d;
  d.note = std::move(note);
  bool others_certified = true;
  for (std::size_t k = 0; k < info.parts.size(); ++k)
    if (info.parts[k].kind != PartKind::growth && !parts[k].certified) others_certified = false;
  if (f.violation) {
    d.verdict = Verdict::refuted;
    d.certified = true;
    d.counterexample = f.violation;
  } else if (f.identity_break) {
    d.verdict = Verdict::refuted;
    d.certified = f.identity_break->certified;
    d.counterexample = f.identity_break;
  } else if (f.no_candidates && info.kind != StatementKind::unbounded) {
    d.verdict = Verdict::inconclusive;
    d.certified = false;
    d.note = "no point of the claim's domain was evaluated (families not selected or every point skipped)";
  } else if (f.suspected) {
    d.verdict = Verdict::inconclusive;
    d.certified = false;
    d.note = "a violation seen in mpfr could not be confirmed by interval arithmetic at " +
             std::to_string(2 * p) + " bits";
  } else {
    switch (info.kind) {
      case StatementKind::inequality:
        d.verdict = Verdict::holds;
        break;
      case StatementKind::identity:
        d.verdict = Verdict::identity;
        break;
      case StatementKind::unbounded:
        d.verdict = f.growth_ok ? Verdict::unbounded : Verdict::inconclusive;
        break;
    }
    d.certified = others_certified && (info.kind != StatementKind::unbounded || f.growth_ok) &&
                  f.uncertified_points == 0;
    d.certified = d.certified && f.wide_points == 0;
    if (f.tight_points > 0 && d.note.empty())
      d.note = std::to_string(f.tight_points) +
               " tested point(s) at equality within rounding: not certifiable by interval arithmetic";
    else if (f.wide_points > 0 && d.note.empty())
      d.note =
          std::to_string(f.wide_points) + " tested point(s) with interval enclosures too wide to certify";
    else if (f.uncertified_points > 0 && d.note.empty())
      d.note = std::to_string(f.uncertified_points) + " candidate(s) outside the domain at high precision";
  }
  return d;
}

/// The headline ratio of a bounded or refuted claim (pure): the largest lhs/rhs of the at_most parts, for
/// identities the largest relative error at p bits, at least the counterexample's ratio when refuted.
double summary_ratio(const ClaimInfo& info, const ClaimResult& r) {
  double best = 0;
  bool any = false;
  for (std::size_t k = 0; k < info.parts.size(); ++k) {
    const PartOutcome& o = r.parts[k];
    if (info.kind == StatementKind::identity && info.parts[k].kind == PartKind::equal) {
      best = any ? std::max(best, o.error_p) : o.error_p;
      any = true;
    } else if (info.kind != StatementKind::identity && info.parts[k].kind == PartKind::at_most) {
      best = any ? std::max(best, o.max_ratio) : o.max_ratio;
      any = true;
    }
  }
  if (r.counterexample && r.verdict == Verdict::refuted) best = std::max(best, r.counterexample->ratio);
  return best;
}

}  // namespace

void EngineOptions::validate() const {
  if (!(budget_seconds >= 0) || !std::isfinite(budget_seconds))
    throw InputError("--budget", "must be a finite number of seconds >= 0");
  if (precision < 53 || precision > max_precision_bits / 2)
    throw InputError("--precision", "must lie in [53, " + std::to_string(max_precision_bits / 2) + "] bits");
  if (samples < 0) throw InputError("--samples", "must be >= 0");
  if (min_samples < 1) throw InputError("min_samples", "must be >= 1");
  if (candidates < 1) throw InputError("candidates", "must be >= 1");
}

ClaimResult check_claim(const Claim& claim, const EngineOptions& options) {
  options.validate();
  const ClaimInfo& info = claim.info();
  ClaimResult r;
  r.id = info.id;
  r.expected = info.expected;
  Search search(claim, options, r);
  search.run();

  Findings findings = recheck(claim, search.candidates(), options.precision, r.parts);
  if (info.kind == StatementKind::unbounded) findings.growth_ok = check_growth(claim, options, r);
  Decision d = decide(info, r.parts, findings, options.precision, r.note);
  r.verdict = d.verdict;
  r.certified = d.certified;
  r.counterexample = std::move(d.counterexample);
  r.note = std::move(d.note);
  if (r.counterexample) write_counterexample(r, *r.counterexample, options);
  if (info.kind != StatementKind::unbounded || r.verdict == Verdict::refuted)
    r.max_ratio = summary_ratio(info, r);
  r.seconds = search.elapsed();
  return r;
}

}  // namespace regatta::proofs
