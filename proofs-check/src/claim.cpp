#include <regatta/proofs/claim.hpp>

#include <cmath>
#include <numbers>

namespace regatta::proofs {

std::string to_string(Expected e) {
  switch (e) {
    case Expected::holds:
      return "holds";
    case Expected::refuted:
      return "refuted";
    case Expected::identity:
      return "identity";
    case Expected::unbounded:
      return "unbounded";
  }
  return "?";
}

std::string to_string(Verdict v) {
  switch (v) {
    case Verdict::holds:
      return "holds";
    case Verdict::refuted:
      return "refuted";
    case Verdict::identity:
      return "identity";
    case Verdict::unbounded:
      return "unbounded";
    case Verdict::inconclusive:
      return "inconclusive";
  }
  return "?";
}

Verdict matching_verdict(Expected e) {
  switch (e) {
    case Expected::holds:
      return Verdict::holds;
    case Expected::refuted:
      return Verdict::refuted;
    case Expected::identity:
      return Verdict::identity;
    case Expected::unbounded:
      return Verdict::unbounded;
  }
  return Verdict::inconclusive;
}

double Rng::uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

double Rng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

double Rng::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

long Rng::integer(long lo, long hi) {
  const double span = static_cast<double>(hi - lo + 1);
  long v = lo + static_cast<long>(uniform() * span);
  return v > hi ? hi : v;
}

bool Rng::coin(double p) { return uniform() < p; }

double Rng::corner(double scale) {
  const double r = uniform();
  if (r < 0.1) return 0.0;
  if (r < 0.2) return 1e-6 * scale * normal();
  if (r < 0.85) return scale * normal();
  return 30.0 * scale * normal();
}

nlohmann::json Claim::describe(const Point& p) const {
  return nlohmann::json{{"family", p.family}, {"x", p.x}, {"k", p.k}};
}

}  // namespace regatta::proofs
