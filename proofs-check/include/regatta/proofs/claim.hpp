#pragma once
// One numerically checkable claim of the catalogue (docs/math/claims.md) as an object: its description,
// a corner-biased sampler of parameter points, named near-extremal families, and an evaluator written once
// over the scalar type and instantiated for double (search), mpfr (re-evaluation at --precision bits) and
// interval (certification).
//
// A claim is a list of *parts*, each one relation evaluated at a parameter point:
//   at_most   lhs ≤ rhs                        (an inequality; "holds" claims and refuted conjectures)
//   equal     value = reference                (an identity; the error must shrink with the precision)
//   growth    a quantity q ≥ 0 (lhs; rhs unused) that must pass every threshold 10^k along the growth family
// A part may be inactive at a point (e.g. a bracket valid only for n ≥ 9). The engine (engine.hpp) turns the
// evaluations into a verdict; a claim never decides its own verdict.
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <regatta/core/scalar.hpp>

namespace regatta::proofs {

/// What the catalogue says the check must find.
enum class Expected { holds, refuted, identity, unbounded };
/// What the engine found. `inconclusive`: a violation seen in floating point that intervals could not
/// confirm, or a growth sequence that did not pass its thresholds.
enum class Verdict { holds, refuted, identity, unbounded, inconclusive };
/// What the statement asserts (decides the verdict when nothing fails).
enum class StatementKind { inequality, identity, unbounded };
enum class PartKind { at_most, equal, growth };

std::string to_string(Expected e);
std::string to_string(Verdict v);
/// The verdict that matches an expectation.
Verdict matching_verdict(Expected e);

struct Part {
  std::string name;  ///< short description of the relation, e.g. "‖J‖∞ ≤ 1/2"
  PartKind kind = PartKind::at_most;
  /// equal only: the error of an exact identity evaluated at p bits is about 2^(−α p) (α = 1); a formula
  /// with a discretisation step tied to the precision (central differences with h = 2^(−p/3)) has α < 1.
  double precision_exponent = 1.0;
  /// equal only: bits of error amplification allowed (the condition number of the evaluation, in bits).
  int slack_bits = 32;
  /// equal only: the identity is exact for the given point, so an interval evaluation of value − reference
  /// must contain 0 (false for discretised identities such as central differences).
  bool exact = true;
  /// at_most only: bits to which the point-type evaluation of the sides is accurate (0: the working
  /// precision). Parts computed from double solvers (exact transport, Sinkhorn) are accurate to 53 bits
  /// whatever the precision, and an excess below that accuracy is not a suspected violation.
  int accuracy_bits = 0;
};

/// A parameter point: continuous coordinates (perturbed by the adversarial search, then repaired by the
/// claim) and discrete ones (sizes, switches; never perturbed). Every double is an exact binary number, so
/// the point is the same mathematical input at every precision.
struct Point {
  std::vector<double> x;
  std::vector<long> k;
  std::string family = "random";  ///< "random", "adversarial" or the name of a near-extremal family
};

/// The evaluation of every part at one point, in scalar type S (same order as ClaimInfo::parts).
template <class S>
struct Side {
  S lhs{};  ///< at_most: left side; equal: value; growth: the quantity
  S rhs{};  ///< at_most: right side; equal: reference; growth: unused
  bool active = false;
};
template <class S>
using Evaluation = std::vector<Side<S>>;

struct ClaimInfo {
  std::string id;         ///< stable ID of docs/math/claims.md, e.g. "kim.lemma_phi"
  std::string statement;  ///< plain text
  std::string latex;      ///< the same in LaTeX (inline math, $…$)
  std::string source;     ///< published / derived / quoted / observed (docs/math/README.md#provenance)
  std::vector<std::string> hypotheses;  ///< each one line
  Expected expected = Expected::holds;
  StatementKind kind = StatementKind::inequality;
  std::vector<Part> parts;
  std::vector<std::string> families;  ///< names accepted by Claim::family
  std::string growth_family;          ///< unbounded claims: the family whose points grow (in order)
  int growth_decades = 4;             ///< unbounded claims: thresholds 10^1 … 10^growth_decades
  /// Random points and climb steps of a default run (no --samples, no --budget): fixed, so that every
  /// machine checks the same points; sized to the cost of one evaluation (about a second of search here).
  long default_samples = 64;
  std::string notes;  ///< what is checked and how (one paragraph, for the docs)
  /// What the sides are evaluated at when a solver is involved (a Sinkhorn iterate, a simplex plan, a power
  /// vector, an ODE step, a bisection end) and how the approximation's error enters the certified sides;
  /// empty: every side is a closed form of the point's coordinates (docs/claims.md prints "closed forms").
  std::string evaluated_at;
};

/// Seeded, portable random numbers (raw bits of std::mt19937_64; no implementation-defined distribution).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}
  double uniform();                      ///< [0, 1)
  double uniform(double lo, double hi);  ///< [lo, hi)
  double normal();                       ///< N(0, 1), Box–Muller
  long integer(long lo, long hi);        ///< uniform in [lo, hi]
  bool coin(double p = 0.5);
  /// A corner-biased magnitude: 0, a tiny, a unit-scale or a huge value (docs/math/claims.md: huge logits,
  /// ties,
  /// zero weights), scaled by `scale`.
  double corner(double scale = 1.0);
  std::uint64_t bits() { return engine_(); }

 private:
  std::mt19937_64 engine_;
};

/// A claim of the catalogue. Derive from ClaimBase<Derived> (below), which implements the three evaluate
/// overloads from one member template `template <class S> Evaluation<S> evaluate(const Point&) const`.
class Claim {
 public:
  virtual ~Claim() = default;
  virtual const ClaimInfo& info() const = 0;
  /// A random point, biased toward corners.
  virtual Point sample(Rng& rng) const = 0;
  /// The points of a near-extremal family (deterministic). Unknown names give no points.
  virtual std::vector<Point> family(const std::string& name) const = 0;
  /// Brings a perturbed point back into the claim's domain (clamping, renormalising); default: nothing.
  virtual void repair(Point& p) const { (void)p; }
  /// Whether the adversarial search may perturb the continuous coordinates (false for claims whose points
  /// are discrete, e.g. a sequence length alone).
  virtual bool searchable() const { return true; }
  /// The point as named arrays and numbers, for counterexample files and reports.
  virtual nlohmann::json describe(const Point& p) const;

  /// The parts at a point; entries of an inactive part are unspecified. May throw InputError for points
  /// outside the domain (the engine skips them). mpfr and interval run at the current working precision.
  virtual Evaluation<double> evaluate_double(const Point& p) const = 0;
  virtual Evaluation<mpfr> evaluate_mpfr(const Point& p) const = 0;
  virtual Evaluation<interval> evaluate_interval(const Point& p) const = 0;
};

/// CRTP helper: Derived provides `template <class S> Evaluation<S> evaluate(const Point&) const`.
template <class Derived>
class ClaimBase : public Claim {
 public:
  Evaluation<double> evaluate_double(const Point& p) const final {
    return self().template evaluate<double>(p);
  }
  Evaluation<mpfr> evaluate_mpfr(const Point& p) const final { return self().template evaluate<mpfr>(p); }
  Evaluation<interval> evaluate_interval(const Point& p) const final {
    return self().template evaluate<interval>(p);
  }

 private:
  const Derived& self() const { return static_cast<const Derived&>(*this); }
};

using ClaimPtr = std::unique_ptr<Claim>;

}  // namespace regatta::proofs
